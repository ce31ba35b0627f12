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
@torch.compile(mode="reduce-overhead")
def step(x):
    return (x * 2).sin()

def run_steps():
    x = torch.randn(256, device="cuda")
    for _ in range(4):
        step(x)
    for _ in range(4):
        step(torch.randn(256, device="cuda"))  # new addresses: re-recording, no recompile
"""


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
    if versions.can_count_cudagraph_recordings():  # else the header says they go uncounted
        assert test["cudagraph_recordings"] >= 1, test  # reduce-overhead recorded, and was seen
    # Re-records have a figure of their own, in the test and the summary, and fail nothing.
    assert report["summary"]["cudagraph_rerecords"] == test["cudagraph_rerecords"]


def test_cudagraph_rerecords_fail_only_when_asked(run) -> None:
    result = run(
        REDUCE_OVERHEAD
        + """
@pytest.mark.max_cudagraph_rerecords(0)
def test_capped():
    run_steps()
"""
    )
    outcome = result.parseoutcomes()
    if outcome.get("passed"):
        pytest.skip("this torch did not re-record the CUDA graph for new input addresses")
    result.stdout.fnmatch_lines([f"{PREFIX} * CUDA-graph re-record*, budget 0*"])


def test_device_summary_names_the_gpu() -> None:
    assert instruments.device_summary().startswith("cuda: ")
