"""What a call costs when a kept wider-fixture entry answers it, next to one that torch's own
cache list answers, side by side in one gated test.

    python benchmarks/kept_entries.py            # about a minute on 2 cores
    python benchmarks/kept_entries.py --quick    # one small repetition, to check that it runs

Isolation keeps a live fixture's entries in the second list torch checks on a miss, with a
guard that compares the call's backend with the entry's (torch checks that on its own list,
not on that one). Variant A calls a function whose entry sits in torch's own list; variant B
an identical function whose entry a module fixture compiled and isolation kept. Blocks of 500
calls alternate ABBA inside one test, in ``--reps`` fresh pytest processes; the ratio of the
medians B/A is reported. ``benchmarks/run.py --only kept`` runs the same with
an interval and a target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SUITE = """
import json, os, time
import pytest
import torch

@torch.compile(backend="eager")
def own(x):
    return x * 2 + 1

@torch.compile(backend="eager")
def kept(x):
    return x * 2 + 1

@pytest.fixture(scope="module")
def warmed():
    kept(torch.ones(4))

@pytest.mark.max_recompiles(1)
def test_1_compiles_another_shape(warmed):
    kept(torch.ones(2, 2))  # isolation then keeps only the fixture's entry for the next test

def test_2_calls(warmed, recompiles):
    import torch._C._dynamo.eval_frame as eval_frame

    x = torch.ones(4)
    own(x)
    code = kept._torchdynamo_orig_callable.__code__
    assert not eval_frame._debug_get_cache_entry_list(code)  # kept, not in torch's own list
    blocks, per_block = 2 * max(1, CALLS // 500), 500
    times = {"a": [], "b": []}
    for fn in (own, kept):
        for _ in range(100):
            fn(x)
    for i in range(blocks):
        fn, variant = (kept, "b") if (i % 4) in (1, 2) else (own, "a")
        start = time.perf_counter()
        for _ in range(per_block):
            fn(x)
        times[variant].append((time.perf_counter() - start) / per_block * 1e6)
    assert recompiles.count() == 0
    assert not eval_frame._debug_get_cache_entry_list(code)  # the kept entry answered
    with open(os.environ["BENCH_OUT"], "w") as out:
        json.dump(times, out)
"""


def kept_times(root: Path, reps: int, calls: int) -> dict[str, list[float]]:
    """Microseconds per call of each block of 500, A (torch's own list) and B (a kept
    fixture entry), over ``reps`` fresh gated pytest processes run in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "test_kept.py").write_text(textwrap.dedent(SUITE).replace("CALLS", str(calls)))
    out = root / "times.json"
    env = {**os.environ, "BENCH_OUT": str(out)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    times: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(reps):
        done = subprocess.run(
            [*command, "test_kept.py", "--recompile-budget"], cwd=root, env=env,
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"the kept-entry suite failed:\n{done.stdout[-3000:]}")
        for variant, found in json.loads(out.read_text()).items():
            times[variant] += found
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    calls = 2000 if args.quick else 20000
    with tempfile.TemporaryDirectory(prefix="recompile-kept-") as tmp:
        times = kept_times(Path(tmp), reps, calls)
    a, b = statistics.median(times["a"]), statistics.median(times["b"])
    import torch

    print(
        f"kept entries, torch {torch.__version__}, {reps} runs x {calls} calls per variant: "
        f"torch's own list {a:.2f} us/call, kept fixture entry {b:.2f} us/call, "
        f"B/A {b / a:.3f} (+{b - a:.2f} us per call)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
