"""Guard-failure reasons and installed guards as plain values: parse, classify, hint (pure).

One vocabulary of guard kinds, named after torch's guards. torch's C++ guard tree and its
Python ``GuardBuilder`` spell some kinds differently (``LENGTH_CHECK`` / ``SEQUENCE_LENGTH``,
``CONSTANT_MATCH`` / ``EQUALS_MATCH``); :func:`normalise_kind` accepts both.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

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


# -- reasons --------------------------------------------------------------------------------

# "0/3: " names the cache entry (frame id / compile attempt) whose guards rejected the call.
_ENTRY = re.compile(r"^\s*(?P<entry>\d+/\d+):\s*")
# torch aligns the guard text, then comments it with the user's source line and location:
#   G['step'] == 0                         # return x + step  # tests/test_a.py:5 in f
# Several failing parts are joined by "; ", each with its own comment; the user's line may
# hold ";" and "#" itself, so a comment ends at its location, or else at the end of the line.
_COMMENT = re.compile(r"\s{2,}#\s.*?\s#\s[^\s#]*:\d+ in [\w<>.]+")
_TRAILING_COMMENT = re.compile(r"\s{2,}#\s.*$")
_STACK = "\nUser stack trace:"

# tensor 'x' size mismatch at index 0. expected 4, actual 8   (older: tensor 'L['x']' ...)
_TENSOR = re.compile(r"^tensor '(?P<source>.+?)' (?P<what>.+?) mismatch", re.DOTALL)
_EXPECTED_ACTUAL = re.compile(
    r"expected(?: device index to be)? (?P<expected>[^,]+?),? actual (?P<actual>[^\s,]+)",
    re.IGNORECASE,
)
_TENSOR_DETAIL = (
    ("size", "size"),
    ("stride", "stride"),
    ("dtype", "dtype"),
    ("rank", "rank"),
    ("requires_grad", "requires_grad"),
    ("dispatch key", "device"),
    ("device", "device"),
    ("storage offset", "storage_offset"),
)
# 2.13: expected type of 'y' to be a tensor type, ' but found <class 'NoneType'>
# 2.14: expected type of 'y' to be <class 'torch.Tensor'>, but found <class 'NoneType'>
_NOT_A_TENSOR = re.compile(r"^expected type of '(?P<source>.+?)' to be (?P<want>.*?)\bbut found")
_FOUND = re.compile(r"found <class '(?P<found>[^']+)'>")
_SHAPE = re.compile(r"\.(size|stride)\(\)|storage_offset\(\)|\bEq\(|\bNe\(|mark_unbacked")
_EQUALS = re.compile(r"^(?P<source>.+?) == (?P<expected>.+)$", re.DOTALL)
_IS_NONE = re.compile(r"^(?P<source>.+?) is (?:not )?None$")
_ALIAS = re.compile(r"^(?P<source>\S+) is (?:not )?(?P<other>\S+)$")
_CALL_SOURCE = re.compile(r"\((?P<source>.+?), \d+\)")


# torch's "User stack trace" block (2.11 and newer; see docs/compatibility.md): the frames from
# the compiled function to the line that read the guarded value, outermost first, full paths.
_FRAME = re.compile(r'^  File "(?P<file>.+)", line (?P<line>\d+), in (?P<function>.+)$')
# The comment torch puts beside a guard's code: `  # the user's line  # file:line in function`
# (the user's line may hold "#" itself; the location is the last part). Its file is shortened by
# torch (``torch.utils._traceback.shorten_filename``), not a path to open.
_LOCATION = re.compile(
    r"\s{2,}#\s(?P<code>.*?)\s{2}#\s(?P<file>[^\s#]+):(?P<line>\d+) "
    r"in (?P<function>[\w<>.]+)(?!.*:\d+ in )"
)
# Files that are not the user's own: installed packages and the standard library.
LIBRARY_FOLDERS = ("site-packages", "dist-packages")
_STDLIB = os.path.dirname(os.__file__)


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


def library_file(path: str) -> bool:
    """Whether ``path`` is an installed package's or the standard library's, not the user's."""
    parts = path.replace("\\", "/").split("/")
    return any(folder in parts for folder in LIBRARY_FOLDERS) or path.startswith(_STDLIB + os.sep)


def stack_lines(raw: str) -> tuple[SourceLine, ...]:
    """The frames of torch's "User stack trace" block, outermost first (none without one)."""
    _, found, stack = raw.partition(_STACK)
    if not found:
        return ()
    frames: list[SourceLine] = []
    for text in stack.splitlines():
        frame = _FRAME.match(text)
        if frame is not None:
            frames.append(
                SourceLine(frame["file"], int(frame["line"]), frame["function"].strip(), "")
            )
        elif frames and text.startswith("    ") and not frames[-1].code:
            frames[-1] = replace(frames[-1], code=text.strip())
    return tuple(frames)


def comment_line(raw: str, function_file: str | None) -> SourceLine | None:
    """The line torch's guard comment names, where its shortened file is ``function_file``
    (the compiled function's own file: the path is then known, not guessed); else None."""
    if function_file is None:
        return None
    for text in raw.split(_STACK, 1)[0].splitlines():
        found = _LOCATION.search(text)
        if found is None:
            continue
        short = found["file"].replace("\\", "/")
        full = function_file.replace("\\", "/")
        head = full[: len(full) - len(short)]
        # shorten_filename cuts the common prefix with torch's folder and its "/"; where that
        # prefix is "/" alone, it cuts one character more ("/tmp/a.py" -> "mp/a.py")
        if full.endswith(short) and (head.endswith("/") or head in ("", f"/{full[1:2]}")):
            return SourceLine(
                function_file, int(found["line"]), found["function"], found["code"].strip()
            )
    return None


def guard_lines(
    raw: str, function_file: str | None = None
) -> tuple[SourceLine | None, SourceLine | None]:
    """Where a failing guard's value was read: the innermost frame torch names, and, when that
    frame is library code (torch.nn, transformers), the innermost frame in the user's own
    files as well (else None). Both None where torch named no location: nothing is guessed."""
    frames = stack_lines(raw) or tuple(filter(None, [comment_line(raw, function_file)]))
    if not frames:
        return None, None
    site = frames[-1]
    if not library_file(site.file):
        return site, None
    own = next((f for f in reversed(frames) if not library_file(f.file)), None)
    return site, own


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


_LOCAL = re.compile(r"L\['([^']+)'\]")


def same_guard_text(text: str) -> str:
    """A key under which a reason's text and the leaf's code part compare equal."""
    return _LOCAL.sub(r"\1", strip_comment(text)).replace(" ", "")


def strip_comment(text: str) -> str:
    """A guard's code part without torch's alignment and ``# source  # file:line`` comment."""
    first = text.split(_STACK, 1)[0]
    lines = [
        _TRAILING_COMMENT.sub("", _COMMENT.sub("", line)).strip() for line in first.splitlines()
    ]
    return "; ".join(line for line in lines if line)


def parse_reason(
    raw: str, leaf_kind: str | None = None, function_file: str | None = None
) -> Reason:
    """Split and classify torch's reason string; never raises, whatever the text.

    ``leaf_kind`` is the type name of the failing leaf guard when the guard tree told us
    (exact); otherwise the kind comes from the text. ``function_file``: the compiled function's
    file, which the location in torch's guard comment may name (see :func:`guard_lines`).
    """
    body = raw.split(_STACK, 1)[0]
    entry = None
    match = _ENTRY.match(body)
    if match:
        entry = match.group("entry")
        body = body[match.end() :]
    text = normalise_scope(strip_comment(body))
    if not text and entry is not None:
        # torch 2.9 gives an empty reason when every guard passed but the backend differs.
        text = BACKEND_CHANGED
    text = text or raw.strip() or "(torch gave no reason)"
    kind, detail, source, expected, actual = classify_text(text)
    exact = normalise_kind(leaf_kind) if leaf_kind else None
    if exact is not None and exact != kind:
        kind, detail = exact, None
    site, own = guard_lines(raw, function_file)
    return Reason(text, entry, raw, kind, detail, source, expected, actual, site, own)


class Classified(NamedTuple):
    """What a guard's text says: its kind, a detail (size, dtype, grad_mode...), the value it
    guards (``x``, ``G['step']``), and the expected and actual values where it gives them."""

    kind: str
    detail: str | None = None
    source: str | None = None
    expected: str | None = None
    actual: str | None = None


# 2.9-2.12 name the globals of exec'd code G['___unnamed_scope_140687992602752_c90']['step'].
_UNNAMED_SCOPE = re.compile(r"G\['___unnamed_scope_\w+'\]")


def normalise_scope(text: str) -> str:
    """``G['___unnamed_scope_...']['step']`` (2.9-2.12, exec'd code) as ``G['step']``."""
    return _UNNAMED_SCOPE.sub("G", text)


BACKEND_CHANGED = "BACKEND_MATCH: the backend changed (torch gave no other reason)"


def classify_text(text: str) -> Classified:
    """A guard's kind and particulars from its text alone."""
    tensor = _TENSOR.match(text)
    if tensor:
        what = tensor.group("what").lower()
        detail = next((name for key, name in _TENSOR_DETAIL if key in what), None)
        ea = _EXPECTED_ACTUAL.search(text)
        return Classified(
            "TENSOR_MATCH",
            detail,
            tensor.group("source"),
            ea.group("expected").strip() if ea else None,
            ea.group("actual").strip() if ea else None,
        )
    wrong_type = _NOT_A_TENSOR.match(text)
    if wrong_type:
        found = _FOUND.search(text)
        wants_tensor = "ensor" in wrong_type.group("want")
        return Classified(
            "TENSOR_MATCH" if wants_tensor else "TYPE_MATCH",
            "type" if wants_tensor else None,
            wrong_type.group("source"),
            "a tensor" if wants_tensor else wrong_type.group("want").strip(" ,'"),
            found.group("found") if found else None,
        )
    if text.startswith("GLOBAL_STATE changed:"):
        flags = text.split(":", 1)[1].strip()
        return Classified("GLOBAL_STATE", flags or None)
    if "___check_global_state" in text:
        return Classified("GLOBAL_STATE")
    if text.startswith("BACKEND_MATCH") or "___check_current_backend" in text:
        return Classified("BACKEND_MATCH")
    if "___check_obj_id" in text:
        return Classified("ID_MATCH", None, _call_source(text))
    if "___check_type_id" in text:
        return Classified("TYPE_MATCH", None, _call_source(text))
    if "___check_torch_function_mode_stack" in text:
        return Classified("TORCH_FUNCTION_MODE_STACK")
    if "CURRENT_DEVICE" in text:
        return Classified("DEFAULT_DEVICE")
    if "Duplicate tensor found" in text or "___check_no_aliasing" in text:
        return Classified("OBJECT_ALIASING")
    if text.startswith("len("):
        eq = _EQUALS.match(text)
        source = eq.group("source")[4:-1] if eq else None
        return Classified("SEQUENCE_LENGTH", None, source, eq.group("expected") if eq else None)
    if _SHAPE.search(text):
        return Classified("SHAPE_ENV", "0/1 specialization" if "mark_unbacked" in text else None)
    none = _IS_NONE.match(text)
    if none:
        return Classified("NONE_MATCH", None, none.group("source"))
    alias = _ALIAS.match(text)
    if alias:
        return Classified("OBJECT_ALIASING", None, alias.group("source"))
    equals = _EQUALS.match(text)
    if equals:
        return Classified("EQUALS_MATCH", None, equals.group("source"), equals.group("expected"))
    return Classified("OTHER")


def _call_source(text: str) -> str | None:
    match = _CALL_SOURCE.search(text)
    return match.group("source") if match else None


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


def installed_guard(
    torch_kind: str, source: str, code_parts: list[str], entry: str, structural: bool
) -> InstalledGuard:
    """Classify one leaf of a guard tree (``structural``: on a module's attribute or on the
    key of a dict torch iterated, see :attr:`.._torch.guard_tree.Leaf.structural`)."""
    text = "; ".join(strip_comment(part) for part in code_parts) or torch_kind
    kind = normalise_kind(torch_kind)
    if kind is None and not source:  # epilogue lambda guards: symbolic shapes, aliasing
        by_text = classify_text(text).kind
        kind = by_text if by_text != "OTHER" else None
    kind = kind or torch_kind
    framework = (
        source == ROOT_SOURCE  # ambient state, checked for every frame
        or (torch_kind in FRAMEWORK_KINDS and bool(source))
        or structural
        or "__builtins" in source
        or (kind in ("ID_MATCH", "TYPE_MATCH") and "type=<class 'module'>" in text)
    )
    return InstalledGuard(kind, torch_kind, source, text, entry, framework)


# -- graph breaks ---------------------------------------------------------------------------
