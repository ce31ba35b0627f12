"""Gated suite: 100 tests each compiling its own function, its time and its peak memory.

100 tests, each compiling its own function (backend eager) and calling it 50 times,
``--recompile-budget`` (B) vs ``-p no:recompile`` (A), seven runs of each: their wall time,
and the peak RSS of the same runs (``--only memory`` runs this benchmark too). Printed after
the table: the added milliseconds per test, and where they go (cProfile of one gated run).
"""

from __future__ import annotations

import os
import pstats
import statistics
import subprocess
import sys
from pathlib import Path

from harness import QUIET, Options, Result, interleaved, run_pytest
from suites import write_gated_suite

NAME = "gated"
ALIASES = ("memory",)  # its peak RSS: the same runs
TITLE = "gated suite and its memory"
TARGETS = {"wall time": 1.10, "peak RSS (the same runs)": 1.05}


def where_the_time_goes(workdir: Path, tests: int) -> list[tuple[str, float]]:
    """Milliseconds per test in the plugin's entry points, from cProfile of one gated run."""
    profile = workdir / "gated.prof"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), str(workdir / "launcher.py"),
         *QUIET, "test_gated.py", "--recompile-budget"],
        cwd=workdir, capture_output=True, text=True, check=False,
    )  # fmt: skip
    stats = pstats.Stats(str(profile))
    tracker = os.path.join("recording", "tracker.py")
    ledger = os.path.join("isolation", "ledger.py")
    verdict = os.path.join("recording", "verdict.py")
    versions = os.path.join("_torch", "versions.py")
    wanted = {
        (tracker, "start"): "start: metrics capacity, compile callbacks",
        (ledger, "isolate"): "isolation: drop what earlier tests compiled",
        (tracker, "stop"): "stop: count entries, graph breaks, compile seconds",
        ("gate.py", "on_compile"): "compile hook (first compiles)",
        (verdict, "freeze"): "results for the report (summary, JUnit)",
        (versions, "check_torch"): "importing torch._dynamo, once per session",
    }
    found: dict[str, float] = {}
    for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        for (suffix, func), label in wanted.items():
            if filename.endswith(os.path.join("pytest_recompile", suffix)) and name == func:
                found[label] = found.get(label, 0.0) + row[3]  # cumulative seconds
    return [(label, found.get(label, 0.0) * 1000 / tests) for label in wanted.values()]


def run(opts: Options) -> list[Result]:
    """The suite's wall time, and the peak RSS of the same runs."""
    gated = opts.suite("gated", lambda d: write_gated_suite(d, opts.gated_tests, opts.calls))
    off = [*QUIET, "test_gated.py", "-p", "no:recompile"]
    on = [*QUIET, "test_gated.py", "--recompile-budget"]
    run_pytest(gated, off)  # warm caches
    a, b = interleaved(opts.reps, lambda: run_pytest(gated, off), lambda: run_pytest(gated, on))
    assert all(run.rc == 0 for run in a + b), "the gated suite must pass"
    seconds_a, seconds_b = [run.seconds for run in a], [run.seconds for run in b]
    difference = statistics.median(seconds_b) - statistics.median(seconds_a)
    added_ms = difference * 1000 / opts.gated_tests
    notes = [
        f"Added per gated test, median difference / tests: {added_ms:.2f} ms (within the "
        "noise of the suite's wall time). What the plugin itself spends, from cProfile of one "
        "gated run, cumulative ms per test:"
    ] + [f"- {label}: {ms:.2f} ms" for label, ms in where_the_time_goes(gated, opts.gated_tests)]
    return [
        Result(f"gated suite: {opts.gated_tests} tests x {opts.calls} calls, eager",
               "-p no:recompile", "--recompile-budget", seconds_a, seconds_b, TARGETS["wall time"],
               notes=notes),
        Result("memory: peak RSS of the gated suite", "-p no:recompile", "--recompile-budget",
               [run.maxrss_kb / 1024 for run in a], [run.maxrss_kb / 1024 for run in b],
               TARGETS["peak RSS (the same runs)"], unit="MiB"),
    ]  # fmt: skip
