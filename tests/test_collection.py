"""Each test's budget is computed once, at collection, and follows the markers a plugin
changes later in collection."""

from __future__ import annotations

import pytest
from snippets import STEP

RECOMPILING = (
    STEP
    + """
@pytest.mark.max_recompiles(0)
def test_marked(recompiles):
    global step
    f(torch.ones(2))
    step = 1
    f(torch.ones(2))
"""
)


def test_a_marker_a_plugin_removes_no_longer_gates(run, pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
def pytest_collection_modifyitems(items):
    for item in items:  # e.g. a CPU job that drops the budgets of a GPU suite
        item.own_markers[:] = [m for m in item.own_markers if m.name != "max_recompiles"]
"""
    )
    result = run(RECOMPILING)
    result.assert_outcomes(passed=1)  # the fixture still runs the gate, ungated here


def test_a_marker_a_plugin_adds_gates(run, pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.max_recompiles(0))
"""
    )
    result = run(RECOMPILING.replace("@pytest.mark.max_recompiles(0)\n", ""))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 recompile of f*budget 0 (@max_recompiles(0))"])


def test_tests_with_the_same_rules_share_one_budget(run, pytester: pytest.Pytester) -> None:
    """A suite's thousands of gated tests hold as many budgets as there are distinct rules
    (each works out its words and JSON once); tests whose rules differ keep their own."""
    pytester.makeconftest(
        """
import pytest
from pytest_recompile.settings import BUDGET_KEY

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    budgets = {item.name: item.stash[BUDGET_KEY] for item in session.items}
    assert budgets["test_a"] is budgets["test_b"]
    assert budgets["test_c"] is not budgets["test_a"]
    assert budgets["test_c"].describe() == "2 in total (@max_recompiles(2))"
"""
    )
    result = run(
        """
def test_a():
    pass

def test_b():
    pass

@pytest.mark.max_recompiles(2)
def test_c():
    pass
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=3)
