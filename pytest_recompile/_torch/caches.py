"""torch's compile caches as a block sees them: how often inductor's FX graph cache and
AOTAutograd's cache answered (``torch._dynamo.utils.counters``), and the job id that makes
torch load saved dynamic-shape profiles (``torch.compiler.config.job_id``).

The counter names are those of ``torch/_inductor/codecache.py`` (``fxgraph_cache_hit``,
``_miss``, ``_bypass`` under ``"inductor"``) and ``torch/_functorch/_aot_autograd/
autograd_cache.py`` (``autograd_cache_hit``, ``_miss``, ``_bypass`` under ``"aot_autograd"``),
alike from torch 2.7 to 2.13. The eager backend consults neither cache: every count stays 0.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.results import CachesResult

# cache name in the report -> (counters' group, the prefix of its hit/miss/bypass counters)
CACHES = {
    "fx_graph": ("inductor", "fxgraph_cache_"),
    "aot_autograd": ("aot_autograd", "autograd_cache_"),
}
OUTCOMES = ("hits", "misses", "bypasses")
_COUNTER = {"hits": "hit", "misses": "miss", "bypasses": "bypass"}

Counts = dict[str, dict[str, int]]  # cache -> outcome -> count


_GROUPS = tuple(
    (group, tuple(prefix + _COUNTER[o] for o in OUTCOMES)) for group, prefix in CACHES.values()
)
_Raw = tuple[int, ...]  # each cache's hits, misses and bypasses, in the order of CACHES
_NONE: _Raw = (0,) * (len(CACHES) * len(OUTCOMES))
_EMPTY: Mapping[str, int] = {}


def _raw() -> _Raw:
    """torch's process-wide cache counters now (all 0 where torch has none): read per test,
    so a dozen dictionary reads."""
    counters = sys.modules.get("torch._dynamo.utils")
    if counters is None:
        return _NONE
    table = counters.counters
    found: list[int] = []
    for group, keys in _GROUPS:
        values = table.get(group) or _EMPTY
        found += [values.get(key, 0) for key in keys]
    return tuple(found)


def _counts(raw: _Raw) -> Counts:
    values = iter(raw)
    return {name: {outcome: next(values) for outcome in OUTCOMES} for name in CACHES}


class CacheCounts:
    """The counters' deltas over a block's own stretches (:meth:`pause` leaves a stretch
    out: a wider fixture's set-up). A counter that went down was cleared
    (``counters.clear()``, as torch's own test cases do): it counts from 0 again."""

    def __init__(self) -> None:
        self._total: _Raw = _NONE
        self._mark: _Raw | None = None

    def start(self) -> None:
        self._mark = _raw()

    def pause(self) -> None:
        """Add what the counters gained since the last mark, and stop counting."""
        if self._mark is None:
            return
        now, mark, self._mark = _raw(), self._mark, None
        if now != mark:
            self._total = tuple(
                total + (value - before if value >= before else value)
                for total, value, before in zip(self._total, now, mark, strict=True)
            )

    def resume(self) -> None:
        if self._mark is None:
            self._mark = _raw()

    def result(self) -> CachesResult:
        """The deltas so far (the running stretch included), for the report."""
        if self._mark is not None:
            self.pause()
            self.resume()
        return _counts(self._total)  # type: ignore[return-value]


# torch's environment variables for job_id (torch/compiler/config.py), read where torch is
# not imported yet: the header never imports torch for this.
JOB_ID_VARIABLES = ("TORCH_COMPILE_JOB_ID", "TORCH_COMPILE_STICKY_PGO_KEY")


def job_id() -> str | None:
    """``torch.compiler.config.job_id`` where torch is imported (None: unset, or a torch
    without it), else what its environment variables set."""
    if "torch" not in sys.modules:
        return next((os.environ[v] for v in JOB_ID_VARIABLES if os.environ.get(v)), None)
    try:
        import torch.compiler.config as compiler_config
    except ImportError:  # torch before 2.6: no job_id, no profiles loaded
        return None
    value = getattr(compiler_config, "job_id", None)
    return str(value) if value else None
