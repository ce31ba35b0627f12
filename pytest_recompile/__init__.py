"""pytest-recompile: turn torch.compile recompiles into test failures you can act on.

Importing this package imports neither torch nor the tracker: the public names below are
loaded on first use, so that the pytest plugin costs next to nothing when it is not asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Budget": "model.budget",
    "BudgetError": "model.budget",
    "Certificate": "model.certificate",
    "DomainError": "model.certificate",
    "Reason": "model.guards",
    "InstalledGuard": "model.guards",
    "GraphBreak": "model.records",
    "CompiledWhileWarm": "recording.errors",
    "FunctionRecord": "model.records",
    "Recompile": "model.records",
    "RecompileBudgetExceeded": "recording.errors",
    "RecompileGateError": "recording.errors",
    "RecompileTracker": "recording.tracker",
    "Rule": "model.budget",
    "Size": "model.certificate",
    "Violation": "model.judge",
    "warm": "recording.tracker",
}

__all__ = [
    "Budget",
    "BudgetError",
    "Certificate",
    "CompiledWhileWarm",
    "DomainError",
    "FunctionRecord",
    "GraphBreak",
    "InstalledGuard",
    "Reason",
    "Recompile",
    "RecompileBudgetExceeded",
    "RecompileGateError",
    "RecompileTracker",
    "Rule",
    "Size",
    "Violation",
    "__version__",
    "warm",
]

if TYPE_CHECKING:
    from .model.budget import Budget, BudgetError, Rule
    from .model.certificate import Certificate, DomainError, Size
    from .model.guards import InstalledGuard, Reason
    from .model.judge import Violation
    from .model.records import FunctionRecord, GraphBreak, Recompile
    from .recording.errors import CompiledWhileWarm, RecompileBudgetExceeded, RecompileGateError
    from .recording.tracker import RecompileTracker, warm


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_recompile' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
