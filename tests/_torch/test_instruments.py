"""torch's instruments as a gated test drives them: copies of the automatic-dynamic state,
compile callbacks shared by every open block, compile metrics kept only once a block compiles."""

from __future__ import annotations

import torch
import torch_state

from pytest_recompile import RecompileTracker
from pytest_recompile._torch import dynamic_state, instruments


def test_a_copied_automatic_dynamic_state_is_not_changed_by_torch() -> None:
    torch._dynamo.reset()

    def scale(x):
        return x * 2

    compiled = torch.compile(scale, backend="eager")
    compiled(torch.ones(2))
    before = dynamic_state.copy_code_state(dynamic_state.code_state())
    again = dynamic_state.copy_code_state(dynamic_state.code_state())
    assert before  # one code id's state
    assert before == again  # a copy equals the state it copied
    compiled(torch.ones(3))  # torch updates its state in place: dim 0 now dynamic
    now = dynamic_state.copy_code_state(dynamic_state.code_state())
    assert now != before
    assert before == again  # the copies kept what they copied
    (state,) = before.values()
    (live,) = dynamic_state.code_state().values()
    assert state is not live
    pairs = zip(state.automatic_dynamic.values(), live.automatic_dynamic.values(), strict=True)
    assert all(a is not b for a, b in pairs)
    torch._dynamo.reset()


def test_a_state_torch_keeps_otherwise_is_deep_copied() -> None:
    class Frame:
        def __init__(self) -> None:
            self.sizes = [2, 3]  # unhashable: not provably immutable

    class State:
        def __init__(self) -> None:
            self.automatic_dynamic = {"L['x']": Frame()}

    original = {"key": State()}
    copied = dynamic_state.copy_code_state(original)
    original["key"].automatic_dynamic["L['x']"].sizes.append(4)
    assert copied["key"].automatic_dynamic["L['x']"].sizes == [2, 3]


def test_open_blocks_share_one_pair_of_torch_callbacks() -> None:
    base = torch_state.compile_callbacks()
    ends: list[str] = []
    first = instruments.block_callbacks(lambda: ends.append("first"))
    second = instruments.block_callbacks(lambda: ends.append("second"))
    assert torch_state.compile_callbacks() == base + 1
    torch.compile(lambda x: x - 1, backend="eager")(torch.ones(2))
    assert sorted(ends) == ["first", "second"]
    first.close()
    assert torch_state.compile_callbacks() == base + 1
    second.close()
    assert torch_state.compile_callbacks() == base


def test_a_held_registration_outlives_the_blocks() -> None:
    base = torch_state.compile_callbacks()
    release = instruments.hold_callbacks()
    try:
        block = instruments.block_callbacks(lambda: None)
        block.close()
        assert torch_state.compile_callbacks() == base + 1  # held: a block costs no torch call
    finally:
        release()
        release()  # twice: no harm
    assert torch_state.compile_callbacks() == base


def test_metrics_are_kept_from_a_blocks_first_compile_and_put_back_after() -> None:
    assert torch_state.metrics_capacity() == 64
    with RecompileTracker(reset=False) as quiet:
        assert torch_state.metrics_capacity() == 64  # nothing compiled: nothing changed
    assert quiet.records == []
    functions = [eval(f"lambda x: x + {n}") for n in range(70)]  # more than torch keeps
    with RecompileTracker(reset=False) as busy:
        for fn in functions:
            torch.compile(fn, backend="eager")(torch.ones(2))
        assert torch_state.metrics_capacity() > 64
    assert torch_state.metrics_capacity() == 64
    assert len(busy.records) == 70
    assert all(record.compile_seconds > 0 for record in busy.records)  # the first one's too


def test_a_stopped_block_keeps_no_compile_metric_alive() -> None:
    """A block marks torch's newest metric (tens of kilobytes each); a gated test's tracker
    lives on with its item, so the mark must not outlive the block."""
    import gc
    import weakref

    import torch._dynamo.utils as dynamo_utils

    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))
    newest = weakref.ref(dynamo_utils._compilation_metrics[-1])
    with RecompileTracker(reset=False) as kept:
        pass
    dynamo_utils.clear_compilation_metrics()
    gc.collect()
    assert newest() is None
    assert kept.records == []  # (still alive: as a gated test's tracker is)
