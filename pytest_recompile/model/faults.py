"""The plugin's contained internal errors: each told once, on the report of the phase it
happened in, in the summary and in the JSON report; never a user's failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Faults:
    """Contained internal errors not yet told; a message told once is not told again."""

    new: list[str] = field(default_factory=list)
    told: set[str] = field(default_factory=set)

    def add(self, message: str) -> None:
        if message not in self.told:
            self.told.add(message)
            self.new.append(message)

    def take(self) -> list[str]:
        """The faults contained since the last call."""
        found, self.new = self.new, []
        return found

    def call(self, action: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R | None:
        """``action(*args, **kwargs)``, contained: an internal error is named once and never
        becomes the test's (None is returned; the gate goes on). A plain ``try``: the gate
        makes some twenty of these calls per test."""
        try:
            return action(*args, **kwargs)
        except Exception as exc:
            # (repr only where there is no name: a bound method's repr holds its object's,
            # the whole Ledger's, and costs a tenth of a millisecond)
            step = getattr(action, "__name__", None) or repr(action)
            self.add(f"internal error in {step}: {type(exc).__name__}: {exc}; the gate went on")
            return None
