"""--recompile-trace: torch's structured trace kept for the tests that break the gate."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import jsonschema
import pytest
from snippets import assert_totals, inner_args

from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.json_report import SCHEMA_FILE
from pytest_recompile.traces import (
    TLPARSE_DIR,
    TRACE_FILE,
    find_tlparse,
    folder_name,
    trace_line,
)

OVER_AND_UNDER = """
step = 0

@torch.compile(backend="eager")
def f(x):
    return x + step

def test_over():
    global step
    x = torch.ones(3)
    for step in range(3):
        f(x)

@torch.compile(backend="eager")
def g(x):
    return x * 2

def test_under():
    g(torch.ones(3))
    g(torch.ones(3))
"""

OWN_FAILURE = """
@torch.compile(backend="eager")
def h(x, n):
    return x * n

def test_raises():
    h(torch.ones(3), 1)
    h(torch.ones(3), 2)
    assert False, "the test's own failure"
"""


def trace_logger_state() -> tuple[list[logging.Handler], int, bool]:
    logger = logging.getLogger("torch.__trace")
    return list(logger.handlers), logger.level, logger.propagate


def kept(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_test_over_budget_keeps_its_trace_and_one_that_passes_leaves_nothing(
    run, pytester: pytest.Pytester
) -> None:
    before = trace_logger_state()
    result = run(
        OVER_AND_UNDER,
        "--recompile-budget",
        "--recompile-trace=traces",
        "--recompile-report=r.json",
    )
    assert trace_logger_state() == before  # handlers, level and propagation put back
    result.assert_outcomes(failed=1, passed=1)
    name = folder_name("test_it.py::test_over")
    assert kept(pytester.path / "traces") == [name]  # test_under left nothing
    shown = os.path.join("traces", name)
    result.stdout.fnmatch_lines(["*_ test_over _*", "*fail-fast: stopped at*", trace_line(shown)])
    text = (pytester.path / shown / TRACE_FILE).read_text()
    for record in ('{"dynamo_start"', '{"compilation_metrics"', '{"dynamo_cpp_guards_str"'):
        assert record in text
    assert '{"str": [' in text.splitlines()[0]  # torch's string table first
    report = json.loads((pytester.path / "r.json").read_text())
    jsonschema.validate(report, json.loads(Path(SCHEMA_FILE).read_text()))
    traces = {t["nodeid"]: t["trace"] for t in report["tests"]}
    assert traces == {"test_it.py::test_over": shown, "test_it.py::test_under": None}


def test_the_test_s_own_failure_stands_beside_the_trace(run, pytester: pytest.Pytester) -> None:
    before = trace_logger_state()
    result = run(
        OWN_FAILURE, "--recompile-budget", "--recompile-mode=at-end", "--recompile-trace=out"
    )
    assert trace_logger_state() == before
    result.assert_outcomes(failed=1)
    shown = os.path.join("out", folder_name("test_it.py::test_raises"))
    result.stdout.fnmatch_lines(["*AssertionError: the test's own failure*", f"*{shown}*"])
    assert (pytester.path / shown / TRACE_FILE).is_file()


def test_a_report_only_run_keeps_the_trace_and_fails_nothing(
    run, pytester: pytest.Pytester
) -> None:
    result = run(
        OVER_AND_UNDER, "--recompile-budget", "--recompile-mode=report-only", "--recompile-trace=t"
    )
    result.assert_outcomes(passed=2)
    assert_totals(result, gated=2, recompiles=2, broke=1, enforced=False)
    assert kept(pytester.path / "t") == [folder_name("test_it.py::test_over")]


def test_an_earlier_run_s_folder_goes_when_the_test_passes(run, pytester: pytest.Pytester) -> None:
    run(OVER_AND_UNDER, "--recompile-budget", "--recompile-trace=traces").assert_outcomes(
        failed=1, passed=1
    )
    run(OVER_AND_UNDER, "--recompile-budget=5", "--recompile-trace=traces").assert_outcomes(
        passed=2
    )
    assert kept(pytester.path / "traces") == []


@pytest.mark.skipif(find_tlparse() is None, reason="tlparse is not installed")
def test_tlparse_reads_the_kept_folder(run, pytester: pytest.Pytester) -> None:
    run(OVER_AND_UNDER, "--recompile-budget", "--recompile-trace=traces").assert_outcomes(
        failed=1, passed=1
    )
    html = pytester.path / "traces" / folder_name("test_it.py::test_over") / TLPARSE_DIR
    assert (html / "index.html").is_file()
    assert "compilation_metrics" in (html / "raw.jsonl").read_text()


def test_a_failing_tlparse_is_named_once_and_fails_no_test(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = pytester.mkdir("bin") / "tlparse"
    fake.write_text("#!/bin/sh\necho 'cannot parse' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    source = OVER_AND_UNDER + OVER_AND_UNDER.replace("test_over", "test_over_too").replace(
        "test_under", "test_under_too"
    )
    result = run(source, "--recompile-budget", "--recompile-trace=traces")
    result.assert_outcomes(failed=2, passed=2)
    assert result.stdout.str().count("tlparse could not read") == 1
    result.stdout.fnmatch_lines(["*RecompileTraceUnread*(exit status 3: cannot parse)*"])
    assert len(kept(pytester.path / "traces")) == 2


def test_an_internal_error_is_contained(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_recompile._torch import trace

    def broken(path: str) -> None:
        raise RuntimeError("no trace today")

    monkeypatch.setattr(trace, "start", broken)
    result = run(OVER_AND_UNDER, "--recompile-budget", "--recompile-trace=traces")
    result.assert_outcomes(failed=1, passed=1)  # the gate's verdicts, nothing more
    result.stdout.fnmatch_lines(["*internal error in begin: RuntimeError: no trace today*"])
    assert kept(pytester.path / "traces") == []


@pytest.mark.parametrize("where", ["option", "ini"])
def test_a_file_where_the_directory_goes_is_a_usage_error(
    run, pytester: pytest.Pytester, where: str
) -> None:
    pytester.makefile(".txt", traces="not a directory")
    args = ["--recompile-budget"]
    if where == "option":
        args.append("--recompile-trace=traces.txt")
        source = "--recompile-trace=traces.txt"
    else:
        pytester.makeini("[pytest]\nrecompile_trace = traces.txt\n")
        source = "ini option recompile_trace=traces.txt"
    result = run(OVER_AND_UNDER, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{PREFIX} {source}: *traces.txt is a file; expected a directory (created if missing)*"]
    )


def test_the_ini_twin_is_relative_to_the_rootdir(
    run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nrecompile_budget = 0\nrecompile_trace = kept\n")
    pytester.makepyfile(test_it="import torch\n" + OVER_AND_UNDER)
    elsewhere = pytester.mkdir("elsewhere")
    monkeypatch.chdir(elsewhere)
    result = pytester.runpytest(
        *inner_args(str(pytester.path), "-p", "no:randomly", "-p", "no:logging")
    )
    result.assert_outcomes(failed=1, passed=1)
    assert kept(pytester.path / "kept") == [folder_name("test_it.py::test_over")]
    assert not (elsewhere / "kept").exists()


def test_a_fixture_s_recompile_in_set_up_names_the_trace(run, pytester: pytest.Pytester) -> None:
    source = """
    @torch.compile(backend="eager")
    def k(x, n):
        return x * n

    @pytest.fixture
    def warmed():
        k(torch.ones(3), 1)
        k(torch.ones(3), 2)

    def test_uses(warmed):
        pass
    """
    result = run(source, "--recompile-budget", "--recompile-trace=traces")
    result.assert_outcomes(errors=1)
    shown = os.path.join("traces", folder_name("test_it.py::test_uses"))
    result.stdout.fnmatch_lines(["*ERROR at setup of test_uses*", trace_line(shown)])
    assert "dynamo_start" in (pytester.path / shown / TRACE_FILE).read_text()


@pytest.mark.xdist
def test_under_xdist_each_worker_keeps_its_own_tests_traces(pytester: pytest.Pytester) -> None:
    """Two workers, one failing test each side of a passing one: the folders are the same as
    in a serial run, and each failure names its own."""
    pytester.makepyfile(test_it="import pytest\nimport torch\n" + OVER_AND_UNDER + OWN_FAILURE)
    result = pytester.runpytest_subprocess(*inner_args(
        "-p", "xdist", "-n", "2", "-p", "no:randomly",
        "--recompile-budget", "--recompile-trace=traces",
    ))  # fmt: skip
    result.assert_outcomes(failed=2, passed=1)
    names = [folder_name(f"test_it.py::{test}") for test in ("test_over", "test_raises")]
    assert kept(pytester.path / "traces") == sorted(names)
    for name in names:
        assert (pytester.path / "traces" / name / TRACE_FILE).stat().st_size > 0
        result.stdout.fnmatch_lines([f"*trace: traces/{name}*"])
