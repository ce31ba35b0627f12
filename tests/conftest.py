from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest import pytester as pytester_module
from snippets import AUTOLOAD_OFF, HEADER, inner_args

# One suite run as data by isolation/test_differential.py (in a copy), never collected here.
collect_ignore = ["isolation/differential_suite"]


def _keep_libraries(inner_root: Path) -> type:
    """A SysModulesSnapshot that drops only the inner run's own modules.

    pytester's in-process runs remove every module imported during the run. torch imports
    much of itself lazily on the first compile; dropping and re-importing those modules
    leaves two copies of C-extension state, which crashes the interpreter. The inner
    run's test modules are still dropped, as pytester intends.
    """
    base = pytester_module.SysModulesSnapshot
    root = str(inner_root)

    class KeepLibraries(base):  # type: ignore[misc, valid-type]
        def __init__(self, preserve: object = None) -> None:
            def keep(name: str) -> bool:
                path = getattr(sys.modules.get(name), "__file__", None) or ""
                return not path.startswith(root)

            super().__init__(preserve=keep)

    return KeepLibraries


# What makes a test slow, one marker each (pyproject.toml registers them): a test carries the
# one that says why, and gets ``slow`` from it here. ``-m "not slow"`` is the inner loop
# CONTRIBUTING.md gives.
SLOW_KINDS = ("inductor", "xdist", "subprocess", "processes", "differential")


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of a slow kind gets the ``slow`` marker; ``slow`` by hand, without a kind,
    is an error (it would not say why)."""
    bare = []
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("slow"):
            bare.append(item.nodeid)
    if bare:
        raise pytest.UsageError(
            f"mark these with why they are slow ({', '.join(SLOW_KINDS)}) instead of "
            f"@pytest.mark.slow, which the conftest adds: {', '.join(bare)}"
        )


@pytest.fixture
def probes_decided_afresh() -> Iterator[None]:
    """A test that fakes a torch without some API: torch is probed anew for it (the probes
    are cached per process), and the real one again after it."""
    from pytest_recompile._torch import versions

    for probe in versions.PROBES:
        probe.cache_clear()
    yield
    for probe in versions.PROBES:
        probe.cache_clear()


@pytest.fixture(autouse=True)
def _not_the_ci_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs of this suite are not the CI job's: when the suite itself runs on
    GitHub Actions, they must neither annotate its pull request nor append to its job
    summary (the tests of those outputs set the variables themselves). Nor may pytest's own
    CI detection (``CI``, ``BUILD_NUMBER``) reach them: on CI it prints each failure's whole
    message in the short summary, so an inner run's output would differ from a laptop's."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose inner runs, in-process and in a subprocess, load no installed plugin but
    those their arguments name (``snippets.inner_args``)."""
    for name, value in AUTOLOAD_OFF.items():
        monkeypatch.setenv(name, value)
    return pytester


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Write a test module (torch and pytest imported) and run pytest on it in-process.

    Requesting it also makes plain ``pytester.runpytest`` calls safe for torch.
    """
    keep = _keep_libraries(pytester.path)
    monkeypatch.setattr(pytester_module, "SysModulesSnapshot", keep)
    # pytester restores its own snapshot, taken before this fixture, at teardown.
    monkeypatch.setattr(pytester, "_sys_modules_snapshot", keep())

    def run_(source: str, *args: str, name: str = "test_it") -> pytest.RunResult:
        pytester.makepyfile(**{name: HEADER + textwrap.dedent(source)})
        # Each in-process run stands for a fresh process: no compile state from earlier runs
        # (the plugin keeps what was compiled before a session's first test).
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
        return pytester.runpytest(*inner_args(*args, "-p", "no:randomly", "-p", "no:logging"))

    return run_
