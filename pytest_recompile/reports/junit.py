"""A test's recompile figures as JUnit XML properties (``--junitxml``; pure)."""

from __future__ import annotations

from ..model.guard_cost import entry_count, largest_result
from ..model.messages import who, work_text
from ..model.results import TestResult, functions_of
from ..model.warm_start import worded
from .durations import cache_text

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
    "recompile_uncovered",
    "recompile_guard_latency_us",
    "recompile_warm_start",
    "recompile_work",
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
    certified = [v["certificate"] for v in data["violations"] if "certificate" in v]
    if certified:  # "1 of 64 points (Server.forward)": points a certificate found uncovered
        ours.append(
            (
                "recompile_uncovered",
                "; ".join(
                    f"{c['uncovered'] + c['undecided']} of {c['points']} points ({c['function']})"
                    for c in certified
                ),
            )
        )
    if data["processes"]:  # "rank 0 (pid 4241): 0; rank 1 (pid 4242): 1"
        children = [f"{who(p)}: {p['recompiles']}" for p in data["processes"]]
        ours.append(("recompile_processes", "; ".join(children)))
    warm = data.get("warm_start")
    if warm is not None:  # "passed: cold 16.2 s, warm 6.1 s; warm lookups 5, hits 5"
        ours.append(("recompile_warm_start", f"{warm['status']}: {worded(warm)}"))
    work = data.get("work")
    if work is not None:  # "1 graph, 9 FX ops (19 nodes, 5 inputs), 2 Inductor kernels, ..."
        ours.append(("recompile_work", work_text(work)))
    return kept + ours
