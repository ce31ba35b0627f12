"""What a shape certificate costs: 10,000 points of one function's domain decided from its
entries' guards, next to the test's own warm-up (two compiles with the default inductor
backend), each in a fresh process.

    python benchmarks/certificate.py            # about a minute on 2 cores
    python benchmarks/certificate.py --quick    # one repetition, to check that it runs

``benchmarks/run.py --only certificate`` runs the same with an interval and a
target: B/A, the certificate's seconds over the warm-up's, under 0.5; and 10,000 points in under
1 s (the seconds are printed beside the ratio).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

POINTS = 10_000

ONE_RUN = """
import json, time
import torch
from pytest_recompile import RecompileTracker

class Server(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    def forward(self, x):
        return self.net(x).softmax(-1)

with RecompileTracker(mode="report-only") as tracker:
    began = time.perf_counter()
    model = torch.compile(Server().eval())
    with torch.no_grad():
        for batch in (8, 16):
            model(torch.randn(batch, 32))
    warm = time.perf_counter() - began
    began = time.perf_counter()
    with torch.no_grad():
        result = tracker.covers(model, (torch.randn(8, 32),), {"x": {0: range(%d)}})
    covers = time.perf_counter() - began
assert [p["x"][0] for p in result.uncovered] == [0, 1], result.message()
print(json.dumps({"warm": warm, "covers": covers}))
"""


def certificate_times(reps: int) -> dict[str, list[float]]:
    """Warm-up and certificate seconds, one fresh process per repetition."""
    found: dict[str, list[float]] = {"warm": [], "covers": []}
    for _ in range(reps):
        out = subprocess.run(
            [sys.executable, "-c", ONE_RUN % POINTS], capture_output=True, text=True, check=True
        ).stdout
        times = json.loads(out.strip().splitlines()[-1])
        for key in found:
            found[key].append(times[key])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args()
    times = certificate_times(args.reps or (1 if args.quick else 5))
    print(json.dumps(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
