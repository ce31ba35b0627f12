"""The bundled example, run the way the README runs it (default inductor backend)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from glob import escape as esc
from pathlib import Path

import pytest

from pytest_recompile.report import PREFIX, STOPPED

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_example_catches_the_step_counter_and_passes_the_fix(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    result = pytester.runpytest_subprocess("examples", "--recompile-budget", "-p", "no:randomly")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_train_with_python_step_counter _*",
            esc(
                f"{PREFIX} 1 recompile of warmup_loss (EQUALS_MATCH: G['global_step'] == 0), "
                "budget 0 (--recompile-budget=0)"
            ),
            "  warmup_loss  examples/tinytrainer/train.py:*",
            esc(
                "    recompile 1 [0/1] EQUALS_MATCH: G['global_step'] == 0 (this call: 1)   "
                f"<- {STOPPED}"
            ),
            "FAILED examples/test_tinytrainer.py::test_train_with_python_step_counter - *",
        ]
    )
    unguarded = pytester.runpytest_subprocess("examples", "-p", "no:randomly")
    unguarded.assert_outcomes(passed=2)  # without the gate the bug goes unnoticed


def test_the_ci_workflow_command_works_as_written(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
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
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    result = pytester.runpytest_subprocess(*command[1:], "examples", "-p", "no:randomly")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*2 workers*",
            "report written to recompiles.json",
            "Markdown summary written to recompiles.md",
            "::error file=examples/tinytrainer/train.py,line=31,title=*warmup_loss*",
            "::error file=examples/tinytrainer/train.py,line=59,title=*the gate stopped this call*",
        ]
    )
    report = json.loads((pytester.path / "recompiles.json").read_text())
    assert report["summary"]["broke_the_gate"] == 1
    markdown = (pytester.path / "recompiles.md").read_text()
    assert (pytester.path / "step_summary.md").read_text() == markdown
    assert "| `examples/test_tinytrainer.py::test_train_with_python_step_counter` |" in markdown


def _pasted(section: str) -> list[str]:
    """The output pasted in a README section's first code block, after its command line."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    body = readme.split(f"## {section}\n", 1)[1]
    block = body.split("```\n", 2)[1]
    return block.splitlines()


def test_the_readme_ddp_failure_is_what_the_example_prints() -> None:
    """The DDP failure pasted in the README, against a real run of the example (pids vary)."""
    command, *pasted = _pasted("Child processes and ranks")
    assert command == "$ pytest examples/ddp_example.py --recompile-budget"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *command.split()[2:], "-p", "no:randomly",
         "-p", "no:cacheprovider"],
        cwd=EXAMPLES.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    out = proc.stdout.splitlines()
    for line in pasted:
        pattern = re.escape(line)
        pattern = re.sub(r"pid\\ \d+", r"pid\\ \\d+", pattern)
        assert any(re.fullmatch(pattern, got) for got in out), (line, proc.stdout[-4000:])
    assert "1 failed, 1 passed" in out[-1]
