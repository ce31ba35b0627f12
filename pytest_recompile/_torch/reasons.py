"""torch's reason and guard text, release by release, as plain values (pure: no torch import,
so its tests run without torch): the failing guard of a rejected call (``parse_reason``), the
lines torch names for it (its comment on 2.9 and 2.10, the "User stack trace" from 2.11), and
one leaf of an installed guard tree (``installed_guard``). The vocabulary, the values and the
fix hints they are made into are ``model/guards.py``'s.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import NamedTuple

from ..model.guards import (
    FRAMEWORK_KINDS,
    ROOT_SOURCE,
    InstalledGuard,
    Reason,
    SourceLine,
    normalise_kind,
)
from ..model.names import LIBRARY_FOLDERS

_STDLIB = os.path.dirname(os.__file__)


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


# -- installed guards ---------------------------------------------------------------------


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
