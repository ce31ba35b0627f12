"""The plugin's contained internal errors: each told once, on the report of the phase it
happened in, in the summary and in the JSON report; never a user's failure."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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

    @contextlib.contextmanager
    def contained(self, step: str) -> Iterator[None]:
        """Run one of the plugin's own steps: an internal error is named once and never
        becomes the test's (the block ends there; the gate goes on)."""
        try:
            yield
        except Exception as exc:
            self.add(f"internal error in {step}: {type(exc).__name__}: {exc}; the gate went on")

    def call(self, action: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R | None:
        """``action(*args, **kwargs)``, contained (None if it failed)."""
        with self.contained(getattr(action, "__name__", repr(action))):
            return action(*args, **kwargs)
        return None
