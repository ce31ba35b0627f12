"""Compile events: what one frame compile is, read from torch's ``convert_frame._compile``
frame before torch does the work, and the names of the user's functions behind it."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from ..model.identity import IdentityMap
from . import backends, entries, fingerprints, guard_tree, stand_ins, versions

# Resume functions created at graph breaks are named like this (torch/_dynamo/resume_execution.py).
RESUME_PREFIX = "torch_dynamo_resume_in_"


# torch.compile(module) of a torch-owned module compiles external_utils.wrap_inline's inner.
_WRAPPER_FILE = os.path.join("_dynamo", "external_utils.py")


# torch's wrapper code -> compile id of each of its entries -> the callable it was made for.
_WRAPPED: IdentityMap[CodeType, dict[str, CodeType]] = IdentityMap()


_CONVERT_FILE = os.path.join("_dynamo", "convert_frame.py")


@dataclass(frozen=True)
class CompileEvent:
    """One frame compile, as seen before torch does the work."""

    code: CodeType  # the code object that gets the cache entry (may be a resume function)
    function: CodeType  # the user's function it belongs to (resume frames map to their parent)
    label: str | None  # a better name than function.co_qualname, for module wrappers
    compile_id: str  # "frame/attempt", as torch prints it: "0/3"
    is_recompile: bool  # torch found cache entries whose guards all failed
    reasons: tuple[str, ...]  # one per rejecting cache entry, in torch's order of entries
    leaf_kinds: tuple[str | None, ...]  # the failing leaf guard's type name, per reason
    limit: str | None  # "recompile_limit (8)" when this compile hits the limit (eager fallback)
    # at the limit, torch raises FailOnRecompileLimitHit instead of falling back to eager
    # (``fail_on_recompile_limit_hit``, or fullgraph): the user's code gets torch's exception
    refused: bool = False
    # the value the call passed, by the source of each failing ``==`` guard: "G['step']" -> "1"
    values: Mapping[str, str] = field(default_factory=dict)
    # the dynamic-shape marks on the inputs (fingerprints.input_marks): they decide what it makes
    marks: fingerprints.Marks | None = ()
    filtered: bool = False  # compiled under a guard_filter_fn (fewer guards than a plain one)
    inductor: bool = True  # its backend may read inductor's config
    name: str | None = None  # torch.compile(..., name=...), where torch keeps it
    # the call's arguments, tensors as descriptions: its entry's guard check is timed on them
    inputs: stand_ins.Captured | None = None


CompileKey = tuple[str, int, str, str]


def compile_key(code: CodeType, compile_id: Any) -> CompileKey:
    """What names one compile: its code object (as torch's metrics name it) and its id.

    The id alone repeats: torch restarts ids after a reset, and newer torch numbers frames
    per ``isolate_recompiles`` region."""
    return (code.co_filename, code.co_firstlineno, code.co_name, str(compile_id))


def compile_frame(start: FrameType | None) -> FrameType:
    frame = start
    for _ in range(8):
        if frame is None:
            break
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            return frame
        frame = frame.f_back
    raise versions.InternalError(
        "pytest-recompile: internal error: the compile hook was not called from torch._dynamo."
        f"convert_frame._compile (torch {versions.torch_version()}). Please report this."
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


def event_from(compile_frame: FrameType) -> CompileEvent:
    from torch._dynamo import config
    from torch._dynamo.cache_size import exceeds_recompile_limit, is_recompilation

    loc = compile_frame.f_locals
    code: CodeType = loc["code"]
    user_frame = loc["frame"]
    cache_size = loc["cache_size"]
    compile_id = loc["compile_id"]
    reasons = tuple(loc.get("reasons") or ())
    listed = loc.get("cache_entries_for_reasons")
    if listed is None:
        listed = entries.entry_list(code)
    listed = list(listed)
    kept = entries.kept_entries(code)
    torch_saw = False  # torch itself took this compile for a recompile
    if kept and user_frame is not None:
        # Entries re-installed by keep_only() are invisible to torch's count and reasons:
        # count them toward torch's limits (so recompile_limit means what the user set) and
        # give their guard failures, as torch would have.
        torch_saw = is_recompilation(cache_size)
        region = entries.calling_region()
        seen = entries.for_region(kept, region)
        reasons += entries.kept_reasons(seen, user_frame, loc.get("compiler_fn"))
        entries.count_kept(cache_size, user_frame, kept, region)
        listed += seen
    recompile = bool(user_frame is not None and is_recompilation(cache_size))
    if not kept and not recompile and user_frame is not None:
        # A torch that keeps no single entries: the full reset before this test dropped
        # entries it would have alone (a wider fixture's warm-up). Where they all reject the
        # call, torch would have logged a recompile and raised for error_on_recompile.
        dropped = entries.dropped_entries(code)
        compiler_fn = loc.get("compiler_fn")
        failed = entries.dropped_reasons(dropped, user_frame, compiler_fn) if dropped else ()
        if failed:
            entries.recompiling(code, failed)
    entries.note_backend(code, compile_id, loc.get("compiler_fn"))
    exceeded, limit_type = exceeds_recompile_limit(cache_size, compile_id)
    function, label = _parent_code(code), None
    if user_frame is not None:
        named = _user_target(function, user_frame, compile_frame)
        if named is not None:
            if function.co_filename.endswith(_WRAPPER_FILE):
                # torch hangs every wrapped callable's entries on one wrapper: those made for
                # another callable are not this one's (entries made before the first hook
                # was installed are unknown, and kept).
                # Kept for every entry made, listed now or not: an entry set aside for this
                # test (a fixture's it does not use, an offer) may answer a later one. A compile
                # id torch numbers again after a reset is overwritten by the newer compile.
                made_for = _WRAPPED.setdefault(code, {})
                made_for[str(compile_id)] = named[0]
                reasons = tuple(
                    r for r in reasons if made_for.get(r.partition(":")[0], named[0]) is named[0]
                )
                recompile = recompile and bool(reasons)
            function, label = named
    if recompile and kept and not torch_saw:
        # A recompile only because of kept entries: torch, which would have had them on its
        # own list, logs it and raises for error_on_recompile before this hook; so does this.
        entries.recompiling(code, reasons)
    return CompileEvent(
        code=code,
        function=function,
        label=label,
        compile_id=str(compile_id),
        is_recompile=recompile,
        reasons=reasons,
        leaf_kinds=guard_tree.failing_leaf_kinds(listed, reasons) if recompile else (),
        limit=_limit_said(compile_frame, limit_type, getattr(config, limit_type))
        if exceeded
        else None,
        refused=bool(exceeded and (config.fail_on_recompile_limit_hit or loc.get("one_graph"))),
        values=_equals_values(reasons, user_frame) if recompile else {},
        marks=fingerprints.input_marks(user_frame.f_locals) if user_frame is not None else None,
        filtered=backends.hooks_filter_guards(loc.get("hooks")),
        inductor=backends.reads_inductor_config(loc.get("compiler_fn")),
        name=backends.compile_name(loc.get("compiler_fn")),
        inputs=stand_ins.capture(user_frame.f_locals) if user_frame is not None else None,
    )


def _limit_said(compile_frame: FrameType, limit_type: str, value: object) -> str:
    """The limit a compile hit, as messages name it: ``recompile_limit (8)``, or, where the
    limit is the ``torch.compile(..., recompile_limit=N)`` of that call (torch 2.13 and newer
    patch the config to it around the compile), ``torch.compile(recompile_limit=2)``."""
    if limit_type == "recompile_limit":
        frame, depth = compile_frame.f_back, 0
        while frame is not None and depth < _CALLER_DEPTH:
            own = getattr(frame.f_locals.get("self"), "_recompile_limit", None)
            if isinstance(own, int) and own == value:
                return f"torch.compile(recompile_limit={own})"
            frame, depth = frame.f_back, depth + 1
    return f"{limit_type} ({value})"


_CALLER_DEPTH = 4  # ConvertFrameAssert.__call__ sits within a few frames of _compile


_EQUALS_SOURCE = re.compile(r"^(?:\d+/\d+:\s*)?(?P<source>[\w.\[\]']+) == ")


def _equals_values(reasons: tuple[str, ...], user_frame: Any) -> dict[str, str]:
    """The values the call passed for the sources of failing ``==`` guards (read while the
    frame is alive: torch frees it after the compile)."""
    from .reasons import normalise_scope

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
