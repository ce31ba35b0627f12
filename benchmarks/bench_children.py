"""Child processes: ones that compile and ones that do nothing, with the contract and without.

Inside one gated test, blocks of 2 spawned children that import torch and compile one
function, alternated ABBA with the child-process contract in their environment (B: they record
into the spool) and without it (A: what an ungated run's children do); three times the
repetitions of the suites (21 blocks of each by default), as a block varies by 5-8%. Then one
``python -c pass`` child with the contract's environment and without it, counted in
instructions by callgrind (wall time varies ten times more than the 2% to check); blocks of 20
such children, alternated inside the gated test, by wall time: no target where callgrind counted.
"""

from __future__ import annotations

import json
import shutil
import sys

from harness import (
    HASH_SEEDS,
    QUIET,
    Options,
    Result,
    Run,
    child_instructions,
    noisy_reps,
    run_pytest,
)
from suites import write_children_suite

NAME = "children"
TITLE = "child processes"
TARGETS = {
    "2 compiling children, gated over ungated contract": 1.05,
    "one python -c pass child, instructions (callgrind)": 1.02,
    "20 python -c pass children, wall time, where valgrind is missing": 1.02,
}


def run(opts: Options) -> list[Result]:
    """Inside one gated test, children with and without the contract."""
    blocks = noisy_reps(opts.reps, opts.quick)
    kids = opts.suite("children", lambda d: write_children_suite(d, blocks, 20))
    results: list[Result] = []
    print(f"  {blocks} blocks of each, interleaved", file=sys.stderr)
    out = kids / "elapsed.json"
    done = run_pytest(kids, [*QUIET, "--recompile-budget"], env={"BENCH_OUT": str(out)})
    assert done.rc == 0, "the children benchmark must pass"
    times = json.loads(out.read_text())
    results.append(
        Result("child processes that compile: 2 spawned children importing torch and "
               "compiling one function, per block", "no contract (ungated run)",
               "contract (gated run)", times["compile"]["a"], times["compile"]["b"],
               TARGETS["2 compiling children, gated over ungated contract"])
    )  # fmt: skip
    contract = {k: v for k, v in times["contract"].items() if v is not None}
    counted = False
    if shutil.which("valgrind") and not opts.quick:
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
                   TARGETS["one python -c pass child, instructions (callgrind)"], unit="M instr")
        )  # fmt: skip
        counted = True
    wall_target = TARGETS["20 python -c pass children, wall time, where valgrind is missing"]
    results.append(
        Result(f"{'(no target) ' if counted else ''}child processes that do nothing: 20 "
               "`python -c pass` children, per block (wall)", "no contract (ungated run)",
               "contract (gated run)", times["plain"]["a"], times["plain"]["b"],
               float("inf") if counted else wall_target)
    )  # fmt: skip
    return results
