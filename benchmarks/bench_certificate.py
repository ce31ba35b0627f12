"""Benchmark 17: the certificate."""

from __future__ import annotations

from harness import (
    Bench,
    Result,
)


def run(b: Bench) -> list[Result]:
    """10,000 points of a domain certified from the entries' guards, beside the test's own
    warm-up (benchmarks/certificate.py)."""
    from certificate import POINTS, certificate_times

    times = certificate_times(b.reps)
    return [
        Result(f"certificate: {POINTS} points of a compiled model's batch sizes decided from its "
               "entries' guards, beside its warm-up (two inductor compiles)",
               "warm-up", "covers()", times["warm"], times["covers"], 0.5)
    ]  # fmt: skip
