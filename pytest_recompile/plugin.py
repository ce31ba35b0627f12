"""pytest hooks only: options, markers, the fixture, and when to switch the gate on.

Importing this module imports neither torch nor the tracker. The per-test hooks live in
:class:`pytest_recompile.gate.Gate`, imported and registered only when
``--recompile-budget`` / ``recompile_budget`` is set or, after collection, when some test
carries one of the markers; otherwise the plugin costs one pass over the collected items.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pytest

from .names import MARKER_LINES, MARKERS, MODES, PREFIX

if TYPE_CHECKING:
    from .markers import Budget

if TYPE_CHECKING:
    from .tracker import RecompileTracker

SETTINGS_KEY = pytest.StashKey["Settings"]()
BUDGET_KEY = pytest.StashKey[Optional["Budget"]]()
TRACKER_KEY = pytest.StashKey["RecompileTracker"]()
FIXTURES_KEY = pytest.StashKey[list[dict[str, Any]]]()

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
                from .markers import BudgetError, parse_count_text

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
        if report is None and baseline is None and not update:
            return cls(default, source, mode, keep, fullgraph, None, None, counts, False)
        from .baseline import BaselineError, check_writable, read_baseline

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
        caches = (
            "kept across tests"
            if self.keep_caches
            else "isolated (each test starts from its wider fixtures' entries)"
        )
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
    from .markers import BudgetError, parse_count_text

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
        help="keep every torch.compile cache entry across tests instead of starting each test "
        "from its wider fixtures' entries: recompiles are then judged against the whole "
        "process state, and verdicts depend on test order.",
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
        from . import _torch

        try:
            _torch.check_version()
        except _torch.TorchUnsupported as exc:
            raise pytest.UsageError(str(exc)) from None
        register_gate(config, settings)
    else:
        config.pluginmanager.register(MarkerScan(settings), "recompile-scan")
        xdist_controller = not worker and getattr(config.option, "dist", "no") != "no"
        if xdist_controller or settings.writes_files:
            register_summary(config, settings)


def register_gate(config: pytest.Config, settings: Settings) -> None:
    """The per-test hooks, and where the session is controlled, the summary."""
    from .gate import Gate

    config.pluginmanager.register(Gate(settings), "recompile-gate")
    if not hasattr(config, "workerinput"):
        register_summary(config, settings)


def register_summary(config: pytest.Config, settings: Settings) -> None:
    from .gate import Summary

    if not config.pluginmanager.has_plugin("recompile-summary"):
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
    from . import _torch
    from .tracker import RecompileTracker

    settings = request.config.stash[SETTINGS_KEY]
    # With the gate on, the test already starts from its wider fixtures' state (isolation).
    gate = request.config.pluginmanager.has_plugin("recompile-gate")
    own = RecompileTracker(
        mode="report-only",
        reset=not (settings.keep_caches or gate),
        warm_start=gate or settings.keep_caches,
    )
    try:
        own.start()
    except _torch.TorchUnsupported as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield own
    finally:
        own.stop()


def assign_budgets(items: list[pytest.Item], settings: Settings) -> bool:
    """Validate every marker and stash each test's budget; True if any test is gated."""
    from .markers import BudgetError, budget_from_marks

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
        settings = self.settings
        names = set(MARKERS)
        marked = any(mark.name in names for item in items for mark in item.iter_markers())
        gated = (marked or bool(settings.baseline_counts)) and assign_budgets(items, settings)
        uses = any("recompiles" in getattr(item, "fixturenames", ()) for item in items)
        if not (gated or uses):
            return
        from . import _torch

        try:
            _torch.check_version()
        except _torch.TorchUnsupported as exc:
            raise pytest.UsageError(str(exc)) from None
        register_gate(config, self.settings)
