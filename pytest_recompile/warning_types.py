"""The plugin's own warnings, and how they are given: pointing at the user's file, and never
turned into a user's failure by a filter that makes warnings errors (no torch import)."""

from __future__ import annotations

import warnings

import pytest


class RecompileStateLeak(pytest.PytestWarning):
    """A gated test left torch.compile's stance or Dynamo's config changed."""


class RecompileMarkerIgnored(pytest.PytestWarning):
    """A marker of the plugin where pytest never reads it (a conftest's ``pytestmark``)."""


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
