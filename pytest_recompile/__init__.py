"""pytest-recompile: turn torch.compile recompiles into test failures you can act on.

Importing this package imports neither torch nor the tracker: the public names below are
loaded on first use, so that the pytest plugin costs next to nothing when it is not asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Budget": "budget",
    "BudgetError": "budget",
    "Reason": "guards",
    "InstalledGuard": "guards",
    "GraphBreak": "records",
    "CompiledWhileWarm": "errors",
    "FunctionRecord": "records",
    "Recompile": "records",
    "RecompileBudgetExceeded": "errors",
    "RecompileGateError": "errors",
    "RecompileTracker": "tracker",
    "Rule": "budget",
    "Violation": "judge",
    "warm": "tracker",
}

__all__ = [
    "Budget",
    "BudgetError",
    "CompiledWhileWarm",
    "FunctionRecord",
    "GraphBreak",
    "InstalledGuard",
    "Reason",
    "Recompile",
    "RecompileBudgetExceeded",
    "RecompileGateError",
    "RecompileTracker",
    "Rule",
    "Violation",
    "__version__",
    "warm",
]

if TYPE_CHECKING:
    from .budget import Budget, BudgetError, Rule
    from .errors import CompiledWhileWarm, RecompileBudgetExceeded, RecompileGateError
    from .guards import InstalledGuard, Reason
    from .judge import Violation
    from .records import FunctionRecord, GraphBreak, Recompile
    from .tracker import RecompileTracker, warm


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_recompile' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
