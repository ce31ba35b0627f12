"""The Budget and the markers: counts checked, markers parsed into rules, a budget
sent to a child as JSON and back (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_recompile.model.budget import Budget, BudgetError, Rule, check_count, parse_count_text
from pytest_recompile.model.judge import judge, rerecords
from pytest_recompile.model.markers import budget_from_marks
from pytest_recompile.model.names import MAX_RECOMPILES_FORM
from pytest_recompile.model.records import FunctionRecord


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
    # Out of the count, still gated: a recompile_limit hit fails it (judge).
    assert budget(default=0, allow=True) == Budget(allowed="@allow_recompiles")
    assert budget(allow=True) is None  # no gate asked for: nothing to opt out of


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


def test_allow_recompiles_takes_no_positional_arguments() -> None:
    with pytest.raises(BudgetError, match="takes no positional arguments"):
        budget_from_marks({"allow_recompiles": [Mark((1,))]}, Rule(0, "src"), "t")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"eager_fallback": 1}, "must be True or False, got 1"), ({"limit": True}, "'limit'")],
)
def test_allow_recompiles_takes_eager_fallback_only(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(BudgetError, match=message) as info:
        budget_from_marks({"allow_recompiles": [Mark((), kwargs)]}, Rule(0, "src"), "t")
    assert "allow_recompiles(*, eager_fallback: bool = False)" in str(info.value)


def test_eager_fallback_is_said_and_crosses_to_children() -> None:
    found = budget_from_marks(
        {"allow_recompiles": [Mark((), {"eager_fallback": True})]}, Rule(0, "src"), "t"
    )
    source = "@allow_recompiles(eager_fallback=True)"
    assert found == Budget(allowed=source, eager_fallback=source)
    assert found.describe() == (
        f"any number of recompiles ({source}); recompile_limit hits allowed ({source})"
    )
    assert Budget.from_json(json.loads(found.json_text)) == found


def test_a_limit_hit_fails_every_budget_but_an_explicit_fallback() -> None:
    hit = FunctionRecord("f", "f", "t.py", 1, limit="recompile_limit (8)")
    for rules in (None, Budget(), Budget(allowed="@allow_recompiles"), Budget(Rule(9, "m"))):
        assert [v.kind for v in judge([hit], rules)] == ["limit"], rules
    allowed = Budget(allowed="@a", eager_fallback="@a")
    assert judge([hit], allowed) == []


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
