"""The gate's verdict on one test: what it has judged, where it stopped the test, and what
the end of each phase means for the test (fail with the gate's message, let the test's own
exception stand with the gate's findings beside it, or nothing).

The tracker records; this module holds the per-test state the gate keeps about its own
judgement, and words the outcome from the tracker's violations and the children's records.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import messages, processes
from .messages import failure_message
from .names import PREFIX
from .results import ProcessResult
from .sites import Site, call_frame
from .tracker import (
    CompiledWhileWarm,
    RecompileGateError,
    RecompileTracker,
    stopped_message,
)
from .verdict import Violation


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
    judged: int = 0  # violations already reported
    stopped_at: Site | None = None  # the call the gate stopped
    refused: str | None = None  # a warm block's refusal that failed the test
    elsewhere: frozenset[str] = frozenset()  # functions compiled in child processes
    children_failed: str = ""  # the children's broken rules this attempt failed with
    children: list[ProcessResult] | None = None  # the records its child processes left
    divergence: str | None = None  # how its ranks compiled differently, in words

    def violations(self) -> list[Violation]:
        return self.tracker.violations(self.elsewhere)

    def judge_now(self) -> None:
        """Everything broken so far has been reported (a stop in set-up)."""
        self.judged = len(self.violations())

    def late_violations(self) -> list[Violation]:
        """Rules broken since the last judgement (in teardown), with all the others."""
        found = self.violations()
        return found if len(found) > self.judged else []

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
        found = self.violations()
        self.judged = len(found)
        message = failure_message(tracker.records, found) if found else None
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


def indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def raised(failure: BaseException | None) -> str | None:
    """The test's own exception, named beside its children's failures (never hidden)."""
    if failure is None or isinstance(failure, RecompileGateError):
        return None
    first = (str(failure).strip().splitlines() or [""])[0]
    return f"  the test itself raised {type(failure).__name__}: {first[:200]}"
