"""The gate: the per-test phases (isolation, tracking, judging), registered only when
something is gated.

Each hook hands off: who compiled what, and which entries a test starts from, to the
:class:`~pytest_recompile.isolation.Ledger`; recording to a
:class:`~pytest_recompile.tracker.RecompileTracker` per test and per wider fixture's set-up;
judgement to the test's :class:`~pytest_recompile.outcome.TestVerdict`; child processes to the
:class:`~pytest_recompile.processes.Spool`; the session's results to
:mod:`pytest_recompile.session`. Importing this module imports no torch (the first gated test
does); :mod:`pytest_recompile.plugin` imports it only when the gate is asked for.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

import pytest

from . import child, processes
from ._torch import entries, events, hooks, instruments, versions
from .budgets import assign_budgets
from .isolation import Compiled, Ledger, Owner
from .messages import failure_message
from .names import PREFIX
from .notices import RecompileStateLeak, warn_at
from .outcome import TestVerdict, raised
from .report import junit_properties
from .results import ProcessResult, TestResult
from .settings import BUDGET_KEY, FIXTURES_KEY, VERDICT_KEY, Settings
from .tally import fixture_result, result_for_test
from .threads import Threads
from .tracker import RecompileBudgetExceeded, RecompileGateError, RecompileTracker, stopped_message

# What the running gated test started from (torch.compile's stance, Dynamo's config): what
# is different after its teardown, its own finalizers included, it left behind.
STATE_KEY: pytest.StashKey[instruments.CompileState] = pytest.StashKey()


class Gate:
    """Tracks compiles in every gated test and judges them; keeps each test's starting
    state to what its live wider fixtures compiled (see :mod:`pytest_recompile.isolation`)."""

    def __init__(self, settings: Settings, *, worker: bool = False) -> None:
        self.settings = settings
        self.worker = worker  # a pytest-xdist worker: it cannot stop the session itself
        self.ledger = Ledger()
        self.tracker: RecompileTracker | None = None  # the running test's (or its fixture's)
        self.item: pytest.Item | None = None  # the test whose phases are running
        self.test_owner: Owner | None = None
        self.fixture_trackers: list[RecompileTracker] = []  # wider fixtures being set up
        self.isolating_setup = False  # an isolated test's set-up is running
        self.keeps_entries = True  # False: this torch needs a full reset instead
        self.reset_pending = False  # the full reset waits until the wider fixtures are set up
        self._unhook: Any = None
        self._unstop: Any = None
        self.spool: processes.Spool | None = None  # children's records (processes on)
        self.test_token: str | None = None  # what children's compiles go to now, if gated
        self.degraded: list[str] = []  # features this torch lacks, told once on a report
        self.threads = Threads()
        # wider fixtures being torn down -> the compile state before their teardown
        self.teardown_states: dict[int, instruments.CompileState | None] = {}

    # -- hooks: each hands off ------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        assign_budgets(items, self.settings)

    def pytest_unconfigure(self) -> None:
        self.close()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self.setup_phase(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        if fixturedef.scope == "function":
            self._full_reset_if_pending()
            return (yield)
        return (yield from self.wider_fixture_setup(fixturedef, request))

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        self._theirs(self.teardown_states.pop(id(fixturedef), None))
        ended_teardown, gone = self.ledger.torn_down(id(fixturedef))
        if ended_teardown:
            self._announce_test()
        if gone and self.isolating_setup:
            # Torn down while a test is set up (a parametrized module fixture moving to its
            # next value): its entries go now, before this test's own phases start.
            self._contained(functools.partial(self.ledger.isolate, self.ledger.using, begins=False))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        self._full_reset_if_pending()
        verdict = item.stash.get(VERDICT_KEY, None)
        if verdict is None:
            return (yield)
        return (yield from self.call_phase(item, verdict))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self.teardown_phase(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._contained(self.annotate, item, call, report)
        self.attach_faults(item, report)
        return report

    # -- session --------------------------------------------------------------------------------

    def _listen(self) -> None:
        """Start seeing every compile (once per session, before the first test runs)."""
        if self._unhook is not None:
            return
        try:
            versions.check_torch()
        except versions.TorchUnsupported as exc:
            if self.worker:  # pytest.exit in an xdist worker crashes the controller
                raise pytest.UsageError(str(exc)) from None
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)  # no test is judged
        self.keeps_entries = versions.can_keep_entries()
        self.ledger.reuse = self.keeps_entries and bool(
            self._contained(versions.can_reuse_compiles)
        )
        self.ledger.on_reuse = self.on_reuse
        self.degraded = self._contained(versions.degraded_lines) or []
        self._unhook = hooks.install_compile_hook(self.on_compile)
        self._unstop = hooks.on_stopped(self.on_stopped)
        self._contained(self.ledger.start)
        child.watch_forks()  # a fork of this process records as a child, or not at all
        if self.settings.processes:
            self.spool = processes.Spool()

    def close(self) -> None:
        """The session ends. A run ended mid-test (KeyboardInterrupt, pytest.exit) skips
        teardown: trackers stop here."""
        for tracker in [self.tracker, *self.fixture_trackers]:
            if tracker is not None:
                tracker.stop()
        if self._unhook is not None:
            self._unhook()
            self._unstop()
            self._unhook = None
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    # -- compiles -------------------------------------------------------------------------------

    def on_compile(self, event: events.CompileEvent) -> None:
        """Every compile of the session: who owns it, and the tracker that records it."""
        again = self._contained(self.ledger.compiled_again, event)
        owner = self._contained(self.ledger.note, event) or self.ledger.current
        if self._contained(self.threads.leftover, event):  # never the running test's
            return
        tracker = self._tracker_of(owner)
        if owner.kind == "fixture" and event.is_recompile and tracker is not None:
            self._contained(self.ledger.note_against, owner, event)
        if tracker is not None:
            tracker.on_compile(event, again=again)

    def on_stopped(self, event: events.CompileEvent) -> None:
        """A compile a warm block stopped: the running phase's, counted as stopped."""
        if self._contained(self.threads.leftover, event):
            return
        tracker = self._tracker_of(self.ledger.current)
        if tracker is not None:
            self._contained(tracker.on_stopped, event)

    def on_reuse(self, owner: Owner, made: Compiled) -> None:
        """An earlier test's first compile answered a call of this phase: recorded as its
        compile, reused (inside torch's guard evaluation: contained, never raises)."""
        tracker = self._tracker_of(owner)
        if tracker is not None:
            self._contained(tracker.on_reuse, made.event, made.seconds)

    def _tracker_of(self, owner: Owner) -> RecompileTracker | None:
        if owner.kind == "fixture" and self.fixture_trackers:
            return self.fixture_trackers[-1]
        if owner is self.test_owner and self.tracker is not None and self.tracker.active:
            return self.tracker
        return None

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

    def _children(self, tokens: list[str | None]) -> list[ProcessResult]:
        """The records children left for these owners."""
        if self.spool is None or not any(tokens):
            return []
        found = self._contained(self.spool.processes, [t for t in tokens if t])
        for fault in self.spool.faults:
            self.ledger.fault(fault)
        self.spool.faults.clear()
        return found or []

    def _note_children(self, verdict: TestVerdict) -> None:
        verdict.note_children(self._children([self.test_token]))

    # -- phases ---------------------------------------------------------------------------------

    def setup_phase(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            self.begin_test(item)
        except pytest.UsageError as exc:  # an xdist worker's torch lacks what the gate reads
            yield  # the other plugins' set-up runs, so that their teardown finds it
            raise exc from None
        try:
            return (yield)
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture went over budget
            stopped = exc
        finally:
            self.isolating_setup = False
        verdict = item.stash.get(VERDICT_KEY, None)
        if verdict is not None:
            verdict.judge_now()
        _fail(stopped, item)

    def begin_test(self, item: pytest.Item) -> None:
        """Before a test's set-up: isolate it, and start its tracker if it is gated."""
        budget = item.stash.get(BUDGET_KEY, None)
        self._listen()
        item.stash[FIXTURES_KEY] = []
        isolated = not self.settings.keep_caches and (budget is not None or _uses_fixture(item))
        if isolated:
            if self.keeps_entries:
                self._contained(self.ledger.isolate, frozenset(used_fixtures(item)))
            else:
                self.reset_pending = True
        self.ledger.reusing = isolated and self.keeps_entries
        self.threads.begin(item.nodeid)
        self.item = item
        self.test_owner = Owner("test", item.nodeid)
        self.ledger.phase = [self.test_owner]
        if budget is not None:
            tracker = RecompileTracker(
                budget, mode=self.settings.mode, reset=False, warm_start=True, listen=False
            )
            self.tracker = tracker.start()
            item.stash[VERDICT_KEY] = TestVerdict(tracker)
            item.stash[STATE_KEY] = instruments.compile_state()
            if self.spool is not None:
                self.test_token = self.spool.announce("test", item.nodeid, budget, tracker.mode)
        self.isolating_setup = isolated and self.keeps_entries

    def wider_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        """A wider fixture's set-up: recorded under the fixture, charged to no test."""
        owner = Owner("fixture", fixturedef.argname, fixturedef.scope, request.node.nodeid)
        alive = self.threads.alive()
        tracker = RecompileTracker(mode="report-only", reset=False, warm_start=True, listen=False)
        if self.tracker is not None:
            self.tracker.pause()
        self._contained(self.ledger.enter, owner)
        self.fixture_trackers.append(tracker.start())
        token = self._announce("fixture", owner.describe())
        before = self._state_now()
        try:
            with self._own_rules_off():
                return (yield)
        finally:
            self._theirs(before)
            self.threads.fixture_started(alive, f"fixture {owner.describe()}")
            self.fixture_trackers.pop()
            tracker.stop()
            self._announce_test()
            self._contained(self.ledger.leave, owner)
            if self.tracker is not None:
                self.tracker.resume()
            self.ledger.set_up(id(fixturedef), owner)
            fixturedef.addfinalizer(
                functools.partial(self.ledger.teardown_begins, id(fixturedef), owner)
            )
            fixturedef.addfinalizer(functools.partial(self._tearing_down, id(fixturedef)))
            fixturedef.addfinalizer(
                functools.partial(self.threads.fixture_ended, f"fixture {owner.describe()}")
            )
            fixturedef.addfinalizer(functools.partial(self._announce, None))
            self._contained(self._note_fixture, owner, tracker, token)

    def _note_fixture(self, owner: Owner, tracker: RecompileTracker, token: str | None) -> None:
        """What a wider fixture compiled while set up, on the report of the test it ran for."""
        children = self._children([token])
        if (tracker.records or children) and self.item is not None:
            result = fixture_result(owner, tracker.records, tracker.graph_breaks, children)
            self.item.stash[FIXTURES_KEY].append(result)

    def _leak_baseline(self) -> instruments.CompileState | None:
        """What the running gated test started from, for its leak check (None: no such test)."""
        return self.item.stash.get(STATE_KEY, None) if self.item is not None else None

    def _state_now(self) -> instruments.CompileState | None:
        """The compile state now, while a gated test runs (its leak check needs it)."""
        if self._leak_baseline() is None:
            return None
        return self._contained(instruments.compile_state)  # type: ignore[no-any-return]

    def _tearing_down(self, key: int) -> None:
        self.teardown_states[key] = self._state_now()

    def _theirs(self, before: instruments.CompileState | None) -> None:
        """A wider fixture's set-up or teardown ran since ``before``: what it changed is not
        the running test's to restore."""
        saved = self._leak_baseline()
        if before is None or saved is None or self.item is None:
            return
        after = self._contained(instruments.compile_state)
        if after is not None:
            self.item.stash[STATE_KEY] = (
                self._contained(instruments.rebased, saved, before, after) or saved
            )

    @contextlib.contextmanager
    def _own_rules_off(self) -> Iterator[None]:
        """A wider fixture's set-up is not the test's: no fullgraph from the test's rules."""
        budget = self.tracker.budget if self.tracker is not None else None
        if budget is None or not budget.fullgraph or not versions.can_error_on_graph_break():
            yield
            return
        with instruments.error_on_graph_break(False):
            yield

    def call_phase(self, item: pytest.Item, verdict: TestVerdict) -> Generator[None, None, None]:
        failure: BaseException | None = None
        try:
            result = yield
        except BaseException as exc:
            failure = exc
        self._contained(self._note_children, verdict)
        own = verdict.outcome(failure, str(item.config.rootpath))
        enforced = self.settings.enforced
        decided = self._contained(verdict.with_children, own, failure, enforced) or own
        if decided.section:
            item.add_report_section("call", "recompile", decided.section)
        if decided.fail:  # outside the except block: no chained torch traceback
            pytest.fail(decided.fail, pytrace=False)
        if failure is not None:
            raise failure
        return result

    def teardown_phase(self, item: pytest.Item) -> Generator[None, None, None]:
        verdict = item.stash.get(VERDICT_KEY, None)
        stopped: RecompileBudgetExceeded | None = None
        try:
            result = yield
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture's teardown
            stopped = exc
        finally:
            state = item.stash.get(STATE_KEY, None)
            if state is not None:  # after the test's own finalizers: they may restore it
                del item.stash[STATE_KEY]
                self._contained(_restore, item, state)
            self.end_test(verdict)
        if stopped is not None:
            _fail(stopped, item)
        if verdict is not None and self.settings.enforced:
            late = verdict.late_violations()
            if late:  # compiles in teardown broke the rules
                pytest.fail(failure_message(verdict.tracker.records, late), pytrace=False)
        return result

    def end_test(self, verdict: TestVerdict | None) -> None:
        """After a test's teardown: nobody owns compiles, its tracker stops."""
        self.threads.end()
        self.ledger.phase = []
        self.ledger.reusing = False
        self.test_owner = None
        self.item = None
        self.tracker = None
        if verdict is not None:
            self._contained(self._note_children, verdict)
        self.test_token = None
        self._announce(None)
        if verdict is not None:
            verdict.tracker.stop()

    # -- reports --------------------------------------------------------------------------------

    def annotate(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> None:
        """Put the test's figures, its wider fixtures' compiles and contained faults on the
        report (they travel with it, so under xdist too)."""
        fixtures = item.stash.get(FIXTURES_KEY, None)
        if call.when == "setup" and fixtures:
            report.recompile_fixtures = fixtures
        if call.when == "teardown" and item.stash.get(BUDGET_KEY, None) is not None:
            report.recompile_gated = True
        verdict = item.stash.get(VERDICT_KEY, None)
        if verdict is not None and (call.when != "setup" or report.failed):
            data = self._contained(self.results, item, verdict)
            if data is not None:
                report.recompile = data
                if call.when == "teardown":
                    item.user_properties[:] = junit_properties(item.user_properties, data)
                    report.user_properties = list(item.user_properties)
        if self.degraded:  # told once per process; the summary says each line once
            report.recompile_degraded, self.degraded = self.degraded, []
        self._gate_longrepr(item, call, report, verdict)

    def attach_faults(self, item: pytest.Item, report: Any) -> None:
        """Contained internal errors, told once, on the report of the phase they happened in."""
        faults = self.ledger.take_faults()
        if faults:
            report.recompile_faults = [f"{item.nodeid}: {f}" for f in faults]
        outlived = self._contained(self.threads.take)
        if outlived:
            report.recompile_threads = outlived

    @staticmethod
    def _gate_longrepr(
        item: pytest.Item, call: pytest.CallInfo[None], report: Any, verdict: TestVerdict | None
    ) -> None:
        """Where pytest did not let the gate's hooks fail the test, show the gate's message."""
        stopped = call.excinfo.value if call.excinfo is not None else None
        children = verdict.children_failed if verdict is not None and call.when == "call" else ""
        if children and report.failed and not isinstance(stopped, pytest.fail.Exception):
            # unittest put its own error in place of the gate's failure: show both
            report.longrepr = "\n".join(filter(None, [children, raised(stopped)]))
        elif isinstance(stopped, RecompileGateError) and not stopped.from_child and report.failed:
            # Raised where pytest did not let the gate's hooks catch it (unittest, a thread,
            # a subtest): show the gate's message alone, not torch's frames.
            report.longrepr = stopped_message(stopped, str(item.config.rootpath))

    def results(self, item: pytest.Item, verdict: TestVerdict) -> TestResult:
        """The test's results so far: they travel on its reports (so under xdist too)."""
        tracker = verdict.tracker
        return result_for_test(
            tracker.records,
            tracker.budget,
            verdict.violations(),
            tracker.graph_breaks,
            baseline=self.settings.baseline_counts.get(item.nodeid),
            device=instruments.device_summary(),
            cudagraph_recordings=tracker.cudagraph_recordings,
            isolation=self.isolation,
            stopped_at=verdict.stopped_at,
            refused=verdict.refused,
            processes=verdict.children,
            divergence=verdict.divergence,
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


def _restore(item: pytest.Item, state: instruments.CompileState) -> None:
    """Undo what the test body left changed, so later tests are judged under the same rules."""
    leaked = instruments.restore_compile_state(state)
    if leaked:
        path, lineno, _ = item.reportinfo()  # shown at the test, not at this module
        warn_at(
            RecompileStateLeak(
                f"{PREFIX} {item.nodeid} left {', '.join(leaked)} behind; restored it, so that "
                "later tests are judged under the same settings"
            ),
            str(path),
            (lineno or 0) + 1,
        )


def _fail(stopped: RecompileBudgetExceeded, item: pytest.Item) -> NoReturn:
    """Fail the test with the gate's message alone (torch's frames are no help to the user)."""
    pytest.fail(stopped_message(stopped, str(item.config.rootpath)), pytrace=False)
