"""A compile made between two tests is the earlier test's (docs/isolation.md): the later
test's count is what it gets alone, in file order and reversed. The scenarios are the
differential suite's (differential_suite/test_between_tests.py), which also runs them under
-n 2 against torch's own counts of each test alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from snippets import REVERSE_CONFTEST, inner_args, keeps_entries, outcomes

SCENARIOS = Path(__file__).parent / "differential_suite" / "test_between_tests.py"
LATER = ("test_del_other_dtype", "test_finalizer_other_dtype", "test_thread_other_dtype")


def fresh(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    import torch._dynamo

    torch._dynamo.reset()  # each in-process run stands for a fresh process
    return pytester.runpytest(*inner_args("--recompile-budget", "-v", "-p", "no:randomly", *args))


@keeps_entries
@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_a_compile_between_tests_is_the_earlier_tests(
    run, pytester: pytest.Pytester, order: str
) -> None:
    pytester.makeconftest(REVERSE_CONFTEST)
    pytester.makepyfile(test_between=SCENARIOS.read_text())
    result = fresh(pytester, *(["--reverse-order"] if order == "reversed" else []))
    assert set(outcomes(result).values()) == {"passed"}, result.stdout.str()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "thread: 1 compile of by_thread on a thread that "
            "test_between.py::test_thread_compiles_between_tests started, between tests: "
            "charged to no test*"
        ]
    )
    for name in LATER:  # and alone, each as the full run counted it
        alone = fresh(pytester, f"test_between.py::{name}")
        alone.assert_outcomes(passed=1)
