"""Checking a JSON document against the report's schema (``report.schema.json``), as every
reader of a report does before it trusts a field: the first place that does not fit, named.

The subset of JSON Schema the schema uses (``type``, ``const``, ``enum``, ``minimum``,
``required``, ``properties``, ``additionalProperties``, ``items``, ``oneOf``, local
``$ref``), compiled once, twice over: into Python source that only says whether a document
fits (a 10,000-test report in a fraction of a second: ``benchmarks/shards.py``), and into
checks that find and name the first field that does not, run only then. The package needs no
jsonschema; the suite checks the same documents with jsonschema itself.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")

INTEGRAL_FLOAT = (
    "an integer field is written without a fraction (1, not 1.0): the one place this "
    "checker is stricter than jsonschema, which takes 1.0 for an integer, since every count "
    "is shown and summed as a whole number"
)

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


def _name(value: Any) -> str:
    """The JSON type of ``value``, as a message names it."""
    for name, test in _TYPES.items():
        if name != "number" and test(value):
            return name
    return "number" if _TYPES["number"](value) else type(value).__name__


def _at(path: str) -> str:
    return path or "the document"


def _is_member(value: Any, members: list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``members`` by value and JSON type: ``True`` is not ``1``,
    as for jsonschema."""
    return any(value == member and type(value) is type(member) for member in members)


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        if pointer not in self.refs:
            self.refs[pointer] = lambda value, path: self.refs[pointer](value, path)  # a cycle
            node: Any = self.root
            for part in pointer.removeprefix("#/").split("/"):
                node = node[part]
            self.refs[pointer] = self.compile(node)
        return self.refs[pointer]

    def compile(self, node: dict[str, Any]) -> Check:
        checks: list[Check] = []
        if "$ref" in node:
            checks.append(self.ref(node["$ref"]))
        if "type" in node:
            names = node["type"] if isinstance(node["type"], list) else [node["type"]]
            tests = [_TYPES[name] for name in names]
            said = " or ".join(names)

            def typed(value: Any, path: str) -> str | None:
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
            for check in checks:
                found = check(value, path)
                if found is not None:
                    return found
            return None

        return every

    def _object(self, node: dict[str, Any]) -> Check:
        fields = {key: self.compile(sub) for key, sub in node.get("properties", {}).items()}
        required = list(node.get("required", ()))
        closed = node.get("additionalProperties", True) is False
        extra = node.get("additionalProperties")
        others = self.compile(extra) if isinstance(extra, dict) else None

        def obj(value: Any, path: str) -> str | None:
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


class _Source:
    """The schema as Python source: one function per ``$defs`` entry and per ``oneOf``
    option, each returning whether its value fits (no message: :class:`_Compiler` words it)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.functions: dict[str, list[str]] = {}
        self.constants: dict[str, object] = {}
        self.refs: dict[str, str] = {}
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def constant(self, value: object) -> str:
        name = self.name("C")
        self.constants[name] = value
        return name

    def function(self, node: dict[str, Any], name: str | None = None) -> str:
        name = name or self.name("f")
        if name not in self.functions:
            self.functions[name] = []  # a cycle reaches the name before its body
            self.functions[name] = [*self.statements(node, "v", 1), "    return True"]
        return name

    def ref(self, pointer: str) -> str:
        node: Any = self.root
        for part in pointer.removeprefix("#/").split("/"):
            node = node[part]
        if pointer not in self.refs:  # a name of its own, and a Python one
            last = re.sub(r"[^0-9A-Za-z_]", "_", pointer.rsplit("/", 1)[-1])
            self.refs[pointer] = self.name(f"d_{last}_")
        return self.function(node, self.refs[pointer])

    def statements(self, node: dict[str, Any], v: str, depth: int) -> list[str]:
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
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


@cache
def report_fits() -> Callable[[Any], bool]:
    """Whether a document fits the report schema: the schema's source, compiled once."""
    return _Source(_schema()).build()


@cache
def report_check() -> Check:
    """What does not fit the report schema, and where: compiled once, run on a misfit."""
    return _Compiler(_schema()).compile(_schema())


def misfit(document: Any) -> str | None:
    """Where ``document`` does not fit the report schema (``tests[3].functions: expected
    array, got string``), or None where it fits."""
    if report_fits()(document):
        return None
    return report_check()(document, "") or "the document does not fit the schema"
