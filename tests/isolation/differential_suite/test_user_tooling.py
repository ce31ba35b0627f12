"""A suite's own recompile tooling, stances, finalizers, resets and threads: the gate must not
change what the user's code sees, and must charge a test with what it compiles alone."""

import threading
import time
from unittest import mock

import pytest
import torch
from torch._dynamo.exc import FailOnRecompileLimitHit, RecompileError

from pytest_recompile import CompiledWhileWarm, warm
from pytest_recompile._torch import versions

# -- torch's own refusals reach the user's code ------------------------------------------------


@torch.compile(backend="eager")
def eor_fn(x):
    return x * 3


@pytest.fixture(scope="module")
def eor_warmed():
    eor_fn(torch.ones(4))


# (monkeypatch.setattr on torch._dynamo.config hides the option on undo under pytest 9: its
# old value is read from the module's __dict__, where torch's config keeps none)
def test_error_on_recompile_raises_torchs_error(eor_warmed):
    with torch._dynamo.config.patch(error_on_recompile=True):
        with pytest.raises(RecompileError):
            eor_fn(torch.ones(8))
        eor_fn(torch.ones(4))


@torch.compile(backend="eager")
def limit_fn(x):
    return x - 3


@pytest.mark.max_recompiles(1)
@torch._dynamo.config.patch(
    recompile_limit=2, fail_on_recompile_limit_hit=True, automatic_dynamic_shapes=False
)
def test_fail_on_recompile_limit_hit_raises_torchs_error():
    limit_fn(torch.ones(1))
    limit_fn(torch.ones(2))
    with pytest.raises(FailOnRecompileLimitHit):
        limit_fn(torch.ones(3))
    limit_fn(torch.ones(2))  # the code after torch's error runs


# -- stances ----------------------------------------------------------------------------------


@torch.compile(backend="eager")
def etc_fn(x):
    return x - 1


def test_eager_then_compile_stance():
    with torch.compiler.set_stance("eager_then_compile"):
        for n in (8, 16, 32):
            etc_fn(torch.ones(n))


# -- warm blocks that stop a compile --------------------------------------------------------


@torch.compile(backend="eager")
def warm_fn(x):
    return x + 1


def test_warm_block_stops_a_recompile():
    warm_fn(torch.ones(3))
    with pytest.raises(CompiledWhileWarm), warm():
        warm_fn(torch.ones(5))


@torch.compile(backend="eager")
def warm_fixture_fn(x):
    return x + 2


@pytest.fixture
def warm_stopped_in_fixture():
    warm_fixture_fn(torch.ones(3))
    with pytest.raises(CompiledWhileWarm), warm():
        warm_fixture_fn(torch.ones(6))


def test_warm_block_stops_in_a_fixture(warm_stopped_in_fixture):
    warm_fixture_fn(torch.ones(3))


# -- a graph break inside an inlined call -----------------------------------------------------


def halve_until_small(x):
    while (x > 1).any():
        x = x / 2
    return x


@torch.compile(backend="eager")
def inlined_break_fn(x):
    return halve_until_small(x) + 1


def test_graph_break_inside_an_inlined_call():
    inlined_break_fn(torch.ones(4) * 8)
    inlined_break_fn(torch.ones(4) * 8)


# -- a suite that resets Dynamo in every set-up ---------------------------------------------


@torch.compile(backend="eager")
def reset_each_fn(x):
    y = x.sin()
    print("a graph break")
    return y.cos()


class TestResetsInEverySetUp:
    @pytest.fixture(autouse=True)
    def _reset(self):
        torch._dynamo.reset()

    @pytest.mark.parametrize("n", [4, 5, 6])
    def test_resets_then_compiles(self, n):
        reset_each_fn(torch.ones(n))


# -- a config patch stopped by the test's own finalizer --------------------------------------


@torch.compile(backend="eager")
def patched_fn(x):
    return x * 7


def test_config_patch_stopped_in_a_finalizer(request):
    patcher = mock.patch.object(torch._dynamo.config, "capture_scalar_outputs", True)
    patcher.start()
    request.addfinalizer(patcher.stop)
    patched_fn(torch.ones(2))


# -- a daemon thread that keeps compiling after its test ended -------------------------------

# A torch that cannot keep single cache entries (2.7, 2.8) is isolated by torch._dynamo.reset()
# before each test. torch hands a compiling thread its frame's cache entries before the thread
# takes the compile lock the reset holds: a reset while this thread compiles frees entries it
# then reads (SIGSEGV, seen on 2.7.1 about once in ten full runs). The plugin's own handling of
# such a thread is the same on every torch.
compiles_across_resets = pytest.mark.skipif(
    not versions.can_keep_entries(),
    reason="needs torch 2.9+ (single cache entries kept): on 2.7 and 2.8 the reset before each"
    " test can free the cache entries this test's thread is compiling against (SIGSEGV)",
)


@torch.compile(backend="eager")
def daemon_fn(x):
    return x + 2


@compiles_across_resets
def test_starts_a_compiling_daemon_thread():
    def loop():
        time.sleep(0.5)
        for n in range(2, 12):
            daemon_fn(torch.ones(n))
            time.sleep(0.05)

    threading.Thread(target=loop, daemon=True).start()


@compiles_across_resets
def test_runs_while_an_earlier_tests_thread_compiles():
    time.sleep(1.5)
