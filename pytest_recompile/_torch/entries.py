"""Cache entries: listing them, keeping some while the rest are dropped, torch's
automatic-dynamic state, and resetting every cache."""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from ..identity import IdentityMap

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, eq=False)
class KeptEntry:
    """What it takes to put a cache entry back: the same fields torch's CacheEntry has."""

    compile_id: Any  # torch's CompileId (printed "0/1")
    guard_manager: Any
    code: CodeType  # the compiled (transformed) bytecode
    backend: Any = None  # the backend it was compiled for (torch checks it on its own list)


_KEPT: IdentityMap[CodeType, tuple[KeptEntry, ...]] = IdentityMap()


def _dead(entry: Any) -> bool:
    """An entry torch invalidated: an object it matched by identity died (a compiled
    optimizer's step, a module), so torch replaced its guard manager and dropped its code."""
    return entry.code is None or hasattr(entry.guard_manager, "invalidation_reason")


def entries(code: CodeType) -> list[KeptEntry]:
    """The live cache entries on ``code`` that torch counts, newest first (kept ones and
    entries torch invalidated excluded)."""
    return [
        KeptEntry(e.compile_id, e.guard_manager, e.code, getattr(e, "backend", None))
        for e in entry_list(code)
        if not _dead(e)
    ]


def entry_alive(entry: KeptEntry) -> bool:
    """Whether the objects an entry matches by identity still exist.

    torch invalidates an entry when such an object dies (a new object could reuse its id);
    it cannot reach entries kept by :func:`keep_only`, so they are checked here instead.
    """
    if _dead(entry):
        return False
    refs = getattr(entry.guard_manager, "id_matched_objs", None) or {}
    return all(ref() is not None for ref in refs.values())


def kept_entries(code: CodeType) -> tuple[KeptEntry, ...]:
    """The entries keep_only() re-installed on ``code`` and that are still there.

    A ``torch._dynamo.reset()`` since then removed them; they are forgotten here too.
    """
    kept = _KEPT.get(code)
    if not kept:
        return ()
    import torch._C._dynamo.eval_frame as eval_frame

    if len(eval_frame._debug_get_precompile_entries(code)) != len(kept):
        del _KEPT[code]
        return ()
    return kept


def keep_only(code: CodeType, keep: list[KeptEntry]) -> None:
    """Drop every cache entry of ``code`` but ``keep``, which torch then still matches.

    torch has no way to remove one entry from a code object's list: invalidating an entry
    leaves it in the list, where it counts toward recompile_limit. So the list is emptied
    (``reset_code``, which also empties the second list below) and the kept entries are put
    in the second list torch checks on a miss, where ``_load_precompile_entry`` puts
    ahead-of-time compiled entries. torch counts neither for recompile_limit nor asks them
    for reasons: :func:`event_from` does both. Nor does it check their backend, as it does
    on its own list: :func:`_guard_backend` adds that check. Emptying the list runs the
    entries' destructors, which clear their guard managers' back-pointers to them, so no
    invalidation callback can reach the freed entries.
    """
    import torch._C._dynamo.eval_frame as eval_frame

    eval_frame.reset_code(code)
    for entry in keep:
        _guard_backend(entry)
        eval_frame._load_precompile_entry(code, entry.guard_manager, entry.code)
    if keep:
        _KEPT[code] = tuple(keep)
    else:
        _KEPT.pop(code, None)


def drop_all(code: CodeType) -> None:
    """Every entry of ``code`` gone, kept ones too: the fallback when keeping some failed."""
    import torch._C._dynamo.eval_frame as eval_frame

    _KEPT.pop(code, None)
    eval_frame.reset_code(code)
    eval_frame._reset_precompile_entries(code)


# The backend a compile is being checked against, while kept_reasons asks the kept entries
# (torch runs guards with its callback switched off, and the compile call is far up the stack).
_CHECKING: list[Any] = []


_BACKEND_GUARDED: weakref.WeakSet[Any] = weakref.WeakSet()


_EVAL_FRAME_FILE = os.path.join("_dynamo", "eval_frame.py")


BACKEND_MISMATCH = "BACKEND_MATCH failure: this call compiles for another backend than"


def _guard_backend(entry: KeptEntry) -> None:
    """Make a kept entry answer only calls compiled for its own backend, as torch's list does.

    torch compares a call's backend with each entry of its list, but not with the entries
    :func:`keep_only` puts back. An epilogue guard (run only when every other guard passed,
    so only for a call the entry would answer) finds the call's backend in the frame of
    torch.compile's wrapper that made the call, a few frames up. Where no such frame is found
    (a backend set by a context manager), the entry answers, as torch's precompiled entries do.
    """
    backend = entry.backend
    root = entry.guard_manager.root
    add = getattr(root, "add_epilogue_lambda_guard", None)
    if backend is None or add is None or entry.guard_manager in _BACKEND_GUARDED:
        return  # (a torch without epilogue guards: kept entries answer any backend)
    import torch._dynamo.guards as dynamo_guards

    last: list[Any] = [None, True]  # the last callback asked about, and the answer

    def same_backend(_: Any) -> bool:
        callback = _CHECKING[-1] if _CHECKING else _calling_backend()
        if callback is None or callback is False:
            return True
        if callback is not last[0]:
            last[:] = [callback, bool(_innermost_backend(callback) == backend)]
        return bool(last[1])

    describe = getattr(dynamo_guards, "describe_backend", repr)
    add(same_backend, [f"{BACKEND_MISMATCH} {describe(backend)}, the kept entry's"], None)
    _BACKEND_GUARDED.add(entry.guard_manager)


def _calling_backend() -> Any:
    """The compile callback of the torch.compile wrapper nearest up the stack, if any."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return None
        if frame.f_code.co_filename.endswith(_EVAL_FRAME_FILE):
            return frame.f_locals.get("callback")
        frame = frame.f_back
    return None


def kept_reasons(kept: tuple[KeptEntry, ...], user_frame: Any, compiler_fn: Any) -> tuple[str, ...]:
    """Each entry's guard failure for this frame, worded as torch words a recompile's."""
    from torch._dynamo.guards import get_guard_fail_reason

    options: dict[str, Any] = {"skip_logging": True}
    if "backend" in inspect.signature(get_guard_fail_reason).parameters:  # 2.10+
        options["backend"] = _innermost_backend(compiler_fn)
    _CHECKING.append(compiler_fn)
    try:
        found = [
            get_guard_fail_reason(
                e.guard_manager, e.code, user_frame.f_locals, e.compile_id, **options
            )
            for e in kept
        ]
    finally:
        _CHECKING.pop()
    return tuple(reason for reason in found if reason)


def _innermost_backend(compiler_fn: Any) -> Any:
    """The backend behind torch's wrappers of it, as torch compares backends."""
    for _ in range(32):
        inner = getattr(compiler_fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            break
        compiler_fn = inner
    return compiler_fn


def count_kept(cache_size: Any, user_frame: Any, kept: tuple[KeptEntry, ...]) -> None:
    """Add the kept entries to torch's count for this compile, as compute_cache_size would
    have counted them (torch walks its own list; it takes a linked entry before 2.13)."""
    from torch._dynamo.cache_size import _has_same_id_matched_objs

    same_id = sum(1 for entry in kept if _has_same_id_matched_objs(user_frame, entry))
    cache_size.num_cache_entries += len(kept)
    cache_size.num_cache_entries_with_same_id_matched_objs += same_id
    if hasattr(cache_size, "total_cache_entries_all_regions"):  # 2.13+
        cache_size.total_cache_entries_all_regions += len(kept)


def code_state() -> Any:
    """torch's automatic-dynamic state (which dims were seen to vary), as it is now: the
    object itself, not a copy (None before the first compile and after a reset)."""
    pgo = _pgo()
    return pgo._CODE_STATE if pgo is not None else None


def copy_code_state(state: Any) -> dict[Any, Any]:
    """A copy of an automatic-dynamic state, to read or to install (empty for None)."""
    import copy

    return dict(copy.deepcopy(state)) if state else {}


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


def compiled_codes() -> list[CodeType]:
    """Every code object torch has compiled since its last reset (and still alive)."""
    import torch._dynamo.convert_frame as convert_frame

    tracker = getattr(convert_frame, "input_codes", None)
    found = (ref() for ref in getattr(tracker, "seen", ()))
    return [code for code in found if isinstance(code, CodeType)]


def _pgo() -> Any:
    try:
        import torch._dynamo.pgo as pgo
    except ImportError:
        return None
    return pgo if hasattr(pgo, "_CODE_STATE") else None


def entry_list(code: CodeType) -> list[Any]:
    import torch._C._dynamo.eval_frame as eval_frame

    return list(eval_frame._debug_get_cache_entry_list(code))


def reset_caches() -> None:
    """Drop every compiled entry, guard-failure record and automatic-dynamic state."""
    import torch._dynamo

    torch._dynamo.reset()


def cache_entries(code: CodeType) -> int:
    return len(entry_list(code))
