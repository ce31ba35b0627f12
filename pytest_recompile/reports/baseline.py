"""The baseline file.

A baseline records, per test, the recompiles it makes today, so that a large suite can turn
the gate on without fixing everything first: a test may not go above its baseline, and a
test below it is reported so the file can be tightened. It also records, per
function, the guards of its largest cache entry and the guards on the user's Python values:
a function may not gain guards, and a new guard on a value (a constant baked in) fails the
test before it ever recompiles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .files import OutputFileError

if TYPE_CHECKING:  # read at every start-up (settings): the types cost nothing at run time
    from ..model.budget import GuardBaseline
    from ..model.results import BaselineDocument, BaselineTest, Environment, TestResult

BASELINE_SCHEMA = "pytest-recompile/baseline"
BASELINE_VERSION = 1
UPDATE_HINT = "write one with --recompile-baseline-update"


class BaselineError(OutputFileError):
    """A baseline file that is missing, unreadable or not a baseline."""


@dataclass(frozen=True)
class Baseline:
    """A baseline file, read: per test, its recompiles (those that made some) and its
    functions' guards."""

    counts: dict[str, int] = field(default_factory=dict)
    guards: dict[str, dict[str, GuardBaseline]] = field(default_factory=dict)
    torch: str | None = None  # the torch it was taken on (None: not recorded)


def read_baseline(path: str, where: str) -> Baseline:
    """The baseline at ``path``; raises BaselineError, never returns an empty stand-in."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise BaselineError(
            f"{where}: baseline file {path} does not exist; {UPDATE_HINT}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{where}: cannot read baseline file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{where}: baseline file {path} is not valid JSON ({exc}); restore it from version "
            f"control or {UPDATE_HINT}"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != BASELINE_SCHEMA
        or not isinstance(data.get("tests"), dict)
    ):
        raise BaselineError(
            f"{where}: {path} is not a pytest-recompile baseline (expected an object with "
            f'"schema": "{BASELINE_SCHEMA}" and "tests"); {UPDATE_HINT}'
        )
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(
            f"{where}: baseline {path} has version {data.get('version')!r}; this plugin reads "
            f"version {BASELINE_VERSION}; {UPDATE_HINT}"
        )
    environment = data.get("environment")
    torch = environment.get("torch") if isinstance(environment, dict) else None
    found = Baseline(torch=torch if isinstance(torch, str) else None)
    for nodeid, entry in data["tests"].items():
        count = entry.get("recompiles") if isinstance(entry, dict) else None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BaselineError(
                f"{where}: baseline {path}: test {nodeid!r} has no non-negative integer "
                f'"recompiles"; {UPDATE_HINT}'
            )
        if count:  # a test kept for its guards only: no budget
            found.counts[nodeid] = count
        guards = _guards(entry)
        if guards is None:
            raise BaselineError(
                f'{where}: baseline {path}: test {nodeid!r} has malformed "guards" or '
                '"values" (expected {"function": a non-negative integer} and '
                f'{{"function": ["KIND source", ...]}}); {UPDATE_HINT}'
            )
        if guards:
            found.guards[nodeid] = guards
    return found


def _guards(entry: dict[str, object]) -> dict[str, GuardBaseline] | None:
    """A test's functions' guards, or None where they are malformed."""
    counts, values = entry.get("guards", {}), entry.get("values", {})
    if not isinstance(counts, dict) or not isinstance(values, dict):
        return None
    found: dict[str, GuardBaseline] = {}
    for name, count in counts.items():
        kept = values.get(name, [])
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return None
        if not isinstance(kept, list) or not all(isinstance(v, str) for v in kept):
            return None
        found[name] = (count, frozenset(kept))
    return found


def baseline_document(
    results: Mapping[str, TestResult], environment: Environment
) -> BaselineDocument:
    """The baseline of a run: every gated test that recompiled, with its counts (a budget
    applies to each process: the count of the process that recompiled most, and each
    function's most in one process), and what the run ran on."""
    from ..model.results import functions_of, per_process

    tests: dict[str, BaselineTest] = {}
    for nodeid in sorted(results):
        data = results[nodeid]
        functions: dict[str, int] = {}
        guards: dict[str, int] = {}
        values: dict[str, set[str]] = {}
        for _, f in functions_of(data):
            name = f["qualname"]
            if f["recompiles"]:
                functions[name] = max(functions.get(name, 0), len(f["recompiles"]))
            for entry in f["entries"]:
                if entry["guards"] is not None:  # a tree's count, never torch's instead
                    guards[name] = max(guards.get(name, 0), entry["guards"])
                values.setdefault(name, set()).update(entry["values"])
        if per_process(data) or guards:
            tests[nodeid] = {
                "recompiles": per_process(data),
                "functions": functions,
                "guards": guards,
                "values": {name: sorted(found) for name, found in values.items()},
            }
    devices = sorted({data["device"] for data in results.values() if data["device"]})
    return {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_VERSION,
        "environment": {**environment, "devices": devices},
        "tests": tests,
    }
