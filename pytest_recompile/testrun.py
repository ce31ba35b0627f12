"""One test's run as the gate follows it, and the gate's verdict on it.

A :class:`TestRun` is made before the test's set-up and held in its stash under one key
(:data:`~pytest_recompile.settings.RUN_KEY`): who owns its compiles, the tracker that records
them, what it started from, its wider fixtures' compiles and, for a gated test, its
:class:`TestVerdict`: judged once at each phase's end, then frozen into the
:class:`~pytest_recompile.results.TestResult` its report carries. The tracker records; this
module holds the gate's judgement, and words the outcome of a phase from the tracker's
violations and the children's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from . import messages, processes
from ._torch import instruments
from .errors import CompiledWhileWarm, RecompileGateError, stopped_message
from .judge import Violation
from .messages import failure_message, violation_result
from .names import PREFIX
from .notices import RecompileStateLeak, warn_at
from .owners import Owner
from .results import FixtureResult, ProcessResult
from .sites import Site, call_frame
from .tracker import RecompileTracker


@dataclass(frozen=True)
class Outcome:
    """What the end of a phase means for the test: fail with ``fail``, or show ``section``
    beside the test's own result, or nothing."""

    fail: str | None = None
    section: str | None = None


@dataclass
class TestVerdict:
    """The gate's judgement of one gated test, kept beside its tracker."""

    __test__ = False  # not a test class, whatever pytest's collection may think of the name

    tracker: RecompileTracker
    found: list[Violation] = field(default_factory=list)  # as judged at the last phase's end
    judged: int = 0  # violations already reported
    stopped_at: Site | None = None  # the call the gate stopped
    refused: str | None = None  # a warm block's refusal that failed the test
    elsewhere: frozenset[str] = frozenset()  # functions compiled in child processes
    children_failed: str = ""  # the children's broken rules this attempt failed with
    children: list[ProcessResult] | None = None  # the records its child processes left
    divergence: str | None = None  # how its ranks compiled differently, in words

    def judge(self) -> list[Violation]:
        """Judge the test as it stands (at a phase's end): its reports carry this judgement."""
        self.found = self.tracker.violations(self.elsewhere)
        return self.found

    def judge_now(self) -> None:
        """Everything broken so far has been reported (a stop in set-up)."""
        self.judged = len(self.judge())

    def late_violations(self) -> list[Violation]:
        """Rules broken since the judgement reported last (in teardown), with all the
        others (judged at the teardown's end)."""
        return self.found if len(self.found) > self.judged else []

    def note_children(self, children: list[ProcessResult]) -> None:
        """The test's children's records; functions they compiled are not unknown to a
        ``function=`` budget."""
        self.children = children
        self.divergence = processes.divergence(children)
        self.elsewhere = frozenset(
            name for p in children for fn in p["functions"] for name in (fn["name"], fn["qualname"])
        )

    def outcome(self, exc: BaseException | None, root: str | None = None) -> Outcome:
        """Judge the test's own phases as they ended (``exc``: what the test raised, if any).

        The gate's own stop fails with its message, where the call stopped (the innermost
        frame under ``root``); a graph break under fullgraph fails with the gate's message in
        place of torch's error; any other exception is the test's own failure and stands,
        with the gate's findings beside it; otherwise broken rules fail, unless report-only.
        """
        tracker = self.tracker
        if isinstance(exc, RecompileGateError) and not exc.from_child:
            self.judge_now()
            self.stopped_at = exc.site or call_frame(exc.__traceback__, root)
            if isinstance(exc, CompiledWhileWarm):
                self.refused = exc.refusal
            return Outcome(fail=stopped_message(exc, root))
        broke = tracker.note_exception(exc) if exc is not None else None
        found = self.judge()
        self.judged = len(found)
        message = None
        if found:
            functions = [r.to_dict() for r in tracker.records]
            message = failure_message(functions, [violation_result(v) for v in found])
        if exc is not None and broke is None:
            return Outcome(section=message)
        if broke is not None or (found and tracker.mode != "report-only"):
            return Outcome(fail=message)
        return Outcome()

    def with_children(self, own: Outcome, exc: BaseException | None, enforced: bool) -> Outcome:
        """The test's outcome with its children's: their broken rules fail it (beside its own
        exception, never hiding it); what is only told goes beside the result."""
        fail, told = self.children_verdict()
        if fail and enforced:
            fail = "\n".join(filter(None, [fail, told and indented(told)]))
            self.children_failed = fail  # unittest reports its own error in place of the gate's
            return Outcome("\n".join(filter(None, [own.fail, fail, raised(exc)])), own.section)
        if own.fail:
            return Outcome(
                "\n".join(filter(None, [own.fail, told and indented(told)])), own.section
            )
        return Outcome(None, "\n".join(filter(None, [own.section, fail, told])) or None)

    def children_verdict(self) -> tuple[str | None, str | None]:
        """The children's broken rules (to fail with) and what is only told."""
        children = self.children or []
        fail = messages.failure_lines(children)
        told = messages.notes(children)
        budget = self.tracker.budget
        same = budget.same_across_ranks if budget is not None else None
        if self.divergence and same:
            fail.append(f"{PREFIX} {self.divergence} ({same})")
        elif self.divergence:
            told.append(self.divergence)
        return "\n".join(fail) or None, "\n".join(told) or None


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


def indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def raised(failure: BaseException | None) -> str | None:
    """The test's own exception, named beside its children's failures (never hidden)."""
    if failure is None or isinstance(failure, RecompileGateError):
        return None
    first = (str(failure).strip().splitlines() or [""])[0]
    return f"  the test itself raised {type(failure).__name__}: {first[:200]}"
