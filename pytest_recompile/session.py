"""The session's results: collected from each test's reports (so under xdist too), written
to the JSON report, the Markdown summary and the baseline, and printed as the terminal summary.

Registered only where the session is controlled (xdist workers never write files): with the
gate, on an xdist controller (which runs no test, and gets this alone), or before collection
where files are written or durations listed. Importing this module imports no torch.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from . import __version__
from ._torch import caches, instruments, versions
from .model.messages import other_torch
from .model.names import PREFIX
from .model.results import Carried, Environment, ReportSettings
from .model.run import SWITCHED_OFF, LiveRun, RunResults
from .model.text import plural
from .reports.baseline import read_baseline_document, unabsorbed, update_baseline
from .reports.ci import SUMMARY_LIMIT, annotation_lines, markdown_summary
from .reports.durations import duration_lines, job_id_line, title
from .reports.files import write_json_atomic, write_text_atomic
from .reports.json_report import created_now, report_document
from .reports.terminal import (
    FAULT,
    INCOMPLETE,
    MISSING,
    fixture_limit_lines,
    outlived_lines,
    switched_off_header,
    switched_off_line,
    terminal_lines,
)
from .selection import COLLECTION_KEY
from .settings import Settings, require_torch


@dataclass
class SessionReport:
    """The terminal summary, as lines: (text, whether it is an error line)."""

    run: RunResults
    live: LiveRun  # what only the live session knows: features this torch lacks, threads
    incomplete: str | None  # why the run stopped early (the run's own says why or missing)
    missing: str | None
    written: list[str]
    errors: list[str]
    annotations: list[str]  # GitHub workflow commands, read from the step's output
    verbose: bool = False  # -v: also what isolation did at no cost
    baseline_note: str | None = None  # the baseline was taken on another torch: which

    def lines(self) -> Iterator[tuple[str, bool]]:
        run = self.run
        off = switched_off_line(run)
        if off is not None and off[1]:  # fails the run: said first, in red
            yield off
        plain = terminal_lines(run, verbose=self.verbose)
        if self.incomplete is not None:
            plain.append(f"{INCOMPLETE}: {self.incomplete}")
        if self.missing is not None:
            plain.append(f"{MISSING}: {self.missing}")
        plain += outlived_lines(self.live.outlived)
        if self.baseline_note is not None:
            plain.append(other_torch(self.baseline_note))
        if off is not None and not off[1]:
            plain.append(off[0])
        yield from ((line, False) for line in plain + list(self.live.notes) + self.written)
        faults = [f"{FAULT}: {fault}" for fault in run.faults]
        red = fixture_limit_lines(run.fixtures) + faults + self.errors
        yield from ((line, True) for line in red)
        yield from ((line, False) for line in self.annotations)


class SessionResults:
    """The session's plugin for results: hooks that hand off to the one results model
    (:class:`RunResults`), which every writer and :class:`SessionReport` read whole."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.live = LiveRun()  # the reports heard, until the run ends
        self.run: RunResults | None = None  # the run's results, once it ended
        self.written: list[str] = []
        self.errors: list[str] = []
        self.interrupt: str | None = None  # "KeyboardInterrupt", once one arrived
        self.missing: str | None = None  # gated tests without figures, at the end
        self.incomplete: str | None = None  # why the run stopped early, at its end
        # each report's node id, phase, outcome, what it carries, xdist worker: until the end
        self.reports: list[tuple[str, str, str, Carried | str | None, str]] = []

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # xdist stops -x/--maxfail runs with a KeyboardInterrupt of its own that says why.
        said = str(excinfo.value) if type(excinfo.value) is not KeyboardInterrupt else ""
        self.interrupt = said or "KeyboardInterrupt"

    def pytest_report_header(self) -> list[str]:
        if not self.settings.gates_every_test:  # the gate may not run: nothing to say yet
            return []
        job_id = caches.job_id()  # torch is imported only where it already is
        told = [job_id_line(job_id)] if job_id else []
        off = instruments.compile_switched_off()  # the same: the environment before import
        told += [switched_off_header(off)] if off else []
        return [self.settings.header(), *versions.untested_lines(), *told]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Note the report; it is added to the results at the session's end, as nothing
        reads them before. An xdist controller handles every worker's reports on the thread
        that also hands the workers their next tests: decoding and adding each as it came
        held the workers up (benchmarks/results/issue-45-self-time.md, the fifth round)."""
        kind = type(report)
        if kind is not pytest.TestReport and kind.__name__.lower() == "subtestreport":
            return  # a subtest's: the test's own reports carry its figures
        worker = getattr(getattr(report, "node", None), "workerinput", None)  # xdist's
        process = str(worker.get("workerid", "")) if isinstance(worker, dict) else ""
        carried = getattr(report, "recompile", None)  # from a worker: one JSON string
        self.reports.append((report.nodeid, report.when, report.outcome, carried, process))

    def add_reports(self) -> None:
        """The reports noted, in the order they came, added to the results."""
        reports, self.reports = self.reports, []
        for nodeid, when, outcome, carried, process in reports:
            if isinstance(carried, str):  # sent by a worker (the gate's
                carried = json.loads(carried)  # pytest_report_to_serializable)
            self.live.add(nodeid, when, outcome, carried, process)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.add_reports()
        self.incomplete = stopped_early(session, exitstatus, self.interrupt)
        self.missing = missing_text(self.live.missing())
        self.run = run = self.live.finish(
            environment={**run_environment(), "devices": []},
            settings=report_settings(self.settings),
            created=created_now(),
            collection=session.config.stash.get(COLLECTION_KEY, None),
            incomplete=self.incomplete or self.missing,
        )
        # pytest already failed each test that broke a rule, and a run stopped early; a run
        # incomplete only because a contained fault kept a test's figures must not fail.
        if exitstatus == 0 and SWITCHED_OFF in run.gate_failures():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a gate that gated nothing
        try:
            self.write_files(session, run, int(session.exitstatus))
        except (OSError, TypeError, ValueError) as exc:
            self.errors.append(f"{PREFIX} could not write: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self.append_step_summary(session.config, run)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.run is None:  # the session did not finish (pytest said why)
            return
        report = self.report(terminalreporter.config, self.run)
        if report is not None:
            terminalreporter.write_sep("=", "recompile gate")
            for line, red in report.lines():
                terminalreporter.write_line(line, red=red, bold=red)
        count = self.settings.durations
        if count is not None:
            lines = duration_lines(
                self.run,
                count,
                root=str(terminalreporter.config.rootpath),
                verbose=terminalreporter.verbosity >= 2,
            )
            terminalreporter.write_sep("=", title(count))
            for line in lines:
                terminalreporter.write_line(line)

    def report(self, config: pytest.Config, run: RunResults) -> SessionReport | None:
        told = run.tests or run.fixtures or run.faults or run.disabled or self.live.told()
        if not (told or self.written or self.errors):
            return None
        annotations = annotation_lines(run, ci_root(config)) if self.settings.github else []
        return SessionReport(
            run,
            self.live,
            self.incomplete,
            self.missing,
            self.written,
            self.errors,
            annotations,
            verbose=config.getoption("verbose") >= 1,
            baseline_note=self.settings.baseline_note,
        )

    # -- files ------------------------------------------------------------------------------

    def write_files(self, session: pytest.Session, run: RunResults, exitstatus: int) -> None:
        settings = self.settings
        if settings.report is not None:
            document = report_document(run, str(session.config.rootpath))
            write_json_atomic(settings.report, document, rows=True)
            self.written.append(f"report written to {settings.report}")
        if settings.report_md is not None:
            write_text_atomic(
                settings.report_md, markdown_summary(run, root=ci_root(session.config))
            )
            self.written.append(f"Markdown summary written to {settings.report_md}")
        if settings.baseline_update and settings.baseline is not None:
            self.write_baseline(session, run, exitstatus, settings.baseline)

    def write_baseline(
        self, session: pytest.Session, run: RunResults, exitstatus: int, path: str
    ) -> None:
        why = run.baseline_refusal(exitstatus)
        if why is not None:
            self.errors.append(f"{PREFIX} baseline {path} NOT updated: {why}")
            return
        old = read_baseline_document(path, PREFIX) if os.path.exists(path) else None
        update = update_baseline(old, run, prune=self.settings.baseline_prune)
        write_json_atomic(path, update.document)
        self.written.append(update.line(path))
        beyond = unabsorbed(run)
        if beyond:
            self.errors += beyond
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def append_step_summary(self, config: pytest.Config, run: RunResults) -> None:
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if self.settings.github and step_summary and run.tests:
            root = ci_root(config)
            try:  # a courtesy to the reader: never what decides the run
                append_step_summary(
                    step_summary, lambda room: markdown_summary(run, root=root, limit=room)
                )
            except OSError as exc:
                self.written.append(f"{PREFIX} could not append the job summary: {exc}")


def report_settings(settings: Settings) -> ReportSettings:
    """The run's gate options, as the JSON report records them."""
    return {
        "default_budget": settings.default.value if settings.default else None,
        "mode": settings.mode,
        "keep_caches": settings.keep_caches,
        "fullgraph": settings.fullgraph is not None,
        "baseline": settings.baseline,
        "max_guards": settings.max_guards.value if settings.max_guards else None,
        "if_disabled": settings.if_disabled,
    }


def missing_text(missing: list[str]) -> str | None:
    """Gated tests that ran without figures, in words (None: every one has them)."""
    if not missing:
        return None
    named = ", ".join(missing[:3]) + (", ..." if missing[3:] else "")
    return f"{plural(len(missing), 'gated test')} ran without figures ({named})"


def run_environment() -> Environment:
    """What this run ran on, as the JSON report and the baseline record it."""
    return {
        "pytest_recompile": __version__,
        "pytest": pytest.__version__,
        "torch": versions.torch_version(),
        "torch_build": versions.torch_build(),
        "python": platform.python_version(),
        "platform": sys.platform,
    }


def ci_root(config: pytest.Config) -> str:
    """What CI paths are relative to: the checkout under GitHub Actions, else the rootdir."""
    return os.environ.get("GITHUB_WORKSPACE") or str(config.rootpath)


def append_step_summary(path: str, render: Callable[[int], str]) -> None:
    """Append the Markdown to GitHub's job summary file, within what is left of its 1 MiB."""
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    room = SUMMARY_LIMIT - used
    if room < 1024:  # the step's summary is full: say nothing rather than break it
        return
    with open(path, "a", encoding="utf-8", newline="\n") as out:
        out.write(render(room))


def stopped_early(session: pytest.Session, exitstatus: int, interrupt: str | None) -> str | None:
    """Why the run did not run every collected test (None: it did), for readers of the
    reports who must never take a partial run for a clean one."""
    if interrupt is not None:
        return interrupt
    for reason in (session.shouldstop, session.shouldfail):
        if isinstance(reason, str) and reason:
            return reason  # "stopping after 1 failures" (-x, --maxfail)
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        if session.testsfailed and not session.testscollected:
            return "errors during collection"
        return "interrupted (pytest.exit or errors during collection)"
    return None


def register_controller(config: pytest.Config, settings: Settings) -> None:
    """A pytest-xdist controller: its workers run the tests and their reports carry the
    results, so it gets the summary alone, and the gate's modules are not imported here.
    Where every test is gated (a default budget or max_guards), torch is checked as the gate
    would (one usage error before any worker starts), and :class:`ControllerCheck` makes sure
    that a controller that collects after all still gates its tests."""
    if settings.gates_every_test:
        require_torch()
        config.pluginmanager.register(ControllerCheck(settings), "recompile-controller-check")
    register_summary(config, settings)


class ControllerCheck:
    """xdist's rule, mirrored by :func:`.plugin.xdist_controller`, said that this process
    runs no test. Should xdist not have registered its controller's session after all, the
    tests run here, and the gate is registered before collection."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        if not config.pluginmanager.has_plugin("dsession"):
            from .gate import register_gate

            register_gate(config, self.settings)


def register_summary(config: pytest.Config, settings: Settings) -> None:
    """The session's results and summary, registered once: with the gate
    (:func:`.plugin.gate_on`), on an xdist controller (:func:`register_controller`), or,
    ungated, where files are written or durations listed."""
    if not config.pluginmanager.has_plugin("recompile-summary"):
        config.pluginmanager.register(SessionResults(settings), "recompile-summary")
