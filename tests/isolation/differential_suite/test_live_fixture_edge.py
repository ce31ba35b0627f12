"""Two module fixtures warm the same function at different shapes, and a module fixture warms
a model; tests that use one fixture see nothing of another that happens to be live."""

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


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


@pytest.fixture(scope="module")
def warm_net():
    model = torch.compile(Net(), backend="eager")
    model(torch.randn(4, 4))
    return model


def test_warm_net_user(warm_net):
    warm_net(torch.randn(4, 4))


def test_own_net_mark_dynamic_beside_unused_warm_net():
    model = torch.compile(Net(), backend="eager")
    x = torch.randn(6, 4)
    torch._dynamo.mark_dynamic(x, 0)
    model(x)
    model(torch.randn(7, 4))
