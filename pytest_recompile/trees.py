"""Each cache entry's guards, for a recorder: its guard tree read once (a tree does not
change), summed up on its function's record with torch's own count and latency estimate."""

from __future__ import annotations

from dataclasses import replace
from types import CodeType
from typing import Any

from ._torch import dynamic_state, events, guard_tree, instruments
from .faults import Faults
from .guard_cost import EntryGuards, entry_guards
from .guards import InstalledGuard, installed_guard
from .recorder import Recorder
from .verdict import FunctionRecord


class GuardTrees:
    """The guard trees of the entries ``recorder`` made (not a wider fixture's)."""

    def __init__(self, recorder: Recorder, faults: Faults) -> None:
        self.recorder = recorder
        self.faults = faults  # a tree this torch builds otherwise is named there, once
        # each entry read: its manager (to see a new one after a reset), function, leaves
        self._read: dict[events.CompileKey, tuple[Any, FunctionRecord, list[InstalledGuard]]] = {}
        self._metered: set[events.CompileKey] = set()  # entries with torch's guard metrics
        self._since: set[CodeType] = set()  # code objects compiled since the last read

    def compiled(self, code: CodeType) -> None:
        """``code`` is being compiled: its new entry exists from the next compile on."""
        self._since.add(code)

    def read(self, *, latest: bool = False) -> None:
        """Read the tree of each entry made here not read yet: before the next compile (only
        the code objects compiled since the last read: ``latest``), a pause or the block's
        end (a reset, say in a Dynamo TestCase's tearDown, takes the entries)."""
        owners = self.recorder.owners()
        since, self._since = self._since, set()
        for code, record in self.recorder.codes():
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
                    leaves = [
                        installed_guard(
                            leaf.torch_kind,
                            leaf.source,
                            list(leaf.code_parts),
                            entry,
                            leaf.structural,
                        )
                        for leaf in guard_tree.guard_leaves(manager)
                    ]
                except Exception as exc:  # a tree built otherwise: torch's count stands in
                    self.faults.add(
                        f"guard counts: a guard tree could not be read ({type(exc).__name__}: "
                        f"{exc}); such entries get torch's guard_count"
                    )
                    continue
                self._read[key] = (manager, record, leaves)
                record.entries[entry] = entry_guards(entry, leaves)

    def installed(self, record: FunctionRecord) -> list[InstalledGuard]:
        """The guards installed on ``record``'s entries, of the trees read so far."""
        return [
            guard for _, owner, leaves in self._read.values() if owner is record for guard in leaves
        ]

    def note_metrics(self) -> None:
        """torch's guard count and latency estimate of each entry made here; an entry whose
        tree was gone before it was read gets torch's count alone. And, for a function
        recompiled for a size, the sources torch's automatic dynamic now compiles dynamic."""
        owners = self.recorder.owners()
        wanted = [key for key in owners if key not in self._metered]
        try:
            metrics = instruments.guard_metrics(wanted)
        except Exception as exc:  # metrics this torch words otherwise: the trees' counts stand
            self.faults.add(f"guard counts: torch's metrics unread ({type(exc).__name__}: {exc})")
            metrics = {}
        for key, (count, latency) in metrics.items():
            self._metered.add(key)
            record, entry = owners[key], key[3]
            known = record.entries.get(entry)
            if known is not None:
                record.entries[entry] = replace(known, torch_count=count, latency_us=latency)
            elif count is not None:
                record.entries[entry] = EntryGuards(
                    entry, None, torch_count=count, latency_us=latency
                )
        for record in self.recorder.records:
            if record.resized:
                codes = self.recorder.compiled(record)
                record.dynamic_sources = dynamic_state.dynamic_sources(codes)
