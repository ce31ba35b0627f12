"""What a block compiled, per function: the record a tracker keeps, without torch.

:class:`Recorder` turns compile events (plain values, see :mod:`.._torch.events`) into
:class:`~pytest_recompile.model.records.FunctionRecord` values and answers questions about them. It
imports no torch and drives nothing: :class:`~.tracker.RecompileTracker`, which
the gate, the ``recompiles`` fixture and child processes use, adds torch's instruments and the
budget to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import CodeType, MappingProxyType

from .._torch.events import RESUME_PREFIX, CompileEvent, CompileKey, compile_key, qualname
from .._torch.reasons import parse_reason
from ..model.guards import Reason
from ..model.records import FunctionRecord, Recompile
from ..model.work import CompileWork


def event_reasons(event: CompileEvent) -> tuple[Reason, ...]:
    """A compile's guard failures, parsed (the failing leaf's kind where torch gave it)."""
    reasons = (
        parse_reason(raw, leaf, event.function.co_filename)
        for raw, leaf in zip(event.reasons, event.leaf_kinds, strict=False)
    )
    return tuple(
        replace(r, actual=event.values[r.source])
        if r.actual is None and r.source is not None and r.source in event.values
        else r
        for r in reasons
    )


class Recorder:
    """Compiles and recompiles per function, in the order the functions were first compiled.

    A function's first compile is never a recompile, unless ``warm_start=True``: then the
    entries compiled before recording began count, and any compile torch calls a recompile is
    one.
    """

    def __init__(self, *, warm_start: bool = False) -> None:
        self.warm_start = warm_start
        self._records: dict[CodeType, FunctionRecord] = {}
        # (code object, user function) pairs compiled while recording: a torch module
        # compiled with torch.compile shares torch's wrapper code with every other one.
        self._compiled: set[tuple[CodeType, CodeType]] = set()
        self._owner: dict[CompileKey, FunctionRecord] = {}  # compile -> function
        self._again: set[CompileKey] = set()  # compiles isolation made necessary
        self._keys: dict[int, CompileKey] = {}  # id(Recompile) -> its compile

    def add(
        self, event: CompileEvent, *, again: str | None = None
    ) -> tuple[FunctionRecord, Recompile | None]:
        """Record one compile: its function's record, and the recompile it is, if one.

        A recompile is counted as a compile only once it is let through (:meth:`let_through`).
        """
        record = self._record_for(event)
        record.compile_name = record.compile_name or event.name
        key = compile_key(event.code, event.compile_id)
        self._owner[key] = record
        if again:
            self._again.add(key)
            if again not in record.again_reasons:
                record.again_reasons.append(again)
        recompile = None
        if event.limit is not None:
            record.limit = event.limit
            record.limit_hits += 1
            record.limit_raised = record.limit_raised or event.refused
        elif event.is_recompile and (
            self.warm_start or (event.code, event.function) in self._compiled
        ):
            recompile = Recompile(
                compile_id=event.compile_id,
                reasons=event_reasons(event),
                resume=event.code.co_name.startswith(RESUME_PREFIX),
            )
            record.recompiles.append(recompile)
            self._keys[id(recompile)] = key
        else:
            record.compiles += 1
        self._compiled.add((event.code, event.function))
        return record, recompile

    def reuse(
        self, event: CompileEvent, seconds: float | None, work: CompileWork | None = None
    ) -> FunctionRecord:
        """Record a first compile answered by the entry an earlier test's same compile made
        (``event`` is that compile's; ``seconds``, what it took; ``work``, its counted work,
        which is this test's as if it had compiled it): a compile, reused."""
        record = self._record_for(event)
        key = compile_key(event.code, event.compile_id)
        self._owner[key] = record
        if work is not None:
            record.work[key[3]] = (work, True)
        record.compiles += 1
        record.reused += 1
        record.saved_seconds += seconds or 0.0
        self._compiled.add((event.code, event.function))
        return record

    @staticmethod
    def let_through(record: FunctionRecord, recompile: Recompile | None) -> None:
        """A recompile that was not refused: it compiles."""
        record.compiles += recompile is not None

    def _record_for(self, event: CompileEvent) -> FunctionRecord:
        fn = event.function
        record = self._records.get(fn)
        if record is None:
            name = event.label or qualname(fn)
            record = FunctionRecord(
                name=name.rsplit(".", 1)[-1],
                qualname=name,
                filename=fn.co_filename,
                lineno=fn.co_firstlineno,
            )
            self._records[fn] = record
        return record

    def compiled(self, record: FunctionRecord) -> list[CodeType]:
        """The code objects compiled for ``record`` (its function and resume frames)."""
        return sorted(
            (code for code, function in self._compiled if self._records[function] is record),
            key=lambda code: code.co_name,
        )

    def codes(self) -> list[tuple[CodeType, FunctionRecord]]:
        """Each code object compiled (a function's, a resume frame's) with its record."""
        return [(code, self._records[function]) for code, function in list(self._compiled)]

    def owners(self) -> Mapping[CompileKey, FunctionRecord]:
        """Each compile recorded (a reuse included), with its function's record (a view)."""
        return MappingProxyType(self._owner)

    def made_here(self, code: CodeType, compile_id: object) -> bool:
        """Whether this compile was recorded here (not, say, a wider fixture's)."""
        return compile_key(code, compile_id) in self._owner

    def note_entries(self, count: Callable[[CodeType], int]) -> None:
        """The most cache entries each function has had at once (``count``: a code object's)."""
        most: dict[int, int] = {}
        for code, function in self._compiled:
            record = self._records[function]
            held = count(code)
            most[id(record)] = most.get(id(record), 0) + held
            record.code_entries = max(record.code_entries, held)  # what recompile_limit caps
        for record in self._records.values():
            record.cache_entries = max(record.cache_entries, most.get(id(record), 0))

    def note_seconds(self, seconds: dict[CompileKey, float]) -> None:
        """Give each compile its seconds (``seconds``: per compile, as torch measured)."""
        for record in self._records.values():
            record.compile_seconds = 0.0
            record.again_seconds = 0.0
            for recompile in record.recompiles:
                key = self._keys.get(id(recompile))
                if not recompile.stopped and key is not None:
                    recompile.seconds = seconds.get(key)
        for key, spent in seconds.items():
            owner = self._owner.get(key)
            if owner is not None:
                owner.compile_seconds += spent
                if key in self._again:
                    owner.again_seconds += spent

    def note_work(self, work: dict[CompileKey, CompileWork]) -> None:
        """Give each compile made here its counted work (``work``: per compile, as torch
        recorded it); a reused compile keeps what it was given with its reuse."""
        for key, found in work.items():
            owner = self._owner.get(key)
            if owner is not None and owner.work.get(key[3], (None, False))[1] is False:
                owner.work[key[3]] = (found, False)

    # -- questions ----------------------------------------------------------------------------

    @property
    def records(self) -> list[FunctionRecord]:
        """Per-function records, in the order the functions were first compiled."""
        return list(self._records.values())

    @property
    def total_recompiles(self) -> int:
        return sum(r.recompile_count for r in self._records.values())

    def record(self, function: str) -> FunctionRecord:
        """The record of a compiled function, by name or qualname."""
        records = self.records
        for record in records:
            if function in (record.qualname, record.name):
                return record
        known = ", ".join(r.qualname for r in records) or "none"
        raise KeyError(f"no compiled function {function!r} in this block (compiled: {known})")

    def _selected(self, function: str | None) -> list[FunctionRecord]:
        return [self.record(function)] if function is not None else self.records

    def count(self, function: str | None = None) -> int:
        """Recompiles so far, of one function or of all."""
        return sum(r.recompile_count for r in self._selected(function))

    def reasons(self, function: str | None = None) -> list[Reason]:
        """The failing guard of each recompile (of the newest rejecting entry), in order."""
        return [
            rc.reasons[0] for r in self._selected(function) for rc in r.recompiles if rc.reasons
        ]

    def kinds(self, function: str | None = None) -> list[str]:
        return [reason.kind for reason in self.reasons(function)]
