"""Nothing of the user's is kept alive by the gate: a gated test that frees its model, its
closure, a tensor argument, a parameter or an optimizer's state sees it freed after ``del`` and
``gc.collect()``, exactly as with the plugin off, in every mode, with ``covers()`` called, with a
``mark_dynamic(min=, max=)`` declaration, in a module fixture and under ``-n 2``. The first class
is the project's own version of torch's ``*_module_free`` tests (test/dynamo/test_misc.py),
in torch's Dynamo ``TestCase``, which resets in setUp and tearDown."""

from __future__ import annotations

import pytest
from snippets import HEADER, inner_args

FREED = """
import gc
import weakref

from torch._dynamo.test_case import TestCase


def freed_after(build, watch):
    '''Build a model and its inputs, watch one of its parts, compile the model and call it
    once in a frame of its own: whether the part is gone once that frame returned.'''
    gone = []

    def run():
        model, args = build()
        weakref.finalize(watch(model), gone.append, True)
        torch.compile(model, backend="eager")(*args)

    run()
    gc.collect()
    return bool(gone)


class Block(torch.nn.Module):
    def __init__(self, fc=None):
        super().__init__()
        self.fc = fc if fc is not None else torch.nn.Linear(10, 10)

    def forward(self, x):
        return self.fc(x)


class Scaled(torch.nn.Module):
    def __init__(self, param):
        super().__init__()
        self.param = param

    def forward(self, x):
        return self.param * x[0]


def sequential():
    return torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.ReLU())


class TestModuleFree(TestCase):
    def test_custom_module_free(self):
        self.assertTrue(freed_after(lambda: (Block(), (torch.randn(10, 10),)), lambda m: m.fc))

    def test_sequential_module_free(self):
        self.assertTrue(freed_after(lambda: (sequential(), (torch.randn(10, 10),)), lambda m: m[0]))

    def test_linear_module_free(self):
        build = lambda: (torch.nn.Linear(10, 10), (torch.randn(10, 10),))
        self.assertTrue(freed_after(build, lambda m: m))

    def test_outside_linear_module_free(self):
        build = lambda: (Block(torch.nn.Linear(10, 10)), (torch.randn(10, 10),))
        self.assertTrue(freed_after(build, lambda m: m.fc))

    def test_parameter_free(self):
        def build():
            param = torch.nn.Parameter(torch.randn(10, 10))
            return Scaled(param), ((torch.randn(10, 10), param),)

        self.assertTrue(freed_after(build, lambda m: m.param))

    def test_release_module_memory(self):
        mod = torch.nn.Linear(10, 10)
        compiled = torch.compile(mod, backend="eager")
        compiled(torch.randn(10, 10))
        ref = weakref.ref(mod)
        del mod, compiled
        gc.collect()
        self.assertIsNone(ref())


def test_compiled_module():
    model = torch.nn.Linear(10, 10)
    compiled = torch.compile(model, backend="eager")
    compiled(torch.randn(4, 10))
    ref = weakref.ref(model)
    del model, compiled
    gc.collect()
    assert ref() is None


def test_closure():
    weight = torch.randn(10)

    def scale(x):
        return x * weight

    compiled = torch.compile(scale, backend="eager")
    compiled(torch.randn(4, 10))
    ref = weakref.ref(weight)
    del weight, scale, compiled
    gc.collect()
    assert ref() is None


@torch.compile(backend="eager")
def double(x):
    return x * 2


def test_tensor_argument():
    x = torch.randn(4, 10)
    double(x)
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is None


def test_module_argument():  # an object argument, held weakly where the plugin notes it
    def apply(layer, x):
        return layer(x)

    layer = torch.nn.Linear(10, 10)
    torch.compile(apply, backend="eager")(layer, torch.randn(4, 10))
    ref = weakref.ref(layer)
    del layer
    gc.collect()
    assert ref() is None


def test_parameter():
    model = torch.nn.Linear(10, 10)
    compiled = torch.compile(model, backend="eager")
    compiled(torch.randn(4, 10))
    ref = weakref.ref(model.weight)
    del model, compiled
    gc.collect()
    assert ref() is None


def test_optimizer_state():
    model = torch.nn.Linear(10, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 10)).sum().backward()
    step = torch.compile(opt.step, backend="eager")
    step()
    buf = opt.state[model.weight]["momentum_buffer"]
    ref = weakref.ref(buf)
    del buf, step, opt, model
    gc.collect()
    assert ref() is None


def test_covers(recompiles):
    model = torch.nn.Linear(10, 10)
    compiled = torch.compile(model, backend="eager")
    x = torch.randn(4, 10)
    compiled(x)
    assert recompiles.covers(compiled, (x,), {"input": {0: [4]}}).covered
    ref = weakref.ref(model)
    del model, compiled, x
    gc.collect()
    assert ref() is None


def test_declared():
    def apply(layer, x):
        return layer(x)

    layer = torch.nn.Linear(10, 10)
    x = torch.randn(4, 10)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
    torch.compile(apply, backend="eager")(layer, x)
    ref, x_ref = weakref.ref(layer), weakref.ref(x)
    del layer, x
    gc.collect()
    assert ref() is None
    assert x_ref() is None


def test_recompiled():
    model = torch.nn.Linear(10, 10)
    compiled = torch.compile(model, backend="eager", dynamic=False)
    compiled(torch.randn(4, 10))
    compiled(torch.randn(8, 10))
    ref = weakref.ref(model)
    del model, compiled
    gc.collect()
    assert ref() is None
"""

TESTS = 15

# A module fixture builds and warms a compiled model; once its module is done and the fixture
# torn down, the model is gone (the next module's test looks).
FIXTURE = {
    "test_a_warmed": """
import weakref

WATCHED = []


@pytest.fixture(scope="module")
def warmed():
    model = torch.nn.Linear(10, 10)
    compiled = torch.compile(model, backend="eager")
    compiled(torch.randn(4, 10))
    WATCHED.append(weakref.ref(model))
    yield compiled


def test_uses(warmed):
    warmed(torch.randn(4, 10))


def test_uses_again(warmed):
    warmed(torch.randn(4, 10))
""",
    "test_b_after": """
import gc

from test_a_warmed import WATCHED


def test_the_fixture_s_model_is_gone():
    gc.collect()
    assert WATCHED and WATCHED[0]() is None
""",
}

# A module fixture's warm-up is kept for its tests; a test's call with a backend object of its
# own passes the kept entry's other guards, and the entry asks whose backend the call is for:
# it does not keep that object alive.
BACKEND = """
import gc
import weakref

from torch._dynamo.testing import EagerAndRecordGraphs


def scale(x):
    return x * 3


@pytest.fixture(scope="module")
def warmed():
    compiled = torch.compile(scale, backend="eager")
    compiled(torch.randn(4, 10))
    return compiled


def test_first(warmed):  # compiles scale itself: isolation re-installs the warm-up's entry
    warmed(torch.randn(6, 10, 2))


def test_own_backend(warmed):
    recorder = EagerAndRecordGraphs()
    torch.compile(scale, backend=recorder)(torch.randn(4, 10))
    ref = weakref.ref(recorder)
    torch._dynamo.reset()
    del recorder
    gc.collect()
    assert ref() is None
"""

MODES = {
    "off": ["-p", "no:recompile", "-k", "not test_covers"],  # covers() is the plugin's
    "installed": [],
    "fail-fast": ["--recompile-budget=1"],
    "report-only": ["--recompile-budget=1", "--recompile-mode=report-only"],
    "at-end": ["--recompile-budget=1", "--recompile-mode=at-end"],
}


@pytest.mark.parametrize("mode", MODES)
def test_what_a_test_frees_is_freed(run, mode) -> None:
    result = run(FREED, *MODES[mode])
    result.assert_outcomes(passed=TESTS - (mode == "off"))


@pytest.mark.parametrize("mode", ["off", "fail-fast"])
def test_a_module_fixture_s_model_is_freed_with_it(run, pytester, mode) -> None:
    pytester.makepyfile(**{name: HEADER + source for name, source in FIXTURE.items()})
    result = pytester.runpytest(*inner_args("-p", "no:randomly", *MODES[mode]))
    result.assert_outcomes(passed=3)


@pytest.mark.xdist
def test_freed_under_xdist(pytester) -> None:
    pytester.makepyfile(test_it=HEADER + FREED)
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "-p", "no:randomly", "--recompile-budget=1")
    )
    result.assert_outcomes(passed=TESTS)


@pytest.mark.parametrize("mode", ["off", "fail-fast"])
def test_a_backend_object_is_freed_after_a_kept_entry_saw_it(run, mode) -> None:
    result = run(BACKEND, *MODES[mode])
    result.assert_outcomes(passed=2)
