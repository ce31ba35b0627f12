"""An opted-out test (allow_recompiles) first in its module, then gated tests calling the same
module-level compiled function at the same shapes."""

import pytest
import torch


@torch.compile(backend="eager")
def square(x):
    return x * x


@pytest.mark.allow_recompiles
def test_opted_out_first_4_then_8():
    square(torch.randn(4))
    square(torch.randn(8))


def test_gated_after_opted_out_4_then_8():
    square(torch.randn(4))
    square(torch.randn(8))


def test_gated_after_opted_out_again_4_then_8():
    square(torch.randn(4))
    square(torch.randn(8))
