"""Child processes and ranks: real processes, real torch.distributed (gloo on CPU).

Every inner run is a separate pytest process (``runpytest_subprocess``), as a user's is:
the children it starts inherit the session's environment contract from it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from snippets import GLOO_RANK_KILLED, inner_args, outcomes, read_json

from pytest_recompile.children import board
from pytest_recompile.children import parent as processes
from pytest_recompile.model import messages
from pytest_recompile.model.messages import DIVERGE, EAGER_FALLBACK
from pytest_recompile.model.names import SPOOL_ENV, SPOOL_OWNER
from pytest_recompile.reports.json_report import SCHEMA_FILE

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(sys.platform == "win32", reason="fork and gloo set-up"),
]

DDP = """
import os, socket
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.layer(x)


def _train(rank, world, port, batches):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        # compiled inside DDP: torch 2.7 graph-breaks in DDP's forward before the input
        model = torch.nn.parallel.DistributedDataParallel(torch.compile(Net(), backend="eager"))
        for n in batches[rank]:
            model(torch.randn(n, 4)).sum().backward()
        # Both ranks done before either tears its group down: on a loaded machine a rank
        # still finishing its last allreduce when the other exits can abort inside gloo.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_rank1_batch_differs():
    mp.spawn(_train, args=(2, _port(), {0: [8, 8], 1: [8, 6]}), nprocs=2)


def test_equal_batches():
    mp.spawn(_train, args=(2, _port(), {0: [8, 8], 1: [8, 8]}), nprocs=2)


@pytest.mark.max_recompiles(1)
@pytest.mark.same_compiles_across_ranks
def test_ranks_must_agree():
    mp.spawn(_train, args=(2, _port(), {0: [8, 8], 1: [8, 6]}), nprocs=2)
"""


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_it=textwrap.dedent(source))
    return pytester.runpytest_subprocess(
        *inner_args(
            "-v", "-p", "no:randomly", "-p", "no:cacheprovider", "--recompile-report=r.json", *args
        )
    )


def _validate(document: dict[str, object]) -> None:
    import jsonschema

    with open(SCHEMA_FILE) as f:
        jsonschema.validate(document, json.load(f))


def _tests(pytester: pytest.Pytester) -> dict[str, dict]:
    document = read_json(str(pytester.path / "r.json"))
    _validate(document)
    return {t["nodeid"].split("::")[-1]: t for t in document["tests"]}


@GLOO_RANK_KILLED
def test_ddp_over_gloo_one_rank_recompiles(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        DDP,
        "--recompile-budget=0",
        "--junitxml=j.xml",
        "--recompile-report-md=s.md",
        "--recompile-github=on",
    )
    assert outcomes(result) == {
        "test_rank1_batch_differs": "failed",
        "test_equal_batches": "passed",
        "test_ranks_must_agree": "failed",
    }, result.stdout.str()
    text = result.stdout.str()
    assert re.search(
        r"pytest-recompile: rank 1 \(pid \d+\): 1 recompile of Net\.forward "
        r"\(TENSOR_MATCH\(size\): tensor 'x' size mismatch at index 0\. expected 8, "
        r"actual 6\), budget 0 \(--recompile-budget=0\)",
        text,
    ), text
    assert (
        f"{DIVERGE}: rank 0 did not, rank 1 recompiled `Net.forward` once (TENSOR_MATCH(size))"
    ) in text
    assert "the test itself raised ProcessRaisedException" in text
    tests = _tests(pytester)
    differs = tests["test_rank1_batch_differs"]
    assert [(p["rank"], p["recompiles"], p["complete"]) for p in differs["processes"]] == [
        (0, 0, True),
        (1, 1, True),
    ]
    assert differs["recompiles"] == 0  # the test's own process
    assert differs["processes"][1]["stopped"] is True
    assert differs["divergence"].startswith(f"{DIVERGE}: rank 0 did not, rank 1")
    assert [v["kind"] for v in differs["violations"]] == ["total"]
    assert differs["violations"][0]["message"].startswith("rank 1 (pid ")
    equal = tests["test_equal_batches"]
    assert [(p["rank"], p["recompiles"], p["ended"]) for p in equal["processes"]] == [
        (0, 0, "exited"),
        (1, 0, "exited"),
    ]
    assert all(p["functions"][0]["compiles"] == 1 for p in equal["processes"])
    assert equal["divergence"] is None
    agree = tests["test_ranks_must_agree"]  # budget 1 holds on each rank; divergence fails
    assert [v["kind"] for v in agree["violations"]] == ["divergence"]
    assert DIVERGE in agree["violations"][0]["message"]
    # JUnit, GitHub annotations (at the child's function) and Markdown carry the children
    junit = (pytester.path / "j.xml").read_text()
    assert re.search(
        r'name="recompile_processes" value="rank 0 \(pid \d+\): 0; rank 1 \(pid \d+\): 1"', junit
    ), junit
    assert re.search(
        r"::error file=test_it\.py,line=\d+,title=.*1 recompile of "
        r"Net\.forward in rank 1 \(pid \d+\)",
        text,
    ), text
    markdown = (pytester.path / "s.md").read_text()
    assert re.search(r"`Net\.forward` in rank 1 \(pid \d+\)", markdown)


@GLOO_RANK_KILLED
def test_ddp_under_xdist_and_off(pytester: pytest.Pytester) -> None:
    """Each xdist worker's children report to that worker; off: today's behaviour."""
    result = _run(pytester, DDP, "--recompile-budget=0", "-p", "xdist", "-n", "2")
    assert outcomes(result) == {
        "test_rank1_batch_differs": "failed",
        "test_equal_batches": "passed",
        "test_ranks_must_agree": "failed",
    }, result.stdout.str()
    result.stdout.re_match_lines([r".*rank 1 \(pid \d+\): 1 recompile of Net\.forward.*"])
    assert len(_tests(pytester)["test_equal_batches"]["processes"]) == 2
    off = _run(pytester, DDP, "--recompile-budget=0", "--recompile-processes=off")
    assert outcomes(off) == {
        "test_rank1_batch_differs": "passed",
        "test_equal_batches": "passed",
        "test_ranks_must_agree": "passed",
    }, off.stdout.str()
    assert all(not t["processes"] for t in _tests(pytester).values())
    off.stdout.fnmatch_lines(["*child processes not gated*"])


MULTIPROCESS_TESTCASE = """
import torch
from torch.testing._internal.common_distributed import MultiProcessTestCase


def scale(x):
    return x * 2


class Ranks(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @property
    def world_size(self):
        return 2

    def test_compiled(self):
        f = torch.compile(scale, backend="eager")
        f(torch.ones(4))
        f(torch.ones(4 + self.rank))
"""


def test_multiprocess_testcase(pytester: pytest.Pytester) -> None:
    result = _run(pytester, MULTIPROCESS_TESTCASE, "--recompile-budget=0")
    assert outcomes(result) == {"Ranks::test_compiled": "failed"}, result.stdout.str()
    result.stdout.re_match_lines(
        [r"pytest-recompile: pid \d+ \(process 1\): 1 recompile of scale \(TENSOR_MATCH\(size\).*"]
    )
    (test,) = _tests(pytester).values()
    assert sorted(p["recompiles"] for p in test["processes"]) == [0, 1]


TORCHRUN = """
import subprocess, sys, textwrap

SCRIPT = textwrap.dedent('''
    import os, torch

    @torch.compile(backend="eager")
    def f(x):
        return x + 1

    f(torch.ones(3))
    f(torch.ones(3 + int(os.environ["RANK"])))
''')


def test_torchrun(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         str(script)],
        check=True, capture_output=True,
    )
"""


def test_torchrun_ranks(pytester: pytest.Pytester) -> None:
    result = _run(pytester, TORCHRUN, "--recompile-budget=0")
    assert outcomes(result) == {"test_torchrun": "failed"}, result.stdout.str()
    result.stdout.re_match_lines(
        [r"pytest-recompile: rank 1 \(pid \d+\): 1 recompile of f \(TENSOR_MATCH\(size\).*"]
    )
    result.stdout.fnmatch_lines(["*the test itself raised CalledProcessError*"])
    (test,) = _tests(pytester).values()
    assert [(p["rank"], p["recompiles"]) for p in test["processes"]] == [(0, 0), (1, 1)]
    assert "rank 1 recompiled `f` once" in test["divergence"]


CHILDREN = """
import multiprocessing, os, signal, subprocess, sys, textwrap
import pytest
import torch

TWO_SHAPES = textwrap.dedent('''
    import torch

    @torch.compile(backend="eager")
    def g(x):
        return x - 1

    g(torch.ones(2))
    g(torch.ones(3))
''')


@torch.compile(backend="eager")
def f(x):
    return x * 2


def work(n):
    return f(torch.ones(n)).sum().item()


def test_subprocess_child():
    subprocess.run([sys.executable, "-c", TWO_SHAPES], check=True, capture_output=True)


@pytest.mark.max_recompiles(0, function="g")
def test_function_budget_in_child():
    subprocess.run([sys.executable, "-c", TWO_SHAPES], check=True, capture_output=True)


@pytest.mark.max_recompiles(5)
@pytest.mark.expect_guards("EQUALS_MATCH")
def test_expect_guards_in_child():
    subprocess.run([sys.executable, "-c", TWO_SHAPES], check=True, capture_output=True)


@pytest.mark.max_recompiles(2)
def test_fork_pool_within_budget():
    f(torch.ones(3))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(work, [4, 5]) == [8.0, 10.0]


def test_fork_pool_over_budget():
    f(torch.ones(3))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(work, [4, 5]) == [8.0, 10.0]


def killed(n):
    f(torch.ones(n))
    f(torch.ones(n + 1))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.max_recompiles(3)
def test_child_killed_after_its_recompile():
    child = multiprocessing.get_context("spawn").Process(target=killed, args=(2,))
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL


def test_child_without_torch():
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(sorted(m for m in sys.modules "
         "if m.startswith(('torch', 'pytest_recompile'))))"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert out.strip() == "[]"
"""


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_children_of_every_kind(pytester: pytest.Pytester, workers: list[str]) -> None:
    result = _run(pytester, CHILDREN, "--recompile-budget=0", "-p", "no:faulthandler", *workers)
    assert outcomes(result) == {
        "test_subprocess_child": "failed",
        "test_function_budget_in_child": "failed",
        "test_expect_guards_in_child": "failed",
        "test_fork_pool_within_budget": "passed",
        "test_fork_pool_over_budget": "failed",
        "test_child_killed_after_its_recompile": "passed",
        "test_child_without_torch": "passed",
    }, result.stdout.str()
    text = result.stdout.str()
    assert re.search(
        r"pid \d+ \(python -c\): 1 recompile of g \(TENSOR_MATCH\(size\): tensor 'x' size "
        r"mismatch at index 0\. expected 2, actual 3\), budget 0 \(--recompile-budget=0\)",
        text,
    ), text
    assert re.search(r"pid \d+ \(python -c\): 'g' recompiled 1 time \(TENSOR_MATCH", text), text
    assert re.search(r"pid \d+ \(python -c\): 'g' recompiled because of TENSOR_MATCH, not a", text)
    assert re.search(r"pid \d+ \(ForkPoolWorker-\d+\): 2 recompiles of f", text), text
    tests = _tests(pytester)
    # function= names a function only the child compiled: not an unknown function
    assert [v["kind"] for v in tests["test_function_budget_in_child"]["violations"]] == ["function"]
    (worker,) = tests["test_fork_pool_within_budget"]["processes"]
    assert worker["recompiles"] == 1  # then automatic dynamic: no second one
    assert worker["command"].startswith("ForkPoolWorker")
    (dead,) = tests["test_child_killed_after_its_recompile"]["processes"]
    assert (dead["recompiles"], dead["ended"], dead["complete"]) == (1, "no exit record", True)
    assert tests["test_child_without_torch"]["processes"] == []


SITE = """
import os, subprocess, sys, textwrap


def test_child_runs_both(tmp_path):
    code = textwrap.dedent('''
        import os, sys, torch
        print(os.environ.get("USER_SITE_RAN"), sys.modules["sitecustomize"].__file__)
        f = torch.compile(lambda x: x + 1, backend="eager")
        f(torch.ones(2)); f(torch.ones(3))
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    with open("seen.txt", "w") as f:
        print(os.environ["PYTEST_RECOMPILE_SPOOL"], file=f)
        print("CHILD", out.stdout, file=f)
"""


def test_environment_contract(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's own sitecustomize still runs; nothing is left behind after the session."""
    user = pytester.mkdir("usersite")
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    monkeypatch.setenv("PYTHONPATH", str(user))
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    result = _run(pytester, SITE, "--recompile-budget=0")
    assert outcomes(result) == {"test_child_runs_both": "failed"}, result.stdout.str()
    result.stdout.re_match_lines([r".*pid \d+ \(python -c\): 1 recompile of <lambda>.*"])
    spool, seen = (pytester.path / "seen.txt").read_text().split("\n", 1)
    assert f"CHILD yes {user / 'sitecustomize.py'}" in seen  # the user's ran, and is the one
    assert os.path.basename(spool).startswith("pytest-recompile-")
    assert not Path(spool).exists()  # removed when the session ended
    # the inner session's environment changes died with it; this process never had them
    assert os.environ.get("PYTHONPATH") == str(user)


POOL_FIXTURE = """
import multiprocessing
import pytest
import torch


@torch.compile(backend="eager")
def f(x):
    return x * 2


def work(n):
    return f(torch.ones(n)).sum().item()


@pytest.fixture(scope="module")
def pool():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pool.map(work, [4])  # the warm-up: the fixture's, charged to no test
        yield pool


def test_a_same_shape(pool):
    assert pool.map(work, [4]) == [8.0]


def test_b_other_shape(pool):
    assert pool.map(work, [6]) == [12.0]
"""


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_wider_fixture_pool(pytester: pytest.Pytester, order: str) -> None:
    args = ["-p", "no:faulthandler"]
    if order == "reversed":
        pytester.makeconftest("def pytest_collection_modifyitems(items):\n    items.reverse()\n")
    result = _run(pytester, POOL_FIXTURE, "--recompile-budget=0", *args)
    assert outcomes(result) == {"test_a_same_shape": "passed", "test_b_other_shape": "failed"}
    result.stdout.re_match_lines([r".*\(ForkPoolWorker-\d+\): 1 recompile of f.*"])
    document = read_json(str(pytester.path / "r.json"))
    (fixture,) = document["fixtures"]
    assert fixture["name"] == "pool"
    assert [p["functions"][0]["compiles"] for p in fixture["processes"]] == [1]
    tests = {t["nodeid"].split("::")[-1]: t for t in document["tests"]}
    assert tests["test_a_same_shape"]["processes"] == []


def test_torn_and_unfinished_records_are_named(tmp_path: Path) -> None:
    """The parent's reading: a line cut short, and a process that died mid-compile."""
    spool = processes.Spool()
    try:
        token = spool.announce("test", "t", None, "report-only")
        line = {
            "token": token,
            "pid": 2**22 + 7,  # no such process
            "rank": 1,
            "command": "python -c",
            "state": "compiled",
            "result": {
                "recompiles": 1,
                "compile_seconds": 0.0,
                "recompile_seconds": 0.0,
                "violations": [],
                "limit_hit": [],
                "functions": [],
                "graph_breaks": [],
            },
            "message": None,
            "stopped": False,
        }
        with open(os.path.join(spool.root, "p1.jsonl"), "w") as f:
            f.write(json.dumps(line) + "\n" + json.dumps(line)[:40])
        with open(os.path.join(spool.root, "p2.jsonl"), "w") as f:
            f.write(json.dumps({**line, "state": "compiling", "rank": 2}) + "\n")
        # Until a child says it records (as a child does before its first line), the parent
        # reads no directory: a suite that starts no child pays nothing for them.
        assert spool.processes([token]) == []
        board.mark_child(os.path.join(spool.root, SPOOL_OWNER))
        found = spool.processes([token])
        assert [(p["rank"], p["recompiles"], p["problem"]) for p in found] == [
            (1, 1, "a record cut short"),
            (2, 1, "it ended while compiling"),
        ]
        assert messages.notes(found)[0].startswith(
            f"rank 1 (pid {2**22 + 7}) ended without a complete record (a record cut short)"
        )
    finally:
        spool.close()
    assert not os.path.exists(spool.root)
    assert SPOOL_ENV not in os.environ


MODES = """
import subprocess, sys, textwrap
import pytest

CHILD = textwrap.dedent('''
    import torch
    torch._dynamo.config.recompile_limit = 1

    @torch.compile(backend="eager", dynamic=False)
    def h(x):
        return x + 2

    for n in (2, 3, 4):
        h(torch.ones(n))
    print("ran to the end")
''')


@pytest.mark.max_recompiles(5)
def test_limit_in_child():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert "ran to the end" in out.stdout, out.stderr[-3000:]
"""


@pytest.mark.parametrize("mode", ["at-end", "report-only"])
def test_child_modes_and_recompile_limit(pytester: pytest.Pytester, mode: str) -> None:
    """at-end and report-only never stop a child; a recompile_limit hit in a child fails
    the test whatever its budget (not in report-only)."""
    result = _run(pytester, MODES, f"--recompile-mode={mode}")
    expected = "failed" if mode == "at-end" else "passed"
    assert outcomes(result) == {"test_limit_in_child": expected}, result.stdout.str()
    result.stdout.re_match_lines(
        [rf".*pid \d+ \(python -c\): 'h' hit recompile_limit \(1\) and {EAGER_FALLBACK}.*"]
    )
    (test,) = _tests(pytester).values()
    (child,) = test["processes"]
    assert child["limit_hit"] == ["h"]
    assert child["stopped"] is False
    assert test["limit_hit"] == [f"h ({messages.who(child)})"]


def test_gate_errors_cross_process_boundaries() -> None:
    """A child's gate error reaches its parent pickled (multiprocessing): as its message."""
    import pickle

    from pytest_recompile.recording.errors import CompiledWhileWarm, RecompileBudgetExceeded

    for error in (RecompileBudgetExceeded([], [], stopped=True), CompiledWhileWarm("refused")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert copy.from_child


BASELINE = """
import subprocess, sys, textwrap

CHILD = textwrap.dedent(\'\'\'
    import torch

    @torch.compile(backend="eager")
    def k(x):
        return x * 3

    k(torch.ones(2))
    k(torch.ones(3))
\'\'\')


def test_child_recompiles_once():
    subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True)
"""


def test_baseline_counts_the_process_that_recompiled_most(pytester: pytest.Pytester) -> None:
    """A budget applies to each process, so a baseline records the most one process made."""
    update = _run(pytester, BASELINE, "--recompile-baseline=b.json", "--recompile-baseline-update")
    assert update.ret == 0, update.stdout.str()
    baseline = read_json(str(pytester.path / "b.json"))
    (entry,) = baseline["tests"].values()
    assert (entry["recompiles"], entry["functions"]) == (1, {"k": 1})
    assert entry["guards"]["k"] > 0  # the child's entries, read in the child
    assert entry["values"] == {"k": []}
    gated = _run(pytester, BASELINE, "--recompile-baseline=b.json", "--recompile-budget=0")
    assert outcomes(gated) == {"test_child_recompiles_once": "passed"}, gated.stdout.str()


FAULTY_CHILD = """
import subprocess, sys, textwrap

CHILD = textwrap.dedent(\'\'\'
    import torch
    f = torch.compile(lambda x: x + 1, backend="eager")
    f(torch.ones(2))
    f(torch.ones(3))
    print("the child ran to its end")
\'\'\')


def test_child_with_a_faulty_recorder():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert "the child ran to its end" in out.stdout, out.stderr[-3000:]
"""


def test_an_internal_error_in_a_child_is_contained_and_named_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault of the child's recorder (injected by a sitecustomize the plugin's chains to)
    never breaks the child; the parent names it once."""
    site = pytester.mkdir("faulty")
    (site / "sitecustomize.py").write_text(
        "from pytest_recompile.children import child\n"
        "def broken(self, *args, **kwargs):\n"
        "    raise RuntimeError('injected')\n"
        "child.ChildRecorder._write = broken\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = _run(pytester, FAULTY_CHILD, "--recompile-budget=0")
    assert outcomes(result) == {"test_child_with_a_faulty_recorder": "passed"}
    faults = [line for line in result.stdout.lines if "internal error contained" in line]
    assert len(faults) == 1, result.stdout.str()
    assert re.search(
        r"pid \d+: internal error in a child's on_compile: RuntimeError: injected", faults[0]
    )
    document = read_json(str(pytester.path / "r.json"))
    assert len(document["faults"]) == 1


def test_the_owner_board_is_read_whole(tmp_path: Path) -> None:
    """The parent names the running owner in a memory map; a reader gets what was written
    last, whole, however long (the map grows), and nothing before the first write."""
    path = str(tmp_path / "owner")
    written = board.Board(path)
    try:
        assert board.read(path) == b""
        written.write(b"t1\n{}")
        assert board.read(path) == b"t1\n{}"
        long = b"t2\n" + b"x" * 200_000  # past the first size of the map
        written.write(long)
        assert board.read(path) == long
        assert not written.children()
        board.mark_child(path)
        assert written.children()
        written.write(b"\n")
        assert board.read(path) == b"\n"
    finally:
        written.close()
