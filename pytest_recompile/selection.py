"""What a run collected and what it ran of it, for the JSON report: how ``combine`` finds a
test that no shard ran (docs/shards.md). Registered only where a report is written
(``--recompile-report``): in a serial run, and in each xdist worker, which collects (its
controller does not) and hands the record over in ``workeroutput``.

A deselected test is told apart by who deselected it: pytest's own selection (``-m``, ``-k``,
``--deselect``, ``--lf``), which every shard of a split normally shares, excludes it; a
plugin (pytest-split, pytest-shard) splits it off to another shard.
"""

from __future__ import annotations

import json
import sys
from types import FrameType
from typing import Any

import pytest

from .model.names import PREFIX
from .model.results import CollectionResult

COLLECTION_KEY = pytest.StashKey[CollectionResult]()
WORKER_OUTPUT = "recompile_collection"  # the key in an xdist worker's workeroutput


class CollectionRecord:
    """The collection's record, put in ``config.stash[COLLECTION_KEY]`` once collected."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.split_off: list[str] = []
        self.excluded: list[str] = []

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        into = self.excluded if deselecting_module().startswith("_pytest.") else self.split_off
        into.extend(item.nodeid for item in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        record: CollectionResult = {
            "selected": sorted(item.nodeid for item in session.items),
            "split_off": sorted(set(self.split_off)),
            "excluded": sorted(set(self.excluded)),
        }
        self.config.stash[COLLECTION_KEY] = record
        if not hasattr(self.config, "workerinput"):  # its controller says it
            warn_split(self.config)
        worker_output = getattr(self.config, "workeroutput", None)
        if isinstance(worker_output, dict):  # an xdist worker: to the controller
            worker_output[WORKER_OUTPUT] = json.dumps(record)


class ControllerCollection:
    """An xdist controller collects nothing: its workers each collect the whole selection
    (xdist checks that they agree), and the first to finish hands over its record."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # before xdist's, which answers for the hook
    def pytest_collection(self, session: pytest.Session) -> None:
        warn_split(self.config)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        found = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
        if isinstance(found, str) and COLLECTION_KEY not in self.config.stash:
            self.config.stash[COLLECTION_KEY] = json.loads(found)


def register_collection(config: pytest.Config, controller: bool) -> None:
    """Record the collection for the JSON report: by collecting, or, on an xdist
    controller, from the workers."""
    plugin = ControllerCollection(config) if controller else CollectionRecord(config)
    config.pluginmanager.register(plugin, "recompile-collection")


def deselecting_module() -> str:
    """The module that called ``pytest_deselected``: the first frame above pluggy's."""
    frame: FrameType | None = sys._getframe(2)  # above this hook's own frame and its caller's
    while frame is not None and frame.f_globals.get("__name__", "").startswith("pluggy"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


def warn_split(config: pytest.Config) -> None:
    """Warn, during collection, where shards will not split one order (below)."""
    unsafe = split_with_random_order(config)
    if unsafe is not None:
        from .warning_types import RecompileSplitUnsafe, warn_at

        warn_at(RecompileSplitUnsafe(unsafe), str(config.inipath or config.rootpath), 1)


SPLIT_OPTIONS = ("splits", "num_shards", "test_group_count")  # pytest-split, -shard, -test-groups


def split_with_random_order(config: pytest.Config) -> str | None:
    """The warning for a split whose shards each shuffle with a seed of their own: pytest-
    randomly reorders the collected tests before pytest-split (or pytest-shard) splits them,
    so shards overlap and lose tests. None where the split is safe."""
    if not any((getattr(config.option, name, None) or 0) > 1 for name in SPLIT_OPTIONS):
        return None
    if not config.pluginmanager.has_plugin("randomly"):
        return None
    if not getattr(config.option, "randomly_reorganize", True):
        return None
    seed = getattr(config.known_args_namespace, "randomly_seed", "default")
    if isinstance(seed, int):
        return None  # the same seed in every shard: the same order, the same split
    return (
        f"{PREFIX} the tests are split into shards while pytest-randomly shuffles them with "
        f"a seed of this process's own (--randomly-seed={seed}): each shard splits another "
        "order, so shards overlap and tests run in none. Give every shard the same seed "
        "(--randomly-seed=N) or run the shards with -p no:randomly; combine names the tests "
        "lost."
    )
