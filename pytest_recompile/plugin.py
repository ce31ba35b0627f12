"""pytest hooks only: options, markers, the per-test wrapper, the summary.

Nothing here imports torch. The per-test hooks live in :class:`Gate`, registered only when
``--recompile-budget`` / ``recompile_budget`` is set or, after collection, when some test
carries a ``max_recompiles`` marker; otherwise the plugin costs one pass over the items.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NoReturn, Optional

import pytest

from . import __version__, _torch
from .baseline import (
    BaselineError,
    baseline_document,
    check_writable,
    read_baseline,
    write_json_atomic,
)
from .markers import (
    MARKER_LINES,
    MARKERS,
    MODES,
    Budget,
    BudgetError,
    budget_from_marks,
    parse_count_text,
)
from .report import (
    PREFIX,
    call_site,
    failure_message,
    report_document,
    summarize_test,
    summary_lines,
)
from .tracker import RecompileBudgetExceeded, RecompileTracker

SETTINGS_KEY = pytest.StashKey["Settings"]()
BUDGET_KEY = pytest.StashKey[Optional[Budget]]()  # noqa: UP045 (evaluated at runtime)
TRACKER_KEY = pytest.StashKey[RecompileTracker]()
RESULTS_KEY = pytest.StashKey[dict[str, Any]]()

BARE_FLAG_HINT = "write --recompile-budget=N, or put test paths before a bare --recompile-budget"


@dataclass(frozen=True)
class Settings:
    default: int | None  # the budget of every test; None: only marked tests are gated
    default_source: str
    mode: str
    keep_caches: bool
    fullgraph: str | None  # "--recompile-fullgraph" when every gated test gets fullgraph
    report: str | None  # where the JSON report goes
    baseline: str | None  # the baseline file
    baseline_counts: dict[str, int]  # nodeid -> recompiles, read from the baseline
    baseline_update: bool  # write the baseline from this run instead of comparing

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        default: int | None = config.getoption("recompile_budget")
        source = f"--recompile-budget={default}"
        if default is None:
            ini = str(config.getini("recompile_budget") or "").strip()
            if ini:
                try:
                    default = parse_count_text(ini, f"{PREFIX} ini option recompile_budget")
                except BudgetError as exc:
                    raise pytest.UsageError(str(exc)) from None
                source = f"recompile_budget={default} (ini)"
        mode = config.getoption("recompile_mode") or str(config.getini("recompile_mode")).strip()
        if mode not in MODES:
            raise pytest.UsageError(
                f"{PREFIX} ini option recompile_mode: expected one of {', '.join(MODES)}, "
                f"got {mode!r}"
            )
        keep = bool(
            config.getoption("recompile_keep_caches") or config.getini("recompile_keep_caches")
        )
        fullgraph = None
        if config.getoption("recompile_fullgraph"):
            fullgraph = "--recompile-fullgraph"
        elif config.getini("recompile_fullgraph"):
            fullgraph = "recompile_fullgraph (ini)"
        report, report_from = _path_option(config, "report")
        baseline, baseline_from = _path_option(config, "baseline")
        update = bool(config.getoption("recompile_baseline_update"))
        counts: dict[str, int] = {}
        try:
            if report is not None:
                check_writable(report, f"{PREFIX} {report_from}")
            if update:
                if baseline is None:
                    raise BaselineError(
                        f"{PREFIX} --recompile-baseline-update needs --recompile-baseline=PATH "
                        "(or the ini option recompile_baseline): where to write the baseline"
                    )
                check_writable(baseline, f"{PREFIX} {baseline_from}")
                mode = "report-only"  # record every test's full count; fail none
                if default is None:
                    default, source = 0, "--recompile-baseline-update"
            elif baseline is not None:
                counts = read_baseline(baseline, f"{PREFIX} {baseline_from}")
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        return cls(default, source, mode, keep, fullgraph, report, baseline, counts, update)

    @property
    def writes_files(self) -> bool:
        return self.report is not None or self.baseline is not None

    def header(self) -> str:
        caches = "kept across tests" if self.keep_caches else "reset before each gated test"
        fullgraph = ", fullgraph" if self.fullgraph else ""
        return (
            f"recompile gate: active, default budget {self.default} ({self.default_source}), "
            f"mode {self.mode}, compile caches {caches}{fullgraph}"
        )


def _path_option(config: pytest.Config, name: str) -> tuple[str | None, str]:
    """A path from --recompile-NAME or, failing that, the ini option recompile_NAME."""
    value = config.getoption(f"recompile_{name}")
    if value:
        return str(value), f"--recompile-{name}={value}"
    ini = str(config.getini(f"recompile_{name}") or "").strip()
    if ini:
        return os.path.join(str(config.rootpath), ini), f"ini option recompile_{name}={ini}"
    return None, ""


def _budget_option(text: str) -> int:
    try:
        return parse_count_text(text, f"{PREFIX} --recompile-budget")
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; {BARE_FLAG_HINT}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recompile", "torch.compile recompiles (pytest-recompile)")
    group.addoption(
        "--recompile-budget",
        nargs="?",
        const="0",
        default=None,
        type=_budget_option,
        dest="recompile_budget",
        metavar="N",
        help="gate every test: at most N torch.compile recompiles (bare flag: 0). "
        f"{BARE_FLAG_HINT}.",
    )
    parser.addini(
        "recompile_budget",
        "default recompile budget of every test, like --recompile-budget=N (empty: off)",
        default="",
    )
    group.addoption(
        "--recompile-mode",
        choices=MODES,
        default=None,
        dest="recompile_mode",
        help="fail-fast (default): fail at the call that goes over budget, before compiling; "
        "at-end: run each test to the end, then judge it; report-only: never fail, only report.",
    )
    parser.addini("recompile_mode", "like --recompile-mode", default="fail-fast")
    group.addoption(
        "--recompile-keep-caches",
        action="store_true",
        default=None,
        dest="recompile_keep_caches",
        help="do not reset torch.compile caches before each gated test (faster; counts then "
        "depend on test order and on what earlier tests compiled).",
    )
    parser.addini(
        "recompile_keep_caches", "like --recompile-keep-caches", type="bool", default=False
    )
    group.addoption(
        "--recompile-fullgraph",
        action="store_true",
        default=None,
        dest="recompile_fullgraph",
        help="fullgraph semantics for every gated test: a graph break fails the test at the "
        "break, without editing its torch.compile calls.",
    )
    parser.addini("recompile_fullgraph", "like --recompile-fullgraph", type="bool", default=False)
    group.addoption(
        "--recompile-report",
        default=None,
        dest="recompile_report",
        metavar="PATH",
        help="write a JSON report of every gated test to PATH (schema: report.schema.json).",
    )
    parser.addini("recompile_report", "like --recompile-report (relative to rootdir)", default="")
    group.addoption(
        "--recompile-baseline",
        default=None,
        dest="recompile_baseline",
        metavar="PATH",
        help="compare each test with its recorded recompiles in PATH: above fails, below is "
        "reported.",
    )
    parser.addini(
        "recompile_baseline", "like --recompile-baseline (relative to rootdir)", default=""
    )
    group.addoption(
        "--recompile-baseline-update",
        action="store_true",
        default=False,
        dest="recompile_baseline_update",
        help="run every test in report-only mode and write the baseline file from the counts "
        "(only if the run passes).",
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKER_LINES:
        config.addinivalue_line("markers", line)
    settings = Settings.from_config(config)
    config.stash[SETTINGS_KEY] = settings
    worker = hasattr(config, "workerinput")
    if settings.default is not None:
        try:
            _torch.check_version()
        except _torch.TorchUnsupported as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(Gate(settings), "recompile-gate")
    else:
        config.pluginmanager.register(MarkerScan(settings), "recompile-scan")
    xdist_controller = not worker and getattr(config.option, "dist", "no") != "no"
    if not worker and (settings.default is not None or xdist_controller or settings.writes_files):
        config.pluginmanager.register(Summary(settings), "recompile-summary")


@pytest.fixture
def recompiles(request: pytest.FixtureRequest) -> Iterator[RecompileTracker]:
    """This test's compiles: ``count()``, ``records``, ``record(name)``, ``reasons()``,
    ``kinds()``, ``installed_guards()``, ``scoped(n)`` (a budget for a block) and ``warm()``
    (a block in which any compile fails). In a gated test it is the gate's own tracker;
    otherwise it records (report-only) from the moment the fixture is set up."""
    tracker = request.node.stash.get(TRACKER_KEY, None)
    if tracker is not None and tracker.active:
        yield tracker
        return
    settings = request.config.stash[SETTINGS_KEY]
    own = RecompileTracker(mode="report-only", reset=not settings.keep_caches)
    try:
        own.__enter__()
    except _torch.TorchUnsupported as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield own
    finally:
        own.stop()


def assign_budgets(items: list[pytest.Item], settings: Settings) -> bool:
    """Validate every marker and stash each test's budget; True if any test is gated."""
    errors = []
    gated = False
    for item in items:
        recorded = settings.baseline_counts.get(item.nodeid)
        try:
            budget = budget_from_marks(
                {name: list(item.iter_markers(name)) for name in MARKERS},
                settings.default,
                settings.default_source,
                item.nodeid,
                fullgraph_default=settings.fullgraph,
                baseline=(recorded, "baseline") if recorded is not None else None,
            )
        except BudgetError as exc:
            errors.append(f"{PREFIX} {exc}")
            continue
        item.stash[BUDGET_KEY] = budget
        gated = gated or budget is not None
    if errors:
        raise pytest.UsageError("\n".join(errors))
    return gated


class MarkerScan:
    """Without a default budget: gate only if, after collection, some test has a marker."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not assign_budgets(items, self.settings):
            return
        try:
            _torch.check_version()
        except _torch.TorchUnsupported as exc:
            raise pytest.UsageError(str(exc)) from None
        manager = config.pluginmanager
        manager.register(Gate(self.settings), "recompile-gate")
        if not hasattr(config, "workerinput") and not manager.has_plugin("recompile-summary"):
            manager.register(Summary(self.settings), "recompile-summary")


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
        try:
            result = yield
        except RecompileBudgetExceeded as exc:
            stopped = exc
        except BaseException as exc:
            tracker.stop()
            broke = tracker.note_exception(exc)
            if broke is None:
                # The test's own failure wins; what the gate saw goes into a report section.
                found = tracker.violations()
                if found:
                    message = failure_message(tracker.records, found)
                    item.add_report_section("call", "recompile", message)
                raise
        tracker.stop()
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
