"""Guard cost: the guards each cache entry checks, in every report, and the ``max_guards``
budget, with real torch and real pytest."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from snippets import assert_bad_ini, assert_marker_error, inner_args, outcomes, read_json

from pytest_recompile._torch import versions
from pytest_recompile._torch.reasons import installed_guard
from pytest_recompile.model.budget import Budget, Rule
from pytest_recompile.model.guard_cost import EntryGuards, entry_guards, value_guard
from pytest_recompile.model.guards import GUARDS_FIX
from pytest_recompile.model.markers import budget_from_marks
from pytest_recompile.model.messages import entry_line, kinds_text
from pytest_recompile.reports.json_report import SCHEMA_FILE

# A model whose guard tree grows with its layers (torch 2.13, CPU: 36 leaf guards with 2
# layers, 340 with 40).
LAYERS = """
class Stack(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
"""


def _leaf(kind: str, source: str, text: str = "", structural: bool = False):  # type: ignore[no-untyped-def]
    return installed_guard(kind, source, [text or f"{source} check"], "0/0", structural)


def test_entry_guards_counts_kinds_parameters_and_the_users_values() -> None:
    leaves = [
        _leaf("TENSOR_MATCH", "L['self']._modules['0']._parameters['weight']"),
        _leaf("TENSOR_MATCH", "L['self']._modules['0']._parameters['bias']"),
        _leaf("TENSOR_MATCH", "L['x']"),
        _leaf("EQUALS_MATCH", "G['step']", "G['step'] == 0"),
        _leaf("EQUALS_MATCH", "L['self'].scale", "L['self'].scale == 2.0"),
        _leaf("ID_MATCH", "G['helper']"),
        _leaf("ID_MATCH", "G['helper'].inner"),  # reached through a global: not its own
        _leaf("TYPE_MATCH", "L['cfg']"),
        _leaf("EQUALS_MATCH", "list(dict.keys(L['m']._modules))[0]", "... == '0'", True),
    ]
    found = entry_guards("0/0", leaves, torch_count=12, latency_us=40.0)
    assert found.guards == 9
    assert found.count == 9
    assert found.kinds[0] == ("EQUALS_MATCH", 3)
    assert dict(found.kinds) == {
        "EQUALS_MATCH": 3,
        "TENSOR_MATCH": 3,
        "ID_MATCH": 2,
        "TYPE_MATCH": 1,
    }
    assert found.on_parameters == 2
    assert found.values == (
        "EQUALS_MATCH G['step']",
        "EQUALS_MATCH L['self'].scale",
        "ID_MATCH G['helper']",
        "TYPE_MATCH L['cfg']",
    )
    assert value_guard(leaves[-1]) is None  # torch's guard on a module list's order
    assert kinds_text(found.to_dict(), shown=2) == (
        "3 EQUALS_MATCH, 3 TENSOR_MATCH, 3 other; 2 on module parameters and buffers"
    )
    assert entry_line(found.to_dict()).endswith(
        "; torch: guard_count 12, estimated 40 us per check"
    )
    assert found.to_dict()["kinds"]["ID_MATCH"] == 2


def test_an_entry_gone_before_its_tree_was_read_has_torchs_count_only() -> None:
    gone = EntryGuards("1/0", None, torch_count=505, latency_us=None)
    assert gone.count == 505
    assert "505 guards by torch's count" in entry_line(gone.to_dict())
    assert "kinds unknown" in kinds_text(gone.to_dict())


def test_max_guards_marker_reads_like_max_recompiles() -> None:
    class Mark:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.args, self.kwargs = args, kwargs

    budget = budget_from_marks(
        {"max_guards": [Mark(300), Mark(20, function="step"), Mark(500)]}, None, "t"
    )
    assert budget is not None
    assert budget.max_guards == Rule(300, "@max_guards(300)")
    assert budget.guards_for("step", "Model.step") == Rule(20, "@max_guards(20, function='step')")
    assert budget.guards_for("other", "other") == Rule(300, "@max_guards(300)")
    assert budget.named == {"step": "@max_guards(20, function='step')"}
    assert Budget.from_json(json.loads(json.dumps(budget.to_json()))) == budget
    # The default applies where the test has no max_guards of its own.
    default = Rule(100, "--recompile-max-guards=100")
    own = budget_from_marks({"max_guards": [Mark(7)]}, None, "t", guards_default=default)
    assert own is not None
    assert own.max_guards == Rule(7, "@max_guards(7)")
    plain = budget_from_marks({}, None, "t", guards_default=default)
    assert plain is not None
    assert plain.max_guards == default
    assert plain.total is None


DEEP_AND_SHALLOW = """
import os

@pytest.mark.max_guards(int(os.environ["GUARDS"]))
def test_deep():
    torch.compile(Stack(40), backend="eager")(torch.randn(4, 8))

@pytest.mark.max_guards(int(os.environ["GUARDS"]))
def test_shallow():
    torch.compile(Stack(2), backend="eager")(torch.randn(4, 8))
"""

# Where torch keeps a ModuleList's guards apart from the tree (a DictGuardManager's key and
# value managers), a release that cannot list them counts no layer.
needs_dict_guards = pytest.mark.skipif(
    not versions.reads_dict_guards(), reason="this torch does not list a dict's guards"
)


def _entries(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    return {name: test["functions"][0]["entries"][0] for name, test in tests.items()}


@needs_dict_guards
def test_a_40_layer_model_crosses_max_guards_and_a_2_layer_one_does_not(
    run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First measured (each release counts its own trees; torch 2.13: 36 and 340), then a
    # budget between the two.
    monkeypatch.setenv("GUARDS", "100000")
    run(LAYERS + DEEP_AND_SHALLOW, "--recompile-report=r.json").assert_outcomes(passed=2)
    counts = _entries(read_json("r.json"))
    deep, shallow = counts["test_deep"], counts["test_shallow"]
    # The tree grows with the layers: parameters, module types, the list's order.
    assert deep["guards"] > shallow["guards"]
    assert deep["torch_guard_count"] > shallow["torch_guard_count"]
    assert deep["on_parameters"] >= shallow["on_parameters"]
    assert deep["guard_latency_us"] is not None
    budget = (deep["guards"] + shallow["guards"]) // 2

    monkeypatch.setenv("GUARDS", str(budget))
    result = run(LAYERS + DEEP_AND_SHALLOW, "--recompile-report=r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"pytest-recompile: 'Stack.forward' cache entry [[]*] checks {deep['guards']} guards "
            f"on every call, budget {budget} (@max_guards({budget})): *",
            "  Stack.forward  test_it.py:*",
            f"    guards [[]*] {deep['guards']} guards (*); torch: guard_count *, "
            "estimated * us per check",
            f"    fix too many guards: {GUARDS_FIX}",
        ]
    )
    report = read_json("r.json")
    import jsonschema

    jsonschema.validate(report, json.loads(Path(SCHEMA_FILE).read_text()))
    violations = {t["nodeid"].split("::")[1]: t["violations"] for t in report["tests"]}
    assert [v["kind"] for v in violations["test_deep"]] == ["guards"]
    assert violations["test_shallow"] == []


def test_recompile_max_guards_gates_every_test_and_a_marker_wins(run, pytester) -> None:
    source = """
@torch.compile(backend="eager")
def add(x, y):
    return x + y

def test_default():
    add(torch.ones(2), torch.ones(2))

@pytest.mark.max_guards(1000)
def test_own():
    add(torch.ones(2), torch.ones(2))

@pytest.mark.max_guards(1, function="add")
def test_function():
    add(torch.ones(2), torch.ones(2))

@pytest.mark.max_guards(1000, function="ad")
def test_typo():
    add(torch.ones(2), torch.ones(2))
"""
    result = run(source, "--recompile-max-guards=2", "-v")
    assert outcomes(result) == {
        "test_default": "failed",
        "test_own": "passed",
        "test_function": "failed",
        "test_typo": "failed",  # the name matches nothing; the default still judges 'add'
    }
    result.stdout.fnmatch_lines(
        [
            "*recompile gate: active, default budget none, at most 2 guards per entry*",
            "*'add' cache entry * budget 2 (--recompile-max-guards=2)*",
            "*'add' cache entry * budget 1 (@max_guards(1, function='add'))*",
            "*@max_guards(1000, function='ad') names no function this test compiled*"
            "did you mean 'add'?*",
        ]
    )
    pytester.makeini("[pytest]\nrecompile_max_guards = 2\n")
    result = run(source, "-v")
    assert outcomes(result)["test_default"] == "failed"
    result.stdout.fnmatch_lines(["*budget 2 (recompile_max_guards=2 (ini))*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("max_guards(-1)", "*budget must be a non-negative integer, got -1*"),
        ("max_guards('3')", "*budget must be a non-negative integer, got '3' (str)*"),
        (
            "max_guards(3, fn='f')",
            "*unknown keyword 'fn'; accepted form is @pytest.mark.max_guards(n*",
        ),
        ("max_guards()", "*expected exactly one budget, got 0 arguments*"),
    ],
)
def test_bad_max_guards_markers_are_collection_errors(run, marker: str, message: str) -> None:
    result = run(f"@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    assert_marker_error(result, message)


def test_bad_max_guards_option_and_ini(run, pytester) -> None:
    result = run("def test_x():\n    pass\n", "--recompile-max-guards=many")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*pytest-recompile: --recompile-max-guards: expected a non-negative integer*'many'*"]
    )
    assert_bad_ini(
        run,
        pytester,
        "recompile_max_guards = -3",
        "*pytest-recompile: ini option recompile_max_guards: expected a non-negative integer*",
    )


@needs_dict_guards
def test_forbid_guards_sees_into_iterated_dicts_but_not_a_module_lists_order(run) -> None:
    # torch keeps the guards on a dict it iterated apart from the rest of the tree; a baked
    # float there is the user's value, the order of a ModuleList's keys is torch's own.
    result = run(
        LAYERS
        + """
@torch.compile(backend="eager")
def scale(x, cfg):
    for _, value in cfg.items():
        x = x * value
    return x

@pytest.mark.forbid_guards("EQUALS_MATCH")
def test_cfg():
    scale(torch.ones(2), {"a": 2.0})

@pytest.mark.forbid_guards("EQUALS_MATCH")
def test_module_list():
    torch.compile(Stack(3), backend="eager")(torch.randn(2, 8))
""",
        "-v",
    )
    assert outcomes(result) == {"test_cfg": "failed", "test_module_list": "passed"}
    assert "forbidden guard [0/0] EQUALS_MATCH on L['cfg']['a']: " in result.stdout.str()


def test_a_reset_in_teardown_leaves_torchs_count_and_the_budget_still_holds(run) -> None:
    # torch's Dynamo TestCase resets in tearDown, before the gate reads the test's trees.
    result = run(
        LAYERS
        + """
from torch._dynamo.test_case import TestCase

class TestDeep(TestCase):
    @pytest.mark.max_guards(300)
    def test_deep(self):
        torch.compile(Stack(40), backend="eager")(torch.randn(4, 8))
""",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*'Stack.forward' cache entry * checks * guards*budget 300*"])
    (entry,) = read_json("r.json")["tests"][0]["functions"][0]["entries"]
    assert entry["guards"] is None  # the tree was gone: torch's count stands in, kinds unknown
    assert entry["kinds"] == {}
    assert entry["torch_guard_count"] > 300


MARKDOWN = """
@torch.compile(backend="eager")
def add(x, y):
    return x + y

@pytest.mark.max_guards(1)
def test_add():
    add(torch.ones(2), torch.ones(2))
"""


def test_junit_properties_and_markdown_carry_the_largest_entry(run, pytester) -> None:
    run(MARKDOWN, "--junitxml=j.xml", "--recompile-report-md=s.md")
    xml = (pytester.path / "j.xml").read_text()
    assert 'name="recompile_max_guards" value="' in xml
    assert "(add)" in xml
    assert 'name="recompile_guard_latency_us"' in xml
    markdown = (pytester.path / "s.md").read_text()
    assert "### Guards per call: the largest cache entries" in markdown
    assert "| `add` |" in markdown
    assert "| `test_it.py::test_add` | — |" in markdown  # the broken rule, with its message


DEEP = "import torch\n" + LAYERS + 'torch.compile(Stack(40), backend="eager")(torch.randn(4, 8))\n'

CHILD = f"""
import multiprocessing, subprocess, sys
import pytest
import torch

DEEP = {DEEP!r}

@pytest.mark.max_guards(10)
def test_deep_in_a_child():
    subprocess.run([sys.executable, "-c", DEEP], check=True)

@pytest.mark.max_guards(100000)
def test_deep_within():
    subprocess.run([sys.executable, "-c", DEEP], check=True)

def compile_once():
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))

@pytest.mark.max_guards(1)
def test_fork_child_compiles_once():
    # it leaves through os._exit: its one compile's tree is read by its exit finalizer
    child = multiprocessing.get_context("fork").Process(target=compile_once)
    child.start()
    child.join()
    assert child.exitcode == 0
"""


@pytest.mark.processes
@pytest.mark.skipif(sys.platform == "win32", reason="child process set-up")
@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_max_guards_in_child_processes_and_under_xdist(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_it=textwrap.dedent(CHILD))
    result = pytester.runpytest_subprocess(*inner_args(
        "-v", "-p", "no:randomly", "-p", "no:cacheprovider", "--recompile-report=r.json", *workers
    ))  # fmt: skip
    assert outcomes(result) == {
        "test_deep_in_a_child": "failed",
        "test_deep_within": "passed",
        "test_fork_child_compiles_once": "failed",
    }
    result.stdout.fnmatch_lines(["*pid * (python -c): 'Stack.forward' cache entry * budget 10 *"])
    tests = {t["nodeid"].split("::")[1]: t for t in read_json("r.json")["tests"]}
    (child,) = tests["test_deep_in_a_child"]["processes"]
    assert [v["kind"] for v in child["violations"]] == ["guards"]
    assert child["functions"][0]["entries"][0]["guards"] > 10
    (forked,) = tests["test_fork_child_compiles_once"]["processes"]
    assert [v["kind"] for v in forked["violations"]] == ["guards"]


@pytest.mark.parametrize(
    ("source", "written"),
    [
        ("x", "x"),
        ("L['x']", "x"),
        ("L['batch']['ids']", "batch['ids']"),
        ("G['cache'].k", "cache.k"),
    ],
)
def test_a_guard_source_as_the_users_code_writes_it(source: str, written: str) -> None:
    from pytest_recompile.model.guards import expression

    assert expression(source) == written


def test_a_size_fix_names_the_argument_and_the_dimension() -> None:
    from pytest_recompile._torch.reasons import parse_reason

    reason = parse_reason("0/0: tensor 'x' size mismatch at index 1. expected 4, actual 8")
    assert "torch._dynamo.mark_dynamic(x, 1)" in reason.hint
    other = parse_reason("0/0: tensor 'x' dtype mismatch. expected Float, actual Double")
    assert "mark_dynamic" not in other.hint


SIZES = """
@torch.compile(backend="eager")
def total(x, y):
    return x.sum() + y.sum()

@pytest.mark.max_recompiles(0)
def test_sizes():
    total(torch.ones(4), torch.ones(3, 2))
    total(torch.ones(4), torch.ones(3, 5))
"""


def test_a_size_recompile_gets_mark_dynamic_and_torchs_dynamic_sources(run) -> None:
    result = run(SIZES, "--recompile-mode=at-end", "--recompile-report=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "    fix TENSOR_MATCH(size): dimension 1 of y changed size: "
            "torch._dynamo.mark_dynamic(y, 1) before the call*",
            "    fix TENSOR_MATCH(size): or compile them dynamic from the start: "
            "TORCH_COMPILE_DYNAMIC_SOURCES=\"L[[]'y'[]]\"*",
        ]
    )
    (fn,) = read_json("r.json")["tests"][0]["functions"]
    assert fn["dynamic_sources"] == ["L['y']"]
    # Fail-fast stops the recompile before torch compiles it: torch's state never learns
    # the size varies, and only the mark_dynamic fix is given.
    result = run(SIZES, "--recompile-report=r.json")
    result.stdout.fnmatch_lines(["*torch._dynamo.mark_dynamic(y, 1) before the call*"])
    assert "TORCH_COMPILE_DYNAMIC_SOURCES" not in result.stdout.str()


def _fn(name: str, entries: int, limit: bool = False) -> dict[str, object]:
    return {
        "recompiles": [],
        "qualname": name,
        "file": f"/repo/{name}.py",
        "line": 1,
        "cache_entries": entries + 1,  # a resume frame's too: the limit counts per code object
        "code_entries": entries,
        "recompile_limit": "recompile_limit (8)" if limit else None,
    }


def test_limit_need_takes_the_most_entries_of_each_function_wherever_held() -> None:
    from runs import run_of

    from pytest_recompile.reports.recompile_limit import limit_line, limit_need

    results = [
        ("t.py::test_a", {"functions": [_fn("f", 2), _fn("g", 1)], "processes": []}),
        (
            "t.py::test_b",
            {"functions": [_fn("f", 1)], "processes": [{"pid": 7, "functions": [_fn("f", 5)]}]},
        ),
    ]
    fixtures = [{"node": "t.py", "fixture": "module fixture 'model'", "functions": [_fn("h", 3)]}]
    run = run_of(tests={n: ("passed", d) for n, d in results}, fixtures=fixtures)  # type: ignore[misc]
    need = limit_need(run)
    assert [(n["qualname"], n["most_entries"], n["where"]) for n in need["functions"]] == [
        ("f", 5, "t.py::test_b (pid 7)"),
        ("h", 3, "t.py: module fixture 'model'"),
        ("g", 1, "t.py::test_a"),
    ]
    assert need["suggested"] == 10
    assert need["hit"] == []
    line = limit_line(need, root="/repo")
    assert line is not None
    assert line.startswith("recompile_limit: one function held at most 5 cache entries (f f.py:1")
    assert "recompile_limit = 10 holds this run with 2x headroom" in line
    hit = limit_need(
        run_of(
            tests={"t.py::test_c": ("passed", {"functions": [_fn("f", 8, True)], "processes": []})}
        )
    )  # type: ignore[dict-item]
    assert hit["hit"] == ["f"]
    assert "f hit the limit, so its need is unknown" in (limit_line(hit) or "")
    assert limit_line(limit_need(run_of())) is None


def test_the_summary_ends_with_the_recompile_limit_the_run_needs(run) -> None:
    result = run(SIZES, "--recompile-mode=report-only", "--recompile-report=r.json")
    result.stdout.fnmatch_lines(
        [
            "recompile_limit: one function held at most 2 cache entries (total test_it.py:*, "
            "in test_it.py::test_sizes); recompile_limit = 4 holds this run with 2x headroom*",
        ]
    )
    need = read_json("r.json")["recompile_limit"]
    assert need["suggested"] == 4
    assert need["functions"][0]["most_entries"] == 2
    assert need["partial"] is False
    # Fail-fast stops the recompile before it makes its entry: the line says to measure.
    result = run(SIZES, "--recompile-report=r.json")
    result.stdout.fnmatch_lines(
        [
            "recompile_limit: one function held at most 1 cache entry *; fail-fast stopped "
            "recompiles before they made entries: measure with --recompile-mode=report-only"
        ]
    )
    assert read_json("r.json")["recompile_limit"]["partial"] is True


BASELINED = """
import os

SCALE = 2.0

@torch.compile(backend="eager")
def scale(x):
    if os.environ.get("BAKE"):  # a later change bakes a global into the graph
        return x * SCALE
    return x * 2

def test_scale():
    scale(torch.ones(3))

def test_model():
    layers = int(os.environ.get("LAYERS", "2"))
    torch.compile(Stack(layers), backend="eager")(torch.randn(2, 8))
"""


@needs_dict_guards
def test_a_baseline_catches_new_guards_before_any_recompile_and_ratchets_down(
    run, pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = LAYERS + BASELINED
    base = pytester.path / "b.json"
    run(source, "--recompile-baseline-update", f"--recompile-baseline={base}").assert_outcomes(
        passed=2
    )
    tests = json.loads(base.read_text())["tests"]
    assert tests["test_it.py::test_scale"]["recompiles"] == 0
    two_layers = tests["test_it.py::test_model"]["guards"]["Stack.forward"]
    assert "EQUALS_MATCH G['SCALE']" not in tests["test_it.py::test_scale"]["values"]["scale"]
    run(source, f"--recompile-baseline={base}").assert_outcomes(passed=2)

    # A constant newly baked in: the test fails on its first and only compile.
    monkeypatch.setenv("BAKE", "1")
    result = run(source, f"--recompile-baseline={base}", "-v")
    assert outcomes(result) == {"test_scale": "failed", "test_model": "passed"}
    result.stdout.fnmatch_lines(
        [
            "*'scale' has 1 guard on a Python value the baseline does not have: EQUALS_MATCH "
            "G[[]'SCALE'[]]; a value newly baked into the graph recompiles when it changes*"
        ]
    )
    assert "recompile 1" not in result.stdout.str()
    monkeypatch.delenv("BAKE")

    # More layers, more guards than the baseline's.
    monkeypatch.setenv("LAYERS", "3")
    result = run(source, f"--recompile-baseline={base}", "-v")
    assert outcomes(result) == {"test_scale": "passed", "test_model": "failed"}
    result.stdout.fnmatch_lines(
        [
            "*'Stack.forward' cache entry * checks * guards on every call, "
            f"budget {two_layers} (baseline)*"
        ]
    )

    # The update ratchets down: fewer layers, a lower count, and the old one then fails.
    monkeypatch.setenv("LAYERS", "1")
    run(source, "--recompile-baseline-update", f"--recompile-baseline={base}").assert_outcomes(
        passed=2
    )
    one_layer = json.loads(base.read_text())["tests"]["test_it.py::test_model"]["guards"]
    assert one_layer["Stack.forward"] < two_layers
    monkeypatch.setenv("LAYERS", "2")
    result = run(source, f"--recompile-baseline={base}", "-v")
    assert outcomes(result)["test_model"] == "failed"


SHARED_WRAPPER = """
import functools

def add(x, y):
    return x + y

def scale(x, k):
    return x * k

# torch.compile of a partial compiles torch's wrapper: both functions' entries hang on one
# code object, and each function gets only its own.
compiled_add = torch.compile(functools.partial(add, y=1), backend="eager")
compiled_scale = torch.compile(functools.partial(scale, k=2), backend="eager")

@pytest.mark.max_guards(100000)
def test_both():
    compiled_add(torch.ones(2))
    compiled_scale(torch.ones(2))
"""


def test_functions_sharing_torchs_wrapper_get_their_own_entries(run) -> None:
    run(SHARED_WRAPPER, "--recompile-report=r.json").assert_outcomes(passed=1)
    functions = read_json("r.json")["tests"][0]["functions"]
    assert sorted(f["qualname"] for f in functions) == ["add", "scale"]
    for fn in functions:
        (entry,) = fn["entries"]
        assert entry["guards"] is not None  # its own tree, read
        assert entry["guards"] > 0


def test_a_reset_in_the_test_leaves_the_limit_at_what_torch_held(run) -> None:
    """torch._dynamo.explain() resets torch: the entries are gone when read, but the compile
    that made the entry began with none on its code object and torch counted its guards, so
    the summary says 1 (not 'held at most 0 cache entries ... recompile_limit = 1 holds')."""
    from pytest_recompile.reports.recompile_limit import LIMIT_UNMEASURED

    result = run(
        """
@torch.compile(backend="eager")
def f(x):
    return x + 1

def plain(x):
    return x * 2

def test_explain():
    f(torch.ones(2))
    torch._dynamo.explain(plain)(torch.ones(2))
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["recompile_limit: one function held at most 1 cache entry (f test_it.py:*"]
    )
    result.stdout.no_fnmatch_line(LIMIT_UNMEASURED)


def test_a_reset_midway_counts_the_entry_made_just_before_it(run) -> None:
    """Three entries, then torch._dynamo.reset() in the test: the third entry is installed
    after its compile ends and dropped before any compile looks again; the limit line reads
    the three torch held, not two."""
    result = run(
        """
def scale(x, n):
    return x * n

f = torch.compile(scale, backend="eager", dynamic=False)

@pytest.mark.max_recompiles(10)
def test_reset_midway():
    for n in range(3):
        f(torch.ones(2), n)
    torch._dynamo.reset()
    f(torch.ones(2), 0)
""",
        "--recompile-mode=report-only",
    )
    result.stdout.fnmatch_lines(
        ["recompile_limit: one function held at most 3 cache entries (scale test_it.py:*"]
    )
