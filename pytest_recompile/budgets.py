"""Each test's budget: its markers (its own, its class's, module's and package's) with the
run's settings and baseline, computed once per test at collection and stashed on it.

Imported only when some collected test carries one of the plugin's markers or the gate is on.
A malformed marker is found when its module is collected (:func:`marker_errors`); the budget
computed then is kept, and computed again only if a plugin changed the test's markers later
in collection (:func:`assign_budgets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from .model.budget import Budget, BudgetError, Rule
from .model.markers import budget_from_marks
from .model.names import MARKERS, PREFIX
from .settings import BUDGET_KEY, Settings

# The markers a stashed budget was computed from (their identities), to see a later change.
_FROM: pytest.StashKey[tuple[int, ...]] = pytest.StashKey()
# Each distinct budget, by its repr (a budget is frozen; its repr names every rule): the
# tests share it, and the words and JSON it works out once (a gated suite's thousands of
# tests hold a handful of budgets, not thousands of objects the garbage collector walks).
_BUDGETS: dict[str, Budget] = {}
# The budget of a test without markers or a baseline entry, by the options that decide it.
_UNMARKED: dict[tuple[object, ...], Budget | None] = {}


def _marks(item: pytest.Item) -> dict[str, list[pytest.Mark]]:
    """The plugin's marks on the test and its parents, by name, closest first (one walk of
    its node chain, not one per marker name)."""
    marks: dict[str, list[pytest.Mark]] = {}
    for mark in item.iter_markers():
        if mark.name in MARKERS:
            marks.setdefault(mark.name, []).append(mark)
    return marks


def budget_of(item: pytest.Item, settings: Settings) -> Budget | None:
    """The test's rules, computed once (stashed); raises BudgetError."""
    marks = _marks(item)
    seen = tuple(id(mark) for found in marks.values() for mark in found)
    if item.stash.get(_FROM, None) == seen:
        return item.stash[BUDGET_KEY]
    recorded = settings.baseline_counts.get(item.nodeid)
    guards = settings.baseline_guards.get(item.nodeid)
    work = settings.baseline_work.get(item.nodeid)
    plain = not marks and recorded is None and guards is None and work is None
    key = (settings.default, settings.fullgraph, settings.max_guards)
    if plain and key in _UNMARKED:  # most tests: the run's options alone decide
        budget = _UNMARKED[key]
    else:
        budget = budget_from_marks(
            marks,
            settings.default,
            item.nodeid,
            fullgraph_default=settings.fullgraph,
            baseline=Rule(recorded, "baseline") if recorded is not None else None,
            guards_default=settings.max_guards,
            baseline_guards=guards,
            baseline_work=work,
            work_tolerance=_tolerance(settings) if work else None,
        )
        if budget is not None:  # one object for equal budgets: most tests share one
            budget = _BUDGETS.setdefault(repr(budget), budget)
        if plain:
            _UNMARKED[key] = budget
    item.stash[BUDGET_KEY] = budget
    item.stash[_FROM] = seen
    return budget


def _tolerance(settings: Settings) -> Mapping[str, int]:
    """The run's compile-work tolerance (the defaults where no option gave one)."""
    if settings.work_tolerance is not None:
        return settings.work_tolerance
    from .model.work import DEFAULT_TOLERANCE

    return DEFAULT_TOLERANCE


def marker_errors(items: Iterable[pytest.Item], settings: Settings) -> list[str]:
    """What is wrong with these tests' markers (their budgets are stashed on the way)."""
    errors = []
    for item in items:
        try:
            budget_of(item, settings)
        except BudgetError as exc:
            errors.append(f"{PREFIX} {exc}")
    return errors


def assign_budgets(items: list[pytest.Item], settings: Settings) -> bool:
    """Stash each test's budget; True if any test is gated. Bad markers were collection
    errors already (:func:`pytest_recompile.plugin.pytest_make_collect_report`); one a
    plugin added since is a usage error."""
    errors = marker_errors(items, settings)
    if errors:
        raise pytest.UsageError("\n".join(errors))
    return any(item.stash.get(BUDGET_KEY, None) is not None for item in items)
