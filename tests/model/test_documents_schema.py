"""The report's typed dicts (``pytest_recompile/model/results.py``) in step with
``report.schema.json``: each that mirrors a schema object has its keys, and the same keys
required, but for the exceptions named here."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from pytest_recompile.model import results
from pytest_recompile.reports.schema import SCHEMA_FILE

SCHEMA: dict[str, Any] = json.loads(Path(SCHEMA_FILE).read_text(encoding="utf-8"))

MIRRORS = {
    "ReportDocument": "#",
    "ReportedEnvironment": "#/properties/environment",
    "ReportSettings": "#/properties/settings",
    "ReportTotals": "#/properties/summary",
    "LimitResult": "#/properties/recompile_limit",
    "ReportedTest": "#/$defs/test",
    "CachesResult": "#/$defs/test/properties/caches",
    "SiteResult": "#/$defs/test/properties/stopped_at",
    "FixtureResult": "#/$defs/fixture",
    "FunctionResult": "#/$defs/function",
    "RecompileResult": "#/$defs/recompile",
    "ReasonResult": "#/$defs/reason",
    "GuardResult": "#/$defs/guard",
    "GraphBreakResult": "#/$defs/graph_break",
    "ProcessResult": "#/$defs/process",
    "EntryGuardsResult": "#/$defs/entry_guards",
    "LimitNeed": "#/$defs/limit_need",
    "CacheOutcomes": "#/$defs/cache",
    "ViolationResult": "#/$defs/violation",
    "SourceLineResult": "#/$defs/source_line",
    "CollectionResult": "#/$defs/collection",
    "CertificateResult": "#/$defs/certificate",
    "CertificateGroupResult": "#/$defs/certificate_group",
    "WarmStartResult": "#/$defs/warm_start",
    "WarmRunResult": "#/$defs/warm_run",
    "WorkResult": "#/$defs/work",
    "CompileWorkResult": "#/$defs/compile_work",
    "FunctionWorkResult": "#/$defs/function_work",
}
"""Each typed dict of a report document, and the schema object it mirrors."""

# Known exceptions, as of issue 57: keys the writer always writes (so its typed dict requires
# them) that the schema leaves optional, so that a reader still takes a report of an older
# pytest-recompile, written before the key was. A key gone from here once the two agree.
WRITTEN_ALWAYS_READ_OPTIONAL = {
    "ReportDocument": {"collection"},
    "ReportedEnvironment": {"torch_build", "compile_disabled"},
    "ReportSettings": {"if_disabled"},
}


def node(pointer: str) -> dict[str, Any]:
    """The schema object at ``pointer`` (``#/$defs/test``)."""
    found: Any = SCHEMA
    for part in pointer.removeprefix("#").strip("/").split("/") if pointer != "#" else ():
        found = found[part]
    assert isinstance(found, dict)
    return found


def test_every_definition_is_mirrored() -> None:
    """A new ``$defs`` entry gets a typed dict here (or an entry in :data:`MIRRORS`)."""
    mirrored = {pointer.split("/")[2] for pointer in MIRRORS.values() if "$defs" in pointer}
    assert mirrored == set(SCHEMA["$defs"])


@pytest.mark.parametrize(("name", "pointer"), MIRRORS.items())
def test_a_typed_dict_has_its_schema_objects_keys(name: str, pointer: str) -> None:
    """The typed dict's keys are the schema object's properties, and the keys it requires
    (``__required_keys__``: the optional ones come from a ``total=False`` base) are the
    schema's ``required``, less the known exceptions."""
    typed = getattr(results, name)
    schema = node(pointer)
    assert set(typing.get_type_hints(typed)) == set(schema["properties"])
    exceptions = WRITTEN_ALWAYS_READ_OPTIONAL.get(name, set())
    assert set(typed.__required_keys__) - exceptions == set(schema.get("required", ()))
    assert exceptions <= typed.__required_keys__ - set(schema.get("required", ()))
