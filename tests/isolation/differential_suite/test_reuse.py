"""Where a test may reuse the entry an earlier test's first compile made, and where it must not.

Every test here, run alone, compiles its functions first (nothing warms them): the plugin may
answer such a first call with an earlier test's entry only where a fresh compile would have
made the same one, and must leave torch as that compile would have (automatic-dynamic state,
the entry answering later calls). A wrong reuse shows as a count that differs from alone.
"""

import pytest
import torch


def scale(x):
    return x * 3 - 1


scale_static = torch.compile(scale, backend="eager")
scale_dynamic = torch.compile(scale, backend="eager", dynamic=True)
scale_aot = torch.compile(scale, backend="aot_eager")


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


shared_mlp = torch.compile(Mlp(), backend="eager")


# -- the same shape in many tests: each reuses the first one's entry -------------------------


@pytest.mark.parametrize("copy", range(3))
def test_reuse_same_shape(copy):
    scale_static(torch.randn(4))


def test_reuse_then_second_shape_goes_dynamic():
    scale_static(torch.randn(4))  # reused (static, as alone)
    scale_static(torch.randn(8))  # alone: a recompile that makes dim 0 dynamic
    scale_static(torch.randn(16))  # alone: answered by that dynamic entry


def test_reuse_second_shape_first():
    scale_static(torch.randn(8))  # a first compile at 8: static, whatever ran before


# -- what must not be reused -----------------------------------------------------------------


def test_dynamic_true_after_static_elsewhere():
    scale_dynamic(torch.randn(4))
    scale_dynamic(torch.randn(8))  # alone: answered by the dynamic entry


def test_mark_dynamic_after_static_elsewhere():
    x = torch.randn(4)
    torch._dynamo.mark_dynamic(x, 0)
    scale_static(x)
    scale_static(torch.randn(8))  # alone: a recompile, dim 0 marked but the new tensor not


def test_other_backend_same_shape():
    scale_aot(torch.randn(4))
    scale_aot(torch.randn(4))


def test_no_grad_only():
    with torch.no_grad():
        scale_static(torch.randn(4))


def test_grad_then_no_grad():
    scale_static(torch.randn(4))
    with torch.no_grad():
        scale_static(torch.randn(4))  # alone: a GLOBAL_STATE recompile


def test_double_only():
    scale_static(torch.randn(4, dtype=torch.float64))


def test_float_then_double():
    scale_static(torch.randn(4))
    scale_static(torch.randn(4, dtype=torch.float64))  # alone: a dtype recompile


def test_config_patch_dynamic_by_default():
    with torch._dynamo.config.patch(assume_static_by_default=False):
        scale_static(torch.randn(4))  # a dynamic first compile: not the static entry
        scale_static(torch.randn(8))


def test_reset_between_calls():
    scale_static(torch.randn(4))
    torch._dynamo.reset()
    scale_static(torch.randn(4))  # a first compile again after the reset


# -- modules and optimizers rebuilt in every test ---------------------------------------------


@pytest.mark.parametrize("copy", range(3))
def test_module_rebuilt_per_test(copy):
    model = torch.compile(Mlp(), backend="eager")
    model(torch.randn(3, 4))


def test_module_rebuilt_two_batches():
    model = torch.compile(Mlp(), backend="eager")
    model(torch.randn(3, 4))
    model(torch.randn(5, 4))  # alone: a recompile


@pytest.mark.parametrize("copy", range(2))
def test_optimizer_rebuilt_per_test(copy):
    model = Mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.compile(opt.step, backend="eager")
    model(torch.randn(2, 4)).sum().backward()
    step()
    step()


# -- a module-level model at one of three batch sizes -----------------------------------------


@pytest.mark.parametrize("copy", range(2))
@pytest.mark.parametrize("batch", [2, 3, 5])
def test_shared_model_batches(batch, copy):
    shared_mlp(torch.randn(batch, 4))


# -- a graph break: counted where it compiles, so never reused -------------------------------


@torch.compile(backend="eager")
def broken(x):
    y = x + 1
    torch._dynamo.graph_break()
    return y * 2


@pytest.mark.parametrize("copy", range(2))
def test_graph_break_function(copy):
    broken(torch.randn(4))


# -- isolate_recompiles wrappers (torch 2.13+) -----------------------------------------------


def shift(x):
    return x - 2


def _isolated():
    try:
        return torch.compile(shift, backend="eager", isolate_recompiles=True)
    except TypeError:  # an older torch
        return torch.compile(shift, backend="eager")


@pytest.mark.parametrize("copy", range(2))
def test_isolate_recompiles_wrapper(copy):
    compiled = _isolated()
    compiled(torch.randn(4))
    compiled(torch.randn(4))


# -- what torch does not guard, and what a test's own tooling sees ----------------------------


def test_hooked_module_runs_its_hook():
    model = torch.compile(Mlp(), backend="eager")
    seen = []
    model.fc.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    model(torch.randn(3, 4))  # an earlier test's hook-less entry must not answer this
    assert seen == [torch.Size([3, 4])]


def test_scoped_block_names_the_function():
    from pytest_recompile import RecompileTracker

    with RecompileTracker(max_recompiles=0, reset=False) as tracker:
        scale_static(torch.randn(4))
    assert tracker.record("scale").compiles == 1


linear = torch.compile(torch.nn.Linear(4, 4), backend="eager")
tanh = torch.compile(torch.nn.Tanh(), backend="eager")


def test_wrapped_linear_alone():
    linear(torch.randn(2, 4))


def test_wrapped_tanh_alone():
    tanh(torch.randn(2, 4))


def test_wrapped_linear_then_tanh():
    linear(torch.randn(2, 4))
    tanh(torch.randn(2, 4))  # the shared wrapper's entry for linear is not tanh's


def test_guard_filter_compiles_its_own():
    filtered = torch.compile(
        scale,
        backend="eager",
        options={"guard_filter_fn": lambda entries: [not e.is_global for e in entries]},
    )
    filtered(torch.randn(4))
    filtered(torch.randn(4))
