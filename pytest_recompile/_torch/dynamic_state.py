"""torch's automatic-dynamic state (which dims were seen to vary, per code object): reading,
copying, merging and installing it, whole or for one code object."""

from __future__ import annotations

import copy
import sys
from types import CodeType
from typing import Any


def code_state() -> Any:
    """torch's automatic-dynamic state (which dims were seen to vary), as it is now: the
    object itself, not a copy (None before the first compile and after a reset)."""
    pgo = _pgo()
    return pgo._CODE_STATE if pgo is not None else None


def copy_code_state(state: Any) -> dict[Any, Any]:
    """A copy of an automatic-dynamic state, to read or to install (empty for None)."""
    return {key: _copied(value) for key, value in state.items()} if state else {}


def _copied(code_state: Any) -> Any:
    """A copy of one code id's state that torch's updates of either leave the other alone.

    torch's ``CodeState`` holds a dict of ``FrameStateSizeEntry``, which its merge updates in
    place, attribute by attribute, with values that are themselves immutable (ints, tuples,
    its ``auto_dynamic`` markers): a copy of each entry's attributes is a copy of the state, at
    about a tenth of ``copy.deepcopy`` (read twice per compile, and per isolated test). A
    state holding anything unhashable (a torch that keeps it otherwise) is deep-copied."""
    frames = getattr(code_state, "automatic_dynamic", None)
    outer = getattr(code_state, "__dict__", None)
    if not isinstance(frames, dict) or outer is None or len(outer) != 1:
        return copy.deepcopy(code_state)
    into = frames.copy()  # a defaultdict keeps its factory
    for source, frame in frames.items():
        values = getattr(frame, "__dict__", None)
        if values is None:
            return copy.deepcopy(code_state)
        try:
            hash(tuple(values.values()))
        except TypeError:
            return copy.deepcopy(code_state)
        twin = object.__new__(type(frame))
        twin.__dict__.update(values)
        into[source] = twin
    copied = object.__new__(type(code_state))
    copied.__dict__["automatic_dynamic"] = into
    return copied


def changed_code_state(before: dict[Any, Any], after: Any) -> dict[Any, Any]:
    """What ``after`` holds that ``before`` did not: the code ids whose state changed."""
    return copy_code_state(
        {key: value for key, value in (after or {}).items() if before.get(key) != value}
    )


def merged_code_state(base: dict[Any, Any], *changes: dict[Any, Any]) -> dict[Any, Any]:
    """``base`` with each change laid over it (copied: nothing shared). Where both know a
    name of one code id, torch's own merge decides (a dim seen to vary becomes dynamic), as
    if the calls behind the change had been made after those behind ``base``."""
    merged = copy_code_state(base)
    for change in changes:
        for key, state in copy_code_state(change).items():
            mine = merged.get(key)
            names = getattr(mine, "automatic_dynamic", None)
            theirs = getattr(state, "automatic_dynamic", None)
            if names is None or theirs is None:
                merged[key] = state
                continue
            for name, entry in theirs.items():
                if name in names:
                    names[name] |= entry
                else:
                    names[name] = entry
    return merged


def install_code_state(state: dict[Any, Any]) -> Any:
    """Make ``state`` (copied) torch's automatic-dynamic state; return the object installed."""
    import collections

    pgo = _pgo()
    if pgo is None:
        return None
    installed = collections.defaultdict(pgo.CodeState, copy_code_state(state))
    pgo._CODE_STATE = installed
    return installed


def _keys_of(code: CodeType, state: Any) -> list[Any]:
    """torch's keys of ``code``'s automatic-dynamic state: one without a closure, found
    directly; a closure's code may have one per closure (all of the same place)."""
    import torch._dynamo.pgo as pgo

    plain = pgo.CodeId.make(code)
    if not code.co_freevars:
        return [plain] if plain in state else []
    return [k for k in state if _place(k) == _place(plain)]


def _place(key: Any) -> tuple[Any, ...]:
    """Where a code id's code is: its file (a hash of it since 2.8, its name before), first
    line and name; the closure it was made for left out."""
    where = getattr(key, "file_hash", None) or getattr(key, "filename", None)
    return (where, getattr(key, "firstlineno", None), getattr(key, "name", None))


def state_of(code: CodeType) -> dict[Any, Any]:
    """The automatic-dynamic state torch keeps for ``code`` (per closure, if any): a copy."""
    state = code_state()
    if not state:
        return {}
    return copy_code_state(
        {key: state[key] for key in _keys_of(code, state) if state[key].automatic_dynamic}
    )


def set_state_of(code: CodeType, state: dict[Any, Any]) -> None:
    """Make ``state`` (from :func:`state_of`) torch's automatic-dynamic state for ``code``."""
    current = code_state()
    if current is None:
        current = install_code_state({})
        if current is None:
            return
    for key in _keys_of(code, current):
        del current[key]
    current.update(copy_code_state(state))


def other_closure(code: CodeType, f_locals: Any, *states: dict[Any, Any]) -> bool:
    """Whether ``states`` hold torch's automatic-dynamic state of a closure of ``code`` other
    than the call's (torch keys it by the code objects of the callables the cells hold)."""
    import torch._dynamo.pgo as pgo

    keyed = {getattr(key, "closure_hash", None) for state in states for key in state} - {None}
    if not keyed:
        return False
    try:
        cells = tuple(pgo._get_closure_content(f_locals[name]) for name in code.co_freevars)
    except Exception:  # an empty cell, a torch that words it otherwise: not provably the same
        return True
    return keyed != {hash(cells)}


def _pgo() -> Any:
    try:
        import torch._dynamo.pgo as pgo
    except ImportError:
        return None
    return pgo if hasattr(pgo, "_CODE_STATE") else None


def dynamic_sources(codes: list[CodeType]) -> list[str]:
    """The sources torch's automatic-dynamic state now compiles dynamic for these code
    objects (``L['x']``): what ``TORCH_COMPILE_DYNAMIC_SOURCES`` would make dynamic from the
    first compile, as torch's own ``pgo`` suggests it."""
    pgo = _pgo()
    state = code_state()
    token = getattr(getattr(pgo, "AutoDynamic", None), "token", None)
    if token is None or not state or not _reads_dynamic_sources():
        return []
    found: list[str] = []
    try:
        for code in codes:
            for key in _keys_of(code, state):
                for source, frame in state[key].automatic_dynamic.items():
                    size, scalar = getattr(frame, "size", None), getattr(frame, "scalar", None)
                    dynamic = token in size if isinstance(size, tuple) else scalar is token
                    if dynamic and source not in found:
                        found.append(str(source))
    except Exception:  # a torch that keeps this state otherwise: no suggestion, never an error
        return []
    return found


def _reads_dynamic_sources() -> bool:
    """Whether this torch reads ``TORCH_COMPILE_DYNAMIC_SOURCES`` (its compiler config's
    ``dynamic_sources``): only then is it worth suggesting."""
    try:
        import torch.compiler.config as compiler_config
    except ImportError:
        return False
    return hasattr(compiler_config, "dynamic_sources")


# -- the examples the "eager_then_compile" stances keep ---------------------------------------


def examples() -> dict[str, list[Any]]:
    """The inputs ``set_stance("eager_then_compile")`` kept per function (the first two
    calls': the second compile marks dynamic what varied between them), as a copy. torch's
    reset leaves them; a test alone starts without those of earlier tests."""
    kept = _examples_now()
    return {key: list(found) for key, found in kept.items()} if kept else {}


def examples_changed(before: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The functions whose kept examples differ from ``before``, with their examples now."""
    now = examples()
    return {key: found for key, found in now.items() if before.get(key) != found}


def examples_differ(installed: dict[str, list[Any]]) -> bool:
    """Whether torch's kept examples are no longer ``installed`` (cheap: they only grow)."""
    kept = _examples_now()
    if not kept:
        return bool(installed)
    return len(kept) != len(installed) or any(
        len(found) != len(installed.get(key, ())) for key, found in kept.items()
    )


def install_examples(wanted: dict[str, list[Any]]) -> None:
    """Make ``wanted`` (copied) the examples the eager_then_compile stances keep."""
    import torch._dynamo.eval_frame as eval_frame

    if hasattr(eval_frame, "_EXAMPLE_INPUTS"):
        eval_frame._EXAMPLE_INPUTS = {key: list(found) for key, found in wanted.items()}


def _examples_now() -> dict[str, list[Any]] | None:
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(eval_frame, "_EXAMPLE_INPUTS", None)
