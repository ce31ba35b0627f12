"""The shape certificate's values (pure: no torch): a declared domain of calls, its points, and
what the entries' guards say of them, grouped into ranges a person acts on.

A domain is ``{parameter: spec}``: for a tensor, ``{dim: sizes, "dtype": dtypes}``; for a Python
value, the values. Each distinct iterable is one axis of the product; a :class:`Size` used in
several places is one axis, so sizes that move together (an attention mask with its input ids)
never make calls no user makes. ``_torch/certify.py`` decides each point from the entries'
guards; this module enumerates the points and words the answer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .guards import Reason, SourceLine, hint_for
from .names import relative
from .results import CertificateGroupResult, CertificateResult

# torch's note after a 0/1-specialization guard (the fix line says what to do instead)
_TORCH_NOTE = re.compile(r"\s*\(user code shown is first use of this value.*$", re.DOTALL)
MAX_POINTS = 1_000_000  # a bigger domain is split by the user: it is decided point by point
DOMAIN_FORM = (
    "{parameter: spec}: a tensor's spec is {dim: sizes} (any iterable of ints >= 0, a range "
    'too) with optionally "dtype": [dtypes]; a Python value\'s spec is an iterable of values; '
    "pytest_recompile.Size(sizes, name) ties sizes that move together"
)


class DomainError(ValueError):
    """A domain that cannot be certified as written: says what was wrong and what is accepted."""


class Size:
    """Sizes that move together: ``seq = Size(range(1, 129), "seq")`` used as
    ``{"input_ids": {1: seq}, "attention_mask": {1: seq}}`` is one axis of the domain."""

    def __init__(self, sizes: Iterable[Any], name: str | None = None) -> None:
        self.values = _values(sizes, f"Size({name or ''})")
        self.name = name

    def __repr__(self) -> str:
        return f"Size({_compact(self.values)}, {self.name!r})"


@dataclass
class Axis:
    """One axis of the product: its values, and where each point puts them."""

    values: tuple[Any, ...]
    name: str  # x.size(0), x.dtype, n, or a Size's name
    places: list[tuple[str, int | str | None]] = field(default_factory=list)  # (param, dim)


@dataclass(frozen=True)
class Domain:
    """A parsed domain: its axes, in the order the user wrote them."""

    axes: tuple[Axis, ...]
    tensors: frozenset[str]  # the parameters whose spec is a tensor's

    @property
    def size(self) -> int:
        n = 1
        for axis in self.axes:
            n *= len(axis.values)
        return n

    def points(self) -> Iterator[tuple[Any, ...]]:
        """Every point, as one value per axis."""
        return itertools.product(*(axis.values for axis in self.axes))

    def changes(self, point: tuple[Any, ...]) -> dict[str, Any]:
        """The point as the parts of the call it replaces: ``{"x": {0: 1, "dtype": d}, "n": 3}``
        (the domain's keys only)."""
        found: dict[str, Any] = {}
        for axis, value in zip(self.axes, point, strict=False):
            for param, dim in axis.places:
                if dim is None:
                    found[param] = value
                else:
                    found.setdefault(param, {})[dim] = value
        return found

    def words(self) -> str:
        """``x.size(0) in 1..64, n in {1, 2}``."""
        return ", ".join(f"{a.name} in {_compact(a.values)}" for a in self.axes)


def parse_domain(
    domain: Mapping[str, Any], example: Mapping[str, Any], is_tensor: Callable[[Any], bool]
) -> Domain:
    """``domain`` checked against the example call's values by parameter name."""
    if not isinstance(domain, Mapping) or not domain:
        raise DomainError(f"covers(): domain must be a non-empty {DOMAIN_FORM}; got {domain!r}")
    axes: list[Axis] = []
    sized: dict[int, Axis] = {}  # a Size's axis, by its identity: one axis wherever it is used
    tensors = set()
    for param, spec in domain.items():
        if param not in example:
            known = ", ".join(example) or "none"
            raise DomainError(
                f"covers(): the domain names {param!r}, which is not a parameter of the call "
                f"(its parameters: {known})"
            )
        value = example[param]
        if is_tensor(value):
            tensors.add(param)
            if not isinstance(spec, Mapping):
                raise DomainError(
                    f"covers(): {param!r} is a tensor: its spec is {{dim: sizes}} or "
                    f'{{"dtype": dtypes}}; got {spec!r}'
                )
            rank = len(value.shape)
            for dim, sizes in spec.items():
                if dim == "dtype":
                    _axis(axes, sized, sizes, f"{param}.dtype", (param, "dtype"), sizes_only=False)
                    continue
                if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
                    raise DomainError(
                        f"covers(): {param!r} has {rank} dimensions: a dim is an int in "
                        f'[{-rank}, {rank - 1}] or "dtype"; got {dim!r}'
                    )
                dim = dim % rank
                _axis(axes, sized, sizes, f"{param}.size({dim})", (param, dim), sizes_only=True)
        else:
            if isinstance(spec, Mapping):
                raise DomainError(
                    f"covers(): {param!r} is not a tensor ({type(value).__name__}): its spec "
                    f"is an iterable of values; got {spec!r}"
                )
            _axis(axes, sized, spec, param, (param, None), sizes_only=False)
    found = Domain(tuple(axes), frozenset(tensors))
    if found.size > MAX_POINTS:
        raise DomainError(
            f"covers(): the domain has {found.size:,} points, more than {MAX_POINTS:,}: "
            "split it into several covers() calls"
        )
    return found


def _axis(
    axes: list[Axis],
    sized: dict[int, Axis],
    spec: Any,
    name: str,
    place: tuple[str, int | str | None],
    *,
    sizes_only: bool,
) -> None:
    axis = sized.get(id(spec)) if isinstance(spec, Size) else None
    if axis is None:
        values = spec.values if isinstance(spec, Size) else _values(spec, name)
        axis = Axis(values, (spec.name if isinstance(spec, Size) else None) or name)
        axes.append(axis)
        if isinstance(spec, Size):
            sized[id(spec)] = axis
    if sizes_only:
        bad = [v for v in axis.values if isinstance(v, bool) or not isinstance(v, int) or v < 0]
        if bad:
            raise DomainError(f"covers(): a size is an int >= 0; {name} has {bad[0]!r}")
    axis.places.append(place)


def _values(spec: Any, name: str) -> tuple[Any, ...]:
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Iterable):
        raise DomainError(f"covers(): {name} takes an iterable of values; got {spec!r}")
    values = tuple(dict.fromkeys(spec))  # in order, each once
    if not values:
        raise DomainError(f"covers(): {name} is empty: give it at least one value")
    return values


# -- the answer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One point's answer: ``covered``, or else ``why`` it is undecided, or the ``reason`` of
    the newest entry that rejects it (uncovered)."""

    covered: bool = False
    reason: Reason | None = None  # uncovered: the newest entry's failing guard
    why: str | None = None  # undecided: why the guards cannot say

    @property
    def key(self) -> tuple[Any, ...]:
        """What the points of one group share: the guard (without the point's own value)."""
        if self.why is not None:
            return ("undecided", self.why)
        r = self.reason
        if r is None:
            return ("covered",)
        text = r.text.replace(f"actual {r.actual}", "actual ?") if r.actual else r.text
        return ("uncovered", r.entry, r.kind, r.detail, r.source, r.expected, text)


@dataclass(frozen=True)
class Group:
    """Points one guard rejects (or one cause leaves undecided), as ranges per axis."""

    where: str  # x.size(0) in {0, 1}
    points: int
    undecided: bool
    guard: str  # SHAPE_ENV: 2 <= L['x'].size()[0] [entry 0/1]; or why it is undecided
    site: SourceLine | None
    fix: str

    def text(self) -> str:
        site = (
            f", from {relative(self.site.file)}:{self.site.line}" if self.site is not None else ""
        )
        fix = f"; fix: {self.fix}" if self.fix else ""
        said = "undecided" if self.undecided else ""
        return f"{self.where} [{said + ': ' if said else ''}{self.guard}{site}{fix}]"

    def to_dict(self) -> CertificateGroupResult:
        return {
            "where": self.where,
            "points": self.points,
            "undecided": self.undecided,
            "guard": self.guard,
            "site": self.site.to_dict() if self.site is not None else None,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Certificate:
    """Which points of a domain would compile again: ``uncovered`` (each a dict of the
    domain's keys), ``undecided`` (the guards cannot say), ``covered`` when both are empty."""

    function: str  # the qualname of the function whose entries answered
    file: str
    line: int
    domain: str  # the domain in words
    points: int
    entries: int  # the cache entries the points were checked against
    uncovered: list[dict[str, Any]]
    undecided: list[dict[str, Any]]
    groups: tuple[Group, ...]
    seconds: float

    @property
    def covered(self) -> bool:
        return not self.uncovered and not self.undecided

    def message(self) -> str:
        """The certificate in one line (what a gated test fails with)."""
        fn = self.function
        if self.covered:
            return f"'{fn}' is covered on all {self.points} points of ({self.domain})"
        shown = "; ".join(g.text() for g in self.groups[:4])
        more = f"; and {len(self.groups) - 4} more ranges" if len(self.groups) > 4 else ""
        counts = [f"{len(self.uncovered)} uncovered"] if self.uncovered else []
        counts += [f"{len(self.undecided)} undecided"] if self.undecided else []
        points = f"{self.points} point" + ("s" if self.points != 1 else "")
        return (
            f"'{fn}' would compile again on {' and '.join(counts)} of {points} of "
            f"its domain ({self.domain}): {shown}{more}"
        )

    def __str__(self) -> str:
        return self.message()

    def to_dict(self) -> CertificateResult:
        return {
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "domain": self.domain,
            "points": self.points,
            "entries": self.entries,
            "uncovered": len(self.uncovered),
            "undecided": len(self.undecided),
            "groups": [g.to_dict() for g in self.groups],
            "seconds": round(self.seconds, 6),
        }


def group(domain: Domain, verdicts: Iterable[tuple[tuple[Any, ...], Verdict]]) -> list[Group]:
    """The points not covered, grouped by the guard that rejects them (or why they are
    undecided), most points first, each worded as ranges over the domain's axes."""
    by_key: dict[tuple[Any, ...], tuple[Verdict, list[tuple[Any, ...]]]] = {}
    for point, verdict in verdicts:
        if verdict.covered:
            continue
        by_key.setdefault(verdict.key, (verdict, []))[1].append(point)
    found = []
    for verdict, points in by_key.values():
        where = _where(domain, points)
        if verdict.why is not None:
            found.append(Group(where, len(points), True, verdict.why, None, ""))
            continue
        r = verdict.reason
        assert r is not None  # a point is covered, undecided with a why, or has a reason
        entry = f" [entry {r.entry}]" if r.entry else ""
        guard = f"{r.label}: {_TORCH_NOTE.sub('', r.text)}{entry}"
        found.append(Group(where, len(points), False, guard, r.own_site or r.site, range_fix(r)))
    return sorted(found, key=lambda g: (g.undecided, -g.points))


def _where(domain: Domain, points: list[tuple[Any, ...]]) -> str:
    """The points as ranges per axis; an axis all of whose values appear is left out."""
    parts = []
    for i, axis in enumerate(domain.axes):
        seen = {p[i] for p in points}
        if len(seen) == len(axis.values) and len(domain.axes) > 1:
            continue
        parts.append(f"{axis.name} {_subset(axis.values, seen)}")
    return ", ".join(parts) or "every point"


def _subset(values: tuple[Any, ...], chosen: set[Any]) -> str:
    """``in {0, 1}``, ``> 4096``, ``in {0, 1} or > 4096``, ``in 5..9``, ``not in {2}``: a
    short, true wording of ``chosen`` among ``values``."""
    if len(chosen) == len(values):
        return f"in {_compact(values)}"
    inside = [v for v in values if v in chosen]
    outside = [v for v in values if v not in chosen]
    if len(outside) < len(inside) and len(outside) <= 3:
        return f"not in {{{', '.join(map(_shown, outside))}}}"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return f"in {_compact(tuple(inside))}"
    ordered = sorted(values)
    runs: list[list[int]] = []  # runs of chosen values, consecutive in the domain's order
    for i, v in enumerate(ordered):
        if v in chosen:
            if runs and ordered[i - 1] == runs[-1][-1]:
                runs[-1].append(v)
            else:
                runs.append([v])
    few: list[int] = []
    parts: list[str] = []
    for run in runs:
        first, last = ordered.index(run[0]), ordered.index(run[-1])
        if len(run) <= 3:
            few += run
        elif last == len(ordered) - 1 and first > 0:
            parts.append(f"> {ordered[first - 1]}")
        elif first == 0 and last < len(ordered) - 1:
            parts.append(f"< {ordered[last + 1]}")
        else:
            parts.append(f"in {run[0]}..{run[-1]}")
    if few:
        parts.insert(0, f"in {_compact(tuple(few))}")
    if len(parts) > 4:
        return f"in {_compact(tuple(inside))}"
    return " or ".join(parts)


def _compact(values: tuple[Any, ...], shown: int = 6) -> str:
    """``1..64`` for a run of ints, else ``{a, b, ...}``."""
    if (
        len(values) > 3
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        and list(values) == list(range(values[0], values[0] + len(values)))
    ):
        return f"{values[0]}..{values[-1]}"
    head = ", ".join(map(_shown, values[:shown]))
    more = f", ... ({len(values)} values)" if len(values) > shown else ""
    return f"{{{head}{more}}}"


def _shown(value: Any) -> str:
    return str(value) if not isinstance(value, str) else repr(value)


def range_fix(reason: Reason) -> str:
    """The usual fix for points one guard rejects: a warm-up with that shape, ``mark_dynamic``,
    ``mark_unbacked``, a tensor instead of a Python value."""
    text, kind = reason.text, reason.kind
    if kind == "SHAPE_ENV" or "size()" in text:
        if "2 <=" in text or "0/1 specialization" in reason.raw:
            return (
                "sizes 0 and 1 are specialized: torch._dynamo.decorators.mark_unbacked("
                "tensor, dim) before the first call keeps one graph for every size"
            )
        if "%" in text or "Mod(" in text:
            return (
                "a view or reshape needs the size divisible: feed only such sizes, or pad "
                "the input to a multiple"
            )
        if "<=" in text or ">=" in text or " < " in text or " > " in text:
            return (
                "the entry holds only sizes inside its bound: widen mark_dynamic(tensor, dim, "
                "min=..., max=...), or, where the model itself bounds it (a buffer's length), "
                "serve no larger size"
            )
        if "==" in text or "!=" in text or "Eq(" in text or "Ne(" in text:
            return (
                "the code branches on this size: warm up with the sizes on both sides of the "
                "branch, or remove the branch on the size"
            )
    if kind == "TENSOR_MATCH" and reason.detail == "size":
        return (
            "the entry is static in this size: torch._dynamo.mark_dynamic(tensor, dim) "
            "before the first call, or warm up with a second size so that automatic "
            "dynamic compiles it dynamic"
        )
    if kind == "TENSOR_MATCH" and reason.detail == "dtype":
        return "each dtype compiles its own entry: warm up with every dtype served"
    if kind in ("EQUALS_MATCH", "TYPE_MATCH", "ID_MATCH") and (reason.source or "").startswith(
        "L["
    ):
        return (
            "a Python value is baked into the graph: pass it as a tensor, or "
            "torch.compile(..., dynamic=True) for ints"
        )
    return hint_for(reason.kind, reason.detail, reason.source, reason.text)
