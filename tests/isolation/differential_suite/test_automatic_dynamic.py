"""torch's automatic-dynamic memory across wider fixtures: a class fixture that makes dim 0
dynamic, a module fixture first set up inside that class (compiling nothing), and a module
fixture first set up by getfixturevalue after a function already went dynamic."""

import pytest
import torch


@torch.compile(backend="eager")
def grow(x):
    return x + 1


@pytest.fixture(scope="module")
def plain_config():
    """Compiles nothing; first set up inside TestDynamicWarmUp."""
    return {"lr": 0.1}


class TestDynamicWarmUp:
    @pytest.fixture(scope="class")
    @classmethod
    def warm_grow_4_then_8(cls):
        grow(torch.randn(4))
        grow(torch.randn(8))  # dim 0 becomes automatic-dynamic (the fixture's recompile)
        return grow

    def test_dynamic_class_fixture_new_size(self, warm_grow_4_then_8, plain_config):
        warm_grow_4_then_8(torch.randn(16))

    def test_dynamic_class_fixture_warm_sizes(self, warm_grow_4_then_8):
        warm_grow_4_then_8(torch.randn(4))
        warm_grow_4_then_8(torch.randn(8))


def test_after_dynamic_class_module_fixture_only_4_then_8(plain_config):
    grow(torch.randn(4))
    grow(torch.randn(8))


@torch.compile(backend="eager")
def decay(x):
    return x * 0.5


@pytest.fixture(scope="module")
def late_settings():
    """Compiles nothing; first set up by getfixturevalue, after decay went dynamic."""
    return {"decay": 0.5}


def test_4_then_8_then_getfixturevalue(request):
    decay(torch.randn(4))
    decay(torch.randn(8))
    request.getfixturevalue("late_settings")


def test_late_fixture_user_4_then_8(late_settings):
    decay(torch.randn(4))
    decay(torch.randn(8))
