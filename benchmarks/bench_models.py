"""Model suites: a TransformerEncoder warmed, first called, rebuilt, at 3 batch sizes, split.

20 tests each calling a 2-layer ``nn.TransformerEncoder`` (d_model 64, inductor) three times
at one shape under ``no_grad``; ``--recompile-budget`` (B) vs ``-p no:recompile`` (A), each
run with a fresh inductor cache directory, nine runs of each by default. The model is:

- ``warmed``: compiled and warmed once in a module-scoped fixture. Isolation keeps the
  fixture's entries, so no test traces the model again.
- ``inside``: compiled at module level and first called inside the tests. Isolation drops what
  each test compiled, and reuses the first test's compile for the others (alone, each would
  compile it first).
- ``rebuilt``: the same model class built and compiled in each test; torch compiles
  ``forward`` once in all (a new instance passes the entry's guards), and so must the gate.
- ``batches``: module-level, each test at one of batch 2, 4, 8; alone each compiles its batch
  statically, so the gate compiles each batch once, where the plugin-off run goes dynamic at
  the second.
- ``split`` and ``split_rebuilt``: the forward split between its two layers by
  ``torch._dynamo.graph_break()``, module-level and first called inside the tests, and built
  and compiled in each test: reuse takes the first test's compile of the forward and of its
  resume function.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import QUIET, Options, Result, interleaved, run_pytest
from suites import write_transformer_suite

NAME = "isolation"
TITLE = "model suites"
TARGETS = {  # each suite's B/A
    "warmed": 1.05,
    "inside": 1.05,
    "rebuilt": 1.05,
    "batches": 1.15,
    "split": 1.05,
    "split_rebuilt": 1.05,
}

# Nine runs of each: a model suite's runs spread by 5-15% on a shared 2-core machine, and a
# median of five read 0.93 to 1.16 for the same suite from run to run (the fixture's).
MODEL_REPS = 9
MODEL_SUITES = {
    "warmed": "warmed in a module fixture",
    "inside": "first called inside the tests",
    "rebuilt": "built and compiled in each test",
    "batches": "module-level, each test at one of 3 batch sizes",
    "split": "module-level, forward split by one graph break, first called in the tests",
    "split_rebuilt": "split by one graph break, built and compiled in each test",
}


def model_benchmarks(
    dirs: dict[str, Path], model_tests: int, backend: str, verdict_reps: int
) -> list[Result]:
    """The model suites, each side by side, a fresh compile cache per run."""
    results = []
    fresh = iter(range(1_000_000))
    for key, label in MODEL_SUITES.items():
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
                   [r.seconds for r in b], TARGETS[key])
        )  # fmt: skip
    return results


def run(opts: Options) -> list[Result]:
    tests = 4 if opts.quick else 20
    dirs = {
        kind: opts.suite(
            kind, lambda d, k=kind: write_transformer_suite(d, tests, opts.backend, kind=k)
        )
        for kind in MODEL_SUITES
    }
    return model_benchmarks(dirs, tests, opts.backend, opts.reps_or(MODEL_REPS))
