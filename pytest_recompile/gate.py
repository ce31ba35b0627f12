"""The per-test gate and the session summary: registered only when something is gated.

Importing this module imports the tracker and the reports (not torch itself: that happens when
the first gated test starts). :mod:`pytest_recompile.plugin` imports it only when the gate is
asked for, so a session without the gate never pays for it.
"""

from __future__ import annotations

import platform
import sys
import warnings
from collections.abc import Generator
from datetime import datetime, timezone
from typing import Any, NoReturn

import pytest

from . import __version__, _torch
from .baseline import baseline_document, write_json_atomic
from .names import PREFIX
from .plugin import BUDGET_KEY, RESULTS_KEY, TRACKER_KEY, Settings, assign_budgets
from .report import (
    call_site,
    failure_message,
    report_document,
    summarize_test,
    summary_lines,
)
from .tracker import RecompileBudgetExceeded, RecompileTracker


class Gate:
    """Tracks compiles in every gated test and judges them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assign_budgets(items, self.settings)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        budget = item.stash.get(BUDGET_KEY, None)
        if budget is not None:
            tracker = RecompileTracker(
                budget, mode=self.settings.mode, reset=not self.settings.keep_caches
            )
            try:
                tracker.__enter__()
            except _torch.TorchUnsupported as exc:
                raise pytest.UsageError(str(exc)) from None
            item.stash[TRACKER_KEY] = tracker
        try:
            return (yield)
        except RecompileBudgetExceeded as exc:  # a fixture recompiled over budget
            stopped = exc
        _fail(stopped)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        tracker = item.stash.get(TRACKER_KEY, None)
        if tracker is None:
            return (yield)
        stopped: RecompileBudgetExceeded | None = None
        broke = None
        state = _torch.compile_state()
        try:
            result = yield
        except RecompileBudgetExceeded as exc:
            stopped = exc
        except BaseException as exc:
            tracker.stop()
            _restore(item, state)
            broke = tracker.note_exception(exc)
            if broke is None:
                # The test's own failure wins; what the gate saw goes into a report section.
                found = tracker.violations()
                if found:
                    message = failure_message(tracker.records, found)
                    item.add_report_section("call", "recompile", message)
                raise
        tracker.stop()
        _restore(item, state)
        if stopped is not None:
            _fail(stopped)
        found = tracker.violations()
        if broke is not None:  # failed outside the except block: no chained torch traceback
            pytest.fail(failure_message(tracker.records, found), pytrace=False)
        if found and self.settings.mode != "report-only":
            pytest.fail(failure_message(tracker.records, found), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        tracker = item.stash.get(TRACKER_KEY, None)
        if tracker is not None and (call.when == "call" or report.failed):
            report.recompile = self.results(item, tracker)  # type: ignore[attr-defined]
        return report

    def results(self, item: pytest.Item, tracker: RecompileTracker) -> dict[str, Any]:
        """The test's results, once: they travel on its report (so under xdist too)."""
        data = item.stash.get(RESULTS_KEY, None)
        if data is None:
            data = summarize_test(
                tracker.records,
                tracker.budget,
                tracker.violations(),
                tracker.graph_breaks,
                baseline=self.settings.baseline_counts.get(item.nodeid),
                device=_torch.device_summary(),
                cudagraph_recordings=tracker.cudagraph_recordings,
            )
            item.stash[RESULTS_KEY] = data
            # JUnit XML writes the properties of the teardown report, made from these.
            item.user_properties += [
                ("recompiles", data["recompiles"]),
                ("recompile_budget", data["budget"]),
                ("recompile_worst", data["worst"] or ""),
                ("recompile_seconds", data["recompile_seconds"]),
            ]
        return data

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield)
        finally:
            tracker = item.stash.get(TRACKER_KEY, None)
            if tracker is not None:
                tracker.stop()
                del item.stash[TRACKER_KEY]


class RecompileStateLeak(pytest.PytestWarning):
    """A gated test left torch.compile's stance or Dynamo's config changed."""


def _restore(item: pytest.Item, state: _torch.CompileState) -> None:
    """Undo what the test body left changed, so later tests are judged under the same rules."""
    leaked = _torch.restore_compile_state(state)
    if leaked:
        warnings.warn(
            RecompileStateLeak(
                f"{PREFIX} {item.nodeid} left {', '.join(leaked)} behind; restored it, so that "
                "later tests are judged under the same settings"
            ),
            stacklevel=1,
        )


def _fail(stopped: RecompileBudgetExceeded) -> NoReturn:
    """Fail the test with the gate's message alone (torch's frames are no help to the user)."""
    message = failure_message(
        stopped.records,
        stopped.violations,
        stopped=stopped.stopped,
        site=call_site(stopped.__traceback__),
    )
    pytest.fail(message, pytrace=False)


class Summary:
    """Collects per-test results from reports (so it works under xdist), prints the summary,
    writes the JSON report and the baseline. Runs only where the session is controlled:
    xdist workers never write files."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.results: dict[str, tuple[str, dict[str, Any]]] = {}
        self.written: list[str] = []
        self.errors: list[str] = []

    def pytest_report_header(self) -> list[str]:
        return [self.settings.header()] if self.settings.default is not None else []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "recompile", None)
        if data is not None:
            outcome = "error" if report.when == "setup" else report.outcome
            self.results[report.nodeid] = (outcome, data)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.settings
        try:
            if settings.report is not None:
                write_json_atomic(settings.report, self.report_document(session.config))
                self.written.append(f"report written to {settings.report}")
            if settings.baseline_update and settings.baseline is not None:
                if exitstatus == pytest.ExitCode.OK:
                    data = {nodeid: data for nodeid, (_, data) in self.results.items()}
                    write_json_atomic(settings.baseline, baseline_document(data))
                    self.written.append(f"baseline written to {settings.baseline}")
                else:
                    self.errors.append(
                        f"{PREFIX} baseline {settings.baseline} NOT updated: the run did not "
                        f"pass (exit status {int(exitstatus)}), so its counts may be incomplete"
                    )
        except (OSError, TypeError, ValueError) as exc:
            self.errors.append(f"{PREFIX} could not write: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def report_document(self, config: pytest.Config) -> dict[str, Any]:
        settings = self.settings
        environment = {
            "pytest_recompile": __version__,
            "pytest": pytest.__version__,
            "torch": _torch.torch_version(),
            "python": platform.python_version(),
            "platform": sys.platform,
        }
        options = {
            "default_budget": settings.default,
            "mode": settings.mode,
            "keep_caches": settings.keep_caches,
            "fullgraph": settings.fullgraph is not None,
            "baseline": settings.baseline,
        }
        results = [(nodeid, outcome, data) for nodeid, (outcome, data) in self.results.items()]
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return report_document(results, environment, options, created)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.results or self.written or self.errors):
            return
        terminalreporter.write_sep("=", "recompile gate")
        results = [(nodeid, data) for nodeid, (_, data) in self.results.items()]
        for line in summary_lines(results) + self.written:
            terminalreporter.write_line(line)
        for line in self.errors:
            terminalreporter.write_line(line, red=True, bold=True)
