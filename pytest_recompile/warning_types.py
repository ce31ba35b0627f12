"""The plugin's own warnings, and how they are given: pointing at the user's file, and never
turned into a user's failure by a filter that makes warnings errors (no torch import)."""

from __future__ import annotations

import warnings

import pytest

from .model.names import PREFIX, relative


class RecompileStateLeak(pytest.PytestWarning):
    """A gated test left torch.compile's stance or Dynamo's config changed."""


class RecompileMarkerIgnored(pytest.PytestWarning):
    """A marker of the plugin where pytest never reads it (a conftest's ``pytestmark``)."""


class RecompileSplitUnsafe(pytest.PytestWarning):
    """Shards split from an order each shard shuffles with its own seed (pytest-randomly)."""


class RecompileOptionUnused(pytest.PytestWarning):
    """An option that acts on gated tests only, in a run that gates none."""


class RecompileTraceUnread(pytest.PytestWarning):
    """tlparse, on PATH, failed to read a kept structured trace (``--recompile-trace``)."""


def warn_at(warning: pytest.PytestWarning, filename: str, lineno: int) -> None:
    """Warn, shown at ``filename:lineno``. Under ``-W error`` or ``filterwarnings("error")``
    the warning is still only shown: a note of the plugin never fails a user's test; an
    ``ignore`` filter is still obeyed."""
    category = type(warning)
    try:
        warnings.warn_explicit(warning, category, filename, lineno)
    except category:
        with warnings.catch_warnings():
            warnings.simplefilter("always", category)
            warnings.warn_explicit(warning, category, filename, lineno)


def warn_conftest_marks(names: list[str], path: str, rootpath: str) -> None:
    """The plugin's markers ``names`` in the ``pytestmark`` of the conftest.py at ``path``:
    pytest never applies them. Say so, with the two ways that do gate a directory."""
    warn_at(
        RecompileMarkerIgnored(
            f"{PREFIX} pytestmark in {relative(path, rootpath)} carries "
            f"{', '.join(f'@pytest.mark.{n}' for n in names)}, which pytest never "
            "applies (it reads pytestmark in test modules only): no test is gated by "
            "it. To gate a directory, add the marker in that conftest's "
            "pytest_collection_modifyitems hook, or set the ini option "
            "recompile_budget for a run over that directory"
        ),
        path,
        _line_of(path, "pytestmark"),
    )


def _line_of(path: str, name: str) -> int:
    try:
        with open(path, encoding="utf-8") as file:
            return next((n for n, line in enumerate(file, 1) if line.startswith(name)), 1)
    except OSError:
        return 1


def warn_unused_options(given: list[str]) -> None:
    """``given`` options (or their ini twins) act on gated tests only, and no test of this
    run is gated: say so once, with what gates."""
    warn_at(
        RecompileOptionUnused(
            f"{PREFIX} no test of this run is gated, so {', '.join(given)} did nothing "
            "(options that act on gated tests only; the same from the ini file): gate every "
            "test with --recompile-budget[=N], "
            "--recompile-max-guards=N or --recompile-fullgraph (or their ini options), or "
            "mark the tests to gate (@pytest.mark.max_recompiles(n), fullgraph, ...)"
        ),
        "<pytest-recompile options>",
        0,
    )
