"""Fail-fast saving: time to verdict of a test whose function recompiles at every call.

A global step counter read by an inductor-compiled function, 10 calls, gated at budget 0 (B:
fails at the second call) vs ungated (A: 8 compiles, then eager). Time to verdict: the test's
duration, with a cold compile cache (a fresh cache directory per run, as on a fresh CI
machine) and the compiler started up once at collection on another function, as earlier tests
of a suite would have. The same with a warm cache is reported too, without a target. Each
gated run must have been stopped by the gate (its message at the step counter's first
recompile), not by any failure. Three runs of each by default.
"""

from __future__ import annotations

from pathlib import Path

from harness import QUIET, Options, Result, Run, interleaved, junit_seconds, run_pytest
from suites import write_step_conftest, write_step_suite

NAME = "failfast"
TITLE = "fail-fast saving"
TARGETS = {"time to verdict gated over ungated, cold compile cache": 0.3}


def run(opts: Options) -> list[Result]:
    def write(d: Path) -> None:
        write_step_suite(d, opts.backend)
        write_step_conftest(d, opts.backend)

    step = opts.suite("step", write)
    reps = opts.reps_or(3)  # each run compiles for seconds, cold
    junit = step / "junit.xml"
    ungated = [*QUIET, f"--junitxml={junit}", "-p", "no:recompile"]
    gated_step = [*QUIET, f"--junitxml={junit}", "--recompile-budget"]
    fresh = iter(range(1_000_000))

    def cold() -> dict[str, str]:
        """A compile cache of its own for each run, as on a fresh CI machine."""
        return {"TORCHINDUCTOR_CACHE_DIR": str(step / f"cache-{next(fresh)}")}

    verdict = lambda: junit_seconds(junit)  # noqa: E731
    a, r = interleaved(
        reps,
        lambda: run_pytest(step, ungated, timer=verdict, env=cold()),
        lambda: run_pytest(step, gated_step, timer=verdict, env=cold()),
    )
    assert all(run.rc == 0 for run in a), "the ungated step test must pass"
    assert all(failed_by_the_gate(run) for run in r), "the gate must fail the step test"
    target = TARGETS["time to verdict gated over ungated, cold compile cache"]
    results = [
        Result(f"fail-fast saving: step counter, 10 calls, {opts.backend}, cold compile cache: "
               "time to verdict (test duration)", "ungated (8 compiles, then eager)",
               "--recompile-budget (fails at call 2)", [run.seconds for run in a],
               [run.seconds for run in r], target)
    ]  # fmt: skip
    warm_cache = {"TORCHINDUCTOR_CACHE_DIR": str(step / "cache-warm")}
    run_pytest(step, ungated, env=warm_cache)  # fill the cache for both variants
    a, r = interleaved(
        reps,
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
