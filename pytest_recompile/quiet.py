"""Gated tests' phases run without pytest's log handlers on torch's structured-trace logger
(registered beside the gate, innermost: inside pytest's log capture)."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ._torch import instruments
from .settings import BUDGET_KEY


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
