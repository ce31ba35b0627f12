"""A pytest plugin that counts torch's own recompiles per test, for runs with the recompile
plugin off (``-p no:recompile -p count_alone``; this directory on ``sys.path``).

A test's count is the number of torch compile metrics with a ``recompile_reason`` (forward
compiles only: ``is_forward is not False``) recorded during its function-scoped phases: its
setup, call and teardown, less the windows in which a wider-scoped fixture (module, class,
package, session; unittest ``setUpClass`` / ``setUpModule`` are class and module fixtures) is
set up or torn down. That is the plugin's contract: wider fixtures are never charged to a test.

Environment:

``COUNT_ALONE_OUT``
    write ``{nodeid: {"recompiles": n, "breaks": sites}}`` there at the end of the session
    (turns counting on); ``breaks`` counts the distinct graph-break sites of its phases.
``COUNT_ALONE_RECORD``
    write ``{"items": [{"nodeid", "name"}], "outcomes": {nodeid: outcome},
    "messages": {nodeid: message}}`` there: the collected tests in run order, each test's
    outcome (``passed``, ``failed``, ``error``,
    ``skipped``) and, for a test that failed or errored, the phase and the first error's
    message (for a skipped one, its reason). Touches no torch, so it may ride along a run with
    the recompile plugin on.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

OUT = "COUNT_ALONE_OUT"
RECORD = "COUNT_ALONE_RECORD"


def _is_recompile(metric: Any) -> bool:
    return metric.recompile_reason is not None and metric.is_forward is not False


class Counter:
    """Attributes each new compile metric to the window it was recorded in.

    ``torch._dynamo.reset()`` does not clear the metrics, but
    ``torch._dynamo.utils.clear_compilation_metrics()`` would, so metrics are told apart by
    object identity, never by index; every metric seen is kept alive so that no id is reused.
    """

    def __init__(self) -> None:
        import torch._dynamo.utils as dynamo_utils

        self.utils = dynamo_utils
        # The default keeps the last 64; a long test (or session) must lose none.
        dynamo_utils.set_compilation_metrics_limit(100000)
        self.seen: dict[int, Any] = {}
        self.nodeid: str | None = None  # the test whose function-scoped phases are running
        self.wider = 0  # wider-scoped fixtures being set up or torn down right now
        self.tearing: dict[int, int] = {}  # id(fixturedef) -> teardowns in progress
        self.counts: dict[str, int] = {}
        # graph-break sites (file, line) per test, from torch's graph_break_reasons
        self.breaks: dict[str, set[tuple[str, int]]] = {}
        self.reasons_seen = 0
        self.flush()  # what was compiled before the first test (at import) is nobody's

    def flush(self) -> None:
        """Charge every metric and graph break recorded since the last flush to the current
        window."""
        charge = self.nodeid is not None and self.wider == 0
        for metric in self.utils.get_compilation_metrics():
            if id(metric) in self.seen:
                continue
            self.seen[id(metric)] = metric
            if charge and _is_recompile(metric):
                self.counts[self.nodeid] += 1  # type: ignore[index]
        reasons = self.utils.graph_break_reasons
        if len(reasons) < self.reasons_seen:  # a reset cleared the list
            self.reasons_seen = 0
        for reason in reasons[self.reasons_seen :]:
            frame = reason.user_stack[-1] if reason.user_stack else None
            if charge and frame is not None:
                self.breaks[self.nodeid].add((frame.filename, frame.lineno))  # type: ignore[index]
        self.reasons_seen = len(reasons)

    # The test's own phases: from the start of its setup to the end of its teardown.

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        self.flush()
        self.nodeid = item.nodeid
        self.counts.setdefault(item.nodeid, 0)
        self.breaks.setdefault(item.nodeid, set())
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Any:
        try:
            return (yield)
        finally:
            self.flush()
            self.nodeid = None

    # Wider fixtures: their set-up and their teardown are charged to no test.

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: Any) -> Any:
        if fixturedef.scope == "function":
            yield
            return
        self.flush()
        self.wider += 1
        try:
            yield
        finally:
            self.flush()
            self.wider -= 1
            # Registered after the fixture's own finalizers, so it runs before them (LIFO):
            # it marks the start of the teardown; pytest_fixture_post_finalizer, which pytest
            # registers first and so runs last, marks its end.
            fixturedef.addfinalizer(lambda: self.teardown_starts(fixturedef))

    def teardown_starts(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        self.flush()
        self.wider += 1
        self.tearing[id(fixturedef)] = self.tearing.get(id(fixturedef), 0) + 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        if self.tearing.get(id(fixturedef)):
            self.flush()
            self.wider -= 1
            self.tearing[id(fixturedef)] -= 1

    def write(self, path: str) -> None:
        self.flush()
        found = {
            nodeid: {"recompiles": count, "breaks": len(self.breaks.get(nodeid, ()))}
            for nodeid, count in self.counts.items()
        }
        with open(path, "w") as file:
            json.dump(found, file, indent=1, sort_keys=True)


class Recorder:
    """The collected tests and each test's outcome."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.outcomes: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = [{"nodeid": item.nodeid, "name": item.name} for item in session.items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.failed or report.skipped:
            if report.failed:
                outcome = "failed" if report.when == "call" else "error"
            else:
                outcome = report.outcome
            # The first failure of a test is its outcome (an error at teardown after a
            # failed call stays "failed").
            if self.outcomes.get(report.nodeid, "passed") == "passed":
                self.outcomes[report.nodeid] = outcome
                if report.failed:
                    crash = getattr(report.longrepr, "reprcrash", None)
                    message = crash.message if crash is not None else str(report.longrepr)
                    self.messages[report.nodeid] = f"{report.when}: {message}"
                elif report.skipped and isinstance(report.longrepr, tuple):
                    self.messages[report.nodeid] = str(report.longrepr[2])

    def write(self, path: str) -> None:
        with open(path, "w") as file:
            json.dump(
                {"items": self.items, "outcomes": self.outcomes, "messages": self.messages},
                file,
                indent=1,
            )


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(OUT):
        config.pluginmanager.register(Counter(), "count_alone_counter")
    if os.environ.get(RECORD) and not hasattr(config, "workerinput"):  # xdist: the controller
        config.pluginmanager.register(Recorder(), "count_alone_recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, variable in (("count_alone_counter", OUT), ("count_alone_recorder", RECORD)):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            plugin.write(os.environ[variable])
