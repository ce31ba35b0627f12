"""Guard kinds and the values made of torch's guard text: the vocabulary, a failing guard
(:class:`Reason`) and an installed one (:class:`InstalledGuard`), and the fix hint of each kind
(pure). Parsing torch's text into them, which follows torch's wording release by release, is
``_torch/reasons.py``'s.

One vocabulary of guard kinds, named after torch's guards. torch's C++ guard tree and its
Python ``GuardBuilder`` spell some kinds differently (``LENGTH_CHECK`` / ``SEQUENCE_LENGTH``,
``CONSTANT_MATCH`` / ``EQUALS_MATCH``); :func:`normalise_kind` accepts both.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .results import GuardResult, ReasonResult, SourceLineResult

# -- the vocabulary -------------------------------------------------------------------------

KINDS = (
    "TENSOR_MATCH",
    "EQUALS_MATCH",
    "GLOBAL_STATE",
    "ID_MATCH",
    "TYPE_MATCH",
    "SEQUENCE_LENGTH",
    "SHAPE_ENV",
    "NONE_MATCH",
    "OBJECT_ALIASING",
    "BACKEND_MATCH",
    "DEFAULT_DEVICE",
    "TORCH_FUNCTION_MODE_STACK",
    "OTHER",
)

ALIASES = {
    "CONSTANT_MATCH": "EQUALS_MATCH",
    "LENGTH_CHECK": "SEQUENCE_LENGTH",
    "DICT_LENGTH": "SEQUENCE_LENGTH",
    "TUPLE_ITERATOR_LEN": "SEQUENCE_LENGTH",
    "FUNCTION_MATCH": "ID_MATCH",
    "CLOSURE_MATCH": "ID_MATCH",
    "BUILTIN_MATCH": "ID_MATCH",
    "NN_MODULE": "ID_MATCH",
    "CHECK_TENSOR": "TENSOR_MATCH",
    "NO_TENSOR_ALIASING": "OBJECT_ALIASING",
    "SYMBOLIC_SHAPE": "SHAPE_ENV",
    "RELATIONAL_GUARD": "SHAPE_ENV",
    "NOT_NONE": "NONE_MATCH",
    "NOT_NONE_MATCH": "NONE_MATCH",
    "NONE_MATCH": "NONE_MATCH",
    "IS_NONE": "NONE_MATCH",
}

# Guards torch installs on every frame, or on library objects: they say nothing about the
# user's values. Kept in the inventory (marked framework) but never forbidden or reported.
FRAMEWORK_KINDS = frozenset(
    {
        "LAMBDA_GUARD",
        "GLOBAL_STATE",
        "TORCH_FUNCTION_MODE_STACK",
        "DEFAULT_DEVICE",
        "DIMENSION_DYNAMIC_MARKING_GUARD",
        "GRAD_MODE",
        "DETERMINISTIC_ALGORITHMS",
        "FUNCTORCH_STACK_MATCH",
        "DUAL_LEVEL",
        "AUTOGRAD_SAVED_TENSORS_HOOKS",
    }
)


# The root of a guard tree: its leaves check ambient state (grad mode, default device, ...).
ROOT_SOURCE = "L"


class UnknownKind(ValueError):
    """A guard kind that is not in the vocabulary (nor an alias of one)."""


def normalise_kind(name: str) -> str | None:
    """The vocabulary's name for a torch guard name, or None if it has none."""
    upper = name.strip().upper()
    if upper in KINDS:
        return upper
    return ALIASES.get(upper)


# TENSOR_MATCH's details, as labels show them: TENSOR_MATCH(size), TENSOR_MATCH(dtype), ...
TENSOR_DETAILS = (
    "size",
    "stride",
    "dtype",
    "rank",
    "requires_grad",
    "device",
    "storage_offset",
    "type",
)
_KIND_DETAIL = re.compile(r"^\s*(?P<kind>\w+)\s*\((?P<detail>.*)\)\s*$", re.DOTALL)


def check_kind(name: object, where: str, *, details: bool = True) -> str:
    """A kind a user named (a marker argument): ``KIND``, a torch alias, or, where
    ``details``, ``KIND(detail)`` such as ``TENSOR_MATCH(size)`` or
    ``GLOBAL_STATE(grad_mode)``; returned as the vocabulary spells it. Raise UnknownKind
    with the closest match."""
    if not isinstance(name, str):
        raise UnknownKind(
            f"{where}: guard kinds are strings such as 'TENSOR_MATCH', got {name!r} "
            f"({type(name).__name__})"
        )
    parts = _KIND_DETAIL.match(name)
    kind = normalise_kind(parts.group("kind") if parts else name)
    if kind is None:
        typed = parts.group("kind") if parts else name
        close = difflib.get_close_matches(typed.upper(), [*KINDS, *ALIASES], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownKind(
            f"{where}: unknown guard kind {name!r}{hint}; valid kinds: {', '.join(KINDS)} "
            f"(torch's aliases {', '.join(sorted(ALIASES))} are accepted too), each also "
            "as KIND(detail), such as 'TENSOR_MATCH(size)'"
        )
    if parts is None:
        return kind
    detail = parts.group("detail").strip()
    if not details:
        raise UnknownKind(
            f"{where}: {name!r}: installed guards have no detail (one TENSOR_MATCH checks "
            f"dtype, device, size and stride together); name the kind alone, {kind!r}"
        )
    if not detail:
        raise UnknownKind(f"{where}: {name!r} names no detail; write {kind!r} for any")
    if kind == "TENSOR_MATCH":
        detail = detail.lower()
        if detail not in TENSOR_DETAILS:
            raise UnknownKind(
                f"{where}: unknown detail {detail!r} in {name!r}; TENSOR_MATCH's details are "
                f"{', '.join(TENSOR_DETAILS)}"
            )
    return label_for(kind, detail)


def kind_matches(kinds: frozenset[str], kind: str, detail: str | None) -> bool:
    """Whether a guard of ``kind`` and ``detail`` is among ``kinds``: by its kind, or, for
    ``KIND(detail)``, by each of its details (``GLOBAL_STATE changed: grad_mode
    deterministic_algorithms`` names several flags: each must be named)."""
    if kind in kinds:
        return True
    parts = (detail or "").replace(",", " ").split()
    return bool(parts) and all(label_for(kind, part) in kinds for part in parts)


# -- values: reasons and the lines they name ---------------------------------------------


@dataclass(frozen=True)
class SourceLine:
    """A line of code torch names for a guard: where the guarded value was read."""

    file: str  # a path as torch gave it (full in a stack trace)
    line: int
    function: str
    code: str  # the source line, stripped; "" where torch gave none

    def to_dict(self) -> SourceLineResult:
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
        }


@dataclass(frozen=True)
class Reason:
    """Why one cache entry rejected a call."""

    text: str  # the failing guard as torch words it, without the source comment
    entry: str | None  # the rejecting cache entry, "0/2"; None when torch did not say
    raw: str  # the full string torch produced
    kind: str = "OTHER"
    detail: str | None = None  # size / dtype / ... for TENSOR_MATCH, the flag for GLOBAL_STATE
    source: str | None = None  # L['x'], G['step'], self.scale
    expected: str | None = None
    actual: str | None = None
    site: SourceLine | None = None  # the line that read the guarded value, where torch says
    own_site: SourceLine | None = None  # the user's own line, where ``site`` is library code

    @property
    def label(self) -> str:
        return label_for(self.kind, self.detail)

    @property
    def hint(self) -> str:
        return hint_for(self.kind, self.detail, self.source, self.text)

    def to_dict(self) -> ReasonResult:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "source": self.source,
            "expected": self.expected,
            "actual": self.actual,
            "text": self.text,
            "entry": self.entry,
            "raw": self.raw,
            "site": self.site.to_dict() if self.site is not None else None,
            "own_site": self.own_site.to_dict() if self.own_site is not None else None,
        }


def label_for(kind: str, detail: str | None) -> str:
    """``TENSOR_MATCH(size)``, or the kind alone."""
    return f"{kind}({detail})" if detail else kind


# -- hints ----------------------------------------------------------------------------------

_TENSOR_HINTS = {
    "size": "a dimension changed size: torch._dynamo.mark_dynamic(x, dim) before the call, or "
    "torch.compile(..., dynamic=True)",
    "rank": "the number of dimensions changed: give the input one rank before the call "
    "(reshape / unsqueeze); each rank is a graph of its own",
    "dtype": "the dtype changed: cast the input to one dtype before the call; each dtype is a "
    "graph of its own",
    "stride": "the memory layout changed: pass x.contiguous() (or one layout) on every call",
    "requires_grad": "requires_grad changed: keep it the same on every call (detach() or "
    "requires_grad_())",
    "device": "the device changed: keep the input on one device; each device is a graph of its own",
    "type": "a tensor argument became another type (None?): pass a tensor on every call",
}

_HINTS = {
    "EQUALS_MATCH": "a Python value is baked into the graph as a constant: pass it as a tensor "
    "(torch.tensor(value)) so it is data, not code",
    "ID_MATCH": "a new object on each call (a lambda, closure or module rebuilt in a loop): "
    "create it once, outside the loop",
    "TYPE_MATCH": "the value changed type (list vs tuple, one class vs another): pass one type",
    "SEQUENCE_LENGTH": "a list or tuple changed length: pad it to one length, or pass a tensor",
    "SHAPE_ENV": "a symbolic-shape guard failed: widen the range with "
    "torch._dynamo.mark_dynamic(x, dim, min=..., max=...) or use dynamic=True",
    "NONE_MATCH": "an argument alternates between None and a value: pass one type on every call",
    "OBJECT_ALIASING": "inputs alias each other on some calls only: pass distinct tensors (clone) "
    "or aliased ones consistently",
    "BACKEND_MATCH": "the function was compiled for another backend: compile it with one backend",
    "DEFAULT_DEVICE": "torch.set_default_device changed between calls: set it once at start-up",
    "TORCH_FUNCTION_MODE_STACK": "a TorchFunctionMode was entered or left between calls: keep "
    "the same modes active around every call",
    "OTHER": "run with TORCH_LOGS=guards,recompiles to see the guard in full",
}


_AT_INDEX = re.compile(r"\bat index (?P<dim>\d+)")
_SCOPED = re.compile(r"^[LG]\['(?P<name>[^']+)'\]")


def expression(source: str) -> str:
    """A guard's source as the user's code writes it: ``L['x']`` -> ``x``,
    ``L['batch']['ids']`` -> ``batch['ids']``, ``G['cache'].k`` -> ``cache.k``."""
    return _SCOPED.sub(lambda m: m.group("name"), source.strip(), count=1)


# The fixes for what no single guard names: too many guards, recompile_limit hit.
GUARDS_FIX = (
    "compile the repeated block instead of the whole model (for layer in model.layers: "
    "layer.compile()), so each entry guards one layer; or, where parameters never change "
    "identity, torch.compile(model, options={'guard_filter_fn': "
    "torch.compiler.skip_guard_on_inbuilt_nn_modules_unsafe})"
)


LIMIT_FIX = (
    "torch now runs it uncompiled, silently; remove the cause of its recompiles, or "
    "raise torch._dynamo.config.recompile_limit if they are expected"
)
OWN_LIMIT_FIX = (  # the limit was the torch.compile call's own (its recompile_limit=)
    "torch now runs it uncompiled, silently; remove the cause of its recompiles, or "
    "raise the recompile_limit= of its torch.compile call if they are expected"
)


def hint_for(kind: str, detail: str | None, source: str | None, text: str) -> str:
    """The usual fix for a failing guard of this kind, in one line."""
    if kind == "TENSOR_MATCH":
        dim = _AT_INDEX.search(text) if detail == "size" else None
        if dim is not None and source:
            return (
                f"dimension {dim.group('dim')} of {expression(source)} changed size: "
                f"torch._dynamo.mark_dynamic({expression(source)}, {dim.group('dim')}) before "
                "the call, or torch.compile(..., dynamic=True)"
            )
        return _TENSOR_HINTS.get(detail or "", "a tensor property changed: keep inputs alike")
    if kind == "GLOBAL_STATE":
        if detail and "grad_mode" in detail:
            return (
                "grad mode differs (torch.no_grad vs grad): expected, one graph per mode, "
                "so budget 1 recompile for the pair"
            )
        flag = detail or "global torch state"
        return f"{flag} changed between calls: set it once at start-up, not per call"
    if kind == "SHAPE_ENV" and (detail == "0/1 specialization" or "2 <=" in text):
        return (
            "a size of 0 or 1 after a dynamic dimension (0/1 specialization): "
            "torch._dynamo.decorators.mark_unbacked(x, dim) keeps one graph"
        )
    if kind == "EQUALS_MATCH" and source is not None:
        if source.endswith(".training"):
            return "train/eval switch: expected, one graph per mode, so budget 1 recompile"
        if source.startswith(("self.", "L['self']")) or "._modules[" in source:
            return (
                "an nn.Module attribute is baked into the graph: store it as a tensor buffer, "
                "or set torch._dynamo.config.allow_unspec_int_on_nn_module = True for ints"
            )
    return _HINTS.get(kind, _HINTS["OTHER"])


# -- installed guards -----------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledGuard:
    """One leaf guard of a cache entry, as the guard tree holds it."""

    kind: str  # vocabulary kind, or torch's own name where the vocabulary has none
    torch_kind: str  # the C++ leaf type name, e.g. LENGTH_CHECK
    source: str
    text: str
    entry: str  # the cache entry's compile id, "0/1"
    framework: bool  # installed by torch on every frame or on a library object

    def to_dict(self) -> GuardResult:
        return {
            "kind": self.kind,
            "torch_kind": self.torch_kind,
            "source": self.source,
            "text": self.text,
            "entry": self.entry,
            "framework": self.framework,
        }
