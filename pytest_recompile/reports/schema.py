"""Checking a JSON document against the report's schema (``report.schema.json``), as every
reader of a report does before it trusts a field: the first place that does not fit, named.

The subset of JSON Schema the schema uses (``type``, ``const``, ``enum``, ``minimum``,
``required``, ``properties``, ``additionalProperties``, ``items``, ``oneOf``, local
``$ref``), compiled once into checks: the package needs no jsonschema, and a 10,000-test
report is checked in well under a second. The suite checks the same reports with jsonschema
itself (tests/reports/test_schema.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache
from typing import Any

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")

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
                return f"{_at(path)}: expected {said}, got {_name(value)}"

            checks.append(typed)
        if "const" in node:
            const = node["const"]
            checks.append(
                lambda v, p: (
                    None
                    if v == const and type(v) is type(const)
                    else f"{p}: expected {json.dumps(const)}, got {json.dumps(v)[:60]}"
                )
            )
        if "enum" in node:
            enum = node["enum"]
            checks.append(
                lambda v, p: (
                    None
                    if v in enum
                    else f"{_at(p)}: expected one of {', '.join(map(json.dumps, enum))}, got "
                    f"{json.dumps(v)[:60]}"
                )
            )
        if "minimum" in node:
            low = node["minimum"]
            checks.append(
                lambda v, p: (
                    f"{p}: expected at least {low}, got {v}"
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
                return next((f for f in found if f is not None), f"{path}: ambiguous")

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


@cache
def report_check() -> Check:
    """The report schema's check, compiled once."""
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        schema = json.load(handle)
    return _Compiler(schema).compile(schema)


def misfit(document: Any) -> str | None:
    """Where ``document`` does not fit the report schema (``tests[3].functions: expected
    array, got string``), or None where it fits."""
    return report_check()(document, "")
