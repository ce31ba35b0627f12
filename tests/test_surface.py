"""The plugin's pytest surface: options, ini twins, markers, bad input, inertness."""

from __future__ import annotations

import textwrap
from glob import escape as esc

import pytest
from snippets import DOUBLE, HEADER, STEP, assert_marker_error, assert_totals, inner_args

from pytest_recompile.model.names import (
    ALLOW_RECOMPILES_FORM,
    EXPECT_GUARDS_FORM,
    FORBID_GUARDS_FORM,
    MAX_GRAPH_BREAKS_FORM,
    MAX_RECOMPILES_FORM,
    PREFIX,
)
from pytest_recompile.settings import BARE_FLAG_HINT

RECOMPILES = (
    DOUBLE
    + """
@pytest.mark.max_recompiles(0)
def test_marked():
    double(torch.ones(2)); double(torch.ones(3, 3))
"""
)


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*inner_args("--help"))
    result.stdout.fnmatch_lines(
        [
            "*torch.compile recompiles (pytest-recompile)*",
            "*--recompile-budget=[[]N[]]*",
            "*--recompile-mode=*",
            "*--recompile-keep-caches*",
            "*--recompile-fullgraph*",
            "*recompile_budget (*string)*",
            "*recompile_mode (string)*",
            "*recompile_keep_caches (bool)*",
            "*recompile_fullgraph (bool)*",
        ]
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--recompile-mode=at-end"], "--recompile-mode=at-end"),
        (
            ["--recompile-keep-caches", "--recompile-processes=off"],
            "--recompile-keep-caches, --recompile-processes=off",
        ),
        (["--recompile-if-disabled=warn"], "--recompile-if-disabled=warn"),
        (["--recompile-durations=3"], "--recompile-durations=3"),
        (["--recompile-trace=traces"], "--recompile-trace"),
    ],
)
def test_an_option_that_gates_nothing_alone_says_so(run, args: list[str], said: str) -> None:
    """Options that only change how gated tests run or show, in a run that gates none: said
    once, naming them and what gates; never silent, never an error."""
    result = run("def test_plain():\n    pass\n", *args)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            f"*RecompileOptionUnused: {PREFIX} no test of this run is gated, so {esc(said)}"
            " did nothing *--recompile-budget*"
        ]
    )
    gated = run("@pytest.mark.max_recompiles(0)\ndef test_plain():\n    pass\n", *args)
    assert "RecompileOptionUnused" not in gated.stdout.str()


def test_markers_are_documented_with_signatures(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*inner_args("--markers"))
    result.stdout.fnmatch_lines(
        [
            f"@pytest.mark.{esc(MAX_RECOMPILES_FORM)}: *",
            f"@pytest.mark.{esc(ALLOW_RECOMPILES_FORM)}: *",
            f"@pytest.mark.{esc(EXPECT_GUARDS_FORM)}: *",
            f"@pytest.mark.{esc(FORBID_GUARDS_FORM)}: *",
            "@pytest.mark.fullgraph: *",
            f"@pytest.mark.{esc(MAX_GRAPH_BREAKS_FORM)}: *",
        ]
    )


def test_strict_markers_accepts_ours(run) -> None:
    result = run(
        RECOMPILES.replace("max_recompiles(0)", "max_recompiles(1)")
        + "\n@pytest.mark.allow_recompiles\n@pytest.mark.expect_guards('ID_MATCH')\n"
        "@pytest.mark.forbid_guards('TYPE_MATCH')\n@pytest.mark.fullgraph\n"
        "@pytest.mark.max_graph_breaks(0)\ndef test_other():\n    pass\n",
        "--strict-markers",
    )
    result.assert_outcomes(passed=2)
    assert_totals(result, gated=2, recompiles=1)  # test_marked's, within its budget of 1


def test_disabled_with_p_no_recompile(run) -> None:
    result = run(RECOMPILES, "-p", "no:recompile")
    result.assert_outcomes(passed=1)
    assert PREFIX not in result.stdout.str()


def test_no_torch_import_without_flag_ini_or_marker(pytester: pytest.Pytester) -> None:
    """Nor any module of the plugin beyond its start-up's (every pytest run with the plugin
    installed loads those, benchmark 1), a conftest's ``pytestmark`` of another marker aside."""
    pytester.makeconftest("import pytest\n\npytestmark = [pytest.mark.slow]\n")
    pytester.makepyfile(
        """
        import sys

        def test_inert(pytestconfig):
            assert "torch" not in sys.modules
            assert pytestconfig.pluginmanager.has_plugin("recompile")
            assert not pytestconfig.pluginmanager.has_plugin("recompile-gate")
            loaded = sorted(m for m in sys.modules if m.startswith("pytest_recompile"))
            assert loaded == [
                "pytest_recompile",
                "pytest_recompile.model",
                "pytest_recompile.model.names",
                "pytest_recompile.plugin",
                "pytest_recompile.settings",
            ]
        """
    )
    result = pytester.runpytest_subprocess(*inner_args("-p", "no:randomly"))
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("max_recompiles(-1)", "budget must be a non-negative integer, got -1"),
        ("max_recompiles(1.5)", "got 1.5 (float)"),
        ("max_recompiles('2')", "got '2' (str)"),
        ("max_recompiles(True)", "got True (bool)"),
        ("max_recompiles(None)", "got None (NoneType)"),
        ("max_recompiles()", "expected exactly one budget, got 0 arguments"),
        ("max_recompiles(1, fn='f')", "unknown keyword 'fn'"),
        ("max_recompiles(1, function=2)", "function= must be a function name or qualname"),
        ("allow_recompiles(3)", "takes no positional arguments"),
        ("allow_recompiles(eager_fallback=1)", "eager_fallback must be True or False, got 1"),
        ("allow_recompiles(fallback=True)", "unknown keyword 'fallback'"),
    ],
)
def test_bad_marker_is_a_collection_error_naming_the_test(run, marker: str, message: str) -> None:
    result = run(f"@pytest.mark.{marker}\ndef test_bad():\n    pass\n")
    assert_marker_error(result, f"{PREFIX}*test_it.py::test_bad*{message}*")


def test_bad_marker_fails_collection_before_torch_is_imported(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish():\n"
        "    print('torch imported:', 'torch' in sys.modules)\n"
    )
    pytester.makepyfile(
        test_m="import pytest\n"
        "@pytest.mark.max_recompiles(-1)\n"
        "def test_bad():\n    pass\n"
        "def test_ok():\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "no:randomly", "-s", "--recompile-budget")
    )
    assert_marker_error(result, f"{PREFIX} @pytest.mark.max_recompiles on test_m.py::test_bad: *")
    result.stdout.fnmatch_lines(["torch imported: False"])
    assert "passed" not in result.stdout.str()  # nothing ran: the bar is red, not green


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "\u00b2"])
def test_bad_cli_budget(run, value: str) -> None:
    result = run("def test_x():\n    pass\n", f"--recompile-budget={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{PREFIX} --recompile-budget: expected a non-negative integer such as 0 or 3, got "
         f"'{value}'; {BARE_FLAG_HINT}"]
    )  # fmt: skip


STEPS = (
    STEP
    + """
def test_steps():
    global step
    for step in range(3):
        f(torch.ones(2))
"""
)


@pytest.mark.parametrize(
    ("args", "budget"),
    [
        (["--recompile-budget", "tests/"], 0),
        (["--recompile-budget", "."], 0),
        (["--recompile-budget", "tests/test_it.py::test_steps"], 0),
        (["--recompile-budget", "tests/test_it.py", "-k", "steps"], 0),
        (["--recompile-budget", "3", "tests/"], 3),
        (["tests", "--recompile-budget"], 0),
        (["--recompile-budget=2", "tests"], 2),
    ],
    ids=["dir", "dot", "nodeid", "file-then-k", "integer-then-dir", "paths-first", "equals"],
)
def test_a_bare_flag_before_paths_is_the_flag_then_the_paths(
    run, pytester: pytest.Pytester, args: list[str], budget: int
) -> None:
    """As after every other pytest flag: a word after a bare --recompile-budget that is not
    an integer is a test path; an integer is still the budget."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_it.py").write_text(HEADER + textwrap.dedent(STEPS))
    import torch._dynamo  # (the run fixture makes in-process runs safe for torch)

    torch._dynamo.reset()
    result = pytester.runpytest(*inner_args(*args, "-p", "no:randomly"))
    result.stdout.fnmatch_lines([f"recompile gate: active, default budget {budget} *"])
    if budget >= 2:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*1 recompile of f (EQUALS_MATCH*budget {budget} *"])


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("recompile_budget = -2", "ini option recompile_budget: expected a non-negative integer"),
        ("recompile_mode = sometimes", "ini option recompile_mode: expected one of fail-fast"),
        (
            "recompile_processes = maybe",
            "ini option recompile_processes: expected one of on, off, got 'maybe'",
        ),
    ],
)
def test_bad_ini_values(run, pytester: pytest.Pytester, ini: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    result = run("def test_x():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{PREFIX} {message}*"])


@pytest.mark.parametrize("value", ["1", '"1"'])
def test_budget_in_pytest9s_native_toml_table(run, pytester: pytest.Pytester, value: str) -> None:
    """``recompile_budget = 1`` (an int) where pytest reads ``[tool.pytest]`` natively."""
    if pytest.version_tuple < (9,):
        pytest.skip("pytest 8 reads no [tool.pytest] table")
    if pytest.version_tuple < (9, 2) and value == "1":
        pytester.makepyprojecttoml(f"[tool.pytest]\nrecompile_budget = {value}\n")
        result = run("def test_x():\n    pass\n")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(['*write recompile_budget = "1", or use pytest 9.2 or newer*'])
        return
    pytester.makepyprojecttoml(f"[tool.pytest]\nrecompile_budget = {value}\n")
    result = run(RECOMPILES.replace("@pytest.mark.max_recompiles(0)\n", ""))
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=1)  # within the ini's budget of 1
    result.stdout.fnmatch_lines(["*default budget 1 (recompile_budget=1 (ini))*"])


def test_a_conftests_pytestmark_warns_once_naming_the_file(pytester: pytest.Pytester) -> None:
    """pytest never applies ``pytestmark`` in a conftest.py: a marker of ours there would
    gate nothing, silently."""
    pytester.makepyfile(
        **{
            "gated/conftest.py": "import pytest\n\n"
            "pytestmark = [pytest.mark.max_recompiles(0), pytest.mark.usefixtures('tmp_path')]\n",
            "gated/test_a.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
            "conftest.py": "import pytest\n\npytestmark = pytest.mark.skip\n",
        }
    )
    result = pytester.runpytest(
        *inner_args("-p", "no:randomly", "-W", "error", "-m", "not nothing")
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*gated/conftest.py:3: RecompileMarkerIgnored: pytest-recompile: pytestmark in "
            "gated/conftest.py carries @pytest.mark.max_recompiles, which pytest never applies*"
        ]
    )
    assert result.stdout.str().count("RecompileMarkerIgnored") == 1
    assert "import torch" not in result.stdout.str()


def test_bad_cli_mode(run) -> None:
    result = run("def test_x():\n    pass\n", "--recompile-mode=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--recompile-mode: invalid choice: 'sometimes'*"])


def test_ini_mode_and_cli_override(run, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrecompile_budget = 0\nrecompile_mode = report-only\n")
    run(RECOMPILES.replace("@pytest.mark.max_recompiles(0)\n", "")).assert_outcomes(passed=1)
    override = pytester.runpytest(*inner_args("--recompile-mode=fail-fast", "-p", "no:randomly"))
    override.assert_outcomes(failed=1)


def test_globals_are_restored_after_each_gated_test(run) -> None:
    result = run(
        """
import torch_state

def test_gated_and_failing():
    assert torch_state.installed_hooks() == 1
    assert torch_state.metrics_capacity() == 64  # raised at the test's first compile, not before
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    assert torch_state.metrics_capacity() > 64
    raise RuntimeError("boom")

@pytest.mark.allow_recompiles
def test_sees_clean_state():
    assert torch_state.installed_hooks() == 1  # the session's one hook, nothing per test
    assert torch_state.metrics_capacity() == 64
""",
        "--recompile-budget",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: boom*"])


def test_header_only_when_the_gate_is_on(run) -> None:
    result = run("def test_x():\n    pass\n")
    assert "recompile gate" not in result.stdout.str()


@pytest.mark.xdist
def test_n_2_then_a_bare_flag_then_a_path(pytester: pytest.Pytester) -> None:
    """The form the issue's new user typed: ``pytest -n 2 --recompile-budget .``."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_it.py").write_text(HEADER + textwrap.dedent(STEPS))
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "--recompile-budget", ".", "-p", "no:randomly")
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 recompile of f (EQUALS_MATCH*budget 0 (--recompile-budget=0)"])


def test_a_bare_flag_before_a_directory_loads_its_conftest_first(run, pytester) -> None:
    """pytest loads the conftests of the paths given before it parses the rest: a path after
    a bare flag is one of them (its conftest's options are known)."""
    sub = pytester.mkdir("sub")
    (sub / "conftest.py").write_text(
        "def pytest_addoption(parser):\n    parser.addoption('--myopt')\n"
    )
    (sub / "test_it.py").write_text(
        "def test_x(request):\n    assert request.config.getoption('myopt') == '1'\n"
    )
    import torch._dynamo

    torch._dynamo.reset()
    result = pytester.runpytest(
        *inner_args("--recompile-budget", "sub", "--myopt=1", "-p", "no:randomly")
    )
    result.assert_outcomes(passed=1)
