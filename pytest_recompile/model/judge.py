"""Judgement: the records of one block (a test) against its Budget (pure).

:func:`judge` turns records and a Budget into Violations, each with the typed fields of its
kind; :func:`~.messages.violation_result` words them once.
"""

from __future__ import annotations

from dataclasses import dataclass

from .budget import Budget
from .certificate import Certificate
from .guard_cost import EntryGuards, largest
from .guards import InstalledGuard, Reason, kind_matches
from .records import FunctionRecord, GraphBreak, Recompile, distinct_breaks
from .results import RuleKind
from .work import allowed, summed


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
    certificate: Certificate | None = None  # uncovered: the points that would compile again
    measure: str = ""  # work: the count (graphs, ops, kernels, restarts, subgraphs)
    baseline: int | None = None  # work: the baseline's figure, where the baseline's rule


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


def _work_violations(records: list[FunctionRecord], budget: Budget) -> list[Violation]:
    """The compile-work markers' caps, then the baseline's ratchet, on each function's
    counted work (:mod:`.work`). A cap on a count this torch does not record fails, saying so
    (a marker is never silently skipped)."""
    found = []
    # A function that compiled nothing (a call refused, a recompile_limit hit) counts nothing;
    # one that compiled with no work read has none to judge (None).
    works = {id(r): summed(r.work.values()) for r in records if r.work or r.compiles}
    for cap in budget.work_caps:
        chosen = [
            r
            for r in records
            if id(r) in works and (cap.function is None or cap.function in (r.name, r.qualname))
        ]
        if not chosen:
            continue  # a function= naming none: unknown_functions says so
        figures = [works[id(r)][cap.measure] for r in chosen]  # type: ignore[literal-required]
        one = chosen[0] if cap.function is not None and len(chosen) == 1 else None
        if any(f is None for f in figures):
            found.append(Violation("work", -1, cap.value, cap.source, one, measure=cap.measure))
            continue
        # distinct subgraphs: the most one graph calls (model/work.py), never a sum
        used = max(figures) if cap.measure == "subgraphs" else sum(figures)
        if used > cap.value:
            found.append(Violation("work", used, cap.value, cap.source, one, measure=cap.measure))
    tolerance = budget.work_tolerance
    if tolerance is None:
        return found
    for record in records:
        kept = budget.baseline_work.get(record.qualname)
        if kept is None or id(record) not in works:
            continue
        work = works[id(record)]
        for measure, before in kept.items():
            now = work.get(measure)
            most = allowed(before, tolerance.get(measure, 0))
            if isinstance(now, int) and now > most:
                source = f"baseline, +{tolerance.get(measure, 0)}%"
                found.append(
                    Violation("work", now, most, source, record, measure=measure, baseline=before)
                )
    return found


def judge(
    records: list[FunctionRecord],
    budget: Budget | None,
    graph_breaks: list[GraphBreak] | None = None,
    cudagraph_recordings: list[str] | None = None,
) -> list[Violation]:
    """Every way ``records`` break ``budget``; a recompile_limit hit always does, unless the
    budget allows the eager fallback in so many words (``eager_fallback=True``)."""
    found = []
    if budget is None or budget.eager_fallback is None:
        found += [
            Violation("limit", r.recompile_count, None, r.limit, r) for r in records if r.limit
        ]
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
    found += _work_violations(records, budget)
    rerecorded = rerecords(cudagraph_recordings or [])
    cap = budget.max_cudagraph_rerecords
    if cap is not None and rerecorded > cap.value:
        found.append(Violation("cudagraph_rerecords", rerecorded, cap.value, cap.source))
    return found
