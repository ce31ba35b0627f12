"""Cache entries: listing them, keeping some while the rest are dropped, torch's
automatic-dynamic state, and resetting every cache."""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from ..identity import IdentityMap
from . import versions


@dataclass(frozen=True, eq=False)
class KeptEntry:
    """What it takes to put a cache entry back: the same fields torch's CacheEntry has."""

    compile_id: Any  # torch's CompileId (printed "0/1")
    guard_manager: Any
    code: CodeType  # the compiled (transformed) bytecode
    backend: Any = None  # the backend it was compiled for (torch checks it on its own list)
    region: int | None = None  # its isolate_recompiles region (-1: none; None: not told)


@dataclass(eq=False)
class Offer:
    """An entry an earlier test's first compile made, put where torch looks on a miss, that
    answers a call only if ``take`` (the ledger's judgement: this call would compile the very
    same entry now) says so; from then on it answers as the test's own (``taken``)."""

    entry: KeptEntry
    take: Callable[[Offer, Any], bool]  # (this offer, the call's frame locals)
    taken: bool = False
    why: str | None = None  # why its guard last refused a call its other guards passed


_KEPT: IdentityMap[CodeType, tuple[KeptEntry, ...]] = IdentityMap()
_OFFERED: IdentityMap[CodeType, tuple[Offer, ...]] = IdentityMap()


def _dead(entry: Any) -> bool:
    """An entry torch invalidated: an object it matched by identity died (a compiled
    optimizer's step, a module), so torch replaced its guard manager and dropped its code."""
    return entry.code is None or hasattr(entry.guard_manager, "invalidation_reason")


def entries(code: CodeType) -> list[KeptEntry]:
    """The live cache entries on ``code`` that torch counts, newest first (kept ones and
    entries torch invalidated excluded)."""
    return [
        KeptEntry(
            e.compile_id,
            e.guard_manager,
            e.code,
            getattr(e, "backend", None),
            getattr(e, "isolate_recompiles_id", None),
        )
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


def matches_identity(entry: KeptEntry) -> bool:
    """Whether the entry's guards match objects by identity (which may die)."""
    return bool(getattr(entry.guard_manager, "id_matched_objs", None))


def kept_entries(code: CodeType) -> tuple[KeptEntry, ...]:
    """The entries re-installed on ``code`` that answer as the running test's: those
    :func:`keep_only` kept, and offers the test took (:func:`offer`).

    A ``torch._dynamo.reset()`` since then removed them; they are forgotten here too.
    """
    kept = _KEPT.get(code, ())
    offered = _OFFERED.get(code, ())
    if not kept and not offered:
        return ()
    import torch._C._dynamo.eval_frame as eval_frame

    if len(eval_frame._debug_get_precompile_entries(code)) != len(kept) + len(offered):
        _KEPT.pop(code, None)
        _OFFERED.pop(code, None)
        return ()
    return (*kept, *(o.entry for o in offered if o.taken))


def installed(code: CodeType) -> tuple[tuple[KeptEntry, ...], tuple[KeptEntry, ...]]:
    """What :func:`keep_only` kept and :func:`offer` offered on ``code``, still there (a
    reset since then removed them: :func:`kept_entries` forgets them then)."""
    kept_entries(code)
    return _KEPT.get(code, ()), tuple(o.entry for o in _OFFERED.get(code, ()))


def keep_only(code: CodeType, keep: list[KeptEntry]) -> None:
    """Drop every cache entry of ``code`` but ``keep``, which torch then still matches.

    torch has no way to remove one entry from a code object's list: invalidating an entry
    leaves it in the list, where it counts toward recompile_limit. So the list is emptied
    (``reset_code``, which also empties the second list below) and the kept entries are put
    in the second list torch checks on a miss, where ``_load_precompile_entry`` puts
    ahead-of-time compiled entries. torch counts neither for recompile_limit nor asks them
    for reasons: :func:`event_from` does both. Nor does it check their backend, as it does
    on its own list: :func:`_guard` adds that check. Emptying the list runs the
    entries' destructors, which clear their guard managers' back-pointers to them, so no
    invalidation callback can reach the freed entries. Offers made earlier are gone too.
    """
    import torch._C._dynamo.eval_frame as eval_frame

    with _compile_lock():
        eval_frame.reset_code(code)
        _OFFERED.pop(code, None)
        for entry in keep:
            _guard(entry, None)
            _load(eval_frame, code, entry)
    if keep:
        _KEPT[code] = tuple(keep)
    else:
        _KEPT.pop(code, None)


def offer(code: CodeType, offered: list[Offer]) -> None:
    """Put ``offered`` beside what :func:`keep_only` kept on ``code`` (whose list it just
    emptied): each answers only where its ``take`` says so."""
    import torch._C._dynamo.eval_frame as eval_frame

    with _compile_lock():
        for item in offered:
            _guard(item.entry, item)
            _load(eval_frame, code, item.entry)
    if offered:
        _OFFERED[code] = tuple(offered)


def renew_offers(code: CodeType) -> None:
    """A new test: the offers on ``code`` are untaken again (they stay installed)."""
    for item in _OFFERED.get(code, ()):
        item.taken, item.why = False, None


def refusal(code: CodeType) -> str | None:
    """Why an offer on ``code`` refused a call whose other guards it passed, if one did."""
    kept_entries(code)  # forgets offers a reset removed
    return next((o.why for o in _OFFERED.get(code, ()) if o.why), None)


def forget_refusals(code: CodeType) -> None:
    """An offer on ``code`` was taken: the others' refusals say nothing of a later compile."""
    for item in _OFFERED.get(code, ()):
        item.why = None


def _load(eval_frame: Any, code: CodeType, entry: KeptEntry) -> None:
    """``_load_precompile_entry``; newer torch files precompile entries per isolation region
    (its fourth argument), and serves only the calls of that region from them."""
    if versions.precompile_entry_takes_region():
        region = -1 if entry.region is None else entry.region
        eval_frame._load_precompile_entry(code, entry.guard_manager, entry.code, region)
    else:
        eval_frame._load_precompile_entry(code, entry.guard_manager, entry.code)


def drop_all(code: CodeType) -> None:
    """Every entry of ``code`` gone, kept ones too: the fallback when keeping some failed."""
    import torch._C._dynamo.eval_frame as eval_frame

    _KEPT.pop(code, None)
    _OFFERED.pop(code, None)
    with _compile_lock():
        eval_frame.reset_code(code)
        eval_frame._reset_precompile_entries(code)


def _compile_lock() -> Any:
    """torch's compile lock, which its own reset holds: no other thread is compiling while a
    code object's lists are emptied and refilled (``reset_code`` racing a compile can crash,
    pytorch/pytorch#196394)."""
    import torch._dynamo.convert_frame as convert_frame

    return getattr(convert_frame, "compile_lock", None) or contextlib.nullcontext()


# The backend a compile is being checked against, while kept_reasons asks the kept entries
# (torch runs guards with its callback switched off, and the compile call is far up the stack).
_CHECKING: list[Any] = []


@dataclass(eq=False)
class _Answer:
    """What a re-installed entry's own guard consults: kept (None), or the offer it is part
    of (held weakly: an offer no longer installed answers nothing)."""

    offer: weakref.ref[Offer] | None = None


_ANSWERS: weakref.WeakKeyDictionary[Any, _Answer] = weakref.WeakKeyDictionary()


_EVAL_FRAME_FILE = os.path.join("_dynamo", "eval_frame.py")


BACKEND_MISMATCH = "BACKEND_MATCH failure: this call compiles for another backend than"


def _guard(entry: KeptEntry, offered: Offer | None) -> None:
    """Make a re-installed entry answer only the calls it may answer: as torch's list does,
    only calls compiled for its own backend; an offer, only where the ledger takes it.

    torch compares a call's backend with each entry of its list, but not with the entries
    :func:`keep_only` puts back. One epilogue guard per entry (run only when every other guard
    passed, so only for a call the entry would answer; added once, then re-pointed) finds the
    call's backend in the frame of torch.compile's wrapper that made the call, a few frames up.
    Where no such frame is found (a backend set by a context manager), the entry answers, as
    torch's precompiled entries do. Then an offer asks its ``take``, once: a taken offer
    answers like a kept entry until the next test.
    """
    answer = _ANSWERS.get(entry.guard_manager)
    if answer is not None:
        answer.offer = weakref.ref(offered) if offered is not None else None
        return
    root = entry.guard_manager.root
    add = getattr(root, "add_epilogue_lambda_guard", None)
    if add is None:
        return  # (a torch without epilogue guards: kept entries answer any backend)
    import torch._dynamo.guards as dynamo_guards

    backend, region = entry.backend, entry.region
    answer = _Answer(weakref.ref(offered) if offered is not None else None)
    last: list[Any] = [None, True]  # the last callback asked about, and the answer
    import torch._C._dynamo.eval_frame as eval_frame

    calling_region = getattr(eval_frame, "get_eval_frame_isolate_recompiles_id", None)

    def refused(why: str) -> bool:
        found = answer.offer() if answer.offer is not None else None
        if found is not None and not _CHECKING:
            found.why = why
        return False

    def answers(f_locals: Any) -> bool:
        if region is not None and calling_region is not None and calling_region() != region:
            return refused("another isolate_recompiles region")
        callback = None
        if backend is not None or answer.offer is not None:
            callback = _CHECKING[-1] if _CHECKING else _calling_backend()
        if backend is not None and callback is not None and callback is not False:
            if callback is not last[0]:
                last[:] = [callback, bool(_innermost_backend(callback) == backend)]
            if not last[1]:
                return refused("another backend or torch.compile options")
        if answer.offer is None:
            return True
        found = answer.offer()
        if found is None:
            return False
        if found.taken:
            return True
        if _CHECKING:  # asked for a reason, not for an answer
            return False
        if callback is None or callback is False:
            return refused("a backend set where the plugin cannot read it")
        if filters_guards(callback):
            return refused("a guard_filter_fn in torch.compile's options")
        with _TAKING:
            if not found.taken:
                try:
                    found.taken = bool(found.take(found, f_locals))
                except Exception:  # never an error inside torch's guards: compile instead
                    found.taken = False
        return found.taken

    describe = getattr(dynamo_guards, "describe_backend", repr)
    add(answers, [f"{BACKEND_MISMATCH} {describe(backend)}, the kept entry's"], None)
    _ANSWERS[entry.guard_manager] = answer


_TAKING = threading.Lock()  # one thread takes an offer, once


def filters_guards(callback: Any) -> bool:
    """Whether a torch.compile wrapper's callback drops guards (``guard_filter_fn``)."""
    return hooks_filter_guards(getattr(callback, "_hooks", None))


def hooks_filter_guards(hooks: Any) -> bool:
    """Whether torch's compile hooks (a callback's, or ``_compile``'s) drop guards."""
    return getattr(hooks, "guard_filter_fn", None) is not None


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
    return tuple(
        _as_torch_words(reason, entry, compiler_fn)
        for reason, entry in zip(found, kept, strict=True)
        if reason
    )


# torch's words (2.12+) for an entry made for another backend, which the kept entry's epilogue
# guard cannot give: it knows its own backend, not the call's.
_TORCH_BACKEND_REASON = (
    "BACKEND_MATCH failure: torch.compile detected different backend callables."
    " Cached backend: {cached}. New backend: {new}."
    " If this is unexpected, wrap your backend in functools.partial (or reuse the"
    " same cached backend) to avoid creating a new backend function each time."
    " More details: https://github.com/pytorch/pytorch/issues/168373"
)


def _as_torch_words(reason: str, entry: KeptEntry, compiler_fn: Any) -> str:
    """A kept entry's backend failure, named with both backends as torch names it for an
    entry of its own list, so that a test reads the same whichever list held the entry."""
    head, found, _ = reason.partition(BACKEND_MISMATCH)
    if not found or entry.backend is None:
        return reason
    import torch._dynamo.guards as dynamo_guards

    describe = getattr(dynamo_guards, "describe_backend", repr)
    new = _innermost_backend(compiler_fn)
    return head + _TORCH_BACKEND_REASON.format(cached=describe(entry.backend), new=describe(new))


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


def _keys_of(code: CodeType, state: Any) -> list[Any]:
    """torch's keys of ``code``'s automatic-dynamic state: one without a closure, found
    directly; a closure's code may have one per closure (all of the same place)."""
    import torch._dynamo.pgo as pgo

    plain = pgo.CodeId.make(code)
    if not code.co_freevars:
        return [plain] if plain in state else []
    return [
        k
        for k in state
        if (k.file_hash, k.firstlineno, k.name) == (plain.file_hash, plain.firstlineno, plain.name)
    ]


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


_DEBUG_BACKENDS = "torch._dynamo.backends.debugging"  # eager, aot_eager, ...: no inductor


def reads_inductor_config(compiler_fn: Any) -> bool:
    """Whether a compile's backend may read inductor's config: any but torch's debugging
    backends (``eager``, ``aot_eager``, ...), behind torch.compile's wrapper of them."""
    inner = _innermost_backend(compiler_fn)
    inner = getattr(inner, "compiler_fn", inner)  # torch.compile(backend="eager")'s wrapper
    return getattr(inner, "__module__", None) != _DEBUG_BACKENDS


def config_fingerprint(inductor: bool = True) -> tuple[Any, ...]:
    """What torch's compile reads beyond guards: the hashes of Dynamo's, AOT autograd's and
    (``inductor``) inductor's config, without the keys torch marks as not affecting compiles;
    None for a config module not imported yet or not read (no compile used it)."""
    names = ("torch._dynamo.config", "torch._functorch.config", "torch._inductor.config")
    found = [sys.modules.get(name) for name in names]
    if not inductor:
        found[2] = None
    return tuple(module.get_hash() if module is not None else None for module in found)


def same_config(made: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """A config module imported after the compile (None then) did not take part in it."""
    return len(made) == len(now) and all(
        a is None or b is None or a == b for a, b in zip(made, now, strict=True)
    )


_MARK_PREFIXES = ("_dynamo_", "_specialize_", "_has_dynamo_")
# Set by Dynamo itself on the parameters and buffers it traces (static inputs, unguarded),
# so present after any compile of a module and absent on a new one: says nothing of a call.
_DYNAMO_OWN = frozenset({"_dynamo_static_input_type"})

Marks = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


_MODULE_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def input_marks(f_locals: Any) -> Marks | None:
    """What a call passes that torch does not guard, yet that decides what a compile makes:
    the dynamic-shape marks (``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_unbacked``,
    ``mark_static``, ``mark_static_address``, ...) on its tensors (top-level, inside lists,
    tuples and dicts, a module's parameters and buffers), and the hooks on its modules and
    submodules and the global module hooks (torch skips guards on them by default). None if
    they cannot be read: nothing then proves two calls alike."""
    try:
        return _input_marks(f_locals)
    except Exception:
        return None


def _input_marks(f_locals: Any) -> Marks:
    import torch
    import torch.nn.modules.module as module_

    found: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    def hooks(path: str, holder: Any, names: tuple[str, ...]) -> None:
        held = tuple(
            (name, repr([getattr(fn, "__qualname__", type(fn).__name__) for fn in table.values()]))
            for name in names
            if (table := getattr(holder, name, None))
        )
        if held:
            found.append((path, held))

    def visit(path: str, value: Any, depth: int) -> None:
        if isinstance(value, torch.Tensor):
            attrs = getattr(value, "__dict__", None) or {}
            marks = tuple(
                sorted(
                    (k, repr(v))
                    for k, v in attrs.items()
                    if k.startswith(_MARK_PREFIXES) and k not in _DYNAMO_OWN
                )
            )
            if marks:
                found.append((path, marks))
        elif depth > 2:
            return
        elif type(value) in (list, tuple):
            for index, item in enumerate(value):
                visit(f"{path}[{index}]", item, depth + 1)
        elif type(value) is dict:
            for key, item in value.items():
                visit(f"{path}[{key!r}]", item, depth + 1)
        elif isinstance(value, torch.nn.Module):
            for name, tensor in [*value.named_parameters(), *value.named_buffers()]:
                visit(f"{path}.{name}", tensor, 3)
            for name, child in value.named_modules():
                hooks(f"{path}.{name}" if name else path, child, _MODULE_HOOKS)

    for name, value in list(f_locals.items()):
        visit(str(name), value, 0)
    hooks("<global>", module_, tuple(f"_global{name}" for name in _MODULE_HOOKS))
    return tuple(found)


def breaks_graph(entry: KeptEntry) -> bool:
    """Whether the entry's code calls a graph-break resume function (torch names them
    ``__resume_at_...`` in the function's globals)."""
    return any(name.startswith("__resume_at_") for name in entry.code.co_names)


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
    """The entries on torch's own list of ``code``."""
    return len(entry_list(code))


def answering_entries(code: CodeType) -> int:
    """The entries that answer ``code``'s calls in the running test, as it would have them
    alone: torch's list, those isolation kept, and offers the test took."""
    return len(entry_list(code)) + len(kept_entries(code))
