"""A module fixture warms a function with backend="eager"; later tests compile the SAME
function with another backend, and with dynamic=True, at the same shape."""

import pytest
import torch


def blend(x):
    return x.cos() + x.sin()


@pytest.fixture(scope="module")
def warm_blend_eager():
    compiled = torch.compile(blend, backend="eager")
    compiled(torch.randn(4, 4))
    return compiled


def test_backend_fixture_eager_same_shape(warm_blend_eager):
    warm_blend_eager(torch.randn(4, 4))


def test_same_function_aot_eager_same_shape(warm_blend_eager):
    torch.compile(blend, backend="aot_eager")(torch.randn(4, 4))


def test_same_function_dynamic_true_same_shape(warm_blend_eager):
    torch.compile(blend, backend="eager", dynamic=True)(torch.randn(4, 4))
