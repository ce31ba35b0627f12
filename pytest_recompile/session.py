"""The session's results: collected from each test's reports (so under xdist too), written
to the JSON report, the Markdown summary and the baseline, and printed as the terminal summary.

Registered only where the session is controlled (xdist workers never write files): with the
gate, or before collection where a marked test may turn it on (an xdist controller, a run that
writes files). Importing this module imports no torch.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pytest

from . import __version__
from ._torch import caches, versions
from .model.messages import other_torch, plural
from .model.names import PREFIX
from .model.results import (
    Carried,
    Environment,
    FixtureResult,
    LimitResult,
    OutlivedResult,
    ReportDocument,
    ReportSettings,
    TestResult,
)
from .reports.baseline import baseline_document
from .reports.ci import SUMMARY_LIMIT, annotation_lines, markdown_summary
from .reports.durations import duration_lines, job_id_line, title
from .reports.files import write_json_atomic, write_text_atomic
from .reports.json_report import report_document
from .reports.recompile_limit import limit_need
from .reports.terminal import (
    FAULT,
    INCOMPLETE,
    MISSING,
    fixture_limit_lines,
    outlived_lines,
    terminal_lines,
    totals_line,
)
from .settings import Settings


@dataclass
class Collected:
    """What the session's reports carried: each test's last figures and outcome, the wider
    fixtures' compiles, contained internal errors, and the gated tests that ran."""

    results: dict[str, tuple[str, TestResult]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> this attempt's outcome
    fixtures: list[FixtureResult] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)  # each told once
    notes: dict[str, None] = field(default_factory=dict)  # features this torch lacks, once each
    outlived: list[OutlivedResult] = field(default_factory=list)  # threads' compiles, no test's
    gated: set[str] = field(default_factory=set)  # gated tests that ran to their teardown
    _need: LimitResult | None = None

    def need(self) -> LimitResult:
        """The recompile_limit the run needs, measured once for the summary and the report."""
        if self._need is None:
            results = [(nodeid, data) for nodeid, (_, data) in self.results.items()]
            self._need = limit_need(results, self.fixtures)
        return self._need

    def add(self, report: pytest.TestReport) -> None:
        """One report of a test: its phase's outcome, and what it carries."""
        self._need = None  # measured again from what the reports carried by then
        nodeid = report.nodeid
        if report.when == "setup":  # a new attempt (reruns) starts afresh
            self.results.pop(nodeid, None)
            self.outcomes.pop(nodeid, None)
            if report.failed:
                self.outcomes[nodeid] = "error"
        elif report.when == "call":
            self.outcomes[nodeid] = report.outcome
        elif report.failed and self.outcomes.get(nodeid, "passed") == "passed":
            self.outcomes[nodeid] = "error"  # an error in teardown spoils a pass
        carried: Carried | None = getattr(report, "recompile", None)
        if carried is None:
            return
        self.fixtures += carried["fixtures"]
        self.faults += carried["faults"]
        self.outlived += carried["threads"]
        self.notes.update(dict.fromkeys(carried["degraded"]))
        if carried["gated"]:
            self.gated.add(nodeid)
        result = carried["result"]
        if result is not None:
            if carried.get("trace"):  # the kept trace's slot, filled after the result froze
                result = {**result, "trace": carried["trace"]}
            self.results[nodeid] = (self.outcomes.get(nodeid, "passed"), result)

    def missing(self) -> str | None:
        """Gated tests that ran without figures, in words (None: every one has them)."""
        missing = sorted(self.gated - set(self.results))
        if not missing:
            return None
        named = ", ".join(missing[:3]) + (", ..." if missing[3:] else "")
        return f"{plural(len(missing), 'gated test')} ran without figures ({named})"


@dataclass
class SessionReport:
    """The terminal summary, as lines: (text, whether it is an error line)."""

    collected: Collected
    enforced: bool
    incomplete: str | None
    missing: str | None
    written: list[str]
    errors: list[str]
    annotations: list[str]  # GitHub workflow commands, read from the step's output
    verbose: bool = False  # -v: also what isolation did at no cost
    baseline_note: str | None = None  # the baseline was taken on another torch: which

    def lines(self) -> Iterator[tuple[str, bool]]:
        collected = self.collected
        results = [(nodeid, data) for nodeid, (_, data) in collected.results.items()]
        plain = terminal_lines(
            results,
            collected.fixtures,
            enforced=self.enforced,
            need=collected.need(),
            verbose=self.verbose,
        )
        if self.incomplete is not None:
            plain.append(f"{INCOMPLETE}: {self.incomplete}")
        if self.missing is not None:
            plain.append(f"{MISSING}: {self.missing}")
        plain += outlived_lines(collected.outlived)
        if self.baseline_note is not None:
            plain.append(other_torch(self.baseline_note))
        yield from ((line, False) for line in plain + list(collected.notes) + self.written)
        faults = [f"{FAULT}: {fault}" for fault in collected.faults]
        red = fixture_limit_lines(collected.fixtures) + faults + self.errors
        yield from ((line, True) for line in red)
        yield from ((line, False) for line in self.annotations)


class SessionResults:
    """The session's plugin for results: hooks that hand off to :class:`Collected`, the
    writers and :class:`SessionReport`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.collected = Collected()
        self.written: list[str] = []
        self.errors: list[str] = []
        self.interrupt: str | None = None  # "KeyboardInterrupt", once one arrived
        self.missing: str | None = None  # gated tests without figures, at the end
        self.incomplete: str | None = None  # why the run stopped early, at its end

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # xdist stops -x/--maxfail runs with a KeyboardInterrupt of its own that says why.
        said = str(excinfo.value) if type(excinfo.value) is not KeyboardInterrupt else ""
        self.interrupt = said or "KeyboardInterrupt"

    def pytest_report_header(self) -> list[str]:
        if not self.settings.gates_every_test:  # the gate may not run: nothing to say yet
            return []
        job_id = caches.job_id()  # torch is imported only where it already is
        told = [job_id_line(job_id)] if job_id else []
        return [self.settings.header(), *versions.untested_lines(), *told]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if type(report).__name__.lower() != "subtestreport":  # the test's own carry its figures
            self.collected.add(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.incomplete = stopped_early(session, exitstatus, self.interrupt)
        self.missing = self.collected.missing()
        try:
            self.write_files(session, exitstatus)
        except (OSError, TypeError, ValueError) as exc:
            self.errors.append(f"{PREFIX} could not write: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self.append_step_summary(session.config)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report = self.report(terminalreporter.config)
        if report is not None:
            terminalreporter.write_sep("=", "recompile gate")
            for line, red in report.lines():
                terminalreporter.write_line(line, red=red, bold=red)
        count = self.settings.durations
        if count is not None:
            results = [(nodeid, data) for nodeid, (_, data) in self.collected.results.items()]
            lines = duration_lines(
                results,
                self.collected.fixtures,
                count,
                root=str(terminalreporter.config.rootpath),
                verbose=terminalreporter.verbosity >= 2,
            )
            terminalreporter.write_sep("=", title(count))
            for line in lines:
                terminalreporter.write_line(line)

    def report(self, config: pytest.Config) -> SessionReport | None:
        collected = self.collected
        told = (
            collected.results
            or collected.fixtures
            or collected.faults
            or collected.notes
            or collected.outlived
        )
        if not (told or self.written or self.errors):
            return None
        annotations = (
            annotation_lines(collected.results, ci_root(config), enforced=self.settings.enforced)
            if self.settings.github
            else []
        )
        return SessionReport(
            collected,
            self.settings.enforced,
            self.incomplete,
            self.missing,
            self.written,
            self.errors,
            annotations,
            verbose=config.getoption("verbose") >= 1,
            baseline_note=self.settings.baseline_note,
        )

    # -- files ------------------------------------------------------------------------------

    def write_files(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.settings
        if settings.report is not None:
            write_json_atomic(settings.report, self.report_document(session.config))
            self.written.append(f"report written to {settings.report}")
        if settings.report_md is not None:
            write_text_atomic(settings.report_md, self.markdown(session.config))
            self.written.append(f"Markdown summary written to {settings.report_md}")
        if settings.baseline_update and settings.baseline is not None:
            self.write_baseline(session, exitstatus, settings.baseline)

    def write_baseline(self, session: pytest.Session, exitstatus: int, path: str) -> None:
        if exitstatus != pytest.ExitCode.OK:
            self.errors.append(
                f"{PREFIX} baseline {path} NOT updated: the run did not "
                f"pass (exit status {int(exitstatus)}), so its counts may be incomplete"
            )
            return
        data = {nodeid: data for nodeid, (_, data) in self.collected.results.items()}
        write_json_atomic(path, baseline_document(data, run_environment()))
        self.written.append(f"baseline written to {path}")
        beyond = beyond_baseline(data, self.settings)
        if beyond:
            self.errors += beyond
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def append_step_summary(self, config: pytest.Config) -> None:
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if self.settings.github and step_summary and self.collected.results:
            try:  # a courtesy to the reader: never what decides the run
                append_step_summary(step_summary, lambda room: self.markdown(config, room))
            except OSError as exc:
                self.written.append(f"{PREFIX} could not append the job summary: {exc}")

    def markdown(self, config: pytest.Config, limit: int = SUMMARY_LIMIT) -> str:
        enforced = self.settings.enforced
        results = self.collected.results
        totals = totals_line([data for _, data in results.values()], enforced=enforced)
        return markdown_summary(
            results,
            totals,
            root=ci_root(config),
            incomplete=self.incomplete or self.missing,
            limit=limit,
            enforced=enforced,
        )

    def report_document(self, config: pytest.Config) -> ReportDocument:
        settings = self.settings
        environment = run_environment()
        options: ReportSettings = {
            "default_budget": settings.default.value if settings.default else None,
            "mode": settings.mode,
            "keep_caches": settings.keep_caches,
            "fullgraph": settings.fullgraph is not None,
            "baseline": settings.baseline,
            "max_guards": settings.max_guards.value if settings.max_guards else None,
        }
        collected = self.collected
        results = [(nodeid, outcome, data) for nodeid, (outcome, data) in collected.results.items()]
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return report_document(
            results,
            environment,
            options,
            created,
            collected.fixtures,
            self.incomplete or self.missing,
            collected.faults,
            collected.need(),
            str(config.rootpath),
        )


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


def beyond_baseline(results: dict[str, TestResult], settings: Settings) -> list[str]:
    """What the gate run after a baseline update would still fail: every broken rule but a
    total over the default budget (the one thing a baseline raises). Empty: it will pass."""
    default = settings.default.source if settings.default is not None else None
    broken = [
        f"  {nodeid}: {v['message']}"
        for nodeid, data in sorted(results.items())
        for v in data["violations"]
        if not (v["kind"] == "total" and v["source"] == default)
    ]
    if not broken:
        return []
    return [
        f"{PREFIX} {plural(len(broken), 'broken rule')} no baseline can absorb (recompile_limit "
        "hits, markers' own budgets and guard rules): the next gate run fails on them. Fix "
        "them, or relax those tests' markers, then update again:",
        *broken,
    ]


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
