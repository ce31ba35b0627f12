"""Benchmarks 6, 7, 10, 11 and 15: the model suites."""

from __future__ import annotations

import sys
from pathlib import Path

from harness import (
    QUIET,
    Bench,
    Result,
    interleaved,
    run_pytest,
)
from suites import write_transformer_suite

# Nine runs of each: a model suite's runs spread by 5-15% on a shared 2-core machine, and a
# median of five read 0.93 to 1.16 for the same suite from run to run (the fixture's).
MODEL_REPS = 9


MODEL_SUITES = {
    "warmed": ("warmed in a module fixture", 1.05),
    "inside": ("first called inside the tests", 1.05),
    "rebuilt": ("built and compiled in each test", 1.05),
    "batches": ("module-level, each test at one of 3 batch sizes", 1.15),
    "split": ("module-level, forward split by one graph break, first called in the tests", 1.05),
    "split_rebuilt": ("split by one graph break, built and compiled in each test", 1.05),
}


def model_benchmarks(
    dirs: dict[str, Path], model_tests: int, backend: str, verdict_reps: int
) -> list[Result]:
    """Benchmarks 6, 7, 10 and 11: the model suites, each side by side, fresh compile cache."""
    results = []
    fresh = iter(range(1_000_000))
    for key, (label, target) in MODEL_SUITES.items():
        print(f"  {label} ({verdict_reps} x 2 runs)", file=sys.stderr)
        where = dirs[key]

        def fresh_cache(where: Path = where) -> dict[str, str]:
            return {"TORCHINDUCTOR_CACHE_DIR": str(where / f"cache-{next(fresh)}")}

        a, b = interleaved(
            verdict_reps,
            lambda where=where: run_pytest(
                where, [*QUIET, "-p", "no:recompile"], env=fresh_cache()
            ),
            lambda where=where: run_pytest(
                where, [*QUIET, "--recompile-budget"], env=fresh_cache()
            ),
        )
        assert all(r.rc == 0 for r in a + b), f"the {key} suite must pass"
        results.append(
            Result(f"{label}: {model_tests} tests x 3 calls of a 2-layer "
                   f"TransformerEncoder, {backend}, fresh compile cache per run",
                   "-p no:recompile", "--recompile-budget", [r.seconds for r in a],
                   [r.seconds for r in b], target)
        )  # fmt: skip
    return results


def run(b: Bench) -> list[Result]:
    tests = 4 if b.quick else 20
    dirs = {
        kind: b.suite(kind, lambda d, k=kind: write_transformer_suite(d, tests, b.backend, kind=k))
        for kind in MODEL_SUITES
    }
    return model_benchmarks(dirs, tests, b.backend, b.model_reps)
