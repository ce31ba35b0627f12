"""Who started each thread, so that a compile on a thread an earlier test left running is
charged to no later test (no torch import).

A compile runs on the thread that called the compiled function. A thread a test started is
that test's while it runs; one still compiling after its test ended (a daemon loop, a
forgotten worker) is named in the summary as the starter's, never charged to the test that
happens to run then. Threads of a ``concurrent.futures`` or ``multiprocessing`` pool run work
that the running test submitted: theirs are the running test's.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterable

from ._torch.events import CompileEvent, qualname
from .results import OutlivedResult

_POOL_WORKERS = (
    (os.path.join("concurrent", "futures", "thread.py"), "_worker"),
    (os.path.join("multiprocessing", "pool.py"), "worker"),
)
BETWEEN = "between tests"


class Threads:
    """The threads alive as each test began, and who started those that outlived a test."""

    def __init__(self) -> None:
        self.starter: weakref.WeakKeyDictionary[threading.Thread, str] = weakref.WeakKeyDictionary()
        self.at_start: frozenset[threading.Thread] = frozenset()  # alive as the test began
        self.running: str | None = None  # the running test's node id
        self.runner: threading.Thread | None = None  # the thread that runs the tests
        self.pending: dict[tuple[str, str, str], int] = {}  # (starter, function, during)

    @staticmethod
    def alive() -> frozenset[threading.Thread]:
        return frozenset(threading.enumerate())

    def begin(self, nodeid: str) -> None:
        self.running = nodeid
        self.runner = threading.current_thread()  # the main thread, unless a runner chose one
        self.at_start = self.alive()

    def started(self, before: Iterable[threading.Thread], who: str) -> None:
        """The threads alive now and not ``before`` were started by ``who``."""
        for thread in self.alive() - frozenset(before):
            self.starter.setdefault(thread, who)

    def end(self) -> None:
        if self.running is not None:
            self.started(self.at_start, self.running)
        self.running = None
        self.at_start = frozenset()

    def leftover(self, event: CompileEvent) -> bool:
        """Whether ``event`` runs on a thread that is not the running test's (counted here,
        to be named in the summary)."""
        thread = threading.current_thread()
        if thread is self.runner or thread is threading.main_thread():
            return False
        who = self.starter.get(thread)
        if self.running is not None:
            if who is None and thread not in self.at_start:
                return False  # started by the running test (or a fixture it set up)
            if _pooled():
                return False  # a pool's worker runs what the running test submitted
        if who is None:
            if self.running is None:
                return False  # between tests: nobody's, and no test's to charge
            who = "no test (before the first gated test ran)"
        key = (who, event.label or qualname(event.function), self.running or BETWEEN)
        self.pending[key] = self.pending.get(key, 0) + 1
        return True

    def take(self) -> list[OutlivedResult]:
        """The compiles counted since the last call, to travel on a report."""
        taken: list[OutlivedResult] = [
            {"started_by": who, "function": fn, "during": during, "compiles": n}
            for (who, fn, during), n in self.pending.items()
        ]
        self.pending.clear()
        return taken


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
