"""Which backend a compile is for: behind torch.compile's wrappers, up the stack of a call,
and whether it reads inductor's config or filters guards."""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

_EVAL_FRAME_FILE = os.path.join("_dynamo", "eval_frame.py")


_DEBUG_BACKENDS = "torch._dynamo.backends.debugging"  # eager, aot_eager, ...: no inductor


def filters_guards(callback: Any) -> bool:
    """Whether a torch.compile wrapper's callback drops guards (``guard_filter_fn``)."""
    return hooks_filter_guards(getattr(callback, "_hooks", None))


def hooks_filter_guards(hooks: Any) -> bool:
    """Whether torch's compile hooks (a callback's, or ``_compile``'s) drop guards."""
    return getattr(hooks, "guard_filter_fn", None) is not None


def calling_backend() -> Any:
    """The compile callback of the torch.compile wrapper nearest up the stack, if any."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return None
        if frame.f_code.co_filename.endswith(_EVAL_FRAME_FILE):
            return frame.f_locals.get("callback")
        frame = frame.f_back
    return None


def compile_name(compiler_fn: Any) -> str | None:
    """The ``name=`` of the torch.compile call a compile is for, where torch keeps it: on the
    inductor backend's wrapper (torch 2.13 and newer); torch drops it for other backends."""
    inner = innermost_backend(compiler_fn)
    name = getattr(getattr(inner, "compiler_fn", inner), "name", None)
    return name if isinstance(name, str) and name else None


def innermost_backend(compiler_fn: Any) -> Any:
    """The backend behind torch's wrappers of it, as torch compares backends."""
    for _ in range(32):
        inner = getattr(compiler_fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            break
        compiler_fn = inner
    return compiler_fn


def reads_inductor_config(compiler_fn: Any) -> bool:
    """Whether a compile's backend may read inductor's config: any but torch's debugging
    backends (``eager``, ``aot_eager``, ...), behind torch.compile's wrapper of them."""
    inner = innermost_backend(compiler_fn)
    inner = getattr(inner, "compiler_fn", inner)  # torch.compile(backend="eager")'s wrapper
    return getattr(inner, "__module__", None) != _DEBUG_BACKENDS
