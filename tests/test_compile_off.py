"""A gate that gated nothing says so: torch.compile switched off (three spellings, from the
environment, a conftest or a session fixture), and a run in which nothing compiled."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from snippets import HEADER, STEP, inner_args

from pytest_recompile._torch.instruments import FORCE_EAGER
from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.terminal import (
    COMPILE_OFF,
    COMPILE_OFF_FAILS,
    COMPILE_OFF_WARNS,
    NOTHING_COMPILED,
    switched_off_header,
)

# Two tests that each recompile once where torch.compile runs.
TWO = (
    STEP
    + """
def test_one():
    global step
    for step in range(2):
        f(torch.ones(2))

def test_two():
    f(torch.ones(2))
    f(torch.ones(2, 2))
"""
)

SPELLINGS = {
    "TORCH_COMPILE_DISABLE=1": ({"TORCH_COMPILE_DISABLE": "1"}, ""),
    "torch._dynamo.config.disable = True": (
        {},
        "import torch._dynamo\ntorch._dynamo.config.disable = True\n",
    ),
    FORCE_EAGER: ({}, 'import torch\ntorch.compiler.set_stance("force_eager")\n'),
    f"{FORCE_EAGER} (session fixture)": (
        {},
        "import pytest, torch\n\n@pytest.fixture(scope='session', autouse=True)\n"
        "def eager():\n    torch.compiler.set_stance('force_eager')\n    yield\n"
        "    torch.compiler.set_stance('default')\n",
    ),
}


def run_off(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    spelling: str,
    *args: str,
) -> pytest.RunResult:
    env, conftest = SPELLINGS[spelling]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if conftest:
        pytester.makeconftest(conftest)
    pytester.makepyfile(test_it=HEADER + textwrap.dedent(TWO))
    return pytester.runpytest_subprocess(
        *inner_args("--recompile-budget", "-p", "no:randomly", "--recompile-report=r.json",
                    "--recompile-report-md=r.md", *args)
    )  # fmt: skip


@pytest.mark.subprocess
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_compile_switched_off_fails_the_gate_and_says_so_everywhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    how = spelling.removesuffix(" (session fixture)")
    result = run_off(pytester, monkeypatch, spelling)
    result.assert_outcomes(passed=2)  # the tests themselves pass: eager code recompiles nothing
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    said = COMPILE_OFF.format(how=how)
    result.stdout.fnmatch_lines([f"{PREFIX} {said}; {COMPILE_OFF_FAILS}"])
    result.stdout.fnmatch_lines([f"2 gated tests, 0 recompiles; *; {NOTHING_COMPILED}"])
    if spelling == "TORCH_COMPILE_DISABLE=1":  # known before any test: in the header too
        result.stdout.fnmatch_lines([switched_off_header(how)])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["environment"]["compile_disabled"] == [how]
    assert report["settings"]["if_disabled"] == "fail"
    markdown = (pytester.path / "r.md").read_text()
    assert "> **Error:** pytest-recompile: torch.compile was switched off" in markdown
    # The report says it too: rendered, it fails as the run did.
    from pytest_recompile.cli import main

    os.chdir(pytester.path)
    assert main(["report", "r.json"]) == 1


@pytest.mark.subprocess
def test_a_user_who_means_it_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_off(
        pytester, monkeypatch, "TORCH_COMPILE_DISABLE=1", "--recompile-if-disabled=warn"
    )
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    said = COMPILE_OFF.format(how="TORCH_COMPILE_DISABLE=1")
    result.stdout.fnmatch_lines([f"{said}; {COMPILE_OFF_WARNS}"])
    markdown = (pytester.path / "r.md").read_text()
    assert "> **Warning:** torch.compile was switched off" in markdown
    pytester.makeini("[pytest]\nrecompile_if_disabled = warn\n")  # the ini twin
    assert run_off(pytester, monkeypatch, "TORCH_COMPILE_DISABLE=1").ret == pytest.ExitCode.OK


def test_a_gated_run_that_compiled_nothing_says_so(run) -> None:
    result = run("def test_plain():\n    assert torch.ones(2).sum() == 2\n", "--recompile-budget")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"1 gated test, 0 recompiles; *; {NOTHING_COMPILED}"])
    compiled = run(TWO, "--recompile-budget=1")
    compiled.stdout.no_fnmatch_line(f"*{NOTHING_COMPILED}*")
    compiled.stdout.no_fnmatch_line("*switched off*")


@pytest.mark.subprocess
def test_a_baseline_update_with_compile_off_changes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Eager code recompiles nothing: an update would remove every entry. It refuses, in
    the plugin and from the run's report, and compare refuses the report too."""
    from pytest_recompile.cli import main

    pytester.makepyfile(test_it=HEADER + textwrap.dedent(TWO))
    pytester.runpytest_subprocess(*inner_args(
        "-p", "no:randomly", "--recompile-baseline-update", "--recompile-baseline=b.json"
    ))  # fmt: skip
    before = (pytester.path / "b.json").read_text()
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    off = pytester.runpytest_subprocess(*inner_args(
        "-p", "no:randomly", "--recompile-baseline-update", "--recompile-baseline=b.json",
        "--recompile-report=off.json",
    ))  # fmt: skip
    off.stdout.fnmatch_lines([f"{PREFIX} baseline b.json NOT updated: torch.compile was *"])
    assert off.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "b.json").read_text() == before
    os.chdir(pytester.path)
    assert main(["baseline", "b.json", "off.json"]) == 2
    assert main(["compare", "off.json", "off.json"]) == 2
    assert "torch.compile was switched off in that run" in capsys.readouterr().err
    assert (pytester.path / "b.json").read_text() == before


def test_a_test_that_runs_eagerly_on_purpose_is_not_the_run(run) -> None:
    """A function fixture's force_eager stance is the test's own choice: the run is not
    failed for it (a conftest's or a session fixture's is the whole run's)."""
    result = run(
        TWO
        + """
@pytest.fixture
def eager():
    torch.compiler.set_stance("force_eager")
    yield
    torch.compiler.set_stance("default")

def test_eager_on_purpose(eager):
    f(torch.ones(3))
""",
        "--recompile-budget=1",
    )
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*switched off*")
