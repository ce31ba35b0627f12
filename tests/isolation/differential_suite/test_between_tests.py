"""Compiles made between two tests (docs/isolation.md): an object pytest frees after a test's
teardown whose ``__del__`` compiles, a ``weakref.finalize`` callback, and a thread the earlier
test left running that compiles while pytest moves to the next test. Each compile is the
earlier test's: the later test, calling at another dtype, makes a first compile, as alone."""

import threading
import weakref

import pytest
import torch


@torch.compile(backend="eager")
def by_del(x):
    return x * 2


class CompilesOnDel:
    def __del__(self):
        by_del(torch.ones(2, dtype=torch.float64))


@pytest.fixture
def leaves_del():
    return CompilesOnDel()  # freed after the teardown, as pytest drops the test's arguments


def test_del_compiles_after_the_teardown(leaves_del):
    pass


def test_del_other_dtype():
    by_del(torch.ones(2))


@torch.compile(backend="eager")
def by_finalizer(x):
    return x + 1


class Plain:
    pass


@pytest.fixture
def finalized():
    value = Plain()
    weakref.finalize(value, by_finalizer, torch.ones(2, dtype=torch.float64))
    return value


def test_finalizer_compiles_after_the_teardown(finalized):
    pass


def test_finalizer_other_dtype():
    by_finalizer(torch.ones(2))


@torch.compile(backend="eager")
def by_thread(x):
    return x - 1


class ReleasesThread:
    """Lets the thread compile once pytest frees it, and waits for it: the thread's compile
    lands between the two tests every time."""

    def __init__(self, go, thread):
        self.go, self.thread = go, thread

    def __del__(self):
        self.go.set()
        self.thread.join()


@pytest.fixture
def thread_left_running():
    go = threading.Event()

    def work():
        go.wait()
        by_thread(torch.ones(2, dtype=torch.float64))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return ReleasesThread(go, thread)


def test_thread_compiles_between_tests(thread_left_running):
    pass


def test_thread_other_dtype():
    by_thread(torch.ones(2))
