"""Warm starts through the plugin, with real fresh processes and real Inductor on CPU: each
scenario judged as torch's own counters in two hand-run processes say (the oracle), with the
component named; the same verdicts reversed and under -n 2; the marker's and options' errors;
the child that fails, runs past its limit, or is not run at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scenarios import ALLOW_BYPASS, EXPECTED, ORACLE, SCENARIOS, oracle_verdict
from snippets import REVERSE_CONFTEST, assert_marker_error, inner_args, read_json

from pytest_recompile.model.names import WARM_START_FORM
from pytest_recompile.reports.schema import report_fits

REPORT = "--recompile-report=report.json"


def _verdicts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each gated test by its name: its outcome and its warm-start check."""
    return {t["nodeid"].rpartition("::")[2]: t for t in report["tests"]}


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {name: test["warm_start"]["status"] for name, test in _verdicts(report).items()}


def _oracle(pytester: pytest.Pytester, module: Path, *select: str) -> dict[str, dict[str, Any]]:
    """The module run twice by hand, each time in a fresh process, one cache directory."""
    runner = pytester.path / "oracle_runner.py"
    runner.write_text(ORACLE)
    environ = dict(os.environ)
    environ["TORCHINDUCTOR_CACHE_DIR"] = str(pytester.path / "oracle-cache" / "inductor")
    environ["TRITON_CACHE_DIR"] = str(pytester.path / "oracle-cache" / "triton")
    found = {}
    for name in ("cold", "warm"):
        out = pytester.path / f"oracle-{name}.json"
        args = [str(out), str(module), "-q", "-p", "no:cacheprovider", *select]
        subprocess.run(
            [sys.executable, str(runner), *args],
            cwd=pytester.path,
            env=environ,
            check=False,
            capture_output=True,
        )
        found[name] = json.loads(out.read_text())
    return found["warm"]


# The scenarios in three groups of about a minute and a half each, so that xdist's workers
# share them (one test of all would run alone at the end of a run).
GROUPS = {
    "stable": [
        "test_stable_forward", "test_training_step", "test_module_fixture",
        "test_dynamic_sizes", "test_forward_without_backward", "test_fails_by_itself",
        "test_unmarked",
    ],
    "moved": [
        "test_pid_constant", "test_random_at_import", "test_set_order",
        "test_buffer_named_by_id", "test_eager_only",
    ],
    "bypassed": [
        "test_freezing", "test_autograd_function", "test_bypasses_allowed",
        "test_caches_off",
    ],
}  # fmt: skip


@pytest.mark.inductor
@pytest.mark.processes
@pytest.mark.differential
@pytest.mark.parametrize("group", GROUPS)
def test_each_scenario_is_judged_as_torch_s_counters_say(
    pytester: pytest.Pytester, run: Any, monkeypatch: pytest.MonkeyPatch, group: str
) -> None:
    """The differential self-check: every scenario's verdict equals the oracle's (two
    processes run by hand, torch's counters read), and its message names what moved."""
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)  # a restart does not fix it either
    module = pytester.makepyfile(test_scenarios=SCENARIOS)
    select = ("-k", " or ".join(GROUPS[group]))
    result = pytester.runpytest(*inner_args("-p", "no:randomly", REPORT, *select))
    report = read_json("report.json")
    assert report_fits()(report)
    verdicts = _verdicts(report)
    warm = _oracle(pytester, module, *select)
    checked_here = 0
    for name in GROUPS[group]:
        if name not in EXPECTED:
            assert name not in verdicts  # not gated: no children
            continue
        verdict, named = EXPECTED[name]
        test = verdicts[name]
        if verdict == "own":  # fails with its own error; no child was started
            assert test["outcome"] == "failed"
            assert "warm_start" not in test
            result.stdout.fnmatch_lines([f"*{named[0]}*"])
            continue
        checked_here += 1
        checked = test["warm_start"]
        assert checked["status"] == verdict, (name, checked)
        assert oracle_verdict(warm[name], name in ALLOW_BYPASS) == verdict, (name, warm[name])
        for part in named:
            assert part in checked["message"], (name, part, checked["message"])
        assert test["outcome"] == ("passed" if verdict == "passed" else "failed"), name
    passed = sum(1 for n in GROUPS[group] if EXPECTED.get(n, ("",))[0] == "passed")
    result.stdout.fnmatch_lines(
        [
            f"*warm start: {checked_here} tests run cold, then warm, in fresh processes: "
            f"{passed} warm, {checked_here - passed} not*"
        ]
    )
    if group == "bypassed":
        result.stdout.fnmatch_lines(
            [
                "*warm start: test_scenarios.py::test_bypasses_allowed: cold * s, warm * s; "
                "warm lookups 4, hits 1 (bypasses allowed by @warm_start(allow_bypass=True))"
            ]
        )


def test_the_groups_hold_every_scenario_once() -> None:
    names = [name for group in GROUPS.values() for name in group]
    assert sorted(names) == sorted({*EXPECTED, "test_unmarked"})


FEW = """
import os
import pytest
import torch

PID = float(os.getpid() % 997 + 2)


def stable(x):
    return torch.relu(x) * 2 + 1


def by_pid(x):
    return x * PID


@pytest.mark.warm_start
def test_stable():
    torch.compile(stable)(torch.randn(8))


@pytest.mark.warm_start
def test_pid():
    torch.compile(by_pid)(torch.randn(8))


@pytest.mark.warm_start
def test_eager():
    torch.compile(stable, backend="eager")(torch.randn(8))
"""
FEW_EXPECTED = {"test_stable": "passed", "test_pid": "failed", "test_eager": "failed"}


@pytest.mark.inductor
@pytest.mark.processes
@pytest.mark.xdist
def test_a_restart_that_compiles_again_names_the_constant(pytester: pytest.Pytester) -> None:
    """The representative few, for every torch lane, in reverse order on two xdist workers
    (each runs its own tests' children; no cache directory is shared): the verdicts the
    scenario suite gets in file order. A stable function passes, a constant derived from the
    pid fails naming the graph's line (or, where torch does not name components, from its
    counters), an eager-only test never passes silently."""
    pytester.makepyfile(test_few=FEW)
    pytester.makeconftest(REVERSE_CONFTEST)
    args = ("-p", "xdist", "-n", "2", "-p", "no:randomly", "--reverse-order", REPORT)
    result = pytester.runpytest_subprocess(*inner_args(*args, "--junitxml=junit.xml"))
    verdicts = _verdicts(read_json("report.json"))
    assert _statuses(read_json("report.json")) == FEW_EXPECTED
    pid = verdicts["test_pid"]["warm_start"]
    line = Path("test_few.py").read_text().splitlines().index("def by_pid(x):") + 1
    assert f"by_pid (test_few.py:{line})" in pid["message"]
    named = "gm (the graph): mul = " in pid["message"]
    assert named or "torch counted without describing" in pid["message"]
    assert pid["file"].endswith("test_few.py")
    assert pid["line"] == line
    stable = verdicts["test_stable"]["warm_start"]
    assert stable["lookups"] == stable["hits"] > 0
    assert stable["message"] is None
    assert stable["cold"]["seconds"] > 0
    assert stable["warm"]["compiles"] == 1
    result.stdout.fnmatch_lines(
        [
            "*test_few.py::test_stable: cold * s, warm * s; warm lookups *, hits * "
            "(every lookup hit)",
            "*warm start: 3 tests run cold, then warm, in fresh processes: 1 warm, 2 not;*",
        ]
    )
    junit = Path("junit.xml").read_text()
    assert 'name="recompile_warm_start" value="passed: cold' in junit


# -- the marker, the options, and children that give no verdict ---------------------------------


@pytest.mark.parametrize(
    ("marker", "wrong"),
    [
        ("warm_start(True)", "takes keyword arguments only"),
        ("warm_start(allow=True)", "unknown keyword 'allow'"),
        ("warm_start(allow_bypass=1)", "allow_bypass must be True or False, got 1"),
        ("warm_start(dynamo='yes')", "dynamo must be True or False, got 'yes'"),
    ],
)
def test_a_bad_marker_is_a_collection_error(run: Any, marker: str, wrong: str) -> None:
    result = run(f"@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    assert_marker_error(
        result,
        f"*@pytest.mark.warm_start on test_it.py::test_x*{wrong}*"
        f"accepted form is @pytest.mark.{WARM_START_FORM}*",
    )


def test_the_marker_is_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*inner_args("--markers"))
    result.stdout.fnmatch_lines([f"@pytest.mark.{WARM_START_FORM}: run this test alone*"])


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_bad_timeout_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(*inner_args(f"--recompile-warm-start-timeout={value}"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--recompile-warm-start-timeout: expected a whole number of*"])


MARKED_CLASS = """
pytestmark = pytest.mark.warm_start

def step(x):
    return x + 1

class TestModel:
    def test_one(self):
        torch.compile(step, backend="eager")(torch.randn(3))
"""


def test_off_skips_the_check_and_says_so(run: Any) -> None:
    """--recompile-warm-start=off: no child; the module's marker still gates its test."""
    result = run(MARKED_CLASS, "--recompile-warm-start=off", "-p", "no:cacheprovider", REPORT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*warm start: 1 marked test not checked (--recompile-warm-start=off)*"]
    )
    (test,) = read_json("report.json")["tests"]
    assert test["warm_start"]["status"] == "skipped"


IN_CHILD = """
import os
import time

def in_a_warm_start_child():
    return "pytest-recompile-warm-" in os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")

def step(x):
    return x + 1

@pytest.mark.warm_start
def test_fails_only_in_the_child():
    torch.compile(step, backend="eager")(torch.randn(3))
    assert not in_a_warm_start_child(), "this only fails in a child"

@pytest.mark.warm_start
def test_hangs_only_in_the_child():
    if in_a_warm_start_child():
        time.sleep(600)
"""


@pytest.mark.processes
def test_a_child_that_fails_or_hangs_is_reported_as_such(run: Any) -> None:
    """Never a cache verdict: what happened there, with the child's own error."""
    result = run(IN_CHILD, "--recompile-warm-start-timeout=12", REPORT)
    result.assert_outcomes(failed=2)
    verdicts = _verdicts(read_json("report.json"))
    failed = verdicts["test_fails_only_in_the_child"]["warm_start"]
    assert failed["status"] == "error"
    assert "the cold run of the warm-start check (the test failed" in failed["message"]
    assert "this only fails in a child" in failed["message"]
    hung = verdicts["test_hangs_only_in_the_child"]["warm_start"]
    assert hung["status"] == "error"
    assert "the process ran past the time limit" in hung["message"]
    assert "stopped after 12 s (--recompile-warm-start-timeout)" in hung["message"]


@pytest.mark.processes
def test_report_only_shows_a_warm_start_failure_without_failing(run: Any) -> None:
    source = "@pytest.mark.warm_start\ndef test_x():\n    pass\n"
    result = run(source, "--recompile-mode=report-only", REPORT)
    result.assert_outcomes(passed=1)
    (test,) = read_json("report.json")["tests"]
    assert test["warm_start"]["status"] == "failed"
    assert "the test compiled nothing in either run" in test["warm_start"]["message"]


EAGER = """
def step(x):
    return x * 2


@pytest.mark.warm_start
def test_restart():
    torch.compile(step, backend="eager")(torch.randn(4))
"""


@pytest.mark.processes
def test_every_output_carries_the_check(
    run: Any,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The JSON report, JUnit, the Markdown summary, a GitHub annotation at the function,
    compare's warm-start-misses (failed on by default) and combine."""
    from pytest_recompile.cli import main

    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run(EAGER, REPORT, "--junitxml=junit.xml", "--recompile-github=on")
    result.assert_outcomes(failed=1)
    report = read_json("report.json")
    (test,) = report["tests"]
    warm = test["warm_start"]
    assert warm["status"] == "failed"
    assert [v["kind"] for v in test["violations"]] == ["warm_start"]
    line = Path("test_it.py").read_text().splitlines().index("def step(x):") + 1
    assert (warm["function"], warm["line"]) == ("step", line)
    annotation = [line for line in result.stdout.lines if line.startswith("::error")]
    assert annotation[0].startswith(
        f"::error file=test_it.py,line={line},title=test_it.py%3A%3Atest_restart%3A "
        "a restart compiles step again::the warm start of this test compiled again"
    )
    assert "| warm_start | the warm start of this test compiled again" in summary.read_text()
    assert 'name="recompile_warm_start" value="failed: cold ' in Path("junit.xml").read_text()
    base, head = json.loads(json.dumps(report)), json.loads(json.dumps(report))
    base["tests"][0]["warm_start"].update(status="passed", message=None, lookups=2, hits=2)
    base["tests"][0]["violations"] = []
    head["tests"][0]["warm_start"].update(lookups=2, hits=1)  # one lookup missed
    Path("base.json").write_text(json.dumps(base))
    Path("head.json").write_text(json.dumps(head))
    capsys.readouterr()
    assert main(["compare", "base.json", "head.json"]) == 1
    said = capsys.readouterr().out
    assert "  warm start misses 0 -> 1 (+1)\nverdict: HEAD is worse: 1 more warm-start miss" in said
    assert main(["combine", "-o", "combined.json", "report.json"]) == 0
    assert read_json("combined.json")["tests"][0]["warm_start"] == warm


PRECOMPILED = """
import os
import tempfile

def step(x):
    return torch.relu(x) * 2 + 1

def saved():
    # the two children share this folder; the session's own run saves where nothing is
    # (inductor sets TORCHINDUCTOR_CACHE_DIR to its shared default in every process)
    folder = os.environ.get("PYTEST_RECOMPILE_WARM_START_DIR") or tempfile.mkdtemp()
    return os.path.join(folder, "step.pt")

@pytest.mark.warm_start(dynamo=True)
def test_precompiled():
    path, x = saved(), torch.randn(8)
    if os.path.exists(path):
        with open(path, "rb") as f:
            fn = torch.compiler.load_compiled_function(f)
    else:
        fn = torch.compile(step, fullgraph=True).aot_compile(((x,), {}))
        fn.save_compiled_function(path)
    fn(x)

@pytest.mark.warm_start(dynamo=True)
def test_traced_again():
    torch.compile(step)(torch.randn(9))
"""


@pytest.mark.inductor
@pytest.mark.processes
@pytest.mark.differential
@pytest.mark.skipif(
    not hasattr(__import__("torch").compiler, "load_compiled_function"),
    reason="needs torch.compiler.load_compiled_function (torch 2.13+)",
)
def test_dynamo_true_asks_for_a_warm_run_that_traces_nothing(run: Any) -> None:
    """Precompiled code loaded in the warm run passes with no lookup; a function Dynamo
    traces again in the warm run fails, named."""
    result = run(PRECOMPILED, REPORT)
    result.assert_outcomes(passed=1, failed=1)
    verdicts = _verdicts(read_json("report.json"))
    loaded = verdicts["test_precompiled"]["warm_start"]
    assert loaded["status"] == "passed"
    assert loaded["warm"]["compiles"] == 0
    assert loaded["cold"]["compiles"] == 1
    traced = verdicts["test_traced_again"]["warm_start"]
    assert traced["status"] == "failed"
    assert "Dynamo traced 1 frame in the warm run (step (test_it.py:" in traced["message"]
