"""Markdown text primitives, for every output written as Markdown (the job summary in
``ci.py``, ``compare --format markdown``): a table cell and inline code, each one line."""

from __future__ import annotations

import re


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def md_cell(text: str) -> str:
    """Text for a table cell: one line, ``|`` escaped, ``<`` too (GitHub drops what looks
    like an HTML tag, such as ``<locals>``); ``—`` when empty."""
    return _one_line(text).replace("<", "&lt;") or "—"


def md_code(text: str) -> str:
    """Inline code for a cell, fenced by more backticks than the text holds in a row;
    ``—`` when empty."""
    text = _one_line(text)
    if not text:
        return "—"
    run = max((len(found) for found in re.findall("`+", text)), default=0)
    return f"{'`' * (run + 1)} {text} {'`' * (run + 1)}" if run else f"`{text}`"
