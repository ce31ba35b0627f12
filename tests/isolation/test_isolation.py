"""Isolation inside the structures real suites use: wider fixtures, unittest, partials,
decorated models, reruns, subtests, threads. Real torch.compile, real pytest."""

from __future__ import annotations

from fnmatch import fnmatch
from glob import escape as esc
from pathlib import Path
from typing import Any

import pytest
from snippets import (
    HEADER,
    REVERSE_CONFTEST,
    assert_totals,
    inner_args,
    keeps_entries,
    outcomes,
    read_json,
)

from pytest_recompile._torch import versions
from pytest_recompile.model.messages import EAGER_FALLBACK, STOPPED
from pytest_recompile.model.names import PREFIX
from pytest_recompile.model.text import seconds_text
from pytest_recompile.reports.terminal import ISOLATION_HINT, RESET_FALLBACK, isolation_lines

SHARED = """
@torch.compile(backend="eager")
def shared(x):
    return x * 2
"""

# `shared` warmed at batch 4 by a module fixture.
WARMED = (
    SHARED
    + """
@pytest.fixture(scope="module")
def warmed():
    shared(torch.randn(4, 4))
    return shared
"""
)

WARMED_MODULE = (
    WARMED
    + """
def test_a(warmed):
    warmed(torch.randn(8, 4))

def test_b(warmed):
    warmed(torch.randn(8, 4))

def test_warm_shape_only(warmed, recompiles):
    warmed(torch.randn(4, 4))
    assert recompiles.records == []  # nothing compiled: the fixture's entry is kept
"""
)

WARMED_CLASS = (
    SHARED
    + """
import unittest

class TestModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shared(torch.randn(4, 4))

    def test_a(self):
        shared(torch.randn(8, 4))

    def test_b(self):
        shared(torch.randn(8, 4))

    def test_c(self):
        shared(torch.randn(4, 4))
"""
)

SIZE = "tensor 'x' size mismatch at index 0. expected 4, actual 8"


@keeps_entries
@pytest.mark.parametrize("order", [[], ["--reverse-order"]], ids=["forward", "reverse"])
def test_module_fixture_warm_up_is_kept_and_never_charged(run, pytester, order) -> None:
    pytester.makeconftest(REVERSE_CONFTEST)
    result = run(WARMED_MODULE, "--recompile-budget", "-v", *order)
    assert outcomes(result) == {
        "test_a": "failed",
        "test_b": "failed",
        "test_warm_shape_only": "passed",
    }
    result.stdout.fnmatch_lines(["*" + esc(f"TENSOR_MATCH(size): {SIZE}   <- {STOPPED}")])
    assert result.stdout.str().count(SIZE) >= 2


@keeps_entries
@pytest.mark.parametrize("order", [[], ["--reverse-order"]], ids=["forward", "reverse"])
def test_setupclass_warm_up_is_kept(run, pytester, order) -> None:
    pytester.makeconftest(REVERSE_CONFTEST)
    result = run(
        WARMED_CLASS,
        "--recompile-budget",
        "-v",
        *order,
    )
    assert outcomes(result) == {
        "TestModel::test_a": "failed",
        "TestModel::test_b": "failed",
        "TestModel::test_c": "passed",
    }
    out = result.stdout.str()
    # The gate's own block, not unittest's raw exception with torch's frames.
    assert "RecompileBudgetExceeded" not in out
    assert "convert_frame.py" not in out
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 1 recompile*, budget 0 (--recompile-budget=0)",
            "  fail-fast: stopped at test_it.py:* in test_a, before that recompile ran",
        ]
    )


def test_fixture_warm_up_recompile_is_recorded_under_the_fixture(run) -> None:
    result = run(
        SHARED
        + """
@pytest.fixture(scope="module")
def warmed():
    shared(torch.randn(4, 4))
    shared(torch.randn(8, 4))  # a second batch size: one recompile, the fixture's
    return shared

def test_a(warmed):
    warmed(torch.randn(4, 4))

def test_b(warmed):
    warmed(torch.randn(8, 4))
""",
        "--recompile-budget",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_it.py: module fixture 'warmed' recompiled 1 time while set up (charged to no"
            " test): shared (TENSOR_MATCH(size): " + esc(SIZE) + ")",
            "2 gated tests, 0 recompiles; 0 broke the gate, 0 hit recompile_limit; *",
        ]
    )
    (fixture,) = read_json("r.json")["fixtures"]
    assert (fixture["fixture"], fixture["compiles"], fixture["recompiles"]) == (
        "module fixture 'warmed'",
        2,  # every compile that ran, the recompile included
        1,
    )


def test_recompile_limit_in_a_fixture_is_loud(run) -> None:
    result = run(
        SHARED
        + """
@pytest.fixture(scope="module")
def warmed():
    with torch._dynamo.config.patch(recompile_limit=2, automatic_dynamic_shapes=False):
        for n in range(1, 5):
            shared(torch.randn(n))
    return shared

def test_a(warmed):
    pass
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} test_it.py: module fixture 'warmed' hit recompile_limit while set up: "
            f"'shared' {EAGER_FALLBACK} for every test that uses it; *"
        ]
    )


@keeps_entries
def test_recompile_limit_counts_kept_entries(run) -> None:
    """A kept entry still counts toward recompile_limit, as it would without isolation."""
    result = run(
        SHARED
        + """
@pytest.fixture(scope="module")
def warmed():
    shared(torch.randn(1))
    return shared

@pytest.mark.allow_recompiles
def test_first(warmed):
    pass

def test_limit(warmed):
    with torch._dynamo.config.patch(recompile_limit=3, automatic_dynamic_shapes=False):
        for n in (2, 3, 4):
            warmed(torch.randn(n))
""",
        "--recompile-budget=10",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [f"{PREFIX} 'shared' hit recompile_limit (3) and {EAGER_FALLBACK}: *"]
    )
    # 1 kept + 2 new entries: the third new shape is the one torch refuses.
    result.stdout.fnmatch_lines(["    cache entries: 3, compiles: 2, recompiles: 2"])


@pytest.mark.parametrize("mode", ["fail-fast", "at-end"])
def test_teardown_compiles_are_the_tests(run, mode) -> None:
    """Judged after the teardown, whatever the call phase found: at the end, the recompile
    and the entry it made are read after the call's judgement."""
    result = run(
        SHARED
        + """
@pytest.fixture
def model():
    shared(torch.randn(4))
    yield shared
    shared(torch.randn(4, 4))  # a recompile in the function fixture's teardown

def test_it(model):
    model(torch.randn(4))
""",
        "--recompile-budget",
        f"--recompile-mode={mode}",
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_it*",
            f"{PREFIX} 1 recompile*, budget 0 (--recompile-budget=0)",
            "*rank mismatch. expected 1, actual 2*",
        ]
    )
    if mode == "at-end":  # compiled: its entry and its guards are read after the call's
        result.stdout.fnmatch_lines(
            ["    cache entries: 2, compiles: 2, recompiles: 1*", "    guards [[]0/1] * guards *"]
        )


@keeps_entries
def test_a_fixture_the_test_does_not_use_is_invisible(run) -> None:
    """warmed is live when test_stranger runs, but the test does not use it: batch 8 is its
    first compile, as alone, in either order."""
    body = (
        WARMED
        + """
def test_warms(warmed):
    pass

def test_stranger():
    shared(torch.randn(8, 4))
"""
    )
    for order in ([], ["-p", "no:randomly", "-k", "stranger or warms"]):
        result = run(body, "--recompile-budget", *order)
        result.assert_outcomes(passed=2)
        assert_totals(result, gated=2, recompiles=0)
        assert "against entries" not in result.stdout.str()


def test_partial_and_callable_are_named_and_budgeted(run) -> None:
    result = run(
        """
import functools

def scale(x, k):
    return x * k

class Loss:
    def __call__(self, x):
        return (x * x).sum()

scaled = torch.compile(functools.partial(scale, k=2), backend="eager")
loss = torch.compile(Loss(), backend="eager")

@pytest.mark.max_recompiles(0, function="scale")
def test_partial():
    loss(torch.ones(3))
    scaled(torch.ones(3))
    scaled(torch.ones(3, 3))

def test_callable():
    scaled(torch.ones(3))
    loss(torch.ones(3))
    loss(torch.ones(3, 3))
""",
        "--recompile-budget=5",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 'scale' recompiled 1 time (*), budget 0 "
            "(@max_recompiles(0, function='scale'))",
            "  scale  test_it.py:7",
        ]
    )
    assert "wrap_inline" not in result.stdout.str()


def test_decorated_forward_and_compiled_module_are_named(run) -> None:
    result = run(
        """
import functools

def deprecate_kwarg(fn):
    @functools.wraps(fn)
    def wrapped_func(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapped_func

class Model(torch.nn.Module):
    @deprecate_kwarg
    def forward(self, x):
        return x * 2

model = torch.compile(Model(), backend="eager")
seq = torch.compile(torch.nn.Sequential(torch.nn.Linear(2, 2)), backend="eager")

@pytest.mark.max_recompiles(0, function="Model.forward")
def test_decorated():
    model(torch.ones(3))
    model(torch.ones(3, 3))

def test_sequential():
    seq(torch.ones(2, 2))
    seq(torch.ones(2, 2, 2))
""",
        "--recompile-budget",
        "--recompile-mode=at-end",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["  Model.forward  test_it.py:14", "  Sequential.forward  *"])
    out = result.stdout.str()
    assert "wrapped_func" not in out
    assert "resume frame" not in out


def test_unknown_function_budget_is_a_failure(run) -> None:
    result = run(
        SHARED
        + """
@pytest.mark.max_recompiles(0, function="sahred")
def test_typo():
    shared(torch.ones(2))
""",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} @max_recompiles(0, function='sahred') names no function this test "
            "compiled (compiled: shared); did you mean 'shared'?"
        ]
    )


FLAKY = """
attempts = []

def test_flaky():
    attempts.append(1)
    shared(torch.ones(2))
    if len(attempts) == 1:
        shared(torch.ones(2, 2))
"""


def test_each_rerun_attempt_reports_its_own_figures(run) -> None:
    pytest.importorskip("pytest_rerunfailures")
    result = run(
        SHARED + FLAKY,
        "--recompile-budget",
        *("-p", "rerunfailures", "--reruns=1"),
        "--recompile-report=r.json",
        "--junitxml=j.xml",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 rerun*"])
    (test,) = read_json("r.json")["tests"]
    assert (test["outcome"], test["recompiles"], test["violations"]) == ("passed", 0, [])
    # JUnit XML has a testcase per attempt, each with that attempt's own figures.
    junit = Path("j.xml").read_text()
    values = [part.split('"', 1)[0] for part in junit.split('name="recompiles" value="')[1:]]
    assert values == ["1", "0"]


def test_a_rerun_under_xdist_reports_its_last_attempt(pytester: pytest.Pytester) -> None:
    """The controller adds its workers' reports to the results at the session's end, in the
    order they came: a rerun's last attempt is the test's result, as in one process."""
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_it=HEADER + SHARED + FLAKY)
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "-p", "no:randomly", "--recompile-budget"),
        *("-p", "rerunfailures", "--reruns=1", "--recompile-report=r.json"),
    )
    result.stdout.fnmatch_lines(["*1 passed, 1 rerun*"])
    (test,) = read_json(str(pytester.path / "r.json"))["tests"]
    assert (test["outcome"], test["recompiles"], test["violations"]) == ("passed", 0, [])
    result.stdout.fnmatch_lines(["1 gated test, 0 recompiles; 0 broke the gate*"])


def test_subtests_final_report_has_all_compiles(run) -> None:
    if int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("the subtests fixture is pytest 9's")
    run(
        SHARED
        + """
def test_sub(subtests):
    for shape in ((2,), (2, 2), (2, 2, 2)):
        with subtests.test(shape=shape):
            shared(torch.ones(shape))
""",
        "--recompile-budget=5",
        "--recompile-report=r.json",
    )
    (test,) = read_json("r.json")["tests"]
    (fn,) = test["functions"]
    assert (test["recompiles"], fn["compiles"], fn["cache_entries"]) == (2, 3, 3)


def test_a_fault_while_a_subtest_fails_is_named_on_the_tests_own_report(run, pytester) -> None:
    """A subtest's report passes through the gate's report hook, but the session never
    collects it: what the gate tells once (contained faults, leftover threads) waits for the
    test's own reports. A failing subtest used to take the fault with it, and it was lost."""
    if int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("the subtests fixture is pytest 9's")
    pytester.makeconftest(
        """
from pytest_recompile.recording.verdict import TestVerdict

real_freeze = TestVerdict.freeze

def broken_freeze(self):
    raise RuntimeError("injected freeze fault")

def pytest_configure(config):
    TestVerdict.freeze = broken_freeze

def pytest_unconfigure(config):
    TestVerdict.freeze = real_freeze
"""
    )
    result = run(
        SHARED
        + """
def test_sub(subtests):
    with subtests.test(msg="fails"):
        shared(torch.ones(2))
        assert False
""",
        "--recompile-budget=5",
        "--recompile-report=r.json",
    )
    assert "test_it.py::test_sub" in result.stdout.str()
    faults = read_json("r.json")["faults"]
    assert faults == [
        "test_it.py::test_sub: internal error in broken_freeze: RuntimeError: injected freeze "
        "fault; the gate went on"
    ], faults


def test_dynamo_testcase_resetting_in_teardown(run) -> None:
    result = run(
        """
from torch._dynamo.test_case import TestCase

@torch.compile(backend="eager")
def breaks(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2

class TestBreaks(TestCase):
    @pytest.mark.max_graph_breaks(0)
    def test_breaks(self):
        breaks(torch.ones(2))
""",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{PREFIX} 1 graph break, budget 0 (@max_graph_breaks(0))"])
    (test,) = read_json("r.json")["tests"]
    assert test["functions"][0]["cache_entries"] >= 1


@keeps_entries
def test_reuse_and_what_isolation_still_costs_are_reported(run) -> None:
    """test_b's first calls reuse test_a's entries, a function with a graph break and its
    resume function included: no compile, the break counted as alone, shown with -v only;
    a fullgraph call of that function compiles again (it would raise at the break), and the
    summary says why."""
    source = (
        SHARED
        + """
from torch._dynamo.utils import counters

def talk(x):
    torch._dynamo.graph_break()
    return x + 1

chatty = torch.compile(talk, backend="eager")

def test_a():
    shared(torch.ones(2)); chatty(torch.ones(2))

def test_b(recompiles):
    before = sum(counters["graph_break"].values())
    shared(torch.ones(2)); chatty(torch.ones(2))
    assert sum(counters["graph_break"].values()) == before + 1  # as a compile leaves it
    records = {r.name: r for r in recompiles.records}
    assert (records["shared"].compiles, records["shared"].reused) == (1, 1)
    # talk and its resume function (one record): both reused, nothing compiled
    assert (records["talk"].compiles, records["talk"].reused) == (2, 2)
    assert records["talk"].recompile_count == 0

def test_c():
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(talk, backend="eager", fullgraph=True)(torch.ones(2))
"""
    )
    result = run(
        source, "--recompile-budget", "--recompile-report=r.json", "-p", "no:randomly", "-v"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "isolation: 3 first compiles answered by the identical entry of an earlier test,"
            " as in one plain process",
        ]
    )
    # The cost line shows 5 ms or more (a warm machine can compile test_c's call faster): its
    # presence follows the measured seconds, both ways (test_isolation_cost_line_threshold
    # checks each side with seconds made up).
    cost = "isolation: * compiling again what earlier tests had compiled (fullgraph or"
    shown = fnmatch_any(result, f"{cost} error_on_graph_break*); " + esc(ISOLATION_HINT))
    assert shown == (sum(t["again_seconds"] for t in read_json("r.json")["tests"]) >= 0.005)
    a, b, _ = read_json("r.json")["tests"]
    assert (b["reused"], b["recompiles"]) == (3, 0)
    assert b["saved_seconds"] > 0
    assert [g["line"] for g in a["graph_breaks"]] == [g["line"] for g in b["graph_breaks"]]
    assert len(b["graph_breaks"]) == 1

    # A reused entry carries its compile's guard figures (torch's count and estimate), read
    # when that compile ended, not looked for again in torch's metrics.
    def figures(test: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
        return {
            fn["qualname"]: sorted(
                (e["guards"], e["torch_guard_count"], e["guard_latency_us"]) for e in fn["entries"]
            )
            for fn in test["functions"]
        }

    assert figures(a) == figures(b)
    if versions.has_compile_metrics():
        assert all(count for entries in figures(b).values() for _, count, _ in entries)
    # Without -v the summary speaks only of what isolation cost.
    quiet = run(source, "--recompile-budget", "-p", "no:randomly", "--recompile-report=q.json")
    quiet.assert_outcomes(passed=3)
    quiet.stdout.no_fnmatch_line("*answered by the identical entry*")
    again = sum(t["again_seconds"] for t in read_json("q.json")["tests"])
    assert again > 0
    assert fnmatch_any(quiet, "isolation: * compiling again what earlier tests had*") == (
        again >= 0.005
    )


def fnmatch_any(result: pytest.RunResult, pattern: str) -> bool:
    return any(fnmatch(line, pattern) for line in result.stdout.lines)


@pytest.mark.parametrize(("seconds", "shown"), [(0.0049, False), (0.005, True), (0.2, True)])
def test_isolation_cost_line_threshold(seconds: float, shown: bool) -> None:
    """The cost line from made-up seconds: shown from 5 ms on, with why, never below."""
    function = {"again_reasons": ["fullgraph or error_on_graph_break"]}
    tests = [{"reused": 0, "again_seconds": seconds, "functions": [function]}]
    lines = isolation_lines(tests)  # type: ignore[arg-type]
    expected = [
        f"isolation: {seconds_text(seconds)} compiling again what earlier tests had compiled"
        f" (fullgraph or error_on_graph_break); {ISOLATION_HINT}"
    ]
    assert lines == (expected if shown else [])


@pytest.mark.usefixtures("probes_decided_afresh")  # can_reuse_compiles asks can_keep_entries
def test_without_single_entry_support_falls_back_to_a_full_reset(run, monkeypatch) -> None:

    monkeypatch.setattr(versions, "can_keep_entries", lambda: False)
    result = run(WARMED_MODULE, "--recompile-budget")
    # Still order-independent, but the warm-up is dropped: batch 8 is a first compile
    # (test_a, test_b pass), and the warm shape is compiled again (test_warm_shape_only fails).
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([f"isolation: {esc(RESET_FALLBACK)}"])


@pytest.mark.usefixtures("probes_decided_afresh")
def test_a_full_reset_leaves_the_users_error_on_recompile_as_alone(run, monkeypatch) -> None:
    """The full reset drops the warm-up of a fixture the test uses, which the test would have
    alone: torch's own ``error_on_recompile`` still raises against it (2.7 and 2.8 keep no
    single entries: the plugin raises in torch's words), and only there."""
    monkeypatch.setattr(versions, "can_keep_entries", lambda: False)
    result = run(
        WARMED
        + """
import torch._dynamo.config as dcfg
from torch._dynamo.exc import RecompileError

def test_against_the_warm_up(warmed):
    with dcfg.patch(error_on_recompile=True):
        with pytest.raises(RecompileError, match="size mismatch at index 0. expected 4"):
            warmed(torch.randn(8, 4))
        warmed(torch.randn(4, 4))  # the warm shape: alone the warm-up answers it

def test_beside_the_live_fixture_unused():
    with dcfg.patch(error_on_recompile=True):
        shared(torch.randn(8, 4))  # alone nothing was compiled: a first compile

def test_after_its_own_reset(warmed):
    torch._dynamo.reset()
    with dcfg.patch(error_on_recompile=True):
        warmed(torch.randn(8, 4))  # the test's own reset dropped the warm-up, alone too
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=3)


@pytest.mark.xdist
@keeps_entries
def test_order_with_wider_fixtures_under_xdist(pytester) -> None:
    pytester.makepyfile(
        test_fix=HEADER + WARMED_MODULE,
        test_cls=HEADER + WARMED_CLASS,
    )
    expected = {
        "test_a": "failed",
        "test_b": "failed",
        "test_warm_shape_only": "passed",
        "TestModel::test_a": "failed",
        "TestModel::test_b": "failed",
        "TestModel::test_c": "passed",
    }
    for dist in ("loadfile", "loadscope"):
        result = pytester.runpytest_subprocess(*inner_args(
            "--recompile-budget", "-v", "-p", "no:randomly",
            "-p", "xdist", "-n", "2", f"--dist={dist}",
        ))  # fmt: skip
        assert outcomes(result) == expected, dist


@keeps_entries
def test_parametrized_module_fixture_drops_its_previous_value(run) -> None:
    result = run(
        SHARED
        + """
@pytest.fixture(scope="module", params=[4, 6])
def warmed(request):
    shared(torch.randn(request.param, 4))
    return request.param

def test_its_shape(warmed):
    shared(torch.randn(warmed, 4))

def test_four(warmed):
    shared(torch.randn(4, 4))
""",
        "--recompile-budget",
        "-v",
    )
    assert outcomes(result) == {
        "test_its_shape[4]": "passed",
        "test_four[4]": "passed",
        "test_its_shape[6]": "passed",
        "test_four[6]": "failed",  # warmed[4] was torn down: its entry is gone
    }
    result.stdout.fnmatch_lines(["*size mismatch at index 0. expected 6, actual 4*"])


@keeps_entries
def test_warm_block_names_the_guards_of_kept_entries(run) -> None:
    result = run(
        WARMED
        + """
from pytest_recompile import CompiledWhileWarm

def test_first(warmed, recompiles):
    warmed(torch.randn(2, 3, 4))  # an entry of this test's, dropped before the next

def test_warm(warmed, recompiles):
    warmed(torch.randn(4, 4))
    with pytest.raises(CompiledWhileWarm) as info:
        with recompiles.warm():
            warmed(torch.randn(8, 4))
    assert "expected 4, actual 8" in str(info.value), str(info.value)
""",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=2)


@keeps_entries
def test_no_reuse_where_alone_the_call_would_compile_and_be_refused(run) -> None:
    """Alone, test_stance's and test_warm's first calls compile, which the stance and the
    warm block refuse: an earlier test's entry must not answer them instead."""
    result = run(
        SHARED
        + """
from pytest_recompile import CompiledWhileWarm, warm

def test_a():
    shared(torch.ones(2))

def test_stance():
    with torch.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(RuntimeError):
            shared(torch.ones(2))

@pytest.mark.allow_recompiles
def test_warm():
    with pytest.raises(CompiledWhileWarm):
        with warm():
            shared(torch.ones(2))

def test_after():
    shared(torch.ones(2))
""",
        "--recompile-budget",
        "--recompile-report=r.json",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=4)
    reused = {t["nodeid"].split("::")[1]: t["reused"] for t in read_json("r.json")["tests"]}
    assert reused == {"test_a": 0, "test_stance": 0, "test_warm": 0, "test_after": 1}


@keeps_entries
def test_a_wider_fixture_set_up_reuses_what_a_test_compiled_first(run) -> None:
    """A module fixture's warm-up at a shape an earlier test compiled first: recorded under
    the fixture as reused, kept for its tests, and its tests count as alone."""
    result = run(
        SHARED
        + """
def test_first():
    shared(torch.ones(4, 4))

@pytest.fixture(scope="module")
def warmed():
    shared(torch.ones(4, 4))
    return shared

def test_warm_shape(warmed, recompiles):
    warmed(torch.ones(4, 4))
    assert recompiles.records == []  # the fixture's (reused) entry answered

def test_other_shape(warmed):
    warmed(torch.ones(8, 4))  # alone: 1 recompile against the fixture's entry
""",
        "--recompile-budget",
        "--recompile-mode=report-only",
        "--recompile-report=r.json",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=3)
    report = read_json("r.json")
    counts = {t["nodeid"].split("::")[1]: t["recompiles"] for t in report["tests"]}
    assert counts == {"test_first": 0, "test_warm_shape": 0, "test_other_shape": 1}
    (fixture,) = report["fixtures"]
    assert [(f["compiles"], f["reused"]) for f in fixture["functions"]] == [(1, 1)]
