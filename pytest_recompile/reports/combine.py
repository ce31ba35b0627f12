"""``pytest-recompile combine``: shards' JSON reports merged into the report one run of the
whole suite would have written, as ``coverage combine`` merges parallel data files (pure:
reports in, one :class:`RunResults` out). This module finds what must agree across the inputs
and the order they fold in; the folding rules are the model's (:meth:`RunResults.update`, the
same that fold an xdist run's workers).

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

from ..model.results import ENVIRONMENT_FIELDS, CollectionResult
from ..model.run import RunResults
from ..model.text import plural
from .json_report import ReportError, created_now


class CombineError(ReportError):
    """Inputs that do not combine into one run's report: one line naming them."""


def combine(inputs: list[tuple[str, RunResults]]) -> RunResults:
    """The run that ``inputs`` (each a path and its report, as loaded) are shards of: checked
    across inputs here, folded by :meth:`RunResults.update` (the rules of a test, a fixture
    or a fault in two inputs), the earliest report first."""
    if not inputs:
        raise CombineError("no reports to combine")
    first_path, first = inputs[0]
    environment = first.environment
    settings = first.settings
    devices: set[str] = set()
    for path, run in inputs:
        for key in ENVIRONMENT_FIELDS:  # the devices are merged
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
    combined = RunResults(
        environment={**environment, "devices": sorted(devices)},
        settings=settings,
        created=max(run.created for _, run in inputs) or created_now(),
    )
    # The earliest report first: a later attempt of a test replaces an earlier failed one.
    for _, (path, run) in sorted(enumerate(inputs), key=lambda pair: (pair[1][1].created, pair[0])):
        combined.update(run, path)
    combined.tests = {nodeid: combined.tests[nodeid] for nodeid in sorted(combined.tests)}
    combined.collection = collection(inputs)
    lost = combined.collection["split_off"] if combined.collection else []
    if lost:
        said = f"{plural(len(lost), 'test')} collected ran in no shard ({named(lost)})"
        combined.incomplete = "; ".join(filter(None, (combined.incomplete, said)))
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
