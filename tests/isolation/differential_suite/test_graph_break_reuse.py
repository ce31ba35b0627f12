"""Reuse of first compiles for functions that break their graph: where an earlier test's
compile of the function (and of its resume function) may answer a test's call, and where it
must not. Each test counts its recompiles and graph-break sites as it does alone.
"""

import pytest
import torch


def split(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + x.sum()


compiled_split = torch.compile(split, backend="eager")


@pytest.mark.parametrize("copy", range(2))
def test_break_same_shape(copy):
    compiled_split(torch.randn(4))


def test_break_then_another_shape():
    compiled_split(torch.randn(4))
    compiled_split(torch.randn(8))  # alone: both halves recompile (and go dynamic)


def test_break_another_shape_first():
    compiled_split(torch.randn(6))


def scaled(x, n):
    y = x + 1
    torch._dynamo.graph_break()
    return y * n  # n is read only after the break: the resume function guards on it


compiled_scaled = torch.compile(scaled, backend="eager")


def test_resume_function_recompiles_on_its_own():
    compiled_scaled(torch.randn(4), 2)
    compiled_scaled(torch.randn(4), 3)  # the first half hits; the resume function recompiles


def test_resume_function_another_value_first():
    compiled_scaled(torch.randn(4), 5)


def test_fullgraph_on_a_breaking_function():
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(split, backend="eager", fullgraph=True)(torch.randn(4))


@pytest.mark.max_graph_breaks(1)
def test_break_under_max_graph_breaks():
    compiled_split(torch.randn(4))


def item_branch(x):
    n = x.sum().item()  # a graph break unless capture_scalar_outputs
    return x * n


compiled_item = torch.compile(item_branch, backend="eager")


def test_item_breaks_the_graph():
    compiled_item(torch.ones(3))


def test_config_patch_removes_the_break():
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled_item(torch.ones(3))


class Chatty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        torch._dynamo.graph_break()
        return y.relu()


@pytest.mark.parametrize("copy", range(2))
def test_module_with_a_break_rebuilt_per_test(copy):
    torch.manual_seed(0)
    model = torch.compile(Chatty(), backend="eager")
    model(torch.randn(2, 4))
