"""A serving model, warmed up on the batch sizes of its benchmark, certified over the batch sizes
it will serve (``docs/certificate.md``). Run it with::

    pytest examples/serving.py --recompile-budget

The first test fails: the warm-up compiled batch 8, then batch 16 made the batch dimension
dynamic, but Dynamo specializes sizes 0 and 1, so a request of one sample compiles again in
production (seconds, on the request's path). The second test is the fix: the batch dimension is
marked unbacked before the first call, and one graph serves every batch size.
"""

import pytest
import torch

from pytest_recompile import RecompileTracker

BENCHMARK_BATCHES = (8, 16, 32)  # what the warm-up runs
SERVED_BATCHES = range(1, 65)  # what production sends


class Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).softmax(-1)


def warmed_up(mark_batch: bool) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model compiled and warmed up on the benchmark's batches; an example request."""
    model = torch.compile(Classifier().eval())
    for batch in BENCHMARK_BATCHES:
        features = torch.randn(batch, 32)
        if mark_batch:
            torch._dynamo.decorators.mark_unbacked(features, 0)
        with torch.no_grad():
            model(features)
    return model, features


@pytest.fixture(scope="module")
def server() -> tuple[torch.nn.Module, torch.Tensor]:
    return warmed_up(mark_batch=False)


@pytest.fixture(scope="module")
def fixed_server() -> tuple[torch.nn.Module, torch.Tensor]:
    return warmed_up(mark_batch=True)


def test_serves_every_batch_size(server, recompiles: RecompileTracker) -> None:
    model, example = server
    with torch.no_grad():
        recompiles.covers(model, (example,), {"features": {0: SERVED_BATCHES}})


def test_serves_every_batch_size_fixed(fixed_server, recompiles: RecompileTracker) -> None:
    model, example = fixed_server
    with torch.no_grad():
        recompiles.covers(model, (example,), {"features": {0: SERVED_BATCHES}})
