"""Warm starts: a marked test against the same test checked by hand in two fresh processes.

Variant A is what a team pays without the plugin, vLLM's way: the suite's own run of the test,
then the test by hand in two fresh processes (cold, then warm) sharing a new cache directory,
torch's counters read at the end. Variant B is the suite's run of the same test marked
``warm_start``, the plugin running its two children. Both compile with Inductor on the CPU
(the quick mode with the eager backend: the check then fails, and only its cost is timed). The
row is the whole wall time of each; the children's time is in the summary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import QUIET, Options, Result, interleaved, run_pytest
from harness import Run as Timed

NAME = "warm_start"
TITLE = "warm starts"
TARGETS = {"marked test over the same test checked by hand in two fresh processes": 1.10}

TEST = """
import os

import pytest
import torch


def step(x):
    return torch.relu(x) * 2 + 1


{mark}
def test_restart():
    torch.compile(step, backend="{backend}")(torch.randn(16))
"""

# the vLLM way: run the test in a fresh process, read torch's counters at its end
BY_HAND = """
import json, sys
import pytest
rc = pytest.main(sys.argv[1:])
from torch._dynamo.utils import counters
print("COUNTERS " + json.dumps({g: dict(counters[g]) for g in ("inductor", "aot_autograd")}))
"""


def run(opts: Options) -> list[Result]:
    reps = opts.reps_or(5)

    def write(root: Path) -> None:
        (root / "plain").mkdir()
        (root / "marked").mkdir()
        (root / "plain" / "test_restart.py").write_text(TEST.format(mark="", backend=opts.backend))
        (root / "marked" / "test_restart.py").write_text(
            TEST.format(mark="@pytest.mark.warm_start", backend=opts.backend)
        )
        (root / "by_hand.py").write_text(BY_HAND)

    root = opts.suite("warm_start", write)
    plain_args = [*QUIET, "-p", "no:recompile", "plain/test_restart.py"]

    def by_hand() -> Timed:
        began = time.perf_counter()
        suite = run_pytest(root, plain_args)
        cache = tempfile.mkdtemp(prefix="bench-warm-")
        env = {"TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/t"}
        try:
            for _ in ("cold", "warm"):
                subprocess.run(
                    [sys.executable, str(root / "by_hand.py"), *plain_args],
                    cwd=root, env={**_environ(), **env}, capture_output=True, check=False,
                )  # fmt: skip
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        return Timed(time.perf_counter() - began, suite.maxrss_kb, 0)

    def marked() -> Timed:
        return run_pytest(root, [*QUIET, "marked/test_restart.py"])

    print(f"  {reps} repetitions of each, interleaved", file=sys.stderr)
    a, b = interleaved(reps, by_hand, marked)
    return [
        Result(
            "warm start: one test checked cold, then warm, in fresh processes (its suite run "
            "included)",
            "by hand, 2 processes",
            "@warm_start",
            [r.seconds for r in a],
            [r.seconds for r in b],
            TARGETS["marked test over the same test checked by hand in two fresh processes"],
        )
    ]


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
