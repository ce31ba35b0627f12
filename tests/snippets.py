"""Source snippets shared by the pytester tests (each test module adds its own tests), the
arguments of every inner pytest run, and the assertions they share."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from pytest_recompile._torch import versions
from pytest_recompile.model.text import plural

HEADER = """
import pytest
import torch
import torch._dynamo
"""

DOUBLE = """
@torch.compile(backend="eager")
def double(x):
    return x * 2
"""

STEP = """
step = 0

@torch.compile(backend="eager")
def f(x):
    return x + step
"""


# Inner pytest runs load none of the plugins the environment happens to have installed
# (pytest-asyncio's deprecation warning would stop a run under -W error): their environment
# turns autoload off (the pytester fixture in conftest.py sets it; a subprocess gets it in
# its env), and each run loads by entry-point name what it uses (inner_args).
AUTOLOAD_OFF = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

# What torch says of the line that read a failing guard's value (probed on each release, see
# docs/compatibility.md): nothing on 2.7 and 2.8; the comment beside the guard on 2.9 and 2.10
# (the plugin uses it where it names the compiled function's own file); the comment and a
# "User stack trace" from 2.11 on.
TORCH_RELEASE = versions.version_tuple(versions.torch_version() or "0")
GUARD_LINES = (
    "stack" if TORCH_RELEASE >= (2, 11) else "comment" if TORCH_RELEASE >= (2, 9) else None
)


# gloo can abort a rank by SIGABRT as it tears down on a loaded machine ("terminate called
# without an active exception"; seen once in CI, 2026-12-04, in a run whose children the plugin
# did not touch): torch's, not the verdict under test. A test of DDP over gloo whose failure
# shows a rank killed by a signal runs once more (pytest-rerunfailures); any other failure, or
# the same one twice, fails it.
GLOO_RANK_KILLED = pytest.mark.flaky(reruns=1, only_rerun=[r"terminated with signal SIG"])


def inner_args(*args: str) -> list[str]:
    """The arguments of an inner pytest run whose environment has AUTOLOAD_OFF: this plugin by
    the name of its pytest11 entry point (``-p recompile``), unless ``args`` turn it off
    (``-p no:recompile`` after it would unregister it only once its options were added), then
    ``args``, which load any other plugin the run uses by name too: ``-p xdist`` for ``-n``,
    ``-p randomly``, ``-p rerunfailures``."""
    off = "-pno:recompile" in args or ("-p", "no:recompile") in pairwise(args)
    return [*([] if off else ["-p", "recompile"]), *args]


def assert_totals(
    result: pytest.RunResult,
    *,
    gated: int,
    recompiles: int,
    broke: int = 0,
    limit: int = 0,
    enforced: bool = True,
) -> None:
    """The gate's totals line under "recompile gate" in the terminal summary (its seconds
    aside): that the gate judged these tests, where "passed" alone would hold with the plugin
    off. ``limit``: tests that hit recompile_limit; ``enforced=False``: a report-only run."""
    verdict = "broke" if enforced else "would have broken"
    result.stdout.fnmatch_lines(
        [
            "*= recompile gate =*",
            f"{plural(gated, 'gated test')}, {plural(recompiles, 'recompile')}; "
            f"{broke} {verdict} the gate, {limit} hit recompile_limit; recompiles cost *",
        ]
    )


def assert_bad_ini(run: Any, pytester: pytest.Pytester, line: str, message: str) -> None:
    """An ini file with ``line`` stops the run with a usage error whose text matches
    ``message`` (an fnmatch pattern)."""
    pytester.makeini(f"[pytest]\n{line}\n")
    result = run("def test_x():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def assert_marker_error(result: pytest.RunResult, message: str) -> None:
    """A bad marker is a collection error of its module (exit 2, "1 error"), with the
    plugin's message; ``message`` is an fnmatch pattern."""
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_*.py*", message])
    result.stdout.fnmatch_lines(["*Interrupted: 1 error during collection*", "*= 1 error in *"])


# What needs a torch that can keep single cache entries (2.9+): elsewhere the plugin falls
# back to a full reset, tested by test_without_single_entry_support_falls_back_to_a_full_reset.
keeps_entries = pytest.mark.skipif(
    not versions.can_keep_entries(),
    reason="needs torch 2.9+: this torch cannot keep single cache entries (a full reset instead)",
)

REVERSE_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--reverse-order", action="store_true")

def pytest_collection_modifyitems(config, items):
    if config.getoption("reverse_order"):
        items.reverse()
"""


def read_json(name: str) -> Any:
    """A file the inner run wrote (pytester runs it in its own directory)."""
    return json.loads(Path(name).read_text())


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.stdout.lines:
        for outcome in ("PASSED", "FAILED", "ERROR"):
            if f" {outcome}" in line and "::" in line and not line.startswith(outcome):
                found[line.split("::", 1)[1].split()[0]] = outcome.lower()
    return found
