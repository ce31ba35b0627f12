"""The certificate through the gate: a gated test whose domain has uncovered points fails,
in every output (terminal, JSON report and schema, JUnit, Markdown, annotations, compare), from
the structures real suites use (a module fixture that warms the model, a class, parametrize,
unittest); an ungated test only gets the result to assert on."""

from __future__ import annotations

import json
from glob import escape as esc

from pytest_recompile.model.names import PREFIX

SERVING = """
class Server(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.net(x).softmax(-1)


@pytest.fixture(scope="module")
def warmed():
    model = torch.compile(Server(), backend="eager")
    for batch in (8, 16, 32):
        model(torch.randn(batch, 16))
    return model


def test_batches(warmed, recompiles):
    recompiles.covers(warmed, (torch.randn(8, 16),), {"x": {0: range(1, 65)}})


class TestServing:
    def test_marked_unbacked(self, recompiles):
        model = torch.compile(Server(), backend="eager")
        x = torch.randn(8, 16)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        model(x)
        result = recompiles.covers(model, (x,), {"x": {0: range(1, 65)}})
        assert result.covered


@pytest.mark.parametrize("batch", [1, 8])
def test_param(warmed, recompiles, batch):
    recompiles.covers(warmed, (torch.randn(8, 16),), {"x": {0: [batch]}})
"""


def test_an_uncovered_point_fails_a_gated_test_in_every_output(run, pytester, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = run(
        SERVING,
        "--recompile-budget=0",
        "--recompile-report=r.json",
        "--junitxml=j.xml",
        "--recompile-github=on",
    )
    result.assert_outcomes(passed=2, failed=2)
    message = (
        "'Server.forward' would compile again on 1 uncovered of 64 points of its domain "
        "(x.size(0) in 1..64): x.size(0) in {1} [SHAPE_ENV(0/1 specialization): "
        "2 <= x.size()[0] [entry 0/1]; fix: sizes 0 and 1 are specialized: "
        "torch._dynamo.decorators.mark_unbacked(tensor, dim) before the first call keeps one "
        "graph for every size] (covers() at test_it.py:23)"
    )
    result.stdout.fnmatch_lines([esc(f"{PREFIX} {message}")])
    result.stdout.fnmatch_lines(["*test_it.py::test_param?1?: 'Server.forward' would compile*"])
    report = json.loads((pytester.path / "r.json").read_text())
    (test,) = [t for t in report["tests"] if t["nodeid"].endswith("test_batches")]
    (violation,) = test["violations"]
    assert violation["kind"] == "uncovered"
    assert violation["function"] == "Server.forward"
    certificate = violation["certificate"]
    assert (certificate["points"], certificate["uncovered"], certificate["undecided"]) == (64, 1, 0)
    assert [g["where"] for g in certificate["groups"]] == ["x.size(0) in {1}"]
    assert "mark_unbacked" in certificate["groups"][0]["fix"]
    assert "uncovered" in (pytester.path / "summary.md").read_text()
    assert (
        '<property name="recompile_uncovered" value="1 of 64 points (Server.forward)"'
        in (pytester.path / "j.xml").read_text()
    )
    result.stdout.fnmatch_lines(
        ["::error file=test_it.py,line=10,title=*test_batches%3A 'Server.forward' would*"]
    )


def test_the_report_with_a_certificate_fits_the_schema(run, pytester) -> None:
    from pytest_recompile.reports.schema import misfit

    run(SERVING, "--recompile-budget=0", "--recompile-report=r.json")
    report = json.loads((pytester.path / "r.json").read_text())
    assert misfit(report) is None
    (broke, *_) = [t for t in report["tests"] if t["violations"]]
    broke["violations"][0]["certificate"]["groups"] = [{"where": 1}]
    assert misfit(report) is not None


def test_compare_counts_uncovered_points(run, pytester) -> None:
    from pytest_recompile.cli import main

    run(SERVING.replace("(8, 16, 32)", "(8, 16, 32, 1)"), "--recompile-budget=0",
        "--recompile-report=base.json", "--recompile-mode=report-only")  # fmt: skip
    run(SERVING, "--recompile-budget=0", "--recompile-report=head.json")
    code = main(["compare", str(pytester.path / "base.json"), str(pytester.path / "head.json")])
    assert code == 1


def test_an_ungated_test_gets_the_result_to_assert_on(run) -> None:
    result = run(
        """
def test_ungated(recompiles):
    f = torch.compile(lambda x: x * 2, backend="eager")
    f(torch.randn(8, 3))
    f(torch.randn(9, 3))
    result = recompiles.covers(f, (torch.randn(8, 3),), {"x": {0: range(1, 9)}})
    assert result.uncovered == [{"x": {0: 1}}]
"""
    )
    result.assert_outcomes(passed=1)


def test_a_unittest_case_certifies_too(run) -> None:
    result = run(
        """
import unittest
from pytest_recompile import RecompileTracker

class T(unittest.TestCase):
    def test_it(self):
        f = torch.compile(lambda x: x * 2, backend="eager")
        with RecompileTracker(mode="report-only") as tracker:
            f(torch.randn(8, 3))
            f(torch.randn(9, 3))
            result = tracker.covers(f, (torch.randn(8, 3),), {"x": {0: [1, 2, 3]}})
        self.assertEqual(result.uncovered, [{"x": {0: 1}}])
"""
    )
    result.assert_outcomes(passed=1)


def test_a_bad_domain_is_the_tests_error_with_what_is_accepted(run) -> None:
    result = run(
        """
def test_bad(recompiles):
    f = torch.compile(lambda x: x * 2, backend="eager")
    f(torch.randn(8, 3))
    recompiles.covers(f, (torch.randn(8, 3),), {"y": {0: [1]}})
""",
        "--recompile-budget=0",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*DomainError: covers(): the domain names 'y'*(its parameters: x)"]
    )


MEASURED = """
step = 0

@torch.compile(backend="eager")
def f(x):
    return x * 2

@torch.compile(backend="eager")
def g(x):
    return x + step

class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 3

@pytest.mark.max_guards(1)
def test_measured():
    global step
    f(torch.randn(8, 3))
    g(torch.randn(8, 3))
    step = 1  # g's entry no longer accepts the call that made it
    model = torch.compile(Scale(), backend="eager")
    model(torch.randn(8, 3))
    ref = weakref.ref(model)
    del model  # freed before the test ends: no figure is worth keeping it
    gc.collect()
    assert ref() is None
"""


def _measured(pytester) -> dict[str, list[float | None]]:
    report = json.loads((pytester.path / "r.json").read_text())
    return {
        fn["qualname"]: [e["guard_check_us"] for e in fn["entries"]]
        for fn in report["tests"][0]["functions"]
    }


def test_each_entry_s_guard_check_is_measured_on_its_own_call(run, pytester) -> None:
    """The median check of each entry's guards on the call that compiled it, timed when torch
    built them (the call's objects alive then, kept by nothing after), in the JSON report and
    the entry's line: a global it guards that changes later does not take the figure away, and
    a model the test frees before its end is freed and still measured."""
    result = run("import gc, weakref\n" + MEASURED, "--recompile-report=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["    guards [[]0/0] * guards *; measured * us per check"])
    measured = _measured(pytester)
    for name in ("f", "g", "Scale.forward"):
        (check,) = measured[name]
        assert 0 < check < 1000, name


def test_without_torch_s_hook_a_figure_gives_way(run, pytester, monkeypatch) -> None:
    """A torch that calls no hook when it builds guards: each entry is timed when it is read
    (the next compile, the phase's end) on stand-ins of its call, held weakly; an entry that no
    longer accepts its call, or whose call's objects were freed, has no figure, and the objects
    are freed all the same."""
    from pytest_recompile._torch import versions

    monkeypatch.setattr(versions, "has_guards_built_hook", lambda: False)
    result = run("import gc, weakref\n" + MEASURED, "--recompile-report=r.json")
    result.assert_outcomes(failed=1)
    measured = _measured(pytester)
    (f_check,) = measured["f"]
    assert 0 < f_check < 1000
    assert measured["g"] == [None]
    assert measured["Scale.forward"] == [None]


DECLARED = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

def test_declared():
    x = torch.randn(8, 3)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
    f(x)

def test_declared_from_one():
    @torch.compile(backend="eager")
    def g(x):
        return x - 1
    x = torch.randn(8, 3)
    torch._dynamo.mark_dynamic(x, 0, min=1, max=64)  # a batch of one is meant to be served
    g(x)
"""


def test_a_domain_declared_to_torch_is_certified_with_no_new_code(run) -> None:
    """mark_dynamic(x, 0, min=2, max=64) declares 2..64, which the entry keeps: it passes;
    min=1 declares a batch of one too, which torch specializes away without a word (its entry
    guards 2 <= size): that test fails, naming the declaration."""
    result = run(DECLARED, "--recompile-budget=0")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"{PREFIX} 'test_declared_from_one.<locals>.g' would compile again on "
            "1 uncovered of 64 points of its domain (x.size(0) in 1..64): x.size(0) in {1} "
            "[[]SHAPE_ENV(0/1 specialization): 2 <= x.size()[[]0] <= 64 *] "
            "(declared by mark_dynamic(x, 0, min=1, max=64))"
        ]
    )
    off = run(DECLARED, "--recompile-budget=0", "--recompile-certify-marks=off")
    off.assert_outcomes(passed=2)
