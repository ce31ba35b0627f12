"""Source snippets shared by the pytester tests (each test module adds its own tests)."""

HEADER = """
import pytest
import torch
import torch._dynamo
"""

DOUBLE = """
@torch.compile(backend="eager")
def double(x):
    return x * 2
"""

STEP = """
step = 0

@torch.compile(backend="eager")
def f(x):
    return x + step
"""
