"""A differential self-check of the isolation contract on a realistic suite.

The plugin promises that each test's recompile count in a full run, in any order, is what
the same test gets alone in a fresh process, and reuses earlier tests' first compiles only
where that holds. ``differential_suite/`` is one pytest suite in
the structures ML teams use (wider fixtures that warm, automatic-dynamic shapes, opted-out
tests, compiled optimizers, dying modules, resets, other backends, unittest and torch's own
Dynamo TestCase, parametrization, marker budgets, partials and callable objects). This test
runs it whole with the plugin, forward, reversed and under ``-n 2``, reads each test's count
from the JSON report, runs every gated test alone in a fresh process with the plugin off and
counts torch's own recompiles there (``differential_suite/count_alone.py``), and compares.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from snippets import AUTOLOAD_OFF, inner_args

from pytest_recompile.reports.terminal import RESET_FALLBACK

SUITE = Path(__file__).parent / "differential_suite"
# The alone runs start a fresh interpreter each (torch import and Dynamo's first compile
# dominate); never more than two processes at once.
WORKERS = 2
# The suite must not shrink unnoticed (a module that stops collecting, a renamed test).
MIN_SCENARIOS = 136

# torch compiles every compiled partial, callable object and nn.Module through one code object
# (external_utils.wrap_inline). Modules are told apart by identity; a partial or callable
# object of another function or class is not, so its first compile is a recompile to torch.
SHARED_WRAPPER = (
    "shared wrapper: torch counts the first compile of a second partial / callable object on"
    " its shared code object (external_utils.wrap_inline) as a recompile; the plugin"
    " attributes it to another callable, and only entries made for the same callable count"
    " (README, What is counted)"
)
# Tests where the plugin departs from torch's own count by a documented rule, by test name
# (a node id's last part). Such a test must still run, pass and be reported in every run;
# only its count may differ.
# At recompile_limit torch compiles nothing (it raises FailOnRecompileLimitHit here), but its
# compile metrics record the attempt with a recompile reason.
LIMIT_HIT = (
    "limit hit: torch's metrics record the refused attempt at recompile_limit as a recompile;"
    " the plugin reports it as a limit hit, not a recompile, since nothing compiled"
    " (docs/isolation.md, What is counted)"
)
RULES = {
    "test_fail_on_recompile_limit_hit_raises_torchs_error": LIMIT_HIT,
    "test_limit_hit_falls_back_to_eager": LIMIT_HIT,
    "test_partials_of_two_functions": SHARED_WRAPPER,
    "test_callable_objects_of_two_classes": SHARED_WRAPPER,
    "test_wrapped_linear_then_tanh": SHARED_WRAPPER,
}
# A torch that cannot keep single cache entries (before 2.9) starts each gated test from a full
# reset, so warm-ups are not kept: every count may differ from alone, and the report says so.
RESET = f"reset fallback (report: isolation 'reset'): {RESET_FALLBACK}"
# torch 2.7 and 2.8 under set_stance("eager_then_compile"): each call gets a new delayed
# callback, and torch compares a cache entry's backend by identity, so whether a call matches
# the entry the previous call compiled depends on whether the new callback reuses the freed
# one's address: torch's own count moves with the file's layout, plugin off and alone too
# (tried: one file reads 0 alone and 1 in a whole run, with -p no:recompile).
ADDRESS_REUSE = (
    "torch 2.7/2.8 eager_then_compile: a new callback per call compared by identity (address"
    " reuse decides torch's own count, plugin off too)"
)
UNSTABLE_BEFORE_2_9 = {
    "test_eager_then_compile_static": ADDRESS_REUSE,
    "test_eager_then_compile_varying": ADDRESS_REUSE,
    "test_eager_then_compile_stance": ADDRESS_REUSE,
}

COMMON = ["-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"]
# Environment variables that would change what the inner runs load or how they behave (they
# load only the plugins they name: AUTOLOAD_OFF, inner_args).
DROP_ENV = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "TORCH_LOGS",
    "TORCH_TRACE",
    "TORCH_COMPILE_DEBUG",
)


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return {**env, **AUTOLOAD_OFF, **extra}


def _pytest(root: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 40) -> str:
    return "\n".join((proc.stdout + proc.stderr).splitlines()[-lines:])


class FullRun:
    """The whole suite in one process with the plugin on (report-only), in one order."""

    def __init__(
        self, root: Path, name: str, order: list[str], items: list[dict[str, Any]] | None = None
    ) -> None:
        self.name = name
        report, record = root / f"{name}.json", root / f"{name}-record.json"
        self.proc = _pytest(
            root,
            inner_args(
                "--recompile-budget=0",
                "--recompile-mode=report-only",
                f"--recompile-report={report.name}",
                "-p",
                "count_alone",
                *order,
                *COMMON,
            ),
            _env(root, COUNT_ALONE_RECORD=str(record)),
        )
        # 0: all passed; 1: some test failed or errored (a mismatch, shown per test). Anything
        # else (collection error, internal error, usage error) means no comparison is possible.
        exited = self.proc.returncode
        assert exited in (0, 1), f"{name} run exited {exited}:\n{_tail(self.proc)}"
        assert report.exists(), f"{name} run wrote no report:\n{_tail(self.proc)}"
        document = json.loads(report.read_text())
        # Not asserted here: a run the report calls incomplete, or one with internal errors
        # the plugin contained, still gets its table, and fails the check after it.
        faults = document.get("faults", [])  # report version 4 on
        self.problems = [f"{name} run: plugin fault: {fault}" for fault in faults]
        if not document["complete"]:
            self.problems.append(f"{name} run: report incomplete: {document['incomplete']}")
        self.tests: dict[str, dict[str, Any]] = {t["nodeid"]: t for t in document["tests"]}
        self.reused: int = document["summary"]["reused"]
        recorded = json.loads(record.read_text())
        # Under xdist the controller collects nothing: the forward run's items name the tests.
        self.items: list[dict[str, Any]] = items if items is not None else recorded["items"]
        self.outcomes: dict[str, str] = recorded["outcomes"]
        self.messages: dict[str, str] = recorded["messages"]

    def cell(self, nodeid: str) -> str:
        outcome = self.outcomes.get(nodeid, "not run")
        test = self.tests.get(nodeid)
        count = _count(test["recompiles"], len(test["graph_breaks"])) if test else "absent"
        return count if outcome == "passed" else f"{count} ({outcome})"


def classify(cells: tuple[str, ...], rule: str, ran_clean: bool) -> str:
    """One scenario's cells (forward, reversed, -n 2, alone): ``agree``, ``ruled`` or
    ``mismatch``. A documented rule excuses the alone cell only, in the direction it
    documents: fewer recompiles than torch's metrics count (a refused attempt at the limit, a
    shared wrapper's first compile); either way under the reset fallback (a dropped warm-up
    makes a first compile of a recompile, or a static compile of a dynamic one). The three
    runs of the plugin must still agree with each other, graph breaks included, but where
    torch's own count is unstable (:data:`ADDRESS_REUSE`)."""
    if not ran_clean:
        return "mismatch"
    if len(set(cells)) == 1:
        return "agree"
    if rule == ADDRESS_REUSE:
        return "ruled"
    *plugin, alone = cells
    if not rule or len(set(plugin)) != 1:
        return "mismatch"
    ours, theirs = plugin[0].split(" "), alone.split(" ")
    if not (ours[0].isdigit() and theirs[0].isdigit()) or ours[1:] != theirs[1:]:
        return "mismatch"
    return "ruled" if rule == RESET or int(ours[0]) < int(theirs[0]) else "mismatch"


def test_a_rule_excuses_the_alone_cell_only_in_its_direction() -> None:
    """The check can fail where a ruled test differs between the plugin's own runs."""
    assert classify(("1", "1", "1", "1"), "", True) == "agree"
    assert classify(("0", "0", "0", "1"), LIMIT_HIT, True) == "ruled"
    assert classify(("0", "0", "0", "1"), "", True) == "mismatch"  # no rule: no excuse
    assert classify(("0", "1", "0", "1"), LIMIT_HIT, True) == "mismatch"  # forward != reversed
    assert classify(("0", "0", "1", "1"), LIMIT_HIT, True) == "mismatch"  # -n 2 differs
    assert classify(("2", "2", "2", "1"), LIMIT_HIT, True) == "mismatch"  # the wrong way
    assert classify(("0 +1gb", "0 +1gb", "0 +1gb", "1"), LIMIT_HIT, True) == "mismatch"
    assert classify(("0 +1gb", "0 +1gb", "0 +1gb", "1 +1gb"), RESET, True) == "ruled"
    assert classify(("1", "1", "1", "0"), RESET, True) == "ruled"  # a dropped dynamic warm-up
    assert classify(("1", "0", "1", "0"), RESET, True) == "mismatch"  # still one order
    assert classify(("1", "0", "1", "0"), ADDRESS_REUSE, True) == "ruled"
    assert classify(("1", "1", "1", "1"), "", False) == "mismatch"  # an outcome differed


def _count(recompiles: int, breaks: int) -> str:
    """A test's recompiles, and its graph-break sites where it has any: ``1``, ``0 +2gb``."""
    return f"{recompiles} +{breaks}gb" if breaks else str(recompiles)


class AloneRun:
    """One test in a fresh process, the plugin off, torch's recompiles counted."""

    count: str | None  # recompiles, and graph-break sites (_count)
    outcome: str
    message: str | None

    def __init__(self, root: Path, index: int, nodeid: str) -> None:
        self.nodeid = nodeid
        out, record = root / "alone" / f"{index}.json", root / "alone" / f"{index}-record.json"
        self.proc = _pytest(
            root,
            inner_args("-p", "no:recompile", "-p", "count_alone", *COMMON, nodeid),
            _env(root, COUNT_ALONE_OUT=str(out), COUNT_ALONE_RECORD=str(record)),
        )
        counts = json.loads(out.read_text()) if out.exists() else {}
        recorded = json.loads(record.read_text()) if record.exists() else {}
        found = counts.get(nodeid)
        self.count: str | None = _count(found["recompiles"], found["breaks"]) if found else None
        self.outcome: str = recorded.get("outcomes", {}).get(nodeid, "not run")
        self.message = recorded.get("messages", {}).get(nodeid) or (
            None if self.outcome == "passed" else _tail(self.proc, 5)
        )

    def cell(self) -> str:
        count = "absent" if self.count is None else self.count
        return count if self.outcome == "passed" else f"{count} ({self.outcome})"

    @classmethod
    def cached(cls, nodeid: str, found: dict[str, Any]) -> AloneRun:
        alone = cls.__new__(cls)
        alone.nodeid, alone.count = nodeid, found["count"]
        alone.outcome, alone.message = found["outcome"], found["message"]
        return alone

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "outcome": self.outcome, "message": self.message}


# Each scenario's alone count depends only on the suite, torch and Python: they are kept in a
# file under a hash of the suite, one set per torch and Python (CI's torch and its oldest), and
# the fresh processes run only where the file has none for this suite, torch and Python (set
# PYTEST_RECOMPILE_WRITE_ALONE=1 to write this torch's then; a changed suite drops the others).
# A cached run still checks a few scenarios alone, spread over the suite, against the file: it
# cannot go stale unnoticed.
ALONE_CACHE = SUITE / "alone_counts.json"
WRITE_ALONE = "PYTEST_RECOMPILE_WRITE_ALONE"
CHECKED = 6  # scenarios run alone against the cache


def suite_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(SUITE.rglob("*.py")):
        digest.update(path.relative_to(SUITE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def release_key() -> str:
    import torch

    return f"torch {torch.__version__} python {'.'.join(map(str, sys.version_info[:2]))}"


def _read_cache() -> dict[str, Any]:
    try:
        cache = json.loads(ALONE_CACHE.read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def cached_alone(suite: str, release: str) -> dict[str, dict[str, Any]] | None:
    cache = _read_cache()
    return cache.get("runs", {}).get(release) if cache.get("suite") == suite else None


def write_alone(suite: str, release: str, counts: dict[str, dict[str, Any]]) -> None:
    """This torch's alone counts into the file, beside the other releases' of the same suite."""
    cache = _read_cache()
    runs = cache.get("runs", {}) if cache.get("suite") == suite else {}
    runs = dict(sorted({**runs, release: counts}.items()))
    ALONE_CACHE.write_text(json.dumps({"suite": suite, "runs": runs}, indent=1) + "\n")


def _table(rows: list[tuple[str, ...]]) -> str:
    header = ("test", "forward", "reversed", "-n 2", "alone", "rule")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    widths[-1] = len(header[-1])  # the rule text is long: not padded
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


@pytest.mark.differential
def test_full_runs_agree_with_each_test_alone(pytester: pytest.Pytester) -> None:
    started = time.perf_counter()
    root = pytester.path
    shutil.copytree(SUITE, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    pytester.makeini("[pytest]\n")  # the rootdir is the copy, whatever lies above it
    (root / "alone").mkdir()

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        forward_future = pool.submit(FullRun, root, "forward", [])
        reversed_future = pool.submit(FullRun, root, "reversed", ["--reverse-order"])
        # The forward run's collection names the tests; the alone runs start as soon as it
        # ends, sharing the two slots with the reversed run.
        forward = forward_future.result()
        # Every scenario is gated: allow_recompiles lifts the count only (a limit hit, the
        # count itself, are still the test's, and must read as alone).
        gated = list(forward.items)
        suite, release = suite_hash(), release_key()
        cached = cached_alone(suite, release)
        if cached is not None and set(cached) == {item["nodeid"] for item in gated}:
            step = max(1, len(gated) // CHECKED)
            run_alone = gated[::step][:CHECKED]
        else:
            cached, run_alone = None, gated
        alone_futures: list[Future[AloneRun]] = [
            pool.submit(AloneRun, root, index, item["nodeid"])
            for index, item in enumerate(run_alone)
        ]
        xdist_future = pool.submit(FullRun, root, "-n 2", ["-p", "xdist", "-n", "2"], forward.items)
        reverse = reversed_future.result()
        ran = {future.result().nodeid: future.result() for future in alone_futures}
        xdist = xdist_future.result()

    if cached is not None:
        # torch's own alone count of an ADDRESS_REUSE scenario moves with memory layout (a
        # checkout at another path reads another count): not held to the cache on that torch.
        from pytest_recompile._torch import versions

        unstable = set() if versions.can_keep_entries() else set(UNSTABLE_BEFORE_2_9)
        differ = {  # the counts and outcomes (a failure's message names temporary paths)
            nodeid: (cached[nodeid], fresh.to_json())
            for nodeid, fresh in ran.items()
            if (cached[nodeid]["count"], cached[nodeid]["outcome"]) != (fresh.count, fresh.outcome)
            and nodeid.rpartition("::")[2] not in unstable
        }
        assert not differ, f"{ALONE_CACHE.name} is stale (cached, fresh): {differ}"
        alone = {nodeid: AloneRun.cached(nodeid, found) for nodeid, found in cached.items()}
    else:
        alone = ran
        if os.environ.get(WRITE_ALONE):
            counts = {nodeid: run.to_json() for nodeid, run in sorted(alone.items())}
            write_alone(suite, release, counts)

    names = [item["name"] for item in forward.items]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"scenario names must be distinct: {duplicates}"
    assert len(gated) >= MIN_SCENARIOS, f"only {len(gated)} gated scenarios collected"
    assert {i["nodeid"] for i in reverse.items} == {i["nodeid"] for i in forward.items}
    assert set(xdist.tests) == set(forward.tests), "the -n 2 run reported other tests"
    stale = sorted((set(RULES) | set(UNSTABLE_BEFORE_2_9)) - set(names))
    assert not stale, f"RULES name tests the suite does not have: {stale}"

    runs = (forward, reverse, xdist)
    agree, ruled, mismatches = 0, [], []
    skipped: list[str] = []  # what this torch cannot run: skipped everywhere, the reason said
    errors: dict[str, list[str]] = {}  # "run: phase: message" -> the tests it names
    for item in gated:
        nodeid, name = item["nodeid"], item["name"]
        outcomes = {run.outcomes.get(nodeid) for run in runs} | {alone[nodeid].outcome}
        if outcomes == {"skipped"}:  # its skip names the torch release it needs, and why
            skipped.append(f"{nodeid}: {forward.messages.get(nodeid, '?')}")
            continue
        cells = (*(run.cell(nodeid) for run in runs), alone[nodeid].cell())
        ran_clean = alone[nodeid].outcome == "passed" and all(
            run.outcomes.get(nodeid) == "passed" and nodeid in run.tests for run in runs
        )
        reset = ran_clean and any(run.tests[nodeid]["isolation"] == "reset" for run in runs)
        rule = RESET if reset else RULES.get(name, "")
        if reset and name in UNSTABLE_BEFORE_2_9:  # reset: torch 2.7 or 2.8
            rule = UNSTABLE_BEFORE_2_9[name]
        found = classify(cells, rule, ran_clean)
        if found == "agree":
            agree += 1
        elif found == "ruled":
            ruled.append((nodeid, *cells, rule))
        else:
            mismatches.append((nodeid, *cells, rule))
            for label, message in (
                ("forward", forward.messages.get(nodeid)),
                ("reversed", reverse.messages.get(nodeid)),
                ("-n 2", xdist.messages.get(nodeid)),
                ("alone", alone[nodeid].message),
            ):
                if message:
                    line = message.strip().splitlines()[0][:300]
                    errors.setdefault(f"{label}: {line}", []).append(nodeid)

    seconds = time.perf_counter() - started
    how = (
        f"alone counts from {ALONE_CACHE.name}, {len(ran)} checked afresh"
        if cached is not None
        else f"each alone afresh ({ALONE_CACHE.name} has none for this suite and {release}:"
        f" {WRITE_ALONE}=1 writes them)"
    )
    print(
        f"\n{len(gated)} scenarios, forward == reversed == -n 2 == alone on {agree},"
        f" {len(ruled)} under a named rule, {len(skipped)} skipped on this torch,"
        f" in {seconds:.0f} s; {how}"
    )
    if ruled:
        print("under a named rule:\n" + _table(ruled))
    if skipped:
        print("skipped on this torch, in every run and alone:\n" + "\n".join(skipped))
    reused = sum(run.reused for run in runs)
    print(f"first compiles reused from earlier tests: {reused} over the three runs")
    problems = forward.problems + reverse.problems + xdist.problems
    if mismatches or problems:
        message = (
            f"{len(mismatches)} of {len(gated)} scenarios disagree (recompiles per test;"
            " an outcome other than passed in parentheses; absent: not in the run's report,"
            " or no count)\n" + _table(mismatches)
        )
        for error, nodeids in errors.items():
            more = f", ... ({len(nodeids)} tests)" if len(nodeids) > 3 else ""
            shown = ", ".join(nodeids[:3]) + more
            message += f"\n{error}\n    in {shown}"
        message += "".join(f"\n{problem}" for problem in problems)
        pytest.fail(message, pytrace=False)
