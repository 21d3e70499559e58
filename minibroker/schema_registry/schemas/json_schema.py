"""JSON schemas (JSON Schema): parsing, the stored text, and Confluent's compatibility rules.

The schema document is checked with `jsonschema` against the meta-schema of the draft its
`$schema` names (draft-07 when none, as Confluent). `$ref`s to other documents resolve to the
referenced schemas by reference name (or by their `$id`).

The compatibility rules are written here by hand: no Python library compares two JSON
Schemas. They follow Confluent's JSON Schema diff as documented and as its error types
name it: the old (writer) schema is the "original", the new (reader) one the "update";
every difference has a type and a JSON path (`#/properties/age`); a change is incompatible
unless its type is one Confluent lists as compatible (e.g. a property added to a closed
content model, `maxLength` increased, an enum extended). Covered: types (changed, integer
narrowed/widened to number), string/number/array/object bounds, enums, properties added or
removed in open, closed and partially open content models, `required`, `additionalProperties`,
`additionalItems`, tuple items, property dependencies, `allOf`/`anyOf`/`oneOf` (subschemas
matched by a maximum bipartite matching) and `not`.

`canonical()` is the document as compact JSON with its key order kept (Jackson's output);
`normalized()` also sorts the keys of every object, as Confluent re-reads it for
`normalize=true`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag

# jsonschema ships no type information (no stubs are installed here).
import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]

from minibroker.schema_registry.schemas import InvalidSchema, Problem


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


COMPATIBLE_CHANGES = _names(
    """ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED
    TYPE_EXTENDED MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED
    MIN_LENGTH_REMOVED PATTERN_REMOVED MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED
    MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_REMOVED
    EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED
    MULTIPLE_OF_REMOVED REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
    DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED
    MAX_PROPERTIES_INCREASED MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED
    MIN_PROPERTIES_REMOVED ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
    PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL MAX_ITEMS_INCREASED
    MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED UNIQUE_ITEMS_REMOVED
    ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ENUM_ARRAY_EXTENDED
    COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED"""
)

_KEYWORD_ADDED_OR_REMOVED = _names(
    """MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED
    MULTIPLE_OF_ADDED MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED
    REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED MIN_PROPERTIES_ADDED
    DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED MIN_ITEMS_ADDED
    UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED"""
)
_VALUE_INCREASED = _names(
    """MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED
    MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED"""
)
_VALUE_DECREASED = _names(
    """MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED EXCLUSIVE_MAXIMUM_DECREASED
    MAX_PROPERTIES_DECREASED"""
)
_TYPE_NARROWED = _names(
    """ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED
    ADDITIONAL_PROPERTIES_NARROWED"""
)
_VALUE_CHANGED = _names("""PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED""")
_TYPE_CHANGED = _names(
    """TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED
    ENUM_ARRAY_CHANGED"""
)
_TYPE_EXTENDED = _names(
    """DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED"""
)


def describe(error_type: str, path: str) -> str:
    """Confluent's description of a difference; `%s`: the reader's then the writer's label."""
    if error_type in _KEYWORD_ADDED_OR_REMOVED:
        return f"The keyword at path '{path}' in the %s schema is not present in the %s schema"
    if error_type in _VALUE_INCREASED:
        return (
            f"The value at path '{path}' in the %s schema is more than its value in the %s schema"
        )
    if error_type in _VALUE_DECREASED:
        return (
            f"The value at path '{path}' in the %s schema is less than its value in the %s schema"
        )
    if error_type in _VALUE_CHANGED:
        return f"The value at path '{path}' is different between the %s and %s schema"
    if error_type in _TYPE_NARROWED:
        return (
            f"An array or combined type at path '{path}' has fewer elements in the %s schema "
            "than the %s schema"
        )
    if error_type in _TYPE_EXTENDED:
        return (
            f"An array or combined type at path '{path}' has more elements in the %s schema "
            "than the %s schema"
        )
    if error_type in _TYPE_CHANGED:
        return f"A type at path '{path}' is different between the %s schema and the %s schema"
    if error_type in ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"):
        return (
            "The %s schema has an open content model and has a property or item at path "
            f"'{path}' which is missing in the %s schema"
        )
    if error_type == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        return (
            "The %s schema has an unopen content model and has a required property at path "
            f"'{path}' which is missing in the %s schema"
        )
    if error_type in (
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ):
        return (
            "The %s schema has a closed content model and is missing a property or item "
            f"present at path '{path}' in the %s schema"
        )
    if error_type in (
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ):
        return (
            f"A property or item is missing in the %s schema but present at path '{path}' in "
            "the %s schema and is not covered by its partially open content model"
        )
    if error_type in (
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ):
        return (
            f"The %s schema has a property or item at path '{path}' which is missing in the %s "
            "schema and is not covered by its partially open content model"
        )
    return ""


def format_problem(problem: Problem, reader: str, writer: str) -> str:
    """A JSON Schema finding as Confluent words it: double quotes, no additional info, and
    the description closed by `'}` (sic)."""
    description = problem.description.replace("%s", reader, 1).replace("%s", writer, 1)
    return f'{{errorType:"{problem.error_type}", description:"{description}\'}}'


@dataclass(frozen=True, eq=False)
class JsonSchema:
    document: Any
    references: tuple[tuple[str, Any], ...]
    text: str
    schema_type: str = "JSON"

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> JsonSchema:
        doc = _normalize(self.document)
        return JsonSchema(doc, self.references, _compact(doc))

    def formatted(self, fmt: str | None) -> str:
        return self.text


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_VALUE_KEYWORDS = frozenset(("enum", "const", "default", "examples"))


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalize(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid {what}: not JSON ({exc})") from exc
    if not isinstance(document, dict | bool):
        raise InvalidSchema(f"Invalid {what}: a JSON schema is an object or a boolean")
    return document


def _check_document(document: Any, what: str) -> None:
    default = jsonschema.validators.Draft7Validator
    try:
        validator = jsonschema.validators.validator_for(document, default=default)
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchema(f"Invalid {what}: {exc.message}") from exc
    except (jsonschema.exceptions.UnknownType, ValueError, TypeError) as exc:
        raise InvalidSchema(f"Invalid {what}: {exc}") from exc
    except RecursionError as exc:
        raise InvalidSchema(f"Invalid {what}: nested too deeply") from exc


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> JsonSchema:
    """Parse a JSON schema; references are (name used in `$ref`, schema text)."""
    loaded = []
    for name, ref_text in references:
        ref_doc = _load(ref_text, f"reference {name}")
        _check_document(ref_doc, f"reference {name}")
        loaded.append((name, ref_doc))
    document = _load(text, "schema")
    _check_document(document, "schema")
    schema = JsonSchema(document, tuple(loaded), _compact(document))
    resolver = _Resolver(schema)
    try:
        resolver.check_all(document, document)
    except RecursionError as exc:
        raise InvalidSchema("Invalid schema: nested too deeply") from exc
    return schema


class _Resolver:
    """Finds what a `$ref` points at: a place in the same document or a referenced schema."""

    def __init__(self, schema: JsonSchema) -> None:
        self.documents: dict[str, Any] = {}
        for name, doc in schema.references:
            self.documents[name] = doc
            self.documents.setdefault(name.rsplit("/", 1)[-1], doc)
            if isinstance(doc, dict) and isinstance(doc.get("$id"), str):
                self.documents.setdefault(doc["$id"], doc)
        self.root_id = schema.document.get("$id") if isinstance(schema.document, dict) else None

    def resolve(self, ref: str, root: Any) -> tuple[Any, Any]:
        """(the schema a $ref names, the document it lives in)."""
        uri, fragment = urldefrag(ref)
        document = root
        if uri and uri != self.root_id:
            found = self.documents.get(uri)
            if found is None:
                found = self.documents.get(uri.rsplit("/", 1)[-1])
            if found is None:
                raise InvalidSchema(f"Invalid schema: cannot resolve $ref {ref}")
            document = found
        target = document
        if fragment:
            for part in fragment.lstrip("/").split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    raise InvalidSchema(f"Invalid schema: cannot resolve $ref {ref}")
        return target, document

    def check_all(self, value: Any, root: Any) -> None:
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):
                self.resolve(ref, root)
            for key, child in value.items():
                if key not in _VALUE_KEYWORDS:
                    self.check_all(child, root)
        elif isinstance(value, list):
            for child in value:
                self.check_all(child, root)


# --- the diff ------------------------------------------------------------------------------

_COMBINERS = ("allOf", "anyOf", "oneOf")
_STRING_KEYS = ("maxLength", "minLength", "pattern")
_NUMBER_KEYS = ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf")
_OBJECT_KEYS = (
    "properties", "required", "additionalProperties", "patternProperties", "dependencies",
    "maxProperties", "minProperties",
)  # fmt: skip
_ARRAY_KEYS = ("items", "additionalItems", "maxItems", "minItems", "uniqueItems")


@dataclass(frozen=True)
class _Node:
    """A schema in a document (the document matters for its local `$ref`s)."""

    value: Any
    root: Any


def _kind(value: Any) -> str:
    """The schema class the Java validator would build (a simplified view of it)."""
    if value is True or value == {}:
        return "empty"
    if value is False:
        return "false"
    if not isinstance(value, dict):
        return "empty"
    for combiner in _COMBINERS:
        if combiner in value:
            return "combined"
    if isinstance(value.get("type"), list):
        return "combined" if len(value["type"]) != 1 else _type_kind(value["type"][0])
    if ("enum" in value or "const" in value) and isinstance(value.get("type"), str):
        return "combined"
    if "enum" in value:
        return "enum"
    if "const" in value:
        return "const"
    if "not" in value:
        return "not"
    if isinstance(value.get("type"), str):
        return _type_kind(value["type"])
    if any(k in value for k in _OBJECT_KEYS):
        return "object"
    if any(k in value for k in _ARRAY_KEYS):
        return "array"
    if any(k in value for k in _STRING_KEYS):
        return "string"
    if any(k in value for k in _NUMBER_KEYS):
        return "number"
    return "empty"


def _type_kind(name: str) -> str:
    return "number" if name == "integer" else name


def _combined(value: dict[str, Any]) -> tuple[str, list[Any]]:
    for combiner in _COMBINERS:
        if combiner in value:
            return combiner, list(value[combiner])
    if "enum" in value or "const" in value:
        # A type with an enum or const is both at once (allOf the two).
        value_keys = ("enum", "const")
        typed = {k: v for k, v in value.items() if k not in value_keys}
        values = {k: v for k, v in value.items() if k in value_keys}
        return "allOf", [typed, values]
    # "type": [a, b] is anyOf the single-type schemas with the same keywords.
    rest = {k: v for k, v in value.items() if k != "type"}
    return "anyOf", [{**rest, "type": t} for t in value["type"]]


# Comparisons one check may make: combined schemas compare every pair of subschemas, so a
# hostile pair of schemas could otherwise keep the broker's thread busy for minutes.
MAX_COMPARISONS = 10_000


class _TooComplex(Exception):
    pass


class _Context:
    def __init__(
        self,
        resolver: _Resolver,
        path: list[str],
        active: set[tuple[int, int]],
        budget: list[int],
    ) -> None:
        self.resolver = resolver
        self.path = list(path)
        self.active = active  # pairs being compared up the stack (recursive schemas)
        self.budget = budget  # comparisons left, shared by every subcontext
        self.diffs: list[tuple[str, str]] = []

    def sub(self) -> _Context:
        return _Context(self.resolver, self.path, self.active, self.budget)

    def spend(self) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _TooComplex

    @contextmanager
    def enter(self, *parts: str) -> Iterator[None]:
        self.path.extend(parts)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts) :]

    def add(self, error_type: str, attribute: str | None = None) -> None:
        parts = [*self.path, attribute] if attribute else self.path
        self.diffs.append((error_type, "#/" + "/".join(parts)))

    def compatible(self) -> bool:
        return all(t in COMPATIBLE_CHANGES for t, _ in self.diffs)


def _deref(ctx: _Context, node: _Node) -> _Node:
    seen = 0
    while isinstance(node.value, dict) and isinstance(node.value.get("$ref"), str):
        target, document = ctx.resolver.resolve(node.value["$ref"], node.root)
        node = _Node(target, document)
        seen += 1
        if seen > 64:
            break
    return node


def _compare(ctx: _Context, original: _Node | None, update: _Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    ctx.spend()
    original, update = _deref(ctx, original), _deref(ctx, update)
    key = (id(original.value), id(update.value))
    if key in ctx.active:
        return
    o_kind, u_kind = _kind(original.value), _kind(update.value)
    if o_kind != "combined" and u_kind == "combined":
        criterion, subs = _combined(update.value)
        if len(subs) == 1:
            sub = ctx.sub()
            _compare(sub, original, _Node(subs[0], update.root))
            if sub.compatible():
                ctx.diffs.extend(sub.diffs)
                return
        elif criterion in ("anyOf", "oneOf"):
            for candidate in subs:
                sub = ctx.sub()
                _compare(sub, original, _Node(candidate, update.root))
                if sub.compatible():
                    ctx.diffs.extend(sub.diffs)
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif o_kind == "combined" and u_kind != "combined":
        criterion, subs = _combined(original.value)
        if len(subs) == 1:
            sub = ctx.sub()
            _compare(sub, _Node(subs[0], original.root), update)
            if sub.compatible():
                ctx.diffs.extend(sub.diffs)
                return
        elif criterion == "allOf":
            for candidate in subs:
                sub = ctx.sub()
                _compare(sub, _Node(candidate, original.root), update)
                if sub.compatible():
                    ctx.diffs.extend(sub.diffs)
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return
    if o_kind != u_kind:
        if o_kind == "false" or u_kind == "empty":
            return
        ctx.add("TYPE_CHANGED")
        return
    ctx.active.add(key)
    try:
        o, u = original.value, update.value
        if o_kind == "string":
            _bounds(ctx, o, u, "maxLength", "MAX_LENGTH", larger_is="INCREASED")
            _bounds(ctx, o, u, "minLength", "MIN_LENGTH", larger_is="INCREASED")
            if o.get("pattern") != u.get("pattern"):
                if "pattern" not in o:
                    ctx.add("PATTERN_ADDED", "pattern")
                elif "pattern" not in u:
                    ctx.add("PATTERN_REMOVED", "pattern")
                else:
                    ctx.add("PATTERN_CHANGED", "pattern")
        elif o_kind == "number":
            _number(ctx, o, u)
        elif o_kind == "enum":
            _enum(ctx, list(o["enum"]), list(u["enum"]))
        elif o_kind == "const":
            if o["const"] != u["const"]:
                ctx.add("ENUM_ARRAY_CHANGED", "const")
        elif o_kind == "not":
            with ctx.enter("not"):
                sub = ctx.sub()
                # The wrapped schemas swap sides: what must not match may only grow.
                _compare(sub, _Node(u["not"], update.root), _Node(o["not"], original.root))
                ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")
        elif o_kind == "combined":
            _combined_diff(ctx, original, update)
        elif o_kind == "object":
            _object(ctx, original, update)
        elif o_kind == "array":
            _array(ctx, original, update)
    finally:
        ctx.active.discard(key)


def _bounds(ctx: _Context, o: Any, u: Any, key: str, name: str, larger_is: str) -> None:
    old, new = o.get(key), u.get(key)
    if old == new:
        return
    if old is None:
        ctx.add(f"{name}_ADDED", key)
    elif new is None:
        ctx.add(f"{name}_REMOVED", key)
    elif new > old:
        ctx.add(f"{name}_{larger_is}", key)
    else:
        ctx.add(f"{name}_{'DECREASED' if larger_is == 'INCREASED' else 'INCREASED'}", key)


def _number(ctx: _Context, o: Any, u: Any) -> None:
    _bounds(ctx, o, u, "maximum", "MAXIMUM", "INCREASED")
    _bounds(ctx, o, u, "minimum", "MINIMUM", "INCREASED")
    for key, name in (
        ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
        ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
    ):
        old, new = o.get(key), u.get(key)
        if isinstance(old, bool) or isinstance(new, bool):
            continue  # draft-04 booleans qualify maximum/minimum
        _bounds(ctx, o, u, key, name, "INCREASED")
    old_m, new_m = o.get("multipleOf"), u.get("multipleOf")
    if old_m != new_m:
        if old_m is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif new_m is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif new_m % old_m == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif old_m % new_m == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    old_int, new_int = o.get("type") == "integer", u.get("type") == "integer"
    if old_int and not new_int:
        ctx.add("TYPE_EXTENDED")
    elif new_int and not old_int:
        ctx.add("TYPE_NARROWED")


def _enum(ctx: _Context, old: list[Any], new: list[Any]) -> None:
    old_set, new_set = {_compact(v) for v in old}, {_compact(v) for v in new}
    if old_set == new_set:
        return
    if new_set >= old_set:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif old_set >= new_set:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _combined_diff(ctx: _Context, original: _Node, update: _Node) -> None:
    o_crit, o_subs = _combined(original.value)
    u_crit, u_subs = _combined(update.value)
    if o_crit != u_crit:
        o_single, u_single = len(o_subs) == 1, len(u_subs) == 1
        if (
            u_crit == "anyOf"
            or (o_single and u_single)
            or (o_single and u_crit == "oneOf")
            or (u_single and o_crit == "allOf")
        ):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    o_unique = list({_compact(s): s for s in o_subs}.values())
    u_unique = list({_compact(s): s for s in u_subs}.values())
    if len(o_unique) < len(u_unique):
        ctx.add("PRODUCT_TYPE_EXTENDED" if u_crit == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(o_unique) > len(u_unique):
        ctx.add("PRODUCT_TYPE_NARROWED" if o_crit == "allOf" else "SUM_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, o_sub in enumerate(o_unique):
        with ctx.enter(f"{o_crit}/{i}"):
            for j, u_sub in enumerate(u_unique):
                sub = ctx.sub()
                _compare(sub, _Node(o_sub, original.root), _Node(u_sub, update.root))
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.diffs
    matching = _max_matching(edges)
    for i, j in matching.items():
        ctx.diffs.extend(edges[i][j])
    if len(matching) < min(len(o_unique), len(u_unique)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _max_matching(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """A maximum bipartite matching (augmenting paths); left index -> right index."""
    right_of: dict[int, int] = {}

    def augment(left: int, seen: set[int]) -> bool:
        for right in edges.get(left, {}):
            if right in seen:
                continue
            seen.add(right)
            if right not in right_of or augment(right_of[right], seen):
                right_of[right] = left
                return True
        return False

    for left in edges:
        augment(left, set())
    return {left: right for right, left in right_of.items()}


def _properties(value: Any) -> dict[str, Any]:
    props = value.get("properties") if isinstance(value, dict) else None
    return props if isinstance(props, dict) else {}


def _required(value: Any) -> list[str]:
    req = value.get("required") if isinstance(value, dict) else None
    return list(req) if isinstance(req, list) else []


def _additional(value: Any, key: str) -> tuple[bool, Any]:
    """(permits additional properties/items, the schema they must match or None)."""
    extra = value.get(key, True) if isinstance(value, dict) else True
    if extra is False:
        return False, None
    if isinstance(extra, dict):
        return True, extra
    return True, None


def _open_object(value: Any) -> bool:
    permits, schema = _additional(value, "additionalProperties")
    return permits and schema is None and not value.get("patternProperties")


def _partial_object(value: Any, key: str) -> Any:
    for pattern, schema in (value.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, key):
                return schema
        except re.error:
            continue
    return _additional(value, "additionalProperties")[1]


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _object(ctx: _Context, original: _Node, update: _Node) -> None:
    o, u = original.value, update.value
    o_props, u_props = _properties(o), _properties(u)
    o_req, u_req = _required(o), _required(u)
    with ctx.enter("required"):
        for key in o_props:
            if key in u_props:
                was, now = key in o_req, key in u_req
                if was and not now:
                    ctx.add("REQUIRED_ATTRIBUTE_REMOVED", key)
                elif now and not was:
                    kind = "_WITH_DEFAULT" if _has_default(u_props[key]) else ""
                    ctx.add(f"REQUIRED_ATTRIBUTE{kind}_ADDED", key)
    with ctx.enter("properties"):
        for key in [*o_props, *(k for k in u_props if k not in o_props)]:
            with ctx.enter(key):
                _property(ctx, original, update, key)
    with ctx.enter("dependencies"):
        o_deps, u_deps = o.get("dependencies") or {}, u.get("dependencies") or {}
        for key in [*o_deps, *(k for k in u_deps if k not in o_deps)]:
            old, new = o_deps.get(key), u_deps.get(key)
            if isinstance(old, list) or isinstance(new, list):
                if new is None:
                    ctx.add("DEPENDENCY_ARRAY_REMOVED", key)
                elif old is None:
                    ctx.add("DEPENDENCY_ARRAY_ADDED", key)
                elif set(old) != set(new):
                    if set(new) >= set(old):
                        ctx.add("DEPENDENCY_ARRAY_EXTENDED", key)
                    elif set(old) >= set(new):
                        ctx.add("DEPENDENCY_ARRAY_NARROWED", key)
                    else:
                        ctx.add("DEPENDENCY_ARRAY_CHANGED", key)
            elif new is None:
                ctx.add("DEPENDENCY_SCHEMA_REMOVED", key)
            elif old is None:
                ctx.add("DEPENDENCY_SCHEMA_ADDED", key)
            else:
                with ctx.enter(key):
                    _compare(ctx, _Node(old, original.root), _Node(new, update.root))
    with ctx.enter("additionalProperties"):
        o_permits, o_schema = _additional(o, "additionalProperties")
        u_permits, u_schema = _additional(u, "additionalProperties")
        if o_permits != u_permits:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if u_permits else "ADDITIONAL_PROPERTIES_REMOVED")
        elif o_schema is None and u_schema is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif u_schema is None and o_schema is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        elif o_schema is not None:
            _compare(ctx, _Node(o_schema, original.root), _Node(u_schema, update.root))
    _bounds(ctx, o, u, "maxProperties", "MAX_PROPERTIES", "INCREASED")
    _bounds(ctx, o, u, "minProperties", "MIN_PROPERTIES", "INCREASED")


def _property(ctx: _Context, original: _Node, update: _Node, key: str) -> None:
    o, u = original.value, update.value
    old, new = _properties(o).get(key), _properties(u).get(key)
    if new is None:
        if _open_object(u):
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _partial_object(u, key)
        if partial is not None:
            sub = ctx.sub()
            _compare(sub, _Node(old, original.root), _Node(partial, update.root))
            ctx.diffs.extend(sub.diffs)
            covered = "IS" if sub.compatible() else "NOT"
            ctx.add(f"PROPERTY_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif old is False:
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    elif old is None:
        if _open_object(o):
            if _kind(new) == "empty":
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                ctx.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _partial_object(o, key)
        if partial is not None:
            sub = ctx.sub()
            _compare(sub, _Node(partial, original.root), _Node(new, update.root))
            ctx.diffs.extend(sub.diffs)
            covered = "IS" if sub.compatible() else "NOT"
            ctx.add(f"PROPERTY_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if key in _required(u):
            if _has_default(new):
                ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL")
            else:
                ctx.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        _compare(ctx, _Node(old, original.root), _Node(new, update.root))


def _array(ctx: _Context, original: _Node, update: _Node) -> None:
    o, u = original.value, update.value
    o_items, u_items = o.get("items"), u.get("items")
    o_all = o_items if not isinstance(o_items, list) else None
    u_all = u_items if not isinstance(u_items, list) else None
    with ctx.enter("items"):
        _compare(
            ctx,
            None if o_all is None else _Node(o_all, original.root),
            None if u_all is None else _Node(u_all, update.root),
        )
    o_tuple = o_items if isinstance(o_items, list) else []
    u_tuple = u_items if isinstance(u_items, list) else []
    for index in range(max(len(o_tuple), len(u_tuple))):
        with ctx.enter(f"items/{index}"):
            if index < len(o_tuple) and index < len(u_tuple):
                _compare(
                    ctx, _Node(o_tuple[index], original.root), _Node(u_tuple[index], update.root)
                )
            elif index < len(o_tuple):
                _tuple_item(ctx, "REMOVED", _Node(o_tuple[index], original.root), update, True)
            else:
                _tuple_item(ctx, "ADDED", _Node(u_tuple[index], update.root), original, False)
    with ctx.enter("additionalItems"):
        o_permits, o_schema = _additional(o, "additionalItems")
        u_permits, u_schema = _additional(u, "additionalItems")
        if o_permits != u_permits:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if o_permits else "ADDITIONAL_ITEMS_ADDED")
        elif o_schema is None and u_schema is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif u_schema is None and o_schema is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        elif o_schema is not None:
            _compare(ctx, _Node(o_schema, original.root), _Node(u_schema, update.root))
    _bounds(ctx, o, u, "maxItems", "MAX_ITEMS", "INCREASED")
    _bounds(ctx, o, u, "minItems", "MIN_ITEMS", "INCREASED")
    if bool(o.get("uniqueItems")) != bool(u.get("uniqueItems")):
        ctx.add(
            "UNIQUE_ITEMS_REMOVED" if o.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", "uniqueItems"
        )


def _tuple_item(ctx: _Context, change: str, item: _Node, other: _Node, removed: bool) -> None:
    permits, schema = _additional(other.value, "additionalItems")
    if permits and schema is None:
        if removed:
            ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        elif _kind(item.value) == "empty":
            ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
    elif schema is not None:
        sub = ctx.sub()
        pair = (item, _Node(schema, other.root)) if removed else (_Node(schema, other.root), item)
        _compare(sub, *pair)
        ctx.diffs.extend(sub.diffs)
        covered = "IS" if sub.compatible() else "NOT"
        ctx.add(f"ITEM_{change}_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif removed:
        kind = "WITH_FALSE_" if item.value is False else ""
        ctx.add(f"ITEM_{kind}REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


def reader_errors(reader: Any, writer: Any) -> list[Problem]:
    """Why `reader` cannot read documents valid under `writer` ([] when it can)."""
    if not isinstance(reader, JsonSchema) or not isinstance(writer, JsonSchema):
        raise TypeError("JSON schemas compare only with JSON schemas")
    # One resolver over both schemas' references: a $ref resolves in its own document.
    merged = JsonSchema(reader.document, writer.references + reader.references, reader.text)
    ctx = _Context(_Resolver(merged), [], set(), [MAX_COMPARISONS])
    try:
        _compare(
            ctx, _Node(writer.document, writer.document), _Node(reader.document, reader.document)
        )
    except (RecursionError, _TooComplex, InvalidSchema):
        # Too deep or too many combinations to compare: refused rather than guessed.
        return [Problem("TYPE_CHANGED", describe("TYPE_CHANGED", "#/"))]
    return [
        Problem(error_type, describe(error_type, path))
        for error_type, path in ctx.diffs
        if error_type not in COMPATIBLE_CHANGES
    ]


__all__ = [
    "COMPATIBLE_CHANGES",
    "JsonSchema",
    "describe",
    "format_problem",
    "parse",
    "reader_errors",
]


parse_stored = parse  # nothing is checked on registration that a stored schema could fail
