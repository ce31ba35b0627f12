"""Start-up: pytest --collect-only of 200 plain tests, the plugin installed, not asked for.

``pytest --collect-only`` of 200 plain tests, plugin installed but not asked for (B) vs ``-p
no:recompile`` (A), in instructions (callgrind), for this checkout's editable install and as
installed from a wheel (pytest then loads the plugin's modules through its assertion-rewriting
hook). Without valgrind (or with ``--quick``), by wall time instead, with the same target.
"""

from __future__ import annotations

import shutil

from harness import HASH_SEEDS, QUIET, ROOT, Options, Result, interleaved, run_pytest
from suites import write_startup_suite

NAME = "startup"
TITLE = "start-up"
TARGETS = {
    "instructions, editable install and as from a wheel (callgrind)": 1.02,
    "wall time, where valgrind is missing": 1.02,
}


def run(opts: Options) -> list[Result]:
    tests = 20 if opts.quick else 200
    start = opts.suite("startup", lambda d: write_startup_suite(d, tests))
    results: list[Result] = []
    off = ["--collect-only", *QUIET, "-p", "no:recompile"]
    on = ["--collect-only", *QUIET]
    run_pytest(start, on)  # write bytecode caches, warm the file system
    name = f"start-up: --collect-only, {tests} tests, not asked for"
    if shutil.which("valgrind") and not opts.quick:
        # Wall time on a shared 2-core machine varies by +-20% from run to run, ten times
        # the 2% to be checked; callgrind's instruction counts repeat exactly (HASH_SEEDS).
        # Installed from a wheel, the plugin's modules are found on sys.path, so pytest loads
        # them through its assertion-rewriting hook, as it does every installed plugin's
        # (about 0.8 M instructions a module and 0.15 M a kilobyte of bytecode: it reads the
        # cached bytecode with marshal.load from the open file); this checkout's editable
        # install is found by setuptools' own finder, which that hook does not see. Both are
        # measured: the wheel with the checkout first on PYTHONPATH, in both variants alike.
        wheel = {"PYTHONPATH": str(ROOT)}
        target = TARGETS["instructions, editable install and as from a wheel (callgrind)"]
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
                       target, unit="M instr")
            )  # fmt: skip
    counted = bool(results)
    a, b = interleaved(opts.reps * 2, lambda: run_pytest(start, off), lambda: run_pytest(start, on))
    results.append(
        Result(f"{'(no target) ' if counted else ''}{name} (wall)", "-p no:recompile",
               "installed", [r.seconds for r in a], [r.seconds for r in b],
               float("inf") if counted else TARGETS["wall time, where valgrind is missing"])
    )  # fmt: skip
    return results
