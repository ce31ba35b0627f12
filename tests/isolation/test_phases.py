"""Phases: who owns a compile now, and whose compiles the running test sees. Plain owners, no
torch, no pytester: the steps of the worked example in :class:`Phases`' docstring, and the
cases around them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_recompile.isolation.owners import Owner
from pytest_recompile.isolation.phases import Phases

MODEL = 1  # the module fixture's key (its FixtureDef's id, in the gate)


def fixture(name: str, scope: str = "module") -> Owner:
    return Owner("fixture", name, scope, "test_mod.py")


def item(name: str) -> Owner:
    return Owner("test", f"test_mod.py::{name}")


def seen(phases: Phases, *owners: Owner) -> list[Owner]:
    """The owners, of those given, that ``uses`` says yes to."""
    return [owner for owner in owners if phases.uses(owner)]


def test_the_worked_example_step_by_step() -> None:
    phases = Phases()
    outside = phases.outside
    test_a, test_b = item("test_a"), item("test_b")

    # Before the first test: import and collection compile outside any test.
    assert phases.current is outside
    assert seen(phases, outside, test_a, test_b) == [outside]

    # test_a's set-up begins (isolation said it uses model).
    phases.using = frozenset({"model"})
    phases.begin_test(test_a, reusing=True)
    assert phases.stack == [test_a]
    assert phases.current is test_a
    assert seen(phases, outside, test_a, test_b) == [outside, test_a]

    # model's set-up, inside test_a's: the fixture's, and not test_a's.
    model = fixture("model")  # its owner is made as its set-up begins
    everyone = (outside, test_a, test_b, model)
    phases.push(model)
    assert phases.stack == [test_a, model]
    assert phases.current is model
    assert seen(phases, *everyone) == [outside, model]

    # The set-up ends: model is live, and test_a uses it.
    assert phases.pop(model)
    phases.set_up(MODEL, model)
    assert phases.stack == [test_a]
    assert phases.current is test_a
    assert phases.fixtures == [model]
    assert phases.live == {MODEL: model}
    assert seen(phases, *everyone) == [outside, test_a, model]

    # test_a's call changes nothing; then between tests, the last test owns what compiles.
    phases.end_test(test_a)
    assert phases.stack == []
    assert phases.left_by is test_a
    assert phases.current is test_a
    assert not phases.reusing
    assert seen(phases, *everyone) == [outside, test_a, model]

    # Isolation before test_b forgets the last test and says test_b does not use model.
    phases.left_by = None
    phases.using = frozenset()
    assert phases.current is outside
    phases.begin_test(test_b, reusing=True)
    assert phases.current is test_b
    assert seen(phases, *everyone) == [outside, test_b]

    # test_b's teardown tears model down: the teardown's compiles belong to no test.
    dropped = phases.teardown_begins(MODEL, model)
    assert dropped.kind == "dropped"
    assert dropped.name == "teardown of module fixture 'model'"
    assert phases.stack == [test_b, dropped]
    assert phases.current is dropped
    assert seen(phases, *everyone, dropped) == [outside, dropped]

    # Torn down: the teardown phase ended, model is gone.
    assert phases.torn_down(MODEL) == (dropped, model)
    assert phases.stack == [test_b]
    assert phases.current is test_b
    assert not model.live
    assert phases.fixtures == []
    assert phases.live == {}
    assert phases.tearing == {}
    phases.using = None  # not even a test that uses every live fixture sees it now
    assert seen(phases, *everyone, dropped) == [outside, test_b]

    phases.end_test(test_b)
    assert phases.stack == []
    assert phases.current is test_b


def test_phases_nest_and_popping_one_pops_those_inside_it() -> None:
    phases = Phases()
    running, outer, inner = item("test_a"), fixture("outer", "session"), fixture("inner")
    phases.using = frozenset()
    phases.begin_test(running, reusing=False)
    phases.push(outer)
    phases.push(inner)  # outer's set-up requested inner
    assert phases.stack == [running, outer, inner]
    assert phases.current is inner
    assert phases.pop(inner)
    assert phases.current is outer
    assert phases.pop(outer)
    assert phases.current is running
    assert phases.fixtures == [inner, outer]  # oldest (first set up) first
    # A phase that ends with one still open inside it (an error in the set-up) ends both.
    other, nested = fixture("other"), fixture("nested")
    phases.push(other)
    phases.push(nested)
    assert phases.pop(other)
    assert phases.stack == [running]


def test_a_fixture_set_up_in_a_tests_set_up_is_used_by_that_test() -> None:
    phases = Phases()
    running, model = item("test_a"), fixture("model")
    phases.using = frozenset({"tmp_path"})  # as isolation saw it: model is asked for later
    phases.begin_test(running, reusing=True)
    phases.push(model)  # request.getfixturevalue("model") in the test's set-up
    assert not phases.uses(running)
    assert phases.pop(model)
    assert phases.using == {"tmp_path", "model"}
    assert phases.uses(model)


def test_a_fixture_set_up_for_a_test_that_uses_all_leaves_all() -> None:
    phases = Phases()
    running, model = item("test_a"), fixture("model")
    phases.begin_test(running, reusing=False)  # not isolated: using stays None, all
    phases.push(model)
    assert phases.pop(model)
    assert phases.using is None
    assert phases.uses(model)


def test_a_phase_that_is_not_a_live_fixtures_set_up_joins_no_fixtures() -> None:
    phases = Phases()
    running, model = item("test_a"), fixture("model")
    phases.begin_test(running, reusing=False)
    dropped = phases.teardown_begins(MODEL, model)
    assert not phases.pop(dropped)
    phases.push(model)
    model.live = False  # torn down before its set-up ended
    assert not phases.pop(model)
    assert phases.fixtures == []
    assert phases.stack == [running]


def test_the_teardown_phase_owns_compiles_until_torn_down() -> None:
    phases = Phases()
    model = fixture("model", "session")
    phases.push(model)
    assert phases.pop(model)
    phases.set_up(MODEL, model)
    # between tests (the last test's teardown ended): a session fixture's teardown
    last = item("test_z")
    phases.end_test(last)
    dropped = phases.teardown_begins(MODEL, model)
    assert phases.current is dropped
    assert phases.tearing == {MODEL: dropped}
    assert phases.uses(dropped)
    assert not phases.uses(last)
    assert phases.uses(model)  # live until torn down
    assert phases.torn_down(MODEL) == (dropped, model)
    assert phases.current is last  # between tests again


def test_using_none_means_every_live_fixture() -> None:
    phases = Phases()
    a, b = fixture("a"), fixture("b", "class")
    for key, owner in enumerate((a, b)):
        phases.push(owner)
        assert phases.pop(owner)
        phases.set_up(key, owner)
    phases.begin_test(item("test_x"), reusing=False)
    assert phases.using is None
    assert phases.uses(a)
    assert phases.uses(b)
    phases.using = frozenset({"b"})
    assert not phases.uses(a)
    assert phases.uses(b)
    phases.using = frozenset()
    assert not phases.uses(a)
    assert not phases.uses(b)
    assert phases.uses(phases.outside)  # import time's, always


def test_between_tests_the_last_test_owns_compiles() -> None:
    phases = Phases()
    first, second = item("test_a"), item("test_b")
    phases.begin_test(first, reusing=True)
    assert phases.reusing
    assert phases.left_by is None
    phases.end_test(first)
    assert phases.current is first
    assert phases.uses(first)
    assert not phases.uses(second)
    phases.begin_test(second, reusing=False)  # not isolated: nobody forgot left_by first
    assert phases.left_by is None
    assert phases.current is second
    assert not phases.uses(first)


def test_an_earlier_test_is_never_seen_by_a_later_one() -> None:
    phases = Phases()
    first, second = item("test_a"), item("test_b")
    phases.begin_test(first, reusing=False)
    phases.end_test(first)
    phases.begin_test(second, reusing=False)
    phases.push(fixture("model"))
    assert not phases.uses(first)
    assert not phases.uses(second)  # nor the running test, from a fixture's set-up


def test_a_fixture_gone_is_seen_by_no_test() -> None:
    phases = Phases()
    model = fixture("model")
    phases.push(model)
    assert phases.pop(model)
    phases.set_up(MODEL, model)
    assert phases.torn_down(MODEL) == (None, model)  # no teardown phase began: none ended
    assert not model.live
    assert phases.fixtures == []
    assert not phases.uses(model)
    assert not phases.fixture_gone(model)  # gone once
    assert phases.torn_down(MODEL) == (None, None)  # a key no live fixture has


def test_a_fixture_without_a_key_goes_with_fixture_gone() -> None:
    phases = Phases()
    model = fixture("model")
    phases.push(model)
    assert phases.pop(model)
    assert phases.fixture_gone(model)
    assert phases.fixtures == []
    assert not phases.uses(model)


@pytest.mark.subprocess
def test_importing_phases_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "import pytest_recompile.isolation.phases\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
