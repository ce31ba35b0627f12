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


def counts_now() -> Counts:
    """torch's process-wide cache counters now (all 0 where torch has none)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # pragma: no cover - every supported torch has them
        return zero()
    found = zero()
    for name, (group, prefix) in CACHES.items():
        table: Mapping[str, int] = counters.get(group) or {}
        for outcome in OUTCOMES:
            found[name][outcome] = int(table.get(prefix + _COUNTER[outcome], 0))
    return found


def zero() -> Counts:
    return {name: dict.fromkeys(OUTCOMES, 0) for name in CACHES}


class CacheCounts:
    """The counters' deltas over a block's own stretches (:meth:`pause` leaves a stretch
    out: a wider fixture's set-up). A counter that went down was cleared
    (``counters.clear()``, as torch's own test cases do): it counts from 0 again."""

    def __init__(self) -> None:
        self.total = zero()
        self._mark: Counts | None = None

    def start(self) -> None:
        self._mark = counts_now()

    def pause(self) -> None:
        """Add what the counters gained since the last mark, and stop counting."""
        if self._mark is None:
            return
        now = counts_now()
        for name, outcomes in now.items():
            for outcome, value in outcomes.items():
                before = self._mark[name][outcome]
                self.total[name][outcome] += value - before if value >= before else value
        self._mark = None

    def resume(self) -> None:
        if self._mark is None:
            self._mark = counts_now()

    def result(self) -> CachesResult:
        """The deltas so far (the running stretch included), for the report."""
        if self._mark is not None:
            self.pause()
            self.resume()
        fx, aot = self.total["fx_graph"], self.total["aot_autograd"]
        return {
            "fx_graph": {"hits": fx["hits"], "misses": fx["misses"], "bypasses": fx["bypasses"]},
            "aot_autograd": {
                "hits": aot["hits"],
                "misses": aot["misses"],
                "bypasses": aot["bypasses"],
            },
        }


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
