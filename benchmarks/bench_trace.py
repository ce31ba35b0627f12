"""Structured trace: the gated suite with --recompile-trace=DIR and without it.

The gated suite of ``gated`` (every test passes) with ``--recompile-budget
--recompile-trace=DIR`` (B) vs ``--recompile-budget`` (A): torch builds every structured record
of each compile into a scratch file, deleted when the test passes.
"""

from __future__ import annotations

from harness import QUIET, Options, Result, interleaved, run_pytest
from suites import write_gated_suite

NAME = "trace"
TITLE = "structured trace"
TARGETS = {"with --recompile-trace over without": 1.10}


def run(opts: Options) -> list[Result]:
    gated = opts.suite("trace", lambda d: write_gated_suite(d, opts.gated_tests, opts.calls))
    budget = [*QUIET, "test_gated.py", "--recompile-budget"]
    traced = [*budget, f"--recompile-trace={gated / 'traces'}"]
    run_pytest(gated, budget)  # warm caches
    a, b = interleaved(
        opts.reps, lambda: run_pytest(gated, budget), lambda: run_pytest(gated, traced)
    )
    failed = [r.output[-3000:] for r in a + b if r.rc != 0]
    assert not failed, f"the gated suite must pass:\n{failed[0] if failed else ''}"
    assert not (gated / "traces").exists(), "tests that pass leave nothing"
    return [
        Result(f"gated suite with --recompile-trace: {opts.gated_tests} tests x {opts.calls} "
               "calls, eager, every test passes", "--recompile-budget",
               "and --recompile-trace=DIR", [r.seconds for r in a], [r.seconds for r in b],
               TARGETS["with --recompile-trace over without"])
    ]  # fmt: skip
