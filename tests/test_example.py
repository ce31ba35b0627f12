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


def workflow_step(line: str, where: object) -> subprocess.CompletedProcess[str]:
    """A workflow's shell line, run in ``where`` with the console script on PATH and the job
    summary in ``step_summary.md`` there."""
    line = line.replace('"$GITHUB_STEP_SUMMARY"', "step_summary.md")
    bin_dir = os.path.dirname(sys.executable)  # where pip put the console script
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        line, shell=True, cwd=where, capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": path},
    )  # fmt: skip


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


def test_the_serving_example_fails_at_batch_one_and_its_fix_passes(
    request: pytest.FixtureRequest, pytester: pytest.Pytester
) -> None:
    """docs/certificate.md: the serving example as pasted, and the test it quotes as written."""
    (source,) = [b for b in checked_blocks(request) if b.lang == "python"]
    (pasted,) = [b for b in checked_blocks(request) if b.lang == "text"]
    assert source.text in (EXAMPLES / "serving.py").read_text()
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    shutil.copy(ROOT / "pyproject.toml", pytester.path)
    result = pytester.runpytest_subprocess(
        *inner_args("examples/serving.py", "--recompile-budget", "-p", "no:randomly")
    )
    result.assert_outcomes(failed=1, passed=1)
    assert_pasted(pasted, result.stdout.str())


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
        done = workflow_step(line, pytester.path)
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


def test_the_sharded_workflow_works_as_written(pytester: pytest.Pytester) -> None:
    """examples/github-actions-shards.yml (docs/shards.md): each shard's command as written,
    for both groups of the matrix, then the final job's commands on their reports."""
    pytest.importorskip("pytest_split")
    workflow = (EXAMPLES / "github-actions-shards.yml").read_text()
    runs = [line.split("run:", 1)[1].strip() for line in workflow.splitlines() if "run:" in line]
    (shard,) = [line for line in runs if line.startswith("pytest ")]
    assert "-p no:randomly" in shard  # no shard shuffles with a seed of its own
    assert 'pip install "$PYTEST_RECOMPILE" pytest-split' in workflow  # a source you set
    shutil.copytree(EXAMPLES, pytester.path / "examples")
    ran = {}
    for group in ("1", "2"):
        words = shard.replace("${{ matrix.group }}", group).split()
        # pytest-split by its entry point's module: the inner run loads no plugin by itself.
        result = pytester.runpytest_subprocess(
            *inner_args(*words[1:], "examples", "-p", "pytest_split.plugin", "-p", "no:randomly")
        )
        ran[group] = result.parseoutcomes()
        assert (pytester.path / f"recompiles-{group}.json").exists()
    shards = [found.get("passed", 0) + found.get("failed", 0) for found in ran.values()]
    assert shards == [1, 1], ran  # each test in one shard

    # The gate job: main's combined report stands in for the one gh downloads (here the same
    # run's, so the comparison finds no change).
    commands = [
        line
        for line in (workflow.split("\n  gate:", 1)[1]).splitlines()
        if line.strip().removeprefix("run:").strip().startswith("pytest-recompile")
    ]
    statuses = []
    for line in commands:
        line = line.strip().removeprefix("run:").strip()
        if "main-report/" in line and not (pytester.path / "main-report").exists():
            (pytester.path / "main-report").mkdir()
            shutil.copy(pytester.path / "recompiles.json", pytester.path / "main-report")
        done = workflow_step(line, pytester.path)
        assert done.returncode in (0, 1), (line, done.stderr)
        statuses.append((line.split()[1], done.returncode, done.stdout))
    assert [(command, status) for command, status, _ in statuses] == [
        ("combine", 0),
        ("report", 1),  # the job summary: the example's step counter broke the gate
        ("compare", 0),
        ("compare", 0),
        ("report", 1),  # the gate
    ]
    combined = json.loads((pytester.path / "recompiles.json").read_text())
    assert [t["nodeid"] for t in combined["tests"]] == [
        "examples/test_tinytrainer.py::test_train_with_python_step_counter",
        "examples/test_tinytrainer.py::test_train_with_tensor_step_counter",
    ]
    summary = (pytester.path / "step_summary.md").read_text()
    assert "1 broke the gate" in summary
    assert summary.rstrip().endswith("**no change**")
    assert statuses[-1][2].startswith("::error file=")
