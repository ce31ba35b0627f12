"""A test's count in a full run is the count it gets alone: the structures where that broke
(objects that die, torch's automatic-dynamic memory, resets, backends, fixtures' set-ups),
and faults of the plugin itself, which must stay the plugin's. Real torch.compile, real
pytest; each case runs the whole module and the test alone, in the same way."""

from __future__ import annotations

from typing import Any

import pytest
from snippets import REVERSE_CONFTEST, keeps_entries, outcomes, read_json

from pytest_recompile._torch import versions
from pytest_recompile.reports.terminal import FAULT

REPORT_ONLY = ("--recompile-budget", "--recompile-mode=report-only", "--recompile-report=r.json")


def counts(run: Any, source: str, *args: str) -> dict[str, int]:
    """Each gated test's recompiles in a report-only run of the module."""
    result = run(source, *REPORT_ONLY, *args)
    assert result.ret in (0, 1), result.stdout.str()
    return {t["nodeid"].split("::", 1)[1]: t["recompiles"] for t in read_json("r.json")["tests"]}


def alone(run: Any, source: str, test: str) -> int:
    return counts(run, source, f"test_it.py::{test}")[test]


def assert_as_alone(run: Any, pytester: pytest.Pytester, source: str, *tests: str) -> None:
    """Forward and reversed, each of ``tests`` counts what it counts alone."""
    pytester.makeconftest(REVERSE_CONFTEST)
    forward = counts(run, source)
    reverse = counts(run, source, "--reverse-order")
    by_itself = {test: alone(run, source, test) for test in tests}
    assert {t: forward[t] for t in tests} == by_itself
    assert {t: reverse[t] for t in tests} == by_itself


DYING_OPTIMIZER = """
@pytest.mark.max_recompiles(1)
def test_compiled_optimizer_lr_schedule():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(opt.step, backend="eager")
    for lr in (0.1, 0.05):
        opt.param_groups[0]["lr"] = lr
        model(torch.randn(3, 4)).sum().backward()
        step()

def test_next():
    assert True

def test_after_that():
    assert True
"""


@keeps_entries
def test_an_entry_whose_object_died_is_dropped_not_put_back(run) -> None:
    result = run(DYING_OPTIMIZER, "--recompile-budget", "--recompile-report=r.json", "-v")
    result.assert_outcomes(passed=3)
    report = read_json("r.json")
    assert report["complete"] is True
    assert len(report["tests"]) == 3
    assert report["faults"] == []
    assert "PrecompileEntry" not in result.stdout.str()


AUTO_DYNAMIC_CLASS = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

@pytest.fixture(scope="module")
def quiet():
    return "compiles nothing"

class TestWarmed:
    @pytest.fixture(scope="class")
    def varied(self):
        f(torch.randn(4))
        f(torch.randn(8))  # dim 0 becomes dynamic while the class lives

    def test_warms(self, varied):
        pass

    def test_in_class(self, varied, quiet):  # quiet is first set up while varied lives
        f(torch.randn(16))

def test_after_class(quiet):
    f(torch.randn(4))
    f(torch.randn(8))
"""

AUTO_DYNAMIC_GETFIXTUREVALUE = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

@pytest.fixture(scope="module")
def shared():
    return "compiles nothing"

def test_first(request):
    f(torch.randn(4))
    f(torch.randn(8))
    request.getfixturevalue("shared")

def test_second(shared):
    f(torch.randn(4))
    f(torch.randn(8))
"""

AUTO_DYNAMIC_UNGATED = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

@pytest.mark.allow_recompiles
def test_a_ungated():
    f(torch.randn(4))
    f(torch.randn(8))

def test_b_gated():
    f(torch.randn(4))
    f(torch.randn(8))
"""


@keeps_entries
@pytest.mark.parametrize(
    ("source", "test"),
    [
        (AUTO_DYNAMIC_CLASS, "test_after_class"),
        (AUTO_DYNAMIC_GETFIXTUREVALUE, "test_second"),
        (AUTO_DYNAMIC_UNGATED, "test_b_gated"),
    ],
    ids=["dead-class-fixture", "getfixturevalue", "ungated-test-first"],
)
def test_automatic_dynamic_memory_is_what_the_test_starts_from(run, pytester, source, test):
    assert alone(run, source, test) == 1  # shape 8 after 4: one recompile, alone
    assert_as_alone(run, pytester, source, test)


@keeps_entries
def test_forbid_guards_sees_only_the_tests_own_entries(run) -> None:
    source = """
@torch.compile(backend="eager")
def scale(x, n):
    return x * n

@pytest.fixture(scope="module")
def warmed():
    scale(torch.randn(4), 3)  # installs L['n'] == 3: the fixture's, not a test's

def test_sets_it_up(warmed):
    pass

@pytest.mark.forbid_guards("EQUALS_MATCH")
def test_tensor_scale(warmed):
    scale(torch.randn(4), torch.tensor(3.0))
"""
    result = run(source, "--recompile-budget=1", "-v", "-p", "no:randomly")
    assert outcomes(result) == {"test_sets_it_up": "passed", "test_tensor_scale": "passed"}
    assert "forbidden guard" not in result.stdout.str()


@keeps_entries
def test_recompiles_fixture_is_never_charged_a_wider_fixtures_set_up(run) -> None:
    source = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

@pytest.fixture(scope="module")
def warmed():
    f(torch.randn(4))
    f(torch.randn(4, 4))  # recompiles while the fixture is set up

@pytest.mark.allow_recompiles
def test_ungated(request, recompiles):
    request.getfixturevalue("warmed")
    assert recompiles.count() == 0
    f(torch.randn(2, 2, 2))
    assert recompiles.count() == 1

@pytest.mark.max_recompiles(1)
def test_gated(request, recompiles):
    request.getfixturevalue("warmed")
    assert recompiles.count() == 0
"""
    result = run(source, "-v")
    assert outcomes(result) == {"test_ungated": "passed", "test_gated": "passed"}


@keeps_entries
@pytest.mark.skipif(not versions.can_error_on_graph_break(), reason="fullgraph blocks need 2.9+")
def test_fullgraph_stays_out_of_a_wider_fixtures_set_up(run) -> None:
    source = """
@torch.compile(backend="eager")
def noisy(x):
    print("warming")  # a graph break
    return x * 2

@pytest.fixture(scope="module")
def warmed():
    noisy(torch.randn(4))

@pytest.mark.fullgraph
def test_fullgraph_first(warmed):
    pass

def test_plain(warmed):
    noisy(torch.randn(4))

@torch.compile(backend="eager")
def own_break(x):
    print("its own")
    return x + 1

@pytest.mark.fullgraph
def test_fullgraph_breaks(warmed):
    own_break(torch.randn(5))
"""
    result = run(source, "--recompile-budget=1", "-v", "--recompile-report=r.json")
    assert outcomes(result) == {
        "test_fullgraph_first": "passed",
        "test_plain": "passed",
        "test_fullgraph_breaks": "failed",  # its own break, under its own fullgraph
    }
    (fixture,) = read_json("r.json")["fixtures"]  # its break, under its own name
    assert fixture["name"] == "warmed"
    assert [b["function"] for b in fixture["graph_breaks"]] == ["noisy"]


BACKENDS = """
def f(x):
    return x * 2

eager_f = torch.compile(f, backend="eager")

@pytest.fixture(scope="module")
def warmed():
    eager_f(torch.randn(4))

def test_1_compiles_it(warmed):
    eager_f(torch.randn(4, 4))

def test_2_aot_eager(warmed):
    torch.compile(f, backend="aot_eager")(torch.randn(4))

def test_3_dynamic(warmed):
    torch.compile(f, backend="eager", dynamic=True)(torch.randn(4))

def test_4_same_backend(warmed):
    torch.compile(f, backend="eager")(torch.randn(4))
"""


@keeps_entries
def test_a_kept_entry_answers_only_its_own_backend(run, pytester) -> None:
    tests = ("test_2_aot_eager", "test_3_dynamic", "test_4_same_backend")
    assert [alone(run, BACKENDS, t) for t in tests] == [1, 1, 0]
    assert_as_alone(run, pytester, BACKENDS, *tests)
    result = run(BACKENDS, "--recompile-budget", "-v", "-p", "no:randomly")
    assert outcomes(result)["test_2_aot_eager"] == "failed"
    result.stdout.fnmatch_lines(["*BACKEND_MATCH*"])


RESET = """
import torch._dynamo
from pytest_recompile import RecompileTracker

@torch.compile(backend="eager")
def g(x):
    return x + 1

g(torch.randn(4))  # compiled at import: every test starts with this entry

@pytest.mark.allow_recompiles
def test_1_resets():
    RESET_CALL

@pytest.mark.allow_recompiles
def test_2_compiles_g_elsewhere():
    g(torch.randn(2, 2))

def test_3_other_shape():
    g(torch.randn(8))

def test_4_import_shape():
    g(torch.randn(4))
"""


@keeps_entries
@pytest.mark.parametrize(
    "reset",
    [
        "torch._dynamo.reset()",
        "torch.compiler.reset()",
        "RecompileTracker(reset=True).start().stop()",
    ],
)
def test_after_a_reset_tests_start_from_import_time_entries_again(run, pytester, reset) -> None:
    source = RESET.replace("RESET_CALL", reset)
    assert alone(run, source, "test_3_other_shape") == 1
    assert alone(run, source, "test_4_import_shape") == 0
    assert_as_alone(run, pytester, source, "test_3_other_shape", "test_4_import_shape")


EDGE = """
@torch.compile(backend="eager")
def f(x):
    return x * 2

@pytest.fixture(scope="module")
def warm_a():
    f(torch.randn(4, 4))

@pytest.fixture(scope="module")
def warm_b():
    f(torch.randn(6, 2))  # against warm_a's entry, when it is live: dynamic

def test_1_uses_a(warm_a):
    pass

def test_2_asks_for_a(request, warm_b):
    request.getfixturevalue("warm_a")
    f(torch.randn(3, 3, 3))

def test_3_uses_b(warm_b):  # last: reported after the module's fixtures are torn down
    f(torch.randn(9, 2))
"""


@keeps_entries
def test_a_live_fixture_the_test_does_not_use_is_invisible(run) -> None:
    """The old order edge: warm_a is live when warm_b is set up and when test_3 runs, but
    neither uses it, so neither sees its entry; each counts what it counts alone."""
    result = run(EDGE, *REPORT_ONLY, "-v", "-p", "no:randomly")
    tests = {t["nodeid"].split("::")[1]: t for t in read_json("r.json")["tests"]}
    assert alone(run, EDGE, "test_3_uses_b") == 1  # warm_b alone compiled f(6x2) statically
    assert tests["test_3_uses_b"]["recompiles"] == 1
    assert alone(run, EDGE, "test_2_asks_for_a") == tests["test_2_asks_for_a"]["recompiles"]
    recompiles = [r for t in tests.values() for f in t["functions"] for r in f["recompiles"]]
    assert recompiles
    assert "order:" not in result.stdout.str()


def test_records_are_keyed_by_code_and_compile_id() -> None:
    """torch restarts compile ids after a reset: two functions compiled as 0/0 in one block
    each keep their own compile seconds."""
    import torch

    from pytest_recompile import RecompileTracker

    def first(x: Any) -> Any:
        return x + 1

    def second(x: Any) -> Any:
        return x - 1

    with RecompileTracker(mode="report-only") as tracker:
        torch.compile(first, backend="eager")(torch.ones(3))
        torch._dynamo.reset()
        torch.compile(second, backend="eager")(torch.ones(3))
    one, two = tracker.record("first"), tracker.record("second")
    assert one.compile_seconds > 0
    assert two.compile_seconds > 0
    assert one.compile_seconds + two.compile_seconds < 60


FAULTY_CONFTEST = """
import pytest
from pytest_recompile._torch import entries
from pytest_recompile.recording.verdict import TestVerdict

real_keep_only, real_freeze = entries.keep_only, TestVerdict.freeze
running = [""]

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item):
    running[0] = item.name

def broken_keep_only(code, keep):
    if code.co_name == "victim":
        raise RuntimeError("injected keep_only fault")
    return real_keep_only(code, keep)

def broken_freeze(self):
    if running[0] == "test_5_no_figures":
        raise RuntimeError("injected freeze fault")
    return real_freeze(self)

def pytest_configure(config):
    entries.keep_only, TestVerdict.freeze = broken_keep_only, broken_freeze

def pytest_unconfigure(config):
    entries.keep_only, TestVerdict.freeze = real_keep_only, real_freeze
"""

FAULTY = """
@torch.compile(backend="eager")
def victim(x):
    return x * 2

@pytest.fixture(scope="module")
def warmed():
    victim(torch.randn(4))

def test_1(warmed):
    victim(torch.randn(4, 4))

def test_2(warmed):
    victim(torch.randn(4))

def test_3():
    victim(torch.randn(2, 2, 2))

def test_4():
    pass

def test_5_no_figures():
    pass
"""


@keeps_entries
def test_a_fault_in_keeping_entries_is_contained_and_named_once(run, pytester) -> None:
    pytester.makeconftest(FAULTY_CONFTEST)
    result = run(
        FAULTY, "--recompile-budget=1", "--recompile-report=r.json", "-v", "-p", "no:randomly"
    )
    names = ("test_1", "test_2", "test_3", "test_4", "test_5_no_figures")
    assert outcomes(result) == dict.fromkeys(names, "passed")
    report = read_json("r.json")
    assert len(report["tests"]) == 4
    # A gated test ran and has no figures: the report must not pass for complete.
    assert report["complete"] is False
    assert (
        report["incomplete"] == "1 gated test ran without figures (test_it.py::test_5_no_figures)"
    )
    keep, results = report["faults"]  # each once, though later tests found the code dirty
    assert keep.startswith("test_it.py::test_2: keeping the cache entries of victim")
    assert "injected keep_only fault" in keep
    assert results.startswith("test_it.py::test_5_no_figures: internal error in broken_freeze")
    result.stdout.fnmatch_lines([f"{FAULT}: test_it.py::test_2: keeping the cache entries*"])


def test_code_objects_are_keyed_by_identity_not_equality() -> None:
    """A module imported again has new code objects equal to the old ones: the isolation
    ledger must never take one's cache entries for the other's."""
    from pytest_recompile.model.identity import IdentityMap, IdentitySet

    source = "def f(x):\n    return x + 1\n"
    first = compile(source, "same.py", "exec").co_consts[0]
    second = compile(source, "same.py", "exec").co_consts[0]
    assert first == second
    assert first is not second
    kept: IdentityMap[Any, str] = IdentityMap()
    kept[first] = "first's entries"
    assert second not in kept
    kept[second] = "second's entries"
    assert (kept[first], kept[second], len(kept)) == ("first's entries", "second's entries", 2)
    dirty: IdentitySet[Any] = IdentitySet()
    dirty.add(first)
    assert first in dirty
    assert second not in dirty
    del first
    import gc

    gc.collect()
    assert list(kept.values()) == ["second's entries"]
    assert len(dirty) == 0
