"""Fast suite: 1,500 fast tests, serial and under -n 2, their memory, their slope.

1,500 fast tests, eager backend, each calling a module fixture's warmed compiled function, a
module-level compiled function or one it defines and compiles, in turn;
``--recompile-budget`` (B) vs ``-p no:recompile`` (A). Wall time; the same suite under ``-n 2``
(three times the repetitions, 21 runs of each by default: its runs spread by up to 6%); peak
RSS; and the gated per-test time flat: the median of the last fifth of the run over the first
fifth, of each test's set-up, call and teardown as pytest times them (JUnit XML's millisecond
is a third of a test here), beside the same slope ungated. ``benchmarks/self_time.py`` times
the plugin's own share of each of these tests in situ.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from harness import QUIET, Options, Result, Run, interleaved, noisy_reps, run_pytest
from suites import write_fast_suite

NAME = "fast"
TITLE = "fast suite"
TARGETS = {
    "wall time": 1.02,
    "wall time under -n 2": 1.03,
    "peak RSS": 1.05,
    "gated slope (last fifth over first) over the ungated slope": 1.20,
}


def fast_benchmarks(fast: Path, tests: int, reps: int, xdist_reps: int) -> list[Result]:
    """Many fast gated tests, side by side; their memory; and whether the gated per-test time
    stays flat over the run."""
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
               [r.seconds for r in a], [r.seconds for r in b], TARGETS["wall time"]),
        Result(f"fast suite under -n 2: {tests} tests, two xdist workers, {xdist_reps} runs of "
               "each", "-p no:recompile", "--recompile-budget", [r.seconds for r in xa],
               [r.seconds for r in xb], TARGETS["wall time under -n 2"]),
        Result("fast suite: peak RSS", "-p no:recompile", "--recompile-budget",
               [r.maxrss_kb / 1024 for r in a], [r.maxrss_kb / 1024 for r in b],
               TARGETS["peak RSS"], unit="MiB"),
        Result("fast suite, gated: per-test time of the last fifth of the run over the "
               "first fifth (medians), against the same slope ungated: flat",
               "-p no:recompile", "--recompile-budget", slopes["off"], slopes["on"],
               TARGETS["gated slope (last fifth over first) over the ungated slope"], unit="x"),
    ]  # fmt: skip


def run(opts: Options) -> list[Result]:
    tests = 60 if opts.quick else 1500
    fast = opts.suite("fast", lambda d: write_fast_suite(d, tests))
    return fast_benchmarks(fast, tests, opts.reps, noisy_reps(opts.reps, opts.quick))
