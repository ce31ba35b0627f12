"""``--recompile-trace=DIR``: torch's structured trace of each gated test, kept only for the
tests that break the gate, one folder per test, named in its failure message.

Registered beside the gate when the option is set. A gated test's phases (set-up, call,
teardown) write torch's structured trace to a scratch file of this process; after the
teardown the file goes to ``DIR/<test>/`` if the gate's verdict found a broken rule (a
fail-fast stop included), with tlparse's HTML beside it where ``tlparse`` is on PATH, and is
deleted otherwise. Under pytest-xdist each worker keeps its own tests' folders. Every step
is contained: a failure of the plugin's own is named once and never becomes the test's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

from ._torch import trace
from .model.faults import Faults
from .model.names import PREFIX, relative
from .settings import BUDGET_KEY, RUN_KEY
from .warning_types import RecompileTraceUnread, warn_at

TRACE_FILE = "torch_trace.log"  # the kept trace, in the test's folder
TLPARSE_DIR = "tlparse"  # tlparse's HTML, beside it
TLPARSE_SECONDS = 120.0
TRACE_LINE = "trace: {folder}  (read it with: tlparse {file})"
MAX_NAME = 120  # a longer node id is cut, and a hash of the whole one added


@dataclass
class Traced:
    """One gated test's capture, and the folder it is kept in if the test breaks the gate."""

    capture: trace.Capture
    folder: str
    shown: str  # the folder as messages show it (relative to rootdir when under it)
    kept: bool = False


TRACE_KEY: pytest.StashKey[Traced] = pytest.StashKey()


def folder_name(nodeid: str) -> str:
    """A node id as one folder name: what is not a letter, digit, ``.`` or ``-`` becomes ``_``."""
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", nodeid).strip("_.") or "test"
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
        name = f"{name[:MAX_NAME]}-{digest}"
    return name


def broke_the_gate(item: pytest.Item) -> bool:
    """Whether the gate's verdict on the test, as it stands, found a broken rule."""
    run = item.stash.get(RUN_KEY, None)
    verdict = run.verdict if run is not None else None
    if verdict is None:
        return False
    return bool(verdict.found) or verdict.stopped_at is not None or verdict.refused is not None


class TraceKeeper:
    """The hooks of ``--recompile-trace``; each hands off to a contained step."""

    def __init__(self, directory: str, config: pytest.Config, faults: Faults) -> None:
        self.directory = directory
        self.root = str(config.rootpath)
        self.faults = faults
        self.scratch: str | None = None  # this process's capture files, made on first use
        self.started = 0
        self.live: trace.Capture | None = None  # the running test's
        self.tlparse = find_tlparse()
        self.told = False  # a failure of tlparse is named once

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        if item.stash.get(BUDGET_KEY, None) is not None:
            self.faults.call(self.begin, item)
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield)
        finally:  # outside the gate's teardown: its last judgement is made
            traced = item.stash.get(TRACE_KEY, None)
            if traced is not None:
                self.faults.call(self.end, item, traced)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        traced = item.stash.get(TRACE_KEY, None)
        if traced is not None:
            self.faults.call(self.annotate, item, call.when, traced, report)
        return report

    def pytest_unconfigure(self) -> None:
        if self.live is not None:  # a run cut short mid-test
            self.live.stop()
            self.live = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    # -- steps ----------------------------------------------------------------------------------

    def begin(self, item: pytest.Item) -> None:
        """Before the test's set-up: its capture starts."""
        problem = trace.missing()
        if problem is not None:
            self.faults.add(f"--recompile-trace: this torch lacks {problem}; no trace is kept")
            return
        if self.scratch is None:
            self.scratch = tempfile.mkdtemp(prefix="pytest-recompile-trace-")
        self.started += 1
        folder = os.path.join(self.directory, folder_name(item.nodeid))
        capture = trace.start(os.path.join(self.scratch, f"{self.started}.log"))
        self.live = capture
        item.stash[TRACE_KEY] = Traced(capture, folder, relative(folder, self.root))

    def end(self, item: pytest.Item, traced: Traced) -> None:
        """After the test's teardown: keep the trace if the test broke the gate, else drop it
        (and what an earlier run kept for the test)."""
        capture, self.live = traced.capture, None
        capture.stop()
        if broke_the_gate(item) and capture.wrote:
            self.keep(item, traced)
            return
        if capture.wrote:
            os.remove(capture.path)
        if os.path.exists(os.path.join(traced.folder, TRACE_FILE)):
            shutil.rmtree(traced.folder)

    def keep(self, item: pytest.Item, traced: Traced) -> None:
        """The trace into the test's folder, after torch's string table; tlparse's HTML
        beside it, where tlparse is installed."""
        if os.path.isdir(traced.folder):
            shutil.rmtree(traced.folder)  # an earlier run's
        os.makedirs(traced.folder)
        target = os.path.join(traced.folder, TRACE_FILE)
        with open(target, "w", encoding="utf-8") as out:
            out.write(trace.header())
            with open(traced.capture.path, encoding="utf-8") as captured:
                shutil.copyfileobj(captured, out)
        os.remove(traced.capture.path)
        traced.kept = True
        if self.tlparse is not None:
            self.read(self.tlparse, target, traced, item)

    def read(self, tlparse: str, target: str, traced: Traced, item: pytest.Item) -> None:
        """tlparse's HTML of the kept trace; a failure is named once, never the test's."""
        command = [tlparse, target, "-o", os.path.join(traced.folder, TLPARSE_DIR)]
        try:
            done = subprocess.run(
                [*command, "--no-browser", "--overwrite"],
                capture_output=True,
                text=True,
                timeout=TLPARSE_SECONDS,
                check=False,
            )
            lines = (done.stderr or done.stdout).strip().splitlines()
            problem = f"exit status {done.returncode}: {lines[-1] if lines else ''}"
            failed = done.returncode != 0
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem, failed = f"{type(exc).__name__}: {exc}", True
        if failed and not self.told:
            self.told = True
            path, lineno, _ = item.reportinfo()  # shown at the test
            warn_at(
                RecompileTraceUnread(
                    f"{PREFIX} tlparse could not read {traced.shown}/{TRACE_FILE} ({problem}); "
                    "the trace is kept, without tlparse's HTML (said once)"
                ),
                str(path),
                (lineno or 0) + 1,
            )

    def annotate(self, item: pytest.Item, when: str, traced: Traced, report: Any) -> None:
        """Name the folder on the test's result and, on a failed report, in its message."""
        kept = traced.kept if when == "teardown" else traced.capture.wrote and broke_the_gate(item)
        if not kept:
            return
        carried = getattr(report, "recompile", None)
        if isinstance(carried, dict) and carried.get("result") is not None:
            carried["trace"] = traced.shown  # its slot: the frozen result is not edited
        if report.failed:
            add_line(report, trace_line(traced.shown))


def find_tlparse() -> str | None:
    """``tlparse`` on PATH, or beside this Python (a virtualenv's scripts, not activated)."""
    return shutil.which("tlparse") or shutil.which("tlparse", path=sysconfig.get_path("scripts"))


def trace_line(shown: str) -> str:
    return TRACE_LINE.format(folder=shown, file=os.path.join(shown, TRACE_FILE))


def add_line(report: Any, line: str) -> None:
    """One line at the end of a failed report's message (its own section where the message
    is pytest's exception repr, which crosses from an xdist worker with its sections)."""
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        report.longrepr = f"{longrepr}\n{line}"
    elif hasattr(longrepr, "addsection"):
        longrepr.addsection("recompile trace", line)
    else:
        report.sections.append(("recompile trace", line))
