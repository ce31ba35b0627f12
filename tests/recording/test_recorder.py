"""The recorder without torch: compile events in, per-function records out."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_recompile._torch.events import CompileEvent
from pytest_recompile.recording.recorder import Recorder


def forward(x):  # type: ignore[no-untyped-def]
    return x


def event(compile_id: str, *, recompile: bool, reasons: tuple[str, ...] = ()) -> CompileEvent:
    return CompileEvent(
        code=forward.__code__,
        function=forward.__code__,
        label="Net.forward",
        compile_id=compile_id,
        is_recompile=recompile,
        reasons=reasons,
        leaf_kinds=(None,) * len(reasons),
        limit=None,
        values={"G['step']": "1"} if reasons else {},
    )


def test_importing_the_recorder_imports_no_torch() -> None:
    code = "import sys, pytest_recompile.recording.recorder\nassert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_core_imports_no_pytest() -> None:
    """A child process records with the tracker: it must not pay for importing pytest."""
    code = (
        "import sys, pytest_recompile.children.child, pytest_recompile.recording.tracker\n"
        "assert not {'pytest', '_pytest'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_records_compiles_and_recompiles_per_function() -> None:
    recorder = Recorder()
    record, recompile = recorder.add(event("0/0", recompile=False))
    assert recompile is None
    assert record.compiles == 1
    record, recompile = recorder.add(event("0/1", recompile=True, reasons=("0/0: G['step'] == 0",)))
    assert recompile is not None
    recorder.let_through(record, recompile)
    assert [r.qualname for r in recorder.records] == ["Net.forward"]
    assert (record.name, record.compiles, recorder.count(), recorder.total_recompiles) == (
        "forward",
        2,
        1,
        1,
    )
    [reason] = recorder.reasons("forward")
    assert (reason.kind, reason.source, reason.actual) == ("EQUALS_MATCH", "G['step']", "1")
    assert recorder.kinds() == ["EQUALS_MATCH"]


def test_a_first_compile_is_a_recompile_only_from_a_warm_start() -> None:
    cold, warm = Recorder(), Recorder(warm_start=True)
    for recorder in (cold, warm):
        recorder.add(event("0/1", recompile=True, reasons=("0/0: G['step'] == 0",)))
    assert (cold.count(), warm.count()) == (0, 1)


def test_entries_and_seconds_are_given_by_the_caller() -> None:
    recorder = Recorder()
    recorder.add(event("0/0", recompile=False))
    recorder.add(event("0/1", recompile=True, reasons=("0/0: G['step'] == 0",)), again="why")
    recorder.note_entries(lambda code: 2)
    key = (forward.__code__.co_filename, forward.__code__.co_firstlineno, "forward", "0/1")
    recorder.note_seconds({key: 1.5})
    [record] = recorder.records
    assert (record.cache_entries, record.compile_seconds, record.again_seconds) == (2, 1.5, 1.5)
    assert record.again_reasons == ["why"]
    assert record.recompiles[0].seconds == 1.5
    assert recorder.made_here(forward.__code__, "0/1")
    assert recorder.compiled(record) == [forward.__code__]


def test_a_reused_first_compile_is_a_compile_that_ran_nowhere_here() -> None:
    recorder = Recorder()
    record = recorder.reuse(event("0/0", recompile=False), 0.25)
    recorder.add(event("0/1", recompile=True, reasons=("0/0: G['step'] == 0",)))
    assert (record.compiles, record.reused, record.saved_seconds) == (1, 1, 0.25)
    assert recorder.count() == 1  # the recompile after it counts, as alone
    assert recorder.made_here(forward.__code__, "0/0")  # its guards are the test's
    assert record.to_dict()["reused"] == 1


def test_unknown_function_names_what_was_compiled() -> None:
    recorder = Recorder()
    recorder.add(event("0/0", recompile=False))
    with pytest.raises(KeyError, match=r"no compiled function 'other'.*compiled: Net.forward"):
        recorder.record("other")
