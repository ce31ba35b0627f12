"""Which ``recompile_limit`` a run needs, measured: per function, the most cache entries it
held in any test, wider fixture or child process, and the limit that holds them all with
headroom (pure).

torch's ``recompile_limit`` (8) caps the entries of one code object; past it, the function
runs eagerly. Teams guess it (256 "to be safe"); the run's own figures say what it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..model.names import HEADROOM
from ..model.results import (
    FixtureResult,
    FunctionResult,
    LimitNeed,
    LimitResult,
    TestResult,
    functions_of,
)
from ..model.run import RunResults
from ..model.text import location


class Held(NamedTuple):
    """Where a function held its entries: a test's node id, a fixture, a child process."""

    where: str
    fn: FunctionResult


def _held(
    results: Iterable[tuple[str, TestResult]], fixtures: Iterable[FixtureResult]
) -> Iterator[Held]:
    for nodeid, data in results:
        for process, fn in functions_of(data):
            yield Held(f"{nodeid} (pid {process['pid']})" if process else nodeid, fn)
    for fixture in fixtures:
        yield from (
            Held(f"{fixture['node']}: {fixture['fixture']}", fn) for fn in fixture["functions"]
        )


def limit_need(run: RunResults) -> LimitResult:
    """Per function (most entries first), the most entries it held and where; the limit
    that holds the run with :data:`HEADROOM`; the functions that hit the limit (whose need
    is above it and unknown)."""
    most: dict[tuple[str, str, int], LimitNeed] = {}
    hit: list[str] = []
    partial = False
    for where, fn in _held(run.results(), run.fixtures):
        partial = partial or any(r["stopped"] for r in fn["recompiles"])
        key = (fn["qualname"], fn["file"], fn["line"])
        if fn["recompile_limit"] and fn["qualname"] not in hit:
            hit.append(fn["qualname"])
        known = most.get(key)
        if known is None or fn["code_entries"] > known["most_entries"]:
            most[key] = {
                "qualname": fn["qualname"],
                "file": fn["file"],
                "line": fn["line"],
                "most_entries": fn["code_entries"],  # per code object, as the limit counts
                "where": where,
            }
    functions = sorted(most.values(), key=lambda n: (-n["most_entries"], n["qualname"]))
    top = functions[0]["most_entries"] if functions else 0
    return {
        "suggested": max(1, HEADROOM * top),
        "functions": functions,
        "hit": sorted(hit),
        "partial": partial,
    }


LIMIT_UNMEASURED = (
    "recompile_limit: not measured: the compiled functions' cache entries were gone when read "
    "(torch's caches were reset during the tests, as torch._dynamo.reset() and "
    "torch._dynamo.explain() do)"
)


def limit_line(need: LimitResult, root: str | None = None) -> str | None:
    """The summary's last line: the most entries one function held, and the limit that
    holds the run; None when nothing was compiled."""
    if not need["functions"]:
        return None
    top = need["functions"][0]
    if top["most_entries"] == 0:
        return LIMIT_UNMEASURED
    at = location(top["file"], top["line"], root)
    entries = "cache entry" if top["most_entries"] == 1 else "cache entries"
    line = (
        f"recompile_limit: one function held at most {top['most_entries']} {entries}"
        f" ({top['qualname']} {at}, in {top['where']}); recompile_limit = {need['suggested']} "
        f"holds this run with {HEADROOM}x headroom (torch's default is 8)"
    )
    if need["partial"]:
        line += (
            "; fail-fast stopped recompiles before they made entries: measure with "
            "--recompile-mode=report-only"
        )
    if need["hit"]:
        whose = "its" if len(need["hit"]) == 1 else "their"
        line += (
            f"; {', '.join(need['hit'])} hit the limit, so {whose} need is unknown: "
            "fix the recompiles first"
        )
    return line
