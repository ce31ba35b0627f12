"""Two module fixtures warm the same function at different shapes; a test that uses only
warm_b sees warm_a's entries too when warm_a is live (the one allowed order-dependent edge)."""

import pytest
import torch


@torch.compile(backend="eager")
def reduce_rows(x):
    return x.sum(0)


@pytest.fixture(scope="module")
def warm_a():
    reduce_rows(torch.randn(4, 4))
    return reduce_rows


@pytest.fixture(scope="module")
def warm_b():
    reduce_rows(torch.randn(6, 2))
    return reduce_rows


def test_warm_a_user_warm_shape(warm_a):
    warm_a(torch.randn(4, 4))


def test_warm_b_only_calls_9x2(warm_b):
    warm_b(torch.randn(9, 2))
