"""Compile work, counted (docs/compile-work.md): graphs, FX ops, Inductor kernels, Dynamo
restarts and nested_compile_region subgraphs per function and test, from torch's own
records; the markers that cap them, the baseline that ratchets them, and figures that are the
same in any order, under xdist and in shards. Real torch, real compiles."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
import torch
import torch._dynamo.callback
from snippets import inner_args

from pytest_recompile.cli import main
from pytest_recompile.model.budget import BudgetError
from pytest_recompile.model.messages import work_text
from pytest_recompile.model.results import without_timings
from pytest_recompile.model.work import CompileWork, allowed, parse_tolerance, summed

needs_region = pytest.mark.skipif(
    not hasattr(torch.compiler, "nested_compile_region"),
    reason="torch.compiler.nested_compile_region is torch 2.8 and newer",
)

# A stack of four layers through one block: reused, one subgraph called four times; with
# every other weight stored transposed (other strides), two subgraphs.
STACK = """
@torch.compiler.nested_compile_region
def block(x, weight):
    return torch.relu(x @ weight) + x


class Stack(torch.nn.Module):
    def __init__(self, layers=4, width=8, transposed=False):
        super().__init__()
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(
                torch.randn(width, width).t() if transposed and i % 2 else torch.randn(width, width)
            )
            for i in range(layers)
        )

    def forward(self, x):
        for weight in self.weights:
            x = block(x, weight)
        return x


def infer(transposed):
    model = torch.compile(Stack(transposed=transposed), backend="eager")
    with torch.no_grad():
        model(torch.randn(2, 8))
"""


def report_tests(path: Path) -> dict[str, Any]:
    return {t["nodeid"]: t for t in json.loads(path.read_text())["tests"]}


def work_of(test: dict[str, Any], qualname: str) -> dict[str, Any]:
    (fn,) = [f for f in test["functions"] if f["qualname"] == qualname]
    return fn["work"]  # type: ignore[no-any-return]


@needs_region
def test_a_block_reused_is_one_subgraph_and_one_split_breaks_the_rule(
    run: Any, pytester: pytest.Pytester
) -> None:
    result = run(
        STACK
        + dedent("""
        @pytest.mark.max_unique_subgraphs(1, function="Stack.forward")
        def test_reused():
            infer(transposed=False)

        @pytest.mark.max_unique_subgraphs(1)
        def test_split():
            infer(transposed=True)
        """),
        "--recompile-report=r.json",
        "--recompile-report-md=r.md",
        "--junitxml=j.xml",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-recompile: this test compiled 2 distinct nested_compile_region "
            "subgraphs, budget 1 (@max_unique_subgraphs(1)); a repeated block traced more than "
            "once: its calls differ*",
            "    compile work: 1 graph, 8 FX ops (18 nodes, 5 inputs), 0 Inductor kernels, "
            "2 distinct subgraphs called 4 times, 0 restarts",
            "compile work: 2 graphs, 16 FX ops (36 nodes, 10 inputs), 0 Inductor kernels, "
            "2 distinct subgraphs called 8 times, 0 restarts in 2 gated tests (counted, not "
            "timed: docs/compile-work.md)",
        ]
    )
    tests = report_tests(pytester.path / "r.json")
    reused = work_of(tests["test_it.py::test_reused"], "Stack.forward")
    split = work_of(tests["test_it.py::test_split"], "Stack.forward")
    assert (reused["subgraphs"], reused["subgraph_calls"]) == (1, 4)
    assert (split["subgraphs"], split["subgraph_calls"]) == (2, 4)
    assert reused["graphs"] == split["graphs"] == 1
    assert tests["test_it.py::test_split"]["work"]["subgraphs"] == 2
    (compile_,) = split["per_compile"]
    assert (compile_["graph"], compile_["subgraphs"], compile_["reused"]) == (True, 2, False)
    markdown = (pytester.path / "r.md").read_text()
    assert "### Compile work over its rule (counted, not timed)" in markdown
    assert "| `test_it.py::test_split` | `all` | this test compiled 2" in markdown
    properties = {
        (case.get("name"), p.get("name")): p.get("value")
        for case in ET.parse(pytester.path / "j.xml").iter("testcase")
        for p in case.iter("property")
    }
    assert properties[("test_split", "recompile_work")] == (
        "1 graph, 8 FX ops (18 nodes, 5 inputs), 0 Inductor kernels, 2 distinct subgraphs "
        "called 4 times, 0 restarts"
    )


@needs_region
def test_the_baseline_ratchet_catches_a_block_no_longer_reused(
    run: Any, pytester: pytest.Pytester
) -> None:
    test = STACK + "\ndef test_stack():\n    infer(transposed={})\n"
    run(test.format(False), "--recompile-baseline=b.json", "--recompile-baseline-update")
    kept = json.loads((pytester.path / "b.json").read_text())["tests"]["test_it.py::test_stack"]
    assert kept["work"] == {"Stack.forward": {"graphs": 1, "ops": 8, "kernels": 0, "restarts": 0,
                                              "subgraphs": 1}}  # fmt: skip
    result = run(test.format(True), "--recompile-baseline=b.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-recompile: 'Stack.forward' compiled 2 distinct subgraphs (test_it.py:*), "
            "the baseline 1 (baseline, +0%: at most 1); a repeated block traced more than once*"
            "or accept it with --recompile-baseline-update",
        ]
    )
    # The same four calls: only the distinct subgraphs moved (one rule broken, said in the
    # failure and in the summary).
    assert result.stdout.str().count("(baseline, +") == 2


FORWARD = """
weights = [torch.randn(8, 8) for _ in range(5)]


@torch.compile(backend="eager")
def forward(x):
    for w in weights:
        x = torch.relu(x @ w){extra}
    return x


def test_forward():
    forward(torch.randn(2, 8))
"""


def test_a_forward_that_gains_ops_fails_the_ratchet_naming_the_count(
    run: Any, pytester: pytest.Pytester
) -> None:
    run(FORWARD.format(extra=""), "--recompile-baseline=b.json", "--recompile-baseline-update")
    kept = json.loads((pytester.path / "b.json").read_text())["tests"]
    assert kept["test_it.py::test_forward"]["work"]["forward"]["ops"] == 10
    grown = FORWARD.format(extra=".sin()")  # five more ops: 15 against at most 10 (+5%)
    result = run(grown, "--recompile-baseline=b.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-recompile: 'forward' compiled 15 FX ops (test_it.py:*), the baseline 10 "
            "(baseline, +5%: at most 10); the graph grew: *",
            "    compile work: 1 graph, 15 FX ops (*), 0 Inductor kernels, 0 restarts",
        ]
    )
    run(grown, "--recompile-baseline=b.json", "--recompile-work-tolerance=ops=50").assert_outcomes(
        passed=1
    )
    pytester.makeini("[pytest]\nrecompile_work_tolerance = ops=50%\n")
    run(grown, "--recompile-baseline=b.json").assert_outcomes(passed=1)


def test_a_dynamo_restart_appearing_is_named_with_its_reason(
    run: Any, pytester: pytest.Pytester
) -> None:
    source = """
    @torch.compile(backend="eager")
    def f(x):
        y = x.sin()
        {line}
        return y.cos()

    def test_f():
        f(torch.ones(3))
    """
    run(source.format(line="pass"), "--recompile-baseline=b.json", "--recompile-baseline-update")
    result = run(source.format(line='print("step")'), "--recompile-baseline=b.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-recompile: 'f' compiled 2 graphs (test_it.py:*), the baseline 1 "
            "(baseline, +0%: at most 1); a graph break or a recompile adds a graph*",
            "pytest-recompile: 'f' compiled 1 Dynamo restart (test_it.py:*), the baseline 0 "
            "(baseline, +0%: at most 0); Dynamo started the frame over*",
            "    restarted: Failed to trace builtin operator",
        ]
    )


def test_max_graphs_and_max_graph_ops_for_a_function_and_in_total(run: Any) -> None:
    result = run(
        """
        @torch.compile(backend="eager")
        def f(x):
            y = x.sin()
            print("break")
            return y.cos()

        @pytest.mark.max_graphs(1)
        def test_total():
            f(torch.ones(3))

        @pytest.mark.max_graph_ops(1, function="f")
        def test_function():
            f(torch.ones(3))

        @pytest.mark.max_graphs(2, function="g")
        def test_typo():
            f(torch.ones(3))

        @pytest.mark.max_graphs(2)
        @pytest.mark.max_graph_ops(2)
        def test_within():
            f(torch.ones(3))
        """
    )
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_function: 'f' compiled 2 FX ops (test_it.py:*), budget 1 "
            "(@max_graph_ops(1, function='f'))*",
            "*test_total: this test compiled 2 graphs, budget 1 (@max_graphs(1))*",
            "*test_typo: @max_graphs(2, function='g') names no function this test compiled "
            "(compiled: f)*",
        ]
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--recompile-work-tolerance=ops=x"], "*--recompile-work-tolerance: ops='x' is not a "
         "percent; expected a non-negative integer such as ops=5*"),
        (["--recompile-work-tolerance=flops=5"], "*--recompile-work-tolerance: unknown measure "
         "in 'flops=5'; expected MEASURE=PERCENT*one of graphs, ops, kernels, restarts, "
         "subgraphs*"),
        (["-o", "recompile_work_tolerance=ops=-1"], "*ini option recompile_work_tolerance: "
         "ops='-1' is not a percent*"),
    ],
)  # fmt: skip
def test_a_bad_tolerance_is_a_usage_error(run: Any, args: list[str], said: str) -> None:
    result = run("def test_x():\n    pass\n", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])


@pytest.mark.parametrize(
    ("marker", "said"),
    [
        ("max_graphs(-1)", "*@pytest.mark.max_graphs on *: budget must be a non-negative "
         "integer, got -1; accepted form is @pytest.mark.max_graphs(n: int >= 0, *, function: "
         "str | None = None)*"),
        ("max_graph_ops('3')", "*budget must be a non-negative integer, got '3' (str)*"),
        ("max_unique_subgraphs(1, layer='f')", "*unknown keyword 'layer'; accepted form is "
         "@pytest.mark.max_unique_subgraphs(*"),
    ],
)  # fmt: skip
def test_a_bad_work_marker_is_a_collection_error(run: Any, marker: str, said: str) -> None:
    result = run(f"@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([said])


def test_a_count_a_torch_does_not_record_is_absent_never_zero() -> None:
    """A release without a field: the count is None through the sums and the words, a cap
    on it fails saying so, and compare leaves it out (never compared as 0)."""
    from pytest_recompile.reports.compare import FunctionFigures, function_changes

    old = CompileWork(True, 12, 15, 3, ("Failed to trace",), None, 0, 0, None, None)
    work = summed([(old, False), (old, True)])
    assert (work["graphs"], work["ops"], work["kernels"], work["restarts"]) == (2, 24, None, 2)
    assert (work["cache_hits"], work["reused"], work["restart_reasons"]) == (
        None,
        1,
        ["Failed to trace"],
    )
    assert work_text(work, "2.7.1") == (
        "2 graphs, 24 FX ops (30 nodes, 6 inputs), Inductor kernels not recorded by torch "
        "2.7.1, 2 restarts (1 of 2 compiles reused)"
    )
    assert function_changes("f", FunctionFigures(kernels=None), FunctionFigures(kernels=4)) == []
    (grew,) = function_changes("f", FunctionFigures(graph_ops=9), FunctionFigures(graph_ops=21))
    assert (grew.text(), grew.worse) == ("graph ops 9 -> 21 (+12)", True)


def test_the_tolerance_and_what_it_allows() -> None:
    assert parse_tolerance("ops=10, kernels=0%", "here") == {
        "graphs": 0,
        "ops": 10,
        "kernels": 0,
        "restarts": 0,
        "subgraphs": 0,
    }
    assert (allowed(17, 5), allowed(20, 5), allowed(0, 50), allowed(200, 5)) == (17, 21, 0, 210)
    with pytest.raises(BudgetError, match="unknown measure in 'ops'"):
        parse_tolerance("ops", "here")


@pytest.mark.inductor
@needs_region
def test_inductor_kernels_are_counted_and_reuse_generates_fewer(
    run: Any, pytester: pytest.Pytester
) -> None:
    result = run(
        STACK.replace('backend="eager"', 'backend="inductor"')
        + dedent("""
        def test_reused():
            infer(transposed=False)

        def test_split():
            infer(transposed=True)
        """),
        "--recompile-budget=0",
        "--recompile-report=r.json",
    )
    result.assert_outcomes(passed=2)
    tests = report_tests(pytester.path / "r.json")
    reused = work_of(tests["test_it.py::test_reused"], "Stack.forward")["kernels"]
    split = work_of(tests["test_it.py::test_split"], "Stack.forward")["kernels"]
    assert 0 < reused < split, (reused, split)


# A suite whose figures must not move with order, workers or shards: a function two tests
# compile alike (the second reuses the first's compile in one process), a graph break with its
# restart, a recompile, a nested region where this torch has one.
CONFTEST = """
import os


def pytest_collection_modifyitems(items):
    if os.environ.get("REVERSED"):
        items.reverse()
"""
SUITE = """
import pytest
import torch
import torch._dynamo.callback


@torch.compile(backend="eager")
def shared(x):
    return (x.sin() + 1).cos()


@torch.compile(backend="eager")
def broken(x):
    y = x.sin()
    print("break")
    return y.cos() * 2


@torch.compile(backend="eager")
def sized(x):
    return x.relu().sum()


def test_shared_first():
    shared(torch.ones(3))


def test_shared_second():
    shared(torch.ones(3))


def test_broken():
    broken(torch.ones(3))


def test_sized():
    sized(torch.ones(3))
    sized(torch.ones(5))


if hasattr(torch.compiler, "nested_compile_region"):

    @torch.compiler.nested_compile_region
    def block(x, w):
        return torch.relu(x @ w) + x

    @torch.compile(backend="eager")
    def stack(x, ws):
        for w in ws:
            x = block(x, w)
        return x

    def test_stack():
        with torch.no_grad():
            stack(torch.randn(2, 4), [torch.randn(4, 4) for _ in range(3)])
"""


def figures(path: Path) -> dict[str, Any]:
    """Each test's work and its functions', less what says how the run got there (reuse,
    compile ids, how warm the caches were: ``without_timings``) rather than what was
    compiled."""
    return {
        t["nodeid"]: without_timings(
            {"work": t["work"], **{f["qualname"]: f["work"] for f in t["functions"]}}
        )
        for t in json.loads(path.read_text())["tests"]
    }


@pytest.mark.xdist
@pytest.mark.subprocess
def test_the_figures_are_the_same_across_reruns_orders_workers_and_shards(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pytest_split")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    gate = ("--recompile-budget=1", "--recompile-mode=report-only", "-p", "no:randomly")

    def once(name: str, *args: str) -> dict[str, Any]:
        result = pytester.runpytest_subprocess(
            *inner_args(*gate, f"--recompile-report={name}.json", *args)
        )
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        return figures(pytester.path / f"{name}.json")

    runs = [once(f"run{i}") for i in range(3)]
    monkeypatch.setenv("REVERSED", "1")
    runs.append(once("reversed"))
    monkeypatch.delenv("REVERSED")
    runs.append(once("workers", "-p", "xdist", "-n", "2"))
    shards = []
    for index in range(3):
        once(f"shard{index}", "-p", "pytest_split.plugin", "--splitting-algorithm",
             "least_duration", "--splits", "3", "--group",
             str(index + 1))  # fmt: skip
        shards.append(f"shard{index}.json")
    assert main(["combine", "-o", "shards.json", *shards]) == 0
    runs.append(figures(pytester.path / "shards.json"))
    first = runs[0]
    assert first["test_suite.py::test_shared_second"] == first["test_suite.py::test_shared_first"]
    assert first["test_suite.py::test_broken"]["work"]["graphs"] == 2
    assert first["test_suite.py::test_broken"]["work"]["restarts"] == 1
    assert first["test_suite.py::test_sized"]["work"]["graphs"] == 2  # a recompile's graph
    for other in runs[1:]:
        assert other == first


UPGRADE = Path(__file__).parent / "data" / "upgrade"


def test_a_torch_upgrade_compared_counts_the_work_and_leaves_seconds_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tests/data/upgrade: suite.py run with Inductor on 2.13 and on 2.15 (the same work: an
    upgrade that traces alike), and on 2.15 with every other layer's weight transposed (the
    block split in two). The seconds differ by 9 s; only the counts decide."""
    assert (
        main(["compare", str(UPGRADE / "torch-2.13.json"), str(UPGRADE / "torch-2.15.json")]) == 0
    )
    said = capsys.readouterr().out.splitlines()
    assert "environment: torch 2.13.0+cpu -> 2.15.0" in said
    assert not any("subgraph" in line or "kernels" in line for line in said), said
    split = str(UPGRADE / "torch-2.15-split.json")
    assert main(["compare", str(UPGRADE / "torch-2.13.json"), split]) == 1
    said = capsys.readouterr().out.splitlines()
    assert said[-3:] == [
        "  compile seconds 11.14 s -> 1.72 s (within noise: each compile is timed once: the "
        "counted work decides)",
        "  Stack.forward: guards 61 -> 62 (+1; new guard kinds: OBJECT_ALIASING), kernels 13 "
        "-> 14 (+1), unique subgraphs 1 -> 2 (+1)",
        "verdict: HEAD is worse: 1 more guard (1 test), 1 more Inductor kernel (1 test), 1 more "
        "distinct subgraph (1 test)",
    ]
    assert main(["compare", str(UPGRADE / "torch-2.13.json"), split, "--fail-on", "graphs"]) == 0
    capsys.readouterr()


@needs_region
def test_a_recompile_calling_the_same_block_is_not_a_second_subgraph(run: Any) -> None:
    """Distinct subgraphs are those of the one graph that calls the most: a recompile (a new
    batch size) traces the block again in its own graph, still one block."""
    result = run(
        STACK
        + dedent("""
        @pytest.mark.max_unique_subgraphs(1)
        def test_two_sizes():
            model = torch.compile(Stack(), backend="eager", dynamic=False)
            with torch.no_grad():
                model(torch.randn(2, 8))
                model(torch.randn(3, 8))
        """),
        "-v",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["compile work: 2 graphs, *1 distinct subgraph called 8 times*"])


def test_a_child_process_is_held_to_the_markers_not_to_the_parents_baseline() -> None:
    """The baseline records the test's own process's work: what crosses to a child (the
    budget's JSON) keeps the markers' caps and leaves the baseline's figures out."""
    from pytest_recompile.model.budget import Budget, WorkCap

    budget = Budget(
        work_caps=(WorkCap("graphs", 1, None, "@max_graphs(1)"),),
        baseline_work={"f": {"ops": 3}},
        work_tolerance={"ops": 5},
    )
    crossed = Budget.from_json(json.loads(budget.json_text))
    assert crossed.work_caps == budget.work_caps
    assert (crossed.baseline_work, crossed.work_tolerance) == ({}, None)


TRAIN = """
import torch
import torch._dynamo.callback


def test_train():
    torch.manual_seed(0)
    model = torch.compile(
        torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    )
    model(torch.randn(4, 8)).sum().backward()
"""


@pytest.mark.inductor
@pytest.mark.subprocess
@pytest.mark.skipif(
    not hasattr(torch._dynamo.callback, "CallbackArgs"),
    reason="torch announces a lazy backward to compile callbacks from 2.8",
)
def test_kernels_of_a_training_graph_are_the_same_cold_and_warm(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cold, Inductor compiles the backward at the first backward call; warm, AOTAutograd's
    cache brings both at the compile: the kernel count is the same (the backward's counted
    with its compile), as the FX cache figures show the second run warm."""
    import torch._dynamo.callback  # noqa: F401

    pytester.makepyfile(test_train=TRAIN)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "cache"))
    found = []
    for name in ("cold", "warm"):
        result = pytester.runpytest_subprocess(
            *inner_args("--recompile-budget=0", f"--recompile-report={name}.json")
        )
        result.assert_outcomes(passed=1)
        (test,) = json.loads((pytester.path / f"{name}.json").read_text())["tests"]
        found.append(test["work"])
    cold, warm = found
    assert (cold["cache_hits"], warm["cache_misses"]) == (0, 0), found  # cold, then warm
    assert cold["kernels"] == warm["kernels"] > 0, found
