"""Markers and option values, parsed and validated into a :class:`Budget` (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .names import (
    ALLOW_RECOMPILES,
    EXPECT_GUARDS,
    EXPECT_GUARDS_FORM,
    FORBID_GUARDS,
    FORBID_GUARDS_FORM,
    FULLGRAPH,
    MAX_CUDAGRAPH_RERECORDS,
    MAX_CUDAGRAPH_RERECORDS_FORM,
    MAX_GRAPH_BREAKS,
    MAX_GRAPH_BREAKS_FORM,
    MAX_RECOMPILES,
    MAX_RECOMPILES_FORM,
)


class BudgetError(ValueError):
    """A budget value that is not a non-negative integer, or a malformed marker."""


class MarkLike(Protocol):
    @property
    def args(self) -> tuple[Any, ...]: ...

    @property
    def kwargs(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Budget:
    """How many recompiles a test may make.

    ``total`` caps the sum over the functions that have no budget of their own (over all
    functions when the total comes from an explicit ``max_recompiles(n)``); ``None`` means
    no cap. ``per_function`` caps single functions, matched by name or qualname.
    """

    total: int | None
    total_source: str = ""
    per_function: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    total_counts_named: bool = False
    expect: frozenset[str] | None = None  # kinds allowed to trigger a recompile; None: any
    expect_source: str = ""
    forbid: frozenset[str] = frozenset()  # kinds that may not be installed on user values
    forbid_source: str = ""
    fullgraph: str | None = None  # where fullgraph semantics came from; None: off
    max_graph_breaks: int | None = None
    graph_breaks_source: str = ""
    max_cudagraph_rerecords: int | None = None
    cudagraph_source: str = ""

    def for_function(self, name: str, qualname: str) -> tuple[int, str] | None:
        found = self.per_function.get(qualname)
        return found if found is not None else self.per_function.get(name)

    def describe(self) -> str:
        parts = []
        if self.total is not None:
            parts.append(f"{self.total} in total ({self.total_source})")
        parts += [f"{n} for {fn} ({src})" for fn, (n, src) in self.per_function.items()]
        if self.expect is not None:
            parts.append(f"recompiles by {', '.join(sorted(self.expect))} only")
        if self.forbid:
            parts.append(f"no {', '.join(sorted(self.forbid))} guards")
        if self.fullgraph:
            parts.append("fullgraph")
        if self.max_graph_breaks is not None:
            parts.append(f"at most {self.max_graph_breaks} graph breaks")
        if self.max_cudagraph_rerecords is not None:
            parts.append(f"at most {self.max_cudagraph_rerecords} CUDA-graph re-records")
        return "; ".join(parts) or "no cap"


def check_count(value: object, where: str) -> int:
    """A budget is a non-negative int; bool, float and str are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(
            f"{where}: budget must be a non-negative integer, got {value!r} "
            f"({type(value).__name__})"
        )
    if value < 0:
        raise BudgetError(f"{where}: budget must be a non-negative integer, got {value}")
    return value


def parse_count_text(text: str, where: str) -> int:
    """An option or ini value: decimal digits only ("0", "3")."""
    stripped = text.strip()
    if not stripped.isdigit():
        raise BudgetError(f"{where}: expected a non-negative integer such as 0 or 3, got {text!r}")
    return int(stripped)


def _parse_max_recompiles(mark: MarkLike, where: str) -> tuple[int, str | None]:
    form = f"accepted form is @pytest.mark.{MAX_RECOMPILES_FORM}"
    kwargs = dict(mark.kwargs)
    unknown = sorted(set(kwargs) - {"n", "function"})
    if unknown:
        raise BudgetError(f"{where}: unknown keyword {', '.join(map(repr, unknown))}; {form}")
    args = list(mark.args)
    if "n" in kwargs:
        args.insert(0, kwargs.pop("n"))
    if len(args) != 1:
        raise BudgetError(
            f"{where}: expected exactly one budget, got {len(args)} arguments; {form}"
        )
    function = kwargs.get("function")
    if function is not None and (not isinstance(function, str) or not function.strip()):
        raise BudgetError(
            f"{where}: function= must be a function name or qualname, got {function!r}; {form}"
        )
    try:
        count = check_count(args[0], where)
    except BudgetError as exc:
        raise BudgetError(f"{exc}; {form}") from None
    return count, function


def _kinds(marks: Iterable[MarkLike], form: str, where: str) -> tuple[frozenset[str], str]:
    """The union of the kinds named by stacked markers (aliases normalised)."""
    from .guards import UnknownKind, check_kind

    kinds: set[str] = set()
    named: list[str] = []
    for mark in marks:
        if mark.kwargs or not mark.args:
            raise BudgetError(
                f"{where}: takes guard kinds as positional strings only; "
                f"accepted form is @pytest.mark.{form}"
            )
        for arg in mark.args:
            try:
                kinds.add(check_kind(arg, where))
            except UnknownKind as exc:
                raise BudgetError(str(exc)) from None
            named.append(repr(arg))
    name = form.split("(", 1)[0]
    return frozenset(kinds), f"@{name}({', '.join(named)})" if named else ""


def _count_marker(
    marks: Iterable[MarkLike], name: str, form: str, where: str
) -> tuple[int | None, str]:
    """The closest ``name(n)`` marker's count and its source, or (None, ""); every
    stacked marker is validated."""
    counts = []
    label = f"@pytest.mark.{name} on {where}"
    for mark in marks:
        if mark.kwargs or len(mark.args) != 1:
            raise BudgetError(
                f"{label}: expected exactly one count; accepted form is @pytest.mark.{form}"
            )
        counts.append(check_count(mark.args[0], label))
    return (counts[0], f"@{name}({counts[0]})") if counts else (None, "")


def _no_args(marks: Iterable[MarkLike], name: str, where: str) -> bool:
    found = False
    for mark in marks:
        if mark.args or mark.kwargs:
            raise BudgetError(f"@pytest.mark.{name} on {where} takes no arguments")
        found = True
    return found


def budget_from_marks(
    marks: Mapping[str, Iterable[MarkLike]],
    default: int | None,
    default_source: str,
    where: str,
    *,
    fullgraph_default: str | None = None,
    baseline: tuple[int, str] | None = None,
) -> Budget | None:
    """The rules of one test, or None when the test is not gated.

    ``marks`` maps each marker name to its marks, closest first (pytest's ``iter_markers``
    order): the closest marker wins for a count; guard kinds of stacked markers add up.
    ``baseline`` (count, source) is the test's recorded count: it replaces the default.
    """
    total: tuple[int, str] | None = None
    per_function: dict[str, tuple[int, str]] = {}
    for mark in marks.get(MAX_RECOMPILES, ()):
        count, function = _parse_max_recompiles(mark, f"@pytest.mark.{MAX_RECOMPILES} on {where}")
        if function is None:
            total = total or (count, f"@{MAX_RECOMPILES}({count})")
        else:
            source = f"@{MAX_RECOMPILES}({count}, function={function!r})"
            per_function.setdefault(function, (count, source))
    try:
        allowed = _no_args(marks.get(ALLOW_RECOMPILES, ()), ALLOW_RECOMPILES, where)
    except BudgetError as exc:
        raise BudgetError(
            f"{exc}; use @pytest.mark.{MAX_RECOMPILES_FORM} to set a budget"
        ) from None
    expect_marks = list(marks.get(EXPECT_GUARDS, ()))
    expect, expect_source = _kinds(
        expect_marks, EXPECT_GUARDS_FORM, f"@pytest.mark.{EXPECT_GUARDS} on {where}"
    )
    forbid, forbid_source = _kinds(
        marks.get(FORBID_GUARDS, ()), FORBID_GUARDS_FORM, f"@pytest.mark.{FORBID_GUARDS} on {where}"
    )
    fullgraph = (
        f"@pytest.mark.{FULLGRAPH}"
        if _no_args(marks.get(FULLGRAPH, ()), FULLGRAPH, where)
        else None
    )
    breaks, breaks_source = _count_marker(
        marks.get(MAX_GRAPH_BREAKS, ()), MAX_GRAPH_BREAKS, MAX_GRAPH_BREAKS_FORM, where
    )
    rerecords, rerecords_source = _count_marker(
        marks.get(MAX_CUDAGRAPH_RERECORDS, ()),
        MAX_CUDAGRAPH_RERECORDS,
        MAX_CUDAGRAPH_RERECORDS_FORM,
        where,
    )
    rules: dict[str, Any] = {
        "per_function": per_function,
        "expect": expect if expect_marks else None,
        "expect_source": expect_source,
        "forbid": forbid,
        "forbid_source": forbid_source,
        "fullgraph": fullgraph,
        "max_graph_breaks": breaks,
        "graph_breaks_source": breaks_source,
        "max_cudagraph_rerecords": rerecords,
        "cudagraph_source": rerecords_source,
    }
    if total is not None:
        budget = Budget(total[0], total[1], total_counts_named=True, **rules)
    elif baseline is not None and not allowed:
        budget = Budget(baseline[0], baseline[1], **rules)
    elif default is not None and not allowed:
        budget = Budget(default, default_source, **rules)
    elif (
        per_function
        or expect_marks
        or forbid
        or fullgraph
        or breaks is not None
        or rerecords is not None
    ):
        budget = Budget(None, "", **rules)
    else:
        return None
    if fullgraph_default and budget.fullgraph is None:
        budget = replace(budget, fullgraph=fullgraph_default)
    return budget
