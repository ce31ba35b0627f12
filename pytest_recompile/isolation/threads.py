"""Who started each thread, so that a compile on a thread an earlier test left running is
charged to no later test (no torch import).

A compile runs on the thread that called the compiled function. A thread a test started is
that test's while it runs; one still compiling after its test ended (a daemon loop, a
forgotten worker) is named in the summary as the starter's, never charged to the test that
happens to run then. A thread a wider fixture started serves the tests that use the fixture
while it is live: its compiles are the running test's until the fixture is torn down.
Threads that run what the running test hands them (a ``concurrent.futures``,
``multiprocessing`` or anyio worker; a thread Python did not start, such as autograd's device
threads) are the running test's.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterable

from .._torch.events import CompileEvent, qualname
from ..model.names import BETWEEN
from ..model.results import OutlivedResult

_POOL_WORKERS = (
    (os.path.join("concurrent", "futures", "thread.py"), "_worker"),
    (os.path.join("multiprocessing", "pool.py"), "worker"),
    (os.path.join("anyio", "_backends", "_asyncio.py"), "run"),  # anyio's WorkerThread
)


class Threads:
    """The threads alive as each test began, and who started those that outlived a test."""

    def __init__(self) -> None:
        # threads that outlived the test or fixture that started them -> who that was
        self.starter: weakref.WeakKeyDictionary[threading.Thread, str] = weakref.WeakKeyDictionary()
        # threads of live wider fixtures -> the fixture (the running test's while it is live)
        self.serving: weakref.WeakKeyDictionary[threading.Thread, str] = weakref.WeakKeyDictionary()
        self.at_start: frozenset[threading.Thread] = frozenset()  # alive as the test began
        self.running: str | None = None  # the running test's node id
        self.runner: threading.Thread | None = None  # the thread that runs the tests
        self.pending: dict[tuple[str, str, str], int] = {}  # (starter, function, during)
        self._lock = threading.Lock()  # leftover threads count while a report takes them

    @staticmethod
    def alive() -> frozenset[threading.Thread]:
        return frozenset(threading.enumerate())

    def begin(self, nodeid: str) -> None:
        self.running = nodeid
        self.runner = threading.current_thread()  # the main thread, unless a runner chose one
        self.at_start = self.alive()

    def fixture_started(self, before: Iterable[threading.Thread], fixture: str) -> None:
        """The threads alive now and not ``before`` were started by a wider fixture's set-up."""
        for thread in self.alive() - frozenset(before):
            self.serving.setdefault(thread, fixture)

    def fixture_ended(self, fixture: str) -> None:
        """The fixture was torn down: its threads that still run outlived it."""
        for thread, owner in list(self.serving.items()):
            if owner == fixture:
                del self.serving[thread]
                if thread.is_alive():
                    self.starter.setdefault(thread, fixture)

    def end(self) -> None:
        if self.running is not None:
            for thread in self.alive() - self.at_start:
                if thread not in self.serving:
                    self.starter.setdefault(thread, self.running)
        self.running = None
        self.at_start = frozenset()

    def leftover(self, event: CompileEvent) -> bool:
        """Whether ``event`` runs on a thread that is not the running test's (counted here,
        to be named in the summary)."""
        thread = threading.current_thread()
        if thread is self.runner or thread is threading.main_thread():
            return False
        if thread in self.serving or isinstance(thread, threading._DummyThread):
            return False  # a live fixture's thread; a thread Python did not start
        who = self.starter.get(thread)
        if self.running is not None:
            if who is None and thread not in self.at_start:
                return False  # started by the running test
            if _pooled():
                return False  # a pool's worker runs what the running test submitted
        if who is None:
            if self.running is None:
                return False  # between tests: nobody's, and no test's to charge
            who = "no test (before the first gated test ran)"
        key = (who, event.label or qualname(event.function), self.running or BETWEEN)
        with self._lock:
            self.pending[key] = self.pending.get(key, 0) + 1
        return True

    def take(self) -> list[OutlivedResult]:
        """The compiles counted since the last call, to travel on a report."""
        with self._lock:
            pending, self.pending = self.pending, {}
        return [
            {"started_by": who, "function": fn, "during": during, "compiles": n}
            for (who, fn, during), n in pending.items()
        ]


def _pooled() -> bool:
    """Whether this thread is a pool's worker (it runs what its submitter gave it)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if any(
            code.co_name == name and code.co_filename.endswith(path) for path, name in _POOL_WORKERS
        ):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False
