"""Parametrized wider fixtures that compile while set up: each instance is torn down before
the next is set up, and must leave nothing behind (entries, automatic-dynamic memory), so
that a test gets what it gets alone with that instance."""

import pytest
import torch


@torch.compile(backend="eager")
def pf_module_fn(x):
    return x * 2 + 1


@pytest.fixture(scope="module", params=[4, 6])
def pf_module_warmed(request):
    pf_module_fn(torch.ones(request.param))
    return request.param


def test_pf_module_same_shape(pf_module_warmed):
    pf_module_fn(torch.ones(pf_module_warmed))


def test_pf_module_other_shape(pf_module_warmed):
    pf_module_fn(torch.ones(9))


@torch.compile(backend="eager")
def pf_class_fn(x):
    return x.sum(0) - 1


class TestParametrizedClassFixture:
    @pytest.fixture(scope="class", params=[2, 3, 5])
    @classmethod
    def pf_class_warmed(cls, request):
        pf_class_fn(torch.ones(request.param, 2))
        return request.param

    def test_pf_class_same_shape(self, pf_class_warmed):
        pf_class_fn(torch.ones(pf_class_warmed, 2))

    def test_pf_class_other_shape(self, pf_class_warmed):
        pf_class_fn(torch.ones(7, 2))

    def test_pf_class_two_shapes(self, pf_class_warmed):
        pf_class_fn(torch.ones(8, 2))
        pf_class_fn(torch.ones(11, 2))
