"""The line that installed the failing guard: read from torch's reason, shown in the failure
message, the JSON report, the Markdown summary and a GitHub annotation on that line."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from snippets import GUARD_LINES, inner_args

from pytest_recompile._torch.reasons import guard_lines, library_file, parse_reason
from pytest_recompile.reports.json_report import SCHEMA_FILE

# torch 2.10 and newer: the comment beside the guard, then the stack from the compiled function
# to the line that read the value (full paths; the comment's file is shortened by torch).
STACKED = (
    "0/0: self._modules['blocks']._modules['1'].scale == 2  # return x * self.scale  "
    "# /src/model.py:11 in forward\nUser stack trace:\n"
    '  File "/src/model.py", line 21, in forward\n    x = block(x)\n'
    '  File "/src/model.py", line 11, in forward\n    return x * self.scale'
)
LIBRARY = (
    "1/0: self._modules['drop'].p == 0.1  # return F.dropout(input, self.p)  "
    "# torch/nn/modules/dropout.py:73 in forward\nUser stack trace:\n"
    '  File "/src/model.py", line 11, in forward\n    return self.drop(x) * 2\n'
    '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/dropout.py", line 73, '
    "in forward\n    return F.dropout(input, self.p)"
)
# Releases that give no stack: the comment alone, its file shortened by torch against torch's
# own folder ("/tmp/a/t.py" against "/usr/lib/..." loses its first character, too).
COMMENTED = (
    "0/0: G['step'] == 0                      # scale = (step + 1) / 4  # BUG: read per step"
    "  # mp/a/t.py:5 in f"
)


def test_the_innermost_frame_of_the_stack_is_the_line() -> None:
    site, own = guard_lines(STACKED)
    assert site is not None
    assert own is None
    assert (site.file, site.line, site.function, site.code) == (
        "/src/model.py",
        11,
        "forward",
        "return x * self.scale",
    )


def test_library_code_also_gives_the_users_own_line() -> None:
    site, own = guard_lines(LIBRARY)
    assert site is not None
    assert own is not None
    assert (site.file.rpartition("site-packages/")[2], site.line) == (
        "torch/nn/modules/dropout.py",
        73,
    )
    assert (own.file, own.line, own.code) == ("/src/model.py", 11, "return self.drop(x) * 2")
    assert (library_file(site.file), library_file(own.file)) == (True, False)


@pytest.mark.parametrize(
    ("function_file", "found"),
    [
        ("/tmp/a/t.py", True),  # the comment's shortened file is the function's own
        ("/work/a/t.py", False),  # another file that ends alike: not the one torch shortened
        ("/tmp/b/t.py", False),
        (None, False),  # no file to check it against: nothing is guessed
    ],
)
def test_a_comment_alone_counts_only_where_it_names_the_functions_file(
    function_file: str | None, found: bool
) -> None:
    site, own = guard_lines(COMMENTED, function_file)
    assert own is None
    if not found:
        assert site is None
        return
    assert site is not None
    assert (site.file, site.line, site.function) == ("/tmp/a/t.py", 5, "f")
    assert site.code == "scale = (step + 1) / 4  # BUG: read per step"  # the user's own "#"


@pytest.mark.parametrize(
    "raw",
    [
        "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8",
        "0/0: GLOBAL_STATE changed: grad_mode ",
        "0/0: G['step'] == 0",
        "",
    ],
)
def test_no_location_says_nothing(raw: str) -> None:
    reason = parse_reason(raw, None, "/tmp/a/t.py")
    assert (reason.site, reason.own_site) == (None, None)
    assert reason.to_dict()["site"] is None


MODEL = """
import torch


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(x) * self.scale


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Attn() for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_submodule_attribute():
    model = Model()
    compiled = torch.compile(model, backend="eager")
    compiled(torch.ones(3))
    model.blocks[1].scale = 3
    compiled(torch.ones(3))


def test_library_attribute():
    model = Model()
    compiled = torch.compile(model, backend="eager")
    compiled(torch.ones(3))
    model.blocks[1].drop.p = 0.2
    compiled(torch.ones(3))


def test_size():
    compiled = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    compiled(torch.ones(4))
    compiled(torch.ones(8))
"""
LINE = "return self.drop(x) * self.scale"


def _check(result: pytest.RunResult, root: Path) -> None:
    """The same lines, whoever ran the tests (in-process, or two xdist workers), as far as this
    torch names them: a stack from 2.11 on (the library line and the user's own), the comment
    alone on 2.9 and 2.10 (the user's line where it is the compiled function's file), nothing
    before."""
    result.assert_outcomes(failed=3)
    text = result.stdout.str()
    report = json.loads((root / "report.json").read_text())
    jsonschema.validate(report, json.loads(Path(SCHEMA_FILE).read_text()))
    reasons = {
        t["nodeid"].rpartition("::")[2]: t["functions"][0]["recompiles"][0]["reasons"][0]
        for t in report["tests"]
    }
    markdown = (root / "report.md").read_text()
    annotations = [line for line in result.stdout.lines if "this line installed the guard" in line]
    size = text.split("_ test_size _")[1]
    assert "TENSOR_MATCH(size)" in size
    assert "guard from" not in size.split("guards [")[0]  # torch names no line for a tensor
    assert reasons["test_size"]["site"] is None
    if GUARD_LINES is None:
        assert "guard from" not in text
        assert annotations == []
        assert all(r["site"] is None and r["own_site"] is None for r in reasons.values())
        return

    own = {"file": "models/test_model.py", "line": 12, "function": "forward", "code": LINE}
    assert f"      guard from models/test_model.py:12 in forward: {LINE}" in text
    assert reasons["test_submodule_attribute"]["site"] == own  # relative to the rootdir
    assert reasons["test_submodule_attribute"]["own_site"] is None
    assert "| `models/test_model.py:12` |" in markdown
    library = reasons["test_library_attribute"]
    if GUARD_LINES == "comment":  # it names dropout.py, not the function's file: no guess
        assert (library["site"], library["own_site"]) == (None, None)
        assert len(annotations) == 1
    else:
        assert "      guard from torch/nn/modules/dropout.py:" in text
        assert f"      in your code models/test_model.py:12 in forward: {LINE}" in text
        assert library["site"]["file"].endswith("torch/nn/modules/dropout.py")
        assert library["own_site"] == own
        assert "dropout.py:" in markdown
        assert "(your code: models/test_model.py:12)" in markdown
        assert len(annotations) == 2  # none for the tensor's size: torch names no line
    assert all(a.startswith("::error file=models/test_model.py,line=12,") for a in annotations)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.mkdir("models")
    (pytester.path / "models" / "test_model.py").write_text(MODEL)
    pytester.makeini("[pytest]\n")  # the rootdir: the files are shown relative to it
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    return pytester


GATE = ("--recompile-budget", "--recompile-report=report.json", "--recompile-report-md=report.md")


def test_failure_json_markdown_and_annotation_name_the_line(run, suite: pytest.Pytester) -> None:
    result = suite.runpytest(*inner_args(*GATE, "-p", "no:randomly"))
    _check(result, suite.path)


@pytest.mark.xdist
def test_the_same_under_xdist(run, suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*inner_args(*GATE, "-p", "xdist", "-n", "2"))
    _check(result, suite.path)


def test_the_part_after_a_graph_break_is_named_as_users_know_it() -> None:
    from pytest_recompile.model.messages import function_name

    resume = "torch_dynamo_resume_in_forward_at_42"
    assert function_name(resume, "BreakNet.forward") == (
        "BreakNet.forward (after its graph break at line 42)"
    )
    assert function_name(resume) == "forward (after its graph break at line 42)"
    assert function_name(resume, "other") == "forward (after its graph break at line 42)"
    assert function_name("forward", "BreakNet.forward") == "forward"


BREAKNET = """
class BreakNet(torch.nn.Module):
    def forward(self, x, n):
        x = x + 1
        torch._dynamo.graph_break()
        return x * n


net = torch.compile(BreakNet(), backend="eager")


def test_resume():
    net(torch.ones(2), 2)
    net(torch.ones(2), 3)  # the part after the break reads n: a recompile of that part
"""


@pytest.mark.skipif(GUARD_LINES != "stack", reason="torch names the guard's line from 2.11 on")
def test_a_recompile_after_a_graph_break_names_the_compiled_function(run) -> None:
    result = run(BREAKNET, "--recompile-budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "    recompile 1 [[]*[]] (graph-break resume frame) EQUALS_MATCH: n == 2 (this call: *",
            "      guard from test_it.py:9 in BreakNet.forward (after its graph break at line 8): "
            "return x * n",
        ]
    )
    result.stdout.no_fnmatch_line("*torch_dynamo_resume_in*")
