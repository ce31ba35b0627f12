"""A test that calls torch._dynamo.reset(), and tests relying on a function compiled and
called at module import (at shape 4)."""

import torch


@torch.compile(backend="eager")
def at_import(x):
    return x + 2


at_import(torch.randn(4))  # compiled at import: an entry outside any test


@torch.compile(backend="eager")
def before_reset(x):
    return x * 2


def test_calls_dynamo_reset_itself():
    before_reset(torch.randn(3))
    torch._dynamo.reset()
    before_reset(torch.randn(3))


def test_import_time_function_size_8():
    at_import(torch.randn(8))


def test_import_time_function_size_4():
    at_import(torch.randn(4))
