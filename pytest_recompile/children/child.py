"""Recording in a child process of a gated test (the parent's side: :mod:`.parent`).

A Python child started while the gate is on runs the spool's ``sitecustomize``, which waits,
without importing anything, until the child imports ``torch._dynamo``; then :func:`start`
puts a :class:`ChildRecorder` on torch's compile hook. A forked child inherits the parent's hook
instead: :func:`after_fork` drops it and starts its own recorder. The recorder asks the spool
which test (or wider fixture) owns the compile, records it with the same tracker the gate
uses, judges it against that test's budget (the budget applies to each process), refuses a
compile over budget in fail-fast mode with the gate's message, and appends one JSON line per
change to its own file: what it recorded survives however the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
from typing import Any

from ..model.names import SPOOL_ENV, SPOOL_OWNER
from . import board

_RECORDER: list[ChildRecorder] = []  # this process's recorder, once torch._dynamo is imported
_FORK_HOOK: list[bool] = []


def start(spool: str) -> None:
    """Record this process's compiles into ``spool`` (torch._dynamo is imported)."""
    if not _RECORDER:
        _RECORDER.append(ChildRecorder(spool))
    watch_forks()


def watch_forks() -> None:
    """Once per process: a fork of it runs :func:`after_fork` (the gated pytest process, and
    a recording child, both call this)."""
    if not _FORK_HOOK and hasattr(os, "register_at_fork"):  # not on Windows
        _FORK_HOOK.append(True)
        os.register_at_fork(after_in_child=after_fork)


def after_fork() -> None:
    """In a forked child: the parent's hooks and records stay the parent's; record afresh
    while the session's spool exists (else record nothing: the gate's hooks are forgotten)."""
    from .._torch import hooks

    hooks.forget_compile_hooks()
    _RECORDER.clear()
    spool = os.environ.get(SPOOL_ENV)
    if spool and os.path.isdir(spool):
        try:
            _RECORDER.append(ChildRecorder(spool))
        except Exception as exc:  # never the child's error
            _say(f"recording off in this child: {type(exc).__name__}: {exc}")


def process_rank() -> int | None:
    """The rank of this process: the initialized process group's, else RANK / LOCAL_RANK."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _say(text: str) -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write(f"pytest-recompile (pid {os.getpid()}): {text}\n")


def _command() -> str:
    """How the process came to be: a multiprocessing name, else its command line."""
    mp = sys.modules.get("multiprocessing")
    name = mp.current_process().name if mp is not None else "MainProcess"
    if name != "MainProcess":
        return str(name)
    first = sys.argv[0] if sys.argv else ""
    if first in ("-c", "-m", ""):  # python -c CODE: argv[0] is "-c"
        return f"python {first}".strip()
    return " ".join([os.path.basename(first), *sys.argv[1:2]])


class ChildRecorder:
    """One process's compiles, per owner (the test or wider fixture running in the parent)."""

    def __init__(self, spool: str) -> None:
        from .._torch import hooks, instruments

        self.spool = spool
        self.pid = os.getpid()  # a fork inherits this object's exit handler: not its to run
        self.path = os.path.join(spool, f"p{os.getpid()}-{os.urandom(3).hex()}.jsonl")
        self.fd: int | None = None
        self.trackers: dict[str, Any] = {}  # owner token -> RecompileTracker
        self.owners: dict[str, dict[str, Any]] = {}  # owner token -> what the parent said
        self.token: str | None = None
        self.rank: int | None = None
        self.stopped: set[str] = set()  # owner tokens fail-fast refused a compile for
        self.faulted = False  # an internal error was told already
        self.lock = threading.RLock()
        self.remove = hooks.install_compile_hook(self.on_compile)
        self.callbacks = instruments.block_callbacks(self.on_end)
        atexit.register(self.at_exit)
        # A multiprocessing child started by fork leaves through os._exit: no atexit, but its
        # finalizers run, and its last compile's guard tree is read there (a second call is a
        # no-op). Its start clears the finalizers the fork copied, then runs the after-fork
        # hooks: the finalizer is registered from one.
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.at_exit, exitpriority=10)
        multiprocessing.util.register_after_fork(self, ChildRecorder._finalize_at_exit)

    # -- owner ----------------------------------------------------------------------------------

    def _owner(self) -> dict[str, Any] | None:
        """What the parent runs now (spool's owner file), None between gated tests."""
        raw = board.read(os.path.join(self.spool, SPOOL_OWNER))
        if raw is None:
            return None
        token, _, rest = raw.partition(b"\n")
        if not token:
            return None
        key = token.decode()
        owner = self.owners.get(key)
        if owner is None:
            from ..model.budget import Budget

            owner = self.owners[key] = json.loads(rest)
            owner["token"] = key
            if owner["budget"] is not None:
                owner["budget"] = Budget.from_json(owner["budget"])
        return owner

    def _tracker(self, owner: dict[str, Any]) -> Any:
        """The tracker of ``owner``: a wider fixture's set-up pauses the test's tracker; a
        new test closes the trackers of the tests before it."""
        from ..recording.tracker import RecompileTracker

        token = owner["token"]
        if token == self.token:
            return self.trackers[token]
        before = self.trackers.get(self.token or "")
        if before is not None:
            before.pause()
        if owner["kind"] == "test":
            for old in [t for t in self.trackers if t != token]:
                self._close(old, "closed")
        tracker = self.trackers.get(token)
        if tracker is None:
            tracker = RecompileTracker(
                owner["budget"], mode=owner["mode"], reset=False, warm_start=True, listen=False
            )
            tracker.stop_at_breaks = False  # fullgraph: judged from the breaks it records
            self.trackers[token] = tracker.start()
        else:
            tracker.resume()
        self.token = token
        return tracker

    # -- events ---------------------------------------------------------------------------------

    def on_compile(self, event: Any) -> None:
        from ..recording.errors import RecompileBudgetExceeded

        try:
            owner = self._owner()
            if owner is None:
                return
            with self.lock:
                tracker = self._tracker(owner)
                try:
                    tracker.on_compile(event)
                except RecompileBudgetExceeded:
                    self.stopped.add(owner["token"])
                    self._write(owner["token"], "stopped")
                    raise
                self._write(owner["token"], "compiling")
        except RecompileBudgetExceeded:
            raise
        except Exception as exc:
            self._fault("on_compile", exc)

    def on_end(self) -> None:
        """A compile finished: what was recorded up to it is complete."""
        if os.getpid() != self.pid:
            return
        try:
            with self.lock:
                if self.token is not None and self.token in self.trackers:
                    self._write(self.token, "compiled")
        except Exception as exc:
            self._fault("on_end", exc)

    def _fault(self, where: str, exc: Exception) -> None:
        """An internal error is never the child's: told to the parent (and on stderr, if
        even that fails), once per process."""
        if self.faulted:
            return
        self.faulted = True
        text = f"internal error in a child's {where}: {type(exc).__name__}: {exc}; it went on"
        try:
            self._append({"token": self.token or "", "pid": os.getpid(), "fault": text})
        except Exception:
            _say(text)

    def _close(self, token: str, state: str) -> None:
        tracker = self.trackers.pop(token)
        tracker.stop()
        self._write(token, state, tracker=tracker)
        if self.token == token:
            self.token = None

    def _finalize_at_exit(self) -> None:
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.at_exit, exitpriority=10)

    def at_exit(self) -> None:
        if os.getpid() != self.pid:
            return
        with self.lock:
            for token in list(self.trackers):
                try:
                    self._close(token, "exited")
                except Exception as exc:
                    _say(f"could not write its last record: {type(exc).__name__}: {exc}")

    def _rank(self) -> int | None:
        """The rank, as last known (a process group destroyed before exit keeps it)."""
        rank = process_rank()
        if rank is not None:
            self.rank = rank
        return self.rank

    # -- records --------------------------------------------------------------------------------

    def _write(self, token: str, state: str, tracker: Any = None) -> None:
        """Append this owner's records as they are now, data only (the parent words them):
        one line, one write."""
        from ..recording.freeze import result_for_test

        tracker = tracker or self.trackers[token]
        owner = self.owners[token]
        records = tracker.records
        found = [v for v in tracker.violations() if v.kind != "unknown_function"]
        budget = owner["budget"]
        line = {
            "token": token,
            "pid": os.getpid(),
            "rank": self._rank(),
            "command": _command(),
            "state": state,
            "result": result_for_test(
                records,
                budget,
                found,
                tracker.graph_breaks,
                cudagraph_recordings=tracker.cudagraph_recordings,
                isolation="process",
            ),
            "stopped": token in self.stopped,
        }
        self._append(line)

    def _append(self, line: dict[str, Any]) -> None:
        """One line, one write: a reader never sees half a line but the last one."""
        data = (json.dumps(line, default=str) + "\n").encode()
        if self.fd is None:
            board.mark_child(os.path.join(self.spool, SPOOL_OWNER))
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(self.fd, data)
