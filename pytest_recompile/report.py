"""Failure messages and summary lines (pure: records in, text out)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

from .markers import Budget
from .tracker import FunctionRecord, Recompile, Violation

PREFIX = "pytest-recompile:"
STOPPED = "stopped here, before compiling"
EAGER_FALLBACK = "fell back to eager"
LIMIT_FIX = (
    "torch now runs it uncompiled, silently; remove the cause of the recompiles above, or "
    "raise torch._dynamo.config.recompile_limit if they are expected"
)


def where(filename: str, lineno: int, root: str | None = None) -> str:
    base = root or os.getcwd()
    try:
        rel = os.path.relpath(filename, base)
    except ValueError:  # another drive on Windows
        rel = filename
    shown = filename if rel.startswith("..") else rel
    return f"{shown}:{lineno}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def violation_line(v: Violation) -> str:
    if v.kind == "limit":
        assert v.function is not None
        return f"{PREFIX} '{v.function.qualname}' hit {v.source} and {EAGER_FALLBACK}: {LIMIT_FIX}"
    if v.kind == "function":
        assert v.function is not None
        return (
            f"{PREFIX} '{v.function.qualname}' recompiled {plural(v.used, 'time')}, "
            f"budget {v.allowed} ({v.source})"
        )
    return f"{PREFIX} {plural(v.used, 'recompile')}, budget {v.allowed} ({v.source})"


def recompile_line(index: int, recompile: Recompile) -> list[str]:
    first, *others = recompile.reasons or ()
    text = first.text if first is not None else "(torch gave no reason)"
    entry = f" [{recompile.compile_id}]"
    resume = " (graph-break resume frame)" if recompile.resume else ""
    tail = f"   <- {STOPPED}" if recompile.stopped else ""
    lines = [f"    recompile {index}{entry}{resume}: {text}{tail}"]
    if others:
        older = others[0]
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        lines.append(f"      also rejected by {older.entry or '?'}: {older.text}{more}")
    return lines


def function_block(record: FunctionRecord, root: str | None = None) -> list[str]:
    seconds = record.recompile_seconds
    cost = f", {seconds:.3f} s spent recompiling" if seconds else ""
    lines = [
        f"  {record.qualname}  {where(record.filename, record.lineno, root)}",
        f"    cache entries: {record.cache_entries}, compiles: {record.compiles}, "
        f"recompiles: {record.recompile_count}{cost}",
    ]
    for index, recompile in enumerate(record.recompiles, 1):
        lines += recompile_line(index, recompile)
    if record.limit:
        lines.append(
            f"    hit {record.limit} {plural(record.limit_hits, 'time')}: {EAGER_FALLBACK}"
        )
    return lines


def offenders(records: list[FunctionRecord]) -> list[FunctionRecord]:
    bad = [r for r in records if r.recompiles or r.limit]
    return sorted(bad, key=lambda r: (not r.limit, -r.recompile_count))


def failure_message(
    records: list[FunctionRecord],
    violations: list[Violation],
    *,
    stopped: bool = False,
    site: str | None = None,
    root: str | None = None,
) -> str:
    lines = [violation_line(v) for v in violations]
    for record in offenders(records):
        lines += function_block(record, root)
    if stopped:
        at = f" at {site}" if site else ""
        lines.append(f"  fail-fast: stopped{at}, before that recompile ran")
    return "\n".join(lines)


def summarize_test(
    records: list[FunctionRecord], budget: Budget | None, violations: list[Violation]
) -> dict[str, Any]:
    """What the terminal summary needs of one test; JSON-serialisable (travels under xdist)."""
    worst = max(records, key=lambda r: r.recompile_count, default=None)
    return {
        "budget": budget.describe() if budget is not None else None,
        "recompiles": sum(r.recompile_count for r in records),
        "recompile_seconds": round(sum(r.recompile_seconds for r in records), 6),
        "violations": [violation_line(v)[len(PREFIX) + 1 :] for v in violations],
        "limit_hit": [r.qualname for r in records if r.limit],
        "worst": (
            f"{worst.qualname} ({worst.recompile_count})"
            if worst is not None and worst.recompile_count
            else None
        ),
    }


def summary_lines(results: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Lines for the terminal summary: one per test over budget or with a limit hit."""
    lines = []
    failing = [(nodeid, data) for nodeid, data in results if data["violations"]]
    for nodeid, data in failing:
        seconds = data["recompile_seconds"]
        cost = f"; recompiles cost {seconds:.2f} s" if seconds >= 0.005 else ""
        lines.append(f"{nodeid}: {'; '.join(data['violations'])}{cost}")
    total = sum(data["recompiles"] for _, data in results)
    limit = sum(1 for _, data in results if data["limit_hit"])
    lines.append(
        f"{plural(len(results), 'gated test')}, {plural(total, 'recompile')}; "
        f"{len(failing)} over budget, {limit} hit recompile_limit"
    )
    return lines


def call_site(tb: TracebackType | None) -> str | None:
    """The innermost frame of the user's code in a traceback: where the call went over."""
    site = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in _INTERNAL):
            site = f"{where(filename, tb.tb_lineno)} in {tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return site


_INTERNAL = (
    os.sep + os.path.join("torch", ""),
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
)
