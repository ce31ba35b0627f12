"""``combine()`` on small runs built here: what it checks across inputs, the order it folds
them in, and the collections of a split (its folding rules are the model's:
tests/model/test_run.py). tests/reports/test_shards.py runs real shards end to end."""

from __future__ import annotations

from typing import Any

import pytest
from runs import ENVIRONMENT, SETTINGS, run_of

from pytest_recompile.model.errors import InputError
from pytest_recompile.reports.combine import CombineError, combine, overlaps


def result(recompiles: int) -> Any:
    return {"recompiles": recompiles, "violations": [], "stopped_at": None}


def collection(selected: list[str], split_off: tuple[str, ...] = ()) -> Any:
    return {"selected": selected, "split_off": list(split_off), "excluded": []}


def test_nothing_to_combine() -> None:
    with pytest.raises(CombineError, match=r"^no reports to combine$"):
        combine([])


def test_two_environments_are_not_shards_of_one_run() -> None:
    other = {**ENVIRONMENT, "torch": "2.15.0"}
    with pytest.raises(CombineError) as raised:
        combine([("a.json", run_of()), ("b.json", run_of(environment=other))])
    assert str(raised.value) == (
        "b.json ran on torch 2.15.0, a.json on torch 2.13.0+cpu: reports of two environments "
        "are not shards of one run; combine each environment's shards apart (and compare the "
        "combined reports)"
    )
    assert isinstance(raised.value, InputError)


def test_shards_share_the_gate_options_but_not_the_baselines_path() -> None:
    moved = {**SETTINGS, "baseline": "/other/checkout/b.json"}
    combined = combine([("a.json", run_of()), ("b.json", run_of(settings=moved))])
    assert combined.settings == SETTINGS
    strict = {**SETTINGS, "default_budget": 2}
    with pytest.raises(CombineError, match=r"b.json ran with the gate option default_budget=2, "):
        combine([("a.json", run_of()), ("b.json", run_of(settings=strict))])


def test_the_devices_are_the_union_and_the_newest_creation_time_is_kept() -> None:
    cuda = {**ENVIRONMENT, "devices": ["cuda"]}
    combined = combine(
        [
            ("a.json", run_of(created="2026-12-07T01:00:00+00:00")),
            ("b.json", run_of(environment=cuda, created="2026-12-07T02:00:00+00:00")),
        ]
    )
    assert combined.environment["devices"] == ["cpu", "cuda"]
    assert combined.created == "2026-12-07T02:00:00+00:00"


def test_a_rerun_is_the_later_report_whatever_the_order_given() -> None:
    first = run_of({"t.py::a": ("failed", result(3))}, created="2026-12-07T01:00:00+00:00")
    rerun = run_of({"t.py::a": ("passed", result(1))}, created="2026-12-07T02:00:00+00:00")
    for inputs in ([("1.json", first), ("2.json", rerun)], [("2.json", rerun), ("1.json", first)]):
        assert combine(inputs).tests["t.py::a"].outcome == "passed"


def test_tests_come_out_sorted() -> None:
    combined = combine(
        [
            ("a.json", run_of({"t.py::c": ("passed", result(0))})),
            ("b.json", run_of({"t.py::a": ("passed", result(0))})),
        ]
    )
    assert list(combined.tests) == ["t.py::a", "t.py::c"]


def test_a_test_split_off_that_no_shard_ran_makes_the_result_incomplete() -> None:
    one = run_of(collection=collection(["a", "b"], ["c", "d"]), incomplete="stopped by -x")
    two = run_of(collection=collection(["c"], ["a", "b", "d"]))
    combined = combine([("1.json", one), ("2.json", two)])
    assert combined.collection == collection(["a", "b", "c"], ["d"])
    assert combined.incomplete == "1.json: stopped by -x; 1 test collected ran in no shard (d)"


def test_shards_of_one_split_collect_the_same_tests() -> None:
    one = run_of(collection=collection(["a"], ["b"]))
    two = run_of(collection=collection(["b"], ["a", "e"]))
    with pytest.raises(CombineError) as raised:
        combine([("1.json", one), ("2.json", two)])
    assert str(raised.value).startswith("2.json collected e, 1.json did not: shards of one split")


def test_a_report_without_its_collection_leaves_the_combined_without_one() -> None:
    combined = combine([("1.json", run_of(collection=collection(["a"]))), ("2.json", run_of())])
    assert combined.collection is None
    assert combined.incomplete is None


def test_overlapping_shards_are_named() -> None:
    one = run_of(collection=collection(["a", "b"]))
    two = run_of(collection=collection(["b", "c"]))
    assert overlaps([("1.json", one), ("2.json", two)]) == ["b"]
