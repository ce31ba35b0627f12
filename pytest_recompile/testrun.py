"""One test's run as the gate follows it, from before its set-up to the end of its teardown.

A :class:`TestRun` is made before the test's set-up and held in its stash under one key
(:data:`~pytest_recompile.settings.RUN_KEY`): who owns its compiles, the tracker that records
them, what it started from, its wider fixtures' compiles and, for a gated test, its
:class:`~pytest_recompile.recording.verdict.TestVerdict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ._torch import instruments
from .isolation.owners import Owner
from .model.names import PREFIX
from .model.results import FixtureResult
from .recording.tracker import RecompileTracker
from .recording.verdict import TestVerdict
from .warning_types import RecompileStateLeak, warn_at


@dataclass(eq=False)
class TestRun:
    """One test, from before its set-up to the end of its teardown (see the module)."""

    __test__ = False  # not a test class

    owner: Owner  # the test, as the owner of the compiles its phases make
    verdict: TestVerdict | None = None  # a gated test's: its tracker is the gate's
    adopted: RecompileTracker | None = None  # an ungated test's ``recompiles`` fixture's
    token: str | None = None  # what its child processes' compiles go to
    start_state: Any = None  # what it started from (its leak check); None: not gated
    fixtures: list[FixtureResult] = field(default_factory=list)  # wider fixtures' compiles
    isolating_setup: bool = False  # its set-up runs isolated (fixtures torn down re-isolate)
    calling: bool = False  # its call phase runs (a report made then is a subtest's)

    def restore_state(self, item: pytest.Item) -> None:
        """After its teardown: undo what the test left changed in torch.compile's stance or
        Dynamo's config, so later tests are judged under the same rules, and warn at it."""
        state, self.start_state = self.start_state, None
        leaked = instruments.restore_compile_state(state) if state is not None else None
        if leaked:
            path, lineno, _ = item.reportinfo()  # shown at the test, not at this module
            warn_at(
                RecompileStateLeak(
                    f"{PREFIX} {item.nodeid} left {', '.join(leaked)} behind; restored it, so "
                    "that later tests are judged under the same settings"
                ),
                str(path),
                (lineno or 0) + 1,
            )

    @property
    def tracker(self) -> RecompileTracker | None:
        """The tracker its phases' compiles go to (None: nobody records them)."""
        return self.verdict.tracker if self.verdict is not None else self.adopted
