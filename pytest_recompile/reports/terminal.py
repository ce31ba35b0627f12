"""The session's terminal lines: tests that broke the gate or beat their baseline, wider
fixtures and threads that compiled for no test, children, totals and what isolation cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..model.messages import EAGER_FALLBACK, first_guard, notes, work_text
from ..model.names import BETWEEN, PREFIX
from ..model.results import (
    FixtureResult,
    OutlivedResult,
    TestResult,
    below_baseline,
    child_recompiles,
    functions_of,
    per_process,
)
from ..model.run import RunResults
from ..model.text import plural, seconds_text
from ..model.warm_start import worded
from ..model.work import added
from .recompile_limit import limit_line, limit_need

if TYPE_CHECKING:
    from ..model.budget import Rule

ISOLATION_HINT = (
    "warm shared compiled models once in a module- or session-scoped fixture: what it "
    "compiles while set up is kept for its tests"
)


RESET_FALLBACK = (
    "this torch cannot keep single cache entries, so compile caches were reset before each "
    "test's own phases: wider fixtures' warm-ups were not kept"
)


def isolation_lines(tests: list[TestResult], *, verbose: bool = False) -> list[str]:
    """What isolation cost (what was compiled again, and why); with ``verbose``, also the
    first compiles answered by an earlier test's identical entry (plain pytest would not have
    compiled them twice either: no saving to report by default)."""
    lines = []
    reused = sum(data["reused"] for data in tests)
    if reused and verbose:
        lines.append(
            f"isolation: {plural(reused, 'first compile')} answered by the identical entry of "
            "an earlier test, as in one plain process"
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
        f"{fn['qualname']} ({guard})"
        for fn in fixture["functions"]
        if fn["recompiles"] and (guard := first_guard(fn)) is not None
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


def terminal_lines(run: RunResults, *, verbose: bool = False) -> list[str]:
    """Lines for the terminal summary: each test that broke the gate or beat its baseline,
    wider fixtures that recompiled while set up, then the totals and the recompile_limit the
    run needs. Sorted by node id, so serial and pytest-xdist runs print the same; in
    report-only mode tests "would have broken" the gate."""
    results = run.results()
    lines = []
    failing = [(nodeid, data) for nodeid, data in results if data["violations"]]
    for nodeid, data in failing:
        seconds = data["recompile_seconds"]
        cost = f"; recompiles cost {seconds_text(seconds)}" if seconds >= 0.005 else ""
        messages = "; ".join(v["message"] for v in data["violations"])
        lines.append(f"{nodeid}: {messages}{cost}")
    better = [(nodeid, data) for nodeid, data in results if below_baseline(data)]
    for nodeid, data in better:
        lines.append(
            f"{nodeid}: {plural(per_process(data), 'recompile')}, below its baseline of "
            f"{data['baseline']}: tighten it with --recompile-baseline-update"
        )
    recompiled = [f for f in run.fixtures if f["recompiles"]]
    lines += sorted(fixture_line(f) for f in recompiled)
    lines += process_lines(results)
    lines.append(totals_line(run))
    lines += work_lines(results, run.environment.get("torch"), verbose=verbose)
    lines += warm_start_lines(results)
    lines += isolation_lines([data for _, data in results], verbose=verbose)
    if any(data["isolation"] == "reset" for _, data in results):
        lines.append(f"isolation: {RESET_FALLBACK}")
    line = limit_line(limit_need(run))
    return lines + ([line] if line is not None else [])


def work_lines(
    results: list[tuple[str, TestResult]], torch: str | None, *, verbose: bool = False
) -> list[str]:
    """The run's compile work, summed, where it matters: a test broke a compile-work rule
    (its own line names the function and the count), or ``-v``."""
    broke = any(v["kind"] == "work" for _, data in results for v in data["violations"])
    found = [data["work"] for _, data in results if data.get("work")]
    if not found or not (broke or verbose):
        return []
    total = added(w for w in found if w is not None)
    assert total is not None
    return [
        f"compile work: {work_text(total, torch)} in {plural(len(found), 'gated test')} "
        "(counted, not timed: docs/compile-work.md)"
    ]


def warm_start_lines(results: list[tuple[str, TestResult]]) -> list[str]:
    """Each checked ``warm_start`` test's two runs (what a restart pays, and what the warm
    run asked of the caches), then the checks' total; tests not checked, counted."""
    checked = [(n, d["warm_start"]) for n, d in results if "warm_start" in d]
    if not checked:
        return []
    lines = []
    spent = 0.0
    off = [n for n, w in checked if w["status"] == "skipped" and w["cold"] is None]
    skipped = [n for n, w in checked if w["status"] == "skipped"]
    for nodeid, warm in checked:
        if warm["status"] == "skipped":
            if warm["cold"] is not None:  # a child skipped, or the capture failed there
                lines.append(f"warm start: {nodeid}: {warm['message']}")
            continue
        spent += sum(r["seconds"] for r in (warm["cold"], warm["warm"]) if r is not None)
        said = {"passed": "every lookup hit", "failed": "compiled again", "error": "no verdict"}
        verdict = said[warm["status"]]
        if warm["status"] == "passed" and warm["hits"] < warm["lookups"]:
            verdict = f"bypasses allowed by {warm['source']}"
        lines.append(f"warm start: {nodeid}: {worded(warm)} ({verdict})")
    ran = len(checked) - len(skipped)
    if ran:
        passed = sum(1 for _, w in checked if w["status"] == "passed")
        lines.append(
            f"warm start: {plural(ran, 'test')} run cold, then warm, in fresh processes: "
            f"{passed} warm, {ran - passed} not; the child processes took {seconds_text(spent)}"
        )
    if off:
        lines.append(
            f"warm start: {plural(len(off), 'marked test')} not checked "
            "(--recompile-warm-start=off)"
        )
    return lines


COMPILE_OFF = (
    "torch.compile was switched off ({how}): the gated tests ran eagerly, so their counts "
    "measure nothing"
)
COMPILE_OFF_FAILS = (
    "the run fails: unset it, or pass --recompile-if-disabled=warn where an eager run is meant"
)
COMPILE_OFF_WARNS = "--recompile-if-disabled=warn: the run's status is its tests'"


def switched_off_line(run: RunResults) -> tuple[str, bool] | None:
    """The summary's line where compile was switched off, and whether it fails the run."""
    how = list(run.disabled)
    if not how:
        return None
    said = COMPILE_OFF.format(how="; ".join(how))
    if run.fails_switched_off:
        return f"{PREFIX} {said}; {COMPILE_OFF_FAILS}", True
    return f"{said}; {COMPILE_OFF_WARNS}", False


def switched_off_header(how: str) -> str:
    return f"recompile gate: torch.compile is switched off ({how}): gated tests run eagerly"


def run_lines(run: RunResults, *, verbose: bool = False) -> list[tuple[str, bool]]:
    """The summary of a run as ``pytest-recompile report`` prints it from a JSON report (one
    run's or combined shards'): the lines the session prints from the same results, each
    with whether it is an error line."""
    off = switched_off_line(run)
    first = [off] if off is not None and off[1] else []
    plain = terminal_lines(run, verbose=verbose)
    if run.incomplete is not None:
        plain.append(f"{INCOMPLETE}: {run.incomplete}")
    if off is not None and not off[1]:
        plain.append(off[0])
    red = fixture_limit_lines(run.fixtures) + [f"{FAULT}: {fault}" for fault in run.faults]
    return first + [(line, False) for line in plain] + [(line, True) for line in red]


def process_lines(results: list[tuple[str, TestResult]]) -> list[str]:
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


def totals_line(run: RunResults) -> str:
    """``12 gated tests, 9 recompiles; 2 broke the gate, 0 hit recompile_limit; ...``"""
    results, enforced = run.figures(), run.enforced
    total = sum(data["recompiles"] + child_recompiles(data) for data in results)
    failing = sum(1 for data in results if data["violations"])
    limit = sum(1 for data in results if data["limit_hit"])
    paid = sum(data["recompile_seconds"] for data in results)
    compiled = any(fn for data in results for _, fn in functions_of(data)) or any(
        f["functions"] for f in run.fixtures
    )
    nothing = f"; {NOTHING_COMPILED}" if results and not (compiled or total) else ""
    return (
        f"{plural(len(results), 'gated test')}, {plural(total, 'recompile')}; "
        f"{failing} {'broke' if enforced else 'would have broken'} the gate, "
        f"{limit} hit recompile_limit; recompiles cost {seconds_text(paid)}{nothing}"
    )


NOTHING_COMPILED = "no gated test compiled anything"


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
        f"thread: {plural(n, 'compile')} of {fn} on a thread that {who} started, "
        f"{_when(during[(who, fn)])}: charged to no test (the thread outlived the test or "
        "fixture that started it; join or stop it before that ends)"
        for (who, fn), n in counts.items()
    ]


def _when(during: list[str]) -> str:
    """``while test_b ran``, ``between tests``, or both."""
    tests = [d for d in during if d != BETWEEN]
    said = [f"while {_some(tests)} ran"] if tests else []
    return " and ".join(said + (["between tests"] if len(tests) < len(during) else []))


def _some(names: list[str], shown: int = 2) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {plural(more, 'other')}" if more > 0 else "")


def gate_header(
    default: Rule[int] | None,
    max_guards: Rule[int] | None,
    mode: str,
    keep_caches: bool,
    fullgraph: bool,
    processes: bool,
) -> str:
    """The session header's line: what the gate applies to this run."""
    caches = (
        "kept across tests"
        if keep_caches
        else "isolated (each test starts from its wider fixtures' entries)"
    )
    whole = ", fullgraph" if fullgraph else ""
    whole += "" if processes else ", child processes not gated"
    budget = f"{default.value} ({default.source})" if default else "none"
    if max_guards is not None:
        budget += f", at most {max_guards.value} guards per entry"
    return (
        f"recompile gate: active, default budget {budget}, mode {mode}, "
        f"compile caches {caches}{whole}"
    )
