"""The JSON report document (``--recompile-report``; its schema: report.schema.json)."""

from __future__ import annotations

import os
from typing import Any

from ..model.names import relative
from ..model.results import (
    Environment,
    FixtureResult,
    LimitResult,
    ReportDocument,
    ReportedTest,
    ReportSettings,
    TestResult,
)
from .recompile_limit import limit_need

REPORT_SCHEMA = "pytest-recompile/report"


REPORT_VERSION = 1


SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")


def report_document(
    results: list[tuple[str, str, TestResult]],
    environment: Environment,
    settings: ReportSettings,
    created: str,
    fixtures: list[FixtureResult] | None = None,
    incomplete: str | None = None,
    faults: list[str] | None = None,
    need: LimitResult | None = None,
    root: str | None = None,
) -> ReportDocument:
    """The JSON report (see report.schema.json): ``results`` are (nodeid, outcome, data);
    ``incomplete``: why the run stopped early, if it did; ``root``: the rootdir, which the
    files of guard sites are written relative to (when under it)."""
    tests: list[ReportedTest] = [
        {"nodeid": nodeid, "outcome": outcome, **data}
        for nodeid, outcome, data in sorted(results, key=lambda r: r[0])
    ]
    if root is not None:
        tests = relative_sites(tests, root)
        fixtures = relative_sites(fixtures or [], root)
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
            "first_compile_seconds": round(sum(t["first_compile_seconds"] for t in tests), 6),
            "again_seconds": round(sum(t["again_seconds"] for t in tests), 6),
            "reused": sum(t["reused"] for t in tests),
            "saved_seconds": round(sum(t["saved_seconds"] for t in tests), 6),
            "graph_breaks": sum(len(t["graph_breaks"]) for t in tests),
            "cudagraph_rerecords": sum(t["cudagraph_rerecords"] for t in tests),
        },
        "tests": tests,
        "fixtures": sorted(fixtures or [], key=lambda f: (f["node"], f["name"])),
        "faults": list(faults or []),
        "recompile_limit": need
        if need is not None
        else limit_need([(t["nodeid"], t) for t in tests], fixtures or []),
    }


def relative_sites(value: Any, root: str) -> Any:
    """``value`` with the file of each guard's source line (a reason's ``site`` and
    ``own_site``) relative to ``root`` when under it: a report compares across checkouts."""
    if isinstance(value, list):
        return [relative_sites(item, root) for item in value]
    if not isinstance(value, dict):
        return value
    found = {key: relative_sites(item, root) for key, item in value.items()}
    for key in ("site", "own_site"):
        site = found.get(key)
        if isinstance(site, dict) and "raw" in found and isinstance(site.get("file"), str):
            found[key] = {**site, "file": relative(site["file"], root)}
    return found
