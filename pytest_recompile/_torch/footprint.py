"""What one compile leaves in torch besides its cache entry and automatic-dynamic state: the
graph breaks it recorded (``graph_break_reasons``, which the plugin and users read) and the
counters it bumped (``counters['graph_break' | 'frames' | 'stats' | 'unimplemented']``).

Reusing an earlier test's compile replays them, so that a test that reuses a compile reads
what it would read had it compiled: its graph breaks (count and sites) and torch's counters.
The window of a compile runs from its start to the start of the next compile (compiles are
serialised by torch's compile lock) or to the moment its entry is matched, whichever comes
first; these counters move only while a compile runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import versions

# The counters a frame compile bumps, and nothing else does.
_COUNTED = ("graph_break", "frames", "stats", "unimplemented")


@dataclass(frozen=True)
class Mark:
    """Where torch's records stood when a compile began."""

    reasons: Any  # torch's graph_break_reasons list (another object after a reset)
    breaks: int
    counters: dict[str, dict[Any, int]]


@dataclass(frozen=True)
class Footprint:
    """What one compile added: its graph-break records and its counters."""

    breaks: tuple[Any, ...]
    counters: dict[str, dict[Any, int]]


def mark() -> Mark:
    reasons = _reasons()
    return Mark(reasons, len(reasons) if reasons is not None else 0, _counters())


def since(start: Mark) -> Footprint | None:
    """What was added since ``start``; None where a reset cleared torch's records since."""
    reasons = _reasons()
    if reasons is not start.reasons or (reasons is not None and len(reasons) < start.breaks):
        return None
    now = _counters()
    added: dict[str, dict[Any, int]] = {}
    for group, counts in now.items():
        before = start.counters.get(group, {})
        grown = {key: n - before.get(key, 0) for key, n in counts.items()}
        grown = {key: n for key, n in grown.items() if n > 0}
        if any(n < before.get(key, 0) for key, n in counts.items()) or len(counts) < len(before):
            return None  # cleared (torch's TestCase clears counters) during the window
        if grown:
            added[group] = grown
    breaks = tuple(reasons[start.breaks :]) if reasons is not None else ()
    return Footprint(breaks, added)


def replay(found: Footprint) -> None:
    """Record ``found`` again, as if its compile had run now."""
    reasons = _reasons()
    if reasons is not None:
        reasons.extend(found.breaks)
    if found.counters:
        from torch._dynamo.utils import counters

        for group, counts in found.counters.items():
            counters[group].update(counts)


def _reasons() -> list[Any] | None:
    if not versions.has_graph_break_records():
        return None
    import torch._dynamo.utils as dynamo_utils

    return dynamo_utils.graph_break_reasons


def _counters() -> dict[str, dict[Any, int]]:
    from torch._dynamo.utils import counters

    return {group: dict(counters[group]) for group in _COUNTED if group in counters}


def errors_at_breaks(callback: Any) -> bool:
    """Whether a compile for ``callback`` now raises at a graph break instead of splitting
    the graph: ``fullgraph=True`` (the callback converts one graph), or
    ``torch._dynamo.error_on_graph_break`` (the plugin's fullgraph rule sets it too)."""
    for _ in range(32):
        if callback is None:
            break
        if getattr(callback, "_one_graph", None) is True:
            return True
        callback = getattr(callback, "_torchdynamo_orig_backend", None)
    try:
        from torch._dynamo.utils import _get_error_on_graph_break
    except ImportError:  # before 2.9: no such switch
        return False
    return bool(_get_error_on_graph_break())
