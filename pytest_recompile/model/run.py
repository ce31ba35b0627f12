"""The one results model: what a run found, as plain data (no pytest, no torch).

The session adds each test report's carried figures to a :class:`RunResults`; a JSON report
loads back into one (``reports/json_report.py``), and shards' reports combine into one
(``reports/combine.py``). Every output (the terminal summary, the durations, the Markdown
summary, the annotations, the JSON report, the baseline, the ``recompile_limit`` line,
``compare``) reads a whole :class:`RunResults`, as coverage.py's reporters read one
``CoverageData``: a combined report renders exactly as one run does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .results import (
    Carried,
    CollectionResult,
    FixtureResult,
    OutlivedResult,
    ReportEnvironment,
    ReportSettings,
    TestResult,
)


@dataclass
class RunResults:
    """One run's results, or several shards' combined.

    ``tests`` maps each gated test's node id to its outcome and figures. What only a live
    session knows (the gated tests that ran, features this torch lacks, threads' compiles
    charged to no test) is empty where the results were loaded from a report."""

    tests: dict[str, tuple[str, TestResult]] = field(default_factory=dict)
    fixtures: list[FixtureResult] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)  # each told once
    incomplete: str | None = None  # why the run did not run every test (None: it did)
    environment: ReportEnvironment | None = None  # None until the run ends (or loaded)
    settings: ReportSettings | None = None
    created: str | None = None  # ISO 8601, UTC
    collection: CollectionResult | None = None  # what ran of what was collected (a report's)
    # A live session's only (not in the JSON report):
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> this attempt's outcome
    notes: dict[str, None] = field(default_factory=dict)  # features this torch lacks, once each
    outlived: list[OutlivedResult] = field(default_factory=list)  # threads' compiles, no test's
    gated: set[str] = field(default_factory=set)  # gated tests that ran to their teardown
    # How torch.compile was switched off while gated tests ran, each spelling once (a JSON
    # report keeps it as environment.compile_disabled): the gate then measured eager code.
    disabled: dict[str, None] = field(default_factory=dict)
    # Each wider fixture's set-ups (timings aside): by process (a worker, a shard), and the
    # most of any one process, which is what the results keep.
    _set_ups: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)

    @property
    def enforced(self) -> bool:
        """Broken rules failed tests (every mode but report-only)."""
        return self.settings is None or self.settings["mode"] != "report-only"

    def results(self) -> list[tuple[str, TestResult]]:
        """Each test's figures, by node id: the order every output shows them in."""
        return [(nodeid, self.tests[nodeid][1]) for nodeid in sorted(self.tests)]

    def figures(self) -> list[TestResult]:
        return [data for _, data in self.results()]

    def ran(self) -> set[str]:
        """The gated tests that ran and were measured: those with figures, less the skipped
        (a skipped test measured nothing: a baseline keeps what it had)."""
        return {nodeid for nodeid, (outcome, _) in self.tests.items() if outcome != "skipped"}

    def add_fixtures(self, fixtures: list[FixtureResult], process: str = "") -> None:
        """Wider fixtures set up in ``process`` (an xdist worker, a shard). One set up the
        same way (timings aside) in several processes is kept once, as one process sets it
        up once; set up again within one process (a parametrized module fixture), or
        differently, each set-up is kept."""
        import json

        from .results import without_timings

        mine = self._set_ups.setdefault(process, {})
        for fixture in fixtures:
            key = json.dumps(without_timings(fixture), sort_keys=True)
            mine[key] = mine.get(key, 0) + 1
            others = (seen.get(key, 0) for name, seen in self._set_ups.items() if name != process)
            if mine[key] > max(others, default=0):
                self.fixtures.append(fixture)

    def add(
        self, nodeid: str, when: str, outcome: str, carried: Carried | None, process: str = ""
    ) -> None:
        """One phase's report of a test (``when``: setup, call, teardown): its outcome, and
        what it carries (``process``: the xdist worker it ran in). A set-up starts a new
        attempt (reruns)."""
        failed = outcome == "failed"
        if when == "setup":
            self.tests.pop(nodeid, None)
            self.outcomes.pop(nodeid, None)
            if failed:
                self.outcomes[nodeid] = "error"
            elif outcome == "skipped":  # skipif, or pytest.skip in a fixture
                self.outcomes[nodeid] = "skipped"
        elif when == "call":
            self.outcomes[nodeid] = outcome
        elif failed and self.outcomes.get(nodeid, "passed") == "passed":
            self.outcomes[nodeid] = "error"  # an error in teardown spoils a pass
        if carried is None:
            return
        if carried.get("fixtures"):
            self.add_fixtures(carried["fixtures"], process)
        self.faults += carried.get("faults") or ()
        self.outlived += carried.get("threads") or ()
        self.notes.update(dict.fromkeys(carried.get("degraded") or ()))
        self.disabled.update(dict.fromkeys(carried.get("disabled") or ()))
        if carried.get("gated"):
            self.gated.add(nodeid)
        result = carried.get("result")
        if result is not None:
            if carried.get("trace"):  # the kept trace's slot, filled after the result froze
                result = {**result, "trace": carried["trace"]}
            self.tests[nodeid] = (self.outcomes.get(nodeid, "passed"), result)

    def missing(self) -> list[str]:
        """Gated tests that ran without figures."""
        return sorted(self.gated - set(self.tests))
