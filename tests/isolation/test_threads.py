"""Threads: a compile on another thread is charged to the test (or fixture) that started it;
one an earlier test left compiling is charged to no later test."""

from __future__ import annotations

import pytest
from snippets import (
    DOUBLE,
    REVERSE_CONFTEST,
    keeps_entries,
    read_json,
)

from pytest_recompile.model.names import PREFIX

SHARED = """
@torch.compile(backend="eager")
def shared(x):
    return x * 2
"""


def test_a_thread_an_earlier_test_left_compiling_is_charged_to_no_later_test(run) -> None:
    result = run(
        DOUBLE
        + """
import threading

started = threading.Event()
go = threading.Event()
done = threading.Event()

def test_starts_a_thread():
    def loop():
        started.set()
        go.wait(10)
        for n in range(2, 6):
            double(torch.ones(n))
        done.set()
    threading.Thread(target=loop, daemon=True).start()
    started.wait(10)

def test_later():
    go.set()
    assert done.wait(10)
""",
        "--recompile-budget",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(passed=2)
    assert [t["recompiles"] for t in read_json("r.json")["tests"]] == [0, 0]
    result.stdout.fnmatch_lines(
        [
            "thread: 2 compiles of double on a thread that test_it.py::test_starts_a_thread "
            "started, while test_it.py::test_later ran: charged to no test*"
        ]
    )


def test_a_thread_pool_runs_the_running_tests_work(run) -> None:
    result = run(
        DOUBLE
        + """
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(max_workers=1)

def test_first_starts_the_pool():
    pool.submit(double, torch.ones(2)).result()

def test_second_submits_a_recompile():
    pool.submit(double, torch.ones(3)).result()
    pool.submit(double, torch.ones(3, 3)).result()
""",
        "--recompile-budget",
        "-W",
        "ignore::pytest.PytestUnhandledThreadExceptionWarning",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_second_submits_a_recompile*1 recompile of double*"])


def test_a_live_fixtures_worker_thread_compiles_for_the_running_test(run) -> None:
    """A module fixture's server thread compiles what the tests send it: while the fixture is
    live, those compiles are the running test's."""
    result = run(
        DOUBLE
        + """
import queue
import threading

@pytest.fixture(scope="module")
def server():
    requests, replies = queue.Queue(), queue.Queue()

    def serve():
        while (x := requests.get()) is not None:
            replies.put(double(x))

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    yield lambda x: (requests.put(x), replies.get())[1]
    requests.put(None)
    worker.join()

def test_first(server):
    server(torch.ones(2))

def test_second_recompiles(server):
    server(torch.ones(3))
    server(torch.ones(3, 3))
""",
        "--recompile-budget",
        "-W",
        "ignore::pytest.PytestUnhandledThreadExceptionWarning",
        "--recompile-mode=at-end",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_second_recompiles: 1 recompile of double*"])
    assert "thread:" not in result.stdout.str()


def test_recompile_on_another_thread_names_the_users_frame(run) -> None:
    result = run(
        SHARED
        + """
from concurrent.futures import ThreadPoolExecutor

def test_thread():
    with ThreadPoolExecutor(1) as pool:
        pool.submit(shared, torch.ones(2)).result()
        pool.submit(shared, torch.ones(2, 2)).result()
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["  fail-fast: stopped at test_it.py:* in test_thread, before that recompile ran"]
    )


def test_recompile_on_another_thread_still_fails_the_test(run) -> None:
    result = run(
        DOUBLE
        + """
import threading

def test_threaded():
    double(torch.ones(2))
    worker = threading.Thread(target=double, args=(torch.ones(3, 3),))
    worker.start()
    worker.join()
""",
        "--recompile-budget",
        "-W",
        "ignore::pytest.PytestUnhandledThreadExceptionWarning",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{PREFIX} 1 recompile*, budget 0 (--recompile-budget=0)"])


REGION_ON_A_THREAD = """
import threading

def shift(x):
    return x + 1

plain = torch.compile(shift, backend="eager")
iso = torch.compile(shift, backend="eager", isolate_recompiles=True)

def on_thread(fn, x):
    found = []
    worker = threading.Thread(target=lambda: found.append(fn(x)))
    worker.start()
    worker.join()
    assert found

@pytest.fixture(scope="module")
def warm():
    plain(torch.ones(4))  # an entry outside any region
    iso(torch.ones(4))  # answered by it: torch's lookup falls back to entries outside regions

def test_warm_shapes_on_a_thread(warm):
    on_thread(iso, torch.ones(4))
    on_thread(plain, torch.ones(4))

def test_new_shape_in_the_region_on_a_thread(warm):
    on_thread(iso, torch.ones(8))

def test_new_shape_outside_the_region_on_a_thread(warm):
    on_thread(plain, torch.ones(8))

def test_region_entered_on_the_main_thread(warm):
    iso(torch.ones(4))
    on_thread(plain, torch.ones(4))
"""


@keeps_entries
def test_an_isolated_region_called_on_a_worker_thread(pytester, run) -> None:
    """torch 2.15 keeps the ``isolate_recompiles`` region per thread (a worker does not
    inherit the region of whoever started it; 2.13 and 2.14 keep one per process). Counted
    as alone (checked with the plugin off), in either order: a kept entry outside any region
    answers a region's calls (torch's lookup falls back to it) and is not counted toward the
    region's limit, so the region's first compile on a worker is no recompile; a new shape
    outside the region recompiles once."""
    import torch

    try:
        torch.compile(lambda x: x, backend="eager", isolate_recompiles=True)
    except TypeError:
        pytest.skip("this torch has no isolate_recompiles")
    pytester.makeconftest(REVERSE_CONFTEST)
    counts = []
    for order in ([], ["--reverse-order"]):
        result = run(
            REGION_ON_A_THREAD, "--recompile-budget=1", "--recompile-report=r.json", *order
        )
        result.assert_outcomes(passed=4)
        counts.append({t["nodeid"]: t["recompiles"] for t in read_json("r.json")["tests"]})
    forward, reverse = counts
    assert forward == reverse
    name = "test_it.py::test_"
    assert forward == {
        f"{name}warm_shapes_on_a_thread": 0,
        f"{name}new_shape_in_the_region_on_a_thread": 0,
        f"{name}new_shape_outside_the_region_on_a_thread": 1,
        f"{name}region_entered_on_the_main_thread": 0,
    }
