"""Checking a JSON document against the report's schema (``report.schema.json``), as every
reader of a report does before it trusts a field: the first place that does not fit, named.

The checker implements a closed subset of JSON Schema 2020-12, :data:`KEYWORDS` (``type``,
``const``, ``enum``, ``minimum``, ``required``, ``properties``, ``additionalProperties``,
``items``, ``oneOf``, local ``$ref``), and ignores on purpose the annotations of
:data:`ANNOTATIONS` (``title``, ``description``, ``$comment``, ``$schema``, ``$id``, and
``$defs``, where ``$ref`` points). A schema with any other keyword (``pattern``, ``anyOf``,
``maxItems``, ...) is refused when it is compiled (:class:`SchemaError`, naming the keyword and
where it is), never silently read as if the keyword were not there.

The schema is compiled once, twice over: into Python source that only says whether a document
fits (:class:`_Fits`; a 10,000-test report in a fraction of a second: ``benchmarks/shards.py``),
and into checks that find and word the first field that does not (:class:`_Explain`), run only
then. The package needs no jsonschema.

Where it differs from JSON Schema, it is stricter: an ``integer`` is a JSON integer, so an
integral float (``1.0``) does not fit one (:data:`INTEGRAL_FLOAT`; jsonschema takes it). Python's
json never writes ``1.0`` for an int, and the readers rely on getting an int. ``const`` and
``enum`` values are strings, integers, booleans or null, and match a value of the same JSON
type only (so ``1.0`` matches no ``1`` either).

``tests/reports/test_schema.py`` holds it to that: it mutates a real report (a required key
dropped, an unknown key added, a value of each JSON type put in place of another, an enum
member or a minimum broken) and checks that :func:`report_fits` says what jsonschema's
``Draft202012Validator`` says of every mutant, but for integral floats, which only jsonschema
takes, and that the wording names a path of the document exactly when a mutant does not fit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")
"""The report's schema, shipped beside this module."""

KEYWORDS = frozenset(
    {
        "type",
        "const",
        "enum",
        "minimum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "oneOf",
        "$ref",
    }
)
"""The keywords of JSON Schema that the checker implements; any keyword outside these and
:data:`ANNOTATIONS` is refused when a schema is compiled."""

ANNOTATIONS = frozenset({"title", "description", "$comment", "$schema", "$id", "$defs"})
"""The keywords the checker reads past on purpose: they say nothing of what fits (``$defs``
holds the schemas ``$ref`` names, checked for their keywords like any other)."""

INTEGRAL_FLOAT = (
    "an integer field is written without a fraction (1, not 1.0): the one place this "
    "checker is stricter than jsonschema, which takes 1.0 for an integer, since every count "
    "is shown and summed as a whole number"
)
"""Why a misfit that jsonschema would take is one: added to the wording of ``1.0`` where an
integer belongs."""

Check = Callable[[Any, str], "str | None"]
"""A compiled check: the value and its path in; None, or what does not fit at which path."""

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
"""Each JSON type of ``type``, as a test of a value that json loaded."""

_SCALARS = (str, int, bool, type(None))
"""What a ``const`` or an ``enum`` member may be: compared by value and JSON type."""


class SchemaError(ValueError):
    """A schema the checker cannot read as JSON Schema would: a keyword outside
    :data:`KEYWORDS` and :data:`ANNOTATIONS`, or a keyword's value it does not implement (a
    remote ``$ref``, a float ``const``), raised when the schema is compiled, with where."""


def _pointer(at: str, *parts: str | int) -> str:
    """The JSON pointer ``at`` (``#/$defs/test``) extended by ``parts``, escaped."""
    for part in parts:
        at += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return at


def _resolve(root: dict[str, Any], pointer: str) -> Any:
    """The part of ``root`` a local ``$ref`` names (``#/$defs/test``)."""
    if pointer != "#" and not pointer.startswith("#/"):
        raise SchemaError(f"{pointer!r}: only a local reference (#/...) is implemented")
    node: Any = root
    for part in pointer[2:].split("/") if pointer != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise SchemaError(f"{pointer!r} names nothing in the schema")
    return node


def _refuse_beyond_subset(root: Any) -> None:
    """Raise :class:`SchemaError` where ``root`` or a schema inside it uses JSON Schema beyond
    what the checker implements: both halves call it before they compile a thing."""

    def walk(at: str, node: Any) -> None:
        """Check the schema ``node`` at ``at`` and every schema inside it."""
        if not isinstance(node, dict):
            raise SchemaError(
                f"{at}: a schema is an object here (true or false only as "
                f"additionalProperties), got {json.dumps(node)[:60]}"
            )
        for keyword, value in node.items():
            if keyword not in KEYWORDS and keyword not in ANNOTATIONS:
                raise SchemaError(
                    f"{at}: unknown keyword {keyword!r}: the report's schema checker implements "
                    f"only {', '.join(sorted(KEYWORDS))}, and ignores the annotations "
                    f"{', '.join(sorted(ANNOTATIONS))}"
                )
            problem = _value_problem(root, keyword, value)
            if problem:
                raise SchemaError(f"{_pointer(at, keyword)}: {problem}")
            if keyword in ("properties", "$defs"):
                for name, sub in value.items():
                    walk(_pointer(at, keyword, name), sub)
            elif keyword == "oneOf":
                for index, option in enumerate(value):
                    walk(_pointer(at, keyword, index), option)
            elif keyword == "items" or (
                keyword == "additionalProperties" and not isinstance(value, bool)
            ):
                walk(_pointer(at, keyword), value)

    walk("#", root)


def _value_problem(root: Any, keyword: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the value of ``keyword`` for this checker, or None (a
    schema inside it is checked on its own)."""
    said = json.dumps(value)[:60]
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        if not names or any(not isinstance(name, str) or name not in _TYPES for name in names):
            return f"expected a JSON type or a list of them, got {said}"
    elif keyword == "const" and type(value) not in _SCALARS:
        return f"a const is a string, integer, boolean or null here, got {said}"
    elif keyword == "enum" and (
        not isinstance(value, list) or not value or any(type(m) not in _SCALARS for m in value)
    ):
        return f"an enum is a list of strings, integers, booleans or null here, got {said}"
    elif keyword == "minimum" and type(value) not in (int, float):
        return f"expected a number, got {said}"
    elif keyword == "required" and (
        not isinstance(value, list) or any(type(key) is not str for key in value)
    ):
        return f"expected a list of names, got {said}"
    elif keyword in ("properties", "$defs") and not isinstance(value, dict):
        return f"expected an object of schemas, got {said}"
    elif keyword == "oneOf" and (not isinstance(value, list) or not value):
        return f"expected a list of schemas, got {said}"
    elif keyword == "$ref":
        if not isinstance(value, str):
            return f"expected a local reference, got {said}"
        try:
            _resolve(root, value)
        except SchemaError as error:
            return str(error)
    return None


def _name(value: Any) -> str:
    """The JSON type of ``value``, as a message names it."""
    for name, test in _TYPES.items():
        if name != "number" and test(value):
            return name
    return "number" if _TYPES["number"](value) else type(value).__name__


def _at(path: str) -> str:
    """The document's ``path`` as a message names it: the top is "the document"."""
    return path or "the document"


def _is_member(value: Any, members: list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``members`` (scalars) by value and JSON type: ``True`` is
    not ``1``, ``1.0`` is not ``1``, as for jsonschema (bar the integral float)."""
    return any(value == member and type(value) is type(member) for member in members)


class _Explain:
    """The schema as checks that word what does not fit: the first misfit of a document, at
    its path (``tests[0].recompiles: expected integer, got null``). Run only on a document
    :class:`_Fits` said no to, and bound to say no where it does."""

    def __init__(self, root: dict[str, Any]) -> None:
        """Compile nothing yet; refuse a schema beyond the subset (:class:`SchemaError`)."""
        _refuse_beyond_subset(root)
        self.root = root
        self.refs: dict[str, Check] = {}

    def build(self) -> Check:
        """The check of a whole document (its path: "")."""
        return self.compile(self.root)

    def ref(self, pointer: str) -> Check:
        """The check of the schema ``$ref`` ``pointer`` names, compiled once (a cycle of
        references reaches the check while it is compiled, and calls it once it is)."""
        if pointer not in self.refs:
            self.refs[pointer] = lambda value, path: self.refs[pointer](value, path)  # a cycle
            self.refs[pointer] = self.compile(_resolve(self.root, pointer))
        return self.refs[pointer]

    def compile(self, node: dict[str, Any]) -> Check:
        """The check of the schema ``node``: each keyword's in turn, the first misfit told."""
        checks: list[Check] = []
        if "$ref" in node:
            checks.append(self.ref(node["$ref"]))
        if "type" in node:
            names = node["type"] if isinstance(node["type"], list) else [node["type"]]
            tests = [_TYPES[name] for name in names]
            said = " or ".join(names)

            def typed(value: Any, path: str) -> str | None:
                """``type``: the value's JSON type is one of ``names``."""
                if any(test(value) for test in tests):
                    return None
                if "integer" in names and isinstance(value, float) and value.is_integer():
                    return f"{_at(path)}: expected {said}, got {value!r}: {INTEGRAL_FLOAT}"
                return f"{_at(path)}: expected {said}, got {_name(value)}"

            checks.append(typed)
        if "const" in node:
            const = node["const"]
            checks.append(
                lambda v, p: (
                    None
                    if _is_member(v, (const,))
                    else f"{_at(p)}: expected {json.dumps(const)}, got {json.dumps(v)[:60]}"
                )
            )
        if "enum" in node:
            enum = node["enum"]
            checks.append(
                lambda v, p: (
                    None
                    if _is_member(v, enum)
                    else f"{_at(p)}: expected one of {', '.join(map(json.dumps, enum))}, got "
                    f"{json.dumps(v)[:60]}"
                )
            )
        if "minimum" in node:
            low = node["minimum"]
            checks.append(
                lambda v, p: (
                    f"{_at(p)}: expected at least {low}, got {v}"
                    if _TYPES["number"](v) and v < low
                    else None
                )
            )
        if "oneOf" in node:
            options = [self.compile(option) for option in node["oneOf"]]

            def one_of(value: Any, path: str) -> str | None:
                """``oneOf``: exactly one option fits; else the first option's misfit."""
                found = [check(value, path) for check in options]
                if sum(f is None for f in found) == 1:
                    return None
                return next((f for f in found if f is not None), f"{_at(path)}: ambiguous")

            checks.append(one_of)
        if "properties" in node or "required" in node or "additionalProperties" in node:
            checks.append(self._object(node))
        if "items" in node:
            item = self.compile(node["items"])

            def items(value: Any, path: str) -> str | None:
                """``items``: every item of an array fits (``path[index]``)."""
                if isinstance(value, list):
                    for index, one in enumerate(value):
                        found = item(one, f"{path}[{index}]")
                        if found is not None:
                            return found
                return None

            checks.append(items)
        if len(checks) == 1:
            return checks[0]

        def every(value: Any, path: str) -> str | None:
            """All of ``checks``: the first misfit, or None."""
            for check in checks:
                found = check(value, path)
                if found is not None:
                    return found
            return None

        return every

    def _object(self, node: dict[str, Any]) -> Check:
        """The check of an object's keywords (``required``, ``properties``,
        ``additionalProperties``): a missing key first, then each key in the document's
        order (``path.key``)."""
        fields = {key: self.compile(sub) for key, sub in node.get("properties", {}).items()}
        required = list(node.get("required", ()))
        closed = node.get("additionalProperties", True) is False
        extra = node.get("additionalProperties")
        others = self.compile(extra) if isinstance(extra, dict) else None

        def obj(value: Any, path: str) -> str | None:
            """The object's keywords on ``value``, where it is an object."""
            if not isinstance(value, dict):
                return None  # "type" says so
            for key in required:
                if key not in value:
                    return f"{_at(path)}: missing required field {key!r}"
            for key, item in value.items():
                check = fields.get(key, others)
                if check is not None:
                    found = check(item, f"{path}.{key}" if path else key)
                    if found is not None:
                        return found
                elif closed and key not in fields:
                    return f"{_at(path)}: unknown field {key!r}"
            return None

        return obj


_TYPE_TESTS = {
    "object": "type({v}) is dict",
    "array": "type({v}) is list",
    "string": "type({v}) is str",
    "integer": "type({v}) is int",
    "number": "type({v}) in (int, float)",
    "boolean": "type({v}) is bool",
    "null": "{v} is None",
}
"""Each JSON type of ``type``, as source that tests the variable ``{v}``."""


class _Fits:
    """The schema as Python source: one function per ``$ref`` target and per ``oneOf``
    option, each returning whether its value fits (no message: :class:`_Explain` words it)."""

    def __init__(self, root: dict[str, Any]) -> None:
        """Compile nothing yet; refuse a schema beyond the subset (:class:`SchemaError`)."""
        _refuse_beyond_subset(root)
        self.root = root
        self.functions: dict[str, list[str]] = {}
        self.constants: dict[str, object] = {}
        self.refs: dict[str, str] = {}
        self.names = 0

    def name(self, prefix: str) -> str:
        """A new name of the source: ``prefix`` and a number no other name has."""
        self.names += 1
        return f"{prefix}{self.names}"

    def constant(self, value: object) -> str:
        """The name the source reads ``value`` by (a set of keys, an enum's members)."""
        name = self.name("C")
        self.constants[name] = value
        return name

    def function(self, node: dict[str, Any], name: str | None = None) -> str:
        """The name of the function that says whether a value fits ``node``, written once."""
        name = name or self.name("f")
        if name not in self.functions:
            self.functions[name] = []  # a cycle reaches the name before its body
            self.functions[name] = [*self.statements(node, "v", 1), "    return True"]
        return name

    def ref(self, pointer: str) -> str:
        """The name of the function of the schema ``$ref`` ``pointer`` names
        (``d_test_4`` for ``#/$defs/test``)."""
        if pointer not in self.refs:
            last = re.sub(r"[^0-9A-Za-z_]", "_", pointer.rsplit("/", 1)[-1])
            self.refs[pointer] = self.name(f"d_{last}_")
        return self.function(_resolve(self.root, pointer), self.refs[pointer])

    def statements(self, node: dict[str, Any], v: str, depth: int) -> list[str]:
        """The lines, indented ``depth`` levels, that return False where the variable ``v``
        does not fit ``node`` (none where ``node`` says nothing)."""
        pad = "    " * depth
        lines: list[str] = []
        if "$ref" in node:
            lines.append(f"{pad}if not {self.ref(node['$ref'])}({v}): return False")
        if "type" in node:
            names = node["type"] if isinstance(node["type"], list) else [node["type"]]
            test = " or ".join(_TYPE_TESTS[t].format(v=v) for t in names)
            lines.append(f"{pad}if not ({test}): return False")
        if "const" in node:
            const = self.constant(node["const"])
            lines.append(
                f"{pad}if not ({v} == {const} and type({v}) is type({const})): return False"
            )
        if "enum" in node:
            enum = node["enum"]
            if all(type(member) is str for member in enum):  # only a str equals a str
                lines.append(f"{pad}if {v} not in {self.constant(tuple(enum))}: return False")
            else:
                members = self.constant(tuple((type(member), member) for member in enum))
                lines.append(f"{pad}if (type({v}), {v}) not in {members}: return False")
        if "minimum" in node:
            low = node["minimum"]
            lines.append(f"{pad}if type({v}) in (int, float) and {v} < {low!r}: return False")
        if "oneOf" in node:
            options = [self.function(option) for option in node["oneOf"]]
            fits = " + ".join(f"{option}({v})" for option in options)
            lines.append(f"{pad}if {fits} != 1: return False")
        if "properties" in node or "required" in node or "additionalProperties" in node:
            lines += self._object(node, v, depth)
        if "items" in node:
            item = self.name("x")
            body = self.statements(node["items"], item, depth + 2)
            if body:
                lines += [f"{pad}if type({v}) is list:", f"{pad}    for {item} in {v}:", *body]
        return lines

    def _object(self, node: dict[str, Any], v: str, depth: int) -> list[str]:
        """The lines of an object's keywords (``required``, ``properties``,
        ``additionalProperties``) on ``v``, where it is a dict."""
        pad = "    " * depth
        fields = node.get("properties", {})
        lines = [f"{pad}if type({v}) is dict:"]
        inner = pad + "    "
        if node.get("required"):
            required = self.constant(frozenset(node["required"]))
            lines.append(f"{inner}if not {v}.keys() >= {required}: return False")
        extra = node.get("additionalProperties", True)
        known = self.constant(frozenset(fields))
        if extra is False:
            lines.append(f"{inner}if not {known} >= {v}.keys(): return False")
        for key, sub in fields.items():
            item = self.name("x")
            if key in node.get("required", ()):  # there: checked above
                body = self.statements(sub, item, depth + 1)
                if body:
                    lines += [f"{inner}{item} = {v}[{key!r}]", *body]
                continue
            body = self.statements(sub, item, depth + 2)
            if body:
                lines += [f"{inner}{item} = {v}.get({key!r}, _MISSING)",
                          f"{inner}if {item} is not _MISSING:", *body]  # fmt: skip
        if isinstance(extra, dict):
            key, item = self.name("k"), self.name("x")
            body = self.statements(extra, item, depth + 3)
            if body:
                lines += [f"{inner}for {key}, {item} in {v}.items():",
                          f"{inner}    if {key} not in {known}:", *body]  # fmt: skip
        return lines if len(lines) > 1 else []

    def build(self) -> Callable[[Any], bool]:
        """Whether a whole document fits: the source written, compiled and run once."""
        top = self.function(self.root, "report")
        source = "\n".join(
            f"def {name}(v):\n" + "\n".join(body) for name, body in self.functions.items()
        )
        namespace: dict[str, Any] = {**self.constants, "_MISSING": object()}
        exec(compile(source, "<report.schema.json>", "exec"), namespace)
        fits: Callable[[Any], bool] = namespace[top]
        return fits


@cache
def _schema() -> dict[str, Any]:
    """The report's schema, read once from :data:`SCHEMA_FILE`."""
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


@cache
def report_fits() -> Callable[[Any], bool]:
    """Whether a document fits the report schema: the schema's source, compiled once."""
    return _Fits(_schema()).build()


@cache
def report_check() -> Check:
    """What does not fit the report schema, and where: compiled once, run on a misfit."""
    return _Explain(_schema()).build()


def misfit(document: Any) -> str | None:
    """Where ``document`` does not fit the report schema (``tests[3].functions: expected
    array, got string``), or None where it fits."""
    if report_fits()(document):
        return None
    return report_check()(document, "") or "the document does not fit the schema"
