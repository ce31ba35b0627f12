"""Messages and documents: failure messages, summary lines, the JSON report (pure: records
and violations in, text and JSON-ready values out)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple

from .guards import GraphBreak, Reason, hint_for, label_for
from .markers import Budget
from .names import PREFIX
from .processes import notes, who
from .results import (
    Environment,
    FixtureResult,
    OutlivedResult,
    ProcessResult,
    ReportDocument,
    ReportedTest,
    ReportSettings,
    SiteResult,
    TestSummary,
    ViolationResult,
)
from .verdict import FunctionRecord, Recompile, Violation, rerecords

if TYPE_CHECKING:  # the core (tracker, child processes) must not import pytest
    import pytest

    from .isolation import Owner

STOPPED = "stopped here, before compiling"
EAGER_FALLBACK = "fell back to eager"
LIMIT_RAISED = (
    "torch refused to compile it and raised FailOnRecompileLimitHit "
    "(fail_on_recompile_limit_hit or fullgraph)"
)
LIMIT_FIX = (
    "torch now runs it uncompiled, silently; remove the cause of its recompiles, or "
    "raise torch._dynamo.config.recompile_limit if they are expected"
)


def relative(path: str, root: str | None = None) -> str:
    """``path`` relative to ``root`` (default: the working directory) when inside it, with
    ``/`` separators; otherwise as given (another drive on Windows included)."""
    try:
        rel = os.path.relpath(path, root or os.getcwd())
    except ValueError:  # another drive on Windows
        return path
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return path
    return rel.replace(os.sep, "/")


def location(filename: str, lineno: int, root: str | None = None) -> str:
    """``file:line``, relative to ``root`` (default: the working directory) when inside it."""
    return f"{relative(filename, root)}:{lineno}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _unknown_function(v: Violation) -> str:
    import difflib

    close = difflib.get_close_matches(v.wanted, list(v.compiled), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    compiled = ", ".join(v.compiled) or "none"
    return f"{v.source} names no function this test compiled (compiled: {compiled}){hint}"


def violation_message(v: Violation) -> str:
    """The one wording of a broken rule, without the ``pytest-recompile:`` prefix: the JSON
    report, the summaries and the CI outputs carry it (:func:`violation_result`), the failure
    message prints it after the prefix."""
    fn = v.function.qualname if v.function is not None else "?"
    if v.kind == "limit":
        if v.function is not None and v.function.limit_raised:
            return f"'{fn}' hit {v.source}: {LIMIT_RAISED}; remove the cause of its recompiles"
        return f"'{fn}' hit {v.source} and {EAGER_FALLBACK}: {LIMIT_FIX}"
    if v.kind == "function":
        first = f" ({_first_guard(v.function)})" if v.function is not None else ""
        return f"'{fn}' recompiled {plural(v.used, 'time')}{first}, budget {v.allowed} ({v.source})"
    if v.kind == "unexpected":
        # with the detail where the marker named details (expect_guards('TENSOR_MATCH(size)'))
        detailed = "(" in v.source.partition("(")[2]
        kinds = ", ".join(sorted({r.label if detailed else r.kind for r in v.reasons}))
        return (
            f"'{fn}' recompiled because of {kinds}, not a kind this test expects "
            f"({v.source}): {v.reasons[0].text}"
        )
    if v.kind == "forbidden":
        kinds = ", ".join(sorted({g.kind for g in v.guards}))
        return (
            f"'{fn}' installed {plural(v.used, 'forbidden guard')} of kind {kinds} "
            f"({v.source}): {v.guards[0].text}"
        )
    if v.kind == "graph_breaks":
        return f"{plural(v.used, 'graph break')}, budget {v.allowed} ({v.source})"
    if v.kind == "cudagraph_rerecords":
        return (
            f"{plural(v.used, 'CUDA-graph re-record')}, budget {v.allowed} ({v.source}): "
            "not recompiles, but each re-record costs a capture; keep input shapes and "
            "addresses stable"
        )
    if v.kind == "unknown_function":
        return _unknown_function(v)
    if v.kind == "fullgraph":
        return f"graph break under fullgraph ({v.source}): {v.breaks[0].reason}"
    return f"{plural(v.used, 'recompile')}{_worst_text(v)}, budget {v.allowed} ({v.source})"


def violation_result(v: Violation) -> ViolationResult:
    return {"kind": v.kind, "source": v.source, "message": violation_message(v)}


def _first_guard(record: FunctionRecord) -> str:
    """``KIND: guard`` of the function's first recompile (the one to fix first)."""
    for recompile in record.recompiles:
        if recompile.reasons:
            first = recompile.reasons[0]
            return guard_text(first.kind, first.detail, first.text)
    return "torch gave no reason"


def _worst_text(v: Violation) -> str:
    """Which function the recompiles of a total were, so one line is enough to act on:
    `` of f (KIND: guard)``, or `` in 3 functions, most of f (2; KIND: guard)``."""
    if not v.counted:
        return ""
    worst = max(
        v.counted, key=lambda r: (r.recompile_count, any(rc.stopped for rc in r.recompiles))
    )
    if len(v.counted) == 1:
        return f" of {worst.qualname} ({_first_guard(worst)})"
    return (
        f" in {len(v.counted)} functions, most of {worst.qualname} "
        f"({worst.recompile_count}; {_first_guard(worst)})"
    )


def guard_text(kind: str, detail: str | None, text: str, actual: str | None = None) -> str:
    """``KIND(detail): guard``, and `` (this call: 1)`` when ``actual`` gives the value a call
    passed where an ``==`` guard expected another."""
    passed = f" (this call: {actual})" if kind == "EQUALS_MATCH" and actual else ""
    return f"{label_for(kind, detail)}: {text}{passed}"


def recompile_line(index: int, recompile: Recompile) -> list[str]:
    entry = f" [{recompile.compile_id}]"
    resume = " (graph-break resume frame)" if recompile.resume else ""
    tail = f"   <- {STOPPED}" if recompile.stopped else ""
    if not recompile.reasons:
        return [f"    recompile {index}{entry}{resume}: (torch gave no reason){tail}"]
    first, *others = recompile.reasons
    guard = guard_text(first.kind, first.detail, first.text, first.actual)
    lines = [f"    recompile {index}{entry}{resume} {guard}{tail}"]
    if others:
        older = others[0]
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        lines.append(
            f"      also rejected by {older.entry or '?'} {older.label}: {older.text}{more}"
        )
    return lines


COMPILE_ID_NOTE = (
    "[frame/attempt] is torch's compile id, numbered across the whole process (earlier "
    "tests' compiles count too), not this test's cache entries"
)


def _attempt(compile_id: str) -> int:
    """The attempt of a compile id ("6/3" -> 3); 0 when it has none."""
    attempt = compile_id.rpartition("/")[2]
    return int(attempt) if attempt.isdigit() else 0


def fix_lines(pairs: list[tuple[str, str]]) -> list[str]:
    """One ``fix`` line per distinct (kind label, hint)."""
    return [f"    fix {label}: {hint}" for label, hint in dict.fromkeys(pairs)]


def function_block(
    record: FunctionRecord, violations: list[Violation], root: str | None = None
) -> list[str]:
    seconds = record.recompile_seconds
    cost = f", {seconds:.3f} s spent recompiling" if seconds else ""
    lines = [
        f"  {record.qualname}  {location(record.filename, record.lineno, root)}",
        f"    cache entries: {record.cache_entries}, compiles: {record.compiles}, "
        f"recompiles: {record.recompile_count}{cost}",
    ]
    fixes: list[tuple[str, str]] = []
    for index, recompile in enumerate(record.recompiles, 1):
        lines += recompile_line(index, recompile)
        fixes += [(r.label, r.hint) for r in recompile.reasons[:1]]
    if any(_attempt(r.compile_id) > record.cache_entries for r in record.recompiles):
        lines.append(f"    {COMPILE_ID_NOTE}")
    for v in violations:
        if v.function is record and v.kind == "unexpected":
            fixes += [(r.label, r.hint) for r in v.reasons]
        if v.function is record and v.kind == "forbidden":
            for guard in v.guards:
                lines.append(
                    f"    forbidden guard [{guard.entry}] {guard.kind} on {guard.source}: "
                    f"{guard.text}"
                )
                fixes.append((guard.kind, hint_for(guard.kind, None, guard.source, guard.text)))
    if record.limit:
        lines.append(
            f"    hit {record.limit} {plural(record.limit_hits, 'time')}: "
            f"{LIMIT_RAISED if record.limit_raised else EAGER_FALLBACK}"
        )
    return lines + fix_lines(fixes)


def break_lines(
    breaks: tuple[GraphBreak, ...] | list[GraphBreak], root: str | None = None
) -> list[str]:
    lines = []
    for index, found in enumerate(breaks, 1):
        lines.append(
            f"  graph break {index} at {location(found.filename, found.lineno, root)} "
            f"in {found.function}: {found.reason}"
        )
        if found.line:
            lines.append(f"      {found.line}")
        if found.hint:
            lines.append(f"    fix: {found.hint}")
    return lines


def offenders(records: list[FunctionRecord], violations: list[Violation]) -> list[FunctionRecord]:
    named = {id(v.function) for v in violations if v.function is not None}
    bad = [r for r in records if r.recompiles or r.limit or id(r) in named]
    return sorted(bad, key=lambda r: (not r.limit, -r.recompile_count))


def failure_message(
    records: list[FunctionRecord],
    violations: list[Violation],
    *,
    stopped: bool = False,
    site: str | None = None,
    root: str | None = None,
) -> str:
    lines = [f"{PREFIX} {violation_message(v)}" for v in violations]
    for record in offenders(records, violations):
        lines += function_block(record, violations, root)
    for v in violations:
        lines += break_lines(v.breaks, root)
    if stopped:
        at = f" at {site}" if site else ""
        lines.append(f"  fail-fast: stopped{at}, before that recompile ran")
    return "\n".join(lines)


def summarize_test(
    records: list[FunctionRecord],
    budget: Budget | None,
    violations: list[Violation],
    graph_breaks: list[GraphBreak],
    *,
    baseline: int | None = None,
    device: str | None = None,
    cudagraph_recordings: list[str] | None = None,
    isolation: str = "entries",
    stopped_at: Site | None = None,
    refused: str | None = None,
    processes: list[ProcessResult] | None = None,
    divergence: str | None = None,
) -> TestSummary:
    """One test's results (see :class:`~pytest_recompile.results.TestSummary`); ``divergence``:
    how its ranks compiled differently, in words (:func:`.processes.divergence`)."""
    worst = max(records, key=lambda r: r.recompile_count, default=None)
    total = budget.total if budget is not None else None
    children = processes or []
    same = budget.same_across_ranks if budget is not None else None
    return {
        "budget": total.value if total is not None else None,
        "budget_source": total.source if total is not None else None,
        "rules": budget.describe() if budget is not None else None,
        "baseline": baseline,
        "recompiles": sum(r.recompile_count for r in records),
        "recompile_seconds": round(sum(r.recompile_seconds for r in records), 6),
        "compile_seconds": round(sum(r.compile_seconds for r in records), 6),
        "again_seconds": round(sum(r.again_seconds for r in records), 6),
        "reused": sum(r.reused for r in records),
        "saved_seconds": round(sum(r.saved_seconds for r in records), 6),
        "isolation": isolation,
        "violations": _violations(violations, refused, children, divergence, same),
        "limit_hit": [r.qualname for r in records if r.limit]
        + [f"{name} ({who(p)})" for p in children for name in p["limit_hit"]],
        "worst": (
            f"{worst.qualname} ({worst.recompile_count})"
            if worst is not None and worst.recompile_count
            else None
        ),
        "device": device,
        "functions": [r.to_dict() for r in records],
        "graph_breaks": [b.to_dict() for b in graph_breaks],
        "cudagraph_recordings": len(cudagraph_recordings or []),
        "cudagraph_rerecords": rerecords(cudagraph_recordings or []),
        "stopped_at": stopped_at.to_dict() if stopped_at is not None else None,
        "order_note": None,  # kept for readers of version 5: a test sees what it would alone
        "processes": children,
        "divergence": divergence,
    }


def _violations(
    violations: list[Violation],
    refused: str | None,
    children: list[ProcessResult],
    diverged: str | None,
    same: str | None,
) -> list[ViolationResult]:
    """The test's broken rules: its own, a warm block's refusal, its children's (each named
    by rank and pid) and, under ``same_compiles_across_ranks``, ranks that diverged."""
    found = [violation_result(v) for v in violations]
    if refused:
        found.append({"kind": "warm", "source": "warm()", "message": refused})
    found += [
        {**v, "message": f"{who(p)}: {v['message']}"} for p in children for v in p["violations"]
    ]
    if diverged and same:
        found.append({"kind": "divergence", "source": same, "message": diverged})
    return found


def seconds_text(seconds: float) -> str:
    return f"{seconds:.2f} s"


ISOLATION_HINT = (
    "warm shared compiled models once in a module- or session-scoped fixture: what it "
    "compiles while set up is kept for its tests"
)
RESET_FALLBACK = (
    "this torch cannot keep single cache entries, so compile caches were reset before each "
    "test's own phases: wider fixtures' warm-ups were not kept"
)


def isolation_lines(tests: list[TestSummary]) -> list[str]:
    """What isolation saved (first compiles reused) and what it still cost, and why."""
    lines = []
    reused = sum(data["reused"] for data in tests)
    if reused:
        saved = sum(data["saved_seconds"] for data in tests)
        lines.append(
            f"isolation: {plural(reused, 'first compile')} reused from earlier tests "
            f"({seconds_text(saved)} of compiling not spent again)"
        )
    again = sum(data["again_seconds"] for data in tests)
    if again >= 0.005:
        why = sorted({w for data in tests for f in data["functions"] for w in f["again_reasons"]})
        lines.append(
            f"isolation: {seconds_text(again)} compiling again what earlier tests had "
            f"compiled ({'; '.join(why) or 'not reusable'}); {ISOLATION_HINT}"
        )
    return lines


def fixture_line(fixture: FixtureResult) -> str:
    """A wider fixture that recompiled while set up: recorded, charged to no test."""
    firsts = [
        f"{fn['qualname']} ({reason['kind']}: {reason['text']})"
        for fn in fixture["functions"]
        for recompile in fn["recompiles"][:1]
        for reason in recompile["reasons"][:1]
    ]
    what = f": {'; '.join(firsts)}" if firsts else ""
    return (
        f"{fixture['node']}: {fixture['fixture']} recompiled "
        f"{plural(fixture['recompiles'], 'time')} while set up (charged to no test){what}"
    )


def fixture_limit_lines(fixtures: list[FixtureResult]) -> list[str]:
    """Loud lines for wider fixtures whose functions fell back to eager while set up."""
    return [
        f"{PREFIX} {fixture['node']}: {fixture['fixture']} hit recompile_limit while set up: "
        f"{', '.join(repr(name) for name in fixture['limit_hit'])} {EAGER_FALLBACK} for every "
        "test that uses it; remove the cause of its recompiles"
        for fixture in fixtures
        if fixture["limit_hit"]
    ]


def summary_lines(
    results: list[tuple[str, TestSummary]],
    fixtures: list[FixtureResult] | None = None,
    *,
    enforced: bool = True,
) -> list[str]:
    """Lines for the terminal summary: each test that broke the gate or beat its baseline,
    wider fixtures that recompiled while set up, then the totals. Sorted by node id, so
    serial and pytest-xdist runs print the same. ``enforced=False`` (report-only): tests
    "would have broken" the gate."""
    results = sorted(results, key=lambda pair: pair[0])
    lines = []
    failing = [(nodeid, data) for nodeid, data in results if data["violations"]]
    for nodeid, data in failing:
        seconds = data["recompile_seconds"]
        cost = f"; recompiles cost {seconds_text(seconds)}" if seconds >= 0.005 else ""
        messages = "; ".join(v["message"] for v in data["violations"])
        lines.append(f"{nodeid}: {messages}{cost}")
    better = [
        (nodeid, data)
        for nodeid, data in results
        if data["baseline"] is not None and per_process(data) < data["baseline"]
    ]
    for nodeid, data in better:
        lines.append(
            f"{nodeid}: {plural(per_process(data), 'recompile')}, below its baseline of "
            f"{data['baseline']}: tighten it with --recompile-baseline-update"
        )
    recompiled = [f for f in fixtures or () if f["recompiles"]]
    lines += sorted(fixture_line(f) for f in recompiled)
    lines += process_lines(results)
    lines.append(totals_line([data for _, data in results], enforced=enforced))
    lines += isolation_lines([data for _, data in results])
    if any(data["isolation"] == "reset" for _, data in results):
        lines.append(f"isolation: {RESET_FALLBACK}")
    return lines


def process_lines(results: list[tuple[str, TestSummary]]) -> list[str]:
    """Ranks that diverged (where no rule made it fail) and children without a complete
    record, one line each."""

    lines = []
    for nodeid, data in results:
        judged = any(v["kind"] == "divergence" for v in data["violations"])
        if data.get("divergence") and not judged:
            lines.append(f"{nodeid}: {data['divergence']}")
        lines += [f"{nodeid}: {note}" for note in notes(data.get("processes") or [])]
    return lines


FAULT = f"{PREFIX} internal error contained"

MISSING = "incomplete report: the figures leave out what the gate could not record"

INCOMPLETE = "incomplete run: these figures cover only the tests that ran; stopped by"


def per_process(data: TestSummary) -> int:
    """The most recompiles one process of the test made (the test's own or a child's): what
    a budget, applied to each process, and so a baseline, caps."""
    return int(max([data["recompiles"], *(p["recompiles"] for p in data.get("processes") or ())]))


def child_recompiles(data: TestSummary) -> int:
    return sum(p["recompiles"] for p in data.get("processes") or ())


def totals_line(results: list[TestSummary], *, enforced: bool = True) -> str:
    """``12 gated tests, 9 recompiles; 2 broke the gate, 0 hit recompile_limit; ...``"""
    total = sum(data["recompiles"] + child_recompiles(data) for data in results)
    failing = sum(1 for data in results if data["violations"])
    limit = sum(1 for data in results if data["limit_hit"])
    paid = sum(data["recompile_seconds"] for data in results)
    return (
        f"{plural(len(results), 'gated test')}, {plural(total, 'recompile')}; "
        f"{failing} {'broke' if enforced else 'would have broken'} the gate, "
        f"{limit} hit recompile_limit; recompiles cost {seconds_text(paid)}"
    )


REPORT_SCHEMA = "pytest-recompile/report"
REPORT_VERSION = 6
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")


def report_document(
    results: list[tuple[str, str, TestSummary]],
    environment: Environment,
    settings: ReportSettings,
    created: str,
    fixtures: list[FixtureResult] | None = None,
    incomplete: str | None = None,
    faults: list[str] | None = None,
) -> ReportDocument:
    """The JSON report (see report.schema.json): ``results`` are (nodeid, outcome, data);
    ``incomplete``: why the run stopped early, if it did."""
    tests: list[ReportedTest] = [
        {"nodeid": nodeid, "outcome": outcome, **data}
        for nodeid, outcome, data in sorted(results, key=lambda r: r[0])
    ]
    devices = sorted({t["device"] for t in tests if t["device"]})
    return {
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "created": created,
        "complete": incomplete is None,
        "incomplete": incomplete,
        "environment": {**environment, "devices": devices},
        "settings": settings,
        "summary": {
            "gated_tests": len(tests),
            "recompiles": sum(t["recompiles"] for t in tests),
            "broke_the_gate": sum(1 for t in tests if t["violations"]),
            "recompile_limit_hits": sum(1 for t in tests if t["limit_hit"]),
            "recompile_seconds": round(sum(t["recompile_seconds"] for t in tests), 6),
            "compile_seconds": round(sum(t["compile_seconds"] for t in tests), 6),
            "again_seconds": round(sum(t["again_seconds"] for t in tests), 6),
            "reused": sum(t["reused"] for t in tests),
            "saved_seconds": round(sum(t["saved_seconds"] for t in tests), 6),
            "graph_breaks": sum(len(t["graph_breaks"]) for t in tests),
            "cudagraph_rerecords": sum(t["cudagraph_rerecords"] for t in tests),
        },
        "tests": tests,
        "fixtures": sorted(fixtures or [], key=lambda f: (f["node"], f["name"])),
        "faults": list(faults or []),
    }


class Site(NamedTuple):
    """Where a call was made: file (absolute), line, function."""

    file: str
    line: int
    function: str

    def describe(self, root: str | None = None) -> str:
        return f"{location(self.file, self.line, root)} in {self.function}"

    def to_dict(self) -> SiteResult:
        return {"file": self.file, "line": self.line, "function": self.function}


def call_frame(tb: TracebackType | None, root: str | None = None) -> Site | None:
    """Where the call went over: the innermost frame of the project's own code (under
    ``root``, outside installed packages), else the innermost frame outside torch and this
    plugin (library code that called the model, a thread's ``run``)."""
    own = other = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in _INTERNAL):
            other = Site(os.path.abspath(filename), tb.tb_lineno, tb.tb_frame.f_code.co_name)
            if _is_own(filename, root):
                own = other
        tb = tb.tb_next
    return own or other


def _is_own(filename: str, root: str | None) -> bool:
    path = os.path.abspath(filename)
    if any(part in path for part in _INSTALLED):
        return False
    return root is None or path.startswith(os.path.join(os.path.abspath(root), ""))


_INTERNAL = (
    os.sep + os.path.join("torch", ""),
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
)
# Installed packages and the standard library: never the project's own code.
_INSTALLED = (
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    os.path.dirname(os.__file__) + os.sep,
)


def warm_refusal(name: str, filename: str, lineno: int) -> str:
    """The one wording of a compile refused inside a warm block (the test's ``warm``
    violation), without the ``pytest-recompile:`` prefix."""
    return f"'{name}' ({location(filename, lineno)}) would have compiled inside a warm block"


def warm_message(name: str, filename: str, lineno: int, reasons: tuple[Reason, ...]) -> str:
    """A compile refused inside a warm block: the function, and each guard that failed with
    its kind and fix (none: a first compile)."""
    lines = [f"{PREFIX} {warm_refusal(name, filename, lineno)}"]
    for reason in reasons:
        lines.append(f"    {reason.entry or '?'} {reason.label}: {reason.text}")
    if not reasons:
        lines.append("    a first compile: warm the function up before the warm block")
    return "\n".join(lines + fix_lines([(r.label, r.hint) for r in reasons]))


def fixture_result(
    owner: Owner,
    records: list[FunctionRecord],
    graph_breaks: list[GraphBreak],
    processes: list[ProcessResult] | None = None,
) -> FixtureResult:
    """A wider fixture's compiles while it was set up, its child processes' included
    (JSON-ready: it travels on a report)."""
    children = processes or []
    return {
        "fixture": owner.describe(),
        "name": owner.name,
        "scope": owner.scope,
        "node": owner.location,
        "compiles": sum(r.compiles for r in records),
        "recompiles": sum(r.recompile_count for r in records)
        + sum(p["recompiles"] for p in children),
        "recompile_seconds": round(sum(r.recompile_seconds for r in records), 6),
        "compile_seconds": round(sum(r.compile_seconds for r in records), 6),
        "limit_hit": [r.qualname for r in records if r.limit],
        "functions": [r.to_dict() for r in records],
        "graph_breaks": [b.to_dict() for b in graph_breaks],
        "processes": children,
    }


JUNIT_NAMES = (
    "recompiles",
    "recompile_budget",
    "recompile_budget_source",
    "recompile_worst",
    "recompile_seconds",
    "recompile_processes",
)


def junit_properties(item: pytest.Item, data: TestSummary) -> list[tuple[str, object]]:
    """The item's user properties with this attempt's recompile figures (JUnit XML reads
    the teardown report's); earlier attempts' figures (reruns) are replaced."""
    item.user_properties[:] = [p for p in item.user_properties if p[0] not in JUNIT_NAMES]
    item.user_properties += [
        ("recompiles", data["recompiles"]),
        ("recompile_budget", "" if data["budget"] is None else data["budget"]),
        ("recompile_budget_source", data["budget_source"] or ""),
        ("recompile_worst", data["worst"] or ""),
        ("recompile_seconds", data["recompile_seconds"]),
    ]
    if data["processes"]:  # "rank 0 (pid 4241): 0; rank 1 (pid 4242): 1"
        children = [f"{who(p)}: {p['recompiles']}" for p in data["processes"]]
        item.user_properties.append(("recompile_processes", "; ".join(children)))
    return list(item.user_properties)


def outlived_lines(found: Iterable[OutlivedResult]) -> list[str]:
    """One summary line per thread starter and function: the compiles on a thread after the
    test that started it had ended, charged to no test."""
    counts: dict[tuple[str, str], int] = {}
    during: dict[tuple[str, str], list[str]] = {}
    for one in found:
        key = (one["started_by"], one["function"])
        counts[key] = counts.get(key, 0) + one["compiles"]
        ran = during.setdefault(key, [])
        if one["during"] not in ran:
            ran.append(one["during"])
    return [
        f"thread: {plural(n, 'compile')} of {fn} on a thread that {who} started, while "
        f"{_some(during[(who, fn)])} ran: charged to no test (the thread outlived the "
        "test or fixture that started it; join or stop it before that ends)"
        for (who, fn), n in counts.items()
    ]


def _some(names: list[str], shown: int = 2) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {plural(more, 'other')}" if more > 0 else "")
