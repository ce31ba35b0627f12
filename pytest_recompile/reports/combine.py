"""``pytest-recompile combine``: shards' JSON reports merged into the report one run of the
whole suite would have written, as ``coverage combine`` merges parallel data files (pure:
reports in, one :class:`RunResults` out).

The rules (docs/shards.md):

- every input is checked against the report schema, and all must come from one environment
  (torch, its build, Python, pytest, pytest-recompile, platform) and one set of gate options;
  the devices are the union of the shards';
- each test appears once. The same test in two inputs is kept once where its results are the
  same (timings and pids aside); else it must be a rerun: the earlier attempt (by the
  report's ``created`` time, then by the order given) failed or errored, and the later one is
  kept. Anything else is an error naming the test and both files;
- a wider fixture set up the same way in several shards (its module's, its class's, the
  session's) is kept once, as one run sets it up once; set up differently, each is kept;
- the summary, ``recompile_limit`` and durations are computed over all the shards' tests and
  fixtures, exactly as for one run; a shard that stopped early makes the result incomplete;
- the shards' collections (what each collected, ran and deselected) make one: shards that a
  plugin split (pytest-split) collected the same tests, and a test a plugin split off that no
  shard ran is lost, which makes the result incomplete, naming it. A test that ran in several
  shards is said (:func:`overlaps`).
"""

from __future__ import annotations

from typing import Any

from ..model.messages import plural
from ..model.results import CollectionResult, first_difference, without_timings
from ..model.run import RunResults
from .json_report import ReportError, created_now

# The environment's fields that must agree (devices are merged).
SAME_ENVIRONMENT = ("torch", "torch_build", "python", "pytest", "pytest_recompile", "platform")
FAILED = ("failed", "error")


class CombineError(ReportError):
    """Inputs that do not combine into one run's report: one line naming them."""


def combine(inputs: list[tuple[str, RunResults]]) -> RunResults:
    """The run that ``inputs`` (each a path and its report, as loaded) are shards of."""
    if not inputs:
        raise CombineError("no reports to combine")
    first_path, first = inputs[0]
    environment = first.environment
    settings = first.settings
    assert environment is not None
    assert settings is not None
    devices: set[str] = set()
    for path, run in inputs:
        assert run.environment is not None
        assert run.settings is not None
        for key in SAME_ENVIRONMENT:
            mine, theirs = run.environment.get(key), environment.get(key)
            if mine != theirs:
                raise CombineError(
                    f"{path} ran on {key} {mine}, {first_path} on {key} {theirs}: reports of "
                    "two environments are not shards of one run; combine each environment's "
                    "shards apart (and compare the combined reports)"
                )
        for key, value in run.settings.items():
            # The baseline's path differs from one checkout to another: not an option.
            if key != "baseline" and value != settings.get(key):
                raise CombineError(
                    f"{path} ran with the gate option {key}={value!r}, {first_path} with "
                    f"{key}={settings.get(key)!r}: shards of one run share its options"
                )
        devices.update(run.environment["devices"])
    # The earliest report first: a later attempt of a test replaces an earlier failed one.
    ordered = sorted(enumerate(inputs), key=lambda pair: (pair[1][1].created or "", pair[0]))
    tests: dict[str, tuple[str, Any]] = {}
    source: dict[str, str] = {}
    combined = RunResults(
        environment={**environment, "devices": sorted(devices)},
        settings=settings,
        created=max(run.created or "" for _, run in inputs) or created_now(),
    )
    incomplete: list[str] = []
    for index, (path, run) in ordered:
        for nodeid, (outcome, data) in run.tests.items():
            known = tests.get(nodeid)
            if known is not None and _same(known, (outcome, data)):
                continue  # the same results (timings aside): kept once
            if known is not None and known[0] not in FAILED:
                differs = first_difference(
                    {"outcome": known[0], **without_timings(known[1])},
                    {"outcome": outcome, **without_timings(data)},
                )
                raise CombineError(
                    f"test {nodeid} is in {source[nodeid]} and in {path} with other results "
                    f"({differs}, in that order): a test may be in two inputs only with the "
                    "same results, or as a rerun after a failed attempt"
                )
            tests[nodeid], source[nodeid] = (outcome, data), path  # first, or a rerun
        combined.add_fixtures(run.fixtures, f"{index}: {path}")
        combined.disabled.update(run.disabled)
        combined.faults += [fault for fault in run.faults if fault not in combined.faults]
        if run.incomplete is not None:
            incomplete.append(f"{path}: {run.incomplete}")
    combined.tests = {nodeid: tests[nodeid] for nodeid in sorted(tests)}
    combined.collection = collection(inputs)
    lost = combined.collection["split_off"] if combined.collection else []
    if lost:
        incomplete.append(f"{plural(len(lost), 'test')} collected ran in no shard ({named(lost)})")
    combined.incomplete = "; ".join(incomplete) or None
    return combined


def collection(inputs: list[tuple[str, RunResults]]) -> CollectionResult | None:
    """The shards' collections as one run's: every test any ran, those split off that none
    ran (lost), those pytest's own selection left out of every shard; None where an input
    did not record its collection. Shards of one split must have collected the same tests."""
    records = [(path, run.collection) for path, run in inputs]
    split: list[tuple[str, CollectionResult]] = [
        (path, found) for path, found in records if found is not None and found["split_off"]
    ]
    for path, found in split[1:]:
        first_path, first = split[0]
        mine, theirs = _collected(found), _collected(first)
        if mine != theirs:
            test, by, not_by = (
                (min(mine - theirs), path, first_path)
                if mine - theirs
                else (min(theirs - mine), first_path, path)
            )
            raise CombineError(
                f"{by} collected {test}, {not_by} did not: shards of one split collect the "
                "same tests (the same commit, paths and options); combine the shards of one "
                "split"
            )
    selected: set[str] = set()
    split_off: set[str] = set()
    excluded: set[str] = set()
    for _, record in records:
        if record is None:
            return None
        selected.update(record["selected"])
        split_off.update(record["split_off"])
        excluded.update(record["excluded"])
    return {
        "selected": sorted(selected),
        "split_off": sorted(split_off - selected),
        "excluded": sorted(excluded - selected - split_off),
    }


def overlaps(inputs: list[tuple[str, RunResults]]) -> list[str]:
    """The tests that more than one input ran (shards that overlap, or a rerun)."""
    seen: dict[str, int] = {}
    for _, run in inputs:
        for nodeid in run.collection["selected"] if run.collection else ():
            seen[nodeid] = seen.get(nodeid, 0) + 1
    return sorted(nodeid for nodeid, count in seen.items() if count > 1)


def named(nodeids: list[str], most: int = 3) -> str:
    """The first few node ids, and how many more."""
    more = len(nodeids) - most
    return ", ".join(nodeids[:most]) + (f" and {more} more" if more > 0 else "")


def _collected(found: CollectionResult) -> set[str]:
    return {*found["selected"], *found["split_off"], *found["excluded"]}


def _same(one: tuple[str, Any], other: tuple[str, Any]) -> bool:
    return one[0] == other[0] and without_timings(one[1]) == without_timings(other[1])
