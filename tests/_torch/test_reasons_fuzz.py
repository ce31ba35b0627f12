"""Property tests: the reason parser never raises and keeps known kinds; markers accept
exactly their documented forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_recompile._torch.reasons import parse_reason
from pytest_recompile.model.budget import BudgetError
from pytest_recompile.model.guards import KINDS
from pytest_recompile.model.markers import budget_from_marks

KNOWN = [
    ("G['step'] == 0", "EQUALS_MATCH"),
    ("n == 3", "EQUALS_MATCH"),
    ("self.scale == 1.0", "EQUALS_MATCH"),
    ("tensor 'x' size mismatch at index 0. expected 4, actual 8", "TENSOR_MATCH"),
    ("tensor 'L['x']' dtype mismatch. expected Float, actual Double", "TENSOR_MATCH"),
    ("GLOBAL_STATE changed: grad_mode", "GLOBAL_STATE"),
    ("___check_obj_id(fn, 139673)", "ID_MATCH"),
    ("___check_type_id(xs, 140018)", "TYPE_MATCH"),
    ("len(xs) == 2", "SEQUENCE_LENGTH"),
    ("2 <= x.size()[0]", "SHAPE_ENV"),
    ("y is None", "NONE_MATCH"),
    ("a is b", "OBJECT_ALIASING"),
    ("BACKEND_MATCH failure: different backend", "BACKEND_MATCH"),
    ("___check_torch_function_mode_stack()", "TORCH_FUNCTION_MODE_STACK"),
]

line_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)


@given(st.text())
def test_parse_reason_never_raises(raw: str) -> None:
    reason = parse_reason(raw)
    assert reason.kind in KINDS
    assert reason.raw == raw
    assert reason.text


@given(
    st.sampled_from(KNOWN),
    st.tuples(st.integers(0, 99), st.integers(0, 99)),
    st.one_of(st.none(), line_text),
    st.one_of(st.none(), st.text(max_size=200)),
)
def test_known_reasons_keep_their_kind(known, entry, comment, stack) -> None:
    text, kind = known
    raw = f"{entry[0]}/{entry[1]}: {text}"
    if comment is not None:
        raw += f"{' ' * 30}# {comment}  # t.py:3 in f"
    if stack is not None:
        raw += f"\nUser stack trace:\n{stack}"
    reason = parse_reason(raw)
    assert reason.kind == kind
    assert reason.text == text
    assert reason.entry == f"{entry[0]}/{entry[1]}"


@dataclass
class Mark:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


values = st.one_of(
    st.integers(-5, 50),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)


def documented(mark: Mark) -> bool:
    """max_recompiles(n: int >= 0, *, function: str | None = None), n also by keyword."""
    if set(mark.kwargs) - {"n", "function"}:
        return False
    given_n = list(mark.args) + ([mark.kwargs["n"]] if "n" in mark.kwargs else [])
    if len(given_n) != 1:
        return False
    n = given_n[0]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        return False
    function = mark.kwargs.get("function")
    return function is None or (isinstance(function, str) and bool(function.strip()))


@given(
    st.lists(values, max_size=3),
    st.dictionaries(st.sampled_from(["n", "function", "fn", "budget"]), values, max_size=3),
)
def test_max_recompiles_accepts_exactly_the_documented_forms(args, kwargs) -> None:
    mark = Mark(tuple(args), kwargs)
    try:
        budget = budget_from_marks({"max_recompiles": [mark]}, None, "t")
    except BudgetError:
        assert not documented(mark)
    else:
        assert documented(mark)
        assert budget is not None


@given(st.lists(st.one_of(st.sampled_from([*KINDS, "LENGTH_CHECK", "tensor_match"]), values)))
def test_guard_kind_markers_accept_exactly_known_kinds(kinds) -> None:
    valid = {*KINDS, "LENGTH_CHECK"}
    mark = Mark(tuple(kinds))
    ok = bool(kinds) and all(isinstance(k, str) and k.upper() in valid for k in kinds)
    try:
        budget_from_marks({"expect_guards": [mark]}, None, "t")
    except BudgetError:
        assert not ok
    else:
        assert ok
