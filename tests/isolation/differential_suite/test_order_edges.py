"""torch state a test leaves that outlived it before: each test here counts, passes or raises
as it does alone, whichever of the others ran before it.

- the eager fallback torch sets on a code object at recompile_limit;
- a user's own ``error_on_recompile`` against a module fixture's entry, after another test
  recompiled that entry (the fixture's entry is then kept apart from torch's own list, or,
  on a torch that cannot keep single entries, dropped by the reset before each test), and
  beside that fixture, live but unused (alone nothing is compiled: no error);
- the inputs ``set_stance("eager_then_compile")`` keeps per function.
"""

import pytest
import torch
import torch._dynamo.config as dcfg
from torch._dynamo.exc import RecompileError


def limited(x):
    return x * 2


@pytest.fixture(scope="module")
def warm_limited():
    compiled = torch.compile(limited, backend="eager", dynamic=False)
    compiled(torch.randn(4, 4))
    return compiled


@pytest.mark.allow_recompiles
def test_limit_hit_falls_back_to_eager(warm_limited):
    with dcfg.patch(recompile_limit=1):
        warm_limited(torch.randn(8, 4))  # at the limit: torch runs it eagerly


def test_after_a_limit_hit_a_new_shape_recompiles(warm_limited):
    warm_limited(torch.randn(16, 4))  # alone: 1 recompile, not torch's eager fallback


def raised(x):
    return x + 1


@pytest.fixture(scope="module")
def warm_raised():
    compiled = torch.compile(raised, backend="eager")
    compiled(torch.randn(4, 4))
    return compiled


@pytest.mark.max_recompiles(1)
def test_recompile_against_the_fixture(warm_raised):
    warm_raised(torch.randn(16, 4))


def test_users_error_on_recompile_against_the_fixture(warm_raised):
    with dcfg.patch(error_on_recompile=True), pytest.raises(RecompileError):
        warm_raised(torch.randn(8, 4))


def test_users_error_on_recompile_beside_an_unused_fixture():
    with dcfg.patch(error_on_recompile=True):
        torch.compile(raised, backend="eager")(torch.randn(8, 4))


def delayed(x):
    return x - 1


compiled_delayed = torch.compile(delayed, backend="eager")


def test_eager_then_compile_static():
    with torch.compiler.set_stance("eager_then_compile"):
        for _ in range(3):
            compiled_delayed(torch.randn(4, 3))


def test_eager_then_compile_varying():
    with torch.compiler.set_stance("eager_then_compile"):
        for batch in (8, 16, 32):  # alone: 8 eager, 16 compiled dynamic, 32 a hit
            compiled_delayed(torch.randn(batch, 3))
