"""Hot path, a sentinel: calls of an already compiled function, the gate's tracker on and off.

20,000 calls of an already compiled function with the gate's tracker on (B) and off (A), in
blocks of 500 alternated ABBA inside one test, timed inside it: cache-hit timing is too noisy
across processes on a shared machine to resolve a few percent. The gate installs nothing on a
cache hit's path (torch answers it in C++), so both run the same code today, and the interval
shows what the machine's noise alone gives: a per-call hook added one day would break the
target.
"""

from __future__ import annotations

import json

from harness import QUIET, Options, Result, run_pytest
from suites import write_hot_suite

NAME = "hot"
TITLE = "hot path"
TARGETS = {"tracker on over off, per block": 1.05}


def run(opts: Options) -> list[Result]:
    calls = opts.hot_calls
    hot = opts.suite("hot", lambda d: write_hot_suite(d, calls))
    out = hot / "elapsed.json"
    blocks: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(opts.reps):
        run_pytest(hot, [*QUIET, "-p", "no:recompile"], env={"BENCH_OUT": str(out)})
        for variant, times in json.loads(out.read_text()).items():
            blocks[variant] += times
    target = TARGETS["tracker on over off, per block"]
    return [
        Result(f"hot path (sentinel: nothing of the gate runs on a cache hit): {calls} calls "
               "of a compiled function per variant and run, in blocks of 500", "tracker off",
               "gate's tracker on", blocks["a"], blocks["b"], target)
    ]  # fmt: skip
