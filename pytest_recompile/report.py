"""The JSON report document and the JUnit XML properties of a test."""

from __future__ import annotations

import os

from .guard_cost import entry_count, largest_result
from .limit import limit_need
from .messages import cache_text, who
from .results import (
    Environment,
    FixtureResult,
    LimitResult,
    ReportDocument,
    ReportedTest,
    ReportSettings,
    TestResult,
)
from .tally import functions_of

REPORT_SCHEMA = "pytest-recompile/report"


REPORT_VERSION = 1


SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")


def report_document(
    results: list[tuple[str, str, TestResult]],
    environment: Environment,
    settings: ReportSettings,
    created: str,
    fixtures: list[FixtureResult] | None = None,
    incomplete: str | None = None,
    faults: list[str] | None = None,
    need: LimitResult | None = None,
) -> ReportDocument:
    """The JSON report (see report.schema.json): ``results`` are (nodeid, outcome, data);
    ``incomplete``: why the run stopped early, if it did."""
    tests: list[ReportedTest] = [
        {"nodeid": nodeid, "outcome": outcome, **data}
        for nodeid, outcome, data in sorted(results, key=lambda r: r[0])
    ]
    devices = sorted({t["device"] for t in tests if t["device"]})
    return {
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "created": created,
        "complete": incomplete is None,
        "incomplete": incomplete,
        "environment": {**environment, "devices": devices},
        "settings": settings,
        "summary": {
            "gated_tests": len(tests),
            "recompiles": sum(t["recompiles"] for t in tests),
            "broke_the_gate": sum(1 for t in tests if t["violations"]),
            "recompile_limit_hits": sum(1 for t in tests if t["limit_hit"]),
            "recompile_seconds": round(sum(t["recompile_seconds"] for t in tests), 6),
            "compile_seconds": round(sum(t["compile_seconds"] for t in tests), 6),
            "first_compile_seconds": round(sum(t["first_compile_seconds"] for t in tests), 6),
            "again_seconds": round(sum(t["again_seconds"] for t in tests), 6),
            "reused": sum(t["reused"] for t in tests),
            "saved_seconds": round(sum(t["saved_seconds"] for t in tests), 6),
            "graph_breaks": sum(len(t["graph_breaks"]) for t in tests),
            "cudagraph_rerecords": sum(t["cudagraph_rerecords"] for t in tests),
        },
        "tests": tests,
        "fixtures": sorted(fixtures or [], key=lambda f: (f["node"], f["name"])),
        "faults": list(faults or []),
        "recompile_limit": need
        if need is not None
        else limit_need([(t["nodeid"], t) for t in tests], fixtures or []),
    }


JUNIT_NAMES = (
    "recompiles",
    "recompile_budget",
    "recompile_budget_source",
    "recompile_worst",
    "recompile_seconds",
    "recompile_compile_seconds",
    "recompile_first_compile_seconds",
    "recompile_caches",
    "recompile_processes",
    "recompile_max_guards",
    "recompile_guard_latency_us",
)


def junit_properties(
    properties: list[tuple[str, object]], data: TestResult
) -> list[tuple[str, object]]:
    """A test's user properties with this attempt's recompile figures (JUnit XML reads the
    teardown report's): earlier attempts' figures (reruns) replaced, the others kept."""
    kept = [p for p in properties if p[0] not in JUNIT_NAMES]
    ours: list[tuple[str, object]] = [
        ("recompiles", data["recompiles"]),
        ("recompile_budget", "" if data["budget"] is None else data["budget"]),
        ("recompile_budget_source", data["budget_source"] or ""),
        ("recompile_worst", data["worst"] or ""),
        ("recompile_seconds", data["recompile_seconds"]),
        ("recompile_compile_seconds", data["compile_seconds"]),
        ("recompile_first_compile_seconds", data["first_compile_seconds"]),
        ("recompile_caches", cache_text(data["caches"])),  # "cold: fx_graph 0 hits, 2 misses; ..."
    ]
    most = largest_result(fn for _, fn in functions_of(data))
    if most is not None:  # the entry that checks the most guards, and torch's estimate
        fn, entry = most
        latency = entry["guard_latency_us"]
        ours.append(("recompile_max_guards", f"{entry_count(entry)} ({fn['qualname']})"))
        ours.append(("recompile_guard_latency_us", "" if latency is None else latency))
    if data["processes"]:  # "rank 0 (pid 4241): 0; rank 1 (pid 4242): 1"
        children = [f"{who(p)}: {p['recompiles']}" for p in data["processes"]]
        ours.append(("recompile_processes", "; ".join(children)))
    return kept + ours
