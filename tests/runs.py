"""Small :class:`RunResults` built in a test, as a loaded report would hold them: the unit
tests of the model and the renderers build their runs here, not through pytester."""

from __future__ import annotations

from typing import Any

from pytest_recompile.model.results import ReportEnvironment, ReportSettings, TestResult
from pytest_recompile.model.run import Attempt, RunResults

ENVIRONMENT: ReportEnvironment = {
    "pytest_recompile": "0.1.0",
    "pytest": "9.0.0",
    "torch": "2.13.0+cpu",
    "torch_build": "cpu",
    "python": "3.11.0",
    "platform": "linux",
    "devices": ["cpu"],
}
SETTINGS: ReportSettings = {
    "default_budget": 0,
    "mode": "fail-fast",
    "keep_caches": False,
    "fullgraph": False,
    "baseline": None,
    "max_guards": None,
    "if_disabled": "fail",
}
CREATED = "2026-12-07T00:00:00+00:00"


def run_of(tests: dict[str, tuple[str, TestResult]] | None = None, **fields: Any) -> RunResults:
    """A run of ``tests`` (node id -> (outcome, figures)); any other field as given."""
    attempts = {nodeid: Attempt(*attempt) for nodeid, attempt in (tests or {}).items()}
    fields = {"environment": ENVIRONMENT, "settings": SETTINGS, "created": CREATED, **fields}
    return RunResults(tests=attempts, **fields)
