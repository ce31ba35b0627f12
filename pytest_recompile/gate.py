"""The gate: the per-test phases (isolation, tracking, judging) and the session summary,
registered only when something is gated.

Importing this module imports the tracker and the reports (not torch itself: that happens when
the first gated test starts). :mod:`pytest_recompile.plugin` imports it only when the gate is
asked for, so a session without the gate never pays for it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

import pytest

from . import processes
from ._torch import entries, events, hooks, instruments, versions
from .isolation import Ledger, Owner
from .names import PREFIX
from .report import (
    TestSummary,
    failure_message,
    fixture_result,
    junit_properties,
    summarize_test,
)
from .settings import (
    BUDGET_KEY,
    CHILDREN_FAILED_KEY,
    FIXTURES_KEY,
    ORDER_KEY,
    PROCESSES_KEY,
    TRACKER_KEY,
    Settings,
    assign_budgets,
)
from .tracker import (
    RecompileBudgetExceeded,
    RecompileGateError,
    RecompileTracker,
    stopped_message,
)


class Gate:
    """Tracks compiles in every gated test and judges them; keeps each test's starting
    state to what its live wider fixtures compiled (see :mod:`pytest_recompile.isolation`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ledger = Ledger()
        self.tracker: RecompileTracker | None = None  # the running gated test's
        self.item: pytest.Item | None = None  # the test whose phases are running
        self.test_owner: Owner | None = None
        self.fixture_trackers: list[RecompileTracker] = []  # wider fixtures being set up
        self.live: dict[int, Owner] = {}  # id(fixturedef) -> owner of its current set-up
        self.tearing: dict[int, Owner] = {}  # id(fixturedef) -> its teardown, while it runs
        self.isolating_setup = False  # an isolated test's set-up is running
        self.keeps_entries = True  # False: this torch needs a full reset instead
        self.reset_pending = False  # the full reset waits until the wider fixtures are set up
        self._unhook: Any = None
        self.spool: processes.Spool | None = None  # children's records (processes on)
        self.test_token: str | None = None  # what children's compiles go to now, if gated
        self.degraded: list[str] = []  # features this torch lacks, told once on a report

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assign_budgets(items, self.settings)

    def _listen(self) -> None:
        """Start seeing every compile (once per session, before the first test runs)."""
        if self._unhook is not None:
            return
        try:
            versions.check_torch()
        except versions.TorchUnsupported as exc:
            raise pytest.UsageError(str(exc)) from None
        self.keeps_entries = versions.can_keep_entries()
        self.degraded = self._contained(versions.degraded_lines) or []
        self._unhook = hooks.install_compile_hook(self.on_compile)
        self._contained(self.ledger.start)
        if not processes._FORK_HOOK and hasattr(os, "register_at_fork"):  # not on Windows
            processes._FORK_HOOK.append(True)
            os.register_at_fork(after_in_child=processes.forked_in_session)
        if self.settings.processes:
            self.spool = processes.Spool()

    def pytest_unconfigure(self) -> None:
        # A run ended mid-test (KeyboardInterrupt, pytest.exit) skips teardown: stop here.
        for tracker in [self.tracker, *self.fixture_trackers]:
            if tracker is not None:
                tracker.stop()
        if self._unhook is not None:
            self._unhook()
            self._unhook = None
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    # -- compiles -------------------------------------------------------------------------------

    def on_compile(self, event: events.CompileEvent) -> None:
        """Every compile of the session: who owns it, and the tracker that records it."""
        again = self.ledger.compiled_again(event.code)
        owner = self._contained(self.ledger.note, event) or self.ledger.current
        if owner.kind == "fixture" and self.fixture_trackers:
            if event.is_recompile:
                self._contained(self._note_against, owner, event)
            self.fixture_trackers[-1].on_compile(event, again=again)
        elif owner is self.test_owner and self.tracker is not None and self.tracker.active:
            against = self._contained(self._against, event)
            self.tracker.on_compile(event, against=against, again=again)

    def _contained(self, action: Callable[..., Any], *args: Any) -> Any:
        """Run one of the plugin's own steps; an internal error is named once (on the running
        test's report, in the summary and the JSON report) and never becomes the test's."""
        try:
            return action(*args)
        except Exception as exc:
            self.ledger.fault(
                f"internal error in {getattr(action, '__name__', action)}: "
                f"{type(exc).__name__}: {exc}; the gate went on"
            )
            return None

    def _rejected_by(self, event: events.CompileEvent) -> list[Owner]:
        """The live fixtures whose cache entries rejected this call."""
        owners = self.ledger.owners_of(event.code)
        found = (owners.get(reason.partition(":")[0]) for reason in event.reasons)
        return list({id(o): o for o in found if o is not None and o.kind == "fixture"}.values())

    def _note_against(self, owner: Owner, event: events.CompileEvent) -> None:
        """A wider fixture's set-up recompiled against another fixture's entries: what it
        keeps then depends on that fixture being live (the order-dependent edge)."""
        for other in self._rejected_by(event):
            if other is not owner and other not in owner.against:
                owner.against.append(other)

    def _against(self, event: events.CompileEvent) -> str | None:
        """Name the live fixtures whose entries rejected the call, if the test does not use
        them: the one case where a verdict depends on which tests ran before."""
        if not event.is_recompile or self.item is None:
            return None
        used = used_fixtures(self.item)
        strangers = [o.describe() for o in self._rejected_by(event) if o.name not in used]
        if not strangers:
            return None
        return f"against entries made by {', '.join(strangers)}, which this test does not use"

    def _note_order(self, item: pytest.Item) -> None:
        """Read the order note while the test's fixtures live (the last test of a module
        is reported after its module's fixtures are torn down)."""
        if item.stash.get(TRACKER_KEY, None) is not None:
            item.stash[ORDER_KEY] = self._contained(self.order_note, item)

    def order_note(self, item: pytest.Item) -> str | None:
        """The other direction of the edge: a fixture this test uses was set up as a
        recompile against a live fixture the test does not use, so what the test starts
        from (and may count) differs from a run of the test alone."""
        used = used_fixtures(item)
        notes = [
            f"{fixture.describe()} was set up against entries of {other.describe()}"
            for fixture in self.ledger.fixtures
            if fixture.name in used
            for other in fixture.against
            if other.name not in used
        ]
        if not notes:
            return None
        return f"{'; '.join(notes)}, which this test does not use: alone, it may count otherwise"

    def _full_reset_if_pending(self) -> None:
        if self.reset_pending:
            self.reset_pending = False
            entries.reset_caches()
            if self.tracker is not None:
                self.tracker.rearm()

    # -- child processes ------------------------------------------------------------------------

    def _announce(self, kind: str | None, name: str = "") -> str | None:
        """Tell children who owns their compiles from now on (None: nobody)."""
        if self.spool is None:
            return None
        if kind is None:
            self._contained(self.spool.silence)
            return None
        return self._contained(self.spool.announce, kind, name, None, "report-only")  # type: ignore[no-any-return]

    def _announce_test(self) -> None:
        if self.spool is not None:
            self._contained(self.spool.resume, self.test_token)

    def _children(self, tokens: list[str | None]) -> list[dict[str, Any]]:
        """The records children left for these owners."""
        if self.spool is None or not any(tokens):
            return []
        found = self._contained(self.spool.processes, [t for t in tokens if t])
        for fault in self.spool.faults:
            self.ledger.fault(fault)
        self.spool.faults.clear()
        return found or []

    def _note_children(self, item: pytest.Item, tracker: RecompileTracker) -> list[dict[str, Any]]:
        """Read the test's children's records; functions they compiled are not unknown."""
        children = self._children([self.test_token])
        item.stash[PROCESSES_KEY] = children
        tracker.elsewhere = frozenset(
            name for p in children for fn in p["functions"] for name in (fn["name"], fn["qualname"])
        )
        return children

    def _children_verdict(
        self, item: pytest.Item, tracker: RecompileTracker
    ) -> tuple[str | None, str | None]:
        """The children's broken rules (to fail with) and what is only told."""
        children = self._note_children(item, tracker)
        fail = processes.failure_lines(children)
        told = processes.notes(children)
        diverged = processes.divergence(children)
        same = tracker.budget.same_across_ranks if tracker.budget is not None else None
        if diverged and same:
            fail.append(f"{PREFIX} {diverged} ({same})")
        elif diverged:
            told.append(diverged)
        return "\n".join(fail) or None, "\n".join(told) or None

    # -- phases ---------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        budget = item.stash.get(BUDGET_KEY, None)
        self._listen()
        item.stash[FIXTURES_KEY] = []
        isolated = not self.settings.keep_caches and (budget is not None or _uses_fixture(item))
        if isolated:
            if self.keeps_entries:
                self._contained(self.ledger.isolate)
            else:
                self.reset_pending = True
        self.item = item
        self.test_owner = Owner("test", item.nodeid)
        self.ledger.phase = [self.test_owner]
        if budget is not None:
            tracker = RecompileTracker(
                budget, mode=self.settings.mode, reset=False, warm_start=True, listen=False
            )
            self.tracker = item.stash[TRACKER_KEY] = tracker.start()
            if self.spool is not None:
                self.test_token = self.spool.announce("test", item.nodeid, budget, tracker.mode)
        self.isolating_setup = isolated and self.keeps_entries
        try:
            return (yield)
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture went over budget
            stopped = exc
        finally:
            self.isolating_setup = False
            self._note_order(item)
        if self.tracker is not None:
            self.tracker.judged = len(self.tracker.violations())
        _fail(stopped, item)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        if fixturedef.scope == "function":
            self._full_reset_if_pending()
            return (yield)
        owner = Owner("fixture", fixturedef.argname, fixturedef.scope, request.node.nodeid)
        tracker = RecompileTracker(mode="report-only", reset=False, warm_start=True, listen=False)
        if self.tracker is not None:
            self.tracker.pause()
        self._contained(self.ledger.enter, owner)
        self.fixture_trackers.append(tracker.start())
        token = self._announce("fixture", owner.describe())
        try:
            with self._own_rules_off():
                return (yield)
        finally:
            self.fixture_trackers.pop()
            tracker.stop()
            self._announce_test()
            self._contained(self.ledger.leave, owner)
            if self.tracker is not None:
                self.tracker.resume()
            self.live[id(fixturedef)] = owner
            fixturedef.addfinalizer(functools.partial(self._teardown_begins, fixturedef, owner))
            children = self._children([token])
            if (tracker.records or children) and self.item is not None:
                result = fixture_result(owner, tracker.records, tracker.graph_breaks)
                result["processes"] = children
                result["recompiles"] += sum(p["recompiles"] for p in children)
                self.item.stash[FIXTURES_KEY].append(result)

    @contextlib.contextmanager
    def _own_rules_off(self) -> Iterator[None]:
        """A wider fixture's set-up is not the test's: no fullgraph from the test's rules."""
        budget = self.tracker.budget if self.tracker is not None else None
        if budget is None or not budget.fullgraph or not versions.can_error_on_graph_break():
            yield
            return
        with instruments.error_on_graph_break(False):
            yield

    def _teardown_begins(self, fixturedef: pytest.FixtureDef[Any], owner: Owner) -> None:
        """A wider fixture's teardown is about to run: compiles there belong to no test."""
        dropped = Owner("dropped", f"teardown of {owner.describe()}")
        self.tearing[id(fixturedef)] = dropped
        self.ledger.enter(dropped)
        self._announce(None)

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        dropped = self.tearing.pop(id(fixturedef), None)
        if dropped is not None:
            self.ledger.leave(dropped)
            self._announce_test()
        owner = self.live.pop(id(fixturedef), None)
        if owner is None:
            return
        self.ledger.fixture_gone(owner)
        if self.isolating_setup:
            # Torn down while a test is set up (a parametrized module fixture moving to its
            # next value): its entries go now, before this test's own phases start.
            self._contained(self.ledger.isolate)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        self._full_reset_if_pending()
        tracker = item.stash.get(TRACKER_KEY, None)
        if tracker is None:
            return (yield)
        state = instruments.compile_state()
        failure: BaseException | None = None
        try:
            result = yield
        except BaseException as exc:
            failure = exc
        finally:
            _restore(item, state)
            self._note_order(item)
        children, told = self._contained(self._children_verdict, item, tracker) or (None, None)
        decided = tracker.outcome(failure, str(item.config.rootpath))
        section = decided.section
        fail = decided.fail
        item.stash[CHILDREN_FAILED_KEY] = ""  # an earlier attempt's (reruns) is not this one's
        if children and self.settings.enforced:
            children = "\n".join(filter(None, [children, told and _indented(told)]))
            item.stash[CHILDREN_FAILED_KEY] = children  # unittest reports its own error
            fail = "\n".join(filter(None, [fail, children, _raised(failure)]))
        elif fail:
            fail = "\n".join(filter(None, [fail, told and _indented(told)]))
        else:
            section = "\n".join(filter(None, [section, children, told]))
        if section:
            item.add_report_section("call", "recompile", section)
        if fail:  # outside the except block: no chained torch traceback
            pytest.fail(fail, pytrace=False)
        if failure is not None:
            raise failure
        return result

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        tracker = item.stash.get(TRACKER_KEY, None)
        stopped: RecompileBudgetExceeded | None = None
        try:
            result = yield
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture's teardown
            stopped = exc
        finally:
            self.ledger.phase = []
            self.test_owner = None
            self.item = None
            self.tracker = None
            if tracker is not None:
                self._note_children(item, tracker)
            self.test_token = None
            self._announce(None)
            if tracker is not None:
                tracker.stop()
        if stopped is not None:
            _fail(stopped, item)
        if tracker is not None and self.settings.enforced:
            found = tracker.violations()
            if len(found) > tracker.judged:  # compiles in teardown broke the rules
                pytest.fail(failure_message(tracker.records, found), pytrace=False)
        return result

    # -- reports --------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        fixtures = item.stash.get(FIXTURES_KEY, None)
        if call.when == "setup" and fixtures:
            report.recompile_fixtures = fixtures  # type: ignore[attr-defined]
        if call.when == "teardown" and item.stash.get(BUDGET_KEY, None) is not None:
            report.recompile_gated = True  # type: ignore[attr-defined]
        tracker = item.stash.get(TRACKER_KEY, None)
        if tracker is not None and (call.when != "setup" or report.failed):
            data = self._contained(self.results, item, tracker)
            if data is not None:
                report.recompile = data  # type: ignore[attr-defined]
                if call.when == "teardown":
                    report.user_properties = junit_properties(item, data)
        if self.degraded:  # told once per process; the summary says each line once
            report.recompile_degraded = self.degraded  # type: ignore[attr-defined]
            self.degraded = []
        faults = self.ledger.take_faults()
        if faults:  # told once, on the report of the phase they happened in
            report.recompile_faults = [f"{item.nodeid}: {f}" for f in faults]  # type: ignore[attr-defined]
        stopped = call.excinfo.value if call.excinfo is not None else None
        children = item.stash.get(CHILDREN_FAILED_KEY, None) if call.when == "call" else None
        if children and report.failed and not isinstance(stopped, pytest.fail.Exception):
            # unittest put its own error in place of the gate's failure: show both
            report.longrepr = "\n".join(filter(None, [children, _raised(stopped)]))
        elif isinstance(stopped, RecompileGateError) and not stopped.from_child and report.failed:
            # Raised where pytest did not let the gate's hooks catch it (unittest, a thread,
            # a subtest): show the gate's message alone, not torch's frames.
            report.longrepr = stopped_message(stopped, str(item.config.rootpath))
        return report

    def results(self, item: pytest.Item, tracker: RecompileTracker) -> TestSummary:
        """The test's results so far: they travel on its reports (so under xdist too)."""
        return summarize_test(
            tracker.records,
            tracker.budget,
            tracker.violations(),
            tracker.graph_breaks,
            baseline=self.settings.baseline_counts.get(item.nodeid),
            device=instruments.device_summary(),
            cudagraph_recordings=tracker.cudagraph_recordings,
            isolation=self.isolation,
            stopped_at=tracker.stopped_at,
            refused=tracker.refused,
            order_note=item.stash.get(ORDER_KEY, None),
            processes=item.stash.get(PROCESSES_KEY, None),
        )

    @property
    def isolation(self) -> str:
        if self.settings.keep_caches:
            return "off"
        return "entries" if self.keeps_entries else "reset"


def _uses_fixture(item: pytest.Item) -> bool:
    return "recompiles" in getattr(item, "fixturenames", ())


def used_fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses: those it names, and those it asked for with
    ``request.getfixturevalue`` (its request's active fixtures)."""
    names = set(getattr(item, "fixturenames", ()))
    request = getattr(item, "_request", None)
    names.update(getattr(request, "fixturenames", None) or ())
    return names


class QuietTrace:
    """Inside pytest's log capture (so registered beside the Gate, innermost): gated tests'
    phases run without pytest's handlers on torch's structured-trace logger."""

    def _quiet(self, item: pytest.Item) -> Generator[None, None, None]:
        if item.stash.get(BUDGET_KEY, None) is None:
            return (yield)
        with instruments.trace_log_uncaptured():
            return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))


class RecompileStateLeak(pytest.PytestWarning):
    """A gated test left torch.compile's stance or Dynamo's config changed."""


def _restore(item: pytest.Item, state: instruments.CompileState) -> None:
    """Undo what the test body left changed, so later tests are judged under the same rules."""
    leaked = instruments.restore_compile_state(state)
    if leaked:
        path, lineno, _ = item.reportinfo()  # shown at the test, not at this module
        warnings.warn_explicit(
            RecompileStateLeak(
                f"{PREFIX} {item.nodeid} left {', '.join(leaked)} behind; restored it, so that "
                "later tests are judged under the same settings"
            ),
            RecompileStateLeak,
            str(path),
            (lineno or 0) + 1,
        )


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _raised(failure: BaseException | None) -> str | None:
    """The test's own exception, named beside its children's failures (never hidden)."""
    if failure is None or isinstance(failure, RecompileGateError):
        return None
    first = (str(failure).strip().splitlines() or [""])[0]
    return f"  the test itself raised {type(failure).__name__}: {first[:200]}"


def _fail(stopped: RecompileBudgetExceeded, item: pytest.Item) -> NoReturn:
    """Fail the test with the gate's message alone (torch's frames are no help to the user)."""
    pytest.fail(stopped_message(stopped, str(item.config.rootpath)), pytrace=False)
