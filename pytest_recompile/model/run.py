"""The one results model: what a run found, as plain data (no pytest, no torch).

A JSON report loads back into a :class:`RunResults` (``reports/json_report.py``). A live
session hears each test's reports (:class:`LiveRun`), by the process that ran them, and at
the run's end folds each process's results into one :class:`RunResults`, exactly as
``reports/combine.py`` folds shards' reports: every rule about a test, a fixture or a fault
seen twice is :meth:`RunResults.update`, as coverage.py keeps every merge rule in
``CoverageData.update``. The decisions about a whole run are its methods too: whether it fails
the gate (:meth:`RunResults.gate_failures`) and whether its counts may update a baseline
(:meth:`RunResults.baseline_refusal`); the session and the command line only call them.

Every output (the terminal summary, the durations, the Markdown summary, the annotations, the
JSON report, the baseline, the ``recompile_limit`` line, ``compare``) reads a whole
:class:`RunResults`, as coverage.py's reporters read one ``CoverageData``: a combined report
renders exactly as one run does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import InputError
from .results import (
    Carried,
    CollectionResult,
    FixtureResult,
    OutlivedResult,
    ReportEnvironment,
    ReportSettings,
    TestResult,
    first_difference,
    without_timings,
)

FAILED = ("failed", "error")  # outcomes a rerun may replace

# Why a run fails the gate (:meth:`RunResults.gate_failures`), in the order they are said.
SWITCHED_OFF = "torch.compile was switched off"  # and --recompile-if-disabled=fail
BROKE = "a test broke the gate"
INCOMPLETE = "the run is incomplete"


class MergeError(InputError):
    """Two runs that do not fold into one: a test in both with other results, not a rerun."""


class Attempt(NamedTuple):
    """A test's attempt as a run keeps it: the last one (a rerun replaces a failed one)."""

    outcome: str  # passed, failed, error (in set-up or teardown) or skipped
    result: TestResult


@dataclass
class RunResults:
    """One run's results, or several processes' or shards' folded into one.

    ``tests`` maps each gated test's node id to its attempt. Built whole: at a live run's end
    (:meth:`LiveRun.finish`), from a report (``json_report.from_document``), or by folding
    runs (:meth:`update`)."""

    environment: ReportEnvironment
    settings: ReportSettings
    created: str  # ISO 8601, UTC
    tests: dict[str, Attempt] = field(default_factory=dict)
    fixtures: list[FixtureResult] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)  # each told once
    incomplete: str | None = None  # why the run did not run every test (None: it did)
    collection: CollectionResult | None = None  # None: a report written before it was kept
    # How torch.compile was switched off while gated tests ran, each spelling once (a JSON
    # report keeps it as environment.compile_disabled): the gate then measured eager code.
    disabled: dict[str, None] = field(default_factory=dict)
    # Where each test's attempt came from, while runs are folded: the error names both.
    _sources: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def enforced(self) -> bool:
        """Broken rules failed tests (every mode but report-only)."""
        return self.settings["mode"] != "report-only"

    def results(self) -> list[tuple[str, TestResult]]:
        """Each test's figures, by node id: the order every output shows them in."""
        return [(nodeid, self.tests[nodeid].result) for nodeid in sorted(self.tests)]

    def figures(self) -> list[TestResult]:
        """Each test's figures, in :meth:`results`' order."""
        return [data for _, data in self.results()]

    def ran(self) -> set[str]:
        """The gated tests that ran and were measured: those with figures, less the skipped
        (a skipped test measured nothing: a baseline keeps what it had)."""
        return {nodeid for nodeid, attempt in self.tests.items() if attempt.outcome != "skipped"}

    # -- folding ----------------------------------------------------------------------------

    def update(self, other: RunResults, source: str, *, conflicts: list[str] | None = None) -> None:
        """Fold ``other`` into this run (``source`` names it: a shard's report, an xdist
        worker). The one home of every rule about what two runs both hold:

        - a test in both is kept once where its attempts have the same results (timings and
          pids aside); else ``other``'s must be a rerun: this run's attempt failed or
          errored, and ``other``'s replaces it. Anything else raises :class:`MergeError`
          naming the test and both sources (with ``conflicts``, the message is appended
          there instead and ``other``'s attempt kept: a live run never stops on it);
        - a wider fixture set up the same way (timings aside) in both is kept as often as
          the one that set it up most often did: one process sets a module's fixture up
          once, and again only when it is parametrized; set up differently, each is kept;
        - a fault, and a way torch.compile was switched off, are kept once each;
        - ``other``'s reason for being incomplete is added, prefixed with ``source``.

        The caller orders the folds (the earlier attempt first) and checks what must agree
        across inputs (environment, options, collections: ``reports/combine.py``)."""
        for nodeid, attempt in other.tests.items():
            known = self.tests.get(nodeid)
            if known is not None and _same(known, attempt):
                continue  # the same results (timings aside): kept once
            if known is not None and known.outcome not in FAILED:
                differs = first_difference(
                    {"outcome": known.outcome, **without_timings(known.result)},
                    {"outcome": attempt.outcome, **without_timings(attempt.result)},
                )
                said = (
                    f"test {nodeid} is in {self._sources.get(nodeid, 'the run')} and in "
                    f"{source} with other results ({differs}, in that order): a test may be in "
                    "two inputs only with the same results, or as a rerun after a failed attempt"
                )
                if conflicts is None:
                    raise MergeError(said)
                conflicts.append(said)
            self.tests[nodeid] = attempt  # first, or a rerun
            self._sources[nodeid] = source
        counts: dict[str, int] = {}
        for fixture in self.fixtures:
            key = _fixture_key(fixture)
            counts[key] = counts.get(key, 0) + 1
        theirs: dict[str, int] = {}
        for fixture in other.fixtures:
            key = _fixture_key(fixture)
            theirs[key] = theirs.get(key, 0) + 1
            if theirs[key] > counts.get(key, 0):
                self.fixtures.append(fixture)
        self.faults += [fault for fault in dict.fromkeys(other.faults) if fault not in self.faults]
        self.disabled.update(other.disabled)
        if other.incomplete is not None:
            said = f"{source}: {other.incomplete}" if source else other.incomplete
            self.incomplete = "; ".join(filter(None, (self.incomplete, said)))

    # -- the run's verdicts -----------------------------------------------------------------

    @property
    def fails_switched_off(self) -> bool:
        """torch.compile was switched off, and the run's rule (--recompile-if-disabled) fails
        it: the gate measured eager code."""
        return bool(self.disabled) and self.settings["if_disabled"] == "fail"

    def gate_failures(self) -> list[str]:
        """Why this run fails the gate (empty: it passes), of :data:`SWITCHED_OFF`,
        :data:`BROKE` (a test broke a rule while the rules failed tests) and
        :data:`INCOMPLETE` (a test stopped early, or ran without figures, or no shard ran
        it). ``pytest-recompile report`` exits 1 on any; a live run's exit status is
        pytest's, which already failed each test that broke a rule and each early stop, so
        the session adds only what pytest cannot know (``session.py``)."""
        found = []
        if self.fails_switched_off:
            found.append(SWITCHED_OFF)
        if self.enforced and any(attempt.result["violations"] for attempt in self.tests.values()):
            found.append(BROKE)
        if self.incomplete is not None:
            found.append(INCOMPLETE)
        return found

    def baseline_refusal(self, exit_status: int | None = None) -> str | None:
        """Why this run's counts must not update a baseline (None: they may), the first
        reason of: compile was switched off (eager code recompiles nothing, and every entry
        would be removed); the run is incomplete (stopped early, a test without figures, a
        test no shard ran); the run did not pass (``exit_status``: a live run's, not 0); a
        test's counts are partial (fail-fast stopped it); a test did not pass."""
        off = list(self.disabled)
        if off:
            return (
                f"torch.compile was switched off ({'; '.join(off)}): eager code measures nothing, "
                "and every entry of the tests that ran would be removed"
            )
        if self.incomplete is not None:
            return f"the run is incomplete ({self.incomplete})"
        if exit_status is not None and exit_status != 0:
            return (
                f"the run did not pass (exit status {exit_status}), so its counts may be incomplete"
            )
        for nodeid, data in self.results():
            if data["stopped_at"] is not None:
                return (
                    f"fail-fast stopped {nodeid}: its counts are partial (update with "
                    "--recompile-baseline-update, which runs report-only)"
                )
        failed = sorted(n for n, attempt in self.tests.items() if attempt.outcome in FAILED)
        if failed:
            return f"{failed[0]} did not pass, so its counts may be incomplete"
        return None


@dataclass
class _Heard:
    """One process's tests as its reports told them."""

    tests: dict[str, Attempt] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> this attempt's outcome
    fixtures: list[FixtureResult] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    disabled: dict[str, None] = field(default_factory=dict)


@dataclass
class LiveRun:
    """What a live session heard from its tests' reports, by the process that ran them (an
    xdist worker's id; "" for this process), until :meth:`finish` folds it into the run's
    :class:`RunResults`; and what only a live session knows, which no report keeps: the
    features this torch lacks, threads' compiles charged to no test, the gated tests that
    ran (to name those that ran without figures)."""

    notes: dict[str, None] = field(default_factory=dict)  # features this torch lacks, once each
    outlived: list[OutlivedResult] = field(default_factory=list)  # threads' compiles, no test's
    gated: set[str] = field(default_factory=set)  # gated tests that ran to their teardown
    _heard: dict[str, _Heard] = field(default_factory=dict, repr=False)

    def add(
        self, nodeid: str, when: str, outcome: str, carried: Carried | None, process: str = ""
    ) -> None:
        """One phase's report of a test (``when``: setup, call, teardown): its outcome, and
        what it carries (``process``: the xdist worker it ran in). Within one process a
        set-up starts a new attempt (pytest-rerunfailures reruns a failed test there)."""
        heard = self._heard.setdefault(process, _Heard())
        failed = outcome == "failed"
        if when == "setup":
            heard.tests.pop(nodeid, None)
            heard.outcomes.pop(nodeid, None)
            if failed:
                heard.outcomes[nodeid] = "error"
            elif outcome == "skipped":  # skipif, or pytest.skip in a fixture
                heard.outcomes[nodeid] = "skipped"
        elif when == "call":
            heard.outcomes[nodeid] = outcome
        elif failed and heard.outcomes.get(nodeid, "passed") == "passed":
            heard.outcomes[nodeid] = "error"  # an error in teardown spoils a pass
        if carried is None:
            return
        heard.fixtures += carried.get("fixtures") or ()
        heard.faults += carried.get("faults") or ()
        self.outlived += carried.get("threads") or ()
        self.notes.update(dict.fromkeys(carried.get("degraded") or ()))
        heard.disabled.update(dict.fromkeys(carried.get("disabled") or ()))
        if carried.get("gated"):
            self.gated.add(nodeid)
        result = carried.get("result")
        if result is not None:
            if carried.get("trace"):  # the kept trace's slot, filled after the result froze
                result = {**result, "trace": carried["trace"]}
            heard.tests[nodeid] = Attempt(heard.outcomes.get(nodeid, "passed"), result)

    def missing(self) -> list[str]:
        """Gated tests that ran without figures."""
        measured = {nodeid for heard in self._heard.values() for nodeid in heard.tests}
        return sorted(self.gated - measured)

    def told(self) -> bool:
        """Whether the session has anything of its own to say (a feature missing, a thread's
        compile), results aside."""
        return bool(self.notes or self.outlived)

    def finish(
        self,
        *,
        environment: ReportEnvironment,
        settings: ReportSettings,
        created: str,
        collection: CollectionResult | None,
        incomplete: str | None,
    ) -> RunResults:
        """The run's results: each process's folded in the order they first reported
        (:meth:`RunResults.update`). A test two workers ran with other results (``--dist
        each``: its verdict depended on the worker) is a contained fault, naming both."""
        run = RunResults(environment, settings, created, collection=collection)
        conflicts: list[str] = []
        for process, heard in self._heard.items():
            part = RunResults(
                environment,
                settings,
                created,
                tests=heard.tests,
                fixtures=heard.fixtures,
                faults=heard.faults,
                disabled=heard.disabled,
            )
            run.update(
                part, f"worker {process}" if process else "this process", conflicts=conflicts
            )
        run.faults += conflicts
        run.incomplete = incomplete
        return run


def _same(one: Attempt, other: Attempt) -> bool:
    return one.outcome == other.outcome and without_timings(one.result) == without_timings(
        other.result
    )


def _fixture_key(fixture: FixtureResult) -> str:
    return json.dumps(without_timings(fixture), sort_keys=True)
