"""The one module that touches torch internals.

Everything version-dependent is decided here, once. The rest of the package sees plain
Python values: a :class:`CompileEvent` per compile, cache-entry counts, compile seconds.

How compiles are observed: torch (2.9+) calls the hooks registered with
``torch._dynamo.register_hook_for_recompile_user_context`` once per frame compile, inside
``convert_frame._compile``, *after* it has computed the guard-failure reasons and *before* it
checks ``recompile_limit`` or traces anything. That gives us, for free:

- the fail-fast point: an exception raised there reaches the caller unchanged and the
  compile is never paid for;
- nothing on the hot path: a cache hit never reaches Python;
- survival across ``torch._dynamo.reset()``, which clears compile callbacks but not this list.

The hook itself gets no arguments; the compiling frame's locals (``code``, ``frame``,
``cache_size``, ``compile_id``, ``reasons``, ``recompile_reason``) are read from the
``_compile`` frame one or two levels up. :func:`check_torch` verifies that this layout is
present, so an incompatible torch is a clear error at start, not a silent pass.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import CodeType, FrameType, ModuleType
from typing import TYPE_CHECKING, Any

from .identity import IdentityMap

if TYPE_CHECKING:
    from .guards import GraphBreak

# The oldest torch this release is tested on (.ci/torch-matrix; CI runs 2.13 and the newest).
# 2.9+ call pre-compile hooks; 2.6 to 2.8 are reached through the limit check (see _register).
MIN_TORCH = (2, 7)
MIN_TORCH_TEXT = ".".join(map(str, MIN_TORCH))

# Locals of torch._dynamo.convert_frame._compile that the hook reads (as in 2.13 and 2.14).
_COMPILE_LOCALS = ("code", "frame", "cache_size", "compile_id")
# Resume functions created at graph breaks are named like this (torch/_dynamo/resume_execution.py).
RESUME_PREFIX = "torch_dynamo_resume_in_"
# torch.compile(module) of a torch-owned module compiles external_utils.wrap_inline's inner.
_WRAPPER_FILE = os.path.join("_dynamo", "external_utils.py")
# torch's wrapper code -> compile id of each of its entries -> the callable it was made for.
_WRAPPED: IdentityMap[CodeType, dict[str, CodeType]] = IdentityMap()
_CONVERT_FILE = os.path.join("_dynamo", "convert_frame.py")
# Metric capacity while a tracker is active (torch keeps 64 by default).
METRICS_CAPACITY = 4096


class TorchUnsupported(RuntimeError):
    """torch is missing, too old, or lacks an internal the gate needs."""


class InternalError(RuntimeError):
    """torch's compile path no longer looks the way this module expects."""


@dataclass(frozen=True)
class CompileEvent:
    """One frame compile, as seen before torch does the work."""

    code: CodeType  # the code object that gets the cache entry (may be a resume function)
    function: CodeType  # the user's function it belongs to (resume frames map to their parent)
    label: str | None  # a better name than function.co_qualname, for module wrappers
    compile_id: str  # "frame/attempt", as torch prints it: "0/3"
    is_recompile: bool  # torch found cache entries whose guards all failed
    reasons: tuple[str, ...]  # one per rejecting cache entry, newest entry first
    leaf_kinds: tuple[str | None, ...]  # the failing leaf guard's type name, per reason
    limit: str | None  # "recompile_limit (8)" when this compile hits the limit (eager fallback)
    # the value the call passed, by the source of each failing ``==`` guard: "G['step']" -> "1"
    values: Mapping[str, str] = field(default_factory=dict)


def torch_version() -> str | None:
    """The installed torch version, without importing torch."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_version() -> str:
    """Check the installed torch version without importing torch; raise TorchUnsupported."""
    version = torch_version()
    if version is None:
        raise TorchUnsupported(
            "pytest-recompile: torch is not installed, but the recompile gate was asked for. "
            f"Install torch >= {MIN_TORCH_TEXT} (pip install 'torch>={MIN_TORCH_TEXT}'), "
            "or drop --recompile-budget / recompile_budget and the max_recompiles markers."
        )
    if _version_tuple(version) < MIN_TORCH:
        raise TorchUnsupported(
            f"pytest-recompile: torch {version} is too old for the recompile gate; "
            f"it needs torch >= {MIN_TORCH_TEXT}, the oldest release it is tested on "
            f"(pip install -U 'torch>={MIN_TORCH_TEXT}')."
        )
    return version


@functools.cache
def check_torch() -> str:
    """Import torch and check that it has what the gate reads; return its version."""
    version = check_version()
    import torch._dynamo
    import torch._dynamo.cache_size as cache_size
    import torch._dynamo.convert_frame as convert_frame

    missing = []
    hooks = hasattr(torch._dynamo, "register_hook_for_recompile_user_context")
    if not hooks and not hasattr(convert_frame, _LIMIT_CHECK):
        missing.append(f"register_hook_for_recompile_user_context or convert_frame.{_LIMIT_CHECK}")
    missing += [] if hasattr(cache_size, _LIMIT_CHECK) else [f"cache_size.{_LIMIT_CHECK}"]
    missing += [] if hasattr(cache_size, "is_recompilation") else ["cache_size.is_recompilation"]
    names = convert_frame._compile.__code__.co_varnames
    missing += [f"_compile local {n!r}" for n in _COMPILE_LOCALS if n not in names]
    if missing:
        raise TorchUnsupported(
            f"pytest-recompile: torch {version} lacks what the gate reads: {', '.join(missing)}. "
            "Please report this with your torch version."
        )
    return version


# --- compile events -----------------------------------------------------------------------


def _compile_frame(start: FrameType | None) -> FrameType:
    frame = start
    for _ in range(8):
        if frame is None:
            break
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            return frame
        frame = frame.f_back
    raise InternalError(
        "pytest-recompile: internal error: the compile hook was not called from "
        f"torch._dynamo.convert_frame._compile (torch {torch_version()}). Please report this."
    )


def _parent_code(code: CodeType) -> CodeType:
    """Map a graph-break resume function back to the function it was cut from."""
    from torch._dynamo.resume_execution import ContinueExecutionCache

    meta = ContinueExecutionCache.generated_code_metadata
    seen = 0
    while code.co_name.startswith(RESUME_PREFIX) and seen < 64:
        entry = meta.get(code)
        if entry is None:
            break
        code = entry.code
        seen += 1
    return code


def _function_of(value: Any) -> Any:
    """The plain function behind a bound method, a partial or a callable object."""
    for _ in range(16):
        if isinstance(value, functools.partial):
            value = value.func
        elif hasattr(value, "__func__"):
            value = value.__func__
        else:
            break
    return value


def _named(fn: Any) -> tuple[CodeType, str] | None:
    """(code, qualname) of the user's function behind ``fn``, decorators unwrapped."""
    import torch

    if isinstance(fn, torch.nn.Module):
        forward = getattr(type(fn).forward, "__code__", None)
        if isinstance(forward, CodeType):
            return forward, f"{type(fn).__qualname__}.forward"
        return None
    fn = _function_of(fn)
    with contextlib.suppress(ValueError):  # a __wrapped__ cycle
        fn = _function_of(inspect.unwrap(fn))
    code = getattr(fn, "__code__", None)
    if isinstance(code, CodeType):
        return code, str(getattr(fn, "__qualname__", code.co_name))
    calls = [vars(cls)["__call__"] for cls in type(fn).__mro__ if "__call__" in vars(cls)]
    code = getattr(calls[0], "__code__", None) if calls else None  # a callable object
    if isinstance(code, CodeType):
        return code, f"{type(fn).__qualname__}.__call__"
    return None


def _caller_function(code: CodeType, compile_frame: FrameType) -> Any:
    """The function object whose frame is being compiled, found in its caller's locals.

    The frame Dynamo compiles is not on the Python stack yet; its caller is, right below
    torch's frames (``forward_call`` in ``Module._call_impl``, ``fn`` in a wrapper).
    """
    frame = compile_frame.f_back
    while frame is not None and frame.f_code.co_filename.endswith(_CONVERT_FILE):
        frame = frame.f_back
    if frame is None:
        return None
    for value in list(frame.f_locals.values()):
        if getattr(_function_of(value), "__code__", None) is code:
            return value
    return None


def _user_target(
    code: CodeType, user_frame: Any, compile_frame: FrameType
) -> tuple[CodeType, str] | None:
    """A better name than the compiled code's own, where torch or a decorator stands between.

    - ``torch.compile`` of a torch module, a ``functools.partial`` or a callable object
      compiles ``external_utils.wrap_inline``'s ``inner``: name what it wraps;
    - a function decorated with ``functools.wraps`` compiles the decorator's wrapper:
      name the function it wraps (``__wrapped__``).
    """
    if code.co_name == "inner" and code.co_filename.endswith(_WRAPPER_FILE):
        return _named(user_frame.f_locals.get("fn"))
    if not code.co_freevars and "<locals>" not in qualname(code):
        return None
    fn = _caller_function(code, compile_frame)
    if fn is None or not hasattr(_function_of(fn), "__wrapped__"):
        return None
    found = _named(fn)
    return found if found is not None and found[0] is not code else None


_QUALNAMES: weakref.WeakKeyDictionary[CodeType, str] = weakref.WeakKeyDictionary()


def qualname(code: CodeType) -> str:
    """A code object's qualified name (``Model.forward``, ``make.<locals>.add``).

    Python 3.11+ keeps it on the code object; 3.10 only on the function, found once per code
    object among the objects that refer to it.
    """
    known = getattr(code, "co_qualname", None) or _QUALNAMES.get(code)
    if known:
        return str(known)
    import gc

    name = next(
        (
            str(fn.__qualname__)
            for fn in gc.get_referrers(code)
            if getattr(fn, "__code__", None) is code and hasattr(fn, "__qualname__")
        ),
        code.co_name,
    )
    _QUALNAMES[code] = name
    return name


def _event_from(compile_frame: FrameType) -> CompileEvent:
    from torch._dynamo import config
    from torch._dynamo.cache_size import exceeds_recompile_limit, is_recompilation

    loc = compile_frame.f_locals
    code: CodeType = loc["code"]
    user_frame = loc["frame"]
    cache_size = loc["cache_size"]
    compile_id = loc["compile_id"]
    reasons = tuple(loc.get("reasons") or ())
    entries = loc.get("cache_entries_for_reasons")
    if entries is None:
        entries = _entry_list(code)
    entries = list(entries)
    kept = kept_entries(code)
    if kept and user_frame is not None:
        # Entries re-installed by keep_only() are invisible to torch's count and reasons:
        # count them toward torch's limits (so recompile_limit means what the user set) and
        # give their guard failures, as torch would have.
        reasons += _kept_reasons(kept, user_frame, loc.get("compiler_fn"))
        _count_kept(cache_size, user_frame, kept)
        entries += kept
    recompile = bool(user_frame is not None and is_recompilation(cache_size))
    exceeded, limit_type = exceeds_recompile_limit(cache_size, compile_id)
    function, label = _parent_code(code), None
    if user_frame is not None:
        named = _user_target(function, user_frame, compile_frame)
        if named is not None:
            if function.co_filename.endswith(_WRAPPER_FILE):
                # torch hangs every wrapped callable's entries on one wrapper: those made for
                # another callable are not this one's (entries made before the first hook
                # was installed are unknown, and kept).
                present = {str(e.compile_id) for e in entries}
                made_for = {
                    k: v for k, v in _WRAPPED.get(code, {}).items() if k in present
                }  # forget entries that are gone
                made_for[str(compile_id)] = named[0]
                _WRAPPED[code] = made_for
                reasons = tuple(
                    r for r in reasons if made_for.get(r.partition(":")[0], named[0]) is named[0]
                )
                recompile = recompile and bool(reasons)
            function, label = named
    return CompileEvent(
        code=code,
        function=function,
        label=label,
        compile_id=str(compile_id),
        is_recompile=recompile,
        reasons=reasons,
        leaf_kinds=failing_leaf_kinds(entries, reasons) if recompile else (),
        limit=f"{limit_type} ({getattr(config, limit_type)})" if exceeded else None,
        values=_equals_values(reasons, user_frame) if recompile else {},
    )


_EQUALS_SOURCE = re.compile(r"^(?:\d+/\d+:\s*)?(?P<source>[\w.\[\]']+) == ")


def _equals_values(reasons: tuple[str, ...], user_frame: Any) -> dict[str, str]:
    """The values the call passed for the sources of failing ``==`` guards (read while the
    frame is alive: torch frees it after the compile)."""
    from .guards import normalise_scope

    values = {}
    for raw in reasons:
        match = _EQUALS_SOURCE.match(raw.strip())
        if match is None:
            continue
        source = normalise_scope(match.group("source"))
        found = _read_source(match.group("source"), user_frame)
        if type(found) in _PLAIN:  # a repr that runs no user code
            text = repr(found)
            values[source] = text if len(text) <= 80 else text[:77] + "..."
    return values


# Values EQUALS_MATCH guards compare that have a builtin repr.
_PLAIN = (int, float, bool, str, bytes, complex, type(None))


_MISSING = object()


def _read_source(source: str, user_frame: Any) -> Any:
    """Evaluate a guard source (``G['step']``, ``L['self'].lr``, ``k``) against the frame,
    without running user code: names, constant subscripts of dicts, lists and tuples, and
    attributes found without calling properties or ``__getattr__``."""
    try:
        node = ast.parse(source, mode="eval").body
        scope = {"L": user_frame.f_locals, "G": user_frame.f_globals}
        return _evaluate(node, scope, user_frame)
    except Exception:  # anything unexpected: no value, never an error
        return _MISSING


def _evaluate(node: ast.AST, scope: dict[str, Any], user_frame: Any) -> Any:
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        for names in (user_frame.f_locals, user_frame.f_globals):
            if node.id in names:
                return names[node.id]
        return _MISSING
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = _evaluate(node.value, scope, user_frame)
        key = node.slice.value
        if type(base) is dict:  # exactly: a defaultdict would insert the key, a subclass run code
            return dict.get(base, key, _MISSING)
        if type(base) in (list, tuple) or type(base).__name__ == "FrameLocalsProxy":
            return base[key]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _evaluate(node.value, scope, user_frame)
        if base is _MISSING:
            return _MISSING
        found = inspect.getattr_static(base, node.attr)
        return _MISSING if hasattr(type(found), "__get__") and not callable(found) else found
    return _MISSING


# --- keeping some cache entries, dropping the rest -----------------------------------------


@dataclass(frozen=True, eq=False)
class KeptEntry:
    """What it takes to put a cache entry back: the same fields torch's CacheEntry has."""

    compile_id: Any  # torch's CompileId (printed "0/1")
    guard_manager: Any
    code: CodeType  # the compiled (transformed) bytecode
    backend: Any = None  # the backend it was compiled for (torch checks it on its own list)


_KEPT: IdentityMap[CodeType, tuple[KeptEntry, ...]] = IdentityMap()


@functools.cache
def can_keep_entries() -> bool:
    """Whether this torch lets single cache entries be kept while the rest are dropped."""
    import torch._C._dynamo.eval_frame as eval_frame
    from torch._dynamo import cache_size, guards

    reason = getattr(guards, "get_guard_fail_reason", None)
    needed = (
        hasattr(eval_frame, "reset_code"),
        hasattr(eval_frame, "_load_precompile_entry"),
        hasattr(eval_frame, "_debug_get_precompile_entries"),
        hasattr(eval_frame, "_reset_precompile_entries"),
        reason is not None and "skip_logging" in inspect.signature(reason).parameters,
        hasattr(cache_size, "_has_same_id_matched_objs"),
        all(
            name in getattr(cache_size.CacheSizeRelevantForFrame, "__dataclass_fields__", {})
            for name in _CACHE_SIZE_FIELDS
        ),
    )
    return all(needed)


_CACHE_SIZE_FIELDS = ("num_cache_entries", "num_cache_entries_with_same_id_matched_objs")


def _dead(entry: Any) -> bool:
    """An entry torch invalidated: an object it matched by identity died (a compiled
    optimizer's step, a module), so torch replaced its guard manager and dropped its code."""
    return entry.code is None or hasattr(entry.guard_manager, "invalidation_reason")


def entries(code: CodeType) -> list[KeptEntry]:
    """The live cache entries on ``code`` that torch counts, newest first (kept ones and
    entries torch invalidated excluded)."""
    return [
        KeptEntry(e.compile_id, e.guard_manager, e.code, getattr(e, "backend", None))
        for e in _entry_list(code)
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
    for reasons: :func:`_event_from` does both. Nor does it check their backend, as it does
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


# The backend a compile is being checked against, while _kept_reasons asks the kept entries
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


def _kept_reasons(
    kept: tuple[KeptEntry, ...], user_frame: Any, compiler_fn: Any
) -> tuple[str, ...]:
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


def _count_kept(cache_size: Any, user_frame: Any, kept: tuple[KeptEntry, ...]) -> None:
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


# Per-process state that mirrors torch's own (its hook list and its cache lists are global):
# the callbacks behind the one hook, and the entries re-installed by keep_only().
_SUBSCRIBERS: list[Callable[[CompileEvent], None]] = []
_UNREGISTER: list[Callable[[], None]] = []  # how to take the one hook out of torch again
# Before 2.9 the limit check of convert_frame._compile is the interception point; it runs once
# per frame compile, after the guard-failure reasons are computed.
_LIMIT_CHECK = "exceeds_recompile_limit"


def _hook() -> str:
    if _SUBSCRIBERS:
        event = _event_from(_compile_frame(sys._getframe(1)))
        for callback in list(_SUBSCRIBERS):
            callback(event)
    return ""


def _register() -> Callable[[], None]:
    """Put :func:`_hook` where torch calls it before each frame compile; return its removal.

    2.9+: torch's own list of pre-compile hooks. Older releases: a wrapper around the limit
    check that ``_compile`` imports by name, put back exactly as it was on removal.
    """
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.utils as dynamo_utils

    if hasattr(dynamo_utils, "register_hook_for_recompile_user_context"):
        was_none = dynamo_utils._recompile_user_contexts is None
        dynamo_utils.register_hook_for_recompile_user_context(_hook)

        def unregister() -> None:
            hooks = dynamo_utils._recompile_user_contexts
            if hooks is not None and _hook in hooks:
                hooks.remove(_hook)
                if not hooks and was_none:
                    dynamo_utils._recompile_user_contexts = None

        return unregister
    original = getattr(convert_frame, _LIMIT_CHECK)

    def checked(cache_size: Any, compile_id: Any) -> Any:
        _hook()
        return original(cache_size, compile_id)

    setattr(convert_frame, _LIMIT_CHECK, checked)

    def restore() -> None:
        if getattr(convert_frame, _LIMIT_CHECK) is checked:
            setattr(convert_frame, _LIMIT_CHECK, original)

    return restore


def install_compile_hook(
    callback: Callable[[CompileEvent], None], *, first: bool = False
) -> Callable[[], None]:
    """Call ``callback`` before every frame compile; return the function that removes it.

    One hook is put into torch however many callbacks there are, so each compile is read once
    and every callback gets the same event, in the order they were installed. An exception
    raised by a callback propagates to the compiled function's caller, the compile does not
    happen and later callbacks do not run (``first=True`` puts a callback before the others).
    Removing the last callback restores torch exactly.
    """
    if not _UNREGISTER:
        _UNREGISTER[:] = [_register()]
    _SUBSCRIBERS.insert(0 if first else len(_SUBSCRIBERS), callback)

    def remove() -> None:
        if callback in _SUBSCRIBERS:
            _SUBSCRIBERS.remove(callback)
        if not _SUBSCRIBERS and _UNREGISTER:
            _UNREGISTER.pop()()

    return remove


def forget_compile_hooks() -> None:
    """Drop every callback and the plugin's compile callbacks (a forked child: the parent's
    gate and trackers live on in the parent, not here, and a lock another thread of the parent
    held is held forever here); torch keeps the one hook, which calls nothing until a new
    callback."""
    _SUBSCRIBERS.clear()
    if _CALLBACKS:
        from torch._dynamo.callback import callback_handler

        for on_start, on_finish in _CALLBACKS:
            if on_start in callback_handler.start_callbacks:
                callback_handler.remove_start_callback(on_start)
            if on_finish in getattr(callback_handler, "end_callbacks", ()):
                callback_handler.remove_end_callback(on_finish)
        _CALLBACKS.clear()


# --- guard trees -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """One leaf guard of a cache entry's guard tree."""

    torch_kind: str  # the C++ leaf type name: TENSOR_MATCH, LENGTH_CHECK, ...
    source: str  # L['x'], G['step'], ...
    code_parts: tuple[str, ...]
    under_module: bool  # a module, or reached through one (G['math'], G['math'].pi)


def _entry_list(code: CodeType) -> list[Any]:
    import torch._C._dynamo.eval_frame as eval_frame

    return list(eval_frame._debug_get_cache_entry_list(code))


def guard_leaves(guard_manager: Any) -> Iterator[Leaf]:
    """Every leaf of a cache entry's guard tree, symbolic-shape guards included."""
    root = guard_manager.root
    scope = (getattr(guard_manager, "global_scope", None) or {}).get("G") or {}

    def walk(manager: Any, under_module: bool) -> Iterator[Leaf]:
        source = manager.get_source()
        leaves = manager.get_leaf_guards()
        parts = [(type(leaf).__name__, tuple(leaf.verbose_code_parts())) for leaf in leaves]
        is_module = _guards_a_module(manager, scope)
        for kind, code_parts in parts:
            yield Leaf(kind, source, code_parts, under_module or is_module)
        for child in manager.get_child_managers():
            yield from walk(child, under_module or is_module)

    yield from walk(root, False)
    for guard in root.get_epilogue_lambda_guards():
        yield Leaf(type(guard).__name__, "", tuple(guard.verbose_code_parts()), False)


_GLOBAL_NAME = re.compile(r"^G\['(?P<name>[^']+)'\]$")


def _guards_a_module(manager: Any, scope: dict[str, Any]) -> bool:
    """Whether a guard-tree node guards a module (G['math']): what it reaches is a library's.

    2.9+ nodes know the type of the value they guard; before, a global's value is looked up
    in the globals the guards were built with (``scope``). The guard's text says it
    differently per release (2.13: ``type=<class 'module'>``, 2.10-2.12: the module's repr,
    2.9: nothing), so it is not used.
    """
    typed = getattr(manager, "get_type_of_guarded_value", None)
    if typed is not None:
        with contextlib.suppress(Exception):
            return isinstance(typed(), type) and issubclass(typed(), ModuleType)
    named = _GLOBAL_NAME.match(manager.get_source())
    return named is not None and isinstance(scope.get(named.group("name")), ModuleType)


def failing_leaf_kinds(entries: list[Any], reasons: tuple[str, ...]) -> tuple[str | None, ...]:
    """For each reason ("0/1: G['step'] == 0"), the type of the leaf in entry 0/1 that says so.

    None where the reason is not a leaf's code part (torch words tensor mismatches itself).
    """
    from .guards import same_guard_text

    by_id = {str(entry.compile_id): entry for entry in entries}
    kinds: list[str | None] = []
    for raw in reasons:
        entry_id, _, text = raw.partition(": ")
        entry = by_id.get(entry_id.strip())
        key = same_guard_text(text)
        kind = None
        if entry is not None and key:
            for leaf in guard_leaves(entry.guard_manager):
                if any(same_guard_text(part) == key for part in leaf.code_parts):
                    kind = leaf.torch_kind
                    break
        kinds.append(kind)
    return tuple(kinds)


def installed(code: CodeType) -> Iterator[tuple[str, Leaf]]:
    """(cache entry id, leaf) for every guard installed on ``code``'s cache entries."""
    for entry in _entry_list(code):
        for leaf in guard_leaves(entry.guard_manager):
            yield str(entry.compile_id), leaf


# --- graph breaks ------------------------------------------------------------------------------


def can_error_on_graph_break() -> bool:
    """torch.compile's fullgraph switch for a block (2.9+)."""
    import torch._dynamo

    return hasattr(torch._dynamo, "error_on_graph_break")


@contextmanager
def error_on_graph_break(value: bool = True) -> Iterator[None]:
    """Fullgraph semantics for compiles inside the block (``value=False``: none, inside a
    block that has them), without touching the compile calls.

    torch.compile calls that pass error_on_graph_break= themselves keep their own setting.
    """
    import torch._dynamo

    with torch._dynamo.error_on_graph_break(value):
        yield


def graph_break_count() -> int:
    import torch._dynamo.utils as dynamo_utils

    return len(dynamo_utils.graph_break_reasons)


def graph_breaks_since(mark: int) -> list[GraphBreak]:
    """GraphBreaks recorded by torch since ``graph_break_count()`` returned ``mark``."""
    import torch._dynamo.utils as dynamo_utils

    from .guards import graph_break

    reasons = dynamo_utils.graph_break_reasons
    found = reasons[mark:] if len(reasons) >= mark else reasons  # a reset() cleared the list
    result = []
    for compile_reason in found:
        frame = compile_reason.user_stack[-1] if compile_reason.user_stack else None
        result.append(
            graph_break(
                compile_reason.reason,
                frame.filename if frame else "?",
                (frame.lineno or 0) if frame else 0,
                frame.name if frame else "?",
                (frame.line or "") if frame else "",
            )
        )
    return result


def graph_break_error(exc: BaseException) -> GraphBreak | None:
    """The GraphBreak behind a fullgraph error torch raised at a break, else None."""
    from torch._dynamo.exc import Unsupported

    from .guards import graph_break

    if not isinstance(exc, Unsupported):
        return None
    stack = getattr(exc, "real_stack", None) or []
    frame = stack[-1] if stack else None
    text = getattr(exc, "msg", None) or str(exc)
    return graph_break(
        text,
        frame.filename if frame else "?",
        (frame.lineno or 0) if frame else 0,
        frame.name if frame else "?",
        (frame.line or "") if frame else "",
    )


# --- CUDA graphs ---------------------------------------------------------------------------------


_CALLBACKS: list[tuple[Callable[..., None], Callable[..., None]]] = []  # the blocks' own


@dataclass(frozen=True)
class CompileCallbacks:
    """What a block's compile callbacks collect, and how to put them back after a reset."""

    recordings: list[str]  # compile id of each CUDA-graph recording (mode="reduce-overhead")
    rearm: Callable[[], None]  # register again what torch._dynamo.reset() dropped


@contextmanager
def block_callbacks(on_end: Callable[[], None]) -> Iterator[CompileCallbacks]:
    """torch's compile callbacks for the block: count CUDA-graph recordings, and call
    ``on_end`` after each compile.

    A re-record is not a Dynamo recompile: no cache entry, no guard. torch announces each
    recording to compile start callbacks with the CUDAGRAPH_RECORDING trigger (2.7+).
    ``torch._dynamo.reset()`` drops compile callbacks: call ``rearm`` after one (the tracker
    does at each compile).
    """
    found: list[str] = []
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        yield CompileCallbacks(found, lambda: None)
        return
    import torch._dynamo.callback as callback_module

    trigger = getattr(getattr(callback_module, "CallbackTrigger", None), "CUDAGRAPH_RECORDING", 0)
    ends = hasattr(callback_handler, "register_end_callback")

    def on_start(*args: Any) -> None:  # CallbackArgs (2.8+); no argument before
        if args and getattr(args[0], "callback_trigger", None) == trigger:
            found.append(str(args[0].compile_id))

    def on_finish(*args: Any) -> None:
        on_end()

    def rearm() -> None:
        if on_start not in callback_handler.start_callbacks:
            callback_handler.register_start_callback(on_start)
        if ends and on_finish not in callback_handler.end_callbacks:
            callback_handler.register_end_callback(on_finish)

    rearm()
    pair = (on_start, on_finish)
    _CALLBACKS.append(pair)
    try:
        yield CompileCallbacks(found, rearm)
    finally:
        if pair in _CALLBACKS:
            _CALLBACKS.remove(pair)
        if on_start in callback_handler.start_callbacks:
            callback_handler.remove_start_callback(on_start)
        if ends and on_finish in callback_handler.end_callbacks:
            callback_handler.remove_end_callback(on_finish)


# --- stance ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompileState:
    """What a test can change and forget to change back: the stance and Dynamo's config."""

    stance: Any
    config: dict[str, Any]


def compile_state() -> CompileState:
    import torch._dynamo.config as config
    import torch._dynamo.eval_frame as eval_frame

    return CompileState(eval_frame._stance, config.get_config_copy())


def restore_compile_state(saved: CompileState) -> list[str]:
    """Put back what changed since ``saved``; return what that was, in words."""
    import torch._dynamo.config as config
    import torch._dynamo.eval_frame as eval_frame

    changed = []
    if eval_frame._stance != saved.stance:
        changed.append(f"stance {eval_frame._stance.stance!r}")
        eval_frame._set_stance(saved.stance)
    now = config.get_config_copy()
    differing = {k: v for k, v in saved.config.items() if now.get(k) != v}
    if differing:
        changed += [f"torch._dynamo.config.{k}={now.get(k)!r}" for k in sorted(differing)]
        config.load_config(differing)
    return changed


# --- caches, metrics ------------------------------------------------------------------------


def reset_caches() -> None:
    """Drop every compiled entry, guard-failure record and automatic-dynamic state."""
    import torch._dynamo

    torch._dynamo.reset()


def cache_entries(code: CodeType) -> int:
    return len(_entry_list(code))


CompileKey = tuple[str, int, str, str]


def compile_key(code: CodeType, compile_id: Any) -> CompileKey:
    """What names one compile: its code object (as torch's metrics name it) and its id.

    The id alone repeats: torch restarts ids after a reset, and newer torch numbers frames
    per ``isolate_recompiles`` region."""
    return (code.co_filename, code.co_firstlineno, code.co_name, str(compile_id))


@contextmanager
def compile_seconds() -> Iterator[dict[CompileKey, float]]:
    """Collect ``entire_frame_compile_time_s`` of the compiles made inside the block.

    The dict (:func:`compile_key` -> seconds) is filled when the block exits. torch keeps 64
    metrics by default; the capacity is raised for the block and restored after it.
    """
    import torch._dynamo.utils as dynamo_utils

    old_capacity = dynamo_utils._compilation_metrics.maxlen or 64
    dynamo_utils.set_compilation_metrics_limit(max(old_capacity, METRICS_CAPACITY))
    existing = {id(m) for m in dynamo_utils._compilation_metrics}
    result: dict[CompileKey, float] = {}
    try:
        yield result
    finally:
        for metric in dynamo_utils._compilation_metrics:
            if id(metric) in existing or metric.is_forward is False:
                continue
            seconds = metric.entire_frame_compile_time_s
            if metric.compile_id is not None and seconds is not None:
                key = (
                    str(metric.co_filename),
                    int(metric.co_firstlineno or 0),
                    str(metric.co_name),
                    str(metric.compile_id),
                )
                result[key] = result.get(key, 0.0) + float(seconds)
        dynamo_utils.set_compilation_metrics_limit(old_capacity)


@functools.cache
def device_summary() -> str:
    """What the compiled code runs on here: "cpu", or the CUDA devices by name."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return "cuda: " + ", ".join(names)


# --- read only by the plugin's own tests (restoration checks) -------------------------


def current_stance() -> str:
    import torch._dynamo.eval_frame as eval_frame

    return str(eval_frame._stance.stance)


def installed_hooks() -> int:
    """How many pre-compile hooks torch holds (restoration checks); before 2.9, whether the
    limit check is wrapped."""
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.utils as dynamo_utils

    if hasattr(dynamo_utils, "register_hook_for_recompile_user_context"):
        return len(dynamo_utils._recompile_user_contexts or ())
    return int(getattr(convert_frame, _LIMIT_CHECK).__module__ == __name__)


def metrics_capacity() -> int | None:
    """How many compile metrics torch keeps (restoration checks)."""
    import torch._dynamo.utils as dynamo_utils

    return dynamo_utils._compilation_metrics.maxlen


def compile_callbacks() -> int:
    """How many compile start callbacks torch holds (restoration checks)."""
    from torch._dynamo.callback import callback_handler

    return len(callback_handler.start_callbacks)


# torch's structured-trace logger (torch/_logging/_internal.py): it never propagates, and torch
# builds each structured payload (graphs, guards) whenever it has a handler at all.
_TRACE_LOGGER = "torch.__trace"


@contextmanager
def trace_log_uncaptured() -> Iterator[None]:
    """Keep pytest's log-capture handlers off torch's structured-trace logger while the
    block runs, unless the user asked for torch's logs (``TORCH_LOGS``, ``TORCH_TRACE``).

    pytest 9 attaches its handlers to every non-propagating logger: torch then fills the
    captured log of a failing test with empty ``DEBUG torch.__trace`` lines and builds every
    trace payload for nobody. torch's own handlers (a ``TORCH_TRACE`` file) are untouched.
    """
    if os.environ.get("TORCH_LOGS") or os.environ.get("TORCH_TRACE"):
        yield
        return
    import logging

    logger = logging.getLogger(_TRACE_LOGGER)
    removed = [h for h in logger.handlers if type(h).__module__ == "_pytest.logging"]
    for handler in removed:
        logger.removeHandler(handler)
    try:
        yield
    finally:
        for handler in removed:
            logger.addHandler(handler)
