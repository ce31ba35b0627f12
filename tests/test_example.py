"""The bundled examples, run the way the README and the docs run them (default inductor
backend), against the output pasted there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from docblocks import ROOT, assert_pasted, checked_blocks, readme_example_args
from snippets import AUTOLOAD_OFF, GLOO_RANK_KILLED, inner_args

EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.subprocess  # each runs the example in a fresh pytest process


def test_example_catches_the_step_counter_and_passes_the_fix(
    request: pytest.FixtureRequest, pytester: pytest.Pytester
) -> None:
    (pasted,) = checked_blocks(request)  # the README's "What a failure looks like"
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    shutil.copy(ROOT / "pyproject.toml", pytester.path)  # run from a checkout, as the README
    result = pytester.runpytest_subprocess(*inner_args(*readme_example_args(), "-p", "no:randomly"))
    result.assert_outcomes(failed=1, passed=1)
    assert_pasted(pasted, result.stdout.str())
    unguarded = pytester.runpytest_subprocess(*inner_args("examples", "-p", "no:randomly"))
    unguarded.assert_outcomes(passed=2)  # without the gate the bug goes unnoticed


def test_the_ci_workflow_command_works_as_written(
    request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on GitHub Actions: annotations, and the job summary appended to the step's file.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step_summary.md"))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    workflow = (EXAMPLES / "github-actions.yml").read_text()
    (command,) = [
        line.split("run:", 1)[1].split() for line in workflow.splitlines() if "run: pytest" in line
    ]
    assert command[:2] == ["pytest", "--recompile-budget"]
    found = checked_blocks(request)  # the README's "CI in five lines" and docs/ci.md
    for block in found:
        if block.lang == "shell":
            assert [c.split() for c in block.commands] == [command], block
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    result = pytester.runpytest_subprocess(
        *inner_args(*command[1:], "examples", "-p", "xdist", "-p", "no:randomly")
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*2 workers*",
            "report written to recompiles.json",
            "Markdown summary written to recompiles.md",
        ]
    )
    report = json.loads((pytester.path / "recompiles.json").read_text())
    assert report["summary"]["broke_the_gate"] == 1
    markdown = (pytester.path / "recompiles.md").read_text()
    assert (pytester.path / "step_summary.md").read_text() == markdown
    (annotations,) = [block for block in found if block.lang == "text"]
    assert_pasted(annotations, result.stdout.str())
    (summary,) = [block for block in found if block.lang == "markdown"]
    assert_pasted(summary, markdown)

    # The pull-request step: its compare commands, as written, against main's report (here the
    # same run's, so nothing changed and the step passes).
    (pytester.path / "main-report").mkdir()
    shutil.copy(pytester.path / "recompiles.json", pytester.path / "main-report")
    (step,) = [block for block in found if block.lang == "yaml"]  # docs/compare.md's
    assert step.text in workflow
    compares = [
        line.strip() for line in workflow.splitlines() if "pytest-recompile compare" in line
    ]
    assert len(compares) == 2
    for line in compares:
        line = line.replace('"$GITHUB_STEP_SUMMARY"', "step_summary.md")
        bin_dir = os.path.dirname(sys.executable)  # where pip put the console script
        path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        done = subprocess.run(
            line,
            shell=True,
            cwd=pytester.path,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PATH": path},
        )
        assert done.returncode == 0, done.stderr
    text = (pytester.path / "step_summary.md").read_text()
    assert text.endswith("**no change**\n")


@GLOO_RANK_KILLED
def test_the_readme_ddp_failure_is_what_the_example_prints(request: pytest.FixtureRequest) -> None:
    """The DDP failure pasted in docs/processes.md, against a real run of the example."""
    (pasted,) = checked_blocks(request)
    (command,) = pasted.commands
    assert command == "pytest examples/ddp_example.py --recompile-budget"
    module, *args = command.split()
    args = inner_args(*args, "-p", "no:randomly", "-p", "no:cacheprovider")
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, env=os.environ | AUTOLOAD_OFF, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "terminated with signal" not in proc.stdout, proc.stdout[-3000:]
    assert_pasted(pasted, proc.stdout)
    assert "1 failed, 1 passed" in proc.stdout.splitlines()[-1]
