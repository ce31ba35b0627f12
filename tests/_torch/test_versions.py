"""The feature probes (pytest_recompile._torch.versions), each faced with a torch that lacks
what it looks for: the real torch with that one API taken away for the run. A missing API the
gate needs is a usage error at start; a missing optional one degrades its feature, told once
in the summary; a torch newer than tested is accepted, with one header line."""

from __future__ import annotations

import contextlib
import re
import sys
from glob import escape as esc

import pytest
import torch._C._dynamo.eval_frame as eval_frame
import torch._dynamo
import torch._dynamo.cache_size as cache_size
import torch._dynamo.callback as callback
import torch._dynamo.utils as dynamo_utils
from snippets import STEP, inner_args, keeps_entries, read_json

from pytest_recompile._torch import versions
from pytest_recompile.isolation.reuse import NO_REUSE
from pytest_recompile.model.names import PREFIX
from pytest_recompile.reports.terminal import RESET_FALLBACK

BREAKS = """
@torch.compile(backend="eager")
def broken(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2

@pytest.mark.fullgraph
def test_break():
    broken(torch.ones(2))
"""

RECOMPILES = (
    STEP
    + """
@pytest.mark.max_recompiles(0)
def test_step():
    global step
    f(torch.ones(2))
    step = 1
    f(torch.ones(2))
"""
)


pytestmark = pytest.mark.usefixtures("probes_decided_afresh")


def degraded(result: pytest.RunResult, feature: str = "") -> list[str]:
    """The summary's degraded lines (of one feature)."""
    return [line for line in result.outlines if line.startswith(f"degraded: {feature}")]


def test_this_torch_lacks_nothing(run) -> None:
    result = run("def test_x():\n    pass\n", "--recompile-budget")
    result.assert_outcomes(passed=1)
    assert degraded(result) == versions.degraded_lines()
    if versions.can_error_on_graph_break():  # 2.9+ has every optional API
        assert degraded(result) == []
    assert "newer than the newest release tested" not in result.stdout.str()


def test_missing_api_the_gate_needs_is_a_usage_error(run, monkeypatch) -> None:
    monkeypatch.delattr(cache_size, "is_recompilation")
    result = run("def test_x():\n    pass\n", "--recompile-budget")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.parseoutcomes() == {}  # stopped before the first test ran
    result.stdout.fnmatch_lines(
        [f"*{PREFIX} torch * lacks what the gate reads: cache_size.is_recompilation.*"]
    )


def test_without_the_hook_list_the_limit_check_is_wrapped(run, monkeypatch) -> None:
    monkeypatch.delattr(dynamo_utils, versions.HOOK_LIST, raising=False)  # none before 2.9
    assert not versions.has_hook_list()
    result = run(RECOMPILES, "--recompile-budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [esc(f"{PREFIX} 1 recompile of f (EQUALS_MATCH: G['step'] == 0)") + "*"]
    )
    assert degraded(result) == versions.degraded_lines()  # a way around, not a loss


def test_without_single_entry_keeping_isolation_resets(run, monkeypatch) -> None:
    monkeypatch.delattr(eval_frame, "_load_precompile_entry", raising=False)  # none before 2.9
    assert not versions.can_keep_entries()
    result = run(RECOMPILES, "--recompile-budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"isolation: {RESET_FALLBACK}"])


def test_without_fullgraph_blocks_breaks_are_judged_at_the_end(run, monkeypatch) -> None:
    monkeypatch.delattr(torch._dynamo, "error_on_graph_break", raising=False)  # none before 2.9
    result = run(BREAKS, "--recompile-budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fullgraph*graph break*"])
    said = dict(versions.DEGRADED)[versions.can_error_on_graph_break]
    assert degraded(result, "fullgraph") == [f"degraded: {said}"]
    assert said.endswith("fullgraph rules are judged when each test ends")


def test_without_graph_break_records_breaks_go_unreported(run, monkeypatch) -> None:
    monkeypatch.delattr(dynamo_utils, "graph_break_reasons")
    source = BREAKS.replace("fullgraph", "max_graph_breaks(0)")
    result = run(source, "--recompile-budget")
    result.assert_outcomes(passed=1)  # no break is seen, so none is judged
    [line] = degraded(result, "graph breaks")
    assert line.startswith("degraded: graph breaks: this torch keeps no list of them")


@pytest.mark.parametrize("missing", ["callback_handler", "CallbackTrigger"])
def test_without_compile_callbacks_recordings_go_uncounted(run, monkeypatch, missing) -> None:
    # No callbacks at all, or callbacks that do not say why they run (torch 2.7).
    if missing == "callback_handler":
        monkeypatch.setattr(callback, "callback_handler", object())
    else:
        monkeypatch.delattr(callback, "CallbackTrigger", raising=False)
    result = run(RECOMPILES, "--recompile-budget")
    result.assert_outcomes(failed=1)
    [line] = degraded(result, "CUDA graphs")
    assert line.startswith("degraded: CUDA graphs: this torch's compile callbacks do not say")


def test_without_compile_metrics_seconds_read_zero(run, monkeypatch) -> None:
    monkeypatch.delattr(dynamo_utils, "set_compilation_metrics_limit")
    result = run(RECOMPILES, "--recompile-budget", "--recompile-report=r.json")
    result.assert_outcomes(failed=1)
    [line] = degraded(result, "compile seconds")
    assert line.startswith("degraded: compile seconds: this torch has no compile metrics")


@pytest.mark.xdist
def test_each_degraded_line_is_told_once_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import torch._dynamo\n"
        "if hasattr(torch._dynamo, 'error_on_graph_break'):  # a torch without fullgraph blocks\n"
        "    del torch._dynamo.error_on_graph_break\n"
    )
    pytester.makepyfile(test_it="import pytest, torch\n" + STEP + BREAKS)
    pytester.makepyfile(
        test_more="import pytest\n@pytest.mark.max_recompiles(0)\ndef test_y():\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "--recompile-budget", "-p", "no:randomly")
    )
    result.assert_outcomes(failed=1, passed=1)
    assert len(degraded(result, "fullgraph")) == 1


@pytest.mark.xdist
def test_missing_api_under_xdist_is_named_without_a_crash(pytester: pytest.Pytester) -> None:
    # pytest.exit in an xdist worker would crash the controller: each gated test errors instead.
    pytester.makeconftest("import torch._dynamo.cache_size as c\ndel c.is_recompilation\n")
    pytester.makepyfile(test_it="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(
        *inner_args("-p", "xdist", "-n", "2", "--recompile-budget", "-p", "no:randomly")
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{PREFIX} torch * lacks what the gate reads*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("version", "told"),
    [("2.15.0", False), ("2.15.0+cu132", False), ("2.16.0", True), ("3.0.0.dev20261201", True)],
)
def test_a_torch_newer_than_tested_is_named_in_the_header(run, monkeypatch, version, told) -> None:
    monkeypatch.setattr(versions, "torch_version", lambda: version)
    result = run("def test_x():\n    pass\n", "--recompile-budget")
    result.assert_outcomes(passed=1)
    line = (
        f"recompile gate: torch {version} is newer than the newest release tested "
        f"({versions.NEWEST_TESTED_TEXT}); features this torch lacks are named in the summary"
    )
    assert (line in result.outlines) is told


def test_the_newest_tested_release_is_what_ci_runs() -> None:
    """NEWEST_TESTED follows .ci/run's newest-torch lane, so the header line stays honest."""
    ci = (sys.modules["snippets"].__file__ or "").rsplit("tests", 1)[0] + ".ci/run"
    with open(ci) as script:
        newest = next(line for line in script if line.startswith("NEWEST_TORCH="))
    assert versions.version_tuple(newest.split("=", 1)[1].strip()) == versions.NEWEST_TESTED


REUSED = """
@torch.compile(backend="eager")
def shared(x):
    return x * 2

def test_a():
    shared(torch.ones(2))

def test_b():
    shared(torch.ones(2))
"""


@keeps_entries  # reuse is offered beside kept entries: 2.9+
def test_without_what_reuse_needs_each_test_compiles_afresh(run, monkeypatch) -> None:
    from torch.utils._config_module import ConfigModule

    monkeypatch.delattr(ConfigModule, "get_hash")  # torch's eager backend never asks for it
    assert versions.can_keep_entries()
    assert not versions.can_reuse_compiles()
    result = run(REUSED, "--recompile-budget", "--recompile-report=r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    said = dict(versions.DEGRADED)[versions.reuses_where_it_keeps]
    assert degraded(result, "reuse") == [f"degraded: {said}"]
    report = read_json("r.json")
    assert report["summary"]["reused"] == 0
    [function] = report["tests"][1]["functions"]
    assert function["again_reasons"] == [NO_REUSE]  # test_b compiled again what test_a did


@keeps_entries  # re-installing entries at all: 2.9+
def test_a_newer_torch_files_re_installed_entries_by_region(monkeypatch) -> None:
    """torch's nightly takes the isolation region as a fourth argument: the probe reads the
    signature (not the name, which both have) and each entry goes in with its own region."""
    from pytest_recompile._torch import entries

    real = eval_frame._load_precompile_entry
    regions: list[int] = []

    def load(code, guard_manager, dynamo_code, region):  # type: ignore[no-untyped-def]
        regions.append(region)
        real(code, guard_manager, dynamo_code)

    load.__doc__ = (
        "_load_precompile_entry(arg0: object, arg1: object, arg2: object, arg3: int) -> None\n"
    )
    assert not versions.precompile_entry_takes_region()  # this torch: three arguments
    versions.precompile_entry_takes_region.cache_clear()
    monkeypatch.setattr(eval_frame, "_load_precompile_entry", load)
    assert versions.precompile_entry_takes_region()

    def shift(x):
        return x - 2

    plain = torch.compile(shift, backend="eager")
    plain(torch.ones(2))
    with contextlib.suppress(TypeError):  # a torch without isolate_recompiles (before 2.13)
        torch.compile(shift, backend="eager", isolate_recompiles=True)(torch.ones(3))
    found = entries.entries(shift.__code__)
    entries.keep_only(shift.__code__, found)
    try:
        assert regions == [-1 if e.region is None else e.region for e in found]
        graphs = dynamo_utils.counters["stats"]["unique_graphs"]
        plain(torch.ones(2))  # answered by its kept entry, from its own region
        assert dynamo_utils.counters["stats"]["unique_graphs"] == graphs
    finally:
        entries.drop_all(shift.__code__)


@pytest.mark.parametrize(
    ("text", "build"),
    [
        ("cuda: Optional[str] = None\nhip: Optional[str] = None\nxpu: Optional[str] = None", "cpu"),
        ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None", "cuda 12.8"),
        ("cuda = None\nhip = '6.2.41133-dd7f95766'", "rocm 6.2.41133-dd7f95766"),
        ("debug = False\n", "cpu"),
    ],
)
def test_the_build_is_read_from_torch_version_py(text: str, build: str) -> None:
    assert versions.built_for(text) == build


def test_the_installed_build_is_this_processs_torch() -> None:
    import torch

    expected = f"cuda {torch.version.cuda}" if torch.version.cuda else "cpu"
    assert versions.torch_build() == expected


def test_the_epilogue_guard_signature_is_probed_from_its_docstring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2.9's ``add_epilogue_lambda_guard`` takes no user stack; kept entries' backend guard is
    added with the arguments this torch's signature names."""
    import torch._C._dynamo.guards as guards

    assert versions.epilogue_guard_arguments() in (2, 3)

    class Older:
        def add_epilogue_lambda_guard(self, *args: object) -> None:
            """add_epilogue_lambda_guard(self: torch._C._dynamo.guards.RootGuardManager, arg0:
            object, arg1: object) -> None"""

    monkeypatch.setattr(guards, "RootGuardManager", Older)
    versions.epilogue_guard_arguments.cache_clear()
    try:
        assert versions.epilogue_guard_arguments() == 2
    finally:
        monkeypatch.undo()
        versions.epilogue_guard_arguments.cache_clear()


# Releases just below and at the floor, read from the package (never hard-coded here).
MAJOR, MINOR = versions.MIN_TORCH
BELOW = f"{MAJOR}.{MINOR - 1}.1"
FLOOR = f"{MAJOR}.{MINOR}.0"


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, "torch is not installed"),
        (
            BELOW,
            f"torch {BELOW} is too old for the recompile gate; it needs torch >= "
            f"{versions.MIN_TORCH_TEXT}",
        ),
        (f"{BELOW}+cu126", f"torch {BELOW}+cu126 is too old"),
    ],
)
def test_check_version_refuses_missing_or_old_torch(monkeypatch, version, message) -> None:
    monkeypatch.setattr(versions, "torch_version", lambda: version)
    with pytest.raises(versions.TorchUnsupported, match=re.escape(message)):
        versions.check_version()


@pytest.mark.parametrize("version", [FLOOR, f"{FLOOR}+cpu", "2.14.1", "3.0.0a0"])
def test_check_version_accepts_supported(monkeypatch, version) -> None:
    monkeypatch.setattr(versions, "torch_version", lambda: version)
    assert versions.check_version() == version


def test_installed_torch_has_what_the_gate_reads() -> None:
    assert versions.check_torch().startswith(torch.__version__.split("+")[0])


@pytest.mark.parametrize(
    "how",
    [["--recompile-budget"], [], ["--recompile-budget", "-p", "xdist", "-n", "2"]],
    ids=["flag", "markers", "xdist-controller"],  # the controller says so before any worker
)
def test_old_torch_with_the_gate_is_an_early_usage_error(run, monkeypatch, how) -> None:
    monkeypatch.setattr(versions, "torch_version", lambda: BELOW)  # the in-process run sees it
    source = "def test_x():\n    pass\n"
    if not how:
        source = "@pytest.mark.max_recompiles(0)\n" + source
    result = run(source, *how)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{PREFIX} torch {BELOW} is too old for the recompile gate*"])


def test_old_torch_without_the_gate_stays_inert(run, monkeypatch) -> None:
    monkeypatch.setattr(versions, "torch_version", lambda: BELOW)
    run("def test_x():\n    pass\n").assert_outcomes(passed=1)
