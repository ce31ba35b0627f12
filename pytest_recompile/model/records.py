"""The records of what a block (a test, a wider fixture's set-up, a ``with`` block)
compiled: a function's record, its recompiles, the graph breaks (pure). The tracker fills
them in; :mod:`.judge` holds them against a Budget; :meth:`FunctionRecord.to_dict` freezes
them into the result model."""

from __future__ import annotations

from dataclasses import dataclass, field

from .guard_cost import EntryGuards
from .guards import InstalledGuard, Reason
from .results import FunctionResult, GraphBreakResult, RecompileResult
from .work import CompileWork, summed


@dataclass(frozen=True)
class GraphBreak:
    """One place where Dynamo split the graph, with torch's reason."""

    reason: str  # torch's headline, e.g. "Failed to trace builtin operator"
    filename: str
    lineno: int
    function: str
    line: str  # the user's source line, when known
    hint: str | None  # torch's first hint, when it gave one

    @property
    def site(self) -> tuple[str, int]:
        """Its place in the code. torch may word one break twice (``Data-dependent
        branching`` in the inlined frame, ``generic_jump`` in the frame it restarts, and
        again in its resume function): one site."""
        return (self.filename, self.lineno)

    def to_dict(self) -> GraphBreakResult:
        return {
            "reason": self.reason,
            "file": self.filename,
            "line": self.lineno,
            "function": self.function,
            "code": self.line,
            "hint": self.hint,
        }


def graph_break(text: str, filename: str, lineno: int, function: str, line: str) -> GraphBreak:
    """A GraphBreak from torch's multi-line reason text and its innermost user frame."""
    lines = [part.strip() for part in text.strip().splitlines() if part.strip()]
    reason = lines[0] if lines else "graph break"
    hint = next((part[5:].strip() for part in lines if part.startswith("Hint:")), None)
    return GraphBreak(reason, filename, lineno, function, line.strip(), hint)


def distinct_breaks(breaks: list[GraphBreak]) -> list[GraphBreak]:
    """One per site (place in the code): a break compiled twice (a recompile, a restart,
    torch's second wording of it) is still one break; the first wording is kept."""
    seen: dict[tuple[str, int], GraphBreak] = {}
    for found in breaks:
        seen.setdefault(found.site, found)
    return list(seen.values())


@dataclass
class Recompile:
    compile_id: str
    reasons: tuple[Reason, ...]  # one per rejecting cache entry, in torch's order of entries
    resume: bool = False  # a graph-break resume frame of the function recompiled
    stopped: bool = False  # refused by the gate: the compile never ran
    seconds: float | None = None

    def to_dict(self) -> RecompileResult:
        return {
            "compile_id": self.compile_id,
            "reasons": [r.to_dict() for r in self.reasons],
            "resume": self.resume,
            "stopped": self.stopped,
            "seconds": self.seconds,
        }


@dataclass
class FunctionRecord:
    """One compiled function of the user's (its resume frames included)."""

    name: str
    qualname: str
    filename: str
    lineno: int
    compiles: int = 0
    recompiles: list[Recompile] = field(default_factory=list)
    cache_entries: int = 0
    code_entries: int = 0  # the most one of its code objects held: what recompile_limit caps
    compile_seconds: float = 0.0
    again_seconds: float = 0.0  # compiling again what isolation dropped for an earlier test
    again_reasons: list[str] = field(default_factory=list)  # why those were not reused
    reused: int = 0  # first compiles answered by an earlier test's same compile
    saved_seconds: float = 0.0  # what those compiles took when they ran
    limit: str | None = None  # "recompile_limit (8)" once torch gave up and ran it eagerly
    limit_hits: int = 0
    limit_raised: bool = False  # at the limit torch raised FailOnRecompileLimitHit instead
    guards: list[InstalledGuard] | None = None  # installed guards, once inventoried
    entries: dict[str, EntryGuards] = field(default_factory=dict)  # its own, by compile id
    dynamic_sources: list[str] = field(default_factory=list)  # torch made these dynamic
    compile_name: str | None = None  # torch.compile(..., name=...), where torch keeps it
    # each compile's counted work, by compile id, with whether an earlier test's answered it
    work: dict[str, tuple[CompileWork, bool]] = field(default_factory=dict)
    # per compile (its id), the entries its code object held as it began: with its own entry,
    # once torch counted that entry's guards, what the code object held after it (a reset
    # right after a compile drops the entry before any other look)
    held_before: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def recompile_seconds(self) -> float:
        return sum(r.seconds or 0.0 for r in self.recompiles)

    @property
    def resized(self) -> bool:
        """A recompile of it was for a tensor's size (what automatic dynamic answers)."""
        return any(r.detail == "size" for rc in self.recompiles for r in rc.reasons)

    @property
    def first_compile_seconds(self) -> float:
        """Its compiles' seconds but its recompiles': what its first compiles took."""
        return max(0.0, self.compile_seconds - self.recompile_seconds)

    def to_dict(self) -> FunctionResult:
        return {
            "name": self.name,
            "qualname": self.qualname,
            "file": self.filename,
            "line": self.lineno,
            "compiles": self.compiles,
            "recompiles": [r.to_dict() for r in self.recompiles],
            "cache_entries": self.cache_entries,
            "code_entries": self.code_entries,
            "compile_seconds": round(self.compile_seconds, 6),
            "first_compile_seconds": round(self.first_compile_seconds, 6),
            "again_seconds": round(self.again_seconds, 6),
            "again_reasons": list(self.again_reasons),
            "reused": self.reused,
            "saved_seconds": round(self.saved_seconds, 6),
            "recompile_seconds": round(self.recompile_seconds, 6),
            "recompile_limit": self.limit,
            "limit_hits": self.limit_hits,
            "limit_raised": self.limit_raised,
            "guards": [g.to_dict() for g in self.guards] if self.guards is not None else None,
            "entries": [e.to_dict() for e in self.entries.values()],
            "dynamic_sources": list(self.dynamic_sources),
            "compile_name": self.compile_name,
            "work": {
                **summed(self.work.values()),
                "per_compile": [w.to_dict(cid, reused) for cid, (w, reused) in self.work.items()],
            },
        }
