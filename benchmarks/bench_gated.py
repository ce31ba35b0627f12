"""Benchmarks 2 and 5: the gated suite and its peak memory."""

from __future__ import annotations

import os
import pstats
import statistics
import subprocess
import sys
from pathlib import Path

from harness import (
    QUIET,
    Bench,
    Result,
    interleaved,
    run_pytest,
)


def where_the_time_goes(workdir: Path, tests: int) -> list[tuple[str, float]]:
    """Milliseconds per test in the plugin's entry points, from cProfile of one gated run."""
    profile = workdir / "gated.prof"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), str(workdir / "launcher.py"),
         *QUIET, "test_gated.py", "--recompile-budget"],
        cwd=workdir, capture_output=True, text=True, check=False,
    )  # fmt: skip
    stats = pstats.Stats(str(profile))
    tracker = os.path.join("recording", "tracker.py")
    ledger = os.path.join("isolation", "ledger.py")
    verdict = os.path.join("recording", "verdict.py")
    versions = os.path.join("_torch", "versions.py")
    wanted = {
        (tracker, "start"): "start: metrics capacity, compile callbacks",
        (ledger, "isolate"): "isolation: drop what earlier tests compiled",
        (tracker, "stop"): "stop: count entries, graph breaks, compile seconds",
        ("gate.py", "on_compile"): "compile hook (first compiles)",
        (verdict, "freeze"): "results for the report (summary, JUnit)",
        (versions, "check_torch"): "importing torch._dynamo, once per session",
    }
    found: dict[str, float] = {}
    for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        for (suffix, func), label in wanted.items():
            if filename.endswith(os.path.join("pytest_recompile", suffix)) and name == func:
                found[label] = found.get(label, 0.0) + row[3]  # cumulative seconds
    return [(label, found.get(label, 0.0) * 1000 / tests) for label in wanted.values()]


def run(b: Bench) -> list[Result]:
    """Benchmark 2, and the peak RSS of its runs that benchmark 5 reports."""
    gated = b.gated()
    run_pytest(gated, [*QUIET, "test_gated.py", "-p", "no:recompile"])  # warm caches
    a, r = interleaved(
        b.reps,
        lambda: run_pytest(gated, [*QUIET, "test_gated.py", "-p", "no:recompile"]),
        lambda: run_pytest(gated, [*QUIET, "test_gated.py", "--recompile-budget"]),
    )
    assert all(run.rc == 0 for run in a + r), "the gated suite must pass"
    suite = Result(
        f"gated suite: {b.sizes['gated_tests']} tests x {b.sizes['calls']} calls, eager",
        "-p no:recompile", "--recompile-budget", [run.seconds for run in a],
        [run.seconds for run in r], 1.10,
    )  # fmt: skip
    b.gated_memory = ([run.maxrss_kb / 1024 for run in a], [run.maxrss_kb / 1024 for run in r])
    difference = statistics.median(suite.b) - statistics.median(suite.a)
    b.added_ms = difference * 1000 / b.sizes["gated_tests"]
    b.breakdown = where_the_time_goes(gated, b.sizes["gated_tests"])
    return [suite]


def memory(b: Bench) -> list[Result]:
    """Benchmark 5: read from benchmark 2's runs (run here if it was not)."""
    if b.gated_memory is None:
        run(b)
    assert b.gated_memory is not None
    off, on = b.gated_memory
    return [
        Result("memory: peak RSS of the gated suite", "-p no:recompile", "--recompile-budget",
               off, on, 1.05, unit="MiB")
    ]  # fmt: skip
