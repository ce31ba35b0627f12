"""Parametrized tests and a parametrized module fixture (params=[4, 8])."""

import pytest
import torch


@torch.compile(backend="eager")
def cube(x):
    return x**3


@pytest.fixture(scope="module", params=[4, 8])
def warm_cube_size(request):
    cube(torch.randn(request.param))
    return request.param


def test_param_fixture_warm_size(warm_cube_size):
    cube(torch.randn(warm_cube_size))


def test_param_fixture_size_6(warm_cube_size):
    cube(torch.randn(6))


@torch.compile(backend="eager")
def outer(x):
    return torch.outer(x, x)


@pytest.mark.parametrize("n", [2, 3])
def test_parametrized_size_n_then_n_plus_1(n):
    outer(torch.randn(n))
    outer(torch.randn(n + 1))
