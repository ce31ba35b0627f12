"""The baseline (``--recompile-baseline``): taken, read, ratcheted, refused when it is not one."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest
from snippets import DOUBLE, HEADER, STEP, inner_args

from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.baseline import (
    BASELINE_SCHEMA,
    BaselineError,
    read_baseline,
)

BASELINE_SUITE = (
    HEADER
    + STEP
    + """
import os

def test_steps():
    global step
    for i in range(int(os.environ.get("STEPS", "3"))):
        step = i
        f(torch.ones(2))

def test_clean():
    f(torch.ones(2))
"""
)


def test_baseline_round_trip(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=BASELINE_SUITE)
    base = pytester.path / "recompiles.baseline.json"

    gate = pytester.runpytest(*inner_args("--recompile-budget", "-p", "no:randomly"))
    gate.assert_outcomes(failed=1, passed=1)  # the suite does not pass the gate today

    update = pytester.runpytest(
        *inner_args("--recompile-baseline-update", f"--recompile-baseline={base}")
    )
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines([f"baseline written to {base}: *"])
    data = json.loads(base.read_text())
    assert data["schema"] == BASELINE_SCHEMA
    steps = data["tests"]["test_suite.py::test_steps"]
    assert (steps["recompiles"], steps["functions"]) == (2, {"f": 2})
    # Since version 2 a test that compiled is kept for its guards, recompiles or not.
    assert data["tests"]["test_suite.py::test_clean"]["recompiles"] == 0
    assert set(steps["guards"]) == set(steps["values"]) == {"f"}

    same = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    same.assert_outcomes(passed=2)

    monkeypatch.setenv("STEPS", "5")
    worse = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    worse.assert_outcomes(failed=1, passed=1)
    worse.stdout.fnmatch_lines([f"{PREFIX} 3 recompiles*, budget 2 (baseline)"])

    monkeypatch.setenv("STEPS", "2")
    better = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    better.assert_outcomes(passed=2)
    better.stdout.fnmatch_lines(
        [
            "test_suite.py::test_steps: 1 recompile, below its baseline of 2: tighten it with "
            "--recompile-baseline-update"
        ]
    )


def test_a_baseline_from_another_torch_says_so(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline records what it was taken on; on another torch, each failure the baseline
    causes and the summary say so: the team checks torch's change before its code."""
    import platform

    import torch

    pytester.makepyfile(test_suite=BASELINE_SUITE)
    base = pytester.path / "recompiles.baseline.json"
    pytester.runpytest(
        *inner_args("--recompile-baseline-update", f"--recompile-baseline={base}")
    ).assert_outcomes(passed=2)
    data = json.loads(base.read_text())
    running = metadata.version("torch")
    assert data["environment"]["torch"] == running
    assert data["environment"]["torch_build"] == (
        f"cuda {torch.version.cuda}" if torch.version.cuda else "cpu"
    )
    assert data["environment"]["python"] == platform.python_version()
    if not torch.cuda.is_available():
        assert data["environment"]["devices"] == ["cpu"]

    monkeypatch.setenv("STEPS", "5")
    same_torch = pytester.runpytest(
        *inner_args("--recompile-budget", f"--recompile-baseline={base}")
    )
    same_torch.assert_outcomes(failed=1, passed=1)
    assert "baseline from torch" not in same_torch.stdout.str()

    other_torch = "2.14.1" if not running.startswith("2.14.1") else "2.13.0"  # not this one
    data["environment"]["torch"] = other_torch
    base.write_text(json.dumps(data))
    other = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    other.assert_outcomes(failed=1, passed=1)
    said = (
        f"baseline from torch {other_torch}; this run {running}: torch's change may be the cause; "
        "once it is understood, update the baseline with --recompile-baseline-update"
    )
    other.stdout.fnmatch_lines(
        [f"{PREFIX} 3 recompiles*, budget 2 (baseline)", "*", f"  {said}"], consecutive=False
    )
    assert other.stdout.str().count(said) == 2  # the failure, and the terminal summary

    monkeypatch.setenv("STEPS", "3")  # within the baseline: nothing to say in a failure
    within = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    within.assert_outcomes(passed=2)
    assert within.stdout.str().count(said) == 1


UNABSORBABLE_SUITE = (
    HEADER
    + STEP
    + DOUBLE
    + """
def steps(n):
    global step
    for i in range(n):
        step = i
        f(torch.ones(2))

def test_default_only():       # over the default budget: the baseline absorbs it
    steps(3)

@pytest.mark.max_recompiles(1)
def test_own_marker():         # over its marker's budget: a baseline never raises a marker
    steps(3)

def test_limit():              # falls back to eager: always a failure
    for n in range(1, 11):
        double(torch.ones(*[1] * n))

@pytest.mark.expect_guards("TENSOR_MATCH")
def test_wrong_kind():         # a guard rule, not a count
    steps(2)
"""
)


def test_baseline_update_says_what_no_baseline_can_absorb(run, pytester: pytest.Pytester) -> None:
    # The invariant: on unchanged code, the gate run after an update passes, or the update
    # run exits 1 naming exactly the tests that gate run fails.
    pytester.makepyfile(test_suite=UNABSORBABLE_SUITE)
    base = pytester.path / "b.json"
    update = pytester.runpytest(
        *inner_args("--recompile-baseline-update", f"--recompile-baseline={base}")
    )
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.assert_outcomes(passed=4)
    update.stdout.fnmatch_lines(
        [f"baseline written to {base}: *", f"{PREFIX} 3 broken rules no baseline can absorb*"]
    )
    named = set(re.findall(r"^  (test_suite\.py::\w+): ", update.stdout.str(), re.MULTILINE))
    gate = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={base}"))
    gate.assert_outcomes(passed=1, failed=3)
    failed = set(re.findall(r"^FAILED (\S+)", gate.stdout.str(), re.MULTILINE))
    assert (
        named
        == failed
        == {
            "test_suite.py::test_own_marker",
            "test_suite.py::test_limit",
            "test_suite.py::test_wrong_kind",
        }
    )


def test_baseline_missing_or_corrupt_is_an_error_and_never_overwritten(
    run, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_suite=BASELINE_SUITE)
    missing = pytester.runpytest(
        *inner_args("--recompile-budget", "--recompile-baseline=absent.json")
    )
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(
        ["*baseline file absent.json does not exist; write one with --recompile-baseline-update"]
    )
    corrupt = pytester.path / "corrupt.json"
    corrupt.write_text('{"schema": "pytest-recompile/baseline", "version": 1, "tests": {')
    bad = pytester.runpytest(*inner_args("--recompile-budget", f"--recompile-baseline={corrupt}"))
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*is not valid JSON*"])
    assert corrupt.read_text().endswith('"tests": {')

    pytester.makepyfile(test_fails="def test_own_failure():\n    assert False\n")
    good = pytester.path / "good.json"
    good.write_text(json.dumps({"schema": BASELINE_SCHEMA, "version": 1, "tests": {}}))
    before = good.read_text()
    failed = pytester.runpytest(
        *inner_args("--recompile-baseline-update", f"--recompile-baseline={good}")
    )
    failed.assert_outcomes(passed=2, failed=1)
    failed.stdout.fnmatch_lines([f"{PREFIX} baseline {good} NOT updated: the run did not pass*"])
    assert good.read_text() == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "is not a pytest-recompile baseline"),
        ('{"schema": "pytest-recompile/baseline", "version": 9, "tests": {}}', "has version 9"),
        (
            '{"schema": "pytest-recompile/baseline", "version": 1, '
            '"tests": {"t": {"recompiles": -1}}}',
            "has no non-negative integer",
        ),
    ],
)
def test_read_baseline_refuses_what_is_not_one(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=message):
        read_baseline(str(path), "here")


def test_baseline_update_needs_a_path(run, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*inner_args("--recompile-baseline-update"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--recompile-baseline-update needs --recompile-baseline=PATH*"])
