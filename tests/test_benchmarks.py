"""The benchmark is not a test; this only checks that its quick mode runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # runs the benchmark's quick mode: a minute or two

BENCH = Path(__file__).parent.parent / "benchmarks" / "run.py"


def test_benchmark_quick_mode_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [
        line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    names = [row.split("|")[1].strip() for row in rows[1:]]
    assert [name.removeprefix("(no target) ").split(":")[0] for name in names] == [
        "start-up",
        "gated suite",
        "hot path",
        "fail-fast saving",
        "the same, warm compile cache",
        "memory",
        "warmed in a module fixture",
        "first called inside the tests",
        "built and compiled in each test",
        "module-level, each test at one of 3 batch sizes",
        "module-level, forward split by one graph break, first called in the tests",
        "split by one graph break, built and compiled in each test",
        "child processes that compile",
        "child processes that do nothing",
        "gated suite with --recompile-trace",
        "fast suite",
        "fast suite under -n 2",
        "fast suite",
        "fast suite, gated",
    ]
    assert "Added per gated test, median difference / tests:" in proc.stdout


def test_shards_benchmark_quick_mode_runs() -> None:
    script = BENCH.parent / "shards.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].split()[0] for row in rows] == ["combine", "report", "compare"]
