"""The gate end to end: real torch.compile, real pytest (pytester)."""

from __future__ import annotations

import json
from glob import escape as esc

import pytest
from snippets import DOUBLE, HEADER, STEP, assert_totals, inner_args

from pytest_recompile.model.guards import OWN_LIMIT_FIX
from pytest_recompile.model.messages import EAGER_FALLBACK, STOPPED
from pytest_recompile.model.names import PREFIX


def test_global_int_fails_fast_with_the_guard(run) -> None:
    result = run(
        STEP
        + """
def test_step():
    global step
    for i in range(5):
        step = i
        f(torch.ones(3))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 1 recompile*, budget 0 (--recompile-budget=0)",
            "  f  test_it.py:*",
            "    cache entries: 1, compiles: 1, recompiles: 1",
            "    recompile 1 [[]*/1] "
            + esc(f"EQUALS_MATCH: G['step'] == 0 (this call: 1)   <- {STOPPED}"),
            "    fix EQUALS_MATCH: a Python value is baked into the graph as a constant: *",
            "  fail-fast: stopped at test_it.py:* in test_step, before that recompile ran",
        ]
    )


def test_int_argument_changing(run) -> None:
    result = run(
        """
@torch.compile(backend="eager")
def scale(x, n):
    return x * n

def test_n():
    for n in (2, 3):
        scale(torch.ones(2), n)
""",
        "--recompile-budget=0",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["    recompile 1 [[]*/1] " + esc("EQUALS_MATCH: n == 2 (this call: 3)   <- ") + "*"]
    )


SHAPES = (
    DOUBLE
    + """
def test_shapes():
    for n in (4, 8, 16, 32):
        double(torch.ones(n))
"""
)


def test_shape_change_budget_one_passes_thanks_to_automatic_dynamic(run) -> None:
    result = run(SHAPES, "--recompile-budget=1")
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=1)  # 8 recompiles dynamic; 16 and 32 reuse it


def test_shape_change_budget_zero_fails_with_size_mismatch(run) -> None:
    result = run(SHAPES, "--recompile-budget=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*tensor 'x' size mismatch at index 0. expected 4, actual 8*"])


def test_mark_dynamic_over_many_sizes_passes_at_zero(run) -> None:
    result = run(
        DOUBLE
        + """
def test_sizes():
    for n in range(3, 20):
        x = torch.ones(n)
        torch._dynamo.mark_dynamic(x, 0)
        double(x)
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=0)


def test_dtype_change(run) -> None:
    result = run(
        DOUBLE
        + """
def test_dtype():
    double(torch.ones(2))
    double(torch.ones(2, dtype=torch.float64))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*tensor 'x' dtype mismatch. expected Float, actual Double*"])


GRAD = """
@torch.compile(backend="eager")
def sine(x):
    return x.sin()

def test_grad_mode():
    for i in range(6):
        with torch.set_grad_enabled(i % 2 == 0):
            sine(torch.ones(2))
"""


def test_grad_mode_alternating_costs_one_recompile(run) -> None:
    run(GRAD, "--recompile-budget=1").assert_outcomes(passed=1)
    result = run(GRAD, "--recompile-budget=0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*GLOBAL_STATE changed: grad_mode*"])


def test_rank_change_over_four_ranks_fails_budget_two(run) -> None:
    result = run(
        """
@torch.compile(backend="eager")
def total(x):
    return x.sum()

@pytest.mark.max_recompiles(2)
def test_ranks():
    for rank in range(1, 5):
        total(torch.ones([2] * rank))
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 3 recompiles*, budget 2 (@max_recompiles(2))",
            "*recompile 1 *: tensor 'x' rank mismatch. expected 1, actual 2",
            "*recompile 2 *: tensor 'x' rank mismatch. expected 2, actual 3",
            f"*recompile 3 *: tensor 'x' rank mismatch. expected 3, actual 4   <- {STOPPED}",
        ]
    )


def test_batch_of_one_after_a_dynamic_dim(run) -> None:
    result = run(
        DOUBLE
        + """
@pytest.mark.max_recompiles(1)
def test_batches():
    for batch in (4, 8, 1):
        double(torch.ones(batch, 3))
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*recompile 2 *: " + esc("2 <= x.size()[0]") + "*mark_unbacked*"])


def test_module_attribute_change(run) -> None:
    result = run(
        """
class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.scale = 1.0

    def forward(self, x):
        return self.lin(x) * self.scale

def test_scale():
    model = Scale()
    compiled = torch.compile(model, backend="eager")
    compiled(torch.ones(2, 3))
    model.scale = 2.0
    compiled(torch.ones(2, 3))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  Scale.forward  test_it.py:*", "*self.scale == 1.0*"])


def test_compiled_torch_module_and_module_compile(run) -> None:
    result = run(
        """
class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()

def test_torch_module():
    lin = torch.compile(torch.nn.Linear(3, 3), backend="eager")
    lin(torch.ones(2, 3))
    lin(torch.ones(1, 2, 3))

def test_module_compile():
    head = Head()
    head.compile(backend="eager")
    head(torch.ones(2, 3))
    head(torch.ones(1, 2, 3))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "  Linear.forward  *linear.py:*",
            "*: tensor 'args[[]0[]]' rank mismatch. expected 2, actual 3*",
            "  Head.forward  test_it.py:*",
            "*: tensor 'x' rank mismatch. expected 2, actual 3*",
        ]
    )


def test_closure_and_method(run) -> None:
    result = run(
        """
def make(k):
    @torch.compile(backend="eager")
    def add(x):
        return x + k
    return add

class Model:
    @torch.compile(backend="eager")
    def run(self, x, flag):
        return x + 1 if flag else x - 1

def test_closures():
    for k in (1, 2):
        make(k)(torch.ones(2))

def test_method():
    m = Model()
    m.run(torch.ones(2), True)
    m.run(torch.ones(2), False)
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["  make.<locals>.add  *", "*: k == 1 (this call: *)   <- *", "  Model.run  *", "*flag*"]
    )


def test_recompile_limit_fails_whatever_the_budget(run) -> None:
    source = (
        STEP
        + """
@pytest.mark.max_recompiles(100)
def test_many_steps():
    global step
    for i in range(12):
        step = i
        f(torch.ones(2))
    print("ran to the end")
"""
    )
    result = run(source)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 'f' hit recompile_limit (8) and {EAGER_FALLBACK}*",
            "    cache entries: 8, compiles: 8, recompiles: 7*",
            f"    hit recompile_limit (8) 1 time: {EAGER_FALLBACK}",
        ]
    )
    at_end = run(source, "--recompile-mode=at-end", "-s")
    at_end.assert_outcomes(failed=1)
    at_end.stdout.fnmatch_lines(["*ran to the end*", "    hit recompile_limit (8) 1 time: *"])


LIMIT_HIT = """
def test_many_steps({fixture}):
    global step
    for i in range(12):
        step = i
        f(torch.ones(2))
"""


@pytest.mark.parametrize(
    ("marks", "fixture", "args"),
    [
        ("@pytest.mark.allow_recompiles", "", ["--recompile-budget"]),
        ("@pytest.mark.allow_recompiles", "recompiles", ["--recompile-budget"]),
        (
            "@pytest.mark.allow_recompiles\n@pytest.mark.max_graph_breaks(5)",
            "",
            ["--recompile-budget"],
        ),
        ("@pytest.mark.allow_recompiles", "", ["--recompile-budget=3", "--recompile-mode=at-end"]),
        ("@pytest.mark.allow_recompiles", "", ["--recompile-budget", "--recompile-keep-caches"]),
        ("@pytest.mark.allow_recompiles", "", ["--recompile-budget", "--recompile-processes=off"]),
        ("@pytest.mark.allow_recompiles", "", ["--recompile-max-guards=100"]),
        ("@pytest.mark.allow_recompiles", "", ["--recompile-fullgraph"]),
        ("@pytest.mark.max_recompiles(100, function='f')", "", ["--recompile-budget"]),
        ("@pytest.mark.expect_guards('EQUALS_MATCH')", "", []),
        ("pytestmark = pytest.mark.allow_recompiles\n", "", ["--recompile-budget"]),
    ],
    ids=[
        "allow",
        "allow+fixture",
        "allow+max_graph_breaks",
        "allow+at-end",
        "allow+keep-caches",
        "allow+processes-off",
        "allow+max-guards",
        "allow+fullgraph",
        "function-budget",
        "expect_guards",
        "module-allow",
    ],
)
def test_no_opt_out_lets_a_limit_hit_pass(
    run, pytester: pytest.Pytester, marks: str, fixture: str, args: list[str]
) -> None:
    """Whatever takes a test out of the count (a marker alone or stacked, an option, the
    fixture), a function that falls back to eager at recompile_limit fails it, and the
    summary, the JSON report and the recompile_limit line count it."""
    source = f"{STEP}\n{marks}{LIMIT_HIT.format(fixture=fixture)}"
    result = run(source, *args, "--recompile-report=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{PREFIX} 'f' hit recompile_limit (8) and {EAGER_FALLBACK}*"])
    assert_totals(result, gated=1, recompiles=7, broke=1, limit=1)
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert "limit" in [v["kind"] for v in test["violations"]]


def test_a_limit_hit_is_allowed_in_so_many_words(run, pytester: pytest.Pytester) -> None:
    """allow_recompiles(eager_fallback=True): the test means it; the hit is still counted
    and shown, and fails nothing."""
    result = run(
        f"{STEP}\n@pytest.mark.allow_recompiles(eager_fallback=True){LIMIT_HIT.format(fixture='')}",
        "--recompile-budget",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=7, broke=0, limit=1)
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    assert test["violations"] == []
    assert test["functions"][0]["recompile_limit"] == "recompile_limit (8)"


def test_a_limit_of_the_torch_compile_call_names_that_argument(run) -> None:
    """torch.compile(..., recompile_limit=2) (torch 2.13 and newer): the message names that
    limit and its fix that argument, not the global config, which would not help."""
    import inspect

    import torch

    if "recompile_limit" not in inspect.signature(torch.compile).parameters:
        pytest.skip("this torch.compile has no recompile_limit argument (2.13 and newer)")
    result = run(
        """
def scale(x, n):
    return x * n

compiled = torch.compile(scale, backend="eager", dynamic=False, recompile_limit=2)

@pytest.mark.max_recompiles(100)
def test_many_factors():
    for n in range(5):
        compiled(torch.ones(2), n)
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 'scale' hit torch.compile(recompile_limit=2) and {EAGER_FALLBACK}: "
            f"{OWN_LIMIT_FIX}",
        ]
    )


@pytest.mark.inductor  # torch keeps a compile's name= on the inductor backend only
def test_a_compile_name_is_shown_beside_the_function(run) -> None:
    import inspect

    import torch

    if "name" not in inspect.signature(torch.compile).parameters:
        pytest.skip("this torch.compile has no name argument (2.13 and newer)")
    result = run(
        """
def scale(x, n):
    return x * n

named = torch.compile(scale, name="my_region", dynamic=False)
plain = torch.compile(scale, backend="eager", name="dropped", dynamic=False)

def test_named():
    named(torch.ones(2), 2)
    named(torch.ones(2), 3)

def test_eager():
    plain(torch.ones(2), 2)
    plain(torch.ones(2), 3)
""",
        "--recompile-budget",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["  scale (torch.compile name='my_region')  test_it.py:*"])
    with open("r.json") as written:  # the inner run's working directory is this test's
        report = json.load(written)
    names = {t["nodeid"]: t["functions"][0]["compile_name"] for t in report["tests"]}
    # torch drops name= for backends other than inductor: nothing to show there
    assert names == {"test_it.py::test_named": "my_region", "test_it.py::test_eager": None}


def test_no_compile_passes_and_first_compiles_never_fail(run) -> None:
    result = run(
        """
def test_plain():
    assert torch.ones(2).sum() == 2

def test_many_functions():
    @torch.compile(backend="eager")
    def first(x):
        return x.sin()

    @torch.compile(backend="eager")
    def second(x):
        return x.cos()

    for _ in range(3):
        first(torch.ones(2))
        second(torch.ones(2, 2))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=2)
    assert_totals(result, gated=2, recompiles=0)


def test_own_failure_is_not_masked(run) -> None:
    result = run(
        STEP
        + """
def test_fails_alone():
    f(torch.ones(2))
    assert 1 + 1 == 3, "the test's own assertion"

def test_fails_alone_in_at_end_mode_too():
    global step
    step = 1
    f(torch.ones(2))
    step = 2
    f(torch.ones(2))
    raise ValueError("own error")
""",
        "--recompile-budget",
        "--recompile-mode=at-end",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the test's own assertion*",
            "*ValueError: own error*",
            "*- Captured recompile call -*",
            f"{PREFIX} 1 recompile*, budget 0*",
        ]
    )


def test_swallowed_gate_error_still_fails(run) -> None:
    result = run(
        STEP
        + """
def test_swallows():
    global step
    for i in range(3):
        step = i
        try:
            f(torch.ones(2))
        except Exception:
            pass
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{PREFIX} * budget 0 (--recompile-budget=0)"])


SHARED = """
@torch.compile(backend="eager")
def shared(x):
    return x * 3

def test_a():
    shared(torch.ones(4))

def test_b():
    shared(torch.ones(8, 2))
"""


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_tests_sharing_a_function_pass_in_either_order(run, pytester, order) -> None:
    if order == "reverse":
        pytester.makeconftest("def pytest_collection_modifyitems(items):\n    items.reverse()\n")
    result = run(SHARED, "--recompile-budget")
    result.assert_outcomes(passed=2)
    assert_totals(result, gated=2, recompiles=0)  # each test's first shape, as alone


def test_keep_caches_judges_against_the_whole_process_state(run) -> None:
    # What test_a compiled stays: test_b's new shape is a recompile, as torch counts it.
    result = run(SHARED, "--recompile-budget", "--recompile-keep-caches")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_it.py::test_b - *"])
    run(SHARED, "-o", "recompile_keep_caches=true", "--recompile-budget").assert_outcomes(
        passed=1, failed=1
    )


def test_per_function_budgets_and_opt_out(run) -> None:
    result = run(
        STEP
        + """
@torch.compile(backend="eager")
def g(x):
    return x * 2

@pytest.mark.max_recompiles(2, function="f")
def test_f_may_recompile_twice():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

@pytest.mark.max_recompiles(2, function="f")
def test_but_g_has_the_default():
    g(torch.ones(2)); g(torch.ones(3, 3))

@pytest.mark.max_recompiles(1, function="f")
def test_f_over_its_own_budget():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

@pytest.mark.allow_recompiles
def test_opted_out():
    g(torch.ones(2)); g(torch.ones(3, 3)); g(torch.ones(4, 4, 4))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_but_g_has_the_default*",
            f"{PREFIX} 1 recompile of g (TENSOR_MATCH*), budget 0 (--recompile-budget=0)",
            "*test_f_over_its_own_budget*",
            f"{PREFIX} 'f' recompiled 2 times (*), budget 1 (@max_recompiles(1, function='f'))",
        ]
    )


def test_marker_is_enforced_without_the_flag(run) -> None:
    result = run(
        SHAPES.replace("def test_shapes", "@pytest.mark.max_recompiles(0)\ndef test_shapes")
        + "\ndef test_unmarked():\n    double(torch.ones(5)); double(torch.ones(6, 6))\n"
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*recompile gate*", "*test_shapes: 1 recompile*, budget 0*"])


def test_graph_break_resume_frames_count_for_their_parent(run) -> None:
    result = run(
        """
@torch.compile(backend="eager")
def broken(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1

@pytest.mark.max_recompiles(1)
def test_break():
    broken(torch.ones(2)); broken(torch.ones(2, 2))
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 2 recompiles*, budget 1*",
            "  broken  test_it.py:*",
            "    cache entries: 3, compiles: 3, recompiles: 2*",
            "*recompile 1 *: tensor 'x' rank mismatch*",
            "*recompile 2 * (graph-break resume frame) TENSOR_MATCH(rank): tensor 'y' rank*",
        ]
    )


def test_at_end_mode_runs_to_completion_with_full_counts(run) -> None:
    result = run(
        STEP
        + """
def test_steps():
    global step
    for i in range(4):
        step = i
        f(torch.ones(2))
    print("finished all steps")
""",
        "--recompile-budget=1",
        "--recompile-mode=at-end",
        "-s",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*finished all steps*", f"{PREFIX} 3 recompiles*, budget 1*", "    recompile 3 *"]
    )
    assert STOPPED not in result.stdout.str()


def test_report_only_never_fails_but_summarises(run) -> None:
    result = run(SHAPES, "--recompile-budget", "--recompile-mode=report-only")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "recompile gate: active, default budget 0 (--recompile-budget=0), mode report-only*",
            "*= recompile gate =*",
            "test_it.py::test_shapes: 1 recompile of double (TENSOR_MATCH*), budget 0*",
            "1 gated test, 1 recompile; 1 would have broken the gate, 0 hit recompile_limit; *",
        ]
    )


@pytest.mark.parametrize(
    "backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.inductor)]
)
def test_real_backends(run, backend) -> None:
    result = run(
        SHAPES.replace('backend="eager"', f'backend="{backend}"').replace(
            "(4, 8, 16, 32)", "(4, 8)"
        ),
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["    cache entries: 1, compiles: 1, recompiles: 1", "*size mismatch at index 0*"]
    )


@pytest.mark.inductor
def test_inductor_first_compile_and_dynamic_pass(run) -> None:
    result = run(
        """
@torch.compile
def mlp(x, w):
    return torch.relu(x @ w).sum(dim=-1)

def test_inductor():
    w = torch.randn(4, 4)
    for batch in (3, 5, 7):
        mlp(torch.randn(batch, 4), w)
""",
        "--recompile-budget=1",
    )
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=1)


def test_ini_budget(run, pytester) -> None:
    pytester.makeini("[pytest]\nrecompile_budget = 0\n")
    result = run(SHAPES)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*budget 0 (recompile_budget=0 (ini))*"])


def test_recompile_in_a_fixture_fails_the_setup_with_the_gate_message(run) -> None:
    result = run(
        DOUBLE
        + """
@pytest.fixture
def warmed():
    double(torch.ones(2))
    double(torch.ones(3, 3))

def test_uses_it(warmed):
    pass
""",
        "--recompile-budget",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_uses_it*",
            f"{PREFIX} 1 recompile*, budget 0 (--recompile-budget=0)",
            "  fail-fast: stopped at test_it.py:* in warmed, before that recompile ran",
        ]
    )


@pytest.mark.xdist
@pytest.mark.parametrize("flag", [["--recompile-budget"], []])
def test_summary_under_xdist(pytester, flag) -> None:
    pytester.makepyfile(
        test_it=HEADER
        + DOUBLE
        + """
@pytest.mark.max_recompiles(0)
def test_a():
    double(torch.ones(2)); double(torch.ones(3, 3))

@pytest.mark.max_recompiles(1)
def test_b():
    double(torch.ones(2)); double(torch.ones(3, 3))
"""
    )
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "-p", "no:randomly", *flag)
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= recompile gate =*",
            "test_it.py::test_a: 1 recompile*, budget 0 (@max_recompiles(0))",
            "2 gated tests, 2 recompiles; 1 broke the gate, 0 hit recompile_limit; "
            "recompiles cost *",
        ]
    )


# Where the gate is registered, as the process that runs pytest sees it at its end.
WHERE_GATE = """
import json, sys

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):  # not an xdist worker
        with open("where.json", "w") as out:
            json.dump({
                "imported": "pytest_recompile.gate" in sys.modules,
                "registered": config.pluginmanager.has_plugin("recompile-gate"),
            }, out)
"""
# A future xdist that does not register its controller's session where our rule says it does:
# with xdist off, the options alone say "controller", and the tests run in this process.
FAKE_CONTROLLER = """
def pytest_cmdline_main(config):
    config.option.dist, config.option.tx = "load", ["popen"]
"""


@pytest.mark.xdist
@pytest.mark.parametrize(
    ("args", "conftest", "here"),
    [
        (("-p", "xdist", "-n", "2"), "", False),  # the workers run the tests
        (("-p", "xdist", "--dist", "load"), "", True),  # no -n: this process runs them
        (("-p", "xdist", "-n", "2", "--collect-only"), "", True),  # xdist stays out
        (("-p", "no:xdist"), FAKE_CONTROLLER, True),  # registered at session start
    ],
    ids=["controller", "dist-without-workers", "collect-only", "controller-after-all"],
)
def test_an_xdist_controller_imports_no_gate(pytester, args, conftest, here) -> None:
    """A controller runs no test: its start-up imports only the summary's modules. Every
    process that does run tests gates them, whatever the options said."""
    pytester.makeconftest(WHERE_GATE + conftest)
    pytester.makepyfile(
        test_it=HEADER
        + DOUBLE
        + """
def test_recompiles():
    double(torch.ones(2)); double(torch.ones(3, 3))

def test_quiet():
    double(torch.ones(2))
"""
    )
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "no:randomly", "--recompile-budget", *args)
    )
    where = json.loads((pytester.path / "where.json").read_text())
    assert where == {"imported": here, "registered": here}
    if "--collect-only" in args:
        assert result.ret == pytest.ExitCode.OK
        return
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*= recompile gate =*", "test_it.py::test_recompiles: 1 recompile*, budget 0 *"]
    )


def test_a_finished_tests_run_is_not_kept_with_its_item(run, pytester) -> None:
    """Its report carries the result; the run (tracker, records) would otherwise live as long
    as the session's items, a few kilobytes a gated test."""
    pytester.makeconftest(
        """
from pytest_recompile.settings import RUN_KEY

def pytest_sessionfinish(session):
    kept = [item.nodeid for item in session.items if RUN_KEY in item.stash]
    with open("kept.txt", "w") as out:
        out.write(repr(kept))
"""
    )
    result = run(
        DOUBLE
        + """
def test_once():
    double(torch.ones(2))

def test_twice():
    double(torch.ones(2))
    double(torch.ones(3, 3))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=1, failed=1)
    assert (pytester.path / "kept.txt").read_text() == "[]"


def test_collection_hooks_called_twice_register_the_gate_once(run, pytester) -> None:
    """xdist's looponfail child (``-f``) and plugins that collect again call
    ``pytest_collection_modifyitems`` twice in one session: a marker-only run registers the
    gate once, and its marked test is gated as before."""
    pytester.makeconftest(
        """
def pytest_collection_finish(session):
    if not getattr(session, "collected_again", False):
        session.collected_again = True
        session.config.hook.pytest_collection_modifyitems(
            session=session, config=session.config, items=session.items
        )
"""
    )
    result = run(
        DOUBLE
        + """
@pytest.mark.max_recompiles(0)
def test_marked():
    double(torch.ones(2))
    double(torch.ones(3, 3))

def test_plain():
    double(torch.ones(4, 4, 4))
""",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= recompile gate =*",
            "test_it.py::test_marked: 1 recompile*, budget 0 (@max_recompiles(0))",
            "1 gated test, 1 recompile; 1 broke the gate*",
        ]
    )
