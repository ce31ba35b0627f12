"""Guard reporting: the plugin at --base REV and now, both gating (only with --base).

The gated suite, and tests that each compile a 24-block model (about 300 guards), with the
plugin at ``--base REV`` (A, checked out beside) and now (B), both gating: what reading every
entry's guard tree (and the rest of what came since) costs. Runs only with ``--base``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness import QUIET, Options, Result, interleaved, run_pytest
from suites import write_deep_suite, write_gated_suite

NAME = "guards"
TITLE = "guard reporting against --base"
TARGETS = {"the plugin now over at REV, gated suite and deep models": 1.05}
NEEDS_BASE = True  # a full run takes it only with --base


def guard_benchmarks(gated: Path, deep: Path, opts: Options, base: str) -> list[Result]:
    """The plugin at ``base`` (A, checked out beside) and now (B), both gating."""
    reps = opts.reps
    checkout = opts.root / "base"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(checkout), base],
        cwd=Path(__file__).parent, check=True, capture_output=True,
    )  # fmt: skip
    try:
        then = {"PYTHONPATH": str(checkout)}
        results = []
        for where, args, name in (
            (gated, [*QUIET, "test_gated.py", "--recompile-budget"],
             f"gated suite: {opts.gated_tests} tests x {opts.calls} calls, eager"),
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
                       "plugin now", [r.seconds for r in a], [r.seconds for r in b],
                       TARGETS["the plugin now over at REV, gated suite and deep models"])
            )  # fmt: skip
        return results
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(checkout)],
            cwd=Path(__file__).parent, check=False, capture_output=True,
        )  # fmt: skip


def run(opts: Options) -> list[Result]:
    if opts.base is None:
        raise SystemExit("--only guards needs --base REV, the revision to compare with")
    gated = opts.suite("guards", lambda d: write_gated_suite(d, opts.gated_tests, opts.calls))
    deep = opts.suite("deep", lambda d: write_deep_suite(d, 4 if opts.quick else 20, 24))
    return guard_benchmarks(gated, deep, opts, opts.base)
