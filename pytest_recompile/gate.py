"""The gate: the per-test phases (isolation, tracking, judging), registered only when
something is gated.

Each hook hands off: who compiled what, and which entries a test starts from, to the
:class:`~pytest_recompile.isolation.ledger.Ledger`; each test's state to its
:class:`~pytest_recompile.testrun.TestRun` (in its stash; the gate holds only the running
one); recording to a :class:`~pytest_recompile.recording.tracker.RecompileTracker` per test and per
wider fixture's set-up (:mod:`.wider_fixtures`); child processes to
:class:`~pytest_recompile.children.parent.Children`; the session's results, carried by the reports,
to :mod:`pytest_recompile.session`. Importing this module imports no torch."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from ._torch import entries, events, hooks, instruments, versions
from .budgets import assign_budgets
from .children import child, parent
from .isolation.ledger import Ledger
from .isolation.owners import Compiled, Owner
from .isolation.threads import Threads
from .model.faults import Faults
from .model.results import Carried
from .recording.errors import RecompileBudgetExceeded, RecompileGateError, stopped_message
from .recording.tracker import RecompileTracker
from .recording.verdict import TestVerdict, raised
from .reports.junit import junit_properties
from .settings import BUDGET_KEY, RUN_KEY, SETTINGS_KEY, Settings, require_torch
from .testrun import TestRun
from .wider_fixtures import WiderFixtures, used_fixtures, uses_recompiles

if TYPE_CHECKING:
    from .restarts.parent import Restarts


class Gate:
    """Tracks compiles in every gated test and judges them; keeps each test's starting
    state to what its live wider fixtures compiled (see :mod:`.isolation.ledger`)."""

    def __init__(self, settings: Settings, *, worker: bool = False, junit: bool = False) -> None:
        self.settings = settings
        self.worker = worker  # a pytest-xdist worker: it cannot stop the session itself
        self.junit = junit  # --junitxml: each gated test's figures as its user properties
        self.faults = Faults()  # contained internal errors, told once
        self.ledger = Ledger(faults=self.faults)
        self.current: TestRun | None = None  # the test whose phases are running
        self.keeps_entries = True  # False: this torch needs a full reset instead
        self.reset_pending = False  # the full reset waits until the wider fixtures are set up
        self.reset_using: frozenset[str] = frozenset()  # the wider fixtures that test uses
        # what listening installed, undone at close (None: not listening)
        self._listening: contextlib.ExitStack[bool | None] | None = None
        self.children = parent.Children(self.faults)  # their records (processes on)
        self.degraded: list[str] = []  # features this torch lacks, told once on a report
        self.disabled: list[str] = []  # how compile was switched off, told once on a report
        self._switched_off: set[str] = set()  # each told once per process
        self.threads = Threads()
        self.restarts: Restarts | None = None  # warm-start checks, from the first marked test
        self.wider = WiderFixtures(
            self.ledger, self.faults, self.threads, self.children, lambda: self.current
        )

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
        return (yield from self.wider.setup(fixturedef, request))

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        self.wider.torn_down(fixturedef)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        self._full_reset_if_pending()
        run = item.stash.get(RUN_KEY, None)
        if run is None:
            return (yield)
        run.calling = True  # a report made now is a subtest's
        try:
            if run.verdict is None:
                return (yield)
            return (yield from self.call_phase(item, run.verdict))
        finally:
            run.calling = False

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self.teardown_phase(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self.faults.call(self.annotate, item, call, report)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, report: Any) -> Generator[None, Any, Any]:
        """An xdist worker sends what a report carries as one JSON string: execnet's
        serializer walks a nested dict in Python (about 80 us a gated test, both ends), the
        C encoder and decoder take a tenth of that. The controller's summary decodes it."""
        data = yield
        carried = data.get("recompile") if isinstance(data, dict) else None
        if self.worker and isinstance(carried, dict):
            data["recompile"] = json.dumps(carried)
        return data

    # -- session --------------------------------------------------------------------------------

    def _listen(self) -> None:
        """Start seeing every compile (once per session, before the first test runs)."""
        if self._listening is not None:
            return
        try:
            versions.check_torch()
        except versions.TorchUnsupported as exc:
            if self.worker:  # pytest.exit in an xdist worker crashes the controller
                raise pytest.UsageError(str(exc)) from None
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)  # no test is judged
        self.keeps_entries = versions.can_keep_entries()
        reuse = self.keeps_entries and bool(self.faults.call(versions.can_reuse_compiles))
        self.ledger.configure(reuse=reuse, on_reuse=self.on_reuse)
        self.degraded = self.faults.call(versions.degraded_lines) or []
        # Installed last to first, so that close() undoes them (last in, first out) with the
        # compile hook first, then the stopped compiles' callback, then torch's callbacks.
        with contextlib.ExitStack() as undo:  # one fails: those before it are undone here
            undo.callback(instruments.hold_callbacks())  # each test's tracker only joins them
            undo.callback(hooks.on_stopped(self.on_stopped))
            undo.callback(hooks.install_compile_hook(self.on_compile))
            self._listening = undo.pop_all()
        self.faults.call(self.ledger.start)
        child.watch_forks()  # a fork of this process records as a child, or not at all
        if self.settings.processes:
            self.children.open()

    def close(self) -> None:
        """The session ends. A run ended mid-test (KeyboardInterrupt, pytest.exit) skips
        teardown: trackers stop here."""
        for tracker in [self.running_tracker, *self.wider.trackers]:
            if tracker is not None:
                tracker.stop()
        if self._listening is not None:
            self._listening.close()
            self._listening = None
        self.children.close()

    # -- compiles -------------------------------------------------------------------------------

    def on_compile(self, event: events.CompileEvent) -> None:
        """Every compile of the session: who owns it, and the tracker that records it."""
        again = self.faults.call(self.ledger.compiled_again, event)
        owner = self.faults.call(self.ledger.note, event) or self.ledger.current
        if self.faults.call(self.threads.leftover, event):  # never the running test's
            return
        tracker = self._tracker_of(owner)
        if owner.kind == "fixture" and event.is_recompile and tracker is not None:
            self.faults.call(self.ledger.note_against, owner, event)
        if tracker is not None:
            try:
                tracker.on_compile(event, again=again)
            except BaseException:  # fail-fast refused it: torch never began this compile
                self.faults.call(self.ledger.refused, event)
                raise

    def on_stopped(self, event: events.CompileEvent) -> None:
        """A compile a warm block stopped: the running phase's, counted as stopped."""
        if self.faults.call(self.threads.leftover, event):
            return
        tracker = self._tracker_of(self.ledger.current)
        if tracker is not None:
            self.faults.call(tracker.on_stopped, event)

    def on_reuse(self, owner: Owner, made: Compiled) -> None:
        """An earlier test's first compile answered a call of this phase: recorded as its
        compile, reused (inside torch's guard evaluation: contained, never raises)."""
        tracker = self._tracker_of(owner)
        if tracker is not None:
            self.faults.call(tracker.on_reuse, made.event, made.seconds, made.guards, made.work)

    @property
    def running_tracker(self) -> RecompileTracker | None:
        """The tracker the running test's own phases compile into (None: none records)."""
        return self.current.tracker if self.current is not None else None

    def _tracker_of(self, owner: Owner) -> RecompileTracker | None:
        if owner.kind == "fixture" and self.wider.tracker is not None:
            return self.wider.tracker
        run = self.current
        if run is None or owner is not run.owner:
            return None
        tracker = run.tracker
        return tracker if tracker is not None and tracker.active else None

    def adopt(self, tracker: RecompileTracker) -> None:
        """An ungated test's ``recompiles`` fixture: the compiles of the test's own phases go
        to its tracker (never a wider fixture's set-up)."""
        if self.current is not None and self.current.verdict is None:
            self.current.adopted = tracker

    def release(self, tracker: RecompileTracker) -> None:
        if self.current is not None and self.current.adopted is tracker:
            self.current.adopted = None

    def _full_reset_if_pending(self) -> None:
        if self.reset_pending:
            self.reset_pending = False
            # what the test would have alone stands in for torch's emptied lists (its checks)
            in_view = self.faults.call(self.ledger.in_view, self.reset_using)
            entries.reset_caches(in_view)
            tracker = self.running_tracker
            if tracker is not None:
                tracker.rearm()

    # -- warm starts ----------------------------------------------------------------------------

    def _warm_start(self, item: pytest.Item, verdict: TestVerdict) -> None:
        """A ``warm_start`` test, once it passed: run cold, then warm, in fresh processes."""
        budget = verdict.tracker.budget
        rule = budget.warm_start if budget is not None else None
        if rule is None:
            return
        from .model.warm_start import skipped_result

        if not self.settings.warm_start:
            verdict.warm_start = skipped_result(rule, "not checked (--recompile-warm-start=off)")
            return
        if self.restarts is None:
            self.restarts = self.faults.call(self._restarts, item.config)
            if self.restarts is None:
                return
        # the children compile in their own processes: nothing of theirs reaches the tracker
        verdict.warm_start = self.faults.call(
            self.restarts.check, str(item.path), item.nodeid, rule
        )

    def _restarts(self, config: pytest.Config) -> Restarts:
        from .restarts.parent import Restarts

        return Restarts(
            vars(config.option),
            str(config.invocation_params.dir),
            str(config.rootpath),
            self.settings.warm_start_timeout,
        )

    # -- child processes ------------------------------------------------------------------------

    def _note_children(self, run: TestRun) -> None:
        if run.verdict is not None:
            run.verdict.note_children(self.children.records([run.token]))

    # -- phases ---------------------------------------------------------------------------------

    def setup_phase(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            self.begin_test(item)
        except pytest.UsageError as exc:  # an xdist worker's torch lacks what the gate reads
            yield  # the other plugins' set-up runs, so that their teardown finds it
            raise exc from None
        run = item.stash[RUN_KEY]
        try:
            return (yield)
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture went over budget
            stopped = exc
        except BaseException:
            if run.verdict is not None:  # judged: the failed set-up's report carries it
                self.faults.call(run.verdict.judge)
            raise
        finally:
            run.isolating_setup = False
        if run.verdict is not None:
            run.verdict.judge_now()
        _fail(stopped, item)

    def begin_test(self, item: pytest.Item) -> None:
        """Before a test's set-up: isolate it, and start its tracker if it is gated."""
        budget = item.stash.get(BUDGET_KEY, None)
        self._listen()
        if budget is not None:
            self.faults.call(self._note_switched_off)
        isolated = not self.settings.keep_caches and (budget is not None or uses_recompiles(item))
        if isolated:
            if self.keeps_entries:
                self.faults.call(self.ledger.isolate, frozenset(used_fixtures(item)))
            else:
                self.reset_pending = True
                self.reset_using = frozenset(used_fixtures(item))
        self.threads.begin(item.nodeid)
        run = item.stash[RUN_KEY] = self.current = TestRun(Owner("test", item.nodeid))
        self.ledger.begin_test(run.owner, reusing=isolated and self.keeps_entries)
        if budget is not None:
            tracker = RecompileTracker(
                budget,
                mode=self.settings.mode,
                reset=False,
                warm_start=True,
                listen=False,
                certify_marks=self.settings.certify_marks,
            ).share_faults(self.faults)
            run.verdict = TestVerdict(
                tracker.start(),
                baseline=self.settings.baseline_counts.get(item.nodeid),
                baseline_note=self.settings.baseline_note,
                isolation=self.isolation,
            )
            run.start_state = instruments.compile_state()
            run.token = self.children.announce("test", item.nodeid, budget, tracker.mode)
        run.isolating_setup = isolated and self.keeps_entries

    def _note_switched_off(self) -> None:
        """Where torch.compile is switched off for the whole run (the environment, Dynamo's
        config, a stance from a conftest or a wider fixture), say so, once per spelling. Read
        before a test's set-up and after its teardown has restored what the test itself
        changed: a test that runs eagerly on purpose (its own fixture's stance) is not it."""
        off = instruments.compile_switched_off()
        if off and off not in self._switched_off:
            self._switched_off.add(off)
            self.disabled.append(off)

    def call_phase(self, item: pytest.Item, verdict: TestVerdict) -> Generator[None, None, None]:
        failure: BaseException | None = None
        try:
            result = yield
        except BaseException as exc:
            failure = exc
        self.faults.call(self._note_children, item.stash[RUN_KEY])
        if failure is None:  # a test that fails by itself fails with its own error alone
            self._warm_start(item, verdict)
        own = verdict.outcome(failure, str(item.config.rootpath))
        enforced = self.settings.enforced
        decided = self.faults.call(verdict.with_children, own, failure, enforced) or own
        decided = verdict.with_warm_start(decided, enforced)
        if decided.section:
            item.add_report_section("call", "recompile", decided.section)
        if decided.fail:  # outside the except block: no chained torch traceback
            pytest.fail(decided.fail, pytrace=False)
        if failure is not None:
            raise failure
        return result

    def teardown_phase(self, item: pytest.Item) -> Generator[None, None, None]:
        run = item.stash.get(RUN_KEY, None)
        verdict = run.verdict if run is not None else None
        stopped: RecompileBudgetExceeded | None = None
        try:
            result = yield
        except RecompileBudgetExceeded as exc:  # a function-scoped fixture's teardown
            stopped = exc
        finally:
            if run is not None:  # after the test's own finalizers: they may restore it
                self.faults.call(run.restore_state, item)
                if verdict is not None:  # what is still off now, a wider fixture left
                    self.faults.call(self._note_switched_off)
                self.end_test(run)
            if verdict is not None:  # the last judgement: the teardown's report carries it
                self.faults.call(verdict.judge)
        if stopped is not None:
            _fail(stopped, item)
        if verdict is not None and self.settings.enforced:
            late = verdict.late_failure()
            if late:  # compiles in teardown broke the rules
                pytest.fail(late, pytrace=False)
        return result

    def end_test(self, run: TestRun) -> None:
        """After a test's teardown: nobody owns compiles, its tracker stops."""
        self.threads.end()
        entries.forget_dropped()
        # its compiles matched to their entries now, at its own cost
        if self.ledger.has_unmatched_compiles:
            self.faults.call(self.ledger.resolve)
        self.ledger.end_test(run.owner)
        self.current = None
        self.faults.call(self._note_children, run)
        run.token = None
        self.children.silence()
        if run.verdict is not None:
            run.verdict.tracker.stop()

    # -- reports --------------------------------------------------------------------------------

    def annotate(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> None:
        """Put on the report what it carries (:class:`~.model.results.Carried`, one attribute, so
        under xdist too): the test's result on its teardown report, or on the report of the
        phase that failed; its wider fixtures' compiles on its set-up's; what is told once."""
        run = item.stash.get(RUN_KEY, None)
        verdict = run.verdict if run is not None else None
        if run is not None and run.calling:  # a subtest's report: the test's own carry it all
            self._gate_longrepr(item, call, report, verdict)
            return
        when = call.when
        teardown = when == "teardown"
        result = None
        if verdict is not None and (teardown or report.failed):
            result = verdict.result  # frozen at this phase's end
        if result is not None and teardown and self.junit:
            item.user_properties[:] = junit_properties(item.user_properties, result)
            report.user_properties = list(item.user_properties)
        carried: Carried = {}
        if result is not None:
            carried["result"] = result
        if teardown and item.stash.get(BUDGET_KEY, None) is not None:
            carried["gated"] = True  # it ran to its teardown, with or without figures
        if run is not None and when == "setup" and run.fixtures:
            carried["fixtures"] = run.fixtures
        if self.degraded:  # told once per process; the summary says each once
            carried["degraded"], self.degraded = self.degraded, []
        if self.disabled:
            carried["disabled"], self.disabled = self.disabled, []
        if self.faults.new:
            carried["faults"] = [f"{item.nodeid}: {f}" for f in self.faults.take()]
        threads = self.faults.call(self.threads.take) if self.threads.pending else None
        if threads:
            carried["threads"] = threads
        if carried:  # (traces.py adds the folder its trace was kept in)
            report.recompile = carried
        self._gate_longrepr(item, call, report, verdict)
        if teardown and run is not None and self.current is not run:
            # The report carries the result: the run, its tracker and records, is not kept
            # for the rest of the session (a rerun of the test starts a new one).
            del item.stash[RUN_KEY]

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

    @property
    def isolation(self) -> str:
        if self.settings.keep_caches:
            return "off"
        return "entries" if self.keeps_entries else "reset"


class TraceLogUncaptured:
    """Inside pytest's log capture (so registered beside the Gate, innermost): gated tests'
    phases run without pytest's handlers on torch's structured-trace logger."""

    def __init__(self) -> None:
        self._steps: Any = None

    def _quiet(self, item: pytest.Item) -> Generator[None, None, None]:
        if item.stash.get(BUDGET_KEY, None) is None:
            return (yield)
        if self._steps is None:
            self._steps = instruments.trace_log_uncaptured()
        off, back = self._steps
        removed = off()
        try:
            return (yield)
        finally:
            back(removed)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._quiet(item))


def register_gate(config: pytest.Config, settings: Settings) -> None:
    """Check torch (without importing it), then register the per-test hooks, once: xdist's
    looponfail child and plugins that collect again call ``pytest_collection_modifyitems``
    twice, where a marker-only run registers the gate."""
    if config.pluginmanager.has_plugin("recompile-gate"):
        return
    require_torch()
    worker = hasattr(config, "workerinput")
    # JUnit XML reads the properties (under xdist, on the controller: workers have the option)
    junit = bool(getattr(config.option, "xmlpath", None))
    gate = Gate(settings, worker=worker, junit=junit)
    config.pluginmanager.register(gate, "recompile-gate")
    config.pluginmanager.register(TraceLogUncaptured(), "recompile-trace-log-uncaptured")
    if settings.trace is not None:
        from .traces import TraceKeeper

        keeper = TraceKeeper(settings.trace, config, gate.faults)
        config.pluginmanager.register(keeper, "recompile-trace")


def recompiles_fixture(request: pytest.FixtureRequest) -> Generator[RecompileTracker, None, None]:
    """The ``recompiles`` fixture (declared in :mod:`.plugin`): in a gated test, the gate's
    own tracker; otherwise a report-only tracker recording from the fixture's set-up."""
    run = request.node.stash.get(RUN_KEY, None)
    if run is not None and run.verdict is not None and run.verdict.tracker.active:
        yield run.verdict.tracker
        return
    settings = request.config.stash[SETTINGS_KEY]
    # With the gate on, the test already starts from its wider fixtures' state (isolation),
    # and the gate hands this tracker the compiles of the test's own phases alone (never a
    # wider fixture's set-up, even one requested with getfixturevalue).
    gate = request.config.pluginmanager.get_plugin("recompile-gate")
    own = RecompileTracker(
        mode="report-only",
        reset=not (settings.keep_caches or gate),
        warm_start=gate is not None or settings.keep_caches,
        listen=gate is None,
    )
    try:
        own.start()
    except versions.TorchUnsupported as exc:
        pytest.fail(str(exc), pytrace=False)
    if gate is not None:
        gate.adopt(own)
    try:
        yield own
    finally:
        own.stop()
        if gate is not None:
            gate.release(own)


def _fail(stopped: RecompileBudgetExceeded, item: pytest.Item) -> NoReturn:
    """Fail the test with the gate's message alone (torch's frames are no help to the user)."""
    pytest.fail(stopped_message(stopped, str(item.config.rootpath)), pytrace=False)
