"""Module-, class- and session-scoped fixtures that compile and warm: tests call the warm
shape (a cache hit) and another shape (one recompile against the fixture's entry). One
fixture recompiles in its teardown too, which no test is charged for."""

import pytest
import torch


@torch.compile(backend="eager")
def scale(x):
    return x * 3


@pytest.fixture(scope="module")
def warm_scale():
    scale(torch.randn(4, 4))
    yield scale
    scale(torch.randn(4))  # a recompile in the fixture's teardown, charged to no test


def test_module_fixture_function_warm_shape(warm_scale):
    warm_scale(torch.randn(4, 4))


def test_module_fixture_function_batch_8(warm_scale):
    warm_scale(torch.randn(8, 4))


def test_module_fixture_function_batch_8_again(warm_scale):
    warm_scale(torch.randn(8, 4))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def warm_mlp():
    mlp = torch.compile(Mlp(), backend="eager")
    mlp(torch.randn(4, 4))
    return mlp


def test_module_fixture_nn_module_warm_shape(warm_mlp):
    warm_mlp(torch.randn(4, 4))


def test_module_fixture_nn_module_batch_8(warm_mlp):
    warm_mlp(torch.randn(8, 4))


@torch.compile(backend="eager")
def shift(x):
    return x - 1


class TestClassScopedWarmUp:
    @pytest.fixture(scope="class")
    @classmethod
    def warm_shift(cls):
        shift(torch.randn(2, 3))
        return shift

    def test_class_fixture_warm_shape(self, warm_shift):
        warm_shift(torch.randn(2, 3))

    def test_class_fixture_batch_5(self, warm_shift):
        warm_shift(torch.randn(5, 3))


def test_session_fixture_warm_shape(session_warm_norm):
    session_warm_norm(torch.randn(4, 4))


def test_session_fixture_batch_8(session_warm_norm):
    session_warm_norm(torch.randn(8, 4))
