"""``pytest-recompile compare``: two real JSON reports in, what changed out; bad input exits 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from snippets import GUARD_LINES, inner_args

from pytest_recompile.cli import main
from pytest_recompile.reports.json_report import REPORT_VERSION
from pytest_recompile.reports.schema import INTEGRAL_FLOAT

BASE = """
import torch

step = 0


@torch.compile(backend="eager")
def f(x):
    return x + 1


def test_steps():
    global step
    for step in range(3):
        f(torch.ones(2))


def test_breaks():
    f(torch.ones(3))


def test_only_in_base():
    f(torch.ones(4))


def test_limit():
    for n in range(1, 4):
        f(torch.ones(5))
"""

# The branch: f reads the step counter (a recompile per step) and breaks its graph in one test.
HEAD = """
import torch

step = 0


@torch.compile(backend="eager")
def f(x):
    return x + step


@torch.compile(backend="eager")
def g(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def test_steps():
    global step
    for step in range(3):
        f(torch.ones(2))


def test_breaks():
    g(torch.ones(3))


def test_only_in_head():
    f(torch.ones(4))


@torch.compile(backend="eager", dynamic=False)
def h(x):
    return x * 3


def test_limit():  # the branch: a new length per call, under a low limit
    with torch._dynamo.config.patch(recompile_limit=2):
        for n in range(1, 4):
            h(torch.ones(n))
"""


@pytest.fixture
def reports(run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """base.json and head.json, written by real runs of the two suites (report-only: every
    recompile counted), in the working directory."""
    for name, source in (("base", BASE), ("head", HEAD)):
        (pytester.path / "test_suite.py").write_text(source)
        args = (
            "--recompile-budget",
            "--recompile-mode=report-only",
            f"--recompile-report={name}.json",
        )
        result = pytester.runpytest(*inner_args(*args, "-p", "no:randomly"))
        result.assert_outcomes(passed=4)
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
    monkeypatch.chdir(pytester.path)
    return pytester.path


def test_what_a_branch_changed(reports: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "base.json", "head.json"]) == 1  # worse on recompiles
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "pytest-recompile compare: base.json -> head.json"
    assert "environment:" not in out  # one torch, one machine: nothing to say
    steps = out.split("test_suite.py::test_steps\n")[1]
    assert steps.startswith("  recompiles 0 -> 2 (+2)\n")
    site = " from test_suite.py:9" if GUARD_LINES else ""  # where torch names the line
    assert (
        f"  f: recompiles 0 -> 2 (+2; failing guards: EQUALS_MATCH{site}), "
        "cache entries 1 -> 3 (+2)"
    ) in steps
    breaks = out.split("test_suite.py::test_breaks\n")[1]
    assert "  graph breaks 0 -> 1 (+1; new at " in breaks
    assert "test_suite.py:15 in g: " in breaks
    assert "only in base.json: test_suite.py::test_only_in_base" in out
    assert "only in head.json: test_suite.py::test_only_in_head" in out
    verdict = out.splitlines()[-1]
    assert verdict.startswith("verdict: HEAD is worse: 3 more recompiles (2 tests), ")
    assert "1 more graph break (1 test)" in verdict
    limit = out.split("test_suite.py::test_limit\n")[1]
    assert "  h: recompiles 0 -> 1 (+1; failing guards: TENSOR_MATCH(size))" in limit
    assert ", limit hits 0 -> 1 (+1)" in limit
    assert "1 more recompile_limit hit (1 test)" in verdict
    assert verdict.endswith("; 2 tests in one run only")

    # The other way: better on what fails by default, worse on cache entries only (in
    # test_breaks and test_limit, base's f holds an entry where the branch calls g or h).
    assert main(["compare", "head.json", "base.json"]) == 0
    back = capsys.readouterr().out.splitlines()[-1]
    assert back.startswith("verdict: HEAD is worse where --fail-on does not look: ")
    assert "; better: 3 fewer recompiles (2 tests), " in back

    assert main(["compare", "base.json", "base.json"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "pytest-recompile compare: base.json -> base.json",
        "verdict: no change",
    ]


def test_fail_on_names_what_fails(reports: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # compile seconds: the branch's changed by less than --seconds, so not worse on them
    assert main(["compare", "base.json", "head.json", "--fail-on", "compile-seconds"]) == 0
    out = capsys.readouterr().out
    assert "verdict: HEAD is worse where --fail-on does not look: 3 more recompiles" in out
    assert main(["compare", "base.json", "head.json", "--fail-on=graph-breaks"]) == 1
    assert main(["compare", "base.json", "head.json", "--fail-on=limit-hits"]) == 1
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "base.json", "head.json", "--fail-on", "recompile"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown measure 'recompile'; accepted: recompiles, cache-entries, guards" in err


def test_environment_first_and_other_formats(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = json.loads((reports / "head.json").read_text())
    old = head["environment"]["torch"]
    head["environment"]["torch"] = "2.99.0"  # as a report of a newer torch would say
    (reports / "newer.json").write_text(json.dumps(head))
    assert main(["compare", "base.json", "newer.json"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"environment: torch {old} -> 2.99.0"

    assert main(["compare", "base.json", "newer.json", "--format", "markdown"]) == 1
    markdown = capsys.readouterr().out
    assert markdown.startswith("## torch.compile recompiles: `base.json` -> `newer.json`\n")
    assert f"| torch | `{old}` | `2.99.0` |" in markdown
    assert "| `test_suite.py::test_steps` | recompiles 0 -> 2 (+2)<br>f: recompiles" in markdown

    assert main(["compare", "base.json", "newer.json", "--format=json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["environment"] == [{"field": "torch", "base": old, "head": "2.99.0"}]
    # head.json's test_steps makes two more graphs: its recompiles' (counted work)
    assert document["failed"] == ["recompiles", "graph-breaks", "limit-hits", "graphs"]
    steps = next(t for t in document["tests"] if t["nodeid"] == "test_suite.py::test_steps")
    assert {"measure": "recompiles", "function": None, "base": 0, "head": 2}.items() <= steps[
        "changes"
    ][0].items()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "base.json: no such file"),
        ("not json", "base.json: not valid JSON: Expecting value"),
        ('{"schema": "pytest-recompile/report", "version": 1, "tests": [', "(truncated?)"),
        ('{"tests": []}', "base.json: not a pytest-recompile report (expected a JSON object with"),
        ("[1, 2]", "base.json: not a pytest-recompile report"),
        (
            json.dumps({"schema": "pytest-recompile/report", "version": REPORT_VERSION + 1}),
            f"base.json: report schema version {REPORT_VERSION + 1} (a newer pytest-recompile "
            f"wrote it); this pytest-recompile reads version {REPORT_VERSION}",
        ),
        (
            json.dumps(
                {"schema": "pytest-recompile/report", "version": REPORT_VERSION, "tests": 3}
            ),
            "base.json: does not fit the report schema: the document: missing required field "
            "'created'",
        ),
    ],
    ids=["missing", "not-json", "truncated", "not-a-report", "a-list", "newer-schema", "no-tests"],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "base.json").write_text(content)
    (tmp_path / "head.json").write_text(
        json.dumps({"schema": "pytest-recompile/report", "version": REPORT_VERSION, "tests": []})
    )
    assert main(["compare", "base.json", "head.json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith("pytest-recompile compare: ")
    assert said in captured.err


@pytest.mark.subprocess
def test_the_console_script_and_python_m(reports: Path) -> None:
    script = shutil.which("pytest-recompile", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed beside the Python"
    for command in ([script], [sys.executable, "-m", "pytest_recompile"]):
        done = subprocess.run(
            [*command, "compare", "base.json", "head.json"],
            capture_output=True,
            text=True,
            cwd=reports,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert done.stdout.startswith("pytest-recompile compare: base.json -> head.json\n")
    # It runs where neither torch nor pytest is imported: a CI step of a fraction of a second.
    timed = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "pytest_recompile",
            "compare",
            "base.json",
            "head.json",
        ],
        capture_output=True,
        text=True,
        cwd=reports,
        check=False,
    )
    imported = {line.rpartition("|")[2].strip() for line in timed.stderr.splitlines()}
    assert "pytest_recompile.reports.compare" in imported
    assert not {"torch", "pytest", "_pytest"} & imported


MOVES_BASE = """
import torch


@torch.compile(backend="eager")
def f(x):
    return x + 1


@torch.compile(backend="eager")
def g(x):
    return x * 2


@torch.compile(backend="eager")
def talk(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def test_moves():
    f(torch.ones(2))
    f(torch.ones(2, 2))  # a recompile of f (rank)
    g(torch.ones(2))


def test_break():
    talk(torch.ones(2))
"""

# HEAD: the recompile moves from f to g, and the graph break one line lower.
MOVES_HEAD = MOVES_BASE.replace(
    "    f(torch.ones(2, 2))  # a recompile of f (rank)\n    g(torch.ones(2))",
    "    g(torch.ones(2))\n    g(torch.ones(2, 2))  # a recompile of g (rank)",
).replace(
    "    x = x + 1\n    torch._dynamo.graph_break()",
    "    x = x + 1\n    x = x - 0\n    torch._dynamo.graph_break()",
)


def test_a_moved_recompile_is_worse_and_a_moved_break_is_a_move(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    assert MOVES_HEAD.count("a recompile of g") == 1
    assert MOVES_HEAD.count("x - 0") == 1
    for name, source in (("base", MOVES_BASE), ("head", MOVES_HEAD)):
        (pytester.path / "test_suite.py").write_text(source)
        args = (
            "--recompile-budget",
            "--recompile-mode=report-only",
            f"--recompile-report={name}.json",
        )
        pytester.runpytest(*inner_args(*args, "-p", "no:randomly")).assert_outcomes(passed=2)
        sys.modules["torch._dynamo"].reset()
    monkeypatch.chdir(pytester.path)
    # g recompiles where it did not: docs/compare.md compares each function's recompiles.
    assert main(["compare", "base.json", "head.json"]) == 1
    out = capsys.readouterr().out
    pytest.LineMatcher(out.splitlines()).fnmatch_lines(
        [
            "test_suite.py::test_break",
            "  graph break moved from test_suite.py:18 in talk to test_suite.py:19 in talk: *",
            "test_suite.py::test_moves",
            "  f: recompiles 1 -> 0 (-1), cache entries 2 -> 1 (-1)*",
            "  g: recompiles 0 -> 1 (+1; failing guards: TENSOR_MATCH(rank)), cache *",
            "verdict: HEAD is worse: 1 more recompile (1 test), 1 more cache entry (1 test)*; "
            "better: 1 fewer recompile (1 test), 1 fewer cache entry (1 test)*; graph breaks "
            "moved to other lines (1 test)",
        ]
    )
    # The break alone, moved: no better, no worse, exit 0.
    assert main(["compare", "base.json", "head.json", "--fail-on=graph-breaks"]) == 0
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert "new graph breaks" not in verdict
    assert "graph breaks moved to other lines (1 test)" in verdict


def _at(data: Any, path: str) -> tuple[Any, str]:
    """The container of ``path`` (``tests.0.functions``) in ``data``, and its last key."""
    *parents, last = path.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data, last


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("environment", "torch", "environment: expected object, got string"),
        ("environment.torch", 2, "environment.torch: expected string or null, got integer"),
        ("settings.mode", "sometimes", 'settings.mode: expected one of "fail-fast", "at-end"'),
        ("summary.recompiles", "3", "summary.recompiles: expected integer, got string"),
        ("tests", {}, "tests: expected array, got object"),
        ("tests.0", [], "tests[0]: expected object, got array"),
        ("tests.0.functions", "f", "tests[0].functions: expected array, got string"),
        ("tests.0.recompiles", -1, "tests[0].recompiles: expected at least 0, got -1"),
        ("tests.0.functions.0.qualname", None, "tests[0].functions[0].qualname: expected string"),
        (
            "tests.0.functions.0.recompiles.0.reasons",
            "x",
            "tests[0].functions[0].recompiles[0].reasons: expected array, got string",
        ),
        ("fixtures", None, "fixtures: expected array, got null"),
        ("recompile_limit.suggested", 1.5, "recompile_limit.suggested: expected integer"),
        ("tests.0.recompiles", None, "tests[0].recompiles: expected integer, got null"),
        (
            "summary.recompiles",
            1.0,
            f"summary.recompiles: expected integer, got 1.0: {INTEGRAL_FLOAT}",
        ),
    ],
)
def test_every_misfit_of_a_real_report_is_one_line_naming_the_field(
    reports: Path, capsys: pytest.CaptureFixture[str], path: str, value: Any, said: str
) -> None:
    data = json.loads((reports / "head.json").read_text())
    data["tests"].sort(key=lambda t: -len(t["functions"][0]["recompiles"]))  # a recompile first
    container, key = _at(data, path)
    container[int(key) if isinstance(container, list) else key] = value
    (reports / "bad.json").write_text(json.dumps(data))
    assert main(["compare", "bad.json", "base.json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        next(line for line in captured.err.splitlines() if line.startswith("pytest-recompile"))
    ]
    assert f"pytest-recompile compare: bad.json: does not fit the report schema: {said}" in (
        captured.err
    )


@pytest.mark.parametrize("field", ["environment", "tests", "recompile_limit", "schema"])
def test_a_report_without_a_required_field_is_one_line(
    reports: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    data = json.loads((reports / "base.json").read_text())
    del data[field]
    (reports / "bad.json").write_text(json.dumps(data))
    assert main(["compare", "base.json", "bad.json"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    if field == "schema":
        assert "bad.json: not a pytest-recompile report" in err
    else:
        missing = f"the document: missing required field '{field}'"
        assert f"bad.json: does not fit the report schema: {missing}" in err


def test_a_graph_break_replaced_by_another_is_worse() -> None:
    from pytest_recompile.reports.compare import TestFigures, test_changes

    def breaks(sites: dict[str, str]) -> TestFigures:
        return TestFigures("passed", 0, 0.0, sites, 0, {})

    before = breaks({"a.py:1 in f": "print"})
    (replaced,) = test_changes(before, breaks({"a.py:9 in f": "data-dependent"}), 1.0)
    assert replaced.worse
    (moved,) = test_changes(before, breaks({"a.py:2 in f": "print"}), 1.0)
    assert not moved.worse
    assert not moved.better


def test_an_incomplete_report_is_said(reports: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((reports / "head.json").read_text())
    data["complete"], data["incomplete"] = False, "stopping after 1 failures"
    (reports / "cut.json").write_text(json.dumps(data))
    main(["compare", "base.json", "cut.json"])
    out = capsys.readouterr().out
    assert "incomplete: cut.json: stopping after 1 failures" in out
    assert out.splitlines()[-1].endswith("; cut.json covers only the tests that ran (incomplete)")


def test_compile_seconds_an_earlier_test_saved_are_no_change(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under ``-n 2`` (or in shards) a test whose first compile an earlier test's answered in
    the whole run runs in another worker and pays that compile: the seconds reuse saved are
    counted as the test's own on both sides, so lost reuse is no regression; a real rise is."""
    base = json.loads((reports / "base.json").read_text())
    test = base["tests"][0]
    test.update(compile_seconds=0.25, saved_seconds=3.0, reused=1)
    (reports / "whole.json").write_text(json.dumps(base))
    test.update(compile_seconds=3.25, saved_seconds=0.0, reused=0)  # reuse lost, same cost
    (reports / "workers.json").write_text(json.dumps(base))
    assert main(["compare", "whole.json", "workers.json"]) == 0
    assert capsys.readouterr().out.endswith("verdict: no change\n")
    test.update(compile_seconds=5.25)  # two seconds more than alone: said, not judged
    (reports / "slower.json").write_text(json.dumps(base))
    assert main(["compare", "whole.json", "slower.json"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"  compile seconds {3.25:.2f} s -> {5.25:.2f} s (within noise: each compile is timed "
        "once: the counted work decides)",
        "verdict: no change",
    ]


def test_an_integral_float_is_where_the_checker_is_stricter_than_jsonschema(
    reports: Path,
) -> None:
    """docs/reports.md: jsonschema takes 1.0 for an integer; the plugin's checker does not,
    and says why (every other misfit above, jsonschema refuses too)."""
    import jsonschema

    from pytest_recompile.reports.schema import SCHEMA_FILE, misfit

    data = json.loads((reports / "base.json").read_text())
    data["summary"]["recompiles"] = float(data["summary"]["recompiles"])
    jsonschema.validate(data, json.loads(Path(SCHEMA_FILE).read_text()))
    assert misfit(data) == (
        f"summary.recompiles: expected integer, got {data['summary']['recompiles']!r}: "
        f"{INTEGRAL_FLOAT}"
    )


def test_uncovered_points_and_slower_guard_checks_are_changes() -> None:
    """A certificate with more uncovered points is worse (failed on by default); a guard
    check is shown slower only past 1.5 times and a microsecond (it is measured: noisy), and
    counts as slower only where the two runs' 31 timed checks do not overlap."""
    from pytest_recompile.reports.compare import (
        DEFAULT_FAIL_ON,
        FunctionFigures,
        function_changes,
    )

    (change,) = function_changes("f", FunctionFigures(uncovered=0), FunctionFigures(uncovered=2))
    assert (change.measure, change.worse, change.text()) == (
        "uncovered",
        True,
        "uncovered 0 -> 2 (+2)",
    )
    assert "uncovered" in DEFAULT_FAIL_ON
    assert "guard-check" not in DEFAULT_FAIL_ON
    noise = function_changes("f", FunctionFigures(check_us=2.0), FunctionFigures(check_us=2.8))
    assert noise == []  # under 1.5 times
    tiny = function_changes("f", FunctionFigures(check_us=0.4), FunctionFigures(check_us=0.9))
    assert tiny == []  # under a microsecond
    (unknown,) = function_changes(
        "f", FunctionFigures(check_us=20.0), FunctionFigures(check_us=61.0)
    )
    assert (unknown.worse, unknown.better) == (False, False)  # no spread: not judged
    assert unknown.text() == (
        "guard check 20 us -> 61 us per call (within noise: a run without the spread of its "
        "repeated checks)"
    )
    spread = FunctionFigures(check_us=20.0, check_range=(18.0, 70.0))
    (overlapping,) = function_changes(
        "f", spread, FunctionFigures(check_us=61.0, check_range=(55.0, 90.0))
    )
    assert (overlapping.worse, overlapping.noise) == (
        False,
        "the 31 checks spread 18-70 us against 55-90 us",
    )
    base = FunctionFigures(check_us=20.0, check_range=(19.0, 25.0))
    head = FunctionFigures(check_us=61.0, check_range=(58.0, 80.0))
    (slower,) = function_changes("f", base, head)
    assert (slower.measure, slower.worse) == ("guard-check", True)
    assert slower.text() == "guard check 20 us -> 61 us per call"
    (faster,) = function_changes("f", head, base)
    assert faster.better
