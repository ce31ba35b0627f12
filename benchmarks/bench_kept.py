"""Benchmark 16: the kept-entry call."""

from __future__ import annotations

from harness import (
    Bench,
    Result,
)


def run(b: Bench) -> list[Result]:
    """A call answered by an entry isolation kept for a live fixture, beside one torch's own
    list answers, in one gated test (benchmarks/kept_entries.py)."""
    from kept_entries import kept_times

    calls = b.sizes["hot_calls"]
    times = kept_times(b.root / "kept", b.reps, calls)
    return [
        Result(f"kept-entry call: {calls} calls per variant and run, in blocks of 500, of a "
               "function whose entry a module fixture compiled and isolation kept",
               "torch's own list", "kept fixture entry", times["a"], times["b"], 1.25,
               unit="us")
    ]  # fmt: skip
