"""What every call of a compiled function pays before a cache entry answers: the guards each
entry checks, counted by kind, with torch's own estimate of their latency (pure).

torch runs an entry's guard tree on every call that reaches it, and the trees of every entry
it misses first: a model's tree grows with its layers. The tracker reads each entry's tree
once (``_torch.guard_tree``); this module turns the leaves into one :class:`EntryGuards` and
says which guards sit on the user's Python values (what the baseline records).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .guards import InstalledGuard
from .results import EntryGuardsResult, FunctionResult

# Guards on a module's parameters and buffers: how a model's tree grows with its layers.
_ON_PARAMETERS = re.compile(r"\._(?:parameters|buffers)\[")
# A global or an argument itself: G['step'], L['x'] (not an attribute reached through it).
_DIRECT = re.compile(r"^[GL]\['[^']+'\]$")
# The guards on a Python value that a new one of means a new constant or object baked in.
VALUE_KINDS = ("EQUALS_MATCH", "ID_MATCH", "TYPE_MATCH")


@dataclass(frozen=True)
class EntryGuards:
    """One cache entry's guards: ``guards`` leaf guards in its tree (None: the entry was gone,
    a reset, before its tree was read; ``torch_count`` is then all there is), by kind."""

    entry: str  # the entry's compile id, "0/1"
    guards: int | None
    kinds: tuple[tuple[str, int], ...] = ()  # (leaf kind, count), most first
    on_parameters: int = 0  # of them, on a module's parameters or buffers
    values: tuple[str, ...] = ()  # "EQUALS_MATCH G['step']": guards on the user's values
    torch_count: int | None = None  # torch's guard_count (its guard list, before the tree)
    latency_us: float | None = None  # torch's guard_latency_us for this entry
    check_us: float | None = None  # measured: the median check on the call that made it
    check_range: tuple[float, float] | None = None  # the fastest and slowest of those checks

    @property
    def count(self) -> int:
        """The count a ``max_guards`` budget compares (:func:`guard_count`)."""
        return guard_count(self.guards, self.torch_count)

    def to_dict(self) -> EntryGuardsResult:
        return {
            "entry": self.entry,
            "guards": self.guards,
            "kinds": dict(self.kinds),
            "on_parameters": self.on_parameters,
            "values": list(self.values),
            "torch_guard_count": self.torch_count,
            "guard_latency_us": self.latency_us,
            "guard_check_us": self.check_us,
            "guard_check_range_us": list(self.check_range) if self.check_range else None,
        }


def value_guard(guard: InstalledGuard) -> str | None:
    """``KIND source`` for a guard on a Python value of the user's: an ``==`` anywhere on the
    user's values (a baked constant), an identity or type guard on a global or an argument
    itself; None for any other guard."""
    if guard.framework or guard.kind not in VALUE_KINDS:
        return None
    if guard.kind != "EQUALS_MATCH" and not _DIRECT.match(guard.source):
        return None
    return f"{guard.kind} {guard.source}"


def entry_guards(
    entry: str,
    guards: Iterable[InstalledGuard],
    torch_count: int | None = None,
    latency_us: float | None = None,
    *,
    check_us: float | None = None,
    check_range: tuple[float, float] | None = None,
) -> EntryGuards:
    """One entry's guards summed up from its leaves."""
    found = list(guards)
    kinds = Counter(g.torch_kind for g in found)
    values = sorted({v for v in map(value_guard, found) if v is not None})
    return EntryGuards(
        entry=entry,
        guards=len(found),
        kinds=tuple(sorted(kinds.items(), key=lambda pair: (-pair[1], pair[0]))),
        on_parameters=sum(1 for g in found if _ON_PARAMETERS.search(g.source)),
        values=tuple(values),
        torch_count=torch_count,
        latency_us=latency_us,
        check_us=check_us,
        check_range=check_range if check_us is not None else None,
    )


def largest(entries: Iterable[EntryGuards]) -> EntryGuards | None:
    """The entry that checks the most guards."""
    return max(entries, key=lambda e: e.count, default=None)


def guard_count(guards: int | None, torch_count: int | None) -> int:
    """The guards an entry checks, as a ``max_guards`` budget compares them: its tree's
    count, else torch's."""
    return guards if guards is not None else torch_count or 0


def entry_count(entry: EntryGuardsResult) -> int:
    """:attr:`EntryGuards.count` of a reported entry."""
    return guard_count(entry["guards"], entry["torch_guard_count"])


def largest_result(
    functions: Iterable[FunctionResult],
) -> tuple[FunctionResult, EntryGuardsResult] | None:
    """The reported function and entry that check the most guards."""
    pairs = [(fn, entry) for fn in functions for entry in fn["entries"]]
    return max(pairs, key=lambda pair: entry_count(pair[1]), default=None)
