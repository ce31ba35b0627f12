"""The same verdicts whatever the order: forward, reverse, random, and under pytest-xdist."""

from __future__ import annotations

import pytest
from snippets import DOUBLE, HEADER, STEP

SUITE = (
    HEADER
    + DOUBLE
    + STEP
    + """
def test_shapes_a():
    double(torch.ones(4))

def test_shapes_b():
    double(torch.ones(8, 2))

def test_shapes_c():
    double(torch.ones(2)); double(torch.ones(3, 3))

def test_steps():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

@pytest.mark.max_recompiles(2)
def test_steps_allowed():
    global step
    for i in range(3):
        step = i
        f(torch.ones(2))

def test_grad():
    double(torch.ones(4))
    with torch.no_grad():
        double(torch.ones(4))

@pytest.mark.allow_recompiles
def test_opted_out():
    double(torch.ones(4)); double(torch.ones(5, 5))

def test_plain():
    assert True
"""
)

EXPECTED = {
    "test_shapes_a": "passed",
    "test_shapes_b": "passed",
    "test_shapes_c": "failed",
    "test_steps": "failed",
    "test_steps_allowed": "passed",
    "test_grad": "failed",
    "test_opted_out": "passed",
    "test_plain": "passed",
}


def verdicts(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.stdout.lines:
        for outcome in ("PASSED", "FAILED"):
            if f" {outcome}" in line and "::" in line:
                name = line.split("::", 1)[1].split()[0]
                found[name] = outcome.lower()
    return found


@pytest.mark.parametrize(
    "order",
    [
        ["-p", "no:randomly"],
        ["-p", "no:randomly", "--reverse-order"],
        ["--randomly-seed=1234"],  # pytest-randomly shuffles modules and tests
        ["--randomly-seed=4321"],
        ["-p", "no:randomly", "-n", "2"],
    ],
    ids=["forward", "reverse", "random-1234", "random-4321", "xdist"],
)
def test_same_verdicts_in_any_order(pytester: pytest.Pytester, order: list[str]) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest(
        """
def pytest_addoption(parser):
    parser.addoption("--reverse-order", action="store_true")

def pytest_collection_modifyitems(config, items):
    if config.getoption("reverse_order"):
        items.reverse()
"""
    )
    result = pytester.runpytest_subprocess("--recompile-budget", "-v", *order)
    assert verdicts(result) == EXPECTED
