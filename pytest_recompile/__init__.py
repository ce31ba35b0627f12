"""pytest-recompile: turn torch.compile recompiles into test failures you can act on.

Importing this package does not import torch.
"""

from __future__ import annotations

from .guards import Reason
from .markers import Budget, BudgetError
from .tracker import (
    CompiledWhileWarm,
    FunctionRecord,
    Recompile,
    RecompileBudgetExceeded,
    RecompileGateError,
    RecompileTracker,
    Violation,
    warm,
)

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "BudgetError",
    "CompiledWhileWarm",
    "FunctionRecord",
    "Reason",
    "Recompile",
    "RecompileBudgetExceeded",
    "RecompileGateError",
    "RecompileTracker",
    "Violation",
    "__version__",
    "warm",
]
