"""Judgement of records against a budget, and the wording of what it found (pure)."""

from __future__ import annotations

from runs import run_of

from pytest_recompile._torch.reasons import parse_reason
from pytest_recompile.model.budget import Budget, Rule
from pytest_recompile.model.judge import judge
from pytest_recompile.model.messages import (
    EAGER_FALLBACK,
    STOPPED,
    failure_message,
    violation_result,
)
from pytest_recompile.model.names import relative
from pytest_recompile.model.records import FunctionRecord, Recompile
from pytest_recompile.reports.terminal import terminal_lines


def record(name: str, recompiles: int, limit: str | None = None) -> FunctionRecord:
    rec = FunctionRecord(name, name, "/nowhere/m.py", 3, compiles=recompiles + 1, limit=limit)
    rec.recompiles = [
        Recompile(f"0/{i + 1}", (parse_reason(f"0/{i}: G['step'] == {i}"),))
        for i in range(recompiles)
    ]
    return rec


def test_judge_total_excludes_functions_with_their_own_budget() -> None:
    f, g = record("f", 2), record("g", 1)
    own = Budget(Rule(0, "--recompile-budget=0"), {"f": Rule(2, "@max_recompiles(2, ...)")})
    found = judge([f, g], own)
    assert [(v.kind, v.used, v.allowed) for v in found] == [("total", 1, 0)]
    explicit = Budget(Rule(2, "@max_recompiles(2)"), {"f": Rule(2, "m")}, total_counts_named=True)
    assert [(v.kind, v.used) for v in judge([f, g], explicit)] == [("total", 3)]


def test_judge_function_budget_and_limit_always_fail() -> None:
    f = record("f", 3)
    assert [v.kind for v in judge([f], Budget(per_function={"f": Rule(1, "m")}))] == ["function"]
    hit = record("h", 7, limit="recompile_limit (8)")
    assert [v.kind for v in judge([hit], Budget(Rule(100, "big")))] == ["limit"]
    assert [v.kind for v in judge([hit], None)] == ["limit"]


def test_failure_message_lists_every_recompile_reason() -> None:
    f = record("f", 2)
    f.recompiles[-1].stopped = True
    rules = Budget(Rule(1, "--recompile-budget=1"))
    found = [violation_result(v) for v in judge([f], rules)]
    text = failure_message([f.to_dict()], found, stopped=True)
    assert text.startswith(
        "pytest-recompile: 2 recompiles of f (EQUALS_MATCH: G['step'] == 0), "
        "budget 1 (--recompile-budget=1)"
    )
    assert "G['step'] == 0" in text
    assert "G['step'] == 1" in text
    assert STOPPED in text
    assert "/nowhere/m.py:3" in text


def test_limit_message_and_summary() -> None:
    hit = record("h", 7, limit="recompile_limit (8)")
    text = failure_message([hit.to_dict()], [violation_result(v) for v in judge([hit], None)])
    assert "recompile_limit (8)" in text
    assert EAGER_FALLBACK in text
    failing = {
        "violations": [{"kind": "limit", "message": "x"}],
        "recompiles": 7,
        "recompile_seconds": 1.5,
        "limit_hit": ["h"],
        "baseline": None,
        "again_seconds": 0.0,
        "reused": 0,
        "saved_seconds": 0.0,
        "functions": [],
        "processes": [],
        "isolation": "entries",
    }
    better = {
        "violations": [],
        "recompiles": 1,
        "recompile_seconds": 0.0,
        "limit_hit": [],
        "baseline": 3,
        "again_seconds": 0.0,
        "reused": 0,
        "saved_seconds": 0.0,
        "functions": [],
        "processes": [],
        "isolation": "entries",
    }
    run = run_of(tests={"t.py::b": ("passed", better), "t.py::a": ("failed", failing)})
    lines = terminal_lines(run)
    assert lines == [
        "t.py::a: x; recompiles cost 1.50 s",
        "t.py::b: 1 recompile, below its baseline of 3: tighten it with "
        "--recompile-baseline-update",
        "2 gated tests, 8 recompiles; 1 broke the gate, 1 hit recompile_limit; "
        "recompiles cost 1.50 s",
    ]  # fmt: skip


def test_relative_paths_for_messages_and_annotations() -> None:
    assert relative("/repo/src/m.py", "/repo") == "src/m.py"
    assert relative("/repo/..hidden.py", "/repo") == "..hidden.py"  # inside, despite the dots
    assert relative("/elsewhere/m.py", "/repo") == "/elsewhere/m.py"
    assert relative("/repo", "/repo/sub") == "/repo"
