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
import json
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness import (
    HASH_SEEDS,
    LAUNCHER,
    QUIET,
    ROOT,
    Result,
    Run,
    child_instructions,
    interleaved,
    junit_seconds,
    noisy_reps,
    run_pytest,
    spread,
)
from suites import (
    write_children_suite,
    write_deep_suite,
    write_fast_suite,
    write_gated_suite,
    write_hot_suite,
    write_startup_suite,
    write_step_conftest,
    write_step_suite,
    write_transformer_suite,
)


def fast_benchmarks(fast: Path, tests: int, reps: int, xdist_reps: int) -> list[Result]:
    """Benchmark 14: many fast gated tests, side by side; their memory; and whether the
    gated per-test time stays flat over the run."""
    # Both note each test's duration, as pytest measures it (JUnit XML rounds it to the
    # millisecond, a third of a fast test's): what differs is the plugin alone.
    off = [*QUIET, "-p", "no:recompile"]
    on = [*QUIET, "--recompile-budget"]
    timed = {"BENCH_DURATIONS": "1"}
    run_pytest(fast, off, env=timed)  # warm caches
    slopes: dict[str, list[float]] = {"off": [], "on": []}

    def sloped(args: list[str], side: str) -> Run:
        found = run_pytest(fast, args, env=timed)
        durations = found.durations
        fifth = max(1, len(durations) // 5)
        last, first = durations[-fifth:], durations[:fifth]
        slopes[side].append(statistics.median(last) / statistics.median(first))
        return found

    a, b = interleaved(reps, lambda: sloped(off, "off"), lambda: sloped(on, "on"))
    assert all(r.rc == 0 for r in a + b), "the fast suite must pass"
    # The same under pytest-xdist, two workers: what a worker adds per test (the results
    # each report carries to the controller, and the controller's merge) shows here.
    run_pytest(fast, [*off, "-n", "2"])  # warm caches
    xa, xb = interleaved(
        xdist_reps,
        lambda: run_pytest(fast, [*off, "-n", "2"]),
        lambda: run_pytest(fast, [*on, "-n", "2"]),
    )
    assert all(r.rc == 0 for r in xa + xb), "the fast suite must pass under xdist"
    return [
        Result(f"fast suite: {tests} tests (a fixture's, a module-level and an own compiled "
               "function in turn), eager", "-p no:recompile", "--recompile-budget",
               [r.seconds for r in a], [r.seconds for r in b], 1.02),
        Result(f"fast suite under -n 2: {tests} tests, two xdist workers, {xdist_reps} runs of "
               "each", "-p no:recompile",
               "--recompile-budget", [r.seconds for r in xa], [r.seconds for r in xb], 1.03),
        Result("fast suite: peak RSS", "-p no:recompile", "--recompile-budget",
               [r.maxrss_kb / 1024 for r in a], [r.maxrss_kb / 1024 for r in b], 1.05,
               unit="MiB"),
        Result("fast suite, gated: per-test time of the last fifth of the run over the "
               "first fifth (medians), against the same slope ungated: flat",
               "-p no:recompile", "--recompile-budget", slopes["off"], slopes["on"], 1.20,
               unit="x"),
    ]  # fmt: skip


# --- profile of the gated suite ------------------------------------------------------------


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


# --- main ------------------------------------------------------------------------------------


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


def children_benchmarks(kids: Path, reps: int, quick: bool) -> list[Result]:
    """Benchmarks 8 and 9: inside one gated test, children with and without the contract."""
    results: list[Result] = []
    print(f"  {noisy_reps(reps, quick)} blocks of each, interleaved", file=sys.stderr)
    out = kids / "elapsed.json"
    os.environ["BENCH_OUT"] = str(out)
    done = run_pytest(kids, [*QUIET, "--recompile-budget"])
    assert done.rc == 0, "the children benchmark must pass"
    times = json.loads(out.read_text())
    results.append(
        Result("child processes that compile: 2 spawned children importing torch and "
               "compiling one function, per block", "no contract (ungated run)",
               "contract (gated run)", times["compile"]["a"], times["compile"]["b"], 1.05)
    )  # fmt: skip
    contract = {k: v for k, v in times["contract"].items() if v is not None}
    counted = False
    if shutil.which("valgrind") and not quick:
        # As for start-up: wall time varies ten times more than the 2% to be checked.
        child_instructions(contract)  # write bytecode caches
        a, b = [], []
        for seed in HASH_SEEDS:
            a.append(Run(child_instructions({"PYTHONHASHSEED": seed}) / 1e6, 0, 0))
            b.append(Run(child_instructions({**contract, "PYTHONHASHSEED": seed}) / 1e6, 0, 0))
        results.append(
            Result("child processes that do nothing: one `python -c pass` child "
                   "(instructions, callgrind)", "no contract (ungated run)",
                   "contract (gated run)", [r.seconds for r in a], [r.seconds for r in b],
                   1.02, unit="M instr")
        )  # fmt: skip
        counted = True
    results.append(
        Result(f"{'(no target) ' if counted else ''}child processes that do nothing: 20 "
               "`python -c pass` children, per block (wall)", "no contract (ungated run)",
               "contract (gated run)", times["plain"]["a"], times["plain"]["b"],
               float("inf") if counted else 1.02)
    )  # fmt: skip

    return results


@dataclass
class Bench:
    """What every benchmark reads: the options, the sizes, and the folders of the suites,
    each written the first time a benchmark asks for it."""

    quick: bool
    reps: int
    base: str | None
    root: Path
    sizes: dict[str, int]
    backend: str
    verdict_reps: int
    model_reps: int
    written: dict[str, Path] = field(default_factory=dict)
    gated_memory: tuple[list[float], list[float]] | None = None  # benchmark 2's peak RSS
    added_ms: float | None = None  # benchmark 2: milliseconds added per gated test
    breakdown: list[tuple[str, float]] | None = None  # benchmark 2: where they go

    def suite(self, name: str, write: Callable[[Path], None]) -> Path:
        """The folder of suite ``name`` (with the launcher), written once."""
        if name not in self.written:
            where = self.root / name
            where.mkdir()
            (where / "launcher.py").write_text(LAUNCHER)
            write(where)
            self.written[name] = where
        return self.written[name]

    def gated(self) -> Path:
        return self.suite(
            "gated", lambda d: write_gated_suite(d, self.sizes["gated_tests"], self.sizes["calls"])
        )


def bench_startup(b: Bench) -> list[Result]:
    tests = b.sizes["startup_tests"]
    start = b.suite("startup", lambda d: write_startup_suite(d, tests))
    return startup_benchmarks(start, tests, b.reps, b.quick)


def bench_gated(b: Bench) -> list[Result]:
    """Benchmark 2, and the peak RSS of its runs that benchmark 5 reports."""
    gated = b.gated()
    run_pytest(gated, [*QUIET, "test_gated.py", "-p", "no:recompile"])  # warm caches
    a, r = interleaved(
        b.reps,
        lambda: run_pytest(gated, [*QUIET, "test_gated.py", "-p", "no:recompile"]),
        lambda: run_pytest(gated, [*QUIET, "test_gated.py", "--recompile-budget"]),
    )
    assert all(run.rc == 0 for run in a + r), "the gated suite must pass"
    suite = Result(
        f"gated suite: {b.sizes['gated_tests']} tests x {b.sizes['calls']} calls, eager",
        "-p no:recompile", "--recompile-budget", [run.seconds for run in a],
        [run.seconds for run in r], 1.10,
    )  # fmt: skip
    b.gated_memory = ([run.maxrss_kb / 1024 for run in a], [run.maxrss_kb / 1024 for run in r])
    difference = statistics.median(suite.b) - statistics.median(suite.a)
    b.added_ms = difference * 1000 / b.sizes["gated_tests"]
    b.breakdown = where_the_time_goes(gated, b.sizes["gated_tests"])
    return [suite]


def bench_hot(b: Bench) -> list[Result]:
    calls = b.sizes["hot_calls"]
    hot = b.suite("hot", lambda d: write_hot_suite(d, calls))
    out = hot / "elapsed.json"
    os.environ["BENCH_OUT"] = str(out)
    blocks: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(b.reps):
        run_pytest(hot, [*QUIET, "-p", "no:recompile"])
        for variant, times in json.loads(out.read_text()).items():
            blocks[variant] += times
    # A sentinel: the gate installs nothing on a cache hit's path (torch answers it in C++),
    # so today both variants run the same code; a per-call hook added one day shows here.
    return [
        Result(f"hot path (sentinel: nothing of the gate runs on a cache hit): {calls} calls "
               "of a compiled function per variant and run, in blocks of 500", "tracker off",
               "gate's tracker on", blocks["a"], blocks["b"], 1.05)
    ]  # fmt: skip


def bench_kept(b: Bench) -> list[Result]:
    """A call answered by an entry isolation kept for a live fixture, beside one torch's own
    list answers, in one gated test (benchmarks/kept_entries.py)."""
    from kept_entries import kept_times

    calls = b.sizes["hot_calls"]
    times = kept_times(b.root / "kept", b.reps, calls)
    return [
        Result(f"kept-entry call: {calls} calls per variant and run, in blocks of 500, of a "
               "function whose entry a module fixture compiled and isolation kept",
               "torch's own list", "kept fixture entry", times["a"], times["b"], 1.25,
               unit="us")
    ]  # fmt: skip


def bench_certificate(b: Bench) -> list[Result]:
    """10,000 points of a domain certified from the entries' guards, beside the test's own
    warm-up (benchmarks/certificate.py)."""
    from certificate import POINTS, certificate_times

    times = certificate_times(b.reps)
    return [
        Result(f"certificate: {POINTS} points of a compiled model's batch sizes decided from its "
               "entries' guards, beside its warm-up (two inductor compiles)",
               "warm-up", "covers()", times["warm"], times["covers"], 0.5)
    ]  # fmt: skip


def bench_failfast(b: Bench) -> list[Result]:
    def write(d: Path) -> None:
        write_step_suite(d, b.backend)
        write_step_conftest(d, b.backend)

    step = b.suite("step", write)
    junit = step / "junit.xml"
    ungated = [*QUIET, f"--junitxml={junit}", "-p", "no:recompile"]
    gated_step = [*QUIET, f"--junitxml={junit}", "--recompile-budget"]
    fresh = iter(range(1_000_000))

    def cold() -> dict[str, str]:
        """A compile cache of its own for each run, as on a fresh CI machine."""
        return {"TORCHINDUCTOR_CACHE_DIR": str(step / f"cache-{next(fresh)}")}

    verdict = lambda: junit_seconds(junit)  # noqa: E731
    a, r = interleaved(
        b.verdict_reps,
        lambda: run_pytest(step, ungated, timer=verdict, env=cold()),
        lambda: run_pytest(step, gated_step, timer=verdict, env=cold()),
    )
    assert all(run.rc == 0 for run in a), "the ungated step test must pass"
    assert all(failed_by_the_gate(run) for run in r), "the gate must fail the step test"
    results = [
        Result(f"fail-fast saving: step counter, 10 calls, {b.backend}, cold compile cache: "
               "time to verdict (test duration)", "ungated (8 compiles, then eager)",
               "--recompile-budget (fails at call 2)", [run.seconds for run in a],
               [run.seconds for run in r], 0.3)
    ]  # fmt: skip
    warm_cache = {"TORCHINDUCTOR_CACHE_DIR": str(step / "cache-warm")}
    run_pytest(step, ungated, env=warm_cache)  # fill the cache for both variants
    a, r = interleaved(
        b.verdict_reps,
        lambda: run_pytest(step, ungated, timer=verdict, env=warm_cache),
        lambda: run_pytest(step, gated_step, timer=verdict, env=warm_cache),
    )
    assert all(run.rc == 0 for run in a), "the ungated step test must pass"
    assert all(failed_by_the_gate(run) for run in r), "the gate must fail the step test"
    results.append(
        Result("(no target) the same, warm compile cache: time to verdict", "ungated",
               "--recompile-budget", [run.seconds for run in a], [run.seconds for run in r],
               float("inf"))
    )  # fmt: skip
    return results


GATE_STOP = "1 recompile of scaled (EQUALS_MATCH"


def failed_by_the_gate(run: Run) -> bool:
    """The run failed, and the gate stopped it at the step counter's first recompile (not an
    error of another kind, which would time something else)."""
    return run.rc == 1 and GATE_STOP in run.output and "fail-fast: stopped at" in run.output


def bench_memory(b: Bench) -> list[Result]:
    """Benchmark 5: read from benchmark 2's runs (run here if it was not)."""
    if b.gated_memory is None:
        bench_gated(b)
    assert b.gated_memory is not None
    off, on = b.gated_memory
    return [
        Result("memory: peak RSS of the gated suite", "-p no:recompile", "--recompile-budget",
               off, on, 1.05, unit="MiB")
    ]  # fmt: skip


def bench_isolation(b: Bench) -> list[Result]:
    tests = 4 if b.quick else 20
    dirs = {
        kind: b.suite(kind, lambda d, k=kind: write_transformer_suite(d, tests, b.backend, kind=k))
        for kind in MODEL_SUITES
    }
    return model_benchmarks(dirs, tests, b.backend, b.model_reps)


def bench_children(b: Bench) -> list[Result]:
    kids = b.suite("children", lambda d: write_children_suite(d, noisy_reps(b.reps, b.quick), 20))
    return children_benchmarks(kids, b.reps, b.quick)


def bench_trace(b: Bench) -> list[Result]:
    return [trace_benchmark(b.gated(), b.sizes, b.reps)]


def bench_guards(b: Bench) -> list[Result]:
    if b.base is None:
        raise SystemExit("--only guards needs --base REV, the revision to compare with")
    deep = b.suite("deep", lambda d: write_deep_suite(d, 4 if b.quick else 20, 24))
    return guard_benchmarks(b.gated(), deep, b.sizes, b.reps, b.base, b.root)


def bench_fast(b: Bench) -> list[Result]:
    tests = 60 if b.quick else 1500
    fast = b.suite("fast", lambda d: write_fast_suite(d, tests))
    return fast_benchmarks(fast, tests, b.reps, noisy_reps(b.reps, b.quick))


# The benchmarks, by the name --only takes, in the order a full run takes them: (the numbers
# of the docstring, what it measures, the function). Benchmark 13 runs only with --base.
BENCHMARKS: dict[str, tuple[str, str, Callable[[Bench], list[Result]]]] = {
    "startup": ("1", "start-up", bench_startup),
    "gated": ("2", "gated suite", bench_gated),
    "hot": ("3", "hot path", bench_hot),
    "kept": ("16", "kept-entry call", bench_kept),
    "certificate": ("17", "certificate of 10,000 points", bench_certificate),
    "failfast": ("4", "fail-fast saving", bench_failfast),
    "memory": ("5", "memory of the gated suite", bench_memory),
    "isolation": ("6, 7, 10, 11, 15", "model suites", bench_isolation),
    "children": ("8, 9", "child processes", bench_children),
    "trace": ("12", "structured trace", bench_trace),
    "guards": ("13", "guard reporting against --base", bench_guards),
    "fast": ("14", "fast suite", bench_fast),
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
            model_reps=args.reps or (1 if quick else MODEL_REPS),
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


def trace_benchmark(gated: Path, sizes: dict[str, int], reps: int) -> Result:
    """Benchmark 12: the gated suite with ``--recompile-trace`` (B) and without it (A)."""
    budget = [*QUIET, "test_gated.py", "--recompile-budget"]
    traced = [*budget, f"--recompile-trace={gated / 'traces'}"]
    run_pytest(gated, budget)  # warm caches
    a, b = interleaved(reps, lambda: run_pytest(gated, budget), lambda: run_pytest(gated, traced))
    assert all(r.rc == 0 for r in a + b), "the gated suite must pass"
    assert not (gated / "traces").exists(), "tests that pass leave nothing"
    return Result(
        f"gated suite with --recompile-trace: {sizes['gated_tests']} tests x {sizes['calls']} "
        "calls, eager, every test passes", "--recompile-budget", "and --recompile-trace=DIR",
        [r.seconds for r in a], [r.seconds for r in b], 1.10,
    )  # fmt: skip


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
