"""The CUDA path: device guards, TF32, triton kernels, CUDA-graph re-records kept apart.

These need a GPU and skip without one (CI has none). They run the gate on the default
inductor backend, as a user's GPU suite would.
"""

from __future__ import annotations

import pytest
import torch
from snippets import assert_totals, read_json

from pytest_recompile import RecompileTracker
from pytest_recompile._torch import instruments, versions
from pytest_recompile.model.names import PREFIX

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def reasons_of(tracker: RecompileTracker) -> list[str]:
    return [f"{r.label}: {r.text}" for r in tracker.reasons()]


def test_cpu_to_cuda_is_a_device_tensor_match() -> None:
    @torch.compile(backend="eager")
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with RecompileTracker(mode="report-only") as tracker:
        double(torch.ones(4))
        double(torch.ones(4, device="cuda"))
    (reason,) = tracker.reasons()
    assert reason.kind == "TENSOR_MATCH", reasons_of(tracker)
    assert reason.detail == "device", reasons_of(tracker)


def test_float32_to_bfloat16_on_cuda() -> None:
    @torch.compile
    def scale(x: torch.Tensor) -> torch.Tensor:
        return (x * 3).relu()

    with RecompileTracker(mode="report-only") as tracker:
        scale(torch.ones(64, device="cuda"))
        scale(torch.ones(64, device="cuda", dtype=torch.bfloat16))
    (reason,) = tracker.reasons()
    assert (reason.kind, reason.detail) == ("TENSOR_MATCH", "dtype"), reasons_of(tracker)
    assert reason.actual == "BFloat16"


def test_tf32_toggle_is_global_state() -> None:
    @torch.compile
    def matmul(a: torch.Tensor) -> torch.Tensor:
        return a @ a

    before = torch.backends.cuda.matmul.allow_tf32
    try:
        with RecompileTracker(mode="report-only") as tracker:
            torch.backends.cuda.matmul.allow_tf32 = False
            matmul(torch.ones(32, 32, device="cuda"))
            torch.backends.cuda.matmul.allow_tf32 = True
            matmul(torch.ones(32, 32, device="cuda"))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    (reason,) = tracker.reasons()
    assert reason.kind == "GLOBAL_STATE", reasons_of(tracker)
    assert "tf32" in (reason.detail or ""), reasons_of(tracker)


def test_shape_change_with_triton_kernels(run) -> None:
    source = """
@torch.compile
def fused(x):
    return (x.sin() + x.cos()) * 2

def test_shapes():
    for n in (1024, 2048, 4096):
        fused(torch.randn(n, device="cuda"))
"""
    run(source, "--recompile-budget=1").assert_outcomes(passed=1)
    result = run(source, "--recompile-budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"{PREFIX} 1 recompile*, budget 0*", "*TENSOR_MATCH(size): tensor 'x' size mismatch*"]
    )


REDUCE_OVERHEAD = """
import json

import torch._inductor.cudagraph_trees as trees

# torch's own side: each CUDA graph torch records (a first recording or a re-record), counted
# where torch records it, to hold the plugin's count against.
RECORDED = []
_record = trees.CUDAGraphTreeManager.record_function


def _counted(self, new_inputs, function_id):
    RECORDED.append(str(function_id))
    return _record(self, new_inputs, function_id)


trees.CUDAGraphTreeManager.record_function = _counted


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, device="cuda"), requires_grad=False)

    def forward(self, x):
        return (x * self.w).sin()


def run_steps():
    model = Scale()
    step = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(256, device="cuda")
    for _ in range(4):
        step(x)
    # A parameter is a static input of the CUDA graph: a new one at a new address is recorded
    # again (no Dynamo guard fails: no recompile).
    model.w = torch.nn.Parameter(torch.randn(256, device="cuda"), requires_grad=False)
    for _ in range(4):
        step(x)
    with open("recorded.json", "w") as file:
        json.dump(RECORDED, file)
"""


def torch_rerecords() -> int:
    """Re-records as torch counted them in the inner run: recordings beyond one per graph."""
    recorded = read_json("recorded.json")
    assert len(recorded) >= 2, f"torch recorded {recorded}: the scenario must re-record"
    return len(recorded) - len(set(recorded))


def test_cudagraph_rerecords_are_reported_apart_not_failed(run) -> None:
    result = run(
        REDUCE_OVERHEAD
        + """
def test_reduce_overhead(recompiles):
    run_steps()
    assert recompiles.count() == 0
""",
        "--recompile-budget",
        "--recompile-report=out.json",
    )
    result.assert_outcomes(passed=1)
    assert_totals(result, gated=1, recompiles=0)
    report = read_json("out.json")
    (test,) = report["tests"]
    assert (test["recompiles"], test["violations"]) == (0, []), test
    rerecords = torch_rerecords()
    assert rerecords >= 1
    if versions.can_count_cudagraph_recordings():  # else the header says they go uncounted
        assert test["cudagraph_rerecords"] == rerecords, test
    # Re-records have a figure of their own, in the test and the summary, and fail nothing.
    assert report["summary"]["cudagraph_rerecords"] == test["cudagraph_rerecords"]


@pytest.mark.skipif(
    not versions.can_count_cudagraph_recordings(),
    reason="this torch's compile callbacks do not say which compile is a recording (2.8+)",
)
def test_cudagraph_rerecords_fail_only_when_asked(run) -> None:
    result = run(
        REDUCE_OVERHEAD
        + """
@pytest.mark.max_cudagraph_rerecords(0)
def test_capped():
    run_steps()
"""
    )
    assert torch_rerecords() >= 1
    result.assert_outcomes(failed=1)  # never a skip: torch re-recorded, and the cap is 0
    result.stdout.fnmatch_lines([f"{PREFIX} * CUDA-graph re-record*, budget 0*"])


def test_device_summary_names_the_gpu() -> None:
    assert instruments.device_summary().startswith("cuda: ")
