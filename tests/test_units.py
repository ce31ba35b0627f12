"""Pure modules: markers, reasons, judging, rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_recompile.model.budget import Budget, BudgetError, Rule, check_count, parse_count_text
from pytest_recompile.model.guards import BACKEND_CHANGED, parse_reason
from pytest_recompile.model.judge import judge, rerecords
from pytest_recompile.model.markers import budget_from_marks
from pytest_recompile.model.messages import (
    EAGER_FALLBACK,
    STOPPED,
    failure_message,
    relative,
    violation_result,
)
from pytest_recompile.model.names import MAX_RECOMPILES_FORM
from pytest_recompile.model.records import FunctionRecord, Recompile
from pytest_recompile.reports.terminal import terminal_lines


@dataclass
class Mark:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def budget(
    *marks: Mark, allow: bool = False, default: int | None = None, **more: list[Mark]
) -> Budget | None:
    found = {"max_recompiles": list(marks), "allow_recompiles": [Mark()] if allow else [], **more}
    rule = Rule(default, "--recompile-budget") if default is not None else None
    return budget_from_marks(found, rule, "t")


@pytest.mark.parametrize("value", [0, 1, 7])
def test_check_count_accepts_non_negative_ints(value: int) -> None:
    assert check_count(value, "here") == value


@pytest.mark.parametrize("value", [-1, 1.0, "2", True, False, None])
def test_check_count_refuses_everything_else(value: object) -> None:
    with pytest.raises(BudgetError, match="non-negative integer"):
        check_count(value, "here")


@pytest.mark.parametrize("text", ["-1", "1.5", "abc", "", " ", "0x1", "tests/"])
def test_option_text_must_be_digits(text: str) -> None:
    with pytest.raises(BudgetError, match="expected a non-negative integer"):
        parse_count_text(text, "--recompile-budget")


def test_no_marker_no_default_is_ungated() -> None:
    assert budget() is None


def test_default_applies_and_allow_opts_out() -> None:
    assert budget(default=0) == Budget(Rule(0, "--recompile-budget"))
    assert budget(default=0, allow=True) is None


def test_closest_total_marker_wins_and_counts_every_function() -> None:
    found = budget(Mark((2,)), Mark((5,)), default=0)
    assert found is not None
    assert (found.total, found.total_counts_named) == (Rule(2, "@max_recompiles(2)"), True)


def test_function_markers_stack_closest_first() -> None:
    found = budget(
        Mark((1,), {"function": "f"}), Mark((3,), {"function": "f"}), Mark((2,), {"function": "g"})
    )
    assert found is not None
    assert found.total is None
    assert found.for_function("f", "f") == Rule(1, "@max_recompiles(1, function='f')")
    assert found.for_function("g", "C.g") == Rule(2, "@max_recompiles(2, function='g')")
    assert found.for_function("h", "h") is None


@pytest.mark.parametrize(
    ("mark", "message"),
    [
        (Mark((-1,)), "non-negative integer"),
        (Mark((1.5,)), "non-negative integer"),
        (Mark(("2",)), "non-negative integer"),
        (Mark((True,)), "non-negative integer"),
        (Mark((None,)), "non-negative integer"),
        (Mark(()), "exactly one budget"),
        (Mark((1, 2)), "exactly one budget"),
        (Mark((1,), {"fn": "f"}), "unknown keyword 'fn'"),
        (Mark((1,), {"function": ""}), "function= must be"),
        (Mark((1,), {"function": 3}), "function= must be"),
    ],
)
def test_bad_max_recompiles_names_test_and_form(mark: Mark, message: str) -> None:
    with pytest.raises(BudgetError, match=message) as info:
        budget(mark)
    assert "on t" in str(info.value)
    assert MAX_RECOMPILES_FORM in str(info.value)


def test_n_keyword_is_accepted() -> None:
    expected = Budget(Rule(3, "@max_recompiles(3)"), total_counts_named=True)
    assert budget(Mark((), {"n": 3})) == expected


def test_allow_recompiles_takes_no_arguments() -> None:
    with pytest.raises(BudgetError, match="takes no arguments"):
        budget_from_marks({"allow_recompiles": [Mark((1,))]}, Rule(0, "src"), "t")


RAW = (
    "0/2: G['step'] == 2                                  # return x + step  "
    '# t.py:5 in f\nUser stack trace:\n  File "t.py", line 5, in f\n    return x + step'
)


@pytest.mark.parametrize(
    ("raw", "text", "entry"),
    [
        (RAW, "G['step'] == 2", "0/2"),
        ("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8", None, "0/0"),
        ("tensor 'L['x']' dtype mismatch. expected Float, actual Double", None, None),
        ("1/3: GLOBAL_STATE changed: grad_mode", "GLOBAL_STATE changed: grad_mode", "1/3"),
        ("", "(torch gave no reason)", None),
    ],
)
def test_parse_reason(raw: str, text: str | None, entry: str | None) -> None:
    reason = parse_reason(raw)
    expected = text if text is not None else raw.split(": ", 1)[-1] if entry else raw
    assert (reason.text, reason.entry, reason.raw) == (expected, entry, raw)


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
    lines = terminal_lines([("t.py::b", better), ("t.py::a", failing)])
    assert lines == [
        "t.py::a: x; recompiles cost 1.50 s",
        "t.py::b: 1 recompile, below its baseline of 3: tighten it with "
        "--recompile-baseline-update",
        "2 gated tests, 8 recompiles; 1 broke the gate, 1 hit recompile_limit; "
        "recompiles cost 1.50 s",
    ]  # fmt: skip


def test_cudagraph_rerecords_are_counted_apart() -> None:
    recordings = ["0/0", "1/0", "0/0", "0/0"]
    assert rerecords(recordings) == 2
    assert judge([], Budget(Rule(0, "--recompile-budget=0")), None, recordings) == []
    capped = Budget(max_cudagraph_rerecords=Rule(1, "@m(1)"))
    (found,) = judge([], capped, None, recordings)
    assert (found.kind, found.used, found.allowed) == ("cudagraph_rerecords", 2, 1)
    marked = budget(max_cudagraph_rerecords=[Mark((1,))])
    assert marked is not None
    assert marked.max_cudagraph_rerecords == Rule(1, "@max_cudagraph_rerecords(1)")


@pytest.mark.parametrize(
    ("raw", "kind", "text"),
    [
        # 2.9-2.12: the globals of exec'd code
        ("1/2: G['___unnamed_scope_140687992602752_c90']['step'] == 0", "EQUALS_MATCH", None),
        # 2.9: every guard passed, the backend differs, and torch says nothing else
        ("0/0:", "BACKEND_MATCH", BACKEND_CHANGED),
    ],
)
def test_release_wordings_are_normalised(raw: str, kind: str, text: str | None) -> None:
    reason = parse_reason(raw)
    assert reason.kind == kind
    assert reason.text == (text or "G['step'] == 0")


def test_relative_paths_for_messages_and_annotations() -> None:
    assert relative("/repo/src/m.py", "/repo") == "src/m.py"
    assert relative("/repo/..hidden.py", "/repo") == "..hidden.py"  # inside, despite the dots
    assert relative("/elsewhere/m.py", "/repo") == "/elsewhere/m.py"
    assert relative("/repo", "/repo/sub") == "/repo"


@pytest.mark.parametrize(
    "marks",
    [
        {},
        {"max_recompiles": [Mark((2,))]},
        {"max_recompiles": [Mark((1,), {"function": "f"}), Mark((3,))]},
        {"expect_guards": [Mark(("TENSOR_MATCH(size)", "GLOBAL_STATE"))], "fullgraph": [Mark()]},
        {"forbid_guards": [Mark(("ID_MATCH",))], "max_graph_breaks": [Mark((1,))]},
        {"same_compiles_across_ranks": [Mark()], "max_cudagraph_rerecords": [Mark((0,))]},
    ],
)
def test_a_budget_crosses_to_a_child_as_json_and_back_whole(marks: dict[str, list[Mark]]) -> None:
    """A child process gets its test's budget as JSON (never pickled: a child need not share
    the parent's class layout); what it rebuilds is the same budget."""
    import json

    found = budget(default=0, **marks)
    assert found is not None
    wire = json.loads(json.dumps(found.to_json()))
    assert Budget.from_json(wire) == found
