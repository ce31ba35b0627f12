"""Benchmark 12: the structured trace."""

from __future__ import annotations

from pathlib import Path

from harness import (
    QUIET,
    Bench,
    Result,
    interleaved,
    run_pytest,
)


def trace_benchmark(gated: Path, sizes: dict[str, int], reps: int) -> Result:
    """Benchmark 12: the gated suite with ``--recompile-trace`` (B) and without it (A)."""
    budget = [*QUIET, "test_gated.py", "--recompile-budget"]
    traced = [*budget, f"--recompile-trace={gated / 'traces'}"]
    run_pytest(gated, budget)  # warm caches
    a, b = interleaved(reps, lambda: run_pytest(gated, budget), lambda: run_pytest(gated, traced))
    assert all(r.rc == 0 for r in a + b), "the gated suite must pass"
    assert not (gated / "traces").exists(), "tests that pass leave nothing"
    return Result(
        f"gated suite with --recompile-trace: {sizes['gated_tests']} tests x {sizes['calls']} "
        "calls, eager, every test passes", "--recompile-budget", "and --recompile-trace=DIR",
        [r.seconds for r in a], [r.seconds for r in b], 1.10,
    )  # fmt: skip


def run(b: Bench) -> list[Result]:
    return [trace_benchmark(b.gated(), b.sizes, b.reps)]
