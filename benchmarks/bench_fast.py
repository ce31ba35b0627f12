"""Benchmark 14: the fast suite."""

from __future__ import annotations

import statistics
from pathlib import Path

from harness import (
    QUIET,
    Bench,
    Result,
    Run,
    interleaved,
    noisy_reps,
    run_pytest,
)
from suites import write_fast_suite


def fast_benchmarks(fast: Path, tests: int, reps: int, xdist_reps: int) -> list[Result]:
    """Benchmark 14: many fast gated tests, side by side; their memory; and whether the
    gated per-test time stays flat over the run."""
    # Both note each test's duration, as pytest measures it (JUnit XML rounds it to the
    # millisecond, a third of a fast test's): what differs is the plugin alone.
    off = [*QUIET, "-p", "no:recompile"]
    on = [*QUIET, "--recompile-budget"]
    timed = {"BENCH_DURATIONS": "1"}
    run_pytest(fast, off, env=timed)  # warm caches
    slopes: dict[str, list[float]] = {"off": [], "on": []}

    def sloped(args: list[str], side: str) -> Run:
        found = run_pytest(fast, args, env=timed)
        durations = found.durations
        fifth = max(1, len(durations) // 5)
        last, first = durations[-fifth:], durations[:fifth]
        slopes[side].append(statistics.median(last) / statistics.median(first))
        return found

    a, b = interleaved(reps, lambda: sloped(off, "off"), lambda: sloped(on, "on"))
    assert all(r.rc == 0 for r in a + b), "the fast suite must pass"
    # The same under pytest-xdist, two workers: what a worker adds per test (the results
    # each report carries to the controller, and the controller's merge) shows here.
    run_pytest(fast, [*off, "-n", "2"])  # warm caches
    xa, xb = interleaved(
        xdist_reps,
        lambda: run_pytest(fast, [*off, "-n", "2"]),
        lambda: run_pytest(fast, [*on, "-n", "2"]),
    )
    assert all(r.rc == 0 for r in xa + xb), "the fast suite must pass under xdist"
    return [
        Result(f"fast suite: {tests} tests (a fixture's, a module-level and an own compiled "
               "function in turn), eager", "-p no:recompile", "--recompile-budget",
               [r.seconds for r in a], [r.seconds for r in b], 1.02),
        Result(f"fast suite under -n 2: {tests} tests, two xdist workers, {xdist_reps} runs of "
               "each", "-p no:recompile",
               "--recompile-budget", [r.seconds for r in xa], [r.seconds for r in xb], 1.03),
        Result("fast suite: peak RSS", "-p no:recompile", "--recompile-budget",
               [r.maxrss_kb / 1024 for r in a], [r.maxrss_kb / 1024 for r in b], 1.05,
               unit="MiB"),
        Result("fast suite, gated: per-test time of the last fifth of the run over the "
               "first fifth (medians), against the same slope ungated: flat",
               "-p no:recompile", "--recompile-budget", slopes["off"], slopes["on"], 1.20,
               unit="x"),
    ]  # fmt: skip


def run(b: Bench) -> list[Result]:
    tests = 60 if b.quick else 1500
    fast = b.suite("fast", lambda d: write_fast_suite(d, tests))
    return fast_benchmarks(fast, tests, b.reps, noisy_reps(b.reps, b.quick))
