"""Benchmark 13: guard reporting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness import (
    QUIET,
    Bench,
    Result,
    interleaved,
    run_pytest,
)
from suites import write_deep_suite


def guard_benchmarks(
    gated: Path, deep: Path, sizes: dict[str, int], reps: int, base: str, root: Path
) -> list[Result]:
    """Benchmark 13: the plugin at ``base`` (A, checked out beside) and now (B), both gating:
    what reading every entry's guard tree (and the rest of what came since) costs."""
    checkout = root / "base"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(checkout), base],
        cwd=Path(__file__).parent, check=True, capture_output=True,
    )  # fmt: skip
    try:
        then = {"PYTHONPATH": str(checkout)}
        results = []
        for where, args, name in (
            (gated, [*QUIET, "test_gated.py", "--recompile-budget"],
             f"gated suite: {sizes['gated_tests']} tests x {sizes['calls']} calls, eager"),
            (deep, [*QUIET, "test_deep.py", "--recompile-budget"],
             "deep models: each test compiles a 24-block model (about 300 guards), eager"),
        ):  # fmt: skip
            print(f"  {name} ({reps} x 2 runs)", file=sys.stderr)
            run_pytest(where, args, env=then)  # warm caches
            a, b = interleaved(
                reps,
                lambda w=where, g=args: run_pytest(w, g, env=then),
                lambda w=where, g=args: run_pytest(w, g),
            )
            assert all(r.rc == 0 for r in a + b), "the suite must pass"
            results.append(
                Result(f"{name}, guard reporting (then: {base})", f"plugin at {base}",
                       "plugin now", [r.seconds for r in a], [r.seconds for r in b], 1.05)
            )  # fmt: skip
        return results
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(checkout)],
            cwd=Path(__file__).parent, check=False, capture_output=True,
        )  # fmt: skip


def run(b: Bench) -> list[Result]:
    if b.base is None:
        raise SystemExit("--only guards needs --base REV, the revision to compare with")
    deep = b.suite("deep", lambda d: write_deep_suite(d, 4 if b.quick else 20, 24))
    return guard_benchmarks(b.gated(), deep, b.sizes, b.reps, b.base, b.root)
