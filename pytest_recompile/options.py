"""The plugin's options: each ``--recompile-*`` flag with its ini twin, as
:mod:`pytest_recompile.settings` reads them (no torch import)."""

from __future__ import annotations

import pytest

from .settings import durations_option, max_guards_option


def add_max_guards_option(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """``--recompile-max-guards=N`` and its ini twin."""
    group.addoption(
        "--recompile-max-guards",
        default=None,
        type=max_guards_option,
        dest="recompile_max_guards",
        metavar="N",
        help="gate every test: each cache entry it compiles may check at most N guards "
        "(what torch runs on every call that reaches the entry). Markers: max_guards(n).",
    )
    add_int_ini(parser, "recompile_max_guards", "like --recompile-max-guards=N (empty: off)")


def add_durations_option(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """``--recompile-durations=N`` and its ini twin, as pytest's ``--durations``."""
    group.addoption(
        "--recompile-durations",
        default=None,
        type=durations_option,
        dest="recompile_durations",
        metavar="N",
        help="list the N gated tests (and wider fixtures) and the N functions that spent the "
        "most seconds compiling, first compiles and recompiles apart, and whether torch's "
        "compile caches answered (N=0 for all; as --durations).",
    )
    add_int_ini(parser, "recompile_durations", "like --recompile-durations=N (empty: off)")


def add_path_option(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    name: str,
    help: str,
    metavar: str = "PATH",
) -> None:
    """``--recompile-NAME=PATH`` and its ini twin ``recompile_NAME`` (relative to rootdir),
    as :func:`pytest_recompile.settings._path_option` reads them."""
    flag = f"--recompile-{name.replace('_', '-')}"
    group.addoption(flag, default=None, dest=f"recompile_{name}", metavar=metavar, help=help)
    parser.addini(f"recompile_{name}", f"like {flag} (relative to rootdir)", default="")


def add_budget_ini(parser: pytest.Parser) -> None:
    """``recompile_budget``: an int or a string (see :func:`add_int_ini`)."""
    help = "default recompile budget of every test, like --recompile-budget=N (empty: off)"
    add_int_ini(parser, "recompile_budget", help)


def add_int_ini(parser: pytest.Parser, name: str, help: str) -> None:
    """An ini option that is a number: an int or a string. pytest 9.2 added union types, so
    that ``name = 1`` in its native ``[tool.pytest]`` table is read; older pytest reads a
    string (ini files are strings anyway)."""
    if pytest.version_tuple >= (9, 2):
        parser.addini(name, help, type=int | str, default="")
    else:
        parser.addini(name, help, default="")


def add_choice_option(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    name: str,
    choices: tuple[str, ...],
    help: str,
) -> None:
    """``--recompile-NAME=CHOICE`` and its ini twin ``recompile_NAME`` (default: the first
    choice), as :func:`pytest_recompile.settings._choice` reads them."""
    flag = f"--recompile-{name}"
    group.addoption(flag, choices=choices, default=None, dest=f"recompile_{name}", help=help)
    parser.addini(f"recompile_{name}", f"like {flag}", default=choices[0])
