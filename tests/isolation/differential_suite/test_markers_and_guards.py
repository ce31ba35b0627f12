"""Module- and class-level pytestmark budgets; partials and callable objects compiled; the
usual recompile causes: grad mode, a global Python step counter, a dtype change; and a
function-scoped fixture that compiles."""

import functools

import pytest
import torch

pytestmark = pytest.mark.max_recompiles(2)


def affine(x, a, b):
    return x * a + b


def offset(x, by):
    return x + by


class SquaredError:
    def __call__(self, pred, target):
        return ((pred - target) ** 2).mean()


class AbsoluteError:
    def __call__(self, pred, target):
        return (pred - target).abs().mean()


def test_partial_compiled_4_then_8():
    compiled = torch.compile(functools.partial(affine, a=2.0, b=1.0), backend="eager")
    compiled(torch.randn(4))
    compiled(torch.randn(8))


def test_two_partials_of_one_function():
    first = torch.compile(functools.partial(affine, a=2.0, b=1.0), backend="eager")
    second = torch.compile(functools.partial(affine, a=3.0, b=0.0), backend="eager")
    first(torch.randn(4))
    second(torch.randn(4))


def test_partials_of_two_functions():
    torch.compile(functools.partial(affine, a=2.0, b=1.0), backend="eager")(torch.randn(4))
    torch.compile(functools.partial(offset, by=1.0), backend="eager")(torch.randn(4))


def test_callable_objects_of_two_classes():
    target = torch.randn(4)
    torch.compile(SquaredError(), backend="eager")(torch.randn(4), target)
    torch.compile(AbsoluteError(), backend="eager")(torch.randn(4), target)


def test_callable_object_compiled_two_dtypes():
    loss = torch.compile(SquaredError(), backend="eager")
    loss(torch.randn(4), torch.randn(4))
    loss(torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64))


@torch.compile(backend="eager")
def gelu_ish(x):
    return x * torch.sigmoid(1.702 * x)


def test_grad_mode_toggle():
    x = torch.randn(4)
    gelu_ish(x)
    with torch.no_grad():
        gelu_ish(x)


step = 0


@torch.compile(backend="eager")
def warmup_scaled(x):
    return x * min(1.0, (step + 1) / 10)


def test_global_step_counter_three_steps():
    global step
    for i in range(3):
        step = i
        warmup_scaled(torch.randn(4))
    step = 0


@torch.compile(backend="eager")
def mean_abs(x):
    return x.abs().mean()


def test_dtype_change_float_to_double():
    mean_abs(torch.randn(4))
    mean_abs(torch.randn(4, dtype=torch.float64))


@torch.compile(backend="eager")
def clamp01(x):
    return x.clamp(0, 1)


@pytest.fixture
def fresh_clamp():
    """Function-scoped: its compiles are the test's own."""
    clamp01(torch.randn(4))
    yield clamp01
    clamp01(torch.randn(4, 2))  # a recompile in the test's teardown


def test_function_fixture_compiles_warm_shape(fresh_clamp):
    fresh_clamp(torch.randn(4))


def test_function_fixture_compiles_batch_8(fresh_clamp):
    fresh_clamp(torch.randn(8))


@torch.compile(backend="eager")
def residual(x):
    return x + x.mean()


class TestClassLevelBudget:
    pytestmark = pytest.mark.max_recompiles(1)

    def test_class_marked_4_then_8(self):
        residual(torch.randn(4))
        residual(torch.randn(8))

    def test_class_marked_same_shape_twice(self):
        residual(torch.randn(4))
        residual(torch.randn(4))
