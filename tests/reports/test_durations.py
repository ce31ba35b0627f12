"""Compile time per test: ``--recompile-durations=N``, first compiles and recompiles apart in
the JSON report and JUnit properties, cold or warm compile caches, and the header's warning
where ``torch.compiler.config.job_id`` is set."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch._dynamo
import torch.compiler.config
from docblocks import assert_pasted, checked_blocks
from runs import run_of
from snippets import DOUBLE, HEADER, assert_bad_ini, inner_args, read_json

from pytest_recompile.model.names import PREFIX
from pytest_recompile.recording.freeze import no_caches
from pytest_recompile.reports.durations import (
    FUNCTIONS_HEADING,
    NO_GATED_TEST,
    TESTS_HEADING,
    duration_lines,
    job_id_line,
    title,
)
from pytest_recompile.reports.json_report import SCHEMA_FILE
from pytest_recompile.settings import DURATIONS_EXPECTED

SUITE = (
    DOUBLE
    + """
@torch.compile(backend="eager")
def big(x):
    for _ in range(500):
        x = x.sin() + 1
    return x

def test_big():
    big(torch.ones(2))

def test_shapes():
    double(torch.ones(2))
    double(torch.ones(3, 3))

def test_small():
    double(torch.ones(4, 4, 4))

def test_not_torch():
    pass
"""
)

SECONDS = re.compile(r"^  (\d+\.\d\d)s = (\d+\.\d\d)s first \+ (\d+\.\d\d)s recompiles  (\S+)")


def section(output: str, count: int) -> dict[str, list[tuple[float, float, float, str]]]:
    """The durations section's entries under each heading: (seconds, first, recompiles, name)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {title(count)} " in line)
    found: dict[str, list[tuple[float, float, float, str]]] = {}
    heading = ""
    for line in lines[start + 1 :]:
        if line.startswith(("=", "(")):
            break
        if not line.startswith("  "):
            heading = line
            found[heading] = []
            continue
        match = SECONDS.match(line)
        assert match is not None, line
        total, first, again, name = match.groups()
        found[heading].append((float(total), float(first), float(again), name))
    return found


def test_the_test_that_compiled_most_comes_first(run) -> None:
    result = run(SUITE, "--recompile-budget=1", "--recompile-durations=2")
    result.assert_outcomes(passed=4)
    found = section(result.stdout.str(), 2)
    tests, functions = found[TESTS_HEADING], found[FUNCTIONS_HEADING]
    assert len(tests) == len(functions) == 2  # N respected
    # Which test or function compiled longest is the machine's to say (a first compile in the
    # process also pays Dynamo's warm-up): what is asserted is the order and the split.
    for rows in (tests, functions):
        assert [row[0] for row in rows] == sorted((row[0] for row in rows), reverse=True)
        assert all(row[0] > 0 for row in rows)
    assert "test_it.py::test_not_torch" not in {row[3] for row in tests}
    big = {row[3]: row for row in tests}.get("test_it.py::test_big")
    if big is not None:  # a first compile only, nothing recompiled
        seconds, first, again, _ = big
        assert (first, again) == (seconds, 0)


def test_zero_lists_all_and_splits_first_compiles_from_recompiles(run) -> None:
    result = run(
        SUITE, "--recompile-budget=1", "--recompile-durations=0", "-vv", "--recompile-report=r.json"
    )
    found = section(result.stdout.str(), 0)
    tests = {name: rest for *rest, name in found[TESTS_HEADING]}
    assert set(tests) == {f"test_it.py::test_{n}" for n in ("big", "shapes", "small", "not_torch")}
    total, first, again = tests["test_it.py::test_shapes"]
    assert abs(first + again - total) <= 0.011  # each rounded to 0.01 s
    # Unrounded, in the report: both parts ran (a part can round to 0.00 s on a fast machine).
    (shapes,) = [t for t in read_json("r.json")["tests"] if t["nodeid"].endswith("test_shapes")]
    assert shapes["recompile_seconds"] > 0
    assert shapes["first_compile_seconds"] > 0
    assert tests["test_it.py::test_not_torch"] == [0.0, 0.0, 0.0]  # shown under -vv
    (double,) = [f for f in found[FUNCTIONS_HEADING] if f[3] == "double"]
    assert double[2] == again  # the one recompile is test_shapes'


def test_short_entries_are_hidden_without_vv(run) -> None:
    result = run(SUITE, "--recompile-budget=1", "--recompile-durations=0")
    # test_not_torch compiles nothing: always hidden; a small compile is hidden or not by
    # the machine's speed (under load, 0.004 s or 0.006 s).
    hidden = re.search(
        r"^\((\d+) durations? < 0\.005s hidden\.  Use -vv to show these durations\.\)$",
        result.stdout.str(),
        re.MULTILINE,
    )
    assert hidden is not None, result.stdout.str()
    assert int(hidden.group(1)) >= 1
    found = section(result.stdout.str(), 0)
    shown = [entry for entries in found.values() for entry in entries]
    assert "test_it.py::test_not_torch" not in [name for *_, name in shown]
    assert all(seconds >= 0.01 for seconds, *_ in shown)  # 0.005 s and more, rounded


def test_ini_twin(run, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrecompile_durations = 1\n")
    result = run(SUITE, "--recompile-budget=1")
    found = section(result.stdout.str(), 1)
    assert [name for *_, name in found[TESTS_HEADING]] == ["test_it.py::test_big"]


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "\u00b2"])
def test_bad_cli_value(run, value: str) -> None:
    result = run("def test_x():\n    pass\n", f"--recompile-durations={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{PREFIX} --recompile-durations: {DURATIONS_EXPECTED}, got*"])


def test_bad_ini_value(run, pytester: pytest.Pytester) -> None:
    assert_bad_ini(
        run,
        pytester,
        "recompile_durations = all",
        f"*{PREFIX} ini option recompile_durations: {DURATIONS_EXPECTED}, got 'all'*",
    )


def test_a_superscript_digit_is_no_count(run, pytester: pytest.Pytester) -> None:
    """``str.isdigit`` takes "²", ``int`` refuses it: a usage error, never an internal one."""
    assert_bad_ini(
        run,
        pytester,
        "recompile_durations = \u00b2",
        f"*{PREFIX} ini option recompile_durations: {DURATIONS_EXPECTED}, got '\u00b2'*",
    )


def test_without_a_gated_test_the_section_says_so(run) -> None:
    result = run("def test_x():\n    pass\n", "--recompile-durations=3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*= {title(3)} =*", NO_GATED_TEST])


def load_junit(path: Path) -> dict[str, dict[str, str]]:
    cases = ET.parse(path).getroot().iter("testcase")
    return {
        str(c.get("name")): {str(p.get("name")): str(p.get("value")) for p in c.iter("property")}
        for c in cases
    }


def test_json_and_junit_split_first_compiles_from_recompiles(
    run, pytester: pytest.Pytester
) -> None:
    result = run(SUITE, "--recompile-budget=1", "--recompile-report=r.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=4)
    report: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(Path(SCHEMA_FILE).read_text()))
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    for test in tests.values():
        assert abs(test["first_compile_seconds"] + test["recompile_seconds"]
                   - test["compile_seconds"]) <= 2e-6  # fmt: skip
        assert test["caches"] == no_caches()  # the eager backend asks no cache
        for fn in test["functions"]:
            assert abs(fn["first_compile_seconds"] + fn["recompile_seconds"]
                       - fn["compile_seconds"]) <= 2e-6  # fmt: skip
    shapes = tests["test_shapes"]
    assert shapes["recompile_seconds"] > 0
    assert shapes["first_compile_seconds"] > 0
    assert tests["test_big"]["first_compile_seconds"] == tests["test_big"]["compile_seconds"] > 0
    summary = report["summary"]
    assert summary["first_compile_seconds"] == pytest.approx(
        sum(t["first_compile_seconds"] for t in tests.values()), abs=1e-5
    )

    junit = load_junit(pytester.path / "j.xml")
    for name, test in tests.items():
        props = junit[name]
        assert float(props["recompile_compile_seconds"]) == test["compile_seconds"]
        assert float(props["recompile_first_compile_seconds"]) == test["first_compile_seconds"]
        assert props["recompile_caches"] == ""  # no cache asked


def test_user_properties_are_filled_only_for_junit_xml(run, pytester: pytest.Pytester) -> None:
    """The figures go on a gated test's user properties only where JUnit XML reads them:
    without ``--junitxml`` every test's teardown report (which xdist ships to the controller)
    stays as the test left it."""
    pytester.makeconftest(
        """
        import json

        def pytest_runtest_logreport(report):
            if report.when == "teardown":
                with open("props.jsonl", "a") as f:
                    f.write(json.dumps([p[0] for p in report.user_properties]) + "\\n")
        """
    )
    plain = run(SUITE, "--recompile-budget=1")
    plain.assert_outcomes(passed=4)
    seen = (pytester.path / "props.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in seen] == [[]] * 4
    (pytester.path / "props.jsonl").unlink()
    junit = run(SUITE, "--recompile-budget=1", "--junitxml=j.xml")
    junit.assert_outcomes(passed=4)
    seen = (pytester.path / "props.jsonl").read_text().splitlines()
    assert all("recompiles" in json.loads(line) for line in seen)
    assert len(seen) == 4


def test_job_id_set_in_a_conftest_is_told_in_the_header(run, pytester: pytest.Pytester) -> None:
    plain = run("def test_x():\n    pass\n", "--recompile-budget", "--co")
    assert "torch.compiler.config.job_id" not in plain.stdout.str()
    pytester.makeconftest("import torch.compiler.config\ntorch.compiler.config.job_id = 'ci-7'\n")
    saved = torch.compiler.config.job_id
    try:
        result = run("def test_x():\n    pass\n", "--recompile-budget", "--co")
    finally:  # what the inner conftest set, put back
        torch.compiler.config.job_id = saved
    result.stdout.fnmatch_lines(["recompile gate: active*", job_id_line("ci-7")])


@pytest.mark.subprocess
def test_job_id_from_the_environment_without_importing_torch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_COMPILE_JOB_ID", "runner-3")
    pytester.makepyfile(test_it="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(*inner_args("--recompile-budget", "-p", "no:randomly"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recompile gate: active*", job_id_line("runner-3")])


@pytest.mark.xdist
def test_the_same_section_under_xdist(run, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=HEADER + SUITE)
    args = ("--recompile-budget=1", "--recompile-durations=0", "-vv", "-p", "no:randomly")
    serial = pytester.runpytest_subprocess(*inner_args(*args))
    xdist = pytester.runpytest_subprocess(*inner_args(*args, "-p", "xdist", "-n", "2"))
    xdist.assert_outcomes(passed=4)
    seen = []
    for result in (serial, xdist):
        found = section(result.stdout.str(), 0)
        tests = found[TESTS_HEADING]
        assert tests[0][3] == "test_it.py::test_big"
        assert tests[0][0] > 0
        seen.append(
            (sorted(name for *_, name in tests), sorted(n for *_, n in found[FUNCTIONS_HEADING]))
        )
    assert seen[0] == seen[1]


@pytest.mark.inductor
def test_inductor_caches_cold_then_warm(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two functions that compile the same graph: the first finds inductor's and
    AOTAutograd's caches empty (a cold runner), the second finds them filled (a warm one)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    pytester.makepyfile(
        test_it=HEADER
        + """
def test_cold():
    torch.compile(lambda x: x.sin() + 1)(torch.ones(4))

def test_warm():
    torch.compile(lambda x: x.sin() + 1)(torch.ones(4))
"""
    )
    args = inner_args(
        "--recompile-budget", "--recompile-durations=0", "--recompile-report=r.json",
        "-p", "no:randomly",
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
    tests = {
        t["nodeid"].split("::")[1]: t
        for t in json.loads((pytester.path / "r.json").read_text())["tests"]
    }
    for cache in ("fx_graph", "aot_autograd"):
        cold, warm = tests["test_cold"]["caches"][cache], tests["test_warm"]["caches"][cache]
        assert (cold["hits"], warm["misses"]) == (0, 0), (cache, cold, warm)
        assert cold["misses"] >= 1, (cache, cold)
        assert warm["hits"] >= 1, (cache, warm)
    result.stdout.fnmatch_lines(
        ["*s recompiles  test_it.py::test_cold  [[]cold: fx_graph 0 hits, 1 miss; *]"]
    )
    result.stdout.fnmatch_lines(["*s recompiles  test_it.py::test_warm  [[]warm: fx_graph 1 hit*]"])


def test_lines_from_results_and_fixtures() -> None:
    """The section, pure: wider fixtures count under their own name, functions add up over
    the tests and fixtures that compiled them, and N caps each list."""
    fn: Any = {"qualname": "step", "file": "/r/m.py", "line": 3}
    one: Any = {
        "compile_seconds": 0.5,
        "first_compile_seconds": 0.2,
        "recompile_seconds": 0.3,
        "caches": {
            "fx_graph": {"hits": 2, "misses": 0, "bypasses": 0},
            "aot_autograd": {"hits": 2, "misses": 0, "bypasses": 0},
        },
        "functions": [{**fn, "compile_seconds": 0.5, "recompile_seconds": 0.3}],
    }
    fixture: Any = {
        "fixture": "module fixture 'warmed'",
        "node": "m.py",
        "compile_seconds": 0.25,
        "recompile_seconds": 0.0,
        "functions": [{**fn, "compile_seconds": 0.25, "recompile_seconds": 0.0}],
    }
    run = run_of(tests={"m.py::test_a": ("passed", one)}, fixtures=[fixture])
    lines = duration_lines(run, 5, root="/r")
    assert lines == [
        TESTS_HEADING,
        "  0.50s = 0.20s first + 0.30s recompiles  m.py::test_a  "
        "[warm: fx_graph 2 hits, 0 misses; aot_autograd 2 hits, 0 misses]",
        "  0.25s = 0.25s first + 0.00s recompiles  module fixture 'warmed' (set up for m.py)",
        FUNCTIONS_HEADING,
        "  0.75s = 0.45s first + 0.30s recompiles  step (m.py:3), in 1 test, 1 fixture",
    ]
    assert duration_lines(run, 1, root="/r")[1:2] == lines[1:2]
    assert duration_lines(run_of(), 1, root="/r") == [NO_GATED_TEST]


def test_the_documented_example(
    request: pytest.FixtureRequest, run, pytester: pytest.Pytester
) -> None:
    source, pasted = checked_blocks(request)
    pytester.makepyfile(test_model=source.text)  # as written: its line numbers are pasted
    torch._dynamo.reset()  # a fresh process's state, as ``run`` gives
    result = pytester.runpytest(*inner_args(
        "--recompile-budget=1", "--recompile-durations=5", "-p", "no:randomly", "-p", "no:logging"
    ))  # fmt: skip
    result.assert_outcomes(passed=2)
    assert_pasted(pasted, result.stdout.str())
