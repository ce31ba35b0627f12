"""The gate's handling of wider-scoped fixtures (module, class, package, session; unittest's
class and module set-ups): their set-up is recorded under the fixture and charged to no test;
what their set-up and teardown change is not the running test's to restore; a fixture torn
down while a test is set up takes its entries with it. The gate holds one
:class:`WiderFixtures` and hands it the wider fixtures' hooks.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from ._torch import instruments, versions
from .children import parent
from .isolation.ledger import Ledger
from .isolation.owners import Owner
from .isolation.threads import Threads
from .model.faults import Faults
from .recording.freeze import fixture_result
from .recording.tracker import RecompileTracker
from .testrun import TestRun


class WiderFixtures:
    """Wider fixtures' set-up and teardown, as the gate follows them: the ledger records
    their compiles under them, each set-up has a tracker of its own, and the running test
    (``current()``, the gate's) keeps what it started from."""

    def __init__(
        self,
        ledger: Ledger,
        faults: Faults,
        threads: Threads,
        children: parent.Children,
        current: Callable[[], TestRun | None],
    ) -> None:
        self.ledger = ledger
        self.faults = faults
        self.threads = threads
        self.children = children
        self.current = current  # the test whose phases are running
        self.trackers: list[RecompileTracker] = []  # wider fixtures being set up
        # wider fixtures being torn down -> the compile state before their teardown
        self.teardown_states: dict[int, instruments.CompileState | None] = {}

    @property
    def tracker(self) -> RecompileTracker | None:
        """The tracker of the innermost wider fixture being set up (None: none is)."""
        return self.trackers[-1] if self.trackers else None

    def _running_tracker(self) -> RecompileTracker | None:
        run = self.current()
        return run.tracker if run is not None else None

    def _announce_test(self) -> None:
        """Children's compiles go back to the running test (to nobody between tests)."""
        run = self.current()
        self.children.resume(run.token if run is not None else None)

    def setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        """A wider fixture's set-up: recorded under the fixture, charged to no test."""
        owner = Owner("fixture", fixturedef.argname, fixturedef.scope, request.node.nodeid)
        alive = self.threads.alive()
        tracker = RecompileTracker(
            mode="report-only", reset=False, warm_start=True, listen=False
        ).share_faults(self.faults)
        running = self._running_tracker()
        if running is not None:
            running.pause()
        self.faults.call(self.ledger.enter, owner)
        self.trackers.append(tracker.start())
        token = self.children.announce("fixture", owner.describe())
        before = self._state_now()
        try:
            with self._own_rules_off():
                return (yield)
        finally:
            self._theirs(before)
            self.threads.fixture_started(alive, f"fixture {owner.describe()}")
            self.trackers.pop()
            tracker.stop()
            self._announce_test()
            self.faults.call(self.ledger.leave, owner)
            if running is not None:
                running.resume()
            self.ledger.set_up(id(fixturedef), owner)
            fixturedef.addfinalizer(
                functools.partial(self.ledger.teardown_begins, id(fixturedef), owner)
            )
            fixturedef.addfinalizer(functools.partial(self._tearing_down, id(fixturedef)))
            fixturedef.addfinalizer(
                functools.partial(self.threads.fixture_ended, f"fixture {owner.describe()}")
            )
            fixturedef.addfinalizer(self.children.silence)
            self.faults.call(self._note_fixture, owner, tracker, token)

    def _note_fixture(self, owner: Owner, tracker: RecompileTracker, token: str | None) -> None:
        """What a wider fixture compiled while set up, on the report of the test it ran for."""
        children = self.children.records([token])
        run = self.current()
        if (tracker.records or children) and run is not None:
            result = fixture_result(
                owner.describe(),
                owner.name,
                owner.scope,
                owner.location,
                tracker.records,
                tracker.graph_breaks,
                children,
            )
            run.fixtures.append(result)

    def _leak_baseline(self) -> instruments.CompileState | None:
        """What the running gated test started from, for its leak check (None: no such test)."""
        run = self.current()
        return run.start_state if run is not None else None

    def _state_now(self) -> instruments.CompileState | None:
        """The compile state now, while a gated test runs (its leak check needs it)."""
        if self._leak_baseline() is None:
            return None
        return self.faults.call(instruments.compile_state)

    def _tearing_down(self, key: int) -> None:
        self.teardown_states[key] = self._state_now()

    def _theirs(self, before: instruments.CompileState | None) -> None:
        """A wider fixture's set-up or teardown ran since ``before``: what it changed is not
        the running test's to restore."""
        run = self.current()
        saved = run.start_state if run is not None else None
        if before is None or saved is None or run is None:
            return
        after = self.faults.call(instruments.compile_state)
        if after is not None:
            run.start_state = self.faults.call(instruments.rebased, saved, before, after) or saved

    @contextlib.contextmanager
    def _own_rules_off(self) -> Iterator[None]:
        """A wider fixture's set-up is not the test's: no fullgraph from the test's rules."""
        running = self._running_tracker()
        budget = running.budget if running is not None else None
        if budget is None or not budget.fullgraph or not versions.can_error_on_graph_break():
            yield
            return
        with instruments.error_on_graph_break(False):
            yield

    def torn_down(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        """A fixture's finalizers ran (any scope: only a wider fixture's matter here)."""
        self._theirs(self.teardown_states.pop(id(fixturedef), None))
        ended_teardown, gone = self.ledger.torn_down(id(fixturedef))
        if ended_teardown:
            self._announce_test()
        run = self.current()
        if gone and run is not None and run.isolating_setup:
            # Torn down while a test is set up (a parametrized module fixture moving to its
            # next value): its entries go now, before this test's own phases start.
            self.faults.call(self.ledger.isolate, self.ledger.using, begins=False)


def uses_recompiles(item: pytest.Item) -> bool:
    return "recompiles" in getattr(item, "fixturenames", ())


def used_fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses: those it names, and those it asked for with
    ``request.getfixturevalue`` (its request's active fixtures)."""
    names = set(getattr(item, "fixturenames", ()))
    request = getattr(item, "_request", None)
    names.update(getattr(request, "fixturenames", None) or ())
    return names
