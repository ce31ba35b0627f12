"""Source snippets shared by the pytester tests (each test module adds its own tests), and
one assertion they share."""

from __future__ import annotations

import pytest

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


def assert_marker_error(result: pytest.RunResult, message: str) -> None:
    """A bad marker is a collection error of its module (exit 2, "1 error"), with the
    plugin's message; ``message`` is an fnmatch pattern."""
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_*.py*", message])
    result.stdout.fnmatch_lines(["*Interrupted: 1 error during collection*", "*= 1 error in *"])
