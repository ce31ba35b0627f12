"""The differential suite's root conftest: test order, markers, and a session-scoped warm-up.

This suite is not collected by the project's own run (tests/conftest.py ignores it);
tests/isolation/test_differential.py copies it into a temporary directory and runs it there, whole
(with the recompile plugin, forward and reversed) and one test at a time (without it).
"""

import pytest
import torch


def pytest_addoption(parser):
    parser.addoption(
        "--reverse-order", action="store_true", help="run the collected tests in reverse order"
    )


def pytest_configure(config):
    # The alone runs have the recompile plugin off, which registers these otherwise.
    config.addinivalue_line("markers", "allow_recompiles: out of the default count")
    config.addinivalue_line("markers", "max_recompiles(n, function=None): recompile cap")


def pytest_collection_modifyitems(config, items):
    if config.getoption("reverse_order"):
        items.reverse()


@torch.compile(backend="eager")
def session_norm(x):
    return x / (x.abs().sum() + 1)


@pytest.fixture(scope="session")
def session_warm_norm():
    """Compiled and warmed once per session at 4x4."""
    session_norm(torch.randn(4, 4))
    return session_norm
