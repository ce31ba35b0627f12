"""The fault matrix: what a test can do to the gate, and what the next test then sees."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch_state
from snippets import DOUBLE, HEADER, assert_totals, inner_args

from pytest_recompile._torch import events, versions
from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.terminal import INCOMPLETE

NEXT_TEST_SEES_DEFAULTS = """
import torch_state

def test_zz_next_test_sees_defaults():
    assert torch_state.current_stance() == "default"
    assert torch._dynamo.config.recompile_limit == 8
    assert torch._dynamo.config.error_on_recompile is False
    assert torch_state.installed_hooks() == 1  # this test's own gate, nothing left over
    assert torch_state.metrics_capacity() == 64  # raised only once a test compiles
    assert torch_state.compile_callbacks() == 1  # the gate's, held for the session
"""


def test_reset_inside_the_test_keeps_the_gate_counting(run) -> None:
    result = run(
        DOUBLE
        + """
def test_resets():
    double(torch.ones(2))
    torch._dynamo.reset()
    double(torch.ones(2))          # compiles again: the reset dropped the entry, no recompile
    torch.compiler.reset()
    double(torch.ones(2))
    double(torch.ones(3, 3))       # a real recompile, still caught after two resets
"""
        + NEXT_TEST_SEES_DEFAULTS,
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_resets _*",
            f"{PREFIX} 1 recompile*, budget 0*",
            "    cache entries: 1, compiles: 3*",
        ]
    )


def test_stance_and_config_left_changed_are_restored_with_a_warning(run) -> None:
    result = run(
        DOUBLE
        + """
def test_leaks_stance_and_config():
    torch.compiler.set_stance("force_eager")
    torch._dynamo.config.recompile_limit = 2
    torch._dynamo.config.error_on_recompile = True

def test_patches_config_properly():
    with torch._dynamo.config.patch(recompile_limit=3):
        double(torch.ones(2))
"""
        + NEXT_TEST_SEES_DEFAULTS,
        "--recompile-budget",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_it.py:*: RecompileStateLeak: pytest-recompile: "
            "test_it.py::test_leaks_stance_and_config "
            "left stance 'force_eager', torch._dynamo.config.error_on_recompile=True, "
            "torch._dynamo.config.recompile_limit=2 behind; restored it*"
        ]
    )
    assert "test_patches_config_properly left" not in result.stdout.str()
    assert "gate.py" not in result.stdout.str()  # the warning points at the test


def test_global_torch_state_left_changed_does_not_break_later_verdicts(run) -> None:
    result = run(
        DOUBLE
        + """
def test_a_leaves_grad_off_and_threads_changed():
    double(torch.ones(2))
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)

def test_b_runs_under_that_state_and_still_passes_at_zero():
    double(torch.ones(2))
    double(torch.ones(2))

def test_c_restores():
    torch.set_grad_enabled(True)
"""
    , "--recompile-budget")  # fmt: skip
    result.assert_outcomes(passed=3)
    assert_totals(result, gated=3, recompiles=0)


@pytest.mark.subprocess
def test_keyboard_interrupt_leaves_nothing_behind(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_it=HEADER
        + DOUBLE
        + """
def test_interrupted():
    double(torch.ones(2))
    raise KeyboardInterrupt
"""
    )
    pytester.makeconftest(
        """
def pytest_unconfigure(config):
    import torch_state
    state = (torch_state.installed_hooks(), torch_state.metrics_capacity(),
             torch_state.compile_callbacks(), torch_state.current_stance())
    with open("state.txt", "w") as out:
        out.write(repr(state))
"""
    )
    pytester.makepyfile(torch_state=Path(torch_state.__file__).read_text())  # a fresh process
    result = pytester.runpytest_subprocess(
        *inner_args("--recompile-budget", "-p", "no:randomly", "--recompile-report=r.json")
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / "state.txt").read_text() == "(0, 64, 0, 'default')"
    report = json.loads((pytester.path / "r.json").read_text())
    assert (report["complete"], report["incomplete"]) == (False, "KeyboardInterrupt")
    result.stdout.fnmatch_lines([f"{INCOMPLETE}: KeyboardInterrupt"])


def test_module_fixture_that_compiles_once(run) -> None:
    result = run(
        """
@pytest.fixture(scope="module")
def model():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = torch.compile(m, backend="eager")
    compiled(torch.ones(2, 4))
    return compiled

def test_one(model, recompiles):
    model(torch.ones(2, 4))
    assert recompiles.count() == 0

def test_two(model, recompiles):
    model(torch.ones(2, 4))
    model(torch.ones(3, 4))  # a recompile in this test: a new batch size
    assert recompiles.count() == 1

@pytest.mark.max_recompiles(0)
def test_three(model):
    model(torch.ones(2, 4))
""",
        "--recompile-budget=1",
    )
    result.assert_outcomes(passed=3)


def test_internal_error_is_loud() -> None:
    with pytest.raises(versions.InternalError, match=f"{PREFIX} internal error: the compile hook"):
        events.compile_frame(sys._getframe())


TRACE_SUITE = (
    DOUBLE
    + """
import logging

trace = logging.getLogger("torch.__trace")
probe = logging.getLogger("probe-not-propagating")  # gets what pytest attaches, nothing else
probe.propagate = False

def pytest_handlers(logger):
    return sorted(type(h).__name__ for h in logger.handlers if "_pytest" in type(h).__module__)

@pytest.mark.max_recompiles(0)
def test_gated_fails():
    logging.getLogger("mine").warning("the test's own log line")
    assert pytest_handlers(trace) == []  # torch's trace logger is not captured here
    double(torch.ones(2)); double(torch.ones(3, 3))

def test_ungated_after():
    # pytest's handlers (the same objects pytest 9 put on the probe; pytest 8 attaches none to
    # loggers that do not propagate) are back on torch's logger.
    assert set(map(id, probe.handlers)) <= set(map(id, trace.handlers))
    assert bool(probe.handlers) is (int(pytest.__version__.split(".")[0]) >= 9)
"""
)


def test_torch_trace_logger_stays_out_of_captured_logs(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    run(TRACE_SUITE, "--collect-only")  # writes the module; `run` turns pytest's logging off
    result = pytester.runpytest(*inner_args("-p", "no:randomly", "--log-level=DEBUG"))
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*Captured log call*", "*the test's own log line*"])
    assert "torch.__trace" not in result.stdout.str()


BROKEN_FREEZE = """
from pytest_recompile.recording.verdict import TestVerdict

real_freeze = TestVerdict.freeze

def broken_freeze(self):
    raise RuntimeError("injected freeze fault")

def pytest_configure(config):
    TestVerdict.freeze = broken_freeze

def pytest_unconfigure(config):
    TestVerdict.freeze = real_freeze
"""


@pytest.mark.parametrize("mode", ["fail-fast", "at-end"])
def test_a_result_that_cannot_be_frozen_still_fails_the_test_that_broke_its_budget(
    run, pytester: pytest.Pytester, mode: str
) -> None:
    """A contained fault while freezing the result is named once; the verdict stands."""
    pytester.makeconftest(BROKEN_FREEZE)
    result = run(
        DOUBLE
        + """
def test_shapes():
    double(torch.ones(2))
    double(torch.ones(3, 3))
""",
        "--recompile-budget=0",
        f"--recompile-mode={mode}",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"{PREFIX} 1 recompile of double (TENSOR_MATCH(rank): *), budget 0*"]
    )
    assert result.stdout.str().count("injected freeze fault") == 1
