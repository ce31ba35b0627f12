"""Markers and option values, parsed and validated into a :class:`Budget` (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_RECOMPILES = "max_recompiles"
ALLOW_RECOMPILES = "allow_recompiles"

MAX_RECOMPILES_FORM = "max_recompiles(n: int >= 0, *, function: str | None = None)"
MARKER_LINES = (
    f"{MAX_RECOMPILES_FORM}: this test may recompile at most n times in total; with "
    "function=, the torch.compile'd function of that name or qualname may recompile at most "
    "n times. Stackable; always enforced, with or without --recompile-budget.",
    f"{ALLOW_RECOMPILES}: opt this test out of the default budget of --recompile-budget / "
    "recompile_budget (max_recompiles markers on it still apply).",
)

MODES = ("fail-fast", "at-end", "report-only")


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

    def for_function(self, name: str, qualname: str) -> tuple[int, str] | None:
        found = self.per_function.get(qualname)
        return found if found is not None else self.per_function.get(name)

    def describe(self) -> str:
        parts = []
        if self.total is not None:
            parts.append(f"{self.total} in total ({self.total_source})")
        parts += [f"{n} for {fn} ({src})" for fn, (n, src) in self.per_function.items()]
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


def budget_from_marks(
    max_marks: Iterable[MarkLike],
    allow_marks: Iterable[MarkLike],
    default: int | None,
    default_source: str,
    where: str,
) -> Budget | None:
    """The budget of one test, or None when the test is not gated.

    ``max_marks`` come closest first (pytest's ``iter_markers`` order): the closest marker
    wins for the total and for each function.
    """
    total: tuple[int, str] | None = None
    per_function: dict[str, tuple[int, str]] = {}
    for mark in max_marks:
        count, function = _parse_max_recompiles(mark, f"@pytest.mark.{MAX_RECOMPILES} on {where}")
        if function is None:
            total = total or (count, f"@{MAX_RECOMPILES}({count})")
        else:
            source = f"@{MAX_RECOMPILES}({count}, function={function!r})"
            per_function.setdefault(function, (count, source))
    allowed = False
    for mark in allow_marks:
        if mark.args or mark.kwargs:
            raise BudgetError(
                f"@pytest.mark.{ALLOW_RECOMPILES} on {where} takes no arguments; "
                f"use @pytest.mark.{MAX_RECOMPILES_FORM} to set a budget"
            )
        allowed = True
    if total is not None:
        return Budget(total[0], total[1], per_function, total_counts_named=True)
    if default is not None and not allowed:
        return Budget(default, default_source, per_function)
    if per_function:
        return Budget(None, "", per_function)
    return None
