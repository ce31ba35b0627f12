"""The gate's handling of wider-scoped fixtures (module, class, package, session; unittest's
class and module set-ups): their set-up is recorded under the fixture and charged to no test;
what their set-up and teardown change is not the running test's to restore; a fixture torn
down while a test is set up takes its entries with it.

A mixin of :class:`~pytest_recompile.gate.Gate`: it reads and sets the gate's state below.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from . import processes
from ._torch import instruments, versions
from .faults import Faults
from .isolation import Ledger
from .owners import Owner
from .tally import fixture_result
from .testrun import TestRun
from .threads import Threads
from .tracker import RecompileTracker


class WiderFixtures:
    """Wider fixtures' set-up and teardown, as the gate follows them."""

    ledger: Ledger
    faults: Faults
    current: TestRun | None  # the test whose phases are running
    threads: Threads
    children: processes.Children
    fixture_trackers: list[RecompileTracker]  # wider fixtures being set up
    # wider fixtures being torn down -> the compile state before their teardown
    teardown_states: dict[int, instruments.CompileState | None]

    @property
    def running_tracker(self) -> RecompileTracker | None:
        """The tracker the running test's own phases compile into (None: none records)."""
        return self.current.tracker if self.current is not None else None

    def _announce_test(self) -> None:
        """Children's compiles go back to the running test (to nobody between tests)."""
        self.children.resume(self.current.token if self.current is not None else None)

    def wider_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        """A wider fixture's set-up: recorded under the fixture, charged to no test."""
        owner = Owner("fixture", fixturedef.argname, fixturedef.scope, request.node.nodeid)
        alive = self.threads.alive()
        tracker = RecompileTracker(
            mode="report-only", reset=False, warm_start=True, listen=False
        ).share_faults(self.faults)
        running = self.running_tracker
        if running is not None:
            running.pause()
        self.faults.call(self.ledger.enter, owner)
        self.fixture_trackers.append(tracker.start())
        token = self.children.announce("fixture", owner.describe())
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
        if (tracker.records or children) and self.current is not None:
            result = fixture_result(owner, tracker.records, tracker.graph_breaks, children)
            self.current.fixtures.append(result)

    def _leak_baseline(self) -> instruments.CompileState | None:
        """What the running gated test started from, for its leak check (None: no such test)."""
        return self.current.start_state if self.current is not None else None

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
        saved = self._leak_baseline()
        if before is None or saved is None or self.current is None:
            return
        after = self.faults.call(instruments.compile_state)
        if after is not None:
            self.current.start_state = (
                self.faults.call(instruments.rebased, saved, before, after) or saved
            )

    @contextlib.contextmanager
    def _own_rules_off(self) -> Iterator[None]:
        """A wider fixture's set-up is not the test's: no fullgraph from the test's rules."""
        running = self.running_tracker
        budget = running.budget if running is not None else None
        if budget is None or not budget.fullgraph or not versions.can_error_on_graph_break():
            yield
            return
        with instruments.error_on_graph_break(False):
            yield

    def fixture_torn_down(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        """A fixture's finalizers ran (any scope: only a wider fixture's matter here)."""
        self._theirs(self.teardown_states.pop(id(fixturedef), None))
        ended_teardown, gone = self.ledger.torn_down(id(fixturedef))
        if ended_teardown:
            self._announce_test()
        if gone and self.current is not None and self.current.isolating_setup:
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
