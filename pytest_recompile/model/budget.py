"""A test's rules, as one value: :class:`Budget` (each :class:`Rule` with where it came
from), and the checks of a count (pure). :mod:`.markers` builds it from the markers."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .names import WARM_START

T = TypeVar("T")

GuardBaseline = tuple[int, frozenset[str]]  # a function's most guards, its value guards


class BudgetError(ValueError):
    """A budget value that is not a non-negative integer, or a malformed marker."""


@dataclass(frozen=True)
class Rule(Generic[T]):
    """One rule of a test and where it came from (``--recompile-budget=0``, a marker)."""

    value: T
    source: str


@dataclass(frozen=True)
class WarmStartRule:
    """``@pytest.mark.warm_start(*, allow_bypass=False, dynamo=False)``: the test run cold,
    then warm, in fresh processes (:mod:`.warm_start`)."""

    allow_bypass: bool = False
    dynamo: bool = False

    @property
    def source(self) -> str:
        given = [f"{name}=True" for name in ("allow_bypass", "dynamo") if getattr(self, name)]
        return f"@{WARM_START}({', '.join(given)})" if given else f"@{WARM_START}"


@dataclass(frozen=True)
class WorkCap:
    """``max_graphs(n)``, ``max_graph_ops(n)``, ``max_unique_subgraphs(n)``, each with an
    optional ``function=``: the most of one measure (``graphs``, ``ops``, ``subgraphs``) the
    test's compiles (or that function's) may make."""

    measure: str
    value: int
    function: str | None
    source: str


# The counts a baseline keeps and a later run may not grow past its tolerance, each with its
# words; the default tolerance of each (a percent of the baseline's figure, rounded down).
RATCHETED = {
    "graphs": "graphs",
    "ops": "FX ops",
    "kernels": "Inductor kernels",
    "restarts": "Dynamo restarts",
    "subgraphs": "distinct subgraphs",
}
# Each marker's measure, and the measure's words in a failure.
CAPPED = {
    "graphs": "graphs",
    "ops": "FX ops",
    "subgraphs": "distinct nested_compile_region subgraphs",
}


# Each measure's words, one and many.
WORK_WORDS = {
    "graphs": ("graph", "graphs"),
    "ops": ("FX op", "FX ops"),
    "kernels": ("Inductor kernel", "Inductor kernels"),
    "restarts": ("Dynamo restart", "Dynamo restarts"),
    "subgraphs": ("distinct subgraph", "distinct subgraphs"),
}


def tolerance_words(tolerance: Mapping[str, int]) -> str:
    """``graphs +0%, FX ops +5%, ...``"""
    return ", ".join(f"{RATCHETED[m]} +{tolerance.get(m, 0)}%" for m in RATCHETED)


WorkFigures = Mapping[str, int]  # a function's ratcheted counts, by measure (model/work.py)


@dataclass(frozen=True)
class Budget:
    """The rules of one test.

    ``total`` caps the sum over the functions that have no budget of their own (over all
    functions when ``total_counts_named``, as for an explicit ``max_recompiles(n)``); None
    means no cap. ``per_function`` caps single functions, matched by name or qualname.
    ``expect``: the guard kinds allowed to trigger a recompile (None: any); ``forbid``: the
    kinds that may not be installed on the test's own values; ``fullgraph``: where fullgraph
    semantics came from (None: off). ``allowed``: the marker that took the test out of a
    default budget, leaving it gated with no count; ``eager_fallback``: the marker argument
    that lets a function hit ``recompile_limit`` (None: a hit fails the test, whatever else).
    """

    total: Rule[int] | None = None
    per_function: Mapping[str, Rule[int]] = field(default_factory=dict)
    total_counts_named: bool = False
    expect: Rule[frozenset[str]] | None = None
    forbid: Rule[frozenset[str]] | None = None
    fullgraph: str | None = None
    max_graph_breaks: Rule[int] | None = None
    max_cudagraph_rerecords: Rule[int] | None = None
    same_across_ranks: str | None = None  # where the rule came from (None: divergence reported)
    max_guards: Rule[int] | None = None  # guards of any one cache entry, every function
    guards_per_function: Mapping[str, Rule[int]] = field(default_factory=dict)
    baseline_guards: Mapping[str, GuardBaseline] = field(default_factory=dict)  # by qualname
    allowed: str | None = None
    eager_fallback: str | None = None
    warm_start: WarmStartRule | None = None  # run cold, then warm, in fresh processes
    work_caps: tuple[WorkCap, ...] = ()  # max_graphs, max_graph_ops, max_unique_subgraphs
    # the baseline's compile work per function (by qualname), and the growth it allows, in
    # percent per measure (None: no baseline work)
    baseline_work: Mapping[str, WorkFigures] = field(default_factory=dict)
    work_tolerance: Mapping[str, int] | None = None

    def for_function(self, name: str, qualname: str) -> Rule[int] | None:
        found = self.per_function.get(qualname)
        return found if found is not None else self.per_function.get(name)

    def guards_for(self, name: str, qualname: str) -> Rule[int] | None:
        """The most guards one of this function's cache entries may check."""
        found = self.guards_per_function.get(qualname) or self.guards_per_function.get(name)
        return found if found is not None else self.max_guards

    @functools.cached_property
    def named(self) -> dict[str, str]:
        """The functions the rules name (by name or qualname), each with a rule's source
        (a budget is frozen: worked out once, as its words and JSON are)."""
        found = {name: rule.source for name, rule in self.per_function.items()}
        for name, rule in self.guards_per_function.items():
            found.setdefault(name, rule.source)
        for cap in self.work_caps:
            if cap.function is not None:
                found.setdefault(cap.function, cap.source)
        return found

    @property
    def forbidden(self) -> frozenset[str]:
        return self.forbid.value if self.forbid is not None else frozenset()

    def describe(self) -> str:
        """Every rule in words: ``2 in total (--recompile-budget=2); fullgraph``."""
        return self._words

    @functools.cached_property
    def _words(self) -> str:
        parts = []
        if self.total is not None:
            parts.append(f"{self.total.value} in total ({self.total.source})")
        parts += [f"{r.value} for {fn} ({r.source})" for fn, r in self.per_function.items()]
        if self.expect is not None:
            parts.append(f"recompiles by {', '.join(sorted(self.expect.value))} only")
        if self.forbidden:
            parts.append(f"no {', '.join(sorted(self.forbidden))} guards")
        if self.fullgraph:
            parts.append("fullgraph")
        if self.max_graph_breaks is not None:
            parts.append(f"at most {self.max_graph_breaks.value} graph breaks")
        if self.max_cudagraph_rerecords is not None:
            parts.append(f"at most {self.max_cudagraph_rerecords.value} CUDA-graph re-records")
        if self.same_across_ranks:
            parts.append("same compiles across ranks")
        if self.max_guards is not None:
            parts.append(f"at most {self.max_guards.value} guards per cache entry")
        parts += [
            f"at most {r.value} guards per entry of {fn} ({r.source})"
            for fn, r in self.guards_per_function.items()
        ]
        if self.baseline_guards:
            parts.append("no more guards than the baseline's, none new on a Python value")
        if self.allowed and self.total is None:
            parts.append(f"any number of recompiles ({self.allowed})")
        if self.eager_fallback:
            parts.append(f"recompile_limit hits allowed ({self.eager_fallback})")
        if self.warm_start is not None:
            parts.append(f"every cache lookup hits in a fresh process ({self.warm_start.source})")
        parts += [
            f"at most {c.value} {CAPPED[c.measure]}"
            + (f" for {c.function}" if c.function else "")
            + f" ({c.source})"
            for c in self.work_caps
        ]
        if self.baseline_work and self.work_tolerance is not None:
            parts.append(
                f"compile work within the baseline's ({tolerance_words(self.work_tolerance)})"
            )
        return "; ".join(parts) or "no cap"

    def to_json(self) -> dict[str, Any]:
        """The budget as JSON values (a rule as ``[value, source]``, kinds sorted): how it
        crosses to a child process, which rebuilds it with :meth:`from_json`."""

        def rule(found: Rule[Any] | None) -> list[Any] | None:
            if found is None:
                return None
            value = sorted(found.value) if isinstance(found.value, frozenset) else found.value
            return [value, found.source]

        return {
            "total": rule(self.total),
            "per_function": {name: rule(r) for name, r in self.per_function.items()},
            "total_counts_named": self.total_counts_named,
            "expect": rule(self.expect),
            "forbid": rule(self.forbid),
            "fullgraph": self.fullgraph,
            "max_graph_breaks": rule(self.max_graph_breaks),
            "max_cudagraph_rerecords": rule(self.max_cudagraph_rerecords),
            "same_across_ranks": self.same_across_ranks,
            "max_guards": rule(self.max_guards),
            "guards_per_function": {n: rule(r) for n, r in self.guards_per_function.items()},
            "baseline_guards": {n: [c, sorted(v)] for n, (c, v) in self.baseline_guards.items()},
            "allowed": self.allowed,
            "eager_fallback": self.eager_fallback,
            "warm_start": (
                [self.warm_start.allow_bypass, self.warm_start.dynamo]
                if self.warm_start is not None
                else None
            ),
            # the baseline's compile work is the test's own process's: a child is held to its
            # markers only (the baseline records no child's work)
            "work_caps": [[c.measure, c.value, c.function, c.source] for c in self.work_caps],
        }

    @functools.cached_property
    def json_text(self) -> str:
        """:meth:`to_json` as JSON text, worked out once: each gated test names its budget
        to its child processes, and most tests share one."""
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Budget:
        def count(found: list[Any] | None) -> Rule[int] | None:
            return Rule(int(found[0]), str(found[1])) if found is not None else None

        def kinds(found: list[Any] | None) -> Rule[frozenset[str]] | None:
            return Rule(frozenset(found[0]), str(found[1])) if found is not None else None

        def named(rules: Mapping[str, list[Any]]) -> dict[str, Rule[int]]:
            return {name: Rule(int(r[0]), str(r[1])) for name, r in rules.items()}

        kept = data["baseline_guards"]
        warm = data.get("warm_start")
        if warm is not None:
            warm = WarmStartRule(bool(warm[0]), bool(warm[1]))
        return cls(
            total=count(data["total"]),
            per_function=named(data["per_function"]),
            total_counts_named=bool(data["total_counts_named"]),
            expect=kinds(data["expect"]),
            forbid=kinds(data["forbid"]),
            fullgraph=data["fullgraph"],
            max_graph_breaks=count(data["max_graph_breaks"]),
            max_cudagraph_rerecords=count(data["max_cudagraph_rerecords"]),
            same_across_ranks=data["same_across_ranks"],
            max_guards=count(data["max_guards"]),
            guards_per_function=named(data["guards_per_function"]),
            baseline_guards={n: (int(c), frozenset(v)) for n, (c, v) in kept.items()},
            allowed=data["allowed"],
            eager_fallback=data["eager_fallback"],
            warm_start=warm,
            work_caps=tuple(
                WorkCap(str(m), int(v), f, str(s)) for m, v, f, s in data.get("work_caps", ())
            ),
        )


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


def count_value(text: str) -> int | None:
    """``text`` as a count: ASCII decimal digits only ("0", "3"; not "-1", "1.5" nor "²",
    which ``str.isdigit`` takes and ``int`` refuses); None where it is not one."""
    stripped = text.strip()
    return int(stripped) if stripped.isascii() and stripped.isdigit() else None


def parse_count_text(text: str, where: str) -> int:
    """An option or ini value: a count (:func:`count_value`), else BudgetError."""
    value = count_value(text)
    if value is None:
        raise BudgetError(f"{where}: expected a non-negative integer such as 0 or 3, got {text!r}")
    return value


def bare_budget_flags(args: list[str]) -> list[str]:
    """``args`` with each bare ``--recompile-budget`` followed by a word that is not an
    integer (``pytest --recompile-budget tests/``, ``-n 2 --recompile-budget .``) written
    ``--recompile-budget=0``: the word is a test path, as after any other flag. An integer
    after the flag stays its budget (``--recompile-budget 3 tests/``).

    argparse would take the word as the flag's value (``nargs="?"``): pytest's
    ``pytest_load_initial_conftests`` hands plugins the arguments before its last parse, and
    the option is declared without a ``type=`` so that the parses before it let the word
    through (its value is checked in
    :func:`pytest_recompile.settings._count_option`)."""
    found = list(args)
    for index, word in enumerate(found[:-1]):
        after = found[index + 1]
        integer = count_value(after) is not None
        if word == "--recompile-budget" and not after.startswith("-") and not integer:
            found[index] = "--recompile-budget=0"
    return found
