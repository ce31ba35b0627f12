"""The tracker as a plain context manager, outside pytest."""

from __future__ import annotations

import collections
import json
import re
import sys

import pytest
import snippets
import torch
import torch_state
from snippets import DOUBLE

from pytest_recompile import (
    CompiledWhileWarm,
    RecompileBudgetExceeded,
    RecompileTracker,
    warm,
)
from pytest_recompile._torch import events
from pytest_recompile.model.messages import STOPPED
from pytest_recompile.model.names import PREFIX
from pytest_recompile.recording.errors import WARM_REFUSED


def make_double():
    @torch.compile(backend="eager")
    def double(x):
        return x * 2

    return double


def test_fail_fast_raises_at_the_call_before_compiling() -> None:
    double = make_double()
    calls = []
    # The block under test is the tracker's: several statements by design (PT012).
    with (  # noqa: PT012
        pytest.raises(RecompileBudgetExceeded) as info,
        RecompileTracker(max_recompiles=0) as tracker,
    ):
        double(torch.ones(2))
        calls.append(1)
        double(torch.ones(3, 3))
        calls.append(2)
    assert calls == [1]
    assert str(info.value).startswith(
        f"{PREFIX} 1 recompile of make_double.<locals>.double (TENSOR_MATCH(rank): "
    )
    assert str(info.value).splitlines()[0].endswith(", budget 0 (max_recompiles=0)")
    assert STOPPED in str(info.value)
    # Outside pytest too, the message says where the call was made.
    assert re.search(
        r"stopped at tests/recording/test_tracker\.py:\d+ in test_fail_fast", str(info.value)
    )
    (record,) = tracker.records
    assert (record.compiles, record.recompile_count, record.cache_entries) == (1, 1, 1)
    assert record.recompiles[0].stopped
    assert record.recompiles[0].seconds is None
    assert torch_state.installed_hooks() == 0


def test_report_only_records_everything() -> None:
    double = make_double()
    with RecompileTracker(mode="report-only") as tracker:
        for rank in range(1, 4):
            double(torch.ones([2] * rank))
    (record,) = tracker.records
    assert record.qualname.endswith("make_double.<locals>.double")
    assert (record.compiles, record.recompile_count, record.cache_entries) == (3, 2, 3)
    assert [r.reasons[0].text for r in record.recompiles] == [
        "tensor 'x' rank mismatch. expected 1, actual 2",
        "tensor 'x' rank mismatch. expected 2, actual 3",
    ]
    assert record.compile_seconds > 0
    assert all(r.seconds and r.seconds > 0 for r in record.recompiles)
    assert tracker.total_recompiles == 2
    assert [v.kind for v in tracker.violations()] == []


def test_at_end_raises_on_exit_but_never_over_the_blocks_own_error() -> None:
    double = make_double()
    with (  # noqa: PT012 - the tracker's block: a loop of calls
        pytest.raises(RecompileBudgetExceeded, match=r"2 recompiles of .*, budget 1"),
        RecompileTracker(max_recompiles=1, mode="at-end"),
    ):
        for rank in range(1, 4):
            double(torch.ones([2] * rank))
    with (  # noqa: PT012 - the tracker's block, ending in the block's own error
        pytest.raises(KeyError, match="own"),
        RecompileTracker(max_recompiles=0, mode="at-end"),
    ):
        for rank in range(1, 4):
            double(torch.ones([2] * rank))
        raise KeyError("own")


def test_tracker_survives_a_reset_inside_the_block() -> None:
    double = make_double()
    with RecompileTracker(mode="report-only") as tracker:
        double(torch.ones(2))
        torch._dynamo.reset()
        double(torch.ones(2))
        double(torch.ones(3, 3))
    (record,) = tracker.records
    assert record.compiles == 3  # the reset dropped the entry: the second call compiled anew
    assert record.recompile_count == 1


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        RecompileTracker(mode="sometimes")
    with pytest.raises(ValueError, match="non-negative integer"):
        RecompileTracker(max_recompiles=-1)


def test_nothing_of_the_plugin_runs_on_a_cache_hit() -> None:
    double = make_double()
    calls: list[str] = []

    def profiler(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and "pytest_recompile" in frame.f_code.co_filename:
            calls.append(frame.f_code.co_name)

    with RecompileTracker(max_recompiles=0):
        double(torch.ones(2))
        sys.setprofile(profiler)
        try:
            for _ in range(200):
                double(torch.ones(2))
            double(torch.ones(3, 3))  # a recompile does reach the plugin: the probe works
        except RecompileBudgetExceeded:
            pass
        finally:
            sys.setprofile(None)
    # Nothing before the recompile: no call on the 200 cache hits. The first plugin frame is
    # the hook (2.9+) or its wrapper around torch's limit check (older releases).
    assert calls[0] in ("_hook", "checked")


LR = {"lr": 0.1}
STEP = 0


class Scaled:
    def __init__(self, scale: int) -> None:
        self.scale = scale

    @property
    def loud(self) -> int:  # a property is never called to read a value
        raise AssertionError("called")

    def __repr__(self) -> str:  # nor a repr
        raise AssertionError("called")


def test_equals_guards_give_the_value_the_call_passed() -> None:
    global STEP

    @torch.compile(backend="eager")
    def step_fn(x, k, m):
        return x * STEP * k * LR["lr"] * m.scale

    m = Scaled(2)
    with RecompileTracker(mode="report-only") as tracker:
        step_fn(torch.ones(2), 1, m)
        STEP = 1
        step_fn(torch.ones(2), 1, m)
        step_fn(torch.ones(2), 3, m)
        LR["lr"] = 0.5
        step_fn(torch.ones(2), 3, m)
        m.scale = 7
        step_fn(torch.ones(2), 3, m)
    STEP, LR["lr"] = 0, 0.1
    found = [(r.kind, r.source, r.expected, r.actual) for r in tracker.reasons()]
    assert found == [
        ("EQUALS_MATCH", "G['STEP']", "0", "1"),
        ("EQUALS_MATCH", "k", "1", "3"),
        ("EQUALS_MATCH", "G['LR']['lr']", "0.1", "0.5"),
        ("EQUALS_MATCH", "m.scale", "2", "7"),
    ]


def test_reading_a_guard_source_never_runs_user_code() -> None:
    class Frame:
        def __init__(self) -> None:
            self.f_locals = {"m": Scaled(2), "seq": [5]}
            self.f_globals: dict[str, object] = {}

    frame = Frame()
    lr: collections.defaultdict[str, float] = collections.defaultdict(float)
    loud_repr = Scaled(3)
    frame.f_globals.update(lr=lr, odd=loud_repr)
    assert events._read_source("G['lr']['x']", frame) is events._MISSING
    assert dict(lr) == {}  # a defaultdict is read, never filled in
    assert events._equals_values(("G['odd'] == 1",), frame) == {}  # no user repr runs
    assert events._equals_values(("m.scale == 1",), frame) == {"m.scale": "2"}
    assert events._read_source("m.scale", frame) == 2
    assert events._read_source("L['seq'][0]", frame) == 5
    assert events._read_source("m.loud", frame) is events._MISSING
    assert events._read_source("m.scale()", frame) is events._MISSING  # calls: never
    assert events._read_source("nothing", frame) is events._MISSING


def test_fixture_api(run) -> None:
    result = run(
        DOUBLE
        + """
from pytest_recompile import CompiledWhileWarm, RecompileBudgetExceeded

def test_counts_and_reasons(recompiles):
    double(torch.ones(2))
    double(torch.ones(2, dtype=torch.float64))
    assert recompiles.count() == 1
    assert recompiles.count("double") == 1
    assert recompiles.kinds() == ["TENSOR_MATCH"]
    assert recompiles.reasons()[0].detail == "dtype"
    assert recompiles.record("double").cache_entries == 2
    guards = recompiles.installed_guards()["double"]
    assert {g.kind for g in guards} >= {"TENSOR_MATCH"}
    assert all(not g.framework for g in guards)

def test_scoped_budget(recompiles):
    double(torch.ones(2))
    with recompiles.scoped(0):
        double(torch.ones(2))
    with pytest.raises(RecompileBudgetExceeded, match=r"1 recompile of .*, budget 0 .scoped.0.."):
        with recompiles.scoped(0):
            double(torch.ones(5, 5))

def test_warm_block(recompiles):
    double(torch.ones(2))
    with recompiles.warm():
        double(torch.ones(2))
    with pytest.raises(CompiledWhileWarm, match="TENSOR_MATCH.rank."):
        with recompiles.warm():
            double(torch.ones(2, 2))

@pytest.mark.max_recompiles(1)
def test_in_a_gated_test_it_is_the_gate(recompiles):
    double(torch.ones(2)); double(torch.ones(3, 3))
    assert recompiles.count() == 1
"""
    )
    result.assert_outcomes(passed=4)


def test_a_caught_warm_refusal_is_the_tests_own_an_uncaught_one_a_violation(
    run, pytester: pytest.Pytester
) -> None:
    """docs/python-api.md: a refusal that leaves the test is a violation of kind warm; one
    the test catches is its own expectation, no violation, and the recompile it stopped still
    counts toward the budget (shown as stopped)."""
    result = run(
        DOUBLE
        + """
from pytest_recompile import CompiledWhileWarm

def refused(recompiles):
    double(torch.ones(2))
    with recompiles.warm():
        double(torch.ones(2, 2))

@pytest.mark.max_recompiles(5)
def test_caught(recompiles):
    with pytest.raises(CompiledWhileWarm):
        refused(recompiles)

@pytest.mark.max_recompiles(0)
def test_caught_over_budget(recompiles):
    with pytest.raises(CompiledWhileWarm):
        refused(recompiles)

@pytest.mark.max_recompiles(5)
def test_uncaught(recompiles):
    refused(recompiles)
""",
        "--recompile-mode=at-end",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(passed=1, failed=2)
    tests = {
        t["nodeid"].split("::")[1]: t
        for t in json.loads((pytester.path / "r.json").read_text())["tests"]
    }
    kinds = {name: [v["kind"] for v in t["violations"]] for name, t in tests.items()}
    assert kinds == {
        "test_caught": [], "test_caught_over_budget": ["total"], "test_uncaught": ["warm"]
    }  # fmt: skip
    assert {name: t["recompiles"] for name, t in tests.items()} == {
        "test_caught": 1, "test_caught_over_budget": 1, "test_uncaught": 1
    }  # fmt: skip


def test_library_api_scoped_and_warm() -> None:
    @torch.compile(backend="eager")
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    double(torch.ones(2))  # warmed up before the tracker: outside any block
    with RecompileTracker(mode="report-only", reset=False) as tracker:
        with tracker.scoped(1, function="double"):
            double(torch.ones(3, 3))
        # The block under test is the scoped tracker's: several calls by design.
        with (  # noqa: PT012
            pytest.raises(RecompileBudgetExceeded, match="double' recompiled 2 times"),
            tracker.scoped(1, function="double"),
        ):
            double(torch.ones(3, 3, 3))
            double(torch.ones(3, 3, 3, 3))
    assert torch_state.current_stance() == "default"
    with pytest.raises(CompiledWhileWarm) as info, warm():
        double(torch.ones(7, 7, 7, 7, 7))
    assert str(info.value).startswith(
        f"{PREFIX} 'test_library_api_scoped_and_warm.<locals>.double' ("
    )
    assert WARM_REFUSED in str(info.value)
    assert "fix TENSOR_MATCH(rank)" in str(info.value)
    assert "stopped at tests/recording/test_tracker.py:" in str(
        info.value
    )  # the call, not the hook
    assert info.value.__suppress_context__
    assert torch_state.current_stance() == "default"


def test_one_line_names_the_function_and_guard_and_warm_fails_alone(
    run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # -rf lines are cut to the terminal's width
    result = run(
        snippets.STEP
        + """
def test_step_counter():
    global step
    for i in range(2):
        step = i
        f(torch.ones(2))

def test_warm_refuses(recompiles):
    global step
    step = 0
    f(torch.ones(2))
    step = 1
    with recompiles.warm():
        f(torch.ones(2))
""",
        "--recompile-budget",
        "-rf",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_warm_refuses _*",
            f"{PREFIX} 'f' (test_it.py:*) {WARM_REFUSED}",
            "    * EQUALS_MATCH: G?'step'? == 0",
            "    fix EQUALS_MATCH: *",
            "  stopped at test_it.py:* in test_warm_refuses, before compiling",
            "*= recompile gate =*",
            "test_it.py::test_step_counter: 1 recompile of f (EQUALS_MATCH: G?'step'? == 0), "
            "budget 0 (--recompile-budget=0)",
            "*short test summary*",
            f"FAILED test_it.py::test_step_counter - Failed: {PREFIX} 1 recompile of f*",
        ]
    )
    out = result.stdout.str()
    assert "During handling" not in out  # the gate's message alone, no chained traceback
    assert "def refuse" not in out
    assert "convert_frame.py" not in out
