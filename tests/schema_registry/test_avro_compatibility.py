"""Known answers for the registry's compatibility decisions, and AVRO/JSON schema parsing.

Each row is (old schema, new schema, may the new read the old, may the old read the new),
with where that answer comes from:
- SPEC: the Avro specification, "Schema Resolution" (what a reader may read);
- CONFLUENT_DOC: Confluent's "Schema Evolution and Compatibility" page (the change
  summary tables for Avro and the rules per level, transitive: against all versions);
- CONFLUENT_TEST: Confluent's AvroCompatibilityTest (io.confluent.kafka.schemaregistry.avro),
  case named after the assertion message;
- Apache Avro TestSchemaCompatibility: Avro's own reader/writer cases (Java
  lang/java/avro/src/test/java/org/apache/avro/TestSchemaCompatibility.java; the same lists
  ship in the Python package as avro/test/test_compatibility.py), cited as
  (READER, WRITER) by the constants' names; the last test here runs that whole suite;
- json_case: a case of Confluent's JSON Schema diff test resources
  (json-schema-provider/src/test/resources/diff-schema-examples.json), by its description;
- JSON_RULES: Confluent's JSON Schema diff rules (json-schema-provider, diff/SchemaDiff.java:
  the COMPATIBLE_CHANGES list; diff/ObjectSchemaDiff.java for content models) and
  Confluent's serdes-json page on open and closed content models.

BACKWARD is "new reads old", FORWARD "old reads new", FULL both, NONE always compatible.
"""

from __future__ import annotations

import json
import re
import unittest
from typing import Any

import pytest

from minibroker.schema_registry import compatibility
from minibroker.schema_registry.schemas import InvalidSchema, schema_type

AVRO = schema_type("AVRO")
JSON = schema_type("JSON")

SPEC = "Avro spec, Schema Resolution"
CONFLUENT_DOC = "Confluent docs, Schema Evolution and Compatibility"
JSON_RULES = "Confluent JSON Schema diff rules (SchemaDiff.COMPATIBLE_CHANGES, ObjectSchemaDiff)"


def conf_test(case: str) -> str:
    return f"Confluent AvroCompatibilityTest, {case}"


def avro_test(case: str) -> str:
    return f"Apache Avro TestSchemaCompatibility, {case}"


def json_case(description: str) -> str:
    return f"Confluent json-schema-provider diff-schema-examples.json, {description!r}"


def rec(*fields: Any, name: str = "myrecord", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, ftype: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": ftype, **extra}


def enum(*symbols: str, name: str = "E", **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


# Confluent AvroCompatibilityTest's schemas (the shapes, as facts).
S1 = rec(f("f1", "string"))
S2 = rec(f("f1", "string"), f("f2", "string", default="foo"))
S3 = rec(f("f1", "string"), f("f2", "string"))
S4 = rec(f("f1_new", "string", aliases=["f1"]))
S6 = rec(f("f1", ["null", "string"]))
S7 = rec(f("f1", ["null", "string", "int"]))
S8 = rec(f("f1", "string"), f("f2", "string", default="foo"), f("f3", "string", default="bar"))
NODE = rec(f("value", "int"), f("next", ["null", "Node"], default=None), name="Node")
NODE2 = rec(
    f("value", "int"),
    f("next", ["null", "Node"], default=None),
    f("label", "string", default=""),
    name="Node",
)

# (id, old, new, new reads old, old reads new, source)
AVRO_PAIRS: list[tuple[str, Any, Any, bool, bool, str]] = [
    ("identical", S1, S1, True, True, SPEC),
    ("add-field-default", S1, S2, True, True, conf_test("adding a field with default")),
    ("add-field-no-default", S1, S3, False, True, conf_test("adding a field w/o default")),
    ("remove-field-no-default", S3, S1, True, False, CONFLUENT_DOC + ": delete field"),
    ("remove-field-default", S2, S1, True, True, conf_test("removing a field with a default")),
    ("rename-with-alias", S1, S4, True, False, conf_test("changing field name with alias")),
    ("rename-no-alias", S1, rec(f("f9", "string")), False, False, SPEC + ": fields by name"),
    ("field-to-union", S1, S6, True, False, conf_test("evolving a field type to a union")),
    ("union-to-field", S6, S1, False, True, conf_test("removing a type from a union")),
    ("union-add-branch", S6, S7, True, False, conf_test("adding a new type in union")),
    ("union-remove-branch", S7, S6, False, True, conf_test("removing a type from union")),
    ("int-to-long", "int", "long", True, False, avro_test("compatible (LONG_SCHEMA, INT_SCHEMA)")),
    ("long-to-int", "long", "int", False, True, SPEC + ": promotions"),
    (
        "int-to-float",
        "int",
        "float",
        True,
        False,
        avro_test("compatible (FLOAT_SCHEMA, INT_SCHEMA)"),
    ),
    (
        "int-to-double",
        "int",
        "double",
        True,
        False,
        avro_test("compatible (DOUBLE_SCHEMA, INT_SCHEMA)"),
    ),
    (
        "long-to-float",
        "long",
        "float",
        True,
        False,
        avro_test("compatible (FLOAT_SCHEMA, LONG_SCHEMA)"),
    ),
    (
        "long-to-double",
        "long",
        "double",
        True,
        False,
        avro_test("compatible (DOUBLE_SCHEMA, LONG_SCHEMA)"),
    ),
    (
        "float-to-double",
        "float",
        "double",
        True,
        False,
        avro_test("compatible (DOUBLE_SCHEMA, FLOAT_SCHEMA)"),
    ),
    ("double-to-float", "double", "float", False, True, SPEC + ": promotions"),
    (
        "string-to-bytes",
        "string",
        "bytes",
        True,
        True,
        avro_test("compatible (STRING_SCHEMA, BYTES_SCHEMA), (BYTES_SCHEMA, STRING_SCHEMA)"),
    ),
    (
        "bytes-to-string",
        "bytes",
        "string",
        True,
        True,
        avro_test("compatible (STRING_SCHEMA, BYTES_SCHEMA), (BYTES_SCHEMA, STRING_SCHEMA)"),
    ),
    ("int-to-string", "int", "string", False, False, SPEC + ": no promotion"),
    ("boolean-to-int", "boolean", "int", False, False, SPEC + ": no promotion"),
    ("null-to-int", "null", "int", False, False, SPEC + ": no promotion"),
    ("string-to-enum", "string", enum("A"), False, False, SPEC + ": kinds differ"),
    (
        "enum-add-symbol",
        enum("A", "B"),
        enum("A", "B", "C"),
        True,
        False,
        avro_test("compatible (ENUM1_ABC_SCHEMA, ENUM1_AB_SCHEMA)"),
    ),
    (
        "enum-remove-symbol",
        enum("A", "B", "C"),
        enum("A", "B"),
        False,
        True,
        avro_test("missing enum symbols (ENUM1_AB_SCHEMA, ENUM1_ABC_SCHEMA)"),
    ),
    (
        "enum-remove-symbol-reader-default",
        enum("A", "B", "C"),
        enum("A", "B", default="A"),
        True,
        True,
        SPEC + ": enum default used for unknown symbols",
    ),
    (
        "enum-rename",
        enum("A", name="E"),
        enum("A", name="F"),
        False,
        False,
        avro_test("name mismatch (ENUM1_AB_SCHEMA, ENUM2_AB_SCHEMA)"),
    ),
    (
        "enum-rename-alias",
        enum("A", name="E"),
        enum("A", name="F", aliases=["E"]),
        True,
        False,
        SPEC + ": aliases of the reader",
    ),
    (
        "record-rename",
        S1,
        rec(f("f1", "string"), name="other"),
        False,
        False,
        SPEC + ": records with the same name",
    ),
    (
        "record-namespace-change",
        rec(f("f1", "int"), namespace="a"),
        rec(f("f1", "int"), namespace="b"),
        True,
        True,
        SPEC + ": same (unqualified) name",
    ),
    (
        "fixed-size",
        {"type": "fixed", "name": "F", "size": 16},
        {"type": "fixed", "name": "F", "size": 32},
        False,
        False,
        SPEC + ": fixed sizes equal",
    ),
    (
        "fixed-same",
        {"type": "fixed", "name": "F", "size": 16},
        {"type": "fixed", "name": "F", "size": 16},
        True,
        True,
        SPEC,
    ),
    (
        "fixed-rename",
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "G", "size": 4},
        False,
        False,
        SPEC + ": names equal",
    ),
    (
        "array-int-to-long",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        True,
        False,
        avro_test("compatible (LONG_ARRAY_SCHEMA, INT_ARRAY_SCHEMA)"),
    ),
    (
        "array-long-to-int",
        {"type": "array", "items": "long"},
        {"type": "array", "items": "int"},
        False,
        True,
        avro_test("type mismatch (INT_ARRAY_SCHEMA, LONG_ARRAY_SCHEMA)"),
    ),
    (
        "map-int-to-long",
        {"type": "map", "values": "int"},
        {"type": "map", "values": "long"},
        True,
        False,
        avro_test("compatible (LONG_MAP_SCHEMA, INT_MAP_SCHEMA)"),
    ),
    (
        "map-string-to-int",
        {"type": "map", "values": "string"},
        {"type": "map", "values": "int"},
        False,
        False,
        SPEC,
    ),
    (
        "array-to-map",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        False,
        False,
        SPEC + ": kinds differ",
    ),
    (
        "int-to-union",
        "int",
        ["int", "string"],
        True,
        False,
        SPEC + ": a reader union uses its first branch that matches",
    ),
    (
        "union-to-int",
        ["int", "string"],
        "int",
        False,
        True,
        SPEC + ": a writer union branch the reader cannot match is an error",
    ),
    (
        "nested-add-default",
        rec(f("inner", rec(f("a", "int"), name="In"))),
        rec(f("inner", rec(f("a", "int"), f("b", "int", default=0), name="In"))),
        True,
        True,
        SPEC,
    ),
    (
        "nested-add-no-default",
        rec(f("inner", rec(f("a", "int"), name="In"))),
        rec(f("inner", rec(f("a", "int"), f("b", "int"), name="In"))),
        False,
        True,
        SPEC,
    ),
    (
        "add-nullable-default-null",
        S1,
        rec(f("f1", "string"), f("f2", ["null", "string"], default=None)),
        True,
        True,
        CONFLUENT_DOC + ": add optional field",
    ),
    (
        "change-default-only",
        S2,
        rec(f("f1", "string"), f("f2", "string", default="bar")),
        True,
        True,
        SPEC + ": defaults only fill missing fields",
    ),
    ("add-doc", S1, rec(f("f1", "string", doc="the first"), doc="a record"), True, True, SPEC),
    (
        "reorder-fields",
        rec(f("a", "int"), f("b", "string")),
        rec(f("b", "string"), f("a", "int")),
        True,
        True,
        SPEC + ": fields matched by name",
    ),
    ("recursive-identical", NODE, NODE, True, True, SPEC + ": recursive types"),
    ("recursive-add-default", NODE, NODE2, True, True, SPEC),
]


def parse_avro(schema: Any) -> Any:
    return AVRO.parse(json.dumps(schema), [])


def _levels(backward: bool, forward: bool) -> dict[str, bool]:
    return {
        "BACKWARD": backward,
        "BACKWARD_TRANSITIVE": backward,
        "FORWARD": forward,
        "FORWARD_TRANSITIVE": forward,
        "FULL": backward and forward,
        "FULL_TRANSITIVE": backward and forward,
        "NONE": True,
    }


AVRO_ROWS = [
    pytest.param(level, old, new, expected, id=f"{level}-{row_id}")
    for row_id, old, new, backward, forward, _source in AVRO_PAIRS
    for level, expected in _levels(backward, forward).items()
]


def test_at_least_forty_avro_pairs_per_level() -> None:
    assert len(AVRO_PAIRS) >= 40
    assert len(AVRO_ROWS) == 7 * len(AVRO_PAIRS)


@pytest.mark.parametrize(("level", "old", "new", "expected"), AVRO_ROWS)
def test_avro_pair(level: str, old: Any, new: Any, expected: bool) -> None:
    messages = compatibility.check(level, AVRO, parse_avro(new), [(1, parse_avro(old))])
    assert (messages == []) == expected, messages


# Version chains where the transitive answer differs: (id, versions oldest first, new,
# {level: compatible}, source).
V_INT = rec(f("f1", "int"))
V_LONG = rec(f("f1", "long"))
V_STR = rec(f("f1", "string"))
V_STR2 = rec(f("f1", "string"), f("f2", "string", default="x"))
AVRO_CHAINS: list[tuple[str, list[Any], Any, dict[str, bool], str]] = [
    (
        "removing-a-default-backward",
        [S1, S2],
        S3,
        {"BACKWARD": True, "BACKWARD_TRANSITIVE": False},
        conf_test("removing a default is compatible, but not transitively"),
    ),
    (
        "iteratively-adding-defaults",
        [S1, S2],
        S8,
        {"BACKWARD_TRANSITIVE": True, "FORWARD_TRANSITIVE": True, "FULL_TRANSITIVE": True},
        conf_test("iteratively adding fields with defaults is a compatible change"),
    ),
    (
        "removing-a-default-forward",
        [S3, S2],
        S1,
        {"FORWARD": True, "FORWARD_TRANSITIVE": False},
        conf_test("removing a default is not a transitively compatible change"),
    ),
    (
        "adding-no-default-full",
        [S1, S2],
        S3,
        {"FULL": True, "FULL_TRANSITIVE": False},
        conf_test("transitively adding a field without a default is not compatible"),
    ),
    (
        "removing-no-default-full",
        [S3, S2],
        S1,
        {"FULL": True, "FULL_TRANSITIVE": False},
        conf_test("transitively removing a field without a default is not compatible"),
    ),
    (
        "old-type-unreadable-backward",
        [V_INT, V_STR],
        V_STR2,
        {"BACKWARD": True, "BACKWARD_TRANSITIVE": False, "FULL": True, "FULL_TRANSITIVE": False},
        CONFLUENT_DOC + ": transitive checks all versions; " + SPEC,
    ),
    (
        "old-reader-narrower-forward",
        [V_INT, V_LONG],
        V_LONG,
        {"FORWARD": True, "FORWARD_TRANSITIVE": False, "NONE": True},
        CONFLUENT_DOC + ": transitive checks all versions; " + SPEC,
    ),
]


@pytest.mark.parametrize(
    ("versions", "new", "level", "expected"),
    [
        pytest.param(versions, new, level, expected, id=f"{row_id}-{level}")
        for row_id, versions, new, answers, _source in AVRO_CHAINS
        for level, expected in answers.items()
    ],
)
def test_avro_chain(versions: list[Any], new: Any, level: str, expected: bool) -> None:
    previous = [(i + 1, parse_avro(v)) for i, v in enumerate(versions)]
    messages = compatibility.check(level, AVRO, parse_avro(new), previous)
    assert (messages == []) == expected, messages


def test_transitive_reports_the_newest_failing_version() -> None:
    previous = [(1, parse_avro(V_STR)), (2, parse_avro(V_INT)), (3, parse_avro(V_STR))]
    messages = compatibility.check("BACKWARD_TRANSITIVE", AVRO, parse_avro(V_STR2), previous)
    assert "{oldSchemaVersion: 2}" in messages


def test_backward_message_as_confluent_words_it() -> None:
    messages = compatibility.check("BACKWARD", AVRO, parse_avro(S3), [(1, parse_avro(S1))])
    assert messages == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'f2'}",
        "{oldSchemaVersion: 1}",
        "{oldSchema: '" + parse_avro(S1).canonical() + "'}",
        "{validateFields: 'false', compatibility: 'BACKWARD'}",
    ]


def test_forward_message_names_the_old_schema_as_reader() -> None:
    messages = compatibility.check("FORWARD", AVRO, parse_avro(S1), [(4, parse_avro(S3))])
    assert messages[0] == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the old schema has no default value and is missing in the new schema', "
        "additionalInfo:'f2'}"
    )
    assert messages[1] == "{oldSchemaVersion: 4}"


@pytest.mark.parametrize(
    ("old", "new", "error_type", "info"),
    [
        (
            rec(f("f1", "double")),
            rec(f("f1", "string")),
            "TYPE_MISMATCH",
            "reader type: STRING not compatible with writer type: DOUBLE",
        ),
        (S7, S6, "MISSING_UNION_BRANCH", "reader union lacking writer type: INT"),
        (enum("A", "B", "C", "D"), enum("A", "B"), "MISSING_ENUM_SYMBOLS", "[C, D]"),
        (enum("A", name="E"), enum("A", name="F"), "NAME_MISMATCH", "expected: E"),
        (
            {"type": "fixed", "name": "F", "size": 16},
            {"type": "fixed", "name": "F", "size": 8},
            "FIXED_SIZE_MISMATCH",
            "expected: 16, found: 8",
        ),
    ],
)
def test_avro_error_types(old: Any, new: Any, error_type: str, info: str) -> None:
    problems = AVRO.reader_errors(parse_avro(new), parse_avro(old))
    assert (problems[0].error_type, problems[0].additional_info) == (error_type, info)


def test_avro_paths_point_into_the_schema() -> None:
    problems = AVRO.reader_errors(parse_avro(S6), parse_avro(S7))
    assert "path '/fields/0/type/2'" in problems[0].description


def test_different_schema_type_is_incompatible() -> None:
    json_schema = JSON.parse('{"type":"string"}', [])
    messages = compatibility.check("BACKWARD", AVRO, parse_avro("string"), [(1, json_schema)])
    assert messages[0] == "Incompatible because of different schema type"


def test_levels() -> None:
    assert compatibility.DEFAULT_LEVEL == "BACKWARD"
    assert len(compatibility.LEVELS) == 7
    with pytest.raises(ValueError):
        compatibility.check("SIDEWAYS", AVRO, parse_avro("int"), [])


# --- JSON Schema ---------------------------------------------------------------------------


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        out["required"] = required
    return out


STR = {"type": "string"}
INT = {"type": "integer"}
CLOSED = {"additionalProperties": False}
JSON_PAIRS: list[tuple[str, Any, Any, bool, bool, str]] = [
    ("identical", obj({"a": STR}), obj({"a": STR}), True, True, JSON_RULES),
    (
        "open-add-property",
        obj({"a": STR}),
        obj({"a": STR, "b": INT}),
        False,
        True,
        json_case("Detect property added to open content model"),
    ),
    (
        "open-remove-property",
        obj({"a": STR, "b": INT}),
        obj({"a": STR}),
        True,
        False,
        JSON_RULES + ": PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    (
        "closed-add-optional",
        obj({"a": STR}, **CLOSED),
        obj({"a": STR, "b": INT}, **CLOSED),
        True,
        False,
        json_case("Detect optional property added to closed content model"),
    ),
    (
        "closed-add-required",
        obj({"a": STR}, **CLOSED),
        obj({"a": STR, "b": INT}, ["b"], **CLOSED),
        False,
        False,
        JSON_RULES + ": REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    ),
    (
        "closed-add-required-default",
        obj({"a": STR}, **CLOSED),
        obj({"a": STR, "b": {**INT, "default": 0}}, ["b"], **CLOSED),
        True,
        False,
        JSON_RULES + ": REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    ),
    (
        "closed-remove-property",
        obj({"a": STR, "b": INT}, **CLOSED),
        obj({"a": STR}, **CLOSED),
        False,
        True,
        JSON_RULES + ": PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    (
        "open-add-empty-schema",
        obj({"a": STR}),
        obj({"a": STR, "b": {}}),
        True,
        True,
        json_case("Detect adding empty schema to open content model"),
    ),
    (
        "required-added",
        obj({"a": STR}),
        obj({"a": STR}, ["a"]),
        False,
        True,
        json_case("Detect required array to be added"),
    ),
    (
        "required-removed",
        obj({"a": STR}, ["a"]),
        obj({"a": STR}),
        True,
        False,
        json_case("Detect required array to be removed"),
    ),
    (
        "required-added-with-default",
        obj({"a": STR}),
        obj({"a": {**STR, "default": ""}}, ["a"]),
        True,
        True,
        JSON_RULES + ": REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
    ),
    ("type-changed", STR, INT, False, False, json_case("Detect changes to simple schema type")),
    (
        "integer-to-number",
        INT,
        {"type": "number"},
        True,
        False,
        json_case("Detect extended change to number schema"),
    ),
    (
        "number-to-integer",
        {"type": "number"},
        INT,
        False,
        True,
        json_case("Detect narrowed change to number schema"),
    ),
    (
        "string-to-nullable",
        STR,
        {"type": ["string", "null"]},
        True,
        False,
        JSON_RULES + ": SUM_TYPE_EXTENDED",
    ),
    (
        "nullable-to-string",
        {"type": ["string", "null"]},
        STR,
        False,
        True,
        JSON_RULES + ": TYPE_CHANGED",
    ),
    (
        "enum-extended",
        {"enum": ["a", "b"]},
        {"enum": ["a", "b", "c"]},
        True,
        False,
        json_case("Detect compatible changes to enum schema"),
    ),
    (
        "enum-narrowed",
        {"enum": ["a", "b", "c"]},
        {"enum": ["a", "b"]},
        False,
        True,
        JSON_RULES + ": ENUM_ARRAY_NARROWED",
    ),
    (
        "enum-changed",
        {"enum": ["a", "b"]},
        {"enum": ["a", "c"]},
        False,
        False,
        json_case("Detect incompatible changes to enum schema"),
    ),
    (
        "max-length-increased",
        {**STR, "maxLength": 10},
        {**STR, "maxLength": 20},
        True,
        False,
        json_case("Detect increased maxLength string schema"),
    ),
    (
        "max-length-added",
        STR,
        {**STR, "maxLength": 10},
        False,
        True,
        JSON_RULES + ": MAX_LENGTH_ADDED",
    ),
    (
        "min-length-increased",
        {**STR, "minLength": 1},
        {**STR, "minLength": 2},
        False,
        True,
        json_case("Detect increased minLength string schema"),
    ),
    ("pattern-added", STR, {**STR, "pattern": "^a"}, False, True, JSON_RULES + ": PATTERN_ADDED"),
    (
        "pattern-changed",
        {**STR, "pattern": "^a"},
        {**STR, "pattern": "^b"},
        False,
        False,
        json_case("Detect changes to pattern string schema"),
    ),
    (
        "maximum-increased",
        {**INT, "maximum": 10},
        {**INT, "maximum": 20},
        True,
        False,
        json_case("Detect increased maximum number schema"),
    ),
    ("minimum-added", INT, {**INT, "minimum": 0}, False, True, JSON_RULES + ": MINIMUM_ADDED"),
    (
        "multiple-of-expanded",
        {**INT, "multipleOf": 2},
        {**INT, "multipleOf": 4},
        False,
        True,
        JSON_RULES + ": MULTIPLE_OF_EXPANDED / MULTIPLE_OF_REDUCED",
    ),
    (
        "additional-properties-removed",
        obj({"a": STR}),
        obj({"a": STR}, **CLOSED),
        False,
        True,
        json_case("Detect removed boolean additional properties"),
    ),
    (
        "additional-properties-added",
        obj({"a": STR}, **CLOSED),
        obj({"a": STR}),
        True,
        False,
        json_case("Detect added boolean additional properties"),
    ),
    (
        "additional-properties-narrowed",
        obj({"a": STR}),
        obj({"a": STR}, additionalProperties=STR),
        False,
        True,
        json_case("Detect narrowing changes to additional properties schema"),
    ),
    (
        "max-items-added",
        {"type": "array", "items": STR},
        {"type": "array", "items": STR, "maxItems": 3},
        False,
        True,
        JSON_RULES + ": MAX_ITEMS_ADDED",
    ),
    (
        "min-items-decreased",
        {"type": "array", "items": STR, "minItems": 2},
        {"type": "array", "items": STR, "minItems": 1},
        True,
        False,
        json_case("Detect decreased minItems"),
    ),
    (
        "unique-items-added",
        {"type": "array", "items": STR},
        {"type": "array", "items": STR, "uniqueItems": True},
        False,
        True,
        JSON_RULES + ": UNIQUE_ITEMS_ADDED",
    ),
    (
        "array-items-type-changed",
        {"type": "array", "items": STR},
        {"type": "array", "items": INT},
        False,
        False,
        JSON_RULES + ": TYPE_CHANGED",
    ),
    (
        "array-items-widened",
        {"type": "array", "items": INT},
        {"type": "array", "items": {"type": "number"}},
        True,
        False,
        JSON_RULES + ": TYPE_EXTENDED",
    ),
    (
        "nested-open-add-property",
        obj({"n": obj({"a": STR})}),
        obj({"n": obj({"a": STR, "b": INT})}),
        False,
        True,
        JSON_RULES + ": PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
    ),
    (
        "one-of-extended",
        {"oneOf": [STR, INT]},
        {"oneOf": [STR, INT, {"type": "boolean"}]},
        True,
        False,
        JSON_RULES + ": SUM_TYPE_EXTENDED",
    ),
    (
        "any-of-to-one-of",
        {"anyOf": [STR, INT]},
        {"oneOf": [STR, INT]},
        False,
        True,
        JSON_RULES + ": COMBINED_TYPE_CHANGED / COMBINED_TYPE_EXTENDED",
    ),
    (
        "all-of-narrowed",
        {"allOf": [STR, {"maxLength": 5}]},
        {"allOf": [STR]},
        True,
        False,
        JSON_RULES + ": PRODUCT_TYPE_NARROWED",
    ),
    (
        "object-to-true",
        obj({"a": STR}),
        True,
        True,
        False,
        json_case("Anything can change to empty schema"),
    ),
    (
        "title-and-description",
        obj({"a": STR}),
        obj({"a": STR}, title="T", description="D"),
        True,
        True,
        json_case("Detect changes to title, Detect changes to description"),
    ),
    (
        "ref-versus-inline",
        obj({"a": {"$ref": "#/definitions/s"}}, definitions={"s": STR}),
        obj({"a": STR}),
        True,
        True,
        json_case("Detect compatible change of moving from reference schema"),
    ),
    (
        "max-properties-added",
        obj({"a": STR}),
        obj({"a": STR}, maxProperties=3),
        False,
        True,
        JSON_RULES + ": MAX_PROPERTIES_ADDED",
    ),
    (
        "partially-open-covered",
        obj({"a": STR}, additionalProperties=STR),
        obj({"a": STR, "b": STR}, additionalProperties=STR),
        True,
        True,
        JSON_RULES + ": PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    (
        "partially-open-not-covered",
        obj({"a": STR}, additionalProperties=STR),
        obj({"a": STR, "b": INT}, additionalProperties=STR),
        False,
        False,
        JSON_RULES + ": PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
]


def parse_json(schema: Any) -> Any:
    return JSON.parse(json.dumps(schema), [])


JSON_ROWS = [
    pytest.param(level, old, new, expected, id=f"{level}-{row_id}")
    for row_id, old, new, backward, forward, _source in JSON_PAIRS
    for level, expected in _levels(backward, forward).items()
]


def test_at_least_forty_json_pairs() -> None:
    assert len(JSON_PAIRS) >= 40


@pytest.mark.parametrize(("level", "old", "new", "expected"), JSON_ROWS)
def test_json_pair(level: str, old: Any, new: Any, expected: bool) -> None:
    messages = compatibility.check(level, JSON, parse_json(new), [(1, parse_json(old))])
    assert (messages == []) == expected, messages


def test_json_transitive_chain() -> None:
    # v1 requires "a", v2 makes it optional; a new optional "a" reads both, but v1 cannot
    # read it back (REQUIRED_ATTRIBUTE_ADDED from the new schema's side).
    versions = [(1, parse_json(obj({"a": STR}, ["a"]))), (2, parse_json(obj({"a": STR})))]
    later = parse_json(obj({"a": STR}))
    assert compatibility.check("BACKWARD_TRANSITIVE", JSON, later, versions) == []
    assert compatibility.check("FORWARD", JSON, later, versions) == []
    assert compatibility.check("FORWARD_TRANSITIVE", JSON, later, versions) != []
    assert compatibility.check("FULL", JSON, later, versions) == []
    assert compatibility.check("FULL_TRANSITIVE", JSON, later, versions) != []
    required_again = parse_json(obj({"a": STR}, ["a"]))
    assert compatibility.check("FORWARD", JSON, required_again, versions) == []
    assert compatibility.check("BACKWARD", JSON, required_again, versions) != []


def test_json_message_as_confluent_words_it() -> None:
    messages = compatibility.check(
        "BACKWARD", JSON, parse_json(obj({"a": STR, "b": INT})), [(1, parse_json(obj({"a": STR})))]
    )
    assert messages[0] == (
        '{errorType:"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new schema has an '
        "open content model and has a property or item at path '#/properties/b' which is "
        "missing in the old schema'}"
    )


# --- parsing and the stored text -----------------------------------------------------------


def test_avro_canonical_is_java_to_string() -> None:
    given = """{
      "namespace": "com.example", "type": "record", "name": "User", "doc": "a user",
      "fields": [
        {"type": "string", "name": "name"},
        {"name": "ts", "type": {"logicalType": "timestamp-millis", "type": "long"}},
        {"name": "kind", "type": {"symbols": ["A", "B"], "type": "enum", "name": "Kind"},
         "default": "A"},
        {"name": "again", "type": "Kind"},
        {"name": "other", "type": {"type": "fixed", "name": "x.Hash", "size": 4}}
      ]
    }"""
    assert AVRO.parse(given, []).canonical() == (
        '{"type":"record","name":"User","namespace":"com.example","doc":"a user","fields":['
        '{"name":"name","type":"string"},'
        '{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},'
        '{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]},"default":"A"},'
        '{"name":"again","type":"Kind"},'
        '{"name":"other","type":{"type":"fixed","name":"Hash","namespace":"x","size":4}}]}'
    )


def test_avro_reformatted_schema_has_the_same_text() -> None:
    one = AVRO.parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}', [])
    two = AVRO.parse(
        '{ "fields" : [ { "type" : "int", "name" : "a" } ],\n "name" : "R", "type" : "record" }',
        [],
    )
    assert one.canonical() == two.canonical()
    assert AVRO.parse('{"type": "string"}', []).canonical() == '"string"'


def test_avro_normalized_sorts_extra_attributes() -> None:
    one = AVRO.parse('{"type":"string","b":1,"a":2}', [])
    two = AVRO.parse('{"type":"string","a":2,"b":1}', [])
    assert one.canonical() != two.canonical()
    assert one.normalized().canonical() == two.normalized().canonical()


def test_avro_references_are_written_by_name() -> None:
    address = (
        '{"type":"record","name":"Address","namespace":"b","fields":[{"name":"s","type":"string"}]}'
    )
    user = AVRO.parse(
        '{"type":"record","name":"User","namespace":"a","fields":[{"name":"home","type":"b.Address"}]}',
        [("address", address)],
    )
    assert user.canonical() == (
        '{"type":"record","name":"User","namespace":"a","fields":[{"name":"home","type":"b.Address"}]}'
    )
    assert '"fields":[{"name":"s"' in user.formatted("resolved")
    with pytest.raises(InvalidSchema):
        AVRO.parse(user.canonical(), [])


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"type":"record","name":"R"}',
        '{"type":"record","name":"1R","fields":[]}',
        '{"type":"enum","name":"E","symbols":["A","A"]}',
        '["int","int"]',
        '{"type":"nope"}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
        '{"type":"record","name":"R","fields":[{"name":"a","type":["string","null"],"default":null}]}',
    ],
)
def test_avro_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        AVRO.parse(text, [])


def test_json_canonical_keeps_key_order_and_drops_whitespace() -> None:
    parsed = JSON.parse('{ "type" : "object",\n  "properties": {"b": {}, "a": {}} }', [])
    assert parsed.canonical() == '{"type":"object","properties":{"b":{},"a":{}}}'
    assert parsed.normalized().canonical() == '{"properties":{"a":{},"b":{}},"type":"object"}'


def test_json_references_resolve_by_name() -> None:
    address = '{"type":"object","properties":{"street":{"type":"string"}}}'
    parsed = JSON.parse(
        '{"type":"object","properties":{"home":{"$ref":"address.json"}}}',
        [("address.json", address)],
    )
    assert "address.json" in parsed.canonical()
    with pytest.raises(InvalidSchema):
        JSON.parse('{"$ref":"address.json"}', [])


@pytest.mark.parametrize(
    "text",
    ['{"type":"nope"}', "[1]", "nope", '{"type":"object","required":"a"}', '{"$ref":"#/missing"}'],
)
def test_json_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        JSON.parse(text, [])


# --- Apache Avro's own reader/writer cases ---------------------------------------------------


class _PortResult:
    """One answer in the shape Apache Avro's Python test-suite inspects (its port keeps
    messages and locations as sets, prints enum symbols as a Python set and type names of
    mismatches in lower case; the Java wording this registry answers differs only there)."""

    def __init__(self, problems: list[Any]) -> None:
        from avro.compatibility import SchemaCompatibilityType

        kind = SchemaCompatibilityType
        self.compatibility = kind.incompatible if problems else kind.compatible
        self.locations = {p.description.split("path '")[1].split("'")[0] for p in problems}
        self.messages = {self._port_wording(p) for p in problems}

    @staticmethod
    def _port_wording(problem: Any) -> str:
        info: str = problem.additional_info
        if problem.error_type == "MISSING_ENUM_SYMBOLS":
            return "{" + ", ".join(repr(s) for s in info[1:-1].split(", ")) + "}"
        if problem.error_type == "TYPE_MISMATCH":
            return re.sub(r"type: ([A-Z]+)", lambda m: "type: " + m.group(1).lower(), info)
        return info


class _OurChecker:
    def get_compatibility(self, reader: Any, writer: Any) -> _PortResult:
        def ours(schema: Any) -> Any:
            return AVRO.parse(json.dumps(schema.to_json()), [])

        return _PortResult(AVRO.reader_errors(ours(reader), ours(writer)))


def test_apache_avro_compatibility_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """Apache Avro's TestCompatibility (shipped in the avro package) run against this
    checker: every compatible and incompatible pair, with locations and messages."""
    import avro.test.test_compatibility as cases

    monkeypatch.setattr(cases, "ReaderWriterCompatibilityChecker", _OurChecker)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cases.TestCompatibility)
    result = unittest.TestResult()
    suite.run(result)
    assert result.testsRun >= 8
    assert result.wasSuccessful(), result.failures + result.errors


# --- normalize=true ------------------------------------------------------------------------


def test_avro_normalized_form_as_confluent() -> None:
    # Confluent AvroSchemaTest.testNormalizationPreservesMetadataForPrimitiveTypes (as a fact):
    # attributes of primitives and records are kept, after the structure, sorted.
    given = (
        '{"zeta.name":"outer","fields":[{"default":null,"name":"before","type":["null",'
        '{"b.prop":2,"a.prop":1,"fields":[{"name":"at","type":{"logicalType":"timestamp-millis",'
        '"x.version":1,"type":"long"}}],"name":"Value","type":"record"}]},'
        '{"name":"after","type":["null","Value"],"default":null}],'
        '"name":"Envelope","namespace":"some.scope","type":"record"}'
    )
    assert AVRO.parse(given, []).normalized().canonical() == (
        '{"type":"record","name":"Envelope","namespace":"some.scope","fields":['
        '{"name":"before","type":["null",{"type":"record","name":"Value","fields":['
        '{"name":"at","type":{"type":"long","logicalType":"timestamp-millis","x.version":1}}],'
        '"a.prop":1,"b.prop":2}],"default":null},'
        '{"name":"after","type":["null","Value"],"default":null}],"zeta.name":"outer"}'
    )


def test_avro_normalized_form_sorts_aliases_and_drops_empty_docs() -> None:
    one = AVRO.parse(
        '{"type":"record","name":"R","doc":"","aliases":["b","a"],'
        '"fields":[{"name":"f","type":"int","aliases":["y","x"]}]}',
        [],
    )
    assert one.normalized().canonical() == (
        '{"type":"record","name":"R","fields":[{"name":"f","type":"int","aliases":["x","y"]}],'
        '"aliases":["a","b"]}'
    )


def _nested_any_of(depth: int, width: int, salt: int) -> Any:
    if depth == 0:
        return {"type": "string", "maxLength": salt}
    return {"anyOf": [_nested_any_of(depth - 1, width, salt + i) for i in range(width)]}


def test_json_comparison_of_huge_combinations_is_refused_not_computed() -> None:
    # 6^4 subschemas a side: comparing every pair would take the broker's thread for
    # many seconds, so the check stops after a bounded number of comparisons and refuses.
    old = parse_json(_nested_any_of(4, 6, 0))
    new = parse_json(_nested_any_of(4, 6, 1))
    problems = JSON.reader_errors(new, old)
    assert [p.error_type for p in problems] == ["TYPE_CHANGED"]


def test_recursive_json_schemas_compare() -> None:
    old = JSON.parse(
        '{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"string"}}}', []
    )
    new = JSON.parse(
        '{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}}}', []
    )
    assert JSON.reader_errors(old, old) == []
    assert [p.error_type for p in JSON.reader_errors(new, old)] == ["TYPE_CHANGED"]


def test_deeply_nested_avro_is_refused() -> None:
    deep = '{"type":"array","items":' * 600 + '"int"' + "}" * 600
    with pytest.raises(InvalidSchema):
        AVRO.parse(deep, [])
