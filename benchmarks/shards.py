"""What ``pytest-recompile combine``, ``report`` and ``compare`` cost on a large suite's
reports, timed in-process (the commands import neither torch nor pytest).

    python benchmarks/shards.py            # 20 shards of 500 tests: under a minute
    python benchmarks/shards.py --quick    # 4 shards of 50 tests, to check that it runs

The shards are made from one real report: a gated run (report-only) of a test whose compiled
function recompiles once, its test copied under 10,000 node ids, each with its own function
(qualname and line), so that every test holds a recompiling function. Timed, each the median
of ``--reps`` runs: ``combine -o`` of the 20 shard reports (reading, checking each against the
schema, merging, writing), ``report`` of the combined report, and ``compare`` of two
10,000-test reports (the second with one more recompile in every tenth test). Target: each
under 2 s on this project's 2-core machine (an absolute time: these are CI steps of their own,
with nothing to compare side by side).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = 2.0

SUITE = """
import torch

step = 0

@torch.compile(backend="eager")
def f(x):
    return x + step

def test_recompiles():
    global step
    f(torch.ones(2))
    step = 1
    f(torch.ones(2))
"""


def template(root: Path) -> dict[str, Any]:
    """One real report of a gated run of a test that recompiles once."""
    (root / "test_one.py").write_text(textwrap.dedent(SUITE))
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "--recompile-budget=0", "--recompile-mode=report-only", "--recompile-report=one.json"],
        cwd=root, check=True, capture_output=True,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "", "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    report: dict[str, Any] = json.loads((root / "one.json").read_text())
    return report


def shard(report: dict[str, Any], index: int, tests: int) -> dict[str, Any]:
    """Shard ``index``: ``tests`` copies of the report's test, each its own function."""
    (one,) = report["tests"]
    copies = []
    for n in range(index * tests, (index + 1) * tests):
        test = json.loads(json.dumps(one))
        test["nodeid"] = f"tests/part_{n // 100:03d}/test_m.py::test_{n:05d}"
        for fn in test["functions"]:
            fn["qualname"] = fn["name"] = f"f_{n:05d}"
            fn["line"] = n
        copies.append(test)
    return {**report, "tests": copies}


def timed(argv: list[str], reps: int) -> tuple[float, int]:
    """The median seconds of ``pytest-recompile ARGV`` in-process, and its exit status."""
    from pytest_recompile.__main__ import main

    seconds, status = [], 0
    for _ in range(reps):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 shards of 50 tests, one run")
    parser.add_argument("--reps", type=int, default=None, help="runs of each (default 5)")
    args = parser.parse_args()
    shards, tests = (4, 50) if args.quick else (20, 500)
    reps = args.reps or (1 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="recompile-shards-") as tmp:
        root = Path(tmp)
        report = template(root)
        os.chdir(root)
        names = []
        for index in range(shards):
            names.append(f"shard-{index}.json")
            (root / names[-1]).write_text(json.dumps(shard(report, index, tests)))
        total = shards * tests
        rows = []
        seconds, status = timed(["combine", "-o", "all.json", *names], reps)
        assert status == 0, "combine failed"
        combined = json.loads((root / "all.json").read_text())
        assert len(combined["tests"]) == total
        size = (root / "all.json").stat().st_size / 2**20
        rows.append((f"combine {shards} shards of {tests} tests ({size:.0f} MiB out)", seconds))
        seconds, status = timed(["report", "all.json"], reps)
        assert status == 0, "a report-only run breaks no gate"
        rows.append((f"report of the {total:,}-test combined report", seconds))
        for test in combined["tests"][::10]:  # HEAD: one more recompile in every tenth test
            fn = test["functions"][0]
            fn["recompiles"].append(fn["recompiles"][0])
            test["recompiles"] += 1
        (root / "head.json").write_text(json.dumps(combined))
        seconds, status = timed(["compare", "all.json", "head.json"], reps)
        assert status == 1, "HEAD recompiles more"
        rows.append((f"compare two {total:,}-test reports", seconds))
    print(f"| {'command':<56} | median s ({reps} runs) | target | met |")
    print(f"|{'-' * 58}|---:|---:|:---:|")
    met = True
    for name, seconds in rows:
        ok = seconds < TARGET_SECONDS
        met = met and ok
        print(f"| {name:<56} | {seconds:.2f} | < {TARGET_SECONDS:g} | {'yes' if ok else 'NO'} |")
    return 0 if args.quick or met else 1


if __name__ == "__main__":
    sys.exit(main())
