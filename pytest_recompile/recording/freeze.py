"""Each test's and wider fixture's results, built from the tracker's records (JSON-ready
values of :mod:`..model.results`: they travel on pytest's reports)."""

from __future__ import annotations

from ..model.budget import Budget
from ..model.judge import Violation, rerecords
from ..model.messages import told, violation_result, who
from ..model.records import FunctionRecord, GraphBreak
from ..model.results import CachesResult, FixtureResult, ProcessResult, TestResult, ViolationResult
from ..model.work import added
from .sites import Site


def result_for_test(
    records: list[FunctionRecord],
    budget: Budget | None,
    violations: list[Violation],
    graph_breaks: list[GraphBreak],
    *,
    baseline: int | None = None,
    device: str | None = None,
    cudagraph_recordings: list[str] | None = None,
    isolation: str = "entries",
    stopped_at: Site | None = None,
    refused: str | None = None,
    processes: list[ProcessResult] | None = None,
    divergence: str | None = None,
    caches: CachesResult | None = None,
) -> TestResult:
    """One test's results (see :class:`~pytest_recompile.model.results.TestResult`); ``divergence``:
    how its ranks compiled differently, in words (:func:`..model.messages.divergence`); ``caches``:
    how often torch's compile caches answered in its phases."""
    worst = max(records, key=lambda r: r.recompile_count, default=None)
    total = budget.total if budget is not None else None
    children = processes or []
    same = budget.same_across_ranks if budget is not None else None
    functions = [r.to_dict() for r in records]
    return {
        "budget": total.value if total is not None else None,
        "budget_source": total.source if total is not None else None,
        "rules": budget.describe() if budget is not None else None,
        "baseline": baseline,
        "recompiles": sum(r.recompile_count for r in records),
        "recompile_seconds": round(sum(r.recompile_seconds for r in records), 6),
        "compile_seconds": round(sum(r.compile_seconds for r in records), 6),
        "first_compile_seconds": round(sum(r.first_compile_seconds for r in records), 6),
        "caches": caches or no_caches(),
        "again_seconds": round(sum(r.again_seconds for r in records), 6),
        "reused": sum(r.reused for r in records),
        "saved_seconds": round(sum(r.saved_seconds for r in records), 6),
        "isolation": isolation,
        "violations": _violations(violations, refused, children, divergence, same),
        "limit_hit": [r.qualname for r in records if r.limit]
        + [f"{name} ({who(p)})" for p in children for name in p["limit_hit"]],
        "worst": (
            f"{worst.qualname} ({worst.recompile_count})"
            if worst is not None and worst.recompile_count
            else None
        ),
        "device": device,
        "functions": functions,
        "work": added(f["work"] for f in functions if f["work"]["compiles"]),
        "graph_breaks": [b.to_dict() for b in graph_breaks],
        "cudagraph_recordings": len(cudagraph_recordings or []),
        "cudagraph_rerecords": rerecords(cudagraph_recordings or []),
        "stopped_at": stopped_at.to_dict() if stopped_at is not None else None,
        "processes": children,
        "divergence": divergence,
        "trace": None,  # set where the trace is kept (traces.py)
    }


def no_caches() -> CachesResult:
    """No cache asked (the eager backend, or a torch without the counters)."""
    return {
        "fx_graph": {"hits": 0, "misses": 0, "bypasses": 0},
        "aot_autograd": {"hits": 0, "misses": 0, "bypasses": 0},
    }


def _violations(
    violations: list[Violation],
    refused: str | None,
    children: list[ProcessResult],
    diverged: str | None,
    same: str | None,
) -> list[ViolationResult]:
    """The test's broken rules: its own, a warm block's refusal, its children's (each named
    by rank and pid) and, under ``same_compiles_across_ranks``, ranks that diverged."""
    found = [violation_result(v) for v in violations]
    if refused:
        found.append(told("warm", "warm()", refused))
    found += [
        {**v, "message": f"{who(p)}: {v['message']}"} for p in children for v in p["violations"]
    ]
    if diverged and same:
        found.append(told("divergence", same, diverged))
    return found


def fixture_result(
    fixture: str,
    name: str,
    scope: str,
    node: str,
    records: list[FunctionRecord],
    graph_breaks: list[GraphBreak],
    processes: list[ProcessResult] | None = None,
) -> FixtureResult:
    """A wider fixture's compiles while it was set up (``fixture``: it in words), its child
    processes' included (JSON-ready: it travels on a report)."""
    children = processes or []
    return {
        "fixture": fixture,
        "name": name,
        "scope": scope,
        "node": node,
        "compiles": sum(r.compiles for r in records),
        "recompiles": sum(r.recompile_count for r in records)
        + sum(p["recompiles"] for p in children),
        "recompile_seconds": round(sum(r.recompile_seconds for r in records), 6),
        "compile_seconds": round(sum(r.compile_seconds for r in records), 6),
        "first_compile_seconds": round(sum(r.first_compile_seconds for r in records), 6),
        "limit_hit": [r.qualname for r in records if r.limit],
        "functions": [r.to_dict() for r in records],
        "graph_breaks": [b.to_dict() for b in graph_breaks],
        "processes": children,
    }
