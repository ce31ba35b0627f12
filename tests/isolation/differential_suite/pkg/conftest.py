import pytest
import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.sigmoid(self.proj(x)) * x


@pytest.fixture(scope="package")
def package_gate():
    """A module compiled and warmed once per package at 2x3."""
    gate = torch.compile(Gate(), backend="eager")
    gate(torch.randn(2, 3))
    return gate
