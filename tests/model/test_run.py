"""The run model's decisions on small runs built here (as coverage.py's test_data.py tests
``CoverageData.update``): how two runs fold into one, whether a run fails the gate, whether
it may update a baseline, and how a live session's reports assemble into a run. No pytester,
no torch."""

from __future__ import annotations

from typing import Any

import pytest
from runs import CREATED, ENVIRONMENT, SETTINGS, run_of

from pytest_recompile.model.errors import InputError
from pytest_recompile.model.run import (
    BROKE,
    INCOMPLETE,
    SWITCHED_OFF,
    Attempt,
    LiveRun,
    MergeError,
)


def result(recompiles: int = 0, seconds: float = 0.5, **more: Any) -> Any:
    """A test's figures, as far as the rules read them."""
    return {
        "recompiles": recompiles,
        "compile_seconds": seconds,
        "violations": [],
        "stopped_at": None,
        **more,
    }


def fixture(name: str, seconds: float = 1.0) -> Any:
    return {"node": "t.py", "fixture": name, "seconds": seconds, "functions": []}


# -- update: a test, a fixture, a fault seen twice ------------------------------------------


def test_the_same_results_are_kept_once_timings_aside() -> None:
    run = run_of({"t.py::a": ("passed", result(1, seconds=0.5))})
    run.update(run_of({"t.py::a": ("passed", result(1, seconds=9.0))}), "s2.json")
    assert run.tests == {"t.py::a": Attempt("passed", result(1, seconds=0.5))}


def test_a_rerun_after_a_failure_replaces_it() -> None:
    run = run_of({"t.py::a": ("failed", result(3))})
    run.update(run_of({"t.py::a": ("passed", result(1))}), "rerun.json")
    assert run.tests["t.py::a"] == Attempt("passed", result(1))
    errored = run_of({"t.py::b": ("error", result(0))})
    errored.update(run_of({"t.py::b": ("passed", result(2))}), "rerun.json")
    assert errored.tests["t.py::b"].outcome == "passed"


def test_other_results_after_a_pass_are_an_error_naming_both_sources() -> None:
    run = run_of()
    run.update(run_of({"t.py::a": ("passed", result(1))}), "s1.json")
    with pytest.raises(MergeError) as raised:
        run.update(run_of({"t.py::a": ("passed", result(2))}), "s2.json")
    assert str(raised.value) == (
        "test t.py::a is in s1.json and in s2.json with other results (recompiles: 1 against "
        "2, in that order): a test may be in two inputs only with the same results, or as a "
        "rerun after a failed attempt"
    )
    assert isinstance(raised.value, InputError)


def test_a_conflict_is_told_not_raised_where_the_caller_collects_them() -> None:
    run = run_of({"t.py::a": ("passed", result(1))})
    conflicts: list[str] = []
    run.update(run_of({"t.py::a": ("passed", result(2))}), "worker gw1", conflicts=conflicts)
    assert run.tests["t.py::a"].result["recompiles"] == 2  # the later attempt kept
    assert len(conflicts) == 1
    assert conflicts[0].startswith("test t.py::a is in the run and in worker gw1")


def test_a_fixture_set_up_alike_in_two_runs_is_kept_as_often_as_one_set_it_up() -> None:
    run = run_of(fixtures=[fixture("m"), fixture("p"), fixture("p")])  # p: parametrized
    run.update(run_of(fixtures=[fixture("m", 5.0), fixture("p")]), "s2.json")
    assert [f["fixture"] for f in run.fixtures] == ["m", "p", "p"]
    run.update(run_of(fixtures=[fixture("p")] * 3), "s3.json")  # three set-ups there
    assert [f["fixture"] for f in run.fixtures] == ["m", "p", "p", "p"]
    other = {**fixture("m"), "functions": [{"qualname": "f"}]}  # set up differently
    run.update(run_of(fixtures=[other]), "s4.json")
    assert run.fixtures[-1] == other


def test_faults_and_switched_off_spellings_are_kept_once_and_reasons_add_up() -> None:
    run = run_of(faults=["a fault"], disabled={"TORCH_COMPILE_DISABLE=1": None})
    run.update(
        run_of(
            faults=["a fault", "another"],
            disabled={"TORCH_COMPILE_DISABLE=1": None},
            incomplete="stopped by -x",
        ),
        "s2.json",
    )
    assert run.faults == ["a fault", "another"]
    assert list(run.disabled) == ["TORCH_COMPILE_DISABLE=1"]
    assert run.incomplete == "s2.json: stopped by -x"
    run.update(run_of(incomplete="interrupted"), "s3.json")
    assert run.incomplete == "s2.json: stopped by -x; s3.json: interrupted"


# -- the run's verdicts ---------------------------------------------------------------------

BROKEN = result(2, violations=[{"kind": "budget"}])


def test_a_run_that_broke_a_rule_fails_the_gate_unless_report_only() -> None:
    assert run_of({"t.py::a": ("passed", result())}).gate_failures() == []
    assert run_of({"t.py::a": ("failed", BROKEN)}).gate_failures() == [BROKE]
    report_only = {**SETTINGS, "mode": "report-only"}
    assert run_of({"t.py::a": ("passed", BROKEN)}, settings=report_only).gate_failures() == []


def test_an_incomplete_run_and_compile_switched_off_fail_the_gate() -> None:
    assert run_of(incomplete="interrupted").gate_failures() == [INCOMPLETE]
    off = {"TORCH_COMPILE_DISABLE=1": None}
    assert run_of(disabled=off).gate_failures() == [SWITCHED_OFF]
    warned = {**SETTINGS, "if_disabled": "warn"}
    assert run_of(disabled=off, settings=warned).gate_failures() == []
    assert not run_of(disabled=off, settings=warned).fails_switched_off


def test_why_a_baseline_is_not_updated_first_reason_first() -> None:
    ok = run_of({"t.py::a": ("passed", result(1))})
    assert ok.baseline_refusal() is None
    assert ok.baseline_refusal(0) is None
    assert ok.baseline_refusal(1) == (
        "the run did not pass (exit status 1), so its counts may be incomplete"
    )
    off = run_of(disabled={"TORCH_COMPILE_DISABLE=1": None}, incomplete="interrupted")
    assert (off.baseline_refusal(2) or "").startswith(
        "torch.compile was switched off (TORCH_COMPILE_DISABLE=1): eager code measures nothing"
    )
    assert run_of(incomplete="interrupted").baseline_refusal(2) == (
        "the run is incomplete (interrupted)"
    )
    stopped = run_of({"t.py::a": ("failed", result(1, stopped_at={"file": "t.py"}))})
    assert (stopped.baseline_refusal() or "").startswith("fail-fast stopped t.py::a: its counts")
    failed = run_of({"t.py::b": ("error", result()), "t.py::a": ("passed", result())})
    assert failed.baseline_refusal() == "t.py::b did not pass, so its counts may be incomplete"


# -- a live session: reports assembled per process, then folded ------------------------------


def carried(recompiles: int, **more: Any) -> Any:
    return {"result": result(recompiles), "gated": True, **more}


def test_a_live_run_assembles_each_tests_phases() -> None:
    live = LiveRun()
    live.add("t.py::a", "setup", "passed", None)
    live.add("t.py::a", "call", "failed", None)
    live.add("t.py::a", "teardown", "passed", carried(2))
    live.add("t.py::b", "setup", "skipped", carried(0))
    live.add("t.py::c", "setup", "passed", None)
    live.add("t.py::c", "call", "passed", None)
    live.add("t.py::c", "teardown", "failed", carried(1, degraded=["no guard lines"]))
    live.add("t.py::d", "teardown", "passed", {"gated": True})  # no figures
    run = live.finish(
        environment=ENVIRONMENT, settings=SETTINGS, created=CREATED, collection=None,
        incomplete="1 gated test ran without figures (t.py::d)",
    )  # fmt: skip
    assert {n: a.outcome for n, a in run.tests.items()} == {
        "t.py::a": "failed",
        "t.py::b": "skipped",
        "t.py::c": "error",  # an error in teardown spoils a pass
    }
    assert live.missing() == ["t.py::d"]
    assert list(live.notes) == ["no guard lines"]
    assert live.told()
    assert run.incomplete == "1 gated test ran without figures (t.py::d)"


def test_a_rerun_in_one_process_starts_a_new_attempt() -> None:
    live = LiveRun()
    for outcome, recompiles in (("failed", 3), ("passed", 1)):  # pytest-rerunfailures
        live.add("t.py::a", "setup", "passed", None, "gw0")
        live.add("t.py::a", "call", outcome, None, "gw0")
        live.add("t.py::a", "teardown", "passed", carried(recompiles), "gw0")
    run = live.finish(
        environment=ENVIRONMENT, settings=SETTINGS, created=CREATED, collection=None,
        incomplete=None,
    )  # fmt: skip
    assert run.tests["t.py::a"] == Attempt("passed", result(1))


def test_workers_fold_as_shards_do() -> None:
    live = LiveRun()
    module = {"fixtures": [fixture("m")]}
    live.add("a.py::x", "setup", "passed", module, "gw0")
    live.add("a.py::x", "teardown", "passed", carried(0, faults=["told in gw0"]), "gw0")
    live.add("a.py::y", "setup", "passed", module, "gw1")  # the module's fixture, again there
    live.add("a.py::y", "teardown", "passed", carried(1, faults=["told in gw0"]), "gw1")
    live.add("a.py::z", "teardown", "passed", carried(5), "gw0")  # --dist each: both ran z
    live.add("a.py::z", "teardown", "passed", carried(6), "gw1")
    run = live.finish(
        environment=ENVIRONMENT, settings=SETTINGS, created=CREATED, collection=None,
        incomplete=None,
    )  # fmt: skip
    assert sorted(run.tests) == ["a.py::x", "a.py::y", "a.py::z"]
    assert [f["fixture"] for f in run.fixtures] == ["m"]  # set up alike: kept once
    assert run.faults[0] == "told in gw0"
    assert run.faults[1].startswith("test a.py::z is in worker gw0 and in worker gw1 with")
    assert len(run.faults) == 2
