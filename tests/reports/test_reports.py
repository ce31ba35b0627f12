"""Reports for CI: JSON report, JUnit properties, xdist, baseline ratchet, fixture API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest
from snippets import AUTOLOAD_OFF, DOUBLE, HEADER, STEP, inner_args, keeps_entries

from pytest_recompile._torch import instruments, versions
from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.files import write_json_atomic
from pytest_recompile.reports.json_report import SCHEMA_FILE
from pytest_recompile.reports.terminal import INCOMPLETE

SUITE = (
    HEADER
    + DOUBLE
    + STEP
    + """
def test_clean():
    double(torch.ones(2))

def test_shapes():
    double(torch.ones(2)); double(torch.ones(3, 3))

@pytest.mark.max_recompiles(2)
def test_steps():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

@pytest.mark.max_graph_breaks(0)
def test_break():
    @torch.compile(backend="eager")
    def chatty(x):
        print("hi")
        return x + 1
    chatty(torch.ones(2))

def test_not_torch():
    assert 1 + 1 == 2
"""
)


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs between two runs of the same suite: times, and
    torch's compile ids, which number a process's compiles (so depend on what that process
    ran before: every test in a serial run, some under xdist), and the first compiles
    reused from earlier tests of the same process."""
    volatile = {"created", "seconds", "compile_seconds", "recompile_seconds", "again_seconds"}
    volatile |= {"first_compile_seconds"}
    volatile |= {"compile_id", "entry", "raw", "guard_latency_us", "guard_check_us"}
    volatile |= {"guard_check_range_us"}
    # What a test reuses depends on what ran before it in its process, as compile ids do.
    volatile |= {"reused", "saved_seconds", "again_reasons"}

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in volatile}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(report)


class SuiteRun(NamedTuple):
    """One run of SUITE in a fresh pytest process, with every report written."""

    lines: list[str]  # its terminal output
    report: dict[str, Any]  # its JSON report
    junit: dict[str | None, dict[str | None, str | None]]  # test -> its JUnit properties


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    """SUITE run twice, serially and under ``-n 2``, each writing the JSON report and JUnit
    XML: the tests of the summary, the report and the JUnit properties read these two runs."""
    root = tmp_path_factory.mktemp("suite")
    (root / "test_suite.py").write_text(SUITE)
    (root / "pytest.ini").write_text("[pytest]\n")  # the rootdir is this directory
    drop = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "PYTEST_ADDOPTS")
    env = {k: v for k, v in os.environ.items() if k not in drop} | AUTOLOAD_OFF
    runs = {}
    for name, extra in (("serial", []), ("xdist", ["-p", "xdist", "-n", "2"])):
        args = inner_args(
            "--recompile-budget",
            *extra,
            f"--recompile-report={name}.json",
            f"--junitxml={name}.xml",
            "-p",
            "no:cacheprovider",
        )
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout[-3000:] + proc.stderr
        cases = ET.parse(root / f"{name}.xml").getroot().iter("testcase")
        junit = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
                 for c in cases}  # fmt: skip
        runs[name] = SuiteRun(proc.stdout.splitlines(), load(root / f"{name}.json"), junit)
    return runs


@pytest.mark.xdist  # suite_runs runs the suite serially and under -n 2
def test_json_report_matches_its_schema_and_says_everything(
    suite_runs: dict[str, SuiteRun],
) -> None:
    lines, report, _ = suite_runs["serial"]
    assert "report written to serial.json" in lines
    assert re.search(r"= 2 failed, 3 passed", lines[-1])
    jsonschema.validate(report, json.loads(Path(SCHEMA_FILE).read_text()))
    assert report["environment"]["torch"] == versions.torch_version()
    assert report["environment"]["devices"] == [instruments.device_summary()]
    assert report["settings"]["default_budget"] == 0
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert list(tests) == sorted(tests)
    assert set(tests) == {
        f"test_suite.py::{name}" for name in ("test_clean", "test_shapes", "test_steps",
                                              "test_break", "test_not_torch")
    }  # fmt: skip
    steps = tests["test_suite.py::test_steps"]
    assert (steps["outcome"], steps["recompiles"], steps["violations"]) == ("passed", 2, [])
    (fn,) = steps["functions"]
    assert (fn["qualname"], fn["compiles"], fn["cache_entries"]) == ("f", 3, 3)
    assert [r["reasons"][0]["kind"] for r in fn["recompiles"]] == ["EQUALS_MATCH"] * 2
    assert fn["recompiles"][0]["reasons"][0]["text"] == "G['step'] == 0"
    assert re.fullmatch(r"\d+/0", fn["recompiles"][0]["reasons"][0]["entry"])
    assert fn["recompile_seconds"] > 0
    assert fn["compile_seconds"] > fn["recompile_seconds"]
    shapes = tests["test_suite.py::test_shapes"]
    assert shapes["outcome"] == "failed"
    assert shapes["violations"][0]["kind"] == "total"
    assert shapes["functions"][0]["recompiles"][0]["stopped"] is True
    broke = tests["test_suite.py::test_break"]
    assert broke["graph_breaks"][0]["reason"] == "Failed to trace builtin operator"
    assert broke["violations"][0]["kind"] == "graph_breaks"
    assert report["summary"]["gated_tests"] == 5
    assert report["summary"]["broke_the_gate"] == 2


@pytest.mark.xdist
def test_serial_and_xdist_give_the_same_summary_and_report(
    suite_runs: dict[str, SuiteRun],
) -> None:
    seen = {}
    for name, (lines, report, _) in suite_runs.items():
        assert re.search(r"= 2 failed, 3 passed", lines[-1]), (name, lines[-1])
        start = next(i for i, line in enumerate(lines) if "= recompile gate =" in line)
        summary = [line.split("; recompiles cost")[0] for line in lines[start + 1 : start + 4]]
        seen[name] = (summary, stable(report))
    assert seen["serial"] == seen["xdist"]
    assert seen["serial"][0][0].startswith("test_suite.py::test_break: 1 graph break, budget 0")


@pytest.mark.xdist
@pytest.mark.parametrize("run", ["serial", "xdist"])
def test_junit_properties_under_serial_and_xdist(suite_runs: dict[str, SuiteRun], run: str) -> None:
    props = suite_runs[run].junit
    assert props["test_steps"]["recompiles"] == "2"
    assert props["test_steps"]["recompile_worst"] == "f (2)"
    assert props["test_steps"]["recompile_budget"] == "2"
    assert props["test_steps"]["recompile_budget_source"] == "@max_recompiles(2)"
    assert props["test_shapes"]["recompiles"] == "1"
    assert props["test_clean"]["recompiles"] == "0"


def test_report_ini_twin_and_bad_paths(run, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nrecompile_report = from-ini.json\n")
    pytester.runpytest(*inner_args("--recompile-budget", "-p", "no:randomly", "-k", "clean"))
    assert load(pytester.path / "from-ini.json")["summary"]["gated_tests"] == 1
    made = pytester.runpytest(
        *inner_args("--recompile-budget", "-k", "clean", "--recompile-report=new/sub/r.json")
    )
    assert made.ret == pytest.ExitCode.OK  # missing directories are created, as --junitxml does
    assert load(pytester.path / "new/sub/r.json")["summary"]["gated_tests"] == 1
    (pytester.path / "afile").write_text("")
    blocked = pytester.runpytest(*inner_args("--recompile-report=afile/out.json"))
    assert blocked.ret == pytest.ExitCode.USAGE_ERROR
    blocked.stderr.fnmatch_lines(
        [f"*{PREFIX} --recompile-report=afile/out.json: cannot create a directory for *afile*"]
    )
    is_dir = pytester.runpytest(*inner_args(f"--recompile-report={pytester.path}"))
    assert is_dir.ret == pytest.ExitCode.USAGE_ERROR
    is_dir.stderr.fnmatch_lines(["*is a directory; give a file path*"])


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_honour_the_umask(tmp_path: Path, umask: int) -> None:
    # The mode an ordinary open() gives, like --junitxml: uploaders may run as another user.
    old = os.umask(umask)
    try:
        write_json_atomic(str(tmp_path / "r.json"), {})
        (tmp_path / "plain").write_text("")
    finally:
        os.umask(old)
    mode = (tmp_path / "r.json").stat().st_mode & 0o777
    assert mode == (tmp_path / "plain").stat().st_mode & 0o777 == 0o666 & ~umask
    os.chmod(tmp_path / "r.json", 0o640)  # replacing a file keeps the mode it was given
    write_json_atomic(str(tmp_path / "r.json"), {"again": True})
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o640


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    write_json_atomic(str(target), {"old": True})
    with pytest.raises(TypeError):
        write_json_atomic(str(target), {"tests": [1, 2, object()]})  # fails half-way through
    assert load(target) == {"old": True}
    assert os.listdir(tmp_path) == ["report.json"]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "incomplete"),
    [
        ((), None),
        (("-x",), "stopping after 1 failures"),
        (("--maxfail=2",), "stopping after 2 failures"),
        (("-x", "-p", "xdist", "-n", "2"), "stopping after 1 failures"),
    ],
)
def test_a_run_stopped_early_says_so_in_the_report(
    run, pytester: pytest.Pytester, args: tuple[str, ...], incomplete: str | None
) -> None:
    run(
        STEP
        + """
@pytest.mark.parametrize("n", range(4))
def test_steps(n):
    global step
    step = n + 1
    f(torch.ones(2))
    step = 0
    f(torch.ones(2))
""",
        "--collect-only",
    )
    result = pytester.runpytest_subprocess(
        *inner_args("--recompile-budget", "-p", "no:randomly", "--recompile-report=r.json", *args)
    )
    report = load(pytester.path / "r.json")
    assert report["incomplete"] == incomplete
    assert report["complete"] is (incomplete is None)
    if incomplete is not None:
        result.stdout.fnmatch_lines([f"{INCOMPLETE}: {incomplete}"])
        assert report["summary"]["gated_tests"] < 4
    else:
        assert INCOMPLETE not in result.stdout.str()


@keeps_entries  # the module fixture's entry must reach the tests
def test_compile_ids_beyond_the_tests_entries_are_explained_once(run) -> None:
    """torch numbers compile ids across the process: a test with one cache entry may read
    ``[0/2]``; the block says what the id is, where it could read as a contradiction."""
    result = run(
        DOUBLE
        + """
@pytest.fixture(scope="module")
def warmed():
    double(torch.ones(4))

def test_a(warmed):
    double(torch.ones(8))

def test_b(warmed):
    double(torch.ones(8))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=2)
    # The failure blocks only: on CI (the CI variable set) pytest prints the short test summary
    # untruncated, and it repeats each block.
    out = result.stdout.str().split("short test summary info")[0]
    test_a, test_b = out.split("_ test_b _")
    assert "[frame/attempt]" not in test_a  # recompile 1 [0/1]: one entry, attempt 1
    assert re.search(r"recompile 1 \[\d+/2\]", test_b)
    assert test_b.count("[frame/attempt] is torch's compile id") == 1
