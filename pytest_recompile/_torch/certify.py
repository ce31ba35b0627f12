"""The shape certificate, torch's side: the frame a callable's cache entries hang on, a stand-in
call for each point of a domain, and the entries' guards evaluated on it.

Nothing here compiles or runs the user's code: ``guard_manager.check(f_locals)`` answers whether
an entry would serve a call from a dict of the frame's arguments, as torch asks it before each
call. Stand-in tensors are ``torch.empty`` with the point's sizes (nothing written: on CPU they
commit no memory), one point's at a time.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType, FunctionType
from typing import Any

from ..model.certificate import Certificate, Domain, DomainError, Verdict, group, parse_domain
from ..model.guards import Reason
from . import entries, events, guard_tree, reasons, versions
from .stand_ins import Captured, StandIn


class CertificateError(DomainError):
    """A call that cannot be certified as given (nothing compiled, arguments that do not bind)."""


@dataclass(frozen=True)
class _Frame:
    """A function whose code object may hold the entries, and the object bound as its first
    argument (a module, a callable object), if any."""

    func: FunctionType
    self_: Any = None
    bound: bool = False

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The function's own signature (not the one it wraps), read once: every point binds it."""
        return inspect.signature(self.func, follow_wrapped=False)

    def f_locals(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The frame's arguments by name, as torch hands them to the guards (its closure too)."""
        call = (self.self_, *args) if self.bound else args
        bound = self.signature.bind(*call, **kwargs)
        bound.apply_defaults()
        found = dict(bound.arguments)
        cells = self.func.__closure__ or ()
        for name, cell in zip(self.func.__code__.co_freevars, cells, strict=False):
            try:
                found[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
        return found


@dataclass(frozen=True)
class _Call:
    """The callable unwrapped: the frames its entries may hang on (outermost first), the
    innermost function (whose parameters the domain names), the arguments torch.compile's
    wrappers and partials add, and the compile callback where one is found."""

    frames: tuple[_Frame, ...]
    user: _Frame
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    callback: Any


def _unwrap(fn: Any) -> _Call:
    import torch

    pre_args: tuple[Any, ...] = ()
    pre_kwargs: dict[str, Any] = {}
    callback = None
    frames: list[_Frame] = []
    for _ in range(32):
        if isinstance(fn, functools.partial):
            pre_args, pre_kwargs = (*fn.args, *pre_args), {**fn.keywords, **pre_kwargs}
            fn = fn.func
            continue
        ctx = getattr(fn, "dynamo_ctx", None)
        if isinstance(fn, torch.nn.Module) and hasattr(fn, "_orig_mod"):  # torch.compile(module)
            callback = callback or getattr(ctx, "callback", None)
            frames += _compiled_frames(fn.__dict__.get("forward"))  # torch's wrap_inline
            fn = fn._orig_mod
            continue
        orig = getattr(fn, "_torchdynamo_orig_callable", None)
        if orig is not None and not isinstance(fn, torch.nn.Module):  # torch.compile(function)
            callback = callback or _closure_value(fn, "callback")
            fn = orig
            continue
        inner = getattr(fn, "__wrapped__", None)
        if (
            isinstance(fn, FunctionType)
            and inner is not None
            and not isinstance(inner, FunctionType)
        ):  # torch's wrapper of a method or a callable object: its frame may hold the entries
            frames.append(_Frame(fn))
            fn = inner
            continue
        break
    if isinstance(fn, torch.nn.Module):
        module = fn
        compiled = module.__dict__.get("_compiled_call_impl")  # module.compile()
        frames += _compiled_frames(compiled)
        callback = callback or _closure_value(compiled, "callback")
        for name in ("_wrapped_call_impl", "_call_impl"):
            impl = getattr(torch.nn.Module, name, None)
            if isinstance(impl, FunctionType):
                frames.append(_Frame(impl, module, True))
        forward = module.__dict__.get("forward")  # an instance's own forward wins
        own = getattr(type(module), "forward", None)
        if isinstance(own, FunctionType) and forward is None:
            frames += _chain(own, module, True)
        elif forward is not None:
            frames += _method_chain(forward)
    elif inspect.ismethod(fn):
        frames += _method_chain(fn)
    elif isinstance(fn, FunctionType):
        frames += _chain(fn, None, False)
    elif callable(fn):  # a callable object
        call = inspect.getattr_static(type(fn), "__call__", None)
        if isinstance(call, FunctionType):
            frames += _chain(call, fn, True)
    if not frames:
        raise CertificateError(
            f"covers(): cannot find the Python function behind {fn!r}: pass a compiled "
            "function or module, a method, a partial or a callable object"
        )
    return _Call(tuple(frames), frames[-1], pre_args, pre_kwargs, callback)


def _compiled_frames(wrapper: Any) -> list[_Frame]:
    """The frames behind a torch.compile wrapper that torch made around a module: its
    ``wrap_inline`` function (torch's own modules, shared by every compiled one) or the
    module's ``_call_impl`` (``module.compile()``)."""
    inner = getattr(wrapper, "_torchdynamo_orig_callable", None)
    if inspect.ismethod(inner):
        return _method_chain(inner)
    return [_Frame(inner)] if isinstance(inner, FunctionType) else []


def _method_chain(method: Any) -> list[_Frame]:
    func = method.__func__
    return _chain(func, method.__self__, True) if isinstance(func, FunctionType) else []


def _chain(func: FunctionType, self_: Any, bound: bool) -> list[_Frame]:
    """``func`` and the functions it wraps (``functools.wraps``): a decorated forward's frame
    is the decorator's, and the user's parameters are the innermost function's."""
    found = [_Frame(func, self_, bound)]
    seen = {id(func)}
    inner = getattr(func, "__wrapped__", None)
    while isinstance(inner, FunctionType) and id(inner) not in seen:
        seen.add(id(inner))
        found.append(_Frame(inner, self_, bound))
        inner = getattr(inner, "__wrapped__", None)
    return found


def _closure_value(fn: Any, name: str) -> Any:
    code = getattr(fn, "__code__", None)
    if code is None or name not in code.co_freevars:
        return None
    try:
        return fn.__closure__[code.co_freevars.index(name)].cell_contents
    except (ValueError, IndexError, TypeError):
        return None


# -- the entries that answer a call -----------------------------------------------------------


def _answering(code: CodeType, callback: Any) -> list[entries.KeptEntry]:
    """The entries torch would look at for a call of ``code`` from here: its list's live ones
    of the calling region (and those outside any), for the call's backend where known, then
    those the gate re-installed, or dropped where it cannot re-install them."""
    region = entries.calling_region()
    # Only torch's own field says an entry's backend for sure: the plugin's notes (2.7 to 2.9)
    # are by compile id, which torch numbers again after a reset.
    chain = _backend_chain(callback) if versions.cache_entry_has_backend() else []
    found = [
        e
        for e in entries.for_region(tuple(entries.entries(code)), region)
        if not chain or e.backend is None or any(e.backend == b for b in chain)
    ]
    found += [e for e in entries.kept_entries(code) if entries.entry_alive(e)]
    # a torch that keeps no single entries (2.7, 2.8): the entries the plugin's full reset
    # dropped that the test would have alone (a wider fixture's warm-up) answer as they would
    found += [e for e in entries.dropped_entries(code) if entries.entry_alive(e)]
    return found


def _backend_chain(callback: Any) -> list[Any]:
    """A torch.compile wrapper's callback and every backend behind it: torch's
    ``CacheEntry.backend`` (2.10+) is one of them, the innermost."""
    chain: list[Any] = []
    found = callback
    while found is not None and len(chain) < 32 and not any(found is c for c in chain):
        chain.append(found)
        found = getattr(found, "_torchdynamo_orig_backend", None) or getattr(
            found, "_torchdynamo_orig_callable", None
        )
    return chain


def _accepts(entry: entries.KeptEntry, f_locals: dict[str, Any]) -> bool:
    return bool(entry.guard_manager.check(f_locals))


def _compile_key(entry: entries.KeptEntry) -> tuple[int, ...]:
    parts = str(entry.compile_id).split("/")
    return tuple(int(p) for p in parts if p.isdigit())


# -- the certificate --------------------------------------------------------------------------


def certify(fn: Any, args: Any, domain: Mapping[str, Any]) -> Certificate:
    """Which points of ``domain`` would compile again if ``fn`` were called there, from the
    guards of the cache entries that answer its calls now (see ``docs/certificate.md``)."""
    import torch

    versions.check_torch()
    if not versions.can_certify():
        raise CertificateError(
            f"covers(): torch {versions.torch_version()} lists no cache entries or guard trees "
            "to evaluate: the certificate needs torch 2.7 or newer as released"
        )
    began = time.perf_counter()
    if isinstance(args, Mapping):
        pos, kw = (), dict(args)
    elif isinstance(args, (tuple, list)):
        pos, kw = tuple(args), {}
    else:
        raise CertificateError(
            "covers(): args is the example call, a tuple of positional arguments or a dict "
            f"of keyword arguments; got {type(args).__name__} (a single argument: (x,))"
        )
    call = _unwrap(fn)
    pos, kw = (*call.args, *pos), {**call.kwargs, **kw}
    user = call.user
    try:
        signature = user.signature
        bound = signature.bind(*((user.self_, *pos) if user.bound else pos), **kw)
    except TypeError as exc:
        raise CertificateError(
            f"covers(): the example call does not bind to {events.qualname(user.func.__code__)}"
            f"{signature}: {exc}"
        ) from None
    example = dict(bound.arguments)
    for name, param in signature.parameters.items():
        if name not in example and param.default is not inspect.Parameter.empty:
            example[name] = param.default
    parsed = parse_domain(domain, example, lambda v: isinstance(v, torch.Tensor))
    places = _places(signature, len(pos) + (1 if user.bound else 0), parsed, user.bound)
    frame, answering = _frame(call, pos, kw)
    stand_ins = {name: StandIn(name, example[name]) for name in parsed.tensors}

    def call_locals(changes: dict[str, Any]) -> dict[str, Any] | str:
        args: list[Any] = list(pos)
        kwargs = dict(kw)
        for name, change in changes.items():
            value = stand_ins[name].make(change) if name in stand_ins else change
            if isinstance(value, str):
                return value
            where, at = places[name]
            if where == "pos":
                args[at] = value
            else:
                kwargs[at] = value
        return frame.f_locals(tuple(args), kwargs)

    with entries.checking(call.callback):
        return _evaluate(frame.func.__code__, parsed, answering, call_locals, began)


def certify_declared(code: CodeType, captured: Captured) -> list[tuple[Certificate, str]] | str:
    """The domains a call declared to torch itself (``mark_dynamic(x, d, min=, max=)``),
    certified against ``code``'s entries on stand-ins of that call, each with the declaration
    in words; none where nothing is declared, a range is too large to decide point by point,
    or ``code`` has no entries left (a reset). A str: why no stand-in call can be made now (the
    call's other objects, held weakly, a module or ``self``, are gone)."""
    answering = _answering(code, None)
    if not answering:  # a reset
        return []
    rebuilt = captured.rebuild()  # the other arguments: the same at every point
    if rebuilt is None:
        return "the declaring call's objects were freed before its entries could be read"
    found = []
    for name, dim, low, high in captured.declared():
        if high - low + 1 > MAX_DECLARED:
            continue
        began = time.perf_counter()
        example = captured.values()
        parsed = parse_domain({name: {dim: range(low, high + 1)}}, example, _is_stand_in)
        stand_in = example[name]

        def call_locals(
            changes: dict[str, Any], name: str = name, stand_in: Any = stand_in
        ) -> dict[str, Any] | str:
            made = stand_in.make(changes[name])
            return made if isinstance(made, str) else {**rebuilt, name: made}

        with entries.checking(None):
            certificate = _evaluate(code, parsed, answering, call_locals, began)
        found.append((certificate, f"mark_dynamic({name}, {dim}, min={low}, max={high})"))
    return found


MAX_DECLARED = 20_000  # a declared range larger is left to covers() in parts


def _is_stand_in(value: Any) -> bool:
    return isinstance(value, StandIn)


def _evaluate(
    code: CodeType,
    parsed: Domain,
    answering: list[entries.KeptEntry],
    call_locals: Callable[[dict[str, Any]], dict[str, Any] | str],
    began: float,
) -> Certificate:
    """Each point of ``parsed`` decided from ``answering``'s guards, on the frame locals
    ``call_locals`` makes for it (a str: why none can be made, the point undecided)."""
    newest = max(answering, key=_compile_key)
    leaf_kinds: dict[str, str | None] = {}
    verdicts: list[tuple[tuple[Any, ...], Verdict]] = []
    uncovered: list[dict[str, Any]] = []
    undecided: list[dict[str, Any]] = []
    for point in parsed.points():
        changes = parsed.changes(point)
        f_locals = call_locals(changes)
        if isinstance(f_locals, str):
            verdict = Verdict(why=f_locals)
        else:
            verdict = _decide(code, answering, newest, f_locals, leaf_kinds)
        if not verdict.covered:
            verdicts.append((point, verdict))
            (undecided if verdict.why is not None else uncovered).append(changes)
    return Certificate(
        function=events.qualname(code),
        file=code.co_filename,
        line=code.co_firstlineno,
        domain=parsed.words(),
        points=parsed.size,
        entries=len(answering),
        uncovered=uncovered,
        undecided=undecided,
        groups=tuple(group(parsed, verdicts)),
        seconds=time.perf_counter() - began,
    )


def _places(
    signature: inspect.Signature, passed: int, parsed: Domain, has_self: bool
) -> dict[str, tuple[str, Any]]:
    """Where each parameter the domain changes sits in the call: ("pos", index) or ("kw",
    name); ``passed``: the positional arguments of the call, ``self`` included."""
    positional = [
        name
        for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    found: dict[str, tuple[str, Any]] = {}
    for axis in parsed.axes:
        for name, _ in axis.places:
            kind = signature.parameters[name].kind
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise CertificateError(
                    f"covers(): {name!r} collects several arguments (*{name} or **{name}): "
                    "name one parameter"
                )
            index = positional.index(name) if name in positional else None
            if index is not None and index < passed:
                found[name] = ("pos", index - (1 if has_self else 0))
            else:
                found[name] = ("kw", name)
    return found


def _frame(
    call: _Call, pos: tuple[Any, ...], kw: dict[str, Any]
) -> tuple[_Frame, list[entries.KeptEntry]]:
    """The frame whose entries answer the call, and those entries: the outermost whose
    entries accept the example call (a shared frame, ``Module._call_impl`` or a decorator's
    wrapper, holds other callers' entries too), else the outermost that has entries."""
    first: tuple[_Frame, list[entries.KeptEntry]] | None = None
    for frame in call.frames:
        answering = _answering(frame.func.__code__, call.callback)
        if not answering:
            continue
        try:
            f_locals = frame.f_locals(pos, kw)
        except TypeError:
            continue
        with entries.checking(call.callback):
            if any(_safe_accepts(e, f_locals) for e in answering):
                return frame, answering
        first = first or (frame, answering)
    if first is None:
        name = events.qualname(call.user.func.__code__)
        raise CertificateError(
            f"covers(): '{name}' has no cache entries: call it (the warm-up) before covers(), "
            "which certifies what the compiled entries already serve"
        )
    return first


def _safe_accepts(entry: entries.KeptEntry, f_locals: dict[str, Any]) -> bool:
    try:
        return _accepts(entry, f_locals)
    except Exception:
        return False


def _decide(
    code: CodeType,
    answering: list[entries.KeptEntry],
    newest: entries.KeptEntry,
    f_locals: dict[str, Any],
    leaf_kinds: dict[str, str | None],
) -> Verdict:
    breaking = None
    for entry in answering:
        try:
            accepted = _accepts(entry, f_locals)
        except Exception as exc:  # a guard torch cannot evaluate on a stand-in
            return Verdict(why=f"entry {entry.compile_id}'s guards raised {type(exc).__name__}")
        if accepted and entries.breaks_graph(entry):
            breaking = entry
        elif accepted:
            return Verdict(covered=True)
    if breaking is not None:
        return Verdict(
            why=f"entry {breaking.compile_id} breaks the graph: past the break, the resume "
            "function's guards decide, on values the function computes"
        )
    return Verdict(reason=_reason(code, newest, f_locals, leaf_kinds))


def _reason(
    code: CodeType, entry: entries.KeptEntry, f_locals: dict[str, Any], leaf_kinds: dict[str, Any]
) -> Reason:
    """The newest entry's failing guard for this call, in torch's words, parsed."""
    raw = entries.fail_reason(entry, f_locals)
    key = reasons.same_guard_text(raw.partition(": ")[2])
    if key not in leaf_kinds:
        leaf_kinds[key] = guard_tree.failing_leaf_kinds([entry], (raw,))[0]
    return reasons.parse_reason(raw, leaf_kinds[key], code.co_filename)
