"""The compile hook: one function put where torch calls it before each frame compile.

How compiles are observed: torch (2.9+) calls the hooks registered with
``torch._dynamo.register_hook_for_recompile_user_context`` once per frame compile, inside
``convert_frame._compile``, *after* it has computed the guard-failure reasons and *before* it
checks ``recompile_limit`` or traces anything. That gives us, for free:

- the fail-fast point: an exception raised there reaches the caller unchanged and the
  compile is never paid for;
- nothing on the hot path: a cache hit never reaches Python;
- survival across ``torch._dynamo.reset()``, which clears compile callbacks but not this list.

Before 2.9 the limit check ``_compile`` imports by name is wrapped instead. The hook gets no
arguments; :mod:`.events` reads the compiling frame's locals.

A second hook, put in while the first is: torch calls ``guards.guard_manager_testing_hook_fn``
(2.7+) once per compile, right after it built and checked the new entry's guards, with the
call's own arguments. The entry's guard check is timed there, while the call's objects are
alive anyway, and only the figure is kept, by guard manager: nothing of the user's outlives the
compile (a test that frees its model sees it freed).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable
from typing import Any

from . import events, instruments, stand_ins, versions

# Per-process state that mirrors torch's own (its hook list and its cache lists are global):
# the callbacks behind the one hook, and the entries re-installed by keep_only().
_SUBSCRIBERS: list[Callable[[events.CompileEvent], None]] = []


_UNREGISTER: list[Callable[[], None]] = []  # how to take the one hook out of torch again


def _hook() -> str:
    if _SUBSCRIBERS:
        event = events.event_from(events.compile_frame(sys._getframe(1)))
        with contextlib.suppress(Exception):  # a figure gives way, never the user's compile
            instruments.compile_began(events.compile_key(event.code, event.compile_id))
        for callback in list(_SUBSCRIBERS):
            callback(event)
    return ""


# Each entry's guard check timed when torch built its guards (microseconds; None: the entry
# rejected its own call; a str: the check raised, in words), by its guard manager.
_CHECKED: weakref.WeakKeyDictionary[Any, float | str | None] = weakref.WeakKeyDictionary()


def _guards_built(previous: Callable[..., Any] | None) -> Callable[..., Any]:
    """torch's guards-built hook: a user's own (torch's tests set one) is called first, then
    the new entry's check is timed on the arguments of the call that compiled it."""

    def built(guard_manager: Any, f_locals: Any, *rest: Any) -> Any:
        if previous is not None:
            previous(guard_manager, f_locals, *rest)
        if not _SUBSCRIBERS:
            return None
        try:
            figure: float | str | None = stand_ins.check_us(guard_manager, f_locals)
        except Exception as exc:  # never an error of the user's compile: the figure gives way
            figure = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(Exception):  # the graph's figures give way likewise
            instruments.graph_built(sys._getframe(1))
        with contextlib.suppress(TypeError):  # a manager that takes no weak reference: no figure
            _CHECKED[guard_manager] = figure
        return None

    return built


def checked_us(guard_manager: Any) -> tuple[bool, float | str | None]:
    """(timed, figure): the entry's guard check as timed when its guards were built (False:
    not timed then: a torch without the hook, or a compile made while nothing listened)."""
    with contextlib.suppress(TypeError):  # a manager that takes no weak reference
        if guard_manager in _CHECKED:
            return True, _CHECKED[guard_manager]
    return False, None


def _register_guards_built() -> Callable[[], None]:
    """Put :func:`_guards_built` where torch calls it when it has built an entry's guards;
    return its removal (the previous hook put back, if the slot still holds ours)."""
    if not versions.has_guards_built_hook():
        return lambda: None
    import torch._dynamo.guards as guards

    previous = guards.guard_manager_testing_hook_fn
    ours = _guards_built(previous)
    guards.guard_manager_testing_hook_fn = ours

    def restore() -> None:
        if guards.guard_manager_testing_hook_fn is ours:
            guards.guard_manager_testing_hook_fn = previous

    return restore


def _register() -> Callable[[], None]:
    """Both hooks in; return their removal."""
    remove_compile = _register_compile()
    remove_built = _register_guards_built()

    def unregister() -> None:
        remove_built()
        remove_compile()

    return unregister


def _register_compile() -> Callable[[], None]:
    """Put :func:`_hook` where torch calls it before each frame compile; return its removal.

    2.9+: torch's own list of pre-compile hooks. Older releases: a wrapper around the limit
    check that ``_compile`` imports by name, put back exactly as it was on removal.
    """
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.utils as dynamo_utils

    if versions.has_hook_list():
        was_none = dynamo_utils._recompile_user_contexts is None
        dynamo_utils.register_hook_for_recompile_user_context(_hook)

        def unregister() -> None:
            hooks = dynamo_utils._recompile_user_contexts
            if hooks is not None and _hook in hooks:
                hooks.remove(_hook)
                if not hooks and was_none:
                    dynamo_utils._recompile_user_contexts = None

        return unregister
    original = getattr(convert_frame, versions.LIMIT_CHECK)

    def checked(cache_size: Any, compile_id: Any) -> Any:
        _hook()
        return original(cache_size, compile_id)

    setattr(convert_frame, versions.LIMIT_CHECK, checked)

    def restore() -> None:
        if getattr(convert_frame, versions.LIMIT_CHECK) is checked:
            setattr(convert_frame, versions.LIMIT_CHECK, original)

    return restore


def install_compile_hook(
    callback: Callable[[events.CompileEvent], None], *, first: bool = False
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


# Told of a compile that a warm block stopped before it ran (the compile hook's other
# callbacks never hear of it): the gate records it in the running test, as stopped.
_STOPPED: list[Callable[[events.CompileEvent], None]] = []


def on_stopped(callback: Callable[[events.CompileEvent], None]) -> Callable[[], None]:
    """Call ``callback`` with each compile a warm block stops; return its removal."""
    _STOPPED.append(callback)
    return lambda: _STOPPED.remove(callback) if callback in _STOPPED else None


def tell_stopped(event: events.CompileEvent) -> None:
    for callback in list(_STOPPED):
        callback(event)


def listeners() -> int:
    """How many callbacks hear of compiles now (the gate's, a user's tracker, a warm block)."""
    return len(_SUBSCRIBERS)


def forget_compile_hooks() -> None:
    """Drop every callback and the plugin's compile callbacks (a forked child: the parent's
    gate and trackers live on in the parent, not here, and a lock another thread of the parent
    held is held forever here); torch keeps the one hook, which calls nothing until a new
    callback."""
    _SUBSCRIBERS.clear()
    _STOPPED.clear()
    instruments.forget_callbacks()
