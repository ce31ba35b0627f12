"""Side-by-side benchmarks of pytest-recompile.

    python benchmarks/run.py            # the full run: about 50 minutes on 2 cores
    python benchmarks/run.py --quick    # one small repetition of each, to check that it runs

Each benchmark runs a variant A (the plugin off, or not asked for) and a variant B (the plugin
on) in the same session, interleaved (A B B A A B ...), each in a fresh pytest process, and
reports the median and the spread of each, the ratio of the medians B/A and its interval.
Absolute times depend on the machine; the ratios are what the targets are about.

1. start-up: ``pytest --collect-only`` of 200 plain tests, plugin installed but not asked for
   (B) vs ``-p no:recompile`` (A), in instructions (callgrind), for this checkout's editable
   install and as installed from a wheel (pytest then loads the plugin's modules through its
   assertion-rewriting hook). Target <= 1.02 each.
2. gated suite: 100 tests, each compiling its own function (backend eager) and calling it 50
   times, ``--recompile-budget`` (B) vs ``-p no:recompile`` (A). Target <= 1.10; the added
   milliseconds per test, and where they go (cProfile of one gated run).
3. hot path, a sentinel: 20,000 calls of an already compiled function with the gate's tracker
   on (B) and off (A), in blocks of 500 alternated ABBA inside one test, timed inside it. The
   gate installs nothing on a cache hit's path, so both run the same code today: target
   <= 1.05, which a per-call hook added one day would break.
4. fail-fast saving: a global step counter read by an inductor-compiled function, 10 calls,
   gated at budget 0 (B: fails at the second call) vs ungated (A: 8 compiles, then eager).
   Time to verdict: the test's duration, with a cold compile cache (a fresh cache directory
   per run, as on a fresh CI machine) and the compiler started up once at collection on
   another function, as earlier tests of a suite would have. Target <= 0.3. The same with a
   warm cache is reported too, without a target.
5. memory: peak RSS of the gated suite (B) vs off (A). Target <= 1.05.
6. warmed in a module fixture: 20 tests calling a 2-layer ``nn.TransformerEncoder`` (d_model
   64, inductor) three times each at one shape under ``no_grad``, the model compiled and
   warmed once in a module-scoped fixture; ``--recompile-budget`` (B) vs ``-p no:recompile``
   (A), each run with a fresh inductor cache directory. Target <= 1.05: isolation keeps the
   fixture's entries, so no test traces the model again.
7. first called inside tests: the same model compiled at module level and first called
   inside the tests. Isolation drops what each test compiled, and reuses the first test's
   compile for the others (alone, each would compile it first). Target <= 1.05.
8. child processes that compile: inside one gated test, blocks of 2 spawned children that
   import torch and compile one function, alternated ABBA with the child-process contract
   in their environment (B: they record into the spool) and without it (A: what an ungated
   run's children do); three times the repetitions of the suites (21 blocks of each
   by default), as a block varies by 5-8%. Target <= 1.05.
9. child processes that do nothing: one ``python -c pass`` child with the contract's
   environment and without it, counted in instructions by callgrind (as for start-up, wall time
   varies ten times more than the 2% to check). Target <= 1.02. Blocks of 20 such children,
   alternated inside the gated test, by wall time: no target.
10. rebuilt in every test: the same model class built and compiled in each of the 20 tests;
   torch compiles ``forward`` once in all (a new instance passes the entry's guards), and so
   must the gate. Target <= 1.05.
11. three batch sizes: 20 tests each calling the module-level model at one of batch 2, 4, 8;
   alone each compiles its batch statically, so the gate compiles each batch once, where the
   plugin-off run goes dynamic at the second. Target <= 1.15.
12. structured trace: the gated suite of benchmark 2 (every test passes) with
   ``--recompile-budget --recompile-trace=DIR`` (B) vs ``--recompile-budget`` (A): torch builds
   every structured record of each compile into a scratch file, deleted when the test passes.
   Target <= 1.10.
13. guard reporting: the gated suite, and tests that each compile a 24-block model (about 300
   guards), with the plugin at ``--base REV`` (A, checked out beside) and now (B), both
   gating. Target <= 1.05. Runs only with ``--base``.
14. fast suite: 1,500 fast tests, eager backend, each calling a module fixture's warmed
   compiled function, a module-level compiled function or one it defines and compiles, in
   turn; ``--recompile-budget`` (B) vs ``-p no:recompile`` (A). Targets: wall <= 1.02, the
   same suite under ``-n 2`` <= 1.03 (three times the repetitions, 21 runs of each by
   default: its runs spread by up to 6%), peak RSS <= 1.05, and the gated per-test time flat (the
   median of the last fifth of the run over the first fifth <= 1.20, of each test's set-up,
   call and teardown as pytest times them: JUnit XML's millisecond is a third of a test
   here). ``benchmarks/self_time.py`` times the plugin's own share of each of these tests in
   situ.
15. split by a graph break: the model of 7 with its forward split between its two layers by
   ``torch._dynamo.graph_break()``, compiled at module level and first called inside the
   tests (and, a second row, built and compiled in each test). Target <= 1.05: reuse takes
   the first test's compile of the forward and of its resume function.

16. kept-entry call: 20,000 calls per variant and run of a function whose entry a module
   fixture compiled and isolation kept (B) and of one whose entry sits in torch's own list
   (A), blocks of 500 alternated ABBA in one gated test (``benchmarks/kept_entries.py``): what
   the gate adds per call. Target <= 1.25 on the cheapest compiled call (eager, ``x * 2 + 1``).

17. certificate: ``covers()`` deciding 10,000 batch sizes of a compiled model from its
   entries' guards (B) beside the model's warm-up, two compiles with the default inductor
   backend (A), each in a fresh process (``benchmarks/certificate.py``). Target <= 0.5; the
   seconds show the 10,000 points under 1 s.

Each row's verdict comes from the 95% interval of B/A (:func:`ratio_interval`): met where its
upper bound is within the target, NO where its lower bound is beyond, inconclusive otherwise.

One benchmark alone, by the name ``--only`` takes (the registry ``BENCHMARKS`` below):

    python benchmarks/run.py --only startup    # 1 (a few minutes)
    python benchmarks/run.py --only gated      # 2
    python benchmarks/run.py --only hot        # 3
    python benchmarks/run.py --only kept       # 16
    python benchmarks/run.py --only failfast   # 4
    python benchmarks/run.py --only memory     # 5 (runs 2 to read its peak RSS)
    python benchmarks/run.py --only isolation  # 6, 7, 10, 11 and 15
    python benchmarks/run.py --only children   # 8 and 9 (a few minutes)
    python benchmarks/run.py --only trace      # 12 (a few minutes)
    python benchmarks/run.py --only guards --base REV  # 13
    python benchmarks/run.py --only fast       # 14

``benchmarks/shards.py`` times ``pytest-recompile combine``, ``report`` and ``compare`` on
10,000 tests (absolute seconds: there is no plugin-off variant to set beside them), and
``benchmarks/kept_entries.py`` what a call answered by a kept fixture entry costs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import bench_certificate
import bench_children
import bench_failfast
import bench_fast
import bench_gated
import bench_guards
import bench_hot
import bench_kept
import bench_models
import bench_startup
import bench_trace
from harness import (
    Bench,
    Result,
    spread,
)

# The benchmarks, by the name --only takes, in the order a full run takes them: (the numbers
# of the docstring, what it measures, the function). Benchmark 13 runs only with --base.
BENCHMARKS: dict[str, tuple[str, str, Callable[[Bench], list[Result]]]] = {
    "startup": ("1", "start-up", bench_startup.run),
    "gated": ("2", "gated suite", bench_gated.run),
    "hot": ("3", "hot path", bench_hot.run),
    "kept": ("16", "kept-entry call", bench_kept.run),
    "certificate": ("17", "certificate of 10,000 points", bench_certificate.run),
    "failfast": ("4", "fail-fast saving", bench_failfast.run),
    "memory": ("5", "memory of the gated suite", bench_gated.memory),
    "isolation": ("6, 7, 10, 11, 15", "model suites", bench_models.run),
    "children": ("8, 9", "child processes", bench_children.run),
    "trace": ("12", "structured trace", bench_trace.run),
    "guards": ("13", "guard reporting against --base", bench_guards.run),
    "fast": ("14", "fast suite", bench_fast.run),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small repetition of each")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per variant")
    parser.add_argument(
        "--only",
        choices=list(BENCHMARKS),
        default=None,
        help="run one benchmark alone: "
        + ", ".join(f"{name} ({numbers})" for name, (numbers, _, _) in BENCHMARKS.items()),
    )
    parser.add_argument(
        "--base",
        default=None,
        metavar="REV",
        help="benchmark 13 (guards): the git revision to compare with, checked out beside",
    )
    args = parser.parse_args()
    quick = args.quick
    reps = args.reps or (1 if quick else 7)
    if args.only is not None:
        chosen = [args.only]
    else:  # 13 compares with another revision: only when one is given
        chosen = [name for name in BENCHMARKS if name != "guards" or args.base is not None]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="recompile-bench-") as tmp:
        bench = Bench(
            quick=quick,
            reps=reps,
            base=args.base,
            root=Path(tmp),
            sizes={
                "startup_tests": 20 if quick else 200,
                "gated_tests": 10 if quick else 100,
                "calls": 5 if quick else 50,
                "hot_calls": 2000 if quick else 20000,
            },
            backend="eager" if quick else "inductor",
            verdict_reps=args.reps or (1 if quick else 3),
            model_reps=args.reps or (1 if quick else bench_models.MODEL_REPS),
        )
        for index, name in enumerate(chosen, 1):
            numbers, what, run = BENCHMARKS[name]
            print(f"{index}/{len(chosen)} {what} (benchmark {numbers})", file=sys.stderr)
            results += run(bench)
    print_table(results, reps, quick, bench.added_ms, bench.breakdown)
    short = [r.name for r in results if not r.met]
    if short and not quick:
        print(f"\nnot met by the interval (NO or inconclusive): {'; '.join(short)}")
    return 0 if quick or not short else 1


def print_table(
    results: list[Result],
    reps: int,
    quick: bool,
    added_ms: float | None = None,
    breakdown: list[tuple[str, float]] | None = None,
) -> None:
    import torch  # only for its version string

    cores = os.cpu_count()
    print(
        f"pytest-recompile benchmarks, {datetime.date.today().isoformat()}: "
        f"{platform.system()} {platform.machine()}, {cores} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}; {reps} interleaved "
        f"repetitions per variant unless a row says otherwise (reps: its repetitions or "
        f"blocks); verdict from the interval: met where its upper bound is within the target"
        + (" (QUICK: sizes reduced, ratios not meaningful)" if quick else "")
    )
    print()
    print(
        "| benchmark | A | B | reps | A median (spread) | B median (spread) | B/A "
        "| 95% interval | target | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a, b = statistics.median(r.a), statistics.median(r.b)
        low, high = r.interval
        target = "-" if r.target == float("inf") else f"<= {r.target}"
        print(
            f"| {r.name} | {r.a_label} | {r.b_label} | {r.reps} "
            f"| {a:.3f} {r.unit} (±{spread(r.a):.1%}) | {b:.3f} {r.unit} (±{spread(r.b):.1%}) "
            f"| {r.ratio:.3f} | {low:.3f}-{high:.3f} | {target} | {r.verdict} |"
        )
    if added_ms is None or breakdown is None:
        return
    print()
    print(f"Added per gated test, median difference / tests: {added_ms:.2f} ms (within the "
          "noise of the suite's wall time). What the plugin itself spends, from cProfile of one "
          "gated run, cumulative ms per test:")  # fmt: skip
    for label, ms in breakdown:
        print(f"- {label}: {ms:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
