"""Benchmark 1: start-up."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import (
    HASH_SEEDS,
    QUIET,
    ROOT,
    Bench,
    Result,
    interleaved,
    run_pytest,
)
from suites import write_startup_suite


def startup_benchmarks(start: Path, tests: int, reps: int, quick: bool) -> list[Result]:
    """Benchmark 1: ``--collect-only`` with the plugin installed but not asked for."""
    results: list[Result] = []
    off = ["--collect-only", *QUIET, "-p", "no:recompile"]
    on = ["--collect-only", *QUIET]
    run_pytest(start, on)  # write bytecode caches, warm the file system
    name = f"start-up: --collect-only, {tests} tests, not asked for"
    if shutil.which("valgrind") and not quick:
        # Wall time on a shared 2-core machine varies by +-20% from run to run, ten times
        # the 2% to be checked; callgrind's instruction counts repeat exactly (HASH_SEEDS).
        # Installed from a wheel, the plugin's modules are found on sys.path, so pytest loads
        # them through its assertion-rewriting hook, as it does every installed plugin's
        # (about 0.8 M instructions a module and 0.15 M a kilobyte of bytecode: it reads the
        # cached bytecode with marshal.load from the open file); this checkout's editable
        # install is found by setuptools' own finder, which that hook does not see. Both are
        # measured: the wheel with the checkout first on PYTHONPATH, in both variants alike.
        wheel = {"PYTHONPATH": str(ROOT)}
        run_pytest(start, on, env=wheel)  # pytest's rewritten bytecode, cached
        for how, extra in (("editable install", {}), ("as from a wheel", wheel)):
            a, b = [], []
            for seed in HASH_SEEDS:
                env = {**extra, "PYTHONHASHSEED": seed}
                a.append(run_pytest(start, off, env=env, instructions=True))
                b.append(run_pytest(start, on, env=env, instructions=True))
            results.append(
                Result(f"{name}, {how} (instructions, callgrind)", "-p no:recompile",
                       "installed", [r.seconds / 1e6 for r in a], [r.seconds / 1e6 for r in b],
                       1.02, unit="M instr")
            )  # fmt: skip
    counted = bool(results)
    a, b = interleaved(reps * 2, lambda: run_pytest(start, off), lambda: run_pytest(start, on))
    results.append(
        Result(f"{'(no target) ' if counted else ''}{name} (wall)", "-p no:recompile",
               "installed", [r.seconds for r in a], [r.seconds for r in b],
               float("inf") if counted else 1.02)
    )  # fmt: skip
    return results


def run(b: Bench) -> list[Result]:
    tests = b.sizes["startup_tests"]
    start = b.suite("startup", lambda d: write_startup_suite(d, tests))
    return startup_benchmarks(start, tests, b.reps, b.quick)
