"""The report's schema checker (``pytest_recompile/reports/schema.py``) on its own: the subset
of JSON Schema it implements, refused beyond it when a schema is compiled; the wording of a
misfit; and both halves against jsonschema itself, on mutants of a real report.

``schema_report.json`` beside this file is a real report, written by the plugin (torch
2.13.0+cpu): :data:`REPORT_TESTS` saved as ``test_shapes.py`` in an empty folder, then
``python -m pytest -p no:randomly -p no:cacheprovider --recompile-budget
--recompile-report=report.json test_shapes.py``. Its six tests fill most of the schema: a
recompile stopped by fail-fast (``stopped_at``), reasons with and without a ``site``, a graph
break, a forbidden guard, a ``covers()`` certificate, a child process, a module fixture's
compiles. Regenerate it so when the schema changes (:func:`test_the_fixture_is_a_current_report`
fails then).
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pytest_recompile.reports.schema import (
    ANNOTATIONS,
    INTEGRAL_FLOAT,
    KEYWORDS,
    SCHEMA_FILE,
    SchemaError,
    _Explain,
    _Fits,
    misfit,
    report_check,
    report_fits,
)

REPORT_TESTS = '''
import subprocess
import sys

import pytest
import torch

step = 0


@torch.compile(backend="eager")
def f(x):
    return x + step


@torch.compile(backend="eager")
def g(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


@torch.compile(backend="eager")
def h(x, n):
    return x * n


@pytest.fixture(scope="module")
def warmed():
    f(torch.ones(7))
    return 1


def test_steps(warmed):
    global step
    for step in range(3):
        f(torch.ones(2))


@pytest.mark.max_graph_breaks(0)
def test_breaks():
    g(torch.ones(3))


@pytest.mark.forbid_guards("EQUALS_MATCH")
def test_forbidden():
    h(torch.ones(2), 3)


@pytest.mark.max_recompiles(1)
def test_covers(recompiles):
    @torch.compile(backend="eager")
    def score(x):
        return x.sum(-1)

    for n in (8, 16):
        score(torch.ones(n, 4))
    recompiles.covers(score, (torch.ones(8, 4),), {"x": {0: range(1, 9)}})


CHILD = """
import torch
@torch.compile(backend="eager")
def k(x):
    return x - 1
k(torch.ones(2))
k(torch.ones(3))
"""


def test_child():
    subprocess.run([sys.executable, "-c", CHILD], check=True)


def test_clean():
    f(torch.ones(2))
'''
"""The tests whose run wrote ``schema_report.json``."""

REPORT_TEXT = (Path(__file__).parent / "schema_report.json").read_text(encoding="utf-8")
SCHEMA = json.loads(Path(SCHEMA_FILE).read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)

At = tuple[str | int, ...]


def report() -> Any:
    """A fresh copy of the real report."""
    return json.loads(REPORT_TEXT)


def paths(value: Any, at: At = ()) -> list[At]:
    """Every path into ``value``, the top's included, parents before children."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*at, index))
    return found


def get(document: Any, at: At) -> Any:
    """The value at ``at`` in ``document``."""
    for part in at:
        document = document[part]
    return document


def put(document: Any, at: At, value: Any) -> Any:
    """``document`` with the value at ``at`` (not the top) replaced by ``value``."""
    get(document, at[:-1])[at[-1]] = value
    return document


def test_the_fixture_is_a_current_report() -> None:
    """The fixture fits the schema of today, for jsonschema and both halves alike; else it
    is regenerated as the module's docstring says."""
    document = report()
    assert VALIDATOR.is_valid(document), "regenerate schema_report.json (see the docstring)"
    assert report_fits()(document)
    assert report_check()(document, "") is None
    assert misfit(document) is None
    assert document["tests"][5]["nodeid"] == "test_shapes.py::test_steps"
    assert document["tests"][5]["stopped_at"] is not None  # the wording tests' TEST
    assert any(
        violation.get("certificate") for t in document["tests"] for violation in t["violations"]
    )


# -- the subset: what the checker implements, and nothing else --------------------------------


def compile_both(schema: dict[str, Any]) -> tuple[Any, Any]:
    """Both halves of ``schema``: whether a document fits, and the wording of its misfit."""
    return _Fits(schema).build(), _Explain(schema).build()


def keywords(schema: Any) -> set[str]:
    """The keywords ``schema`` and the schemas inside it use."""
    found = set(schema)
    subs = [*schema.get("properties", {}).values(), *schema.get("$defs", {}).values()]
    subs += [*schema.get("oneOf", ()), schema.get("items"), schema.get("additionalProperties")]
    for sub in subs:
        if isinstance(sub, dict):
            found |= keywords(sub)
    return found


def test_the_shipped_schema_uses_the_whole_subset_and_nothing_else() -> None:
    """``report.schema.json`` uses every keyword the checker implements, and of the
    annotations all but ``$comment``."""
    assert keywords(SCHEMA) == KEYWORDS | ANNOTATIONS - {"$comment"}
    assert KEYWORDS.isdisjoint(ANNOTATIONS)


REFUSED = [
    ("pattern", "^a"),
    ("anyOf", [{"type": "string"}]),
    ("allOf", [{"type": "string"}]),
    ("not", {"type": "string"}),
    ("if", {"type": "string"}),
    ("maxItems", 2),
    ("minItems", 1),
    ("minLength", 1),
    ("maximum", 3),
    ("exclusiveMinimum", 0),
    ("multipleOf", 2),
    ("format", "date-time"),
    ("uniqueItems", True),
    ("prefixItems", [{"type": "string"}]),
    ("contains", {"type": "string"}),
    ("patternProperties", {"^x": {"type": "string"}}),
    ("propertyNames", {"pattern": "^x"}),
    ("unevaluatedProperties", False),
    ("dependentRequired", {"a": ["b"]}),
    ("$dynamicRef", "#meta"),
    ("$anchor", "here"),
    ("default", 0),
    ("typo", "string"),
]


@pytest.mark.parametrize("half", [_Fits, _Explain])
@pytest.mark.parametrize(("keyword", "value"), REFUSED, ids=[k for k, _ in REFUSED])
def test_an_unknown_keyword_is_refused_when_compiled(half: type, keyword: str, value: Any) -> None:
    """Put deep in the real schema (in a property of ``$defs/guard``), either half refuses it,
    naming the keyword and where it is."""
    schema = copy.deepcopy(SCHEMA)
    schema["$defs"]["guard"]["properties"]["text"][keyword] = value
    with pytest.raises(SchemaError) as refused:
        half(schema)
    assert str(refused.value).startswith(
        f"#/$defs/guard/properties/text: unknown keyword {keyword!r}: "
    )
    assert "implements only $ref, additionalProperties, const, enum, items" in str(refused.value)


@pytest.mark.parametrize("half", [_Fits, _Explain])
def test_an_unknown_keyword_is_refused_where_nothing_refers_to_it(half: type) -> None:
    """A ``$defs`` entry no ``$ref`` names, an ``items`` schema, a ``oneOf`` option, a top
    level: each is checked, with its path (escaped as JSON pointers are)."""
    for schema, where in [
        ({"$defs": {"unused": {"maxItems": 1}}}, "#/$defs/unused"),
        ({"items": {"items": {"anyOf": []}}}, "#/items/items"),
        ({"oneOf": [{"type": "null"}, {"pattern": "x"}]}, "#/oneOf/1"),
        ({"properties": {"a/b": {"format": "uri"}}}, "#/properties/a~1b"),
        ({"additionalProperties": {"minimum": 0, "maximum": 1}}, "#/additionalProperties"),
        ({"type": "object", "dependentSchemas": {}}, "#"),
    ]:
        with pytest.raises(SchemaError, match=f"^{re.escape(where)}: unknown keyword "):
            half(schema)


@pytest.mark.parametrize("half", [_Fits, _Explain])
@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$ref": "other.json#/x"}, "#/$ref: 'other.json#/x': only a local reference"),
        ({"$ref": "#/$defs/missing"}, "#/$ref: '#/$defs/missing' names nothing in the schema"),
        ({"type": "float"}, '#/type: expected a JSON type or a list of them, got "float"'),
        ({"type": []}, "#/type: expected a JSON type or a list of them"),
        ({"const": 1.5}, "#/const: a const is a string, integer, boolean or null here"),
        ({"const": [1]}, "#/const: a const is a string, integer, boolean or null here"),
        ({"enum": ["a", {"b": 1}]}, "#/enum: an enum is a list of strings, integers, booleans"),
        ({"enum": []}, "#/enum: an enum is a list"),
        ({"minimum": "0"}, "#/minimum: expected a number"),
        ({"minimum": True}, "#/minimum: expected a number"),
        ({"required": "a"}, "#/required: expected a list of names"),
        ({"properties": []}, "#/properties: expected an object of schemas"),
        ({"oneOf": []}, "#/oneOf: expected a list of schemas"),
        ({"items": True}, "#/items: a schema is an object here (true or false only as"),
        ({"properties": {"a": False}}, "#/properties/a: a schema is an object here"),
    ],
)
def test_a_keyword_value_beyond_the_subset_is_refused(
    half: type, schema: dict[str, Any], said: str
) -> None:
    """What the checker would read otherwise than JSON Schema does is refused too: a remote
    or dangling ``$ref``, an unknown type, a float or a container as ``const`` or ``enum``
    member, a boolean schema anywhere but ``additionalProperties``."""
    with pytest.raises(SchemaError) as refused:
        half(schema)
    assert str(refused.value).startswith(said)


# Each keyword the checker implements, shown to act: a schema, a document that fits it, and
# one that fits it only were the keyword ignored.
ACTS = {
    "type": ({"type": "integer"}, 1, "1"),
    "const": ({"const": "x"}, "x", "y"),
    "enum": ({"enum": ["a", 1]}, 1, True),
    "minimum": ({"minimum": 0}, 0, -1),
    "required": ({"required": ["a"]}, {"a": 1}, {}),
    "properties": ({"properties": {"a": {"type": "null"}}}, {"a": None}, {"a": 0}),
    "additionalProperties": ({"additionalProperties": False}, {}, {"b": 1}),
    "items": ({"items": {"type": "string"}}, ["a"], ["a", 2]),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1, 1),
    "$ref": ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}, "a", 1),
}


def test_every_keyword_it_implements_acts() -> None:
    """The set names exactly what is implemented: each keyword changes what fits, in both
    halves, as jsonschema says."""
    assert set(ACTS) == KEYWORDS
    for keyword, (schema, fits, misfits) in ACTS.items():
        fits_half, explain = compile_both(schema)
        validator = Draft202012Validator(schema)
        assert fits_half(fits), keyword
        assert explain(fits, "") is None, keyword
        assert validator.is_valid(fits), keyword
        assert not fits_half(misfits), keyword
        assert explain(misfits, "") is not None, keyword
        assert not validator.is_valid(misfits), keyword


def test_annotations_are_read_past() -> None:
    """``title``, ``description``, ``$comment``, ``$schema``, ``$id`` change nothing."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.invalid/s.json",
        "title": "t",
        "description": "d",
        "$comment": "c",
        "$defs": {"n": {"type": "integer", "description": "beside a keyword"}},
        "properties": {"a": {"$ref": "#/$defs/n", "description": "beside a $ref"}},
    }
    fits, explain = compile_both(schema)
    assert fits({"a": 1})
    assert explain({"a": 1}, "") is None
    assert not fits({"a": "1"})
    assert explain({"a": "1"}, "") == "a: expected integer, got string"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"enum": [1, "a"]}, True),
        ({"enum": [True]}, 1),
        ({"enum": [0]}, False),
        ({"const": 1}, True),
        ({"const": False}, 0),
        ({"enum": [None, 1]}, 0),
    ],
)
def test_const_and_enum_match_by_json_type(schema: dict[str, Any], value: Any) -> None:
    """``True`` is not ``1`` in JSON: neither half takes one for the other (Python's ``==``
    does), as jsonschema does not."""
    fits, explain = compile_both(schema)
    assert not Draft202012Validator(schema).is_valid(value)
    assert not fits(value)
    assert explain(value, "") is not None


def test_a_reference_cycle_compiles() -> None:
    """A schema that refers to itself (a tree) compiles in both halves and checks any depth."""
    schema = {
        "$defs": {"node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}}}},
        "$ref": "#/$defs/node",
    }
    fits, explain = compile_both(schema)
    deep = {"kids": [{"kids": [{"kids": []}]}]}
    assert fits(deep)
    assert explain(deep, "") is None
    deep["kids"][0]["kids"][0]["kids"] = [3]
    assert not fits(deep)
    assert explain(deep, "") == "kids[0].kids[0].kids[0]: expected object, got integer"


def test_defs_names_that_are_no_python_names_compile() -> None:
    """The fast half names a function per ``$ref`` target: any entry name is fine."""
    schema = {"$defs": {"a-b c": {"type": "string"}}, "items": {"$ref": "#/$defs/a-b c"}}
    fits, _ = compile_both(schema)
    assert fits(["x"])
    assert not fits([1])


def test_targets_with_one_last_name_are_two_functions() -> None:
    """``#/$defs/x`` and ``#/$defs/y/properties/x`` are checked each against its own schema
    (once one function, ``d_x``, the second's reading the first's schema)."""
    schema = {
        "$defs": {"x": {"type": "string"}, "y": {"properties": {"x": {"type": "integer"}}}},
        "properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "#/$defs/y/properties/x"}},
    }
    fits, explain = compile_both(schema)
    assert fits({"a": "s", "b": 1})
    assert not fits({"a": "s", "b": "s"})
    assert explain({"a": "s", "b": "s"}, "") == "b: expected integer, got string"


# -- the wording of a misfit ------------------------------------------------------------------

TEST = 5  # tests[5]: test_shapes.py::test_steps, stopped by fail-fast
CERTIFIED = ("tests", 3, "violations", 0, "certificate")  # test_covers's uncovered violation


@pytest.mark.parametrize(
    ("at", "value", "said"),
    [
        (("tests", TEST, "recompiles"), None, "tests[5].recompiles: expected integer, got null"),
        (
            ("tests", TEST, "recompiles"),
            3.0,
            f"tests[5].recompiles: expected integer, got 3.0: {INTEGRAL_FLOAT}",
        ),
        (("summary", "recompiles"), -1, "summary.recompiles: expected at least 0, got -1"),
        (("version",), 2, "version: expected 1, got 2"),
        (("version",), True, "version: expected 1, got true"),
        (
            ("settings", "mode"),
            "fast",
            'settings.mode: expected one of "fail-fast", "at-end", "report-only", got "fast"',
        ),
        (("environment", "torch"), 3, "environment.torch: expected string or null, got integer"),
        (("collection",), "all", "collection: expected object, got string"),
        (
            ("tests", TEST, "stopped_at", "line"),
            "36",
            "tests[5].stopped_at.line: expected integer, got string",
        ),
        (
            (*CERTIFIED, "groups", 0, "points"),
            0,
            "tests[3].violations[0].certificate.groups[0].points: expected at least 1, got 0",
        ),
        (("tests", TEST, "functions"), {}, "tests[5].functions: expected array, got object"),
        (("faults",), [1], "faults[0]: expected string, got integer"),
    ],
)
def test_a_misfit_is_worded_with_its_path(at: At, value: Any, said: str) -> None:
    """The first misfit, at its path in the document; an integer field holding ``1.0`` says
    why that is one (jsonschema would take it)."""
    assert misfit(put(report(), at, value)) == said


def test_a_missing_or_unknown_field_is_worded_at_its_object() -> None:
    """A missing or an unknown key is told at the object that should (not) hold it."""
    document = report()
    del document["summary"]
    assert misfit(document) == "the document: missing required field 'summary'"
    document = report()
    document["tests"][TEST]["caches"]["fx_graph"]["warm"] = 1
    assert misfit(document) == "tests[5].caches.fx_graph: unknown field 'warm'"
    assert misfit([]) == "the document: expected object, got array"


def test_the_top_is_named_the_document() -> None:
    """A misfit of the document itself says so, whatever keyword it breaks."""
    for schema, value, said in [
        ({"const": 1}, 2, "the document: expected 1, got 2"),
        ({"enum": ["a"]}, "b", 'the document: expected one of "a", got "b"'),
        ({"minimum": 0}, -1, "the document: expected at least 0, got -1"),
        ({"oneOf": [{"minimum": 0}, {"type": "integer"}]}, 1, "the document: ambiguous"),
    ]:
        _, explain = compile_both(schema)
        assert explain(value, "") == said


# -- both halves against jsonschema, on mutants of a real report ------------------------------

PATHS = paths(report())
"""Every path into the real report (the top's first)."""


def integral_floats_as_ints(value: Any) -> Any:
    """``value`` with every float without a fraction made an int: what jsonschema sees."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [integral_floats_as_ints(item) for item in value]
    return value


def has_integral_float(value: Any) -> bool:
    """Whether ``value`` holds a float without a fraction anywhere."""
    return any(
        isinstance(item, float) and math.isfinite(item) and item.is_integer()
        for item in (get(value, at) for at in paths(value))
    )


KEYS = st.sampled_from(["zz", "extra", "name", "nodeid", "recompiles", "type"])
"""Keys a mutant adds: unknown ones and ones the schema knows elsewhere."""

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5, -0.5]),
    st.text(max_size=4),
    st.sampled_from(
        ["passed", "fail-fast", "entries", "TENSOR_MATCH", "total", "exited", "uncovered"]
    ),
)
"""Values of every JSON type, enum members of the schema among the strings."""

VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(KEYS, inner, max_size=2)),
    max_leaves=4,
)


@st.composite
def mutants(draw: st.DrawFn) -> Any:
    """The real report with one to three changes: a value replaced (by a value of any JSON
    type, or by another value of the report), a key dropped, a key added, an item added or
    dropped, a number made negative."""
    document = report()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(PATHS))
        try:
            here = get(document, at)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change took it away
        change = draw(st.sampled_from(["replace", "borrow", "drop", "add", "negate", "append"]))
        if change == "replace" and at:
            put(document, at, draw(VALUES))
        elif change == "borrow" and at:
            put(document, at, copy.deepcopy(get(report(), draw(st.sampled_from(PATHS)))))
        elif change == "drop" and at:
            del get(document, at[:-1])[at[-1]]
        elif change == "add" and isinstance(here, dict):
            here[draw(KEYS)] = draw(VALUES)
        elif change == "negate" and type(here) in (int, float) and at:
            put(document, at, -here - draw(st.sampled_from([1, 0.5])))
        elif change == "append" and isinstance(here, list):
            here.append(copy.deepcopy(here[0]) if here and draw(st.booleans()) else draw(VALUES))
    return document


def named_path(message: str) -> At | None:
    """The path a misfit's wording starts with (``tests[5].functions[0].line``), or None
    where it does not start with one."""
    where = message.split(": ", 1)[0]
    if where == "the document":
        return ()
    parts: list[str | int] = []
    for match in re.finditer(r"(?:^|\.)([^.\[\]]+)|\[(\d+)\]", where):
        parts.append(match[1] if match[1] is not None else int(match[2]))
    rebuilt = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return tuple(parts) if rebuilt == where else None


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutants())
def test_both_halves_agree_with_jsonschema_on_mutants(document: Any) -> None:
    """(a) The fast half says what jsonschema says, but where an integral float stands for an
    integer: there it is stricter, and says what jsonschema says of the document with those
    floats made ints. (b) The wording half says nothing exactly where the fast half says the
    document fits, and else names a path the document has."""
    fits = report_fits()(document)
    valid = VALIDATOR.is_valid(document)
    event(f"fits: {fits}, jsonschema: {valid}")  # --hypothesis-show-statistics
    assert report_fits()(integral_floats_as_ints(document)) == valid
    if fits:
        assert valid
    elif valid:
        assert has_integral_float(document)  # the one divergence, declared
    said = report_check()(document, "")
    assert (said is None) == fits, said
    if said is not None:
        at = named_path(said)
        assert at is not None, said
        get(document, at)  # the path exists
        assert misfit(document) == said
