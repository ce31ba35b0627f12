"""CI outputs: GitHub Actions annotations and job summary, the Markdown report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from runs import run_of
from snippets import DOUBLE, GUARD_LINES, HEADER, STEP, assert_bad_ini, inner_args

from pytest_recompile.model.names import PREFIX
from pytest_recompile.model.results import ReportSettings
from pytest_recompile.reports.ci import (
    MAX_ANNOTATIONS,
    TITLE,
    annotation_lines,
    def_line,
    escape_data,
    escape_property,
    markdown_summary,
)
from pytest_recompile.reports.terminal import INCOMPLETE

SUITE = (
    HEADER
    + STEP
    + DOUBLE
    + """
def test_clean():
    double(torch.ones(2))

def test_step_counter():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

@pytest.mark.max_recompiles(1)
def test_shapes():
    for n in range(1, 4):
        double(torch.ones(*[2] * n))
"""
)


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A GitHub Actions step: GITHUB_ACTIONS, and a job summary file that already holds
    another step's text."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier output\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    return summary


def annotations(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("::")]


@pytest.mark.subprocess
def test_annotations_and_job_summary_under_github_actions(
    run, pytester: pytest.Pytester, github: Path
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(*inner_args("--recompile-budget", "-p", "no:randomly"))
    result.assert_outcomes(passed=1, failed=2)
    found = annotations(result)
    # Worst first: double recompiled twice, f once; each with its fail-fast call site.
    assert found[0].startswith(
        "::error file=test_suite.py,line=12,title=test_suite.py%3A%3Atest_shapes%3A "
        "2 recompiles of double; budget 1 in total (@max_recompiles(1))::recompile 1 "
        "TENSOR_MATCH(rank): "
    )
    assert "%0Afix TENSOR_MATCH(rank): " in found[0]
    sites = [a for a in found if "the gate stopped this call" in a]
    assert len(sites) == 2
    assert any(a.startswith("::error file=test_suite.py,line=27,") for a in sites)  # double(...)
    f_line = [a for a in found if "1 recompile of f;" in a]
    assert f_line == [
        "::error file=test_suite.py,line=8,title=test_suite.py%3A%3Atest_step_counter%3A "
        "1 recompile of f; budget 0 in total (--recompile-budget=0)::recompile 1 EQUALS_MATCH: "
        "G['step'] == 0 (this call: 1)%0A"
        "fix EQUALS_MATCH: a Python value is baked into the graph as a constant: pass it as a "
        "tensor (torch.tensor(value)) so it is data, not code"
    ]
    # ... and on the line that read `step`, the line to change (torch names none for a rank)
    lines = [a for a in found if "this line installed the guard" in a]
    on_the_line = (
        "::error file=test_suite.py,line=9,title=test_suite.py%3A%3Atest_step_counter%3A "
        "this line installed the guard that failed in f::EQUALS_MATCH: G['step'] == 0 "
        "(this call: 1)%0Areturn x + step%0A"
        "fix EQUALS_MATCH: a Python value is baked into the graph as a constant: pass it as a "
        "tensor (torch.tensor(value)) so it is data, not code"
    )
    assert lines == ([on_the_line] if GUARD_LINES else [])
    assert len(found) == 4 + len(lines)
    text = github.read_text()
    assert text.startswith("# earlier output\n## torch.compile recompile gate\n")  # appended
    assert re.search(
        r"\*\*3 gated tests, 3 recompiles; 2 broke the gate, 0 hit recompile_limit; "
        r"recompiles cost \d+\.\d\d s\*\*",
        text,
    )
    assert (
        "| `test_suite.py::test_step_counter` | `f` `test_suite.py:7` | 1 | "
        "0 in total (--recompile-budget=0) | EQUALS_MATCH | "
        "`EQUALS_MATCH: G['step'] == 0 (this call: 1)` | "
        + ("`test_suite.py:9`" if GUARD_LINES else "—")
        + " | 0.00 |"
    ) in text
    assert (
        "| `test_suite.py::test_shapes` | `double` `test_suite.py:11` | 2 | "
        "1 in total (@max_recompiles(1)) |"
    ) in text
    assert "### Functions by recompile time" in text
    assert INCOMPLETE not in text


@pytest.mark.xdist
@pytest.mark.parametrize("gate", [("--recompile-budget",), ()], ids=["flag", "markers-only"])
def test_xdist_controller_alone_writes_them(
    run, pytester: pytest.Pytester, github: Path, gate: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        test_suite=SUITE.replace(
            "def test_step_counter", "@pytest.mark.max_recompiles(0)\ndef test_step_counter"
        )
    )
    result = pytester.runpytest_subprocess(
        *inner_args(
            *gate, "-p", "no:randomly", "-p", "xdist", "-n", "2", "--recompile-report-md=r.md"
        )
    )
    result.assert_outcomes(passed=1, failed=2)
    # as serial, not once per worker: 4, and one on the line that read `step` where torch names it
    assert len(annotations(result)) == (5 if GUARD_LINES else 4)
    assert github.read_text().count(f"## {TITLE}") == 1


@pytest.mark.parametrize(
    ("env", "option", "expected"),
    [
        ({"GITHUB_ACTIONS": "true"}, "--recompile-github=off", False),
        ({}, "--recompile-github=on", True),
        ({}, None, False),  # auto, outside GitHub Actions
        ({"GITHUB_ACTIONS": "false"}, None, False),
    ],
)
def test_github_option_and_auto(
    run,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    option: str | None,
    expected: bool,
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run(
        STEP + "def test_it():\n    global step\n    f(torch.ones(2)); step = 1; "
        "f(torch.ones(2))\n",
        "--recompile-budget",
        *([option] if option else []),
    )
    result.assert_outcomes(failed=1)
    assert bool(annotations(result)) is expected


def test_bad_github_ini_value(run, pytester: pytest.Pytester) -> None:
    assert_bad_ini(
        run,
        pytester,
        "recompile_github = maybe",
        f"*{PREFIX} ini option recompile_github: expected one of auto, on, off, got 'maybe'",
    )


@pytest.mark.subprocess
def test_markdown_report_option_ini_twin_and_incomplete_run(run, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nrecompile_report_md = reports/recompiles.md\n")
    result = pytester.runpytest_subprocess(
        *inner_args("--recompile-budget", "-p", "no:randomly", "-x")
    )
    result.stdout.fnmatch_lines(["Markdown summary written to */reports/recompiles.md"])
    text = (pytester.path / "reports" / "recompiles.md").read_text()
    assert text.startswith(f"## {TITLE}\n")
    assert f"> **Warning:** {INCOMPLETE}: stopping after 1 failures." in text
    assert not annotations(result)  # the Markdown file alone: no GitHub output
    cli = pytester.runpytest_subprocess(
        *inner_args("--recompile-budget", "-p", "no:randomly", "--recompile-report-md=cli.md")
    )
    cli.stdout.fnmatch_lines(["Markdown summary written to cli.md"])
    assert "| `test_suite.py::test_shapes` |" in (pytester.path / "cli.md").read_text()


# -- pure functions -------------------------------------------------------------------------


def test_annotations_sit_on_the_def_line(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("@torch.compile(\n    backend='eager',\n)\ndef f(x):\n    return x\n")
    assert def_line(str(source), 1) == 4
    assert def_line(str(source), 4) == 4
    assert def_line(str(tmp_path / "gone.py"), 7) == 7


def test_workflow_command_escaping() -> None:
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("t.py::test[a,b]: 1%") == "t.py%3A%3Atest[a%2Cb]%3A 1%25"


REPORT_ONLY: ReportSettings = {
    "default_budget": 0,
    "mode": "report-only",
    "keep_caches": False,
    "fullgraph": False,
    "baseline": None,
    "max_guards": None,
}


def fake_test(name: str, recompiles: int, *, limit: bool = False) -> dict[str, Any]:
    reason = {
        "kind": "EQUALS_MATCH",
        "detail": None,
        "source": "G['step']",
        "expected": "0",
        "actual": "1",
        "text": "G['step'] == 0",
        "entry": "0/0",
        "raw": "",
        "site": None,
        "own_site": None,
    }
    fn = {
        "name": name,
        "qualname": name,
        "file": f"/repo/src/{name}.py",
        "line": 3,
        "recompiles": [{"reasons": [reason]} for _ in range(recompiles)],
        "recompile_seconds": 0.5 * recompiles,
        "recompile_limit": "recompile_limit (8)" if limit else None,
        "limit_raised": False,
        "entries": [],
    }
    return {
        "budget": 0,
        "rules": "0 in total (--recompile-budget=0)",
        "baseline": None,
        "recompiles": recompiles,
        "recompile_seconds": 0.5 * recompiles,
        "violations": [{"kind": "total", "source": "x", "message": f"{recompiles} recompiles"}],
        "limit_hit": [name] if limit else [],
        "functions": [fn],
        "graph_breaks": [],
        "stopped_at": None,
    }


def test_at_most_ten_annotations_worst_first_then_a_notice() -> None:
    results: Any = {
        f"t.py::test_{i:02d}": ("failed", fake_test(f"fn{i:02d}", i + 1)) for i in range(12)
    }
    results["t.py::test_limit"] = ("failed", fake_test("looping", 1, limit=True))
    lines = annotation_lines(run_of(tests=results), "/repo")
    assert len(lines) == MAX_ANNOTATIONS + 1
    assert "test_limit" in lines[0]  # a fall-back to eager first
    assert "test_11" in lines[1]  # then by recompiles
    assert lines[0].startswith("::error file=src/looping.py,line=3,")
    assert lines[-1].startswith(f"::notice title={escape_property(TITLE)}::3 more recompile ")
    assert "job summary" in lines[-1]
    warned = annotation_lines(run_of(tests=results, settings=REPORT_ONLY), "/repo")
    assert warned[0].startswith("::warning file=src/looping.py,")


def test_markdown_never_exceeds_its_limit_and_says_what_it_left_out() -> None:
    results: Any = {f"t.py::test_{i:04d}": ("failed", fake_test("f", 2)) for i in range(3000)}
    full = markdown_summary(run_of(tests=results), root="/repo")
    assert full.count("| `t.py::test_") == 3000
    limit = 20_000
    cut = markdown_summary(run_of(tests=results), root="/repo", limit=limit)
    assert len(cut.encode()) <= limit
    shown = cut.count("| `t.py::test_")
    left = int(re.search(r"_(\d+) rows left out", cut).group(1))  # type: ignore[union-attr]
    assert 0 < shown < 3000
    assert shown + left == 3000 + 1  # every broken test's row, and the one function's row
    odd: Any = {"t.py::test_`a` | <x>": ("failed", fake_test("<lambda>", 1))}
    text = markdown_summary(run_of(tests=odd), root="/repo")
    assert "| `` t.py::test_`a` \\| <x> `` | `<lambda>` " in text  # a longer fence; no table break
    reportonly = markdown_summary(run_of(tests=odd, settings=REPORT_ONLY), root="/repo")
    assert "### Tests that would have broken the gate" in reportonly
    assert "1 would have broken the gate" in reportonly
    stopped = run_of(tests=odd, incomplete="<b>" + "y" * 5000)
    assert "&lt;b>" in markdown_summary(stopped, root="/")  # plain text never turns into HTML
    assert len(markdown_summary(stopped, root="/", limit=500)) <= 500
