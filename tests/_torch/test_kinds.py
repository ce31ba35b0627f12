"""Guard kinds: classification on real recompiles, text fallback, markers built on kinds."""

from __future__ import annotations

from collections.abc import Callable
from glob import escape as esc

import pytest
import torch
from snippets import DOUBLE, STEP, assert_marker_error, assert_totals

from pytest_recompile import RecompileTracker
from pytest_recompile._torch import versions
from pytest_recompile._torch.reasons import parse_reason
from pytest_recompile.model.guards import (
    ALIASES,
    KINDS,
    UnknownKind,
    check_kind,
    hint_for,
    kind_matches,
    normalise_kind,
)
from pytest_recompile.model.names import EXPECT_GUARDS_FORM, PREFIX


def compiled(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    return torch.compile(fn, backend="eager")


def global_int() -> None:
    namespace: dict[str, object] = {"torch": torch, "step": 0}
    exec("def f(x):\n    return x + step\n", namespace)
    f = compiled(namespace["f"])  # type: ignore[arg-type]
    for step in range(2):
        namespace["step"] = step
        f(torch.ones(2))


def int_argument() -> None:
    f = compiled(lambda x, n: x * n)
    f(torch.ones(2), 2)
    f(torch.ones(2), 3)


def size() -> None:
    f = compiled(lambda x: x * 2)
    f(torch.ones(4))
    f(torch.ones(8))


def dtype() -> None:
    f = compiled(lambda x: x * 2)
    f(torch.ones(2))
    f(torch.ones(2, dtype=torch.float64))


def rank() -> None:
    f = compiled(lambda x: x.sum())
    f(torch.ones(2))
    f(torch.ones(2, 2))


def stride() -> None:
    f = compiled(lambda x: x * 2)
    f(torch.ones(3, 4))
    f(torch.ones(4, 3).t())


def requires_grad() -> None:
    f = compiled(lambda x: x * 2)
    f(torch.ones(3))
    f(torch.ones(3, requires_grad=True))


def device() -> None:
    f = compiled(lambda x: x * 2)
    f(torch.ones(3))
    f(torch.ones(3, device="meta"))


def not_a_tensor() -> None:
    f = compiled(lambda x, y: x if y is None else x * 2)
    f(torch.ones(2), torch.ones(2))
    f(torch.ones(2), None)


def grad_mode() -> None:
    f = compiled(lambda x: x.sin())
    f(torch.ones(2))
    with torch.no_grad():
        f(torch.ones(2))


def autocast() -> None:
    f = compiled(lambda x: x @ x)
    f(torch.ones(2, 2))
    with torch.autocast("cpu"):
        f(torch.ones(2, 2))


def new_function() -> None:
    f = compiled(lambda x, fn: fn(x))
    f(torch.ones(2), torch.sin)
    f(torch.ones(2), torch.cos)


def list_to_tuple() -> None:
    f = compiled(lambda xs: xs[0] * 2)
    f([torch.ones(2)])
    f((torch.ones(2),))


def list_length() -> None:
    f = compiled(lambda xs: sum(xs))
    f([torch.ones(2)] * 2)
    f([torch.ones(2)] * 3)


def batch_of_one() -> None:
    f = compiled(lambda x: x * 2)
    for batch in (4, 8, 1):
        f(torch.ones(batch, 3))


def none_to_tensor() -> None:
    f = compiled(lambda x, y=None: x * 2 if y is None else x + y)
    f(torch.ones(2))
    f(torch.ones(2), torch.ones(2))


def aliasing() -> None:
    f = compiled(lambda a, b: a + b)
    t = torch.ones(2)
    f(t, t)
    f(torch.ones(2), torch.ones(2))


def other_backend() -> None:
    def g(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    torch.compile(g, backend="eager")(torch.ones(2))
    torch.compile(g, backend="aot_eager")(torch.ones(2))


def function_mode() -> None:
    from torch.overrides import TorchFunctionMode

    class Passthrough(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    f = compiled(lambda x: x * 2)
    f(torch.ones(2))
    with Passthrough():
        f(torch.ones(2))


def module_attribute() -> None:
    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 1.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    model = Scale()
    compiled_model = torch.compile(model, backend="eager")
    compiled_model(torch.ones(2))
    model.scale = 2.0
    compiled_model(torch.ones(2))


def train_eval() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    compiled_model = torch.compile(model, backend="eager")
    compiled_model(torch.ones(1, 2))
    model.eval()
    compiled_model(torch.ones(1, 2))


SINCE_2_8 = versions.version_tuple(torch.__version__) >= (2, 8)


def identity(source: str) -> tuple[str, str]:
    return ("ID_MATCH", f"___check_obj_id({source}, *")


@pytest.mark.parametrize(
    ("scenario", "label", "text"),
    [
        (global_int, "EQUALS_MATCH", "G['step'] == 0"),
        (int_argument, "EQUALS_MATCH", "n == 2"),
        (size, "TENSOR_MATCH(size)", "tensor 'x' size mismatch at index 0. expected 4, actual 8"),
        (dtype, "TENSOR_MATCH(dtype)", "tensor 'x' dtype mismatch. expected Float, actual Double"),
        (rank, "TENSOR_MATCH(rank)", "tensor 'x' rank mismatch. expected 1, actual 2"),
        (stride, "TENSOR_MATCH(stride)", "tensor 'x' stride mismatch at index 0*"),
        (requires_grad, "TENSOR_MATCH(requires_grad)", "tensor 'x' requires_grad mismatch*"),
        (device, "TENSOR_MATCH(device)", "tensor 'x' dispatch key set mismatch*"),
        (not_a_tensor, "TENSOR_MATCH(type)", "expected type of 'y' to be *"),
        (grad_mode, "GLOBAL_STATE(grad_mode)", "GLOBAL_STATE changed: grad_mode"),
        (autocast, "GLOBAL_STATE(autocast*", "GLOBAL_STATE changed: autocast*"),
        (new_function, "ID_MATCH", "___check_obj_id(fn, *"),
        (list_to_tuple, "TYPE_MATCH", "___check_type_id(xs, *"),
        (list_length, "SEQUENCE_LENGTH", "len(xs) == 2"),
        (batch_of_one, "SHAPE_ENV(0/1 specialization)", "2 <= x.size()[0]*"),
        # torch 2.7 guards None and bools by identity: its kind is then ID_MATCH.
        (none_to_tensor, *(("NONE_MATCH", "y is None") if SINCE_2_8 else identity("y"))),
        (aliasing, "OBJECT_ALIASING", "a is b"),
        (other_backend, "BACKEND_MATCH", "BACKEND_MATCH*"),  # 2.9 and older: no text of its own
        (function_mode, "TORCH_FUNCTION_MODE_STACK", "___check_torch_function_mode_stack()"),
        (module_attribute, "EQUALS_MATCH", "self.scale == 1.0"),
        (
            train_eval,
            *(
                ("EQUALS_MATCH", "fn._modules['1'].training == True")
                if SINCE_2_8
                else identity("fn._modules['1'].training")
            ),
        ),
    ],
)
def test_every_kind_torch_produces(scenario: Callable[[], None], label: str, text: str) -> None:
    def matches(value: str, pattern: str) -> bool:
        return value.startswith(pattern[:-1]) if pattern.endswith("*") else value == pattern

    with RecompileTracker(mode="report-only") as tracker:
        scenario()
    reasons = [rc.reasons[0] for record in tracker.records for rc in record.recompiles]
    assert reasons, "the scenario did not recompile"
    last = reasons[-1]
    assert matches(last.label, label), (last.label, last.text)
    assert matches(last.text, text), last.text
    assert last.hint


@pytest.mark.parametrize(
    ("raw", "kind", "detail", "source", "expected", "actual"),
    [
        # torch <= 2.10 spelled locals L['x'] and had no User stack trace.
        ("tensor 'L['x']' size mismatch at index 0. expected 4, actual 8",
         "TENSOR_MATCH", "size", "L['x']", "4", "8"),
        ("0/1: tensor 'x' dtype mismatch. expected Float, actual Double\nUser stack trace:\n"
         "  File \"t.py\", line 3, in f\n    return x * 2",
         "TENSOR_MATCH", "dtype", "x", "Float", "Double"),
        ("tensor 'L['x']' Tensor device index mismatch. Expected device index to be 0, actual 1",
         "TENSOR_MATCH", "device", "L['x']", "0", "1"),
        ("L['n'] == 3                 # return x * n  # t.py:5 in f",
         "EQUALS_MATCH", None, "L['n']", "3", None),
        ("___check_obj_id(L['fn'], 140234)", "ID_MATCH", None, "L['fn']", None, None),
        ("___check_type_id(L['xs'], 9400)", "TYPE_MATCH", None, "L['xs']", None, None),
        ("len(L['xs']) == 2", "SEQUENCE_LENGTH", None, "L['xs']", "2", None),
        ("L['y'] is None", "NONE_MATCH", None, "L['y']", None, None),
        ("L['a'] is L['b']", "OBJECT_ALIASING", None, "L['a']", None, None),
        ("Duplicate tensor found where not expected!", "OBJECT_ALIASING", None, None, None, None),
        ("L['x'].size()[0] <= 64", "SHAPE_ENV", None, None, None, None),
        ("GLOBAL_STATE changed: grad_mode, deterministic_algorithms",
         "GLOBAL_STATE", "grad_mode, deterministic_algorithms", None, None, None),
        ("utils_device.CURRENT_DEVICE == None", "DEFAULT_DEVICE", None, None, None, None),
        ("BACKEND_MATCH failure: torch.compile detected different backend",
         "BACKEND_MATCH", None, None, None, None),
        ("expected type of 'y' to be a tensor type, ' but found <class 'NoneType'>",
         "TENSOR_MATCH", "type", "y", "a tensor", "NoneType"),  # torch 2.13
        ("expected type of 'y' to be <class 'torch.Tensor'>, but found <class 'NoneType'>",
         "TENSOR_MATCH", "type", "y", "a tensor", "NoneType"),  # torch 2.14
        # The user's source line in torch's comment may hold ";" (found by hypothesis).
        ("0/0: y is None                  # f(a); g(b)  # t.py:3 in f",
         "NONE_MATCH", None, "y", None, None),
        ("something torch has not said before", "OTHER", None, None, None, None),
    ],
)  # fmt: skip
def test_text_fallback(raw, kind, detail, source, expected, actual) -> None:
    reason = parse_reason(raw)
    assert (reason.kind, reason.detail, reason.source) == (kind, detail, source)
    assert (reason.expected, reason.actual) == (expected, actual)


def test_several_failing_parts_each_lose_their_comment() -> None:
    raw = (
        "0/1: G['a'] == 1        # a = 1; b = 2  # t.py:3 in f; "
        "G['b'] == 2        # return a + b  # t.py:4 in f"
    )
    assert parse_reason(raw).text == "G['a'] == 1; G['b'] == 2"


def test_leaf_kind_wins_over_text() -> None:
    assert parse_reason("0/0: x == 3", "CONSTANT_MATCH").kind == "EQUALS_MATCH"
    assert parse_reason("0/0: len(xs) == 2", "LENGTH_CHECK").kind == "SEQUENCE_LENGTH"
    assert parse_reason("0/0: x == 3", "LAMBDA_GUARD").kind == "EQUALS_MATCH"  # no kind: text


@pytest.mark.parametrize("text", ["", "\x00\n::", "tensor '", "0/: ==", "len(", "a is", "#  #"])
def test_parse_reason_never_raises(text: str) -> None:
    assert parse_reason(text).kind in KINDS


def test_aliases_and_unknown_kinds() -> None:
    assert {normalise_kind(a) for a in ALIASES} <= set(KINDS)
    assert check_kind("tensor_match", "here") == "TENSOR_MATCH"
    assert check_kind("LENGTH_CHECK", "here") == "SEQUENCE_LENGTH"
    with pytest.raises(UnknownKind, match="did you mean 'TENSOR_MATCH'"):
        check_kind("TENSOR_MATHC", "here")
    with pytest.raises(UnknownKind, match="guard kinds are strings"):
        check_kind(3, "here")


def test_kind_with_a_detail() -> None:
    assert check_kind("TENSOR_MATCH(size)", "here") == "TENSOR_MATCH(size)"
    assert check_kind("tensor_match( Size )", "here") == "TENSOR_MATCH(size)"
    assert check_kind("CHECK_TENSOR(dtype)", "here") == "TENSOR_MATCH(dtype)"
    assert check_kind("GLOBAL_STATE(grad_mode)", "here") == "GLOBAL_STATE(grad_mode)"
    assert check_kind("GLOBAL_STATE(autocast(cpu)_enabled)", "here") == (
        "GLOBAL_STATE(autocast(cpu)_enabled)"
    )
    with pytest.raises(UnknownKind, match=r"unknown detail 'sise'.*size, stride, dtype"):
        check_kind("TENSOR_MATCH(sise)", "here")
    with pytest.raises(UnknownKind, match=r"'TENSOR_MATCH\(\)' names no detail"):
        check_kind("TENSOR_MATCH()", "here")
    with pytest.raises(UnknownKind, match="installed guards have no detail"):
        check_kind("TENSOR_MATCH(size)", "here", details=False)
    with pytest.raises(UnknownKind, match=r"unknown guard kind 'NOT_A_KIND'; valid kinds: "):
        check_kind("NOT_A_KIND", "here")
    size = frozenset({"TENSOR_MATCH(size)", "GLOBAL_STATE(grad_mode)"})
    assert kind_matches(size, "TENSOR_MATCH", "size")
    assert not kind_matches(size, "TENSOR_MATCH", "dtype")
    assert not kind_matches(size, "TENSOR_MATCH", None)
    assert kind_matches(size, "GLOBAL_STATE", "grad_mode")
    # torch names several changed flags space-separated
    assert not kind_matches(size, "GLOBAL_STATE", "grad_mode deterministic_algorithms ")
    both = size | {"GLOBAL_STATE(deterministic_algorithms)"}
    assert kind_matches(both, "GLOBAL_STATE", "grad_mode deterministic_algorithms ")
    assert kind_matches(frozenset({"TENSOR_MATCH"}), "TENSOR_MATCH", "dtype")


def test_expect_guards_with_a_detail_matches_that_detail_only(run) -> None:
    result = run(
        DOUBLE
        + """
@pytest.mark.max_recompiles(3)
@pytest.mark.expect_guards("TENSOR_MATCH(size)", "GLOBAL_STATE(grad_mode)")
def test_sizes_and_grad_mode():
    double(torch.ones(2))
    double(torch.ones(3))
    with torch.no_grad():
        double(torch.ones(3))

@pytest.mark.max_recompiles(3)
@pytest.mark.expect_guards("TENSOR_MATCH(size)")
def test_dtype_is_not_a_size():
    double(torch.ones(2))
    double(torch.ones(2, dtype=torch.float64))
"""
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*'double' recompiled because of TENSOR_MATCH(dtype), not a kind this test expects "
            "(@expect_guards('TENSOR_MATCH(size)')): tensor 'x' dtype mismatch*",
        ]
    )


def test_forbid_guards_takes_no_detail(run) -> None:
    result = run('@pytest.mark.forbid_guards("TENSOR_MATCH(size)")\ndef test_x():\n    pass\n')
    assert_marker_error(result, "*'TENSOR_MATCH(size)': installed guards have no detail*")


def test_hints_name_the_usual_fix() -> None:
    assert "mark_dynamic" in hint_for("TENSOR_MATCH", "size", "x", "")
    assert "mark_unbacked" in hint_for("SHAPE_ENV", "0/1 specialization", None, "2 <= x")
    assert "torch.tensor" in hint_for("EQUALS_MATCH", None, "G['step']", "")
    assert "allow_unspec_int_on_nn_module" in hint_for("EQUALS_MATCH", None, "self.n", "")
    assert "budget 1" in hint_for("GLOBAL_STATE", "grad_mode", None, "")
    assert "outside the loop" in hint_for("ID_MATCH", None, "fn", "")
    assert "rank" in hint_for("TENSOR_MATCH", "rank", "x", "")


STEPS = (
    STEP
    + """
def run_steps(n):
    global step
    for i in range(n):
        step = i
        f(torch.ones(2))
"""
)


def test_baked_constant_under_expect_tensor_match_names_equals_match(run) -> None:
    result = run(
        STEPS
        + """
@pytest.mark.max_recompiles(3)
@pytest.mark.expect_guards("TENSOR_MATCH")
def test_steps():
    run_steps(3)
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            esc(
                f"{PREFIX} 'f' recompiled because of EQUALS_MATCH, not a kind this test expects "
                "(@expect_guards('TENSOR_MATCH')): G['step'] == 0"
            ),
            esc("    recompile 1 [0/1] EQUALS_MATCH: G['step'] == 0 (this call: 1)   <- stopped")
            + "*",
            "    fix EQUALS_MATCH: a Python value is baked into the graph as a constant: pass it as"
            " a tensor*",
        ]
    )


def test_expect_guards_passes_for_allowed_kinds(run) -> None:
    result = run(
        DOUBLE
        + """
@pytest.mark.max_recompiles(3)
@pytest.mark.expect_guards("TENSOR_MATCH", "GLOBAL_STATE")
def test_allowed():
    double(torch.ones(2))
    double(torch.ones(2, 2))
    with torch.no_grad():
        double(torch.ones(2))

@pytest.mark.expect_guards("GLOBAL_STATE")
def test_kinds_alone_gate_the_test():
    double(torch.ones(2))
    with torch.no_grad():
        double(torch.ones(2))
    double(torch.ones(2, dtype=torch.float64))
"""
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_kinds_alone_gate_the_test*",
            "*recompiled because of TENSOR_MATCH, not a kind this test expects "
            "(@expect_guards('GLOBAL_STATE')): tensor 'x' dtype mismatch*",
        ]
    )


def test_unknown_kind_is_a_usage_error_with_the_closest(run) -> None:
    result = run('@pytest.mark.expect_guards("TENSOR_MATHC")\ndef test_x():\n    pass\n')
    assert_marker_error(
        result,
        "*@pytest.mark.expect_guards on test_it.py::test_x: unknown guard kind "
        "'TENSOR_MATHC' (did you mean 'TENSOR_MATCH'?); valid kinds: TENSOR_MATCH, EQUALS_MATCH*",
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("expect_guards()", EXPECT_GUARDS_FORM),
        ("expect_guards(kinds='ID_MATCH')", EXPECT_GUARDS_FORM),
        ("forbid_guards(3)", "guard kinds are strings"),
        ("fullgraph(True)", "takes no arguments"),
        ("max_graph_breaks(-1)", "non-negative integer"),
        ("max_graph_breaks()", "expected exactly one count"),
    ],
)
def test_bad_kind_markers(run, marker: str, message: str) -> None:
    result = run(f"@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    assert_marker_error(result, f"*{PREFIX}*test_x*{esc(message)}*")


def test_forbid_guards_catches_a_baked_int_argument_on_one_call(run) -> None:
    result = run(
        """
@torch.compile(backend="eager")
def scale(x, n):
    return x * n

@pytest.mark.forbid_guards("CONSTANT_MATCH")
def test_one_call():
    scale(torch.ones(2), 3)

@pytest.mark.forbid_guards("EQUALS_MATCH")
def test_tensor_argument_is_fine():
    scale(torch.ones(2), torch.tensor(3.0))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_one_call _*",
            f"{PREFIX} 'scale' installed 1 forbidden guard of kind EQUALS_MATCH "
            "(@forbid_guards('CONSTANT_MATCH')): L[[]'n'[]] == 3",
            "    cache entries: 1, compiles: 1, recompiles: 0",
            "    forbidden guard [[]0/0[]] EQUALS_MATCH on L[[]'n'[]]: L[[]'n'[]] == 3",
            "    fix EQUALS_MATCH: *",
        ]
    )


def test_forbid_guards_ignores_framework_guards(run) -> None:
    result = run(
        DOUBLE
        + """
import math

@torch.compile(backend="eager")
def uses_module_constant(x):
    return torch.sin(x) * math.pi

@pytest.mark.forbid_guards("GLOBAL_STATE", "ID_MATCH", "EQUALS_MATCH", "DEFAULT_DEVICE")
def test_clean():
    double(torch.ones(2))
    uses_module_constant(torch.ones(2))
"""
    )
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=0)


BREAKS = """
@torch.compile(backend="eager")
def branchy(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1

@torch.compile(backend="eager")
def chatty(x):
    print("tracing")
    return x + 1
"""


def test_fullgraph_marker_fails_at_the_break_with_its_reason(run) -> None:
    result = run(
        BREAKS
        + """
@pytest.mark.fullgraph
def test_branch():
    branchy(torch.ones(2))

def test_no_marker_no_fullgraph():
    branchy(torch.ones(2))
"""
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} graph break under fullgraph (@pytest.mark.fullgraph): *",
            "  graph break 1 at test_it.py:* in branchy: *",  # worded per release
            "      if y.sum() > 0:",
        ]
    )


def test_fullgraph_cli_twin_applies_to_every_gated_test(run) -> None:
    result = run(BREAKS + "\ndef test_print():\n    chatty(torch.ones(2))\n",
                 "--recompile-budget", "--recompile-fullgraph")  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*fullgraph*",
            f"{PREFIX} graph break under fullgraph (--recompile-fullgraph): "
            "Failed to trace builtin operator",
            "  graph break 1 at test_it.py:* in chatty: Failed to trace builtin operator",
            '      print("tracing")',
            "    fix: Avoid calling builtin `print`*",
            "*= recompile gate =*",
            "test_it.py::test_print: graph break under fullgraph (--recompile-fullgraph): "
            "Failed to trace builtin operator",
        ]
    )


@pytest.mark.parametrize("how", ["flag", "ini"])
def test_fullgraph_option_alone_gates_every_test(run, pytester: pytest.Pytester, how: str) -> None:
    """As --recompile-max-guards does, the fullgraph option gates every test on its own: no
    budget is needed for a graph break to fail (docs/options.md)."""
    args = ["--recompile-fullgraph"] if how == "flag" else []
    if how == "ini":
        pytester.makeini("[pytest]\nrecompile_fullgraph = true\n")
    source = "\ndef test_print():\n    chatty(torch.ones(2))\n\ndef test_clean():\n    pass\n"
    result = run(BREAKS + source, *args)
    result.assert_outcomes(failed=1, passed=1)
    source_name = "--recompile-fullgraph" if how == "flag" else "recompile_fullgraph (ini)"
    result.stdout.fnmatch_lines(
        [
            "recompile gate: active, default budget none, *, fullgraph",
            f"{PREFIX} graph break under fullgraph ({source_name}): "
            "Failed to trace builtin operator",
            "2 gated tests, 0 recompiles; 1 broke the gate, *",
        ]
    )


def test_max_graph_breaks_counts_distinct_sites(run) -> None:
    result = run(
        BREAKS
        + """
@pytest.mark.max_graph_breaks(1)
def test_two_sites():
    for _ in range(3):
        branchy(torch.ones(2))
        chatty(torch.ones(2))

@pytest.mark.max_graph_breaks(2)
def test_within():
    branchy(torch.ones(2))
    chatty(torch.ones(2))
"""
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 2 graph breaks, budget 1 (@max_graph_breaks(1))",
            "  graph break 1 at test_it.py:* in branchy: *",
            "      if y.sum() > 0:",
            "  graph break 2 at test_it.py:* in chatty: Failed to trace builtin operator",
        ]
    )
