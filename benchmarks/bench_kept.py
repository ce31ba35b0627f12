"""Kept-entry call: a call answered by an entry isolation kept for a fixture, beside torch's own.

20,000 calls per variant and run of a function whose entry a module fixture compiled and
isolation kept (B) and of one whose entry sits in torch's own list (A), blocks of 500
alternated ABBA in one gated test (``benchmarks/kept_entries.py``, which runs alone too): what
the gate adds per call, on the cheapest compiled call there is (eager, ``x * 2 + 1``).
"""

from __future__ import annotations

from harness import Options, Result
from kept_entries import kept_times

NAME = "kept"
TITLE = "kept-entry call"
TARGETS = {"kept entry over torch's own list, per call": 1.25}


def run(opts: Options) -> list[Result]:
    calls = opts.hot_calls
    times = kept_times(opts.root / "kept", opts.reps, calls)
    return [
        Result(f"kept-entry call: {calls} calls per variant and run, in blocks of 500, of a "
               "function whose entry a module fixture compiled and isolation kept",
               "torch's own list", "kept fixture entry", times["a"], times["b"],
               TARGETS["kept entry over torch's own list, per call"], unit="us")
    ]  # fmt: skip
