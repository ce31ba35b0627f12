"""A warm-start child's own pytest plugin: ``python -m pytest -p
pytest_recompile.restarts.child ...``, with ``PYTEST_RECOMPILE_WARM_CHILD`` naming its spec.

It takes the parent's option values before pytest configures (as pytest-xdist hands them to
its workers), starts capturing torch's cache lookups and frame compiles when the test loop
starts (the test's modules imported, with what their conftests set in the environment),
notes the test's outcome and, at the end, writes what it found to the result file the spec
names (JSON). Loaded only in that child: its state is the process's own.
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any

import pluggy

from ..model.names import WARM_CHILD_ENV
from ..model.warm_start import ChildRun, child_run

_STATE: dict[str, Any] = {"outcome": "not run", "error": None, "lookups": None, "problems": []}
_HOOK = pluggy.HookimplMarker("pytest")  # pytest's own marker, without importing pytest


def _spec() -> dict[str, Any]:
    if "spec" not in _STATE:
        with open(os.environ[WARM_CHILD_ENV], encoding="utf-8") as f:
            _STATE["spec"] = json.load(f)
    spec: dict[str, Any] = _STATE["spec"]
    return spec


@_HOOK(tryfirst=True)
def pytest_cmdline_main(config: Any) -> None:
    """Before any other plugin's (pytest-xdist's, pytest's own session)."""
    with open(_spec()["options"], "rb") as f:
        options: dict[str, Any] = pickle.load(f)
    vars(config.option).update(options)


@_HOOK(tryfirst=True)
def pytest_runtestloop(session: Any) -> None:
    try:
        import torch

        from .._torch.cache_events import Lookups

        threads = _spec().get("threads")
        if threads and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        lookups = Lookups()
        lookups.start()
        _STATE["lookups"] = lookups
    except Exception as exc:  # told in the result: the parent says it, never as a failure
        _STATE["problems"].append(f"the capture could not start in the child: {exc!r}")


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        if _STATE["outcome"] != "failed":
            _STATE["error"] = report.longreprtext
        _STATE["outcome"] = "failed"
    elif report.skipped and _STATE["outcome"] == "not run":
        _STATE["outcome"] = "skipped"
        _STATE["error"] = report.longreprtext
    elif report.when == "call" and report.passed and _STATE["outcome"] == "not run":
        _STATE["outcome"] = "passed"


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _STATE["outcome"] = "failed"
        _STATE["error"] = report.longreprtext


def pytest_unconfigure(config: Any) -> None:
    with open(_spec()["result"], "w", encoding="utf-8") as f:
        json.dump(result(), f)


def result() -> ChildRun:
    run = child_run(_STATE["outcome"], _STATE["error"])
    lookups = _STATE["lookups"]
    if lookups is None:
        run["problems"] = list(_STATE["problems"])
        return run
    from .._torch import cache_events

    run["problems"] = [*_STATE["problems"], *lookups.problems]
    run["counters"] = lookups.stop()
    run["events"] = lookups.events
    run["compiles"] = lookups.compiles
    run["caches_off"] = lookups.off or cache_events.caches_off()
    run["functorch_config"] = cache_events.functorch_options()
    run["components_named"] = any(e["components"] for e in lookups.events)
    run["versions"] = cache_events.versions()
    return run
