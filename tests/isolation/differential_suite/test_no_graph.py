"""A frame in which torch found no graph: Dynamo marks its code object to be skipped for the
rest of the process (``skip_code``), a decision beyond its cache entries. A test after one
that only ever took the graph-less path must still compile the function as it would alone.
"""

import pytest
import torch


@torch.compile(backend="eager")
def augment(x, flip):
    if flip:
        return x.flip(0) * 2
    return x  # no graph: torch skips this code object from then on


@pytest.mark.parametrize("flip", [False, True])
def test_augment(flip):
    augment(torch.ones(4), flip)


def test_augment_both():
    augment(torch.ones(4), True)
    augment(torch.ones(4), False)  # alone: 1 recompile (EQUALS_MATCH flip), then no graph
