"""Benchmarks 8 and 9: child processes."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from harness import (
    HASH_SEEDS,
    QUIET,
    Bench,
    Result,
    Run,
    child_instructions,
    noisy_reps,
    run_pytest,
)
from suites import write_children_suite


def children_benchmarks(kids: Path, reps: int, quick: bool) -> list[Result]:
    """Benchmarks 8 and 9: inside one gated test, children with and without the contract."""
    results: list[Result] = []
    print(f"  {noisy_reps(reps, quick)} blocks of each, interleaved", file=sys.stderr)
    out = kids / "elapsed.json"
    os.environ["BENCH_OUT"] = str(out)
    done = run_pytest(kids, [*QUIET, "--recompile-budget"])
    assert done.rc == 0, "the children benchmark must pass"
    times = json.loads(out.read_text())
    results.append(
        Result("child processes that compile: 2 spawned children importing torch and "
               "compiling one function, per block", "no contract (ungated run)",
               "contract (gated run)", times["compile"]["a"], times["compile"]["b"], 1.05)
    )  # fmt: skip
    contract = {k: v for k, v in times["contract"].items() if v is not None}
    counted = False
    if shutil.which("valgrind") and not quick:
        # As for start-up: wall time varies ten times more than the 2% to be checked.
        child_instructions(contract)  # write bytecode caches
        a, b = [], []
        for seed in HASH_SEEDS:
            a.append(Run(child_instructions({"PYTHONHASHSEED": seed}) / 1e6, 0, 0))
            b.append(Run(child_instructions({**contract, "PYTHONHASHSEED": seed}) / 1e6, 0, 0))
        results.append(
            Result("child processes that do nothing: one `python -c pass` child "
                   "(instructions, callgrind)", "no contract (ungated run)",
                   "contract (gated run)", [r.seconds for r in a], [r.seconds for r in b],
                   1.02, unit="M instr")
        )  # fmt: skip
        counted = True
    results.append(
        Result(f"{'(no target) ' if counted else ''}child processes that do nothing: 20 "
               "`python -c pass` children, per block (wall)", "no contract (ungated run)",
               "contract (gated run)", times["plain"]["a"], times["plain"]["b"],
               float("inf") if counted else 1.02)
    )  # fmt: skip

    return results


def run(b: Bench) -> list[Result]:
    kids = b.suite("children", lambda d: write_children_suite(d, noisy_reps(b.reps, b.quick), 20))
    return children_benchmarks(kids, b.reps, b.quick)
