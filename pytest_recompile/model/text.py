"""Text primitives every output uses: a count with its noun, a ``file:line``, seconds.

Small and shared, so that a module that only needs a plural does not import the wording of
broken rules (``messages.py``), as coverage.py keeps ``plural`` in its misc module."""

from __future__ import annotations

from .names import relative


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 test``, ``2 tests``; ``many`` where the plural is not ``word + "s"``."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def location(filename: str, lineno: int, root: str | None = None) -> str:
    """``file:line``, relative to ``root`` (default: the working directory) when inside it."""
    return f"{relative(filename, root)}:{lineno}"


def seconds_text(seconds: float) -> str:
    """``1.50 s``."""
    return f"{seconds:.2f} s"
