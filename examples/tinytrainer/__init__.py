"""A tiny training loop with a learning-rate warm-up, compiled with torch.compile."""

from .train import TinyNet, train

__all__ = ["TinyNet", "train"]
