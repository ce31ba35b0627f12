"""The contained call every gate step goes through (pure: no torch)."""

from __future__ import annotations

from pytest_recompile.model.faults import Faults


class Loud:
    """A callable with no ``__name__`` whose repr is counted (a bound method's repr holds
    its object's: the gate's Ledger, thousands of characters late in a session)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.reprs = 0

    def __call__(self, value: int) -> int:
        if self.fail:
            raise ValueError("boom")
        return value + 1

    def __repr__(self) -> str:
        self.reprs += 1
        return "<loud>"


def test_a_call_that_succeeds_never_words_its_step() -> None:
    faults, action = Faults(), Loud(fail=False)
    assert faults.call(action, 1) == 2
    assert action.reprs == 0
    assert faults.take() == []


def test_a_failed_call_is_named_once_and_returns_none() -> None:
    faults, action = Faults(), Loud(fail=True)
    assert faults.call(action, 1) is None
    assert faults.call(action, 1) is None
    assert faults.take() == ["internal error in <loud>: ValueError: boom; the gate went on"]
    assert faults.take() == []


def test_a_named_step_is_named_by_its_name() -> None:
    faults = Faults()

    def isolate() -> None:
        raise KeyError("x")

    faults.call(isolate)
    assert faults.take() == ["internal error in isolate: KeyError: 'x'; the gate went on"]


def test_an_interrupt_is_never_contained() -> None:
    faults = Faults()

    def interrupted() -> None:
        raise KeyboardInterrupt

    try:
        faults.call(interrupted)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("a KeyboardInterrupt must reach pytest")
    assert faults.take() == []
