"""The JSON report (``--recompile-report``; its schema: report.schema.json): a run's results
written as a document, and read back into the same :class:`RunResults` (``combine``,
``compare`` and ``report`` read nothing else)."""

from __future__ import annotations

import json
from typing import Any, cast

from ..model.errors import InputError
from ..model.names import relative
from ..model.results import (
    ReportDocument,
    ReportedTest,
    ReportEnvironment,
    ReportSettings,
    TestResult,
)
from ..model.run import Attempt, RunResults
from .recompile_limit import limit_need
from .schema import SCHEMA_FILE, misfit

__all__ = ["SCHEMA_FILE", "ReportError", "load_report", "report_document"]

REPORT_SCHEMA = "pytest-recompile/report"


REPORT_VERSION = 1


def report_document(run: RunResults, root: str | None = None) -> ReportDocument:
    """The JSON report of ``run`` (see report.schema.json), which :func:`load_report` reads
    back into a :class:`RunResults`; ``root``: the rootdir. Every file is written as
    :func:`.names.relative` shows it, so that reports of two checkout paths (CI agents,
    shards) name each function alike."""
    tests: list[ReportedTest] = [
        {"nodeid": nodeid, "outcome": run.tests[nodeid].outcome, **run.tests[nodeid].result}
        for nodeid in sorted(run.tests)
    ]
    tests = portable_files(tests, root)
    fixtures = portable_files(run.fixtures, root)
    devices = sorted({t["device"] for t in tests if t["device"]} | set(run.environment["devices"]))
    incomplete = run.incomplete
    return {
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "created": run.created,
        "complete": incomplete is None,
        "incomplete": incomplete,
        "environment": {
            **run.environment,
            "devices": devices,
            "compile_disabled": list(run.disabled),
        },
        "settings": run.settings,
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
        "fixtures": sorted(fixtures, key=lambda f: (f["node"], f["name"])),
        "faults": list(run.faults),
        "recompile_limit": portable_files(limit_need(run), root),
        "collection": run.collection,
    }


def portable_files(value: Any, root: str | None) -> Any:
    """``value`` with every ``file`` in it (a function's, a graph break's, a guard's source
    line, where fail-fast stopped) as :func:`.names.relative` shows it."""
    if isinstance(value, list):
        return [portable_files(item, root) for item in value]
    if not isinstance(value, dict):
        return value
    found = {key: portable_files(item, root) for key, item in value.items()}
    if isinstance(found.get("file"), str):
        found["file"] = relative(found["file"], root)
    return found


def created_now() -> str:
    """A report's ``created``: now, UTC, ISO 8601 to the second."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ReportError(InputError):
    """A file that is not a report this plugin can read: one line that says which and why."""


def read_document(path: str) -> dict[str, Any]:
    """The JSON object at ``path``, whatever it holds; raises ReportError."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: a directory, not a report file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read it: {exc}") from None
    if not text.strip():
        raise ReportError(f"{path}: empty file, not a report (was its run cut short?)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = " (truncated?)" if exc.pos >= len(text.rstrip()) else ""
        raise ReportError(f"{path}: not valid JSON{cut}: {exc}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: {NOT_A_REPORT}")
    return data


NOT_A_REPORT = (
    f'not a pytest-recompile report (expected a JSON object with "schema": "{REPORT_SCHEMA}", '
    "as --recompile-report=PATH writes)"
)


def load_report(path: str) -> RunResults:
    """The JSON report at ``path``, read back into the results model; raises ReportError
    naming the file and the first field that does not fit the schema."""
    data = read_document(path)
    if data.get("schema") != REPORT_SCHEMA:
        raise ReportError(f"{path}: {NOT_A_REPORT}")
    version = data.get("version")
    if version != REPORT_VERSION:
        newer = isinstance(version, int) and version > REPORT_VERSION
        raise ReportError(
            f"{path}: report schema version {version!r}"
            + (" (a newer pytest-recompile wrote it)" if newer else "")
            + f"; this pytest-recompile reads version {REPORT_VERSION}"
        )
    found = misfit(data)
    if found is not None:
        raise ReportError(f"{path}: does not fit the report schema: {found}")
    return from_document(data)  # type: ignore[arg-type]  # checked against the schema above


def from_document(document: ReportDocument) -> RunResults:
    """A report (checked against its schema) as the results model."""
    tests: dict[str, Attempt] = {}
    for test in document["tests"]:
        data = dict(test)
        nodeid, outcome = data.pop("nodeid"), data.pop("outcome")
        tests[str(nodeid)] = Attempt(str(outcome), cast("TestResult", data))
    incomplete = document["incomplete"]
    if incomplete is None and not document["complete"]:
        incomplete = "the report says it is incomplete"
    reported = document["environment"]
    environment = cast(
        "ReportEnvironment", {k: v for k, v in reported.items() if k != "compile_disabled"}
    )
    # A field the schema added later: what a report without it meant.
    settings: ReportSettings = {"if_disabled": "fail", **document["settings"]}
    return RunResults(
        tests=tests,
        fixtures=list(document["fixtures"]),
        faults=list(document["faults"]),
        incomplete=incomplete,
        environment=environment,
        settings=settings,
        disabled=dict.fromkeys(reported.get("compile_disabled") or ()),
        created=document["created"],
        collection=document.get("collection"),  # a report written before it was recorded
    )
