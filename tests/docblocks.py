"""The fenced blocks of the project's Markdown documents, and the test that checks each.

A block is checked when the line before its opening fence is an HTML comment naming a test,
``<!-- checked: tests/test_docs.py::test_graph_breaks -->``. That test takes its blocks with
:func:`checked_blocks` and runs them or compares them with what they stand for; a pasted
output is compared with :func:`assert_pasted`. ``tests/test_docs.py`` fails on a block
without such a comment, or naming a test that does not exist or does not read its blocks.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import cache
from glob import escape
from importlib.metadata import version
from pathlib import Path

import pytest
from snippets import GUARD_LINES

ROOT = Path(__file__).parent.parent
DOCUMENTS = ("README.md", "CONTRIBUTING.md", "benchmarks/README.md", "docs/*.md")
MARKER = re.compile(r"<!-- checked: (\S+) -->")
FENCE = re.compile(r"^(```+)([\w-]*)\s*$")


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # the opening fence's, from 1
    lang: str
    text: str
    checked_by: str | None  # the test the marker names

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def commands(self) -> list[str]:
        """A shell block's commands, comments dropped; a console block's ``$`` lines."""
        if self.lang == "console":
            return [line[2:] for line in self.lines if line.startswith("$ ")]
        return [line.split("  #")[0].strip() for line in self.lines if line.strip()]

    @property
    def output(self) -> list[str]:
        """A pasted output: a text block's lines, a console block's lines but its commands."""
        return [line for line in self.lines if not line.startswith("$ ")]


def documents() -> list[Path]:
    return [path for pattern in DOCUMENTS for path in sorted(ROOT.glob(pattern))]


@cache
def blocks(path: Path) -> tuple[Block, ...]:
    lines = path.read_text().splitlines()
    name = path.relative_to(ROOT).as_posix()
    found = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, lang = opening.groups()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        assert end is not None, f"{name}:{i + 1}: a fence that is never closed"
        marker = MARKER.fullmatch(lines[i - 1].strip()) if i else None
        text = "".join(f"{line}\n" for line in lines[i + 1 : end])
        found.append(Block(name, i + 1, lang, text, marker.group(1) if marker else None))
        i = end + 1
    return tuple(found)


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks(path)]


def stray_markers(path: Path) -> list[str]:
    """Markers outside fences that no opening fence follows."""
    lines = path.read_text().splitlines()
    fenced = {n for b in blocks(path) for n in range(b.line - 1, b.line + len(b.lines) + 1)}
    return [
        f"{path.relative_to(ROOT).as_posix()}:{n + 1}"
        for n, line in enumerate(lines)
        if n not in fenced
        and MARKER.search(line)
        and not (n + 1 < len(lines) and FENCE.match(lines[n + 1]))
    ]


def reads_its_blocks(test: str) -> bool:
    """Whether ``tests/x.py::test_y`` is a test function that calls ``checked_blocks`` and
    compares: an ``assert``, or a call of an ``assert_...`` helper or ``fnmatch_lines``."""
    path, _, name = test.partition("::")
    source = ROOT / path
    if not source.is_file() or not name.startswith("test_"):
        return False
    return compares_its_blocks(source.read_text(), name)


def compares_its_blocks(source: str, name: str) -> bool:
    """:func:`reads_its_blocks` on a module's source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            calls = [
                getattr(call.func, "id", None) or getattr(call.func, "attr", "")
                for call in ast.walk(node)
                if isinstance(call, ast.Call)
            ]
            compares = any(isinstance(n, ast.Assert) for n in ast.walk(node)) or any(
                c.startswith("assert_") or c == "fnmatch_lines" for c in calls
            )
            return "checked_blocks" in calls and compares
    return False


def checked_blocks(request: pytest.FixtureRequest) -> list[Block]:
    """The blocks whose marker names the requesting test."""
    test = request.node.nodeid.split("[")[0]
    mine = [block for block in all_blocks() if block.checked_by == test]
    assert mine, f"no block of {', '.join(DOCUMENTS)} names {test}"
    return mine


def readme_example_args() -> list[str]:
    """The arguments of the README's first command's pytest run of the bundled example."""
    for block in blocks(ROOT / "README.md"):
        for command in block.commands:
            for part in command.split(" && "):
                if part.startswith(".venv/bin/pytest examples"):
                    return part.split()[1:]
    raise AssertionError("README.md: no command runs .venv/bin/pytest examples")


# What differs from run to run in a pasted output: pids, seconds, compile ids, torch's
# estimate of a guard check (microseconds, measured once per compile).
_VARIABLE = re.compile(
    r"pid \d+|\d+\.\d+ ?s\b|\(\d+:\d\d:\d\d\)|\[\d+/\d+\]"
    r"|(?:estimated|measured|guard check) \d+(?:\.\d+)? us\b"
)
_BANNER = re.compile(r"^([=_-])\1+ (.+?) \1+$")


def _literal(text: str) -> str:
    """``text`` as an fnmatch pattern, its variable parts matching anything."""
    pieces = re.split(f"({_VARIABLE.pattern})", text)  # literal, variable, literal, ...
    return "".join(
        escape(piece)
        if n % 2 == 0
        else "pid *"
        if piece.startswith("pid")
        else "[[]*/*[]]"
        if piece.startswith("[")
        else "estimated * us"
        if piece.startswith("estimated")
        else "measured * us"
        if piece.startswith("measured")
        else "guard check * us"
        if piece.startswith("guard check")
        else "*"
        for n, piece in enumerate(pieces)
    )


def pattern(line: str) -> str:
    """The fnmatch pattern a pasted line of output must match: the same text, but for pids,
    seconds and compile ids (``[0/1]``); a banner's width, and the end pytest cuts off a
    short-summary line (``FAILED test_x.py::test - Fa...``), are free."""
    banner = _BANNER.match(line)
    if banner:
        return f"*{banner.group(1)} {_literal(banner.group(2))} {banner.group(1)}*"
    if line.startswith(("FAILED ", "ERROR ")) and " - " in line:
        return _literal(line.split(" - ")[0]) + " - *"
    return _literal(line)


_GUARD_COUNTS = re.compile(r"\d+")
_GUARD_KINDS = re.compile(r" guards \(.*?; ")  # "54 guards (13 TYPE_MATCH, ..., 25 other; "


def _guard_tree(line: str) -> str:
    """A pasted ``guards`` line as any release words it: which kinds make up most of a guard
    tree, and how many of each, are torch's."""
    return _GUARD_COUNTS.sub("*", _GUARD_KINDS.sub(" guards (*; ", line))


# What the plugin shows of the line that read a failing guard's value: a message's lines, its
# annotation, and the Markdown summary's "Guard from" cell (the one before the seconds).
_SITE = re.compile(r"^ +(guard from|in your code) |this line installed the guard")
_GUARD_LINE_CELL = re.compile(r"\| `[^`|]+:\d+` \|(?= \d+\.\d\d \|$)")

# The torch release the pasted outputs were taken on (CI's first lane).
PASTED_ON = "2.13."


def torch_worded(patterns: list[str], lines: list[str]) -> list[str]:
    """``patterns`` of a paste taken on another release, for this one: a line the output has
    stays exact; one it lacks keeps the plugin's words before its first ``: `` and lets the
    rest, torch's reason or hint, differ; a line with no such part must still be there."""
    return [
        found
        if any(fnmatch(line, found) for line in lines) or ": " not in found
        else found.split(": ", 1)[0] + ": *"
        for found in patterns
    ]


def assert_pasted(block: Block, output: str, *, torch_wording: bool = False) -> None:
    """Every line of the pasted output ``block`` is in ``output``, in that order.

    ``torch_wording``: the paste quotes what torch words and words differently from release to
    release (graph-break reasons and hints, argument names): on another release each line is
    still compared where this release words it the same, and where not, the plugin's words
    before torch's part are (:func:`torch_worded`). The plugin's own words, and guard texts,
    which it reads alike on every release, are compared exactly on every release.
    """
    pasted_here = version("torch").startswith(PASTED_ON)
    patterns = [pattern(line) for line in block.output]
    if torch_wording and not pasted_here:
        patterns = torch_worded(patterns, output.splitlines())
    if not pasted_here:  # a guard tree's counts and kinds are torch's: the plugin's words still
        patterns = [_guard_tree(p) if " guards" in p else p for p in patterns]  # compared
    if GUARD_LINES is None:  # torch names no line for a guard: the plugin shows none
        patterns = [_GUARD_LINE_CELL.sub("| * |", p) for p in patterns if not _SITE.search(p)]
    try:
        pytest.LineMatcher(output.splitlines()).fnmatch_lines(patterns)
    except pytest.fail.Exception as error:
        raise AssertionError(f"{block}: the pasted output is stale\n{error}") from None
