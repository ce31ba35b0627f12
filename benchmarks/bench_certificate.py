"""Certificate: covers() deciding 10,000 batch sizes from the guards, beside the warm-up.

``covers()`` deciding 10,000 batch sizes of a compiled model from its entries' guards (B)
beside the model's warm-up, two compiles with the default inductor backend (A), each in a
fresh process (``benchmarks/certificate.py``, which runs alone too). The seconds show the
10,000 points under 1 s.
"""

from __future__ import annotations

from certificate import POINTS, certificate_times
from harness import Options, Result

NAME = "certificate"
TITLE = "certificate of 10,000 points"
TARGETS = {"covers() over the warm-up, seconds": 0.5}


def run(opts: Options) -> list[Result]:
    times = certificate_times(opts.reps)
    return [
        Result(f"certificate: {POINTS} points of a compiled model's batch sizes decided from its "
               "entries' guards, beside its warm-up (two inductor compiles)",
               "warm-up", "covers()", times["warm"], times["covers"],
               TARGETS["covers() over the warm-up, seconds"])
    ]  # fmt: skip
