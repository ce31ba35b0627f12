"""Child processes of gated tests: the environment contract, and the parent's reading of
the records children leave (the child's side: :mod:`.child`).

The contract, while a gated session runs (``--recompile-processes=on``, the default):

- ``PYTEST_RECOMPILE_SPOOL`` names a private directory (mode 0700) of the session;
- ``PYTHONPATH`` starts with the plugin's ``_startup`` directory, whose ``sitecustomize``
  starts recording in a Python child once it imports ``torch._dynamo`` (and then runs the
  ``sitecustomize`` it shadows);
- the spool's ``owner`` file names the test or wider fixture running now, with its rules;
  a long-lived worker reads it at each compile, so each compile goes to whoever runs then;
- a forked child drops the parent's hook and records under its own pid (``os.register_at_fork``);
- each recording process appends one JSON line per change to its own file in the spool.

The session restores ``PYTHONPATH`` and removes the spool when it ends; killed, it leaves
only the spool directory under the system's temporary directory, and nothing in the user's
environment or site-packages.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from typing import Any

from ..model.budget import Budget
from ..model.faults import Faults
from ..model.names import SHADOWED_ENV, SPOOL_ENV, SPOOL_OWNER
from ..model.results import ProcessResult
from . import board

STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")


class Spool:
    """The session's side of the contract: the environment, the owner file, the records."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="pytest-recompile-")
        self._environ: dict[str, str | None] = {}
        self._offsets: dict[str, int] = {}
        self._tails: dict[str, bytes] = {}  # a line still being written
        self._torn: set[str] = set()
        self._last: dict[tuple[str, str], dict[str, Any]] = {}  # (file, token) -> last line
        self._count = 0
        self._owners: dict[str, bytes] = {}  # token -> the owner, as JSON
        self.faults: list[str] = []  # internal errors children told (taken by the gate)
        self._board = board.Board(os.path.join(self.root, SPOOL_OWNER))
        self._showing: str | None = None  # the token the board names now
        for name, value in (
            (SPOOL_ENV, self.root),
            ("PYTHONPATH", self._pythonpath()),
            (SHADOWED_ENV, f"{sys.prefix}|{_own_sitecustomize()}"),
        ):
            self._environ[name] = os.environ.get(name)
            os.environ[name] = value

    @staticmethod
    def _pythonpath() -> str:
        old = os.environ.get("PYTHONPATH")
        return STARTUP if not old else STARTUP + os.pathsep + old

    def close(self) -> None:
        for name, value in self._environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._environ.clear()
        self._board.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the owner ------------------------------------------------------------------------------

    def announce(self, kind: str, name: str, budget: Budget | None, mode: str) -> str:
        """Name the test or wider fixture whose compiles children make from now on."""
        self._count += 1
        token = f"{kind[0]}{self._count}"
        rules = budget.json_text if budget is not None else "null"
        owner = json.dumps({"kind": kind, "name": name, "mode": mode})
        self._owners[token] = f'{owner[:-1]}, "budget": {rules}}}'.encode()
        self.resume(token)
        return token

    def resume(self, token: str | None) -> None:
        """Hand children's compiles back to ``token`` (None: to nobody)."""
        if token == self._showing:
            return
        self._showing = token
        self._board.write(b"\n" if token is None else token.encode() + b"\n" + self._owners[token])

    def silence(self) -> None:
        """No gated test runs: children record nothing."""
        self.resume(None)

    # -- the records ----------------------------------------------------------------------------

    def recorded(self) -> bool:
        """Whether a child has recorded (or is about to record) anything yet: until then,
        there is nothing to read."""
        return self._board.children()

    def _read(self) -> None:
        """Read what every child appended since the last read."""
        if not self.recorded():
            return
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            name = entry.name
            if not name.endswith(".jsonl") or entry.stat().st_size == self._offsets.get(name):
                continue  # not a record, or nothing new since the last read
            with open(entry.path, "rb") as f:
                f.seek(self._offsets.get(name, 0))
                data = self._tails.pop(name, b"") + f.read()
                self._offsets[name] = f.tell()
            *lines, tail = data.split(b"\n")
            if tail:
                self._tails[name] = tail
            for raw in lines:
                try:
                    line = json.loads(raw)
                except ValueError:
                    self._torn.add(name)
                    continue
                if "fault" in line:
                    self.faults.append(f"pid {line['pid']}: {line['fault']}")
                else:
                    self._last[(name, line["token"])] = line

    def processes(self, tokens: Iterable[str]) -> list[ProcessResult]:
        """One entry per child process that compiled for these owners (JSON-ready)."""
        self._read()
        wanted = set(tokens)
        found = []
        for (name, token), line in self._last.items():
            if token not in wanted:
                continue
            alive = _alive(int(line["pid"]))
            problem = None
            if name in self._torn or (name in self._tails and not alive):
                problem = "a record cut short"
            elif line["state"] == "compiling" and not alive:
                problem = "it ended while compiling"
            found.append(process_entry(line, problem, alive))
        return sorted(found, key=lambda p: (p["rank"] is None, p["rank"] or 0, p["pid"]))


def _own_sitecustomize() -> str:
    """The sitecustomize this interpreter loaded ("" if none): the one the start-up hook
    shadows in a child of the same interpreter, which then need not look for it again."""
    module = sys.modules.get("sitecustomize")
    return str(getattr(module, "__file__", None) or "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def process_entry(line: dict[str, Any], problem: str | None, alive: bool) -> ProcessResult:
    """A child's last record for one owner, as the test's report carries it. ``ended``:
    ``exited`` (its exit handlers ran), ``running``, or ``no exit record`` (``os._exit``, a
    signal, or a forked worker that multiprocessing ends so)."""
    result = line["result"]
    ended = "running" if alive else "no exit record"
    return {
        "pid": line["pid"],
        "rank": line["rank"],
        "command": line["command"],
        "ended": "exited" if line["state"] == "exited" else ended,
        "complete": problem is None,
        "problem": problem,
        "recompiles": result["recompiles"],
        "compile_seconds": result["compile_seconds"],
        "recompile_seconds": result["recompile_seconds"],
        "violations": result["violations"],
        "limit_hit": result["limit_hit"],
        "functions": result["functions"],
        "graph_breaks": result["graph_breaks"],
        "stopped": line["stopped"],
    }


class Children:
    """The gate's side of its tests' child processes, each step contained: whose compiles
    they make from now on, and the records they left (nothing while none are recorded)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.spool: Spool | None = None

    def open(self) -> None:
        self.spool = Spool()

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    def announce(
        self, kind: str, name: str, budget: Budget | None = None, mode: str = "report-only"
    ) -> str | None:
        """Children's compiles go to this test or wider fixture from now on: its token."""
        if self.spool is None:
            return None
        return self.faults.call(self.spool.announce, kind, name, budget, mode)

    def resume(self, token: str | None) -> None:
        """Children's compiles go back to ``token`` (None: to nobody)."""
        if self.spool is not None:
            self.faults.call(self.spool.resume, token)

    def silence(self) -> None:
        """No test or fixture owns children's compiles now."""
        self.resume(None)

    def records(self, tokens: list[str | None]) -> list[ProcessResult]:
        """The records children left for these owners."""
        if self.spool is None or not any(tokens) or not self.spool.recorded():
            return []
        found = self.faults.call(self.spool.processes, [t for t in tokens if t])
        for fault in self.spool.faults:
            self.faults.add(fault)
        self.spool.faults.clear()
        return found or []
