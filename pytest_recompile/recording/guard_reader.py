"""Each cache entry's guards: its guard tree read once (a tree does not change), summed up
with torch's own count and latency estimate. The reader returns what it read; its caller
(the tracker) puts it on the function's record."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import CodeType
from typing import Any

from .._torch import events, guard_tree, hooks, instruments, stand_ins, versions
from .._torch.reasons import installed_guard
from ..model.faults import Faults
from ..model.guard_cost import EntryGuards, entry_guards
from ..model.guards import InstalledGuard
from ..model.records import FunctionRecord

# What a read found: the function, its entry's compile id, the entry's guards.
Found = list[tuple[FunctionRecord, str, EntryGuards]]

# Each guard tree's leaves, read once per process: a reused entry (an earlier test's first
# compile, a fixture's) is read by every test that takes it, and its tree never changes.
_LEAVES: weakref.WeakKeyDictionary[Any, tuple[str, list[InstalledGuard]]] = (
    weakref.WeakKeyDictionary()
)


class GuardTrees:
    """The guard trees of the entries a block made (not a wider fixture's): ``owners`` maps
    each compile the block made to its function's record."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults  # a tree this torch builds otherwise is named there, once
        # each entry read: its manager (to see a new one after a reset), function, leaves
        self._read: dict[events.CompileKey, tuple[Any, FunctionRecord, list[InstalledGuard]]] = {}
        self._guards: dict[events.CompileKey, EntryGuards] = {}  # each entry's, as last found
        self._metered: set[events.CompileKey] = set()  # entries with torch's guard metrics
        # figures read before (a reused compile's): no search of torch's metrics for them
        self._measured: dict[events.CompileKey, instruments.GuardMetrics] = {}
        self._since: set[CodeType] = set()  # code objects compiled since the last read
        # the arguments of the call that made each entry, weakly (a torch that times nothing
        # when it builds guards): its guard check is timed on them when read, if they live
        self._inputs: dict[events.CompileKey, stand_ins.Captured] = {}

    def compiled(
        self,
        code: CodeType,
        key: events.CompileKey | None = None,
        inputs: stand_ins.Captured | None = None,
    ) -> None:
        """``code`` is being compiled (the compile ``key``, for the call ``inputs``): its new
        entry exists from the next compile on."""
        self._since.add(code)
        if key is not None and inputs is not None and not versions.has_guards_built_hook():
            self._inputs[key] = inputs

    def read(
        self,
        owners: Mapping[events.CompileKey, FunctionRecord],
        codes: Iterable[tuple[CodeType, FunctionRecord]],
        *,
        latest: bool = False,
    ) -> Found:
        """Read the tree of each entry made here not read yet: before the next compile (only
        the code objects compiled since the last read: ``latest``), a pause or the block's
        end (a reset, say in a Dynamo TestCase's tearDown, takes the entries)."""
        found: Found = []
        since, self._since = self._since, set()
        for code, record in codes:
            if latest and code not in since:
                continue
            for entry, manager in guard_tree.trees(code):
                key = events.compile_key(code, entry)
                known = self._read.get(key)
                # made here (not a wider fixture's), for this function: a code object torch
                # shares (its wrapper of modules and partials) holds other functions' entries
                if owners.get(key) is not record or (known and known[0] is manager):
                    continue
                try:
                    leaves = _leaves(manager, entry)
                except Exception as exc:  # a tree built otherwise: torch's count stands in
                    self.faults.add(
                        f"guard counts: a guard tree could not be read ({type(exc).__name__}: "
                        f"{exc}); such entries get torch's guard_count"
                    )
                    continue
                self._read[key] = (manager, record, leaves)
                self._guards[key] = entry_guards(
                    entry,
                    leaves,
                    check_us=self._time(key, manager),
                    check_range=stand_ins.check_range(manager),
                )
                found.append((record, entry, self._guards[key]))
        return found

    def _time(self, key: events.CompileKey, manager: Any) -> float | None:
        """The entry's guard check, timed on the call that made it: when torch built its
        guards, or (a torch without that hook) now, on stand-ins of the call where its objects
        still live."""
        captured = self._inputs.pop(key, None)
        timed, figure = hooks.checked_us(manager)
        try:
            if not timed and captured is not None:
                figure = stand_ins.check_us_later(manager, captured)
        except Exception as exc:  # a guard that raises on a stand-in
            figure = f"{type(exc).__name__}: {exc}"
        if isinstance(figure, str):  # no time, said once
            self.faults.add(
                f"guard check times: an entry's guards raised on its own call ({figure}); "
                "such entries show no measured time"
            )
            return None
        return figure

    def forget(self) -> None:
        """The block ended: the (weakly held) arguments of entries never read are dropped."""
        self._inputs.clear()

    def installed(self, record: FunctionRecord) -> list[InstalledGuard]:
        """The guards installed on ``record``'s entries, of the trees read so far."""
        return [
            guard for _, owner, leaves in self._read.values() if owner is record for guard in leaves
        ]

    def measured(self, key: events.CompileKey, figures: instruments.GuardMetrics) -> None:
        """torch's guard figures of an entry, read when its compile ended (a reused one)."""
        self._measured[key] = figures

    def metrics(self, owners: Mapping[events.CompileKey, FunctionRecord]) -> Found:
        """torch's guard count and latency estimate of each entry made here; an entry whose
        tree was gone before it was read gets torch's count alone."""
        found: Found = []
        wanted = [key for key in owners if key not in self._metered]
        metrics = {key: self._measured[key] for key in wanted if key in self._measured}
        try:
            if len(metrics) < len(wanted):
                metrics.update(instruments.guard_metrics(k for k in wanted if k not in metrics))
        except Exception as exc:  # metrics this torch words otherwise: the trees' counts stand
            self.faults.add(f"guard counts: torch's metrics unread ({type(exc).__name__}: {exc})")
        for key, (count, latency) in metrics.items():
            self._metered.add(key)
            known = self._guards.get(key)
            if known is not None:
                self._guards[key] = replace(known, torch_count=count, latency_us=latency)
            elif count is not None:
                self._guards[key] = EntryGuards(key[3], None, torch_count=count, latency_us=latency)
            else:
                continue
            found.append((owners[key], key[3], self._guards[key]))
        return found


def _leaves(manager: Any, entry: str) -> list[InstalledGuard]:
    """The guards of one entry's tree (``entry``: its compile id), read once per tree."""
    known = _LEAVES.get(manager)
    if known is not None and known[0] == entry:
        return known[1]
    leaves = [
        installed_guard(leaf.torch_kind, leaf.source, list(leaf.code_parts), entry, leaf.structural)
        for leaf in guard_tree.guard_leaves(manager)
    ]
    with contextlib.suppress(TypeError):  # a manager that takes no weak reference: read again
        _LEAVES[manager] = (entry, leaves)
    return leaves
