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

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .guards import GraphBreak

# The oldest torch this release is tested on (CI: 2.13; 2.14.1 by .ci/torch-version). The
# pre-compile hook it relies on appeared in 2.9; 2.9 to 2.12 are not tested, so not claimed.
MIN_TORCH = (2, 13)
MIN_TORCH_TEXT = ".".join(map(str, MIN_TORCH))

# Locals of torch._dynamo.convert_frame._compile that the hook reads (as in 2.13 and 2.14).
_COMPILE_LOCALS = ("code", "frame", "cache_size", "compile_id")
# Resume functions created at graph breaks are named like this (torch/_dynamo/resume_execution.py).
RESUME_PREFIX = "torch_dynamo_resume_in_"
# torch.compile(module) of a torch-owned module compiles external_utils.wrap_inline's inner.
_WRAPPER_FILE = os.path.join("_dynamo", "external_utils.py")
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
    import torch._dynamo.convert_frame as convert_frame

    missing = [
        name
        for name in ("register_hook_for_recompile_user_context",)
        if not hasattr(torch._dynamo, name)
    ]
    import torch._dynamo.cache_size as cache_size

    missing += [
        f"cache_size.{name}"
        for name in ("exceeds_recompile_limit", "is_recompilation")
        if not hasattr(cache_size, name)
    ]
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


def _wrapped_target(code: CodeType, frame: Any) -> tuple[CodeType, str] | None:
    """torch.compile(nn.Linear(...)) compiles a torch-internal wrapper; name what it wraps."""
    if code.co_name != "inner" or not code.co_filename.endswith(_WRAPPER_FILE):
        return None
    import torch

    fn = frame.f_locals.get("fn")
    if isinstance(fn, torch.nn.Module):
        forward = getattr(type(fn).forward, "__code__", None)
        if isinstance(forward, CodeType):
            return forward, f"{type(fn).__qualname__}.forward"
        return None
    target = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if isinstance(target, CodeType):
        return target, getattr(fn, "__qualname__", target.co_name)
    return None


def _event_from(compile_frame: FrameType) -> CompileEvent:
    from torch._dynamo import config
    from torch._dynamo.cache_size import exceeds_recompile_limit, is_recompilation

    loc = compile_frame.f_locals
    code: CodeType = loc["code"]
    user_frame = loc["frame"]
    cache_size = loc["cache_size"]
    compile_id = loc["compile_id"]
    recompile = bool(user_frame is not None and is_recompilation(cache_size))
    exceeded, limit_type = exceeds_recompile_limit(cache_size, compile_id)
    reasons = tuple(loc.get("reasons") or ())
    entries = loc.get("cache_entries_for_reasons")
    if entries is None:
        entries = _entry_list(code)
    function, label = _parent_code(code), None
    wrapped = _wrapped_target(function, user_frame) if user_frame is not None else None
    if wrapped is not None:
        function, label = wrapped
    return CompileEvent(
        code=code,
        function=function,
        label=label,
        compile_id=str(compile_id),
        is_recompile=recompile,
        reasons=reasons,
        leaf_kinds=failing_leaf_kinds(entries, reasons) if recompile else (),
        limit=f"{limit_type} ({getattr(config, limit_type)})" if exceeded else None,
    )


def install_compile_hook(callback: Callable[[CompileEvent], None]) -> Callable[[], None]:
    """Call ``callback`` before every frame compile; return the function that removes it.

    An exception raised by ``callback`` propagates to the compiled function's caller and
    the compile does not happen. Removal restores torch's hook list exactly.
    """
    import torch._dynamo.utils as dynamo_utils

    def hook() -> str:
        callback(_event_from(_compile_frame(sys._getframe(1))))
        return ""

    before = dynamo_utils._recompile_user_contexts
    dynamo_utils.register_hook_for_recompile_user_context(hook)

    def remove() -> None:
        hooks = dynamo_utils._recompile_user_contexts
        if hooks is not None and hook in hooks:
            hooks.remove(hook)
            if not hooks and before is None:
                dynamo_utils._recompile_user_contexts = None

    return remove


# --- guard trees -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """One leaf guard of a cache entry's guard tree."""

    torch_kind: str  # the C++ leaf type name: TENSOR_MATCH, LENGTH_CHECK, ...
    source: str  # L['x'], G['step'], ...
    code_parts: tuple[str, ...]
    under_module: bool  # reached through a module object (G['torch'].sin, G['math'].pi)


def _entry_list(code: CodeType) -> list[Any]:
    import torch._C._dynamo.eval_frame as eval_frame

    return list(eval_frame._debug_get_cache_entry_list(code))


def guard_leaves(guard_manager: Any) -> Iterator[Leaf]:
    """Every leaf of a cache entry's guard tree, symbolic-shape guards included."""
    root = guard_manager.root

    def walk(manager: Any, under_module: bool) -> Iterator[Leaf]:
        source = manager.get_source()
        leaves = manager.get_leaf_guards()
        parts = [(type(leaf).__name__, tuple(leaf.verbose_code_parts())) for leaf in leaves]
        is_module = any(
            kind == "ID_MATCH" and any("type=<class 'module'>" in p for p in code_parts)
            for kind, code_parts in parts
        )
        for kind, code_parts in parts:
            yield Leaf(kind, source, code_parts, under_module)
        for child in manager.get_child_managers():
            yield from walk(child, under_module or is_module)

    yield from walk(root, False)
    for guard in root.get_epilogue_lambda_guards():
        yield Leaf(type(guard).__name__, "", tuple(guard.verbose_code_parts()), False)


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


@contextmanager
def error_on_graph_break() -> Iterator[None]:
    """Fullgraph semantics for compiles inside the block, without touching the compile calls.

    torch.compile calls that pass error_on_graph_break= themselves keep their own setting.
    """
    import torch._dynamo

    with torch._dynamo.error_on_graph_break(True):
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


@contextmanager
def cudagraph_recordings() -> Iterator[list[str]]:
    """Compile ids of the CUDA graphs recorded (mode="reduce-overhead") inside the block.

    A re-record is not a Dynamo recompile: no cache entry, no guard. torch announces each
    recording to compile callbacks with the CUDAGRAPH_RECORDING trigger. ``reset()`` drops
    compile callbacks, so a test that resets stops this count (not the recompile count).
    """
    from torch._dynamo.callback import CallbackArgs, CallbackTrigger, callback_handler

    found: list[str] = []

    def on_start(args: CallbackArgs) -> None:
        if args.callback_trigger == CallbackTrigger.CUDAGRAPH_RECORDING:
            found.append(str(args.compile_id))

    callback_handler.register_start_callback(on_start)
    try:
        yield found
    finally:
        if on_start in callback_handler.start_callbacks:
            callback_handler.remove_start_callback(on_start)


# --- stance ------------------------------------------------------------------------------------

STANCE_ERROR = "Detected recompile when torch.compile stance is 'fail_on_recompile'"


@contextmanager
def fail_on_recompile() -> Iterator[None]:
    """torch.compiler.set_stance("fail_on_recompile") for the block; the old stance after it."""
    import torch

    with torch.compiler.set_stance("fail_on_recompile"):
        yield


def is_stance_error(exc: BaseException) -> bool:
    """Whether ``exc`` is torch refusing to compile under the fail_on_recompile stance."""
    return isinstance(exc, RuntimeError) and str(exc).startswith(STANCE_ERROR)


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


def current_stance() -> str:
    import torch._dynamo.eval_frame as eval_frame

    return str(eval_frame._stance.stance)


# --- caches, metrics ------------------------------------------------------------------------


def reset_caches() -> None:
    """Drop every compiled entry, guard-failure record and automatic-dynamic state."""
    import torch._dynamo

    torch._dynamo.reset()


def cache_entries(code: CodeType) -> int:
    return len(_entry_list(code))


@contextmanager
def compile_seconds() -> Iterator[dict[str, float]]:
    """Collect ``entire_frame_compile_time_s`` of the compiles made inside the block.

    The dict (compile id -> seconds) is filled when the block exits. torch keeps 64
    metrics by default; the capacity is raised for the block and restored after it.
    """
    import torch._dynamo.utils as dynamo_utils

    old_capacity = dynamo_utils._compilation_metrics.maxlen or 64
    dynamo_utils.set_compilation_metrics_limit(max(old_capacity, METRICS_CAPACITY))
    existing = {id(m) for m in dynamo_utils._compilation_metrics}
    result: dict[str, float] = {}
    try:
        yield result
    finally:
        for metric in dynamo_utils._compilation_metrics:
            if id(metric) in existing or metric.is_forward is False:
                continue
            seconds = metric.entire_frame_compile_time_s
            if metric.compile_id is not None and seconds is not None:
                key = str(metric.compile_id)
                result[key] = result.get(key, 0.0) + float(seconds)
        dynamo_utils.set_compilation_metrics_limit(old_capacity)


def installed_hooks() -> int:
    """How many pre-compile hooks torch holds (restoration checks)."""
    import torch._dynamo.utils as dynamo_utils

    return len(dynamo_utils._recompile_user_contexts or ())


def metrics_capacity() -> int | None:
    """How many compile metrics torch keeps (restoration checks)."""
    import torch._dynamo.utils as dynamo_utils

    return dynamo_utils._compilation_metrics.maxlen


@functools.cache
def device_summary() -> str:
    """What the compiled code runs on here: "cpu", or the CUDA devices by name."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return "cuda: " + ", ".join(names)


def compile_callbacks() -> int:
    """How many compile start callbacks torch holds (restoration checks)."""
    from torch._dynamo.callback import callback_handler

    return len(callback_handler.start_callbacks)
