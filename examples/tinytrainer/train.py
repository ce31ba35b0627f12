"""Warm-up scaled loss, written twice: with the classic recompile bug, and fixed.

The bug: the loss reads ``global_step``, a Python int that the loop bumps every step.
Dynamo bakes a Python int into the graph as a constant and guards on its value
(``G['global_step'] == 0``), so each new step fails the guard and compiles again; after
``recompile_limit`` (8) compiles torch silently runs the function eagerly from then on.

The fix: pass the step as a tensor. Its value is data, not a constant: one graph serves
every step.
"""

from __future__ import annotations

import torch
from torch import nn

WARMUP_STEPS = 100
global_step = 0  # bumped by the training loop


class TinyNet(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@torch.compile
def warmup_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    scale = min(1.0, (global_step + 1) / WARMUP_STEPS)  # BUG: a Python int read per step
    return nn.functional.mse_loss(model(x), y) * scale


@torch.compile
def warmup_loss_fixed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, step: torch.Tensor
) -> torch.Tensor:
    scale = torch.clamp((step + 1) / WARMUP_STEPS, max=1.0)  # the step is data
    return nn.functional.mse_loss(model(x), y) * scale


def train(steps: int, *, fixed: bool, seed: int = 0) -> list[float]:
    """Run ``steps`` SGD steps on a toy regression; return the plain MSE after each."""
    global global_step
    torch.manual_seed(seed)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 8)
    y = x.sum(dim=1, keepdim=True)
    step = torch.zeros(())
    losses = []
    global_step = 0
    for _ in range(steps):
        if fixed:  # noqa: SIM108 - the two paths, side by side, are the example
            loss = warmup_loss_fixed(model, x, y, step)
        else:
            loss = warmup_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            losses.append(nn.functional.mse_loss(model(x), y).item())
        global_step += 1
        step += 1
    return losses
