"""Cache entries: listing them, keeping some while the rest are dropped, torch's
automatic-dynamic state, and resetting every cache."""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

from ..model.identity import IdentityMap
from . import backends, dynamic_state, versions


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
    take: Callable[[Offer, Any, Any], bool]  # (this offer, the call's locals, its callback)
    taken: bool = False
    why: str | None = None  # why its guard last refused a call its other guards passed


_KEPT: IdentityMap[CodeType, tuple[KeptEntry, ...]] = IdentityMap()
_OFFERED: IdentityMap[CodeType, tuple[Offer, ...]] = IdentityMap()


def _dead(entry: Any) -> bool:
    """An entry torch invalidated: an object it matched by identity died (a compiled
    optimizer's step, a module), so torch replaced its guard manager and dropped its code."""
    return entry.code is None or hasattr(entry.guard_manager, "invalidation_reason")


def entries(code: CodeType) -> list[KeptEntry]:
    """The live cache entries on ``code`` that torch counts (kept ones and entries torch
    invalidated excluded), in torch's order: the most recently used first within each
    ``isolate_recompiles`` region, the regions in ascending order (-1 first), on 2.13 to
    2.15 and main alike. Nothing here relies on an order across regions: entries are told
    apart by their guard managers, and a compile by its id."""
    return [
        KeptEntry(
            e.compile_id,
            e.guard_manager,
            e.code,
            _backend_of(code, e),
            getattr(e, "isolate_recompiles_id", None),
        )
        for e in entry_list(code)
        if not _dead(e)
    ]


# The backend each compile was for, by code object and compile id, where torch's CacheEntry
# does not say (2.7 to 2.9: torch compares it in C++ and shows no ``backend``): noted as the
# compile starts (:func:`note_backend`), so that a kept entry still answers its own backend
# only. Held weakly where it can be: a user's backend object is not kept alive by the note.
_BACKENDS: IdentityMap[CodeType, dict[str, Any]] = IdentityMap()


class _Gone:
    """A noted backend that died: no call can be for it, so the entry answers none."""


def _weakly(value: Any) -> Callable[[], Any]:
    """``value`` behind a weak reference where it takes one (a user's backend object is not
    kept alive by the plugin's notes of it); one that takes none (a builtin) lives as long as
    the process anyway and is held as it is."""
    try:
        return weakref.ref(value)
    except TypeError:
        return lambda: value


def note_backend(code: CodeType, compile_id: Any, compiler_fn: Any) -> None:
    """The compile ``compile_id`` of ``code`` is for ``compiler_fn`` (a compile id torch
    numbers again after a reset is overwritten by the newer compile)."""
    if compiler_fn is not None and not versions.cache_entry_has_backend():
        noted = _weakly(backends.innermost_backend(compiler_fn))
        _BACKENDS.setdefault(code, {})[str(compile_id)] = noted


def _backend_of(code: CodeType, entry: Any) -> Any:
    """The backend ``entry`` was compiled for: torch's own field, else what
    :func:`note_backend` noted (None: not known, and the entry answers any backend)."""
    backend = getattr(entry, "backend", None)
    if backend is None:
        noted = _BACKENDS.get(code, {}).get(str(entry.compile_id))
        backend = None if noted is None else noted()
        if noted is not None and backend is None:
            backend = _Gone()
    return backend


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

    answer = _Answer(weakref.ref(offered) if offered is not None else None)
    describe = getattr(dynamo_guards, "describe_backend", repr)
    mismatch = f"{BACKEND_MISMATCH} {describe(entry.backend)}, the kept entry's"
    stack = (None,) if versions.epilogue_guard_arguments() >= 3 else ()  # 2.9: no user stack
    add(_answers(entry, answer), [mismatch], *stack)
    _ANSWERS[entry.guard_manager] = answer


def _answers(entry: KeptEntry, answer: _Answer) -> Callable[[Any], bool]:
    """The epilogue guard of a re-installed entry (see :func:`_guard`): whether it answers
    the call whose frame locals it is given."""
    backend, region = entry.backend, entry.region
    # the last callback asked about (weakly: a user's backend object is not kept alive by an
    # entry the plugin re-installed), and the answer
    last: list[Any] = [lambda: None, True]

    def refused(why: str) -> bool:
        found = answer.offer() if answer.offer is not None else None
        if found is not None and not _CHECKING:
            found.why = why
        return False

    def answers(f_locals: Any) -> bool:
        # An entry outside any region (-1) answers every region's calls, as torch's lookup
        # falls back to that bucket; one of a region answers that region's calls only.
        if region is not None and region >= 0 and calling_region() != region:
            return refused("another isolate_recompiles region")
        callback = None
        if backend is not None or answer.offer is not None:
            callback = _CHECKING[-1] if _CHECKING else backends.calling_backend()
        if backend is not None and callback is not None and callback is not False:
            if last[0]() is not callback:
                last[:] = [_weakly(callback), bool(backends.innermost_backend(callback) == backend)]
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
        if backends.filters_guards(callback):
            return refused("a guard_filter_fn in torch.compile's options")
        with _TAKING:
            if not found.taken:
                try:
                    found.taken = bool(found.take(found, f_locals, callback))
                except Exception:  # never an error inside torch's guards: compile instead
                    found.taken = False
        return found.taken

    return answers


_TAKING = threading.Lock()  # one thread takes an offer, once


def kept_reasons(kept: tuple[KeptEntry, ...], user_frame: Any, compiler_fn: Any) -> tuple[str, ...]:
    """Each entry's guard failure for this frame, worded as torch words a recompile's."""
    from torch._dynamo.guards import get_guard_fail_reason

    options: dict[str, Any] = {"skip_logging": True}
    if "backend" in inspect.signature(get_guard_fail_reason).parameters:  # 2.10+
        options["backend"] = backends.innermost_backend(compiler_fn)
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


# torch's words for an entry made for another backend, which the kept entry's epilogue guard
# cannot give: it knows its own backend, not the call's. torch names both backends in them
# (2.13, 2.15); 2.10 names neither.
_TORCH_BACKEND_REASON = (
    "BACKEND_MATCH failure: torch.compile detected different backend callables.{names}"
    " If this is unexpected, wrap your backend in functools.partial (or reuse the"
    " same cached backend) to avoid creating a new backend function each time."
    " More details: https://github.com/pytorch/pytorch/issues/168373"
)
_TORCH_BACKEND_NAMES = " Cached backend: {cached}. New backend: {new}."


def _as_torch_words(reason: str, entry: KeptEntry, compiler_fn: Any) -> str:
    """A kept entry's backend failure, worded as torch words it for an entry of its own list
    (both backends named where torch names them; no words at all where torch gives none, as
    2.9 does), so that a test reads the same whichever list held the entry."""
    head, found, _ = reason.partition(BACKEND_MISMATCH)
    if not found or entry.backend is None:
        return reason
    words = _backend_words()
    if words == "none":
        return head  # "0/0: " and nothing: torch's own reason for such an entry
    names = ""
    if words == "names":
        import torch._dynamo.guards as dynamo_guards

        describe = getattr(dynamo_guards, "describe_backend", repr)
        new = backends.innermost_backend(compiler_fn)
        names = _TORCH_BACKEND_NAMES.format(cached=describe(entry.backend), new=describe(new))
    return head + _TORCH_BACKEND_REASON.format(names=names)


@functools.cache
def _backend_words() -> str:
    """How this torch words an entry of its own list made for another backend: ``names``
    (both backends named: 2.13, 2.15), ``plain`` (2.10), ``none`` (an empty reason: 2.9).
    Read once from the source of the module that words it."""
    import torch._dynamo.guards as dynamo_guards

    try:
        source = inspect.getsource(dynamo_guards)
    except (OSError, TypeError):  # no source (a frozen or stripped install): the newer words
        return "names"
    if "Cached backend:" in source:
        return "names"
    return "plain" if "different backend callables" in source else "none"


def recompiling(code: CodeType, reasons: tuple[str, ...]) -> None:
    """What torch does when it finds a recompile on its own list, for one it could not see
    (its entries were kept): log it to the ``recompiles`` log, and raise ``RecompileError``
    under ``error_on_recompile``, in torch's words."""
    import textwrap

    import torch._dynamo.guards as dynamo_guards
    from torch._dynamo import config, exc

    enabled = getattr(dynamo_guards, "is_recompiles_enabled", None)
    logged = bool(enabled is not None and enabled())
    if not (logged or config.error_on_recompile):
        return
    failures = textwrap.indent("\n".join(reasons), "- ")
    details = f"triggered by the following guard failure(s):\n{failures}"
    message = (
        f"Recompiling function {code.co_name} in {code.co_filename}:{code.co_firstlineno}\n"
        f"{textwrap.indent(details, '    ')}"
    )
    if logged:
        dynamo_guards.recompiles_log.debug(message)
    if config.error_on_recompile:
        raise exc.RecompileError(message)


@dataclass(eq=False)
class _Dropped:
    """The entries a full reset dropped that the running test would have alone (its live
    wider fixtures' and import time's), by code object: they answer no call, and stand in for
    torch's list where it is empty. ``state``: torch's automatic-dynamic state object that
    the reset installed (another reset replaces it)."""

    entries: IdentityMap[CodeType, list[KeptEntry]]
    state: Any


_DROPPED: list[_Dropped] = []  # at most one: the plugin's last full reset's


def dropped_entries(code: CodeType) -> tuple[KeptEntry, ...]:
    """The entries of ``code`` the plugin's last full reset dropped that the running test
    would have alone; none after another reset (the test's own), which drops them alone too."""
    if not _DROPPED:
        return ()
    if dynamic_state.code_state() is not _DROPPED[0].state:  # reset since, or a wider
        _DROPPED.clear()  # fixture set up mid-test installed its own: forgotten
        return ()
    return tuple(_DROPPED[0].entries.get(code, ()))


def forget_dropped() -> None:
    """The test whose full reset dropped them ended."""
    _DROPPED.clear()


def dropped_reasons(
    dropped: tuple[KeptEntry, ...], user_frame: Any, compiler_fn: Any
) -> tuple[str, ...]:
    """Each dropped entry's guard failure for this frame, in torch's words: what torch
    would have found on its own list, had the reset left the entries there. Empty when one of
    them passes: torch would have answered the call from it, without a compile."""
    f_locals = user_frame.f_locals
    reasons = []
    for entry in dropped:
        if not entry_alive(entry):  # an object it matched died: torch invalidated the entry
            continue
        if entry.guard_manager.check(f_locals):
            return ()
        reasons.append(fail_reason(entry, f_locals, compiler_fn))
    return tuple(reasons)


def fail_reason(entry: KeptEntry, f_locals: Any, compiler_fn: Any = None) -> str:
    """``0/1: <failing guard>``: why ``entry`` rejects a call with these arguments, in torch's
    words, without recording it (no ``guard_failures``, no ``guard_fail_fn``)."""
    from torch._dynamo import guards

    helper = getattr(guards, "get_guard_fail_reason_helper", None)
    if helper is None:
        parts = entry.guard_manager.check_verbose(f_locals).verbose_code_parts
        return f"{entry.compile_id}: {'; '.join(parts)}"
    options: dict[str, Any] = {}
    if "backend" in _parameters(helper):  # 2.10+
        options["backend"] = backends.innermost_backend(compiler_fn)
    return str(helper(entry.guard_manager, f_locals, entry.compile_id, **options))


@functools.cache
def _parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


@contextlib.contextmanager
def checking(compiler_fn: Any) -> Iterator[None]:
    """Ask re-installed entries for an answer outside a call (a certificate): they compare
    ``compiler_fn``'s backend where given (else answer any), and take no offer."""
    _CHECKING.append(compiler_fn if compiler_fn is not None else False)
    try:
        yield
    finally:
        _CHECKING.pop()


def calling_region() -> int:
    """The ``isolate_recompiles`` region of the call this thread is making (-1: none, or a
    torch without regions). Per thread from 2.15 on (a worker thread does not inherit the
    region of the thread that started it), per process before: read in the calling thread."""
    import torch._C._dynamo.eval_frame as eval_frame

    found = getattr(eval_frame, "get_eval_frame_isolate_recompiles_id", None)
    return int(found()) if found is not None else -1


def region_of(entry: KeptEntry) -> int:
    return -1 if entry.region is None else entry.region


def for_region(kept: tuple[KeptEntry, ...], region: int) -> tuple[KeptEntry, ...]:
    """The kept entries torch would look at for a call of ``region``: that region's, and
    those outside any region (torch's lookup falls back to them), as its reasons list them."""
    return tuple(e for e in kept if region_of(e) in (region, -1))


def count_kept(
    cache_size: Any, user_frame: Any, kept: tuple[KeptEntry, ...], region: int = -1
) -> None:
    """Add the kept entries to torch's count for this compile, as compute_cache_size would
    have counted them: the calling region's own entries toward the per-region limits, every
    entry toward the all-region total (torch walks its own list; it takes a linked entry
    before 2.13)."""
    from torch._dynamo.cache_size import _has_same_id_matched_objs

    mine = [entry for entry in kept if region_of(entry) == region]
    same_id = sum(1 for entry in mine if _has_same_id_matched_objs(user_frame, entry))
    cache_size.num_cache_entries += len(mine)
    cache_size.num_cache_entries_with_same_id_matched_objs += same_id
    if hasattr(cache_size, "total_cache_entries_all_regions"):  # 2.13+
        cache_size.total_cache_entries_all_regions += len(kept)


def breaks_graph(entry: KeptEntry) -> bool:
    """Whether the entry's code calls a graph-break resume function (torch names them
    ``__resume_at_...`` in the function's globals)."""
    return any(name.startswith("__resume_at_") for name in entry.code.co_names)


def set_eager_fallback(code: CodeType) -> None:
    """Set torch's eager fallback of ``code`` again (a live fixture's recompile_limit hit,
    lifted for a test that did not use the fixture): torch sets the code object's frame
    strategy to run only the entries it has, so a miss runs eagerly and never compiles.
    Emptying the code object's lists (``reset_code``) lifts it, in every region; this sets it
    for calls outside ``isolate_recompiles`` regions (torch has no call for each region
    before 2.16)."""
    import torch._C._dynamo.eval_frame as eval_frame

    action = getattr(eval_frame, "_FrameAction", None)
    strategy = getattr(eval_frame, "_FrameExecStrategy", None)
    if action is not None and strategy is not None:
        run_only = action.RUN_ONLY
        eval_frame.set_code_exec_strategy(code, strategy(run_only, run_only))


def compiled_codes() -> list[CodeType]:
    """Every code object torch has compiled since its last reset (and still alive)."""
    import torch._dynamo.convert_frame as convert_frame

    tracker = getattr(convert_frame, "input_codes", None)
    found = (ref() for ref in getattr(tracker, "seen", ()))
    return [code for code in found if isinstance(code, CodeType)]


def entry_list(code: CodeType) -> list[Any]:
    import torch._C._dynamo.eval_frame as eval_frame

    return list(eval_frame._debug_get_cache_entry_list(code))


def reset_caches(in_view: IdentityMap[CodeType, list[KeptEntry]] | None = None) -> None:
    """Drop every compiled entry, guard-failure record and automatic-dynamic state.

    ``in_view``: the entries among them that the running test would still have alone (a
    torch that cannot keep single entries, whose isolation is this full reset): torch's own
    checks against them are made by :func:`dropped_reasons` until the next reset."""
    import torch._dynamo

    torch._dynamo.reset()
    _DROPPED.clear()
    if in_view:
        # An automatic-dynamic state object of its own, empty as torch's reset left it: the
        # next reset (the test's, a Dynamo TestCase's) replaces it, and so says it came.
        _DROPPED.append(_Dropped(in_view, dynamic_state.install_code_state({})))


def cache_entries(code: CodeType) -> int:
    """The entries on torch's own list of ``code``."""
    return len(entry_list(code))


def answering_entries(code: CodeType) -> int:
    """The entries that answer ``code``'s calls in the running test, as it would have them
    alone: torch's list, those isolation kept, and offers the test took."""
    return len(entry_list(code)) + len(kept_entries(code))
