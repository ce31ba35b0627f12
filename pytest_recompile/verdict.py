"""Judgement: the records of one block (a test) against its Budget (pure).

The record types (a recompile, a function's record, a graph break) are what the tracker
fills in; :func:`judge` turns records and a Budget into
Violations, each with the typed fields of its kind; the report module words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .guard_cost import EntryGuards, largest
from .guards import InstalledGuard, Reason, kind_matches
from .markers import Budget
from .results import FunctionResult, GraphBreakResult, RecompileResult, RuleKind


@dataclass(frozen=True)
class GraphBreak:
    """One place where Dynamo split the graph, with torch's reason."""

    reason: str  # torch's headline, e.g. "Failed to trace builtin operator"
    filename: str
    lineno: int
    function: str
    line: str  # the user's source line, when known
    hint: str | None  # torch's first hint, when it gave one

    @property
    def site(self) -> tuple[str, int]:
        """Its place in the code. torch may word one break twice (``Data-dependent
        branching`` in the inlined frame, ``generic_jump`` in the frame it restarts, and
        again in its resume function): one site."""
        return (self.filename, self.lineno)

    def to_dict(self) -> GraphBreakResult:
        return {
            "reason": self.reason,
            "file": self.filename,
            "line": self.lineno,
            "function": self.function,
            "code": self.line,
            "hint": self.hint,
        }


def graph_break(text: str, filename: str, lineno: int, function: str, line: str) -> GraphBreak:
    """A GraphBreak from torch's multi-line reason text and its innermost user frame."""
    lines = [part.strip() for part in text.strip().splitlines() if part.strip()]
    reason = lines[0] if lines else "graph break"
    hint = next((part[5:].strip() for part in lines if part.startswith("Hint:")), None)
    return GraphBreak(reason, filename, lineno, function, line.strip(), hint)


def distinct_breaks(breaks: list[GraphBreak]) -> list[GraphBreak]:
    """One per site (place in the code): a break compiled twice (a recompile, a restart,
    torch's second wording of it) is still one break; the first wording is kept."""
    seen: dict[tuple[str, int], GraphBreak] = {}
    for found in breaks:
        seen.setdefault(found.site, found)
    return list(seen.values())


@dataclass
class Recompile:
    compile_id: str
    reasons: tuple[Reason, ...]  # one per rejecting cache entry, newest entry first
    resume: bool = False  # a graph-break resume frame of the function recompiled
    stopped: bool = False  # refused by the gate: the compile never ran
    seconds: float | None = None

    def to_dict(self) -> RecompileResult:
        return {
            "compile_id": self.compile_id,
            "reasons": [r.to_dict() for r in self.reasons],
            "resume": self.resume,
            "stopped": self.stopped,
            "seconds": self.seconds,
        }


@dataclass
class FunctionRecord:
    """One compiled function of the user's (its resume frames included)."""

    name: str
    qualname: str
    filename: str
    lineno: int
    compiles: int = 0
    recompiles: list[Recompile] = field(default_factory=list)
    cache_entries: int = 0
    code_entries: int = 0  # the most one of its code objects held: what recompile_limit caps
    compile_seconds: float = 0.0
    again_seconds: float = 0.0  # compiling again what isolation dropped for an earlier test
    again_reasons: list[str] = field(default_factory=list)  # why those were not reused
    reused: int = 0  # first compiles answered by an earlier test's same compile
    saved_seconds: float = 0.0  # what those compiles took when they ran
    limit: str | None = None  # "recompile_limit (8)" once torch gave up and ran it eagerly
    limit_hits: int = 0
    limit_raised: bool = False  # at the limit torch raised FailOnRecompileLimitHit instead
    guards: list[InstalledGuard] | None = None  # installed guards, once inventoried
    entries: dict[str, EntryGuards] = field(default_factory=dict)  # its own, by compile id
    dynamic_sources: list[str] = field(default_factory=list)  # torch made these dynamic

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def recompile_seconds(self) -> float:
        return sum(r.seconds or 0.0 for r in self.recompiles)

    @property
    def resized(self) -> bool:
        """A recompile of it was for a tensor's size (what automatic dynamic answers)."""
        return any(r.detail == "size" for rc in self.recompiles for r in rc.reasons)

    @property
    def first_compile_seconds(self) -> float:
        """Its compiles' seconds but its recompiles': what its first compiles took."""
        return max(0.0, self.compile_seconds - self.recompile_seconds)

    def to_dict(self) -> FunctionResult:
        return {
            "name": self.name,
            "qualname": self.qualname,
            "file": self.filename,
            "line": self.lineno,
            "compiles": self.compiles,
            "recompiles": [r.to_dict() for r in self.recompiles],
            "cache_entries": self.cache_entries,
            "code_entries": self.code_entries,
            "compile_seconds": round(self.compile_seconds, 6),
            "first_compile_seconds": round(self.first_compile_seconds, 6),
            "again_seconds": round(self.again_seconds, 6),
            "again_reasons": list(self.again_reasons),
            "reused": self.reused,
            "saved_seconds": round(self.saved_seconds, 6),
            "recompile_seconds": round(self.recompile_seconds, 6),
            "recompile_limit": self.limit,
            "limit_hits": self.limit_hits,
            "limit_raised": self.limit_raised,
            "guards": [g.to_dict() for g in self.guards] if self.guards is not None else None,
            "entries": [e.to_dict() for e in self.entries.values()],
            "dynamic_sources": list(self.dynamic_sources),
        }


@dataclass(frozen=True)
class Violation:
    """One rule a block broke. ``used`` against ``allowed`` (None: no number applies), the
    rule's ``source``, the function it concerns, and the evidence of its kind."""

    kind: RuleKind
    used: int
    allowed: int | None
    source: str
    function: FunctionRecord | None = None
    reasons: tuple[Reason, ...] = ()  # unexpected: the recompiles' reasons of other kinds
    guards: tuple[InstalledGuard, ...] = ()  # forbidden: the installed guards of those kinds
    breaks: tuple[GraphBreak, ...] = ()  # graph_breaks, fullgraph: where torch broke the graph
    wanted: str = ""  # unknown_function: the name the budget gave
    compiled: tuple[str, ...] = ()  # unknown_function: the qualnames the block compiled
    counted: tuple[FunctionRecord, ...] = ()  # total: the functions whose recompiles it counts
    entry: EntryGuards | None = None  # guards: the entry that checks the most
    values: tuple[str, ...] = ()  # new_guards: "KIND source" of the guards the baseline lacks


def unexpected_reasons(recompile: Recompile, budget: Budget) -> tuple[Reason, ...]:
    """The reasons of a recompile whose kind ``expect_guards`` does not allow."""
    if budget.expect is None:
        return ()
    return tuple(
        r for r in recompile.reasons if not kind_matches(budget.expect.value, r.kind, r.detail)
    )


def unknown_functions(
    records: list[FunctionRecord], budget: Budget | None, elsewhere: frozenset[str] = frozenset()
) -> list[Violation]:
    """A ``function=`` budget naming no function the block compiled: a typo, or a rename.

    Judged when the block ends (not fail-fast: the function may still be compiled).
    """
    if budget is None:
        return []
    names = {name for r in records for name in (r.name, r.qualname)} | elsewhere
    compiled = tuple(r.qualname for r in records)
    return [
        Violation("unknown_function", 0, None, source, wanted=name, compiled=compiled)
        for name, source in budget.named.items()
        if name not in names
    ]


def rerecords(recordings: list[str]) -> int:
    """CUDA-graph recordings beyond the first of each compiled graph."""
    return len(recordings) - len(set(recordings))


def _function_violations(record: FunctionRecord, budget: Budget) -> list[Violation]:
    found = []
    own = budget.for_function(record.name, record.qualname)
    if own is not None and record.recompile_count > own.value:
        found.append(Violation("function", record.recompile_count, own.value, own.source, record))
    other_kinds = tuple(r for rc in record.recompiles for r in unexpected_reasons(rc, budget))
    if other_kinds and budget.expect is not None:
        found.append(
            Violation(
                "unexpected", len(other_kinds), 0, budget.expect.source, record,
                reasons=other_kinds,
            )
        )  # fmt: skip
    forbidden = tuple(
        g for g in record.guards or () if g.kind in budget.forbidden and not g.framework
    )
    if forbidden and budget.forbid is not None:
        found.append(
            Violation(
                "forbidden", len(forbidden), 0, budget.forbid.source, record, guards=forbidden
            )
        )
    cap = budget.guards_for(record.name, record.qualname)
    most = largest(record.entries.values())
    if cap is not None and most is not None and most.count > cap.value:
        found.append(Violation("guards", most.count, cap.value, cap.source, record, entry=most))
    return found + _baseline_guards(record, budget)


def _baseline_guards(record: FunctionRecord, budget: Budget) -> list[Violation]:
    """More guards than the baseline recorded for the function, or a guard on a Python value
    the baseline does not have (a constant newly baked in, before it ever recompiles)."""
    recorded = budget.baseline_guards.get(record.qualname)
    if recorded is None:
        return []
    count, values = recorded
    found = []
    # The baseline keeps trees' counts only (torch's guard_count is another measure).
    most = largest(e for e in record.entries.values() if e.guards is not None)
    if most is not None and most.count > count:  # beside a max_guards: the stricter fails
        found.append(Violation("guards", most.count, count, "baseline", record, entry=most))
    new = sorted({v for e in record.entries.values() for v in e.values} - values)
    if new:
        found.append(Violation("new_guards", len(new), 0, "baseline", record, values=tuple(new)))
    return found


def judge(
    records: list[FunctionRecord],
    budget: Budget | None,
    graph_breaks: list[GraphBreak] | None = None,
    cudagraph_recordings: list[str] | None = None,
) -> list[Violation]:
    """Every way ``records`` break ``budget``; a recompile_limit hit always does."""
    found = [Violation("limit", r.recompile_count, None, r.limit, r) for r in records if r.limit]
    if budget is None:
        return found
    counted: list[FunctionRecord] = []  # the functions whose recompiles the total counts
    for record in records:
        found += _function_violations(record, budget)
        if record.recompiles and (
            budget.total_counts_named or budget.for_function(record.name, record.qualname) is None
        ):
            counted.append(record)
    used = sum(r.recompile_count for r in counted)
    if budget.total is not None and used > budget.total.value:
        found.append(
            Violation(
                "total", used, budget.total.value, budget.total.source, counted=tuple(counted)
            )
        )
    breaks = tuple(distinct_breaks(graph_breaks or []))
    cap = budget.max_graph_breaks
    if cap is not None and len(breaks) > cap.value:
        found.append(Violation("graph_breaks", len(breaks), cap.value, cap.source, breaks=breaks))
    rerecorded = rerecords(cudagraph_recordings or [])
    cap = budget.max_cudagraph_rerecords
    if cap is not None and rerecorded > cap.value:
        found.append(Violation("cudagraph_rerecords", rerecorded, cap.value, cap.source))
    return found
