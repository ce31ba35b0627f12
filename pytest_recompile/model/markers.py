"""The markers, parsed and validated into a :class:`~.budget.Budget` (pure); a bad one is
a :class:`~.budget.BudgetError`, said at collection."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from .budget import Budget, BudgetError, GuardBaseline, Rule, WorkCap, WorkFigures, check_count
from .names import (
    ALLOW_RECOMPILES,
    ALLOW_RECOMPILES_FORM,
    EXPECT_GUARDS,
    EXPECT_GUARDS_FORM,
    FORBID_GUARDS,
    FORBID_GUARDS_FORM,
    FULLGRAPH,
    MAX_CUDAGRAPH_RERECORDS,
    MAX_CUDAGRAPH_RERECORDS_FORM,
    MAX_GRAPH_BREAKS,
    MAX_GRAPH_BREAKS_FORM,
    MAX_GRAPH_OPS,
    MAX_GRAPH_OPS_FORM,
    MAX_GRAPHS,
    MAX_GRAPHS_FORM,
    MAX_GUARDS,
    MAX_GUARDS_FORM,
    MAX_RECOMPILES,
    MAX_RECOMPILES_FORM,
    MAX_UNIQUE_SUBGRAPHS,
    MAX_UNIQUE_SUBGRAPHS_FORM,
    SAME_ACROSS_RANKS,
    WARM_START,
)

# Each compile-work marker: its form, and the measure it caps (model/work.py).
WORK_MARKERS = (
    (MAX_GRAPHS, MAX_GRAPHS_FORM, "graphs"),
    (MAX_GRAPH_OPS, MAX_GRAPH_OPS_FORM, "ops"),
    (MAX_UNIQUE_SUBGRAPHS, MAX_UNIQUE_SUBGRAPHS_FORM, "subgraphs"),
)


class MarkLike(Protocol):
    @property
    def args(self) -> tuple[Any, ...]: ...

    @property
    def kwargs(self) -> Mapping[str, Any]: ...


def _parse_count_for(
    mark: MarkLike, where: str, marker_form: str = MAX_RECOMPILES_FORM
) -> tuple[int, str | None]:
    """``name(n, *, function=None)``: the count and the function it is for (None: all)."""
    form = f"accepted form is @pytest.mark.{marker_form}"
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


def _kinds(
    marks: Iterable[MarkLike], form: str, where: str, *, details: bool = True
) -> Rule[frozenset[str]] | None:
    """The union of the kinds named by stacked markers (aliases normalised, ``KIND(detail)``
    where ``details``), or None."""
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
                kinds.add(check_kind(arg, where, details=details))
            except UnknownKind as exc:
                raise BudgetError(str(exc)) from None
            named.append(repr(arg))
    if not named:
        return None
    name = form.split("(", 1)[0]
    return Rule(frozenset(kinds), f"@{name}({', '.join(named)})")


def _count_marker(marks: Iterable[MarkLike], name: str, form: str, where: str) -> Rule[int] | None:
    """The closest ``name(n)`` marker's count, or None; every stacked marker is validated."""
    counts = []
    label = f"@pytest.mark.{name} on {where}"
    for mark in marks:
        if mark.kwargs or len(mark.args) != 1:
            raise BudgetError(
                f"{label}: expected exactly one count; accepted form is @pytest.mark.{form}"
            )
        counts.append(check_count(mark.args[0], label))
    return Rule(counts[0], f"@{name}({counts[0]})") if counts else None


def _no_args(marks: Iterable[MarkLike], name: str, where: str) -> bool:
    found = False
    for mark in marks:
        if mark.args or mark.kwargs:
            raise BudgetError(f"@pytest.mark.{name} on {where} takes no arguments")
        found = True
    return found


def _allowed(marks: Iterable[MarkLike], where: str) -> tuple[str | None, str | None]:
    """``allow_recompiles(*, eager_fallback=False)``: the marker's words where the test has
    it, and where ``eager_fallback=True`` is given (the closest marker's word wins)."""
    label = f"@pytest.mark.{ALLOW_RECOMPILES} on {where}"
    form = f"accepted form is @pytest.mark.{ALLOW_RECOMPILES_FORM}"
    allowed = fallback = None
    for mark in marks:
        if mark.args:
            raise BudgetError(
                f"{label} takes no positional arguments; {form}, or use "
                f"@pytest.mark.{MAX_RECOMPILES_FORM} to set a budget"
            )
        unknown = sorted(set(mark.kwargs) - {"eager_fallback"})
        if unknown:
            raise BudgetError(f"{label}: unknown keyword {', '.join(map(repr, unknown))}; {form}")
        value = mark.kwargs.get("eager_fallback", False)
        if not isinstance(value, bool):
            raise BudgetError(
                f"{label}: eager_fallback must be True or False, got {value!r}; {form}"
            )
        if allowed is None:
            allowed = f"@{ALLOW_RECOMPILES}"
            if value:
                allowed = fallback = f"@{ALLOW_RECOMPILES}(eager_fallback=True)"
    return allowed, fallback


def _counts_for(
    marks: Iterable[MarkLike],
    where: str,
    name: str = MAX_RECOMPILES,
    form: str = MAX_RECOMPILES_FORM,
) -> tuple[Rule[int] | None, dict[str, Rule[int]]]:
    """The closest ``name(n)`` (for every function) and the ``function=`` ones, closest
    first (``max_recompiles``, ``max_guards``)."""
    every: Rule[int] | None = None
    per_function: dict[str, Rule[int]] = {}
    for mark in marks:
        count, function = _parse_count_for(mark, f"@pytest.mark.{name} on {where}", form)
        if function is None:
            every = every or Rule(count, f"@{name}({count})")
        else:
            source = f"@{name}({count}, function={function!r})"
            per_function.setdefault(function, Rule(count, source))
    return every, per_function


def _work_caps(marks: Mapping[str, Iterable[MarkLike]], where: str) -> tuple[WorkCap, ...]:
    """The compile-work markers' caps: per marker, the closest for the whole test and the
    closest for each function it names."""
    caps = []
    for name, form, measure in WORK_MARKERS:
        every, per_function = _counts_for(marks.get(name, ()), where, name, form)
        if every is not None:
            caps.append(WorkCap(measure, every.value, None, every.source))
        caps += [WorkCap(measure, r.value, fn, r.source) for fn, r in per_function.items()]
    return tuple(caps)


def _warm_start(marks: Iterable[MarkLike], where: str) -> Any:
    """The ``warm_start`` rule (its module is loaded only where a test carries it)."""
    marks = list(marks)
    if not marks:
        return None
    from .warm_start import parse_rule

    return parse_rule(marks, where)


def rules_from_marks(
    marks: Mapping[str, Iterable[MarkLike]], where: str
) -> tuple[Budget, str | None]:
    """Every marker of one test read into a Budget without a default total, and the marker
    that opted the test out of the default (``allow_recompiles``), or None.

    ``marks`` maps each marker name to its marks, closest first (pytest's ``iter_markers``
    order): the closest marker wins for a count; guard kinds of stacked markers add up.
    """
    total, per_function = _counts_for(marks.get(MAX_RECOMPILES, ()), where)
    max_guards, guards_per_function = _counts_for(
        marks.get(MAX_GUARDS, ()), where, MAX_GUARDS, MAX_GUARDS_FORM
    )
    allowed, eager_fallback = _allowed(marks.get(ALLOW_RECOMPILES, ()), where)
    fullgraph = _no_args(marks.get(FULLGRAPH, ()), FULLGRAPH, where)
    same = _no_args(marks.get(SAME_ACROSS_RANKS, ()), SAME_ACROSS_RANKS, where)
    rules = Budget(
        total=total,
        per_function=per_function,
        total_counts_named=total is not None,
        expect=_kinds(
            marks.get(EXPECT_GUARDS, ()),
            EXPECT_GUARDS_FORM,
            f"@pytest.mark.{EXPECT_GUARDS} on {where}",
        ),
        forbid=_kinds(
            marks.get(FORBID_GUARDS, ()),
            FORBID_GUARDS_FORM,
            f"@pytest.mark.{FORBID_GUARDS} on {where}",
            details=False,
        ),
        fullgraph=f"@pytest.mark.{FULLGRAPH}" if fullgraph else None,
        max_graph_breaks=_count_marker(
            marks.get(MAX_GRAPH_BREAKS, ()), MAX_GRAPH_BREAKS, MAX_GRAPH_BREAKS_FORM, where
        ),
        max_cudagraph_rerecords=_count_marker(
            marks.get(MAX_CUDAGRAPH_RERECORDS, ()),
            MAX_CUDAGRAPH_RERECORDS,
            MAX_CUDAGRAPH_RERECORDS_FORM,
            where,
        ),
        same_across_ranks=f"@pytest.mark.{SAME_ACROSS_RANKS}" if same else None,
        max_guards=max_guards,
        guards_per_function=guards_per_function,
        eager_fallback=eager_fallback,
        warm_start=_warm_start(marks.get(WARM_START, ()), where),
        work_caps=_work_caps(marks, where),
    )
    return rules, allowed


def choose_total(
    rules: Budget,
    allowed: str | None,
    default: Rule[int] | None,
    baseline: Rule[int] | None,
    fullgraph_default: str | None = None,
    guards_default: Rule[int] | None = None,
    baseline_guards: Mapping[str, GuardBaseline] | None = None,
    baseline_work: Mapping[str, WorkFigures] | None = None,
    work_tolerance: Mapping[str, int] | None = None,
) -> Budget | None:
    """A test's budget: its own ``max_recompiles(n)``, else its baseline, else the default;
    the default ``max_guards`` and fullgraph unless it has its own; its baseline's guards and
    compile work (held to ``work_tolerance``); None when nothing gates the test.

    Opting out (``allow_recompiles``) lifts the count only: under a default or a baseline
    the test stays gated with no count, so that a ``recompile_limit`` hit still fails it."""
    if rules.max_guards is None and guards_default is not None:
        rules = replace(rules, max_guards=guards_default)
    if rules.fullgraph is None and fullgraph_default is not None:
        rules = replace(rules, fullgraph=fullgraph_default)
    if baseline_guards:
        rules = replace(rules, baseline_guards=baseline_guards)
    if baseline_work and work_tolerance is not None:
        rules = replace(rules, baseline_work=baseline_work, work_tolerance=work_tolerance)
    if rules.total is not None:
        return rules
    fallback = baseline or default
    if fallback is not None:
        return replace(rules, allowed=allowed) if allowed else replace(rules, total=fallback)
    gates = (
        rules.per_function
        or rules.expect
        or rules.forbid
        or rules.fullgraph
        or rules.max_graph_breaks
        or rules.max_cudagraph_rerecords
        or rules.same_across_ranks
        or rules.max_guards
        or rules.guards_per_function
        or rules.baseline_guards
        or rules.warm_start
        or rules.work_caps
        or rules.baseline_work
    )
    return rules if gates else None


def budget_from_marks(
    marks: Mapping[str, Iterable[MarkLike]],
    default: Rule[int] | None,
    where: str,
    *,
    fullgraph_default: str | None = None,
    baseline: Rule[int] | None = None,
    guards_default: Rule[int] | None = None,
    baseline_guards: Mapping[str, GuardBaseline] | None = None,
    baseline_work: Mapping[str, WorkFigures] | None = None,
    work_tolerance: Mapping[str, int] | None = None,
) -> Budget | None:
    """The rules of one test, or None when the test is not gated (see
    :func:`rules_from_marks` and :func:`choose_total`)."""
    rules, allowed = rules_from_marks(marks, where)
    return choose_total(
        rules,
        allowed,
        default,
        baseline,
        fullgraph_default,
        guards_default,
        baseline_guards,
        baseline_work,
        work_tolerance,
    )
