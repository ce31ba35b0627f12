"""Large suites: shards that combine into one run's report, and a baseline no subset can
shrink (docs/shards.md). Real runs of a two-directory suite, split as CI splits it."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from snippets import inner_args, keeps_entries

from pytest_recompile.cli import main
from pytest_recompile.model.results import without_timings
from pytest_recompile.model.text import plural
from pytest_recompile.reports.baseline import PRUNE_HINT
from pytest_recompile.reports.json_report import NOT_A_REPORT, REPORT_VERSION

SUITE_A = """
import pytest
import torch

@torch.compile(backend="eager")
def fa(x, step):
    return x + step

@pytest.fixture(scope="module")
def warmed():
    fa(torch.ones(2), 0)
    return fa

def test_a_recompiles():
    fa(torch.ones(3), 0)
    fa(torch.ones(3), 1)

def test_a_clean(warmed):
    warmed(torch.ones(2), 0)

@pytest.mark.max_recompiles(1)
def test_a_marked(warmed):
    warmed(torch.ones(2, 2), 0)
"""

SUITE_B = """
import torch

@torch.compile(backend="eager")
def fb(x):
    return x * 2

def test_b_recompiles():
    fb(torch.ones(2))
    fb(torch.ones(2, dtype=torch.float64))

def test_b_clean():
    fb(torch.ones(4))

def test_b_grad():
    fb(torch.ones(5))
    with torch.no_grad():
        fb(torch.ones(5))
"""

# The figures these tests compare are those of a run whose isolation keeps the live module
# fixture's warm-up (torch 2.9 and newer). On 2.7 and 2.8 isolation is a full reset, so the
# fixture's own set-up is judged against what the tests before it compiled (docs/compatibility.md):
# the counts, and so one run's report against its shards', depend on the order.
ISOLATED_COUNTS = keeps_entries

GATE = ("--recompile-budget=0", "--recompile-mode=report-only", "-p", "no:randomly")

# Each split: the arguments of shard 1 and of shard 2 (every test in exactly one).
SPLITS = {
    "directory": (["a"], ["b"]),
    "-k": (["-k", "recompiles or marked"], ["-k", "not (recompiles or marked)"]),
    "pytest-split": (
        ["-p", "pytest_split.plugin", "--splits", "2", "--group", "1"],
        ["-p", "pytest_split.plugin", "--splits", "2", "--group", "2"],
    ),
}


@pytest.fixture
def suite(run: Any, pytester: pytest.Pytester) -> Any:
    """The two-directory suite, and a runner of it: each run in-process stands for a fresh
    process (torch's compile state reset before it)."""
    (pytester.path / "a").mkdir()
    (pytester.path / "b").mkdir()
    (pytester.path / "a" / "test_a.py").write_text(textwrap.dedent(SUITE_A))
    (pytester.path / "b" / "test_b.py").write_text(textwrap.dedent(SUITE_B))

    def run_(*args: str, fresh: bool = False) -> pytest.RunResult:
        if fresh:  # a process of its own, as a CI shard is
            return pytester.runpytest_subprocess(*inner_args(*args))
        import torch._dynamo

        torch._dynamo.reset()
        return pytester.runpytest(*inner_args(*args))

    return run_


def report(path: Path) -> dict[str, Any]:
    """A report as compared: without its time of writing and what timings and pids vary."""
    data = json.loads(path.read_text())
    data.pop("created")
    return without_timings(data)  # type: ignore[no-any-return]


_MEASURED = ("guard_latency_us", "guard_check_us")  # torch's estimate and the plugin's time


def untimed(value: Any) -> Any:
    """``value`` with every measured time 0: two runs' reports then render alike."""
    if isinstance(value, dict):
        return {
            k: 0 if k.endswith("seconds") or k in _MEASURED else untimed(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [untimed(item) for item in value]
    return value


def cli(*args: str) -> int:
    return main(list(args))


@ISOLATED_COUNTS
@pytest.mark.subprocess  # each shard and the whole run in a fresh process, as on CI machines
@pytest.mark.parametrize("split", list(SPLITS))
def test_shards_combine_into_the_one_run_report_and_baseline(
    suite: Any, pytester: pytest.Pytester, split: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if split == "pytest-split":
        pytest.importorskip("pytest_split")
    whole = suite(*GATE, "--recompile-report=full.json", fresh=True)
    whole.assert_outcomes(passed=6)
    first, second = SPLITS[split]
    one = suite(*first, *GATE, "--recompile-report=s1.json", fresh=True)
    two = suite(*second, *GATE, "--recompile-report=s2.json", fresh=True)
    ran = [r.parseoutcomes().get("passed", 0) for r in (one, two)]
    assert sum(ran) == 6, ran
    assert all(ran), ran  # two real shards, not one run and an empty one

    assert cli("combine", "-o", "all.json", "s1.json", "s2.json") == 0
    assert "2 reports, 6 tests -> all.json" in capsys.readouterr().out
    assert report(pytester.path / "all.json") == report(pytester.path / "full.json")

    assert cli("compare", "full.json", "all.json") == 0
    assert capsys.readouterr().out.endswith("verdict: no change\n")

    # Every output renders the combined report as the one run's (with the same timings).
    for name in ("all", "full"):
        timed = json.loads((pytester.path / f"{name}.json").read_text())
        (pytester.path / f"{name}-untimed.json").write_text(json.dumps(untimed(timed)))
    for fmt in ("text", "markdown", "github"):
        assert cli("report", "all-untimed.json", f"--format={fmt}") == 0  # report-only
        combined = capsys.readouterr().out
        assert cli("report", "full-untimed.json", f"--format={fmt}") == 0
        assert combined == capsys.readouterr().out, fmt
    # Several reports are combined in memory, as by combine.
    assert cli("report", "s1.json", "s2.json", "--durations=0") == 0
    assert "fa (a/test_a.py:5), in 2 tests, 1 fixture" in capsys.readouterr().out

    # The baseline taken from the shards' reports is the one-run update's.
    suite(*GATE, "--recompile-baseline-update", "--recompile-baseline=one.json", fresh=True)
    assert cli("baseline", "shards.json", "s1.json", "s2.json") == 0
    said = capsys.readouterr().out
    assert "baseline written to shards.json: 5 added, 0 replaced, 0 removed" in said
    one_run, shards = (
        json.loads((pytester.path / n).read_text()) for n in ("one.json", "shards.json")
    )
    assert shards["tests"] == one_run["tests"]
    assert shards["environment"] == one_run["environment"]


@ISOLATED_COUNTS
def test_a_subset_update_keeps_the_other_tests_entries(
    suite: Any, pytester: pytest.Pytester
) -> None:
    base = "--recompile-baseline=b.json"
    suite("-p", "no:randomly", "--recompile-baseline-update", base)
    before = json.loads((pytester.path / "b.json").read_text())["tests"]
    assert "b/test_b.py::test_b_recompiles" in before
    # The case: an update on one file leaves the other file's entries as they were.
    subset = suite("a", "-p", "no:randomly", "--recompile-baseline-update", base)
    subset.stdout.fnmatch_lines(
        [
            "baseline written to *b.json: 0 added, 2 replaced, 0 removed; kept 3 entries of "
            f"tests that did not run ({PRUNE_HINT})"
        ]
    )
    after = json.loads((pytester.path / "b.json").read_text())["tests"]
    assert {n: e for n, e in after.items() if n.startswith("b/")} == {
        n: e for n, e in before.items() if n.startswith("b/")
    }
    gate = suite("-p", "no:randomly", "--recompile-budget", base)
    gate.assert_outcomes(passed=6)

    # A fixed test loses its entry; a deleted test's goes with an explicit prune.
    fixed = textwrap.dedent(SUITE_B).replace(
        "    fb(torch.ones(2))\n    fb(torch.ones(2, dtype=torch.float64))",
        "    assert torch.ones(2).sum() == 2  # compiles nothing now",
    )
    assert "compiles nothing now" in fixed
    (pytester.path / "b" / "test_b.py").write_text(fixed)
    fixed = suite("b", "-p", "no:randomly", "--recompile-baseline-update", base)
    fixed.stdout.fnmatch_lines(["baseline written to *: 0 added, 2 replaced, 1 removed; kept 2 *"])
    (pytester.path / "a" / "test_a.py").unlink()
    kept = suite("-p", "no:randomly", "--recompile-baseline-update", base)
    kept.stdout.fnmatch_lines(["baseline written to *: 0 added, 2 replaced, 0 removed; kept 2 *"])
    pruned = suite(
        "-p", "no:randomly", "--recompile-baseline-update", "--recompile-baseline-prune", base
    )
    pruned.stdout.fnmatch_lines(
        ["baseline written to *: 0 added, 2 replaced, 0 removed; pruned 2 entries of tests *"]
    )
    assert sorted(json.loads((pytester.path / "b.json").read_text())["tests"]) == [
        "b/test_b.py::test_b_clean",
        "b/test_b.py::test_b_grad",
    ]


def test_prune_without_an_update_is_a_usage_error(suite: Any) -> None:
    result = suite("-p", "no:randomly", "--recompile-baseline-prune")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--recompile-baseline-prune drops entries while a baseline*"])


@pytest.fixture
def shards(suite: Any, pytester: pytest.Pytester) -> Path:
    """Two real shard reports of the suite (a/, b/) in the test's directory."""
    suite("a", *GATE, "--recompile-report=s1.json")
    suite("b", *GATE, "--recompile-report=s2.json")
    return pytester.path


def put(path: Path, text: str) -> str:
    path.write_text(text)
    return path.name


def edited(path: Path, change: Any, name: str) -> str:
    data = json.loads(path.read_text())
    change(data)
    (path.parent / name).write_text(json.dumps(data))
    return name


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    data[last] = value  # type: ignore[index]


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: "missing.json", "missing.json: no such file"),
        (lambda d: put(d / "e.json", ""), "e.json: empty file, not a report"),
        (lambda d: put(d / "n.json", "{}"), f"n.json: {NOT_A_REPORT}"),
        (
            lambda d: put(d / "l.json", "[]"),
            "l.json: not a pytest-recompile report",
        ),
        (
            lambda d: edited(d / "s2.json", lambda r: _set(r, "version", 2), "v.json"),
            f"v.json: report schema version 2 (a newer pytest-recompile wrote it); this "
            f"pytest-recompile reads version {REPORT_VERSION}",
        ),
        (
            lambda d: edited(d / "s2.json", lambda r: _set(r, "environment", "torch"), "x.json"),
            "x.json: does not fit the report schema: environment: expected object, got string",
        ),
        (
            lambda d: edited(d / "s2.json", lambda r: _set(r, "tests.0.functions", "f"), "f.json"),
            "f.json: does not fit the report schema: tests[0].functions: expected array, got "
            "string",
        ),
        (
            lambda d: edited(d / "s2.json", lambda r: r["tests"][0].pop("recompiles"), "r.json"),
            "r.json: does not fit the report schema: tests[0]: missing required field 'recompiles'",
        ),
        (
            lambda d: edited(
                d / "s2.json", lambda r: _set(r, "environment.torch", "2.99.0"), "t.json"
            ),
            "t.json ran on torch 2.99.0, s1.json on torch ",
        ),
        (
            lambda d: edited(
                d / "s2.json", lambda r: _set(r, "settings.mode", "fail-fast"), "m.json"
            ),
            "m.json ran with the gate option mode='fail-fast', s1.json with mode='report-only'",
        ),
        (
            lambda d: edited(
                d / "s1.json",
                lambda r: r["tests"][0].update(recompiles=r["tests"][0]["recompiles"] + 1),
                "twice.json",
            ),
            "test a/test_a.py::test_a_clean is in s1.json and in twice.json with other "
            "results (recompiles: 0 against 1, in that order)",
        ),
    ],
    ids=[
        "missing",
        "empty",
        "not-a-report",
        "a-list",
        "newer-version",
        "environment-string",
        "functions-string",
        "no-recompiles",
        "two-torches",
        "two-modes",
        "same-test-twice",
    ],
)
def test_combine_bad_input_is_one_line_and_exit_2(
    shards: Path, make: Any, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = make(shards)
    assert cli("combine", "-o", "out.json", "s1.json", name) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert captured.err.startswith("pytest-recompile combine: ")
    assert said in captured.err
    assert not (shards / "out.json").exists()


def test_a_rerun_of_a_failed_test_replaces_its_attempt(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented exception to "each test once": an earlier attempt that failed, and a
    later report (a CI retry, ``--lf``) with the test's new attempt."""

    def failed_earlier(data: dict[str, Any]) -> None:
        data["created"] = "2000-01-01T00:00:00+00:00"
        data["tests"][0]["outcome"] = "failed"
        data["tests"][0]["recompiles"] = 5

    edited(shards / "s1.json", failed_earlier, "first.json")
    assert cli("combine", "-o", "out.json", "first.json", "s1.json", "s2.json") == 0
    capsys.readouterr()
    assert cli("combine", "-o", "whole.json", "s1.json", "s2.json") == 0
    assert report(shards / "out.json") == report(shards / "whole.json")
    # The same test with the same results in two inputs (timings aside) is kept once.
    assert cli("combine", "-o", "twice.json", "s1.json", "s1.json", "s2.json") == 0
    assert report(shards / "twice.json") == report(shards / "whole.json")


def test_compare_takes_one_report_a_side(shards: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("compare", "s1.json", "s1.json", "s2.json") == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "combine each side's shards first" in err


def test_report_exits_1_where_a_test_broke_the_gate_or_a_shard_stopped(
    suite: Any, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite("a", "--recompile-budget=0", "-p", "no:randomly", "--recompile-report=s1.json")
    suite("b", "--recompile-budget=0", "-p", "no:randomly", "-x", "--recompile-report=s2.json")
    assert cli("combine", "-o", "all.json", "s1.json", "s2.json") == 0
    capsys.readouterr()
    assert cli("report", "all.json") == 1
    out = capsys.readouterr().out
    assert "a/test_a.py::test_a_recompiles: 1 recompile of fa" in out
    assert (
        "incomplete run: these figures cover only the tests that ran; stopped by: s2.json: " in out
    )


@ISOLATED_COUNTS
@pytest.mark.xdist
def test_xdist_across_gateways_gives_the_report_of_n_2(pytester: pytest.Pytester) -> None:
    """pytest-xdist's multi-host form (``--tx``), each ``--dist`` mode: the same report as
    ``-n 2`` (popen gateways stand for hosts: the same protocol, as xdist's docs say)."""
    (pytester.path / "a").mkdir()
    (pytester.path / "b").mkdir()
    (pytester.path / "a" / "test_a.py").write_text(textwrap.dedent(SUITE_A))
    (pytester.path / "b" / "test_b.py").write_text(textwrap.dedent(SUITE_B))
    common = ("-p", "xdist", *GATE)
    pytester.runpytest_subprocess(*inner_args(*common, "-n", "2", "--recompile-report=n2.json"))
    expected = report(pytester.path / "n2.json")
    assert len(expected["tests"]) == 6
    for dist in ("load", "loadscope", "loadgroup"):
        done = pytester.runpytest_subprocess(
            *inner_args(
                *common, "--tx", "2*popen", f"--dist={dist}", f"--recompile-report={dist}.json"
            )
        )
        done.assert_outcomes(passed=6)
        assert report(pytester.path / f"{dist}.json") == expected, dist


def test_combining_is_pure_python(shards: Path) -> None:
    """combine and report import neither torch nor pytest (a CI step of a fraction of a
    second), as compare does."""
    import subprocess

    code = (
        "import sys; from pytest_recompile.cli import main; "
        "main(['combine', '-o', 'all.json', 's1.json', 's2.json']); "
        "main(['report', 'all.json']); "
        "print(sorted({'torch', 'pytest', '_pytest'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=shards, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]"


@ISOLATED_COUNTS
def test_the_shards_page(
    request: pytest.FixtureRequest,
    run: Any,
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/shards.md: its commands, run as written on a suite of two directories, print what
    the page pastes, and the shards' baseline is the one-run update's."""
    from docblocks import assert_pasted, checked_blocks

    found = checked_blocks(request)
    shards, baseline = (b for b in found if b.lang == "shell")
    combined, subset = (b for b in found if b.lang == "text")
    for folder in ("models", "data"):
        (pytester.path / "tests" / folder).mkdir(parents=True)
    (pytester.path / "tests" / "models" / "test_a.py").write_text(textwrap.dedent(SUITE_A))
    (pytester.path / "tests" / "data" / "test_b.py").write_text(textwrap.dedent(SUITE_B))
    monkeypatch.chdir(pytester.path)

    def shell(command: str) -> str:
        """One of the page's commands, run here: pytest in-process as a fresh process, the
        console script through its main()."""
        words = command.split()
        if words[0] == "pytest":
            import torch._dynamo

            torch._dynamo.reset()
            return str(pytester.runpytest(*inner_args(*words[1:], "-p", "no:randomly")).stdout)
        assert words[0] == "pytest-recompile", command
        capsys.readouterr()  # what the pytest runs before it printed
        main(words[1:])
        return capsys.readouterr().out

    said = [shell(command) for command in shards.commands]
    assert_pasted(combined, said[2] + said[3])
    assert main(["report", "recompiles.json"]) == 1  # the gate's status: tests broke it
    capsys.readouterr()

    # The baseline: one update of the whole suite, then the page's shard recipe on top of it.
    shell("pytest --recompile-baseline-update --recompile-baseline=one.json")
    whole = json.loads((pytester.path / "one.json").read_text())
    shutil.copy(pytester.path / "one.json", pytester.path / "recompiles.baseline.json")
    said = [shell(command) for command in baseline.commands]
    assert_pasted(subset, said[0])  # an update on one directory keeps the other's entries
    assert "0 added, 5 replaced, 0 removed" in said[2]
    shard_made = json.loads((pytester.path / "recompiles.baseline.json").read_text())
    assert shard_made["tests"] == whole["tests"]


def test_the_readme_shards(request: pytest.FixtureRequest) -> None:
    """The README's shard commands are docs/shards.md's, which test_the_shards_page runs."""
    from docblocks import ROOT, blocks, checked_blocks

    (readme,) = checked_blocks(request)
    page = next(b for b in blocks(ROOT / "docs" / "shards.md") if b.lang == "shell")
    assert [c.split("  #")[0] for c in readme.commands] == page.commands


SKIPPING = """
import pytest
import torch

@torch.compile(backend="eager")
def g(x):
    return x + 1

def test_on_gpu_only():
    if not getattr(torch, "pretend_gpu", False):
        pytest.skip("no GPU here")
    g(torch.ones(2))
    g(torch.ones(2, 2))

@pytest.mark.skipif("not getattr(torch, 'pretend_gpu', False)")
def test_marked_gpu_only():
    g(torch.ones(3))
    g(torch.ones(3, 3))
"""


@ISOLATED_COUNTS
def test_an_update_keeps_the_entries_of_skipped_tests(
    suite: Any, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CPU lane updating the baseline keeps what the GPU lane recorded for its tests: a
    skipped test measured nothing."""
    (pytester.path / "b" / "test_gpu.py").write_text(textwrap.dedent(SKIPPING))
    conftest = "import torch\ntorch.pretend_gpu = True\n"
    (pytester.path / "conftest.py").write_text(conftest)  # the GPU lane
    suite("-p", "no:randomly", "--recompile-baseline-update", "--recompile-baseline=b.json")
    recorded = json.loads((pytester.path / "b.json").read_text())["tests"]
    assert {"b/test_gpu.py::test_on_gpu_only", "b/test_gpu.py::test_marked_gpu_only"} <= set(
        recorded
    )
    (pytester.path / "conftest.py").write_text(conftest.replace("True", "False"))  # CPU lane
    cpu = suite(
        "-p", "no:randomly", "--recompile-baseline-update", "--recompile-baseline=b.json",
        "--recompile-report=cpu.json",
    )  # fmt: skip
    cpu.assert_outcomes(passed=6, skipped=2)
    cpu.stdout.fnmatch_lines(["baseline written to *: 0 added, 5 replaced, 0 removed; kept 2 *"])
    assert json.loads((pytester.path / "b.json").read_text())["tests"] == recorded
    # The same from the lane's report: a skipped test is no reason to refuse.
    assert cli("baseline", "b.json", "cpu.json") == 0
    assert "0 added, 5 replaced, 0 removed; kept 2 entries" in capsys.readouterr().out


def checkout(at: Path) -> Path:
    """The two-directory suite checked out at ``at``, as a CI agent checks out a repository
    into a path of its own (a ``pytest.ini`` makes it the rootdir, as a project's does)."""
    for folder, suite_text in (("a", SUITE_A), ("b", SUITE_B)):
        (at / folder).mkdir(parents=True)
        (at / folder / f"test_{folder}.py").write_text(textwrap.dedent(suite_text))
    (at / "pytest.ini").write_text("[pytest]\n")
    return at


@ISOLATED_COUNTS
@pytest.mark.subprocess
@pytest.mark.xdist
def test_shards_from_three_checkout_paths_combine_into_the_whole_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Buildkite, Jenkins and GitLab agents each check out into a path of their own: three
    pytest-split shards from three paths, two of them under ``-n 2``, combine into the
    report of one run from a fourth path (function files and all), and render alike
    outside any checkout."""
    out = pytester.path
    paths = ["builds/agent-3/repo", "var/lib/jenkins/ws-7", "home/runner/work/repo"]
    for group, (path, workers) in enumerate(
        zip(paths, ([], ["-n", "2"], ["-n", "2"]), strict=True), 1
    ):
        monkeypatch.chdir(checkout(out / path))
        split = ("-p", "pytest_split.plugin", "--splits", "3", "--group", str(group))
        shard = pytester.runpytest_subprocess(
            *inner_args(
                "-p", "xdist", *workers, *split, *GATE, f"--recompile-report={out}/s{group}.json"
            )
        )
        assert shard.parseoutcomes()["passed"] == 2, shard.stdout.str()
    monkeypatch.chdir(checkout(out / "whole"))
    pytester.runpytest_subprocess(*inner_args(*GATE, f"--recompile-report={out}/full.json"))
    monkeypatch.chdir(out)  # the gate job: no checkout
    capsys.readouterr()  # what the runs printed

    assert cli("combine", "-o", "all.json", "s1.json", "s2.json", "s3.json") == 0
    assert capsys.readouterr().out == "pytest-recompile combine: 3 reports, 6 tests -> all.json\n"
    combined, whole = report(out / "all.json"), report(out / "full.json")
    assert combined == whole
    files = {fn["file"] for test in whole["tests"] for fn in test["functions"]}
    assert files == {"a/test_a.py", "b/test_b.py"}
    assert cli("compare", "full.json", "all.json") == 0
    assert capsys.readouterr().out.endswith("verdict: no change\n")
    for name in ("all", "full"):
        timed = json.loads((out / f"{name}.json").read_text())
        (out / f"{name}-untimed.json").write_text(json.dumps(untimed(timed)))
    for fmt in ("markdown", "text"):
        assert cli("report", "all-untimed.json", f"--format={fmt}") == 0
        shown = capsys.readouterr().out
        assert cli("report", "full-untimed.json", f"--format={fmt}") == 0
        assert shown == capsys.readouterr().out, fmt
        assert str(out) not in shown  # no absolute path of any checkout


@ISOLATED_COUNTS
@pytest.mark.subprocess
def test_shards_that_shuffle_apart_lose_tests_and_combine_names_them(
    suite: Any,
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    """pytest-randomly shuffles before pytest-split splits: with a seed of its own in each
    shard (here given, so that the loss is the same in every run of this test), the shards
    overlap and lose tests. combine names the tests lost and those run twice, and the
    combined report is not a clean pass. A shard that leaves the seed to chance is warned."""
    for group, seed in ((1, 4), (2, 1), (3, 1)):
        suite(
            "-p", "randomly", f"--randomly-seed={seed}", "-p", "pytest_split.plugin",
            "--splits", "3", "--group", str(group), "--recompile-budget=0",
            "--recompile-mode=report-only", f"--recompile-report=s{group}.json", fresh=True,
        )  # fmt: skip
    chance = suite(
        "-p", "randomly", "-p", "pytest_split.plugin", "--splits", "3", "--group", "1",
        "--recompile-budget=0", "--recompile-report=chance.json",
    )  # fmt: skip
    chance.stdout.fnmatch_lines(
        ["*RecompileSplitUnsafe: pytest-recompile: the tests are split into shards while *"]
    )
    capsys.readouterr()
    runs = [json.loads((pytester.path / f"s{g}.json").read_text()) for g in (1, 2, 3)]
    ran = [set(r["collection"]["selected"]) for r in runs]
    collected = ran[0] | set(runs[0]["collection"]["split_off"])
    lost, twice = (
        collected - set.union(*ran),
        {t for t in collected if sum(t in r for r in ran) > 1},
    )
    assert lost, ran  # these seeds do lose tests (else pick others)
    assert twice, ran

    assert cli("combine", "-o", "all.json", "s1.json", "s2.json", "s3.json") == 0
    said = capsys.readouterr().out.splitlines()
    assert said[1].startswith(f"pytest-recompile combine: {plural(len(twice), 'test')} ran in more")
    assert said[2].startswith(
        f"pytest-recompile combine: incomplete: {plural(len(lost), 'test')} collected ran in no "
        f"shard ({min(lost)}"
    )
    combined = json.loads((pytester.path / "all.json").read_text())
    assert combined["complete"] is False
    assert combined["collection"]["split_off"] == sorted(lost)
    assert cli("report", "all.json") == 1  # the gate: not a clean pass

    # docs/shards.md's two ways, each shard run as the page runs group 1: the same seed in
    # every shard, or no shuffling. One order, one split: nothing lost, nothing warned.
    from docblocks import checked_blocks

    (page,) = checked_blocks(request)
    for way, command in enumerate(page.commands):
        words = command.split()
        assert words[0] == "pytest", command
        for group in ("1", "2", "3"):
            args = [group if w == "1" and words[i - 1] == "--group" else w
                    for i, w in enumerate(words[1:], 1)]  # fmt: skip
            args = [a.replace("shard-1", f"way{way}-{group}") for a in args]
            shard = suite(*args, "-p", "pytest_split.plugin", *GATE[:2])
            assert shard.parseoutcomes()["passed"] == 2, shard.stdout.str()
            assert "RecompileSplitUnsafe" not in shard.stdout.str()
        capsys.readouterr()
        shards = [f"way{way}-{group}.json" for group in ("1", "2", "3")]
        assert cli("combine", "-o", f"way{way}.json", *shards) == 0
        said = capsys.readouterr().out
        assert said == f"pytest-recompile combine: 3 reports, 6 tests -> way{way}.json\n"


def test_combine_refuses_to_write_over_an_input(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (shards / "s1.json").read_text()
    assert cli("combine", "-o", "./s1.json", "s1.json", "s2.json") == 2
    err = capsys.readouterr().err
    assert err == (
        "pytest-recompile combine: -o ./s1.json is one of the inputs: combine would overwrite "
        "that shard's report; write the combined report to a file of its own\n"
    )
    assert (shards / "s1.json").read_text() == before


def test_shards_of_one_split_must_collect_the_same_tests(
    shards: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def split(selected: list[str], split_off: list[str]) -> Any:
        return lambda r: r.update(
            collection={"selected": selected, "split_off": split_off, "excluded": []}
        )

    edited(shards / "s1.json", split(["a/t.py::x"], ["a/t.py::y"]), "one.json")
    edited(shards / "s2.json", split(["a/t.py::y"], ["a/t.py::x", "a/t.py::z"]), "two.json")
    assert cli("combine", "-o", "out.json", "one.json", "two.json") == 2
    assert capsys.readouterr().err == (
        "pytest-recompile combine: two.json collected a/t.py::z, one.json did not: shards of "
        "one split collect the same tests (the same commit, paths and options); combine the "
        "shards of one split\n"
    )
