"""The benchmarks are not tests: these check that their quick mode runs end to end, that
``run.py --list``, the benchmark modules and benchmarks/README.md agree, how a verdict is read
from an interval, and how a run is written as JSON."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from docblocks import checked_blocks

BENCH = Path(__file__).parent.parent / "benchmarks" / "run.py"


@pytest.mark.subprocess  # the benchmark's quick mode: a minute or two
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
        "memory",
        "hot path (sentinel",
        "kept-entry call",
        "certificate",
        "fail-fast saving",
        "the same, warm compile cache",
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
        "warm start",
    ]
    assert "Added per gated test, median difference / tests:" in proc.stdout
    header = [cell.strip() for cell in rows[0].split("|")[1:-1]]
    assert header[3:] == [
        "reps", "A median (spread)", "B median (spread)", "B/A", "95% interval", "target",
        "verdict",
    ]  # fmt: skip
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        low, high = map(float, cells[7].split("-"))
        assert low <= float(cells[6]) <= high, row
        assert cells[9] in ("met", "NO", "inconclusive", "-"), row


def load_harness() -> Any:
    spec = importlib.util.spec_from_file_location("bench_harness", BENCH.parent / "harness.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_harness"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("b", "verdict"),
    [
        ([1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00], "met"),  # well within 1.05
        ([1.20, 1.22, 1.19, 1.21, 1.20, 1.18, 1.23], "NO"),  # all beyond
        ([0.95, 1.12, 1.00, 1.10, 0.97, 1.08, 1.03], "inconclusive"),  # the target inside
    ],
)
def test_a_verdict_comes_from_the_interval(b: list[float], verdict: str) -> None:
    run = load_harness()
    a = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0]
    result = run.Result("r", "A", "B", a, b, 1.05)
    low, high = result.interval
    assert low <= result.ratio <= high
    assert result.verdict == verdict, (low, high)
    assert result.met == (verdict == "met")
    assert run.Result("r", "A", "B", a, b, float("inf")).verdict == "-"
    assert run.ratio_interval(a, b) == run.ratio_interval(a, b)  # one seed: reproducible


@pytest.mark.subprocess
def test_shards_benchmark_quick_mode_runs() -> None:
    script = BENCH.parent / "shards.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].split()[0] for row in rows] == ["combine", "report", "compare"]


def listed() -> dict[str, str]:
    """``run.py --list``: each benchmark's names, and the line that says what it measures."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--list"], capture_output=True, text=True, check=True
    )
    return {
        line.split("  ")[0]: line.split("  ", 1)[1].strip()
        for line in proc.stdout.splitlines()
        if not line.startswith(" ")
    }


def test_the_list_names_every_benchmark_module() -> None:
    """Each ``bench_*.py`` is a benchmark: ``--list`` gives its ``NAME`` (and the other names
    ``--only`` takes for it) and the first line of its docstring."""
    found = listed()
    modules = sorted(BENCH.parent.glob("bench_*.py"))
    assert len(found) == len(modules), found
    for path in modules:
        source = path.read_text()
        (name,) = re.findall(r'^NAME = "(\w+)"$', source, re.MULTILINE)
        summary = (ast.get_docstring(ast.parse(source)) or "").splitlines()[0]
        entry = next(names for names in found if names.split(", ")[0] == name)
        assert found[entry] == summary, path
    assert "memory" in next(names for names in found if names.startswith("gated"))


def test_a_run_is_written_as_json_one_row_a_line(tmp_path: Path) -> None:
    harness = load_harness()
    rows = [
        harness.Result("r: x", "A", "B", [1.0, 1.1, 0.9], [1.0, 1.2, 1.1], 1.05, notes=["n"]),
        harness.Result("s", "A", "B", [2.0], [1.0], float("inf"), unit="MiB"),
    ]
    run = harness.record(rows, ["run.py", "--quick"], "2.13.0")
    harness.write_json(tmp_path / "results" / "run.json", run)
    text = (tmp_path / "results" / "run.json").read_text()
    assert json.loads(text) == json.loads(json.dumps(run))
    assert set(run["machine"]) == {"system", "machine", "cores", "python", "torch"}
    assert len(run["commit"]) == 40
    first, second = (line for line in text.splitlines() if line.startswith('  {"name"'))
    assert json.loads(first.rstrip(","))["verdict"] == rows[0].verdict
    assert json.loads(first.rstrip(","))["interval"] == list(rows[0].interval)
    assert (json.loads(second)["target"], json.loads(second)["verdict"]) == (None, "-")


def test_the_readme_lists_every_benchmark(request: pytest.FixtureRequest) -> None:
    """benchmarks/README.md's list of the benchmarks is what ``run.py --list`` prints: their
    names, descriptions and targets come from the modules, and cannot disagree with them."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--list"], capture_output=True, text=True, check=True
    )
    (block,) = checked_blocks(request)
    assert block.text == proc.stdout


def test_no_benchmark_file_is_over_400_lines() -> None:
    """One concern a file: the harness, the suites, a benchmark, a round of results."""
    files = [p for p in BENCH.parent.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    long = {
        p.relative_to(BENCH.parent).as_posix(): n
        for p in files
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long
