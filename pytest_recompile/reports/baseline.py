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
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..model.names import PREFIX
from .files import OutputFileError, check_writable

if TYPE_CHECKING:  # the types cost nothing at run time
    from ..model.budget import GuardBaseline, Rule
    from ..model.results import BaselineDocument, BaselineTest
    from ..model.run import RunResults

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
    work: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # compile work
    torch: str | None = None  # the torch it was taken on (None: not recorded)


def read_baseline(path: str, where: str) -> Baseline:
    """The baseline at ``path``; raises BaselineError, never returns an empty stand-in."""
    data, guards = _checked(path, where)
    torch = data["environment"].get("torch")
    found = Baseline(guards=guards, torch=torch if isinstance(torch, str) else None)
    for nodeid, entry in data["tests"].items():
        if entry["recompiles"]:  # a test kept for its guards only: no budget
            found.counts[nodeid] = entry["recompiles"]
        work = entry.get("work")
        if work:
            found.work[nodeid] = {name: dict(figures) for name, figures in work.items()}
    return found


def read_baseline_document(path: str, where: str) -> BaselineDocument:
    """The baseline file at ``path`` as it is, checked; raises BaselineError."""
    return _checked(path, where)[0]


def _checked(path: str, where: str) -> tuple[BaselineDocument, dict[str, dict[str, GuardBaseline]]]:
    """The baseline file at ``path``, checked, and each test's functions' guards (those
    that have some), parsed once while checking; raises BaselineError."""
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
    parsed: dict[str, dict[str, GuardBaseline]] = {}
    for nodeid, entry in data["tests"].items():
        count = entry.get("recompiles") if isinstance(entry, dict) else None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BaselineError(
                f"{where}: baseline {path}: test {nodeid!r} has no non-negative integer "
                f'"recompiles"; {UPDATE_HINT}'
            )
        guards = _guards(entry)
        if guards is None:
            raise BaselineError(
                f'{where}: baseline {path}: test {nodeid!r} has malformed "guards" or '
                '"values" (expected {"function": a non-negative integer} and '
                f'{{"function": ["KIND source", ...]}}); {UPDATE_HINT}'
            )
        if guards:
            parsed[nodeid] = guards
        if not _work_ok(entry.get("work", {})):
            raise BaselineError(
                f'{where}: baseline {path}: test {nodeid!r} has malformed "work" (expected '
                '{"function": {"graphs": n, "ops": n, ...}} with non-negative integers); '
                f"{UPDATE_HINT}"
            )
    if not isinstance(data.get("environment"), dict):
        data["environment"] = {}
    return cast("BaselineDocument", data), parsed


def _work_ok(work: object) -> bool:
    """A test's compile work, as the baseline keeps it: function -> measure -> count."""
    from ..model.budget import RATCHETED

    if not isinstance(work, dict):
        return False
    return all(
        isinstance(figures, dict)
        and all(
            m in RATCHETED and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for m, v in figures.items()
        )
        for figures in work.values()
    )


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


Named = tuple[str | None, str]  # a path from an option, and the option it came from


def file_settings(
    report: Named,
    report_md: Named,
    baseline: Named,
    update: bool,
    prune: bool,
    default: Rule[int] | None,
) -> dict[str, Any]:
    """The run's settings for the files it writes and reads, checked: each output writable,
    the baseline read (or, with ``update``, writable, and readable where it exists, since
    its other tests' entries are kept). Raises OutputFileError (BaselineError)."""
    for path, where in (report, report_md):
        if path is not None:
            check_writable(path, f"{PREFIX} {where}")
    path, where = baseline
    found: dict[str, Any] = {"report": report[0], "report_md": report_md[0], "baseline": path}
    if not update:
        if path is None:
            return found
        read = read_baseline(path, f"{PREFIX} {where}")
        note = _other_torch(read.torch)
        return {**found, "baseline_counts": read.counts, "baseline_guards": read.guards,
                "baseline_work": read.work, "baseline_note": note}  # fmt: skip
    if path is None:
        raise BaselineError(
            f"{PREFIX} --recompile-baseline-update needs --recompile-baseline=PATH "
            "(or the ini option recompile_baseline): where to write the baseline"
        )
    check_writable(path, f"{PREFIX} {where}")
    if os.path.exists(path):  # its other tests' entries are kept: it must read
        read_baseline_document(path, f"{PREFIX} {where}")
    # Record every test's full count and fail none.
    from ..model.budget import Rule

    default = default or Rule(0, "--recompile-baseline-update")
    return {**found, "mode": "report-only", "default": default, "baseline_update": True,
            "baseline_prune": prune}  # fmt: skip


def _other_torch(recorded: str | None) -> str | None:
    """``baseline from torch A; this run B`` where the baseline was taken on another torch
    than this run's: a failure it causes may be torch's change, not the code's."""
    from .._torch.versions import torch_version

    running = torch_version()
    if recorded is None or running is None or recorded == running:
        return None
    return f"baseline from torch {recorded}; this run {running}"


def baseline_tests(run: RunResults) -> dict[str, BaselineTest]:
    """The baseline entries of a run: every gated test that recompiled or read guards, with
    its counts (a budget applies to each process: the count of the process that recompiled
    most, and each function's most in one process)."""
    from ..model.results import functions_of, per_process
    from ..model.work import ratchet_figures

    tests: dict[str, BaselineTest] = {}
    for nodeid, data in run.results():
        functions: dict[str, int] = {}
        guards: dict[str, int] = {}
        values: dict[str, set[str]] = {}
        work: dict[str, dict[str, int]] = {}
        for process, f in functions_of(data):
            figures = ratchet_figures(f["work"]) if "work" in f and process is None else {}
            if figures.get("graphs"):  # the test's own process: children are theirs
                kept = work.setdefault(f["qualname"], {})
                for measure, count in figures.items():
                    kept[measure] = max(kept.get(measure, 0), count)
            name = f["qualname"]
            if f["recompiles"]:
                functions[name] = max(functions.get(name, 0), len(f["recompiles"]))
            for entry in f["entries"]:
                if entry["guards"] is not None:  # a tree's count, never torch's instead
                    guards[name] = max(guards.get(name, 0), entry["guards"])
                values.setdefault(name, set()).update(entry["values"])
        if per_process(data) or guards or work:
            tests[nodeid] = {
                "recompiles": per_process(data),
                "functions": functions,
                "guards": guards,
                "values": {name: sorted(found) for name, found in values.items()},
            }
            if work:
                tests[nodeid]["work"] = work
    return tests


def baseline_document(run: RunResults) -> BaselineDocument:
    """The baseline of a run alone: its entries, and what it ran on."""
    return update_baseline(None, run).document


@dataclass(frozen=True)
class BaselineUpdate:
    """A baseline updated from a run: the new document, and what changed in it."""

    document: BaselineDocument
    added: int = 0  # tests that ran and have an entry for the first time
    replaced: int = 0  # tests that ran and had an entry: it is this run's now
    removed: int = 0  # tests that ran and no longer compile anything the baseline records
    kept: int = 0  # entries of tests that did not run, kept as they were
    pruned: int = 0  # entries of tests that did not run, dropped (prune)
    kept_torch: str | None = None  # the torch the kept entries were taken on, where another

    def line(self, path: str) -> str:
        """``baseline written to b.json: 1 added, 1 replaced, 0 removed; kept 3 entries of
        tests that did not run (...)``"""
        from ..model.text import plural

        said = (
            f"baseline written to {path}: {self.added} added, {self.replaced} replaced, "
            f"{self.removed} removed"
        )
        if self.pruned:
            said += f"; pruned {plural(self.pruned, 'entry', 'entries')} of tests that did not run"
        if self.kept:
            said += (
                f"; kept {plural(self.kept, 'entry', 'entries')} of tests that did not run "
                f"({PRUNE_HINT})"
            )
        if self.kept_torch:
            said += f"; the kept entries were taken on torch {self.kept_torch}"
        return said


PRUNE_HINT = "an update with --recompile-baseline-prune drops those of deleted tests"


def update_baseline(
    old: BaselineDocument | None, run: RunResults, *, prune: bool = False
) -> BaselineUpdate:
    """``old`` updated from ``run``: the entries of the tests that ran are replaced by theirs
    (a test that ran and recorded nothing loses its entry); every other entry is kept as it
    was, or, with ``prune``, dropped (a shard cannot tell a deleted test from another
    shard's: pruning is asked for by a run of the whole suite)."""
    new, ran = baseline_tests(run), run.ran()
    before = dict(old["tests"]) if old is not None else {}
    kept = {n: e for n, e in before.items() if n not in ran}
    tests = {} if prune else dict(kept)
    tests.update(new)
    devices = {t["device"] for _, t in run.results() if t["device"]}
    old_env: dict[str, Any] = dict(old["environment"]) if old is not None else {}
    if kept and not prune:
        devices.update(d for d in old_env.get("devices") or () if isinstance(d, str))
    torch = old_env.get("torch")
    other = torch if kept and not prune and torch != run.environment["torch"] else None
    return BaselineUpdate(
        {
            "schema": BASELINE_SCHEMA,
            "version": BASELINE_VERSION,
            "environment": {**run.environment, "devices": sorted(devices)},
            "tests": {nodeid: tests[nodeid] for nodeid in sorted(tests)},
        },
        added=sum(1 for n in new if n not in before),
        replaced=sum(1 for n in new if n in before),
        removed=sum(1 for n in before if n in ran and n not in new),
        kept=0 if prune else len(kept),
        pruned=len(kept) if prune else 0,
        kept_torch=str(other) if other else None,
    )


def unabsorbed(run: RunResults) -> list[str]:
    """What the gate run after a baseline update would still fail: every broken rule but a
    total over the default budget or an old baseline (the one thing a baseline raises).
    Empty: it will pass."""
    from ..model.text import plural

    broken = [
        f"  {nodeid}: {v['message']}"
        for nodeid, data in run.results()
        for v in data["violations"]
        if not (v["kind"] == "total" and not v["source"].startswith("@"))
    ]
    if not broken:
        return []
    return [
        f"{PREFIX} {plural(len(broken), 'broken rule')} no baseline can absorb (recompile_limit "
        "hits, markers' own budgets and guard rules): the next gate run fails on them. Fix "
        "them, or relax those tests' markers, then update again:",
        *broken,
    ]
