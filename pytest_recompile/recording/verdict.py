"""The gate's judgement of one gated test (plain Python: no pytest).

A :class:`TestVerdict` is kept beside the test's tracker. At each phase's end it judges once
and freezes the :class:`~pytest_recompile.model.results.TestResult` that phase's report carries;
:meth:`TestVerdict.outcome` says what the phase's end means for the test, worded from the same
result model as every other output (:mod:`..model.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._torch import instruments
from ..model import messages
from ..model.judge import Violation
from ..model.messages import failure_message, told, violation_result
from ..model.names import PREFIX
from ..model.results import ProcessResult, TestResult, WarmStartResult
from .errors import CompiledWhileWarm, RecompileGateError, stopped_message
from .freeze import result_for_test
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
    baseline: int | None = None  # the baseline's count for the test
    baseline_note: str | None = None  # the baseline was taken on another torch: which
    isolation: str = "entries"  # how its compile caches were isolated
    warm_start: WarmStartResult | None = None  # its warm-start check (a warm_start test)
    _frozen: TestResult | None = None  # the result of the last judgement, once asked for
    _stale: bool = True  # judged since it was frozen

    def judge(self) -> list[Violation]:
        """Judge the test as it stands (at a phase's end): the reports of that phase carry
        this judgement, never one made again."""
        self.found = self.tracker.violations(self.elsewhere)
        self._stale = True
        return self.found

    @property
    def result(self) -> TestResult | None:
        """The result of the last judgement, frozen the first time a report (or the failure
        message) asks for it: a passing call phase, whose report carries none, builds none.
        None where freezing it failed (a contained fault)."""
        if self._stale:
            self._frozen = self.tracker.faults.call(self.freeze)
            self._stale = False
        return self._frozen

    def freeze(self) -> TestResult:
        """The test's result as judged last: what its reports carry (so under xdist too)."""
        tracker = self.tracker
        result = result_for_test(
            tracker.records,
            tracker.budget,
            self.found,
            tracker.graph_breaks,
            baseline=self.baseline,
            device=instruments.device_summary(),
            cudagraph_recordings=tracker.cudagraph_recordings,
            isolation=self.isolation,
            stopped_at=self.stopped_at,
            refused=self.refused,
            processes=self.children,
            divergence=self.divergence,
            caches=tracker.caches,
        )
        warm = self.warm_start
        if warm is not None:
            result["warm_start"] = warm
            if warm["status"] in ("failed", "error") and warm["message"]:
                result["violations"].append(told("warm_start", warm["source"], warm["message"]))
        return result

    def with_warm_start(self, own: Outcome, enforced: bool) -> Outcome:
        """The outcome with the warm-start check's: a warm run that compiled again, or a
        child that could not run, fails the test (beside its other broken rules); in
        report-only mode it is shown beside the result."""
        warm = self.warm_start
        if warm is None or warm["status"] not in ("failed", "error") or not warm["message"]:
            return own
        self._stale = True  # the frozen result gains the violation
        said = f"{PREFIX} {warm['message']}"
        if enforced:
            return Outcome("\n".join(filter(None, [own.fail, said])), own.section)
        return Outcome(own.fail, "\n".join(filter(None, [own.section, said])))

    def judge_now(self) -> None:
        """Everything broken so far has been reported (a stop in set-up)."""
        self.judged = len(self.judge())

    def late_failure(self) -> str | None:
        """Rules broken since the judgement reported last (in teardown), worded with all
        the others (judged at the teardown's end); None: nothing new."""
        return self.own_failure() if len(self.found) > self.judged else None

    def own_failure(self) -> str | None:
        """The test's own broken rules, worded from its frozen result (None: none). Where the
        result could not be frozen (a contained fault), from the records: a fault of the
        plugin never turns a broken rule into a pass."""
        if not self.found:
            return None
        result = self.result
        if result is None:
            functions = [r.to_dict() for r in self.tracker.records]
            return failure_message(functions, [violation_result(v) for v in self.found])
        return failure_message(result["functions"], result["violations"][: len(self.found)])

    def note_children(self, children: list[ProcessResult]) -> None:
        """The test's children's records; functions they compiled are not unknown to a
        ``function=`` budget."""
        if not children and not self.children:  # none then, none now: nothing to work out
            self.children = children
            return
        self.children = children
        self.divergence = messages.divergence(children)
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
            self.stopped_at = exc.site or call_frame(exc.__traceback__, root)
            if isinstance(exc, CompiledWhileWarm):
                self.refused = exc.refusal
            self.judge_now()
            return Outcome(fail=self._noted(stopped_message(exc, root, self.stopped_at)))
        broke = tracker.note_exception(exc) if exc is not None else None
        found = self.judge()
        self.judged = len(found)
        message = self._noted(self.own_failure())
        if exc is not None and broke is None:
            return Outcome(section=message)
        if broke is not None or (found and tracker.mode != "report-only"):
            return Outcome(fail=message)
        return Outcome()

    def _noted(self, message: str | None) -> str | None:
        """``message``, saying that the baseline was taken on another torch where a rule it
        broke came from the baseline: the team then knows to check torch's change first."""
        if message is None or self.baseline_note is None:
            return message
        if not any(v.source == "baseline" for v in self.found):
            return message
        return f"{message}\n  {messages.other_torch(self.baseline_note)}"

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
