"""The warm-start scenarios: one test module, run by the plugin (each marked test cold, then
warm, in fresh children) and by the oracle (the module twice by hand, in two fresh processes,
torch's own counters read per test). Each test compiles a graph of its own (its own sizes),
so that no test's cold run saves an entry another test's warm lookup could hit."""

SCENARIOS = """
import os
import random

import pytest
import torch

PID = float(os.getpid() % 997 + 2)  # fixed at process start
DRAWN = round(random.random() * 100 + 2, 3)  # unseeded, at import
NAMES = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}  # iterated in hash order
SCALE = {name: float(i + 2) for i, name in enumerate(sorted(NAMES))}


def mlp(width):
    return torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 2)
    )


def by_pid(x):
    return x * PID


def by_drawn(x):
    return x * DRAWN


def in_set_order(x):
    for name in NAMES:
        x = x * SCALE[name]
    return x


def grow(x):
    return torch.sin(x) + 1


class Tagged(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tag = f"scale_{id(self)}"
        self.register_buffer(self.tag, torch.ones(11))

    def forward(self, x):
        return x * getattr(self, self.tag)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def squared(x):
    return Square.apply(x) + 1


@pytest.fixture(scope="module")
def warmed():
    model = torch.compile(mlp(6))
    with torch.no_grad():
        model(torch.randn(2, 6))
    return model


@pytest.mark.warm_start
def test_stable_forward():
    with torch.no_grad():
        torch.compile(mlp(4))(torch.randn(2, 4))


@pytest.mark.warm_start
def test_training_step():
    model = mlp(5)
    torch.compile(model)(torch.randn(2, 5)).sum().backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()


@pytest.mark.warm_start
def test_module_fixture(warmed):
    with torch.no_grad():
        warmed(torch.randn(2, 6))


@pytest.mark.warm_start
def test_dynamic_sizes():
    f = torch.compile(grow, dynamic=True)
    f(torch.randn(3))
    f(torch.randn(5))


@pytest.mark.warm_start
def test_pid_constant():
    torch.compile(by_pid)(torch.randn(7))


@pytest.mark.warm_start
def test_random_at_import():
    torch.compile(by_drawn)(torch.randn(9))


@pytest.mark.warm_start
def test_set_order():
    torch.compile(in_set_order)(torch.randn(10))


@pytest.mark.warm_start
def test_buffer_named_by_id():
    with torch.no_grad():
        torch.compile(Tagged())(torch.randn(11))


@pytest.mark.warm_start
def test_forward_without_backward():
    torch.compile(mlp(3))(torch.randn(2, 3))


@pytest.mark.warm_start
def test_freezing():
    with torch._inductor.config.patch(freezing=True), torch.no_grad():
        torch.compile(mlp(7).eval())(torch.randn(2, 7))


@pytest.mark.warm_start(allow_bypass=True)
def test_bypasses_allowed():
    with torch._inductor.config.patch(freezing=True), torch.no_grad():
        torch.compile(mlp(8).eval())(torch.randn(2, 8))
    torch.compile(squared)(torch.randn(13, requires_grad=True))


@pytest.mark.warm_start
def test_autograd_function():
    torch.compile(squared)(torch.randn(12, requires_grad=True))


@pytest.mark.warm_start
def test_eager_only():
    torch.compile(grow, backend="eager")(torch.randn(14))


@pytest.mark.warm_start
def test_caches_off():
    with torch._inductor.config.patch(force_disable_caches=True):
        torch.compile(grow)(torch.randn(15))


@pytest.mark.warm_start
def test_fails_by_itself():
    torch.compile(grow, backend="eager")(torch.randn(16))
    assert False, "its own failure"


def test_unmarked():
    torch.compile(grow, backend="eager")(torch.randn(17))
"""

# scenario -> (the verdict, what its message must name); "own" is the test's own failure
EXPECTED = {
    "test_stable_forward": ("passed", []),
    "test_training_step": ("passed", []),
    "test_module_fixture": ("passed", []),
    "test_dynamic_sizes": ("passed", []),
    "test_pid_constant": ("failed", ["by_pid", "gm (the graph)"]),
    "test_random_at_import": ("failed", ["by_drawn", "gm (the graph)"]),
    "test_set_order": ("failed", ["in_set_order", "gm (the graph)"]),
    "test_buffer_named_by_id": ("failed", ["aot_config: ...", "scale_"]),
    "test_forward_without_backward": ("failed", ["whose backward never ran", "torch.no_grad()"]),
    "test_freezing": ("failed", ["bypassed", "freezing"]),
    "test_bypasses_allowed": ("passed", []),
    "test_autograd_function": ("failed", ["bypassed"]),
    "test_eager_only": ("failed", ["no cache lookup", "backend that has no cache"]),
    "test_caches_off": ("failed", ["no cache lookup", "force_disable_caches"]),
    "test_fails_by_itself": ("own", ["its own failure"]),
}
ALLOW_BYPASS = {"test_bypasses_allowed"}

# The oracle: a pytest run of the whole module in one fresh process, torch's own counters read
# around each test (run twice, cold then warm, sharing a cache directory).
ORACLE = """
import json
import sys

import pytest

KEYS = {
    "fx_graph": ("inductor", "fxgraph_cache_"),
    "aot_autograd": ("aot_autograd", "autograd_cache_"),
}


def counts():
    from torch._dynamo.utils import counters

    return {
        cache: {o: counters[group][prefix + o] for o in ("hit", "miss", "bypass")}
        for cache, (group, prefix) in KEYS.items()
    }


class PerTest:
    def __init__(self):
        self.tests = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        before = counts()
        result = yield
        after = counts()
        self.tests[item.name] = {
            c: {o: after[c][o] - before[c][o] for o in after[c]} for c in after
        }
        return result


per = PerTest()
pytest.main([*sys.argv[2:]], plugins=[per])
with open(sys.argv[1], "w") as f:
    json.dump(per.tests, f)
"""


def oracle_verdict(warm: dict[str, dict[str, int]], allow_bypass: bool) -> str:
    """The vLLM way: the warm process's counters say every lookup hit, and there was one."""
    lookups = sum(sum(outcomes.values()) for outcomes in warm.values())
    misses = sum(outcomes["miss"] for outcomes in warm.values())
    bypasses = sum(outcomes["bypass"] for outcomes in warm.values())
    if lookups and not misses and (allow_bypass or not bypasses):
        return "passed"
    return "failed"
