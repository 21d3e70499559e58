"""AVRO schemas: parsing, the stored text, and Avro's reader/writer resolution rules.

Validation is Apache Avro's own parser (the `avro` package: names, unions, enum symbols,
duplicate fields). On top of it this module keeps its own small tree of the schema, because
two things have to match the Java registry byte for byte and the Python libraries render or
report them differently:

- `canonical()` is what Avro Java's `Schema.toString()` prints (the text Confluent stores
  and answers): compact JSON; keys in Java's order (`type`, `name`, `namespace` only where
  it differs from the enclosing one, `doc`, `fields`/`symbols`/`items`/`values`/`size`,
  then other attributes in the order given, then `aliases`); a named type written out once
  and by name afterwards; types defined by references written by name.
- `reader_errors()` follows Avro Java's `SchemaCompatibility` (which Confluent calls): one
  `Problem` per incompatibility, with its JSON-pointer location and Java's message text
  (type names upper case, enum symbols as `[A, B]`); the Python port of that checker keeps
  messages and locations in unordered sets, so it cannot give them per incompatibility.

`normalized()` is what Confluent stores under `normalize=true`: the same rendering with
other attributes sorted (a valid logical type's attributes first), aliases sorted and empty
docs of named types dropped.

Descriptions carry `%s` where Confluent puts the words "new"/"old" (first: the reader,
second: the writer); `compatibility.check` fills them in.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import avro.errors
import avro.name
import avro.schema

from minibroker.schema_registry.schemas import InvalidSchema, Problem

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")
_TYPE_NAMES = frozenset((*PRIMITIVES, "record", "enum", "array", "map", "union", "fixed"))
# Attributes with a meaning of their own; everything else is kept as a property.
_SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))


@dataclass(eq=False)
class Field:
    name: str
    type: Node
    doc: str | None = None
    has_default: bool = False
    default: Any = None
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Node:
    """One Avro schema; named types are shared objects, so recursion is a cycle."""

    type: str  # a primitive name, record, enum, fixed, array, map or union
    props: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    namespace: str | None = None
    doc: str | None = None
    aliases: list[str] = field(default_factory=list)  # full names
    is_error: bool = False
    fields: list[Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    items: Node | None = None  # array items / map values
    branches: list[Node] = field(default_factory=list)

    @property
    def fullname(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


class _Parser:
    """Builds Nodes from JSON with Avro's namespace rules (Java's `Schema.parse`)."""

    def __init__(self, validate_defaults: bool) -> None:
        self.names: dict[str, Node] = {}
        self.validate_defaults = validate_defaults

    def parse(self, value: Any, space: str | None) -> Node:
        if isinstance(value, str):
            if value in PRIMITIVES:
                return Node(value)
            return self._lookup(value, space)
        if isinstance(value, list):
            branches = [self.parse(item, space) for item in value]
            return Node("union", branches=branches)
        if not isinstance(value, dict):
            raise InvalidSchema(f"Schema not yet supported: {_json(value)}")
        kind = value.get("type")
        if not isinstance(kind, str):
            raise InvalidSchema(f"No type: {_json(value)}")
        if kind in PRIMITIVES:
            return Node(kind, props=_props(value, _SCHEMA_RESERVED))
        if kind in NAMED:
            return self._named(kind, value, space)
        if kind == "array":
            if "items" not in value:
                raise InvalidSchema(f"Array has no items type: {_json(value)}")
            items = self.parse(value["items"], space)
            return Node("array", props=_props(value, _SCHEMA_RESERVED), items=items)
        if kind == "map":
            if "values" not in value:
                raise InvalidSchema(f"Map has no values type: {_json(value)}")
            values = self.parse(value["values"], space)
            return Node("map", props=_props(value, _SCHEMA_RESERVED), items=values)
        # A name used as "type": a reference to a named type defined earlier.
        return self._lookup(kind, space)

    def _lookup(self, name: str, space: str | None) -> Node:
        full = name if "." in name or not space else f"{space}.{name}"
        found = self.names.get(full) or self.names.get(name)
        if found is None:
            raise InvalidSchema(f'Undefined name: "{name}"')
        return found

    def _named(self, kind: str, value: dict[str, Any], space: str | None) -> Node:
        raw_name = value.get("name")
        if not isinstance(raw_name, str):
            raise InvalidSchema(f"No name in schema: {_json(value)}")
        namespace: str | None
        if "." in raw_name:
            namespace, _, name = raw_name.rpartition(".")
        else:
            given = value.get("namespace", space)
            namespace, name = (given if isinstance(given, str) and given else None), raw_name
        reserved = _ENUM_RESERVED if kind == "enum" else _SCHEMA_RESERVED
        node = Node(
            "record" if kind == "error" else kind,
            props=_props(value, reserved),
            name=name,
            namespace=namespace or None,
            doc=value.get("doc") if isinstance(value.get("doc"), str) else None,
            is_error=kind == "error",
        )
        node.aliases = [_qualify(a, node.namespace) for a in value.get("aliases") or []]
        if node.fullname in self.names:
            raise InvalidSchema(f"Can't redefine: {node.fullname}")
        self.names[node.fullname] = node
        if kind == "enum":
            node.symbols = list(value.get("symbols") or [])
            default = value.get("default")
            node.enum_default = default if isinstance(default, str) else None
        elif kind == "fixed":
            node.size = int(value.get("size", 0))
        else:
            for spec in value.get("fields") or []:
                node.fields.append(self._field(spec, node))
        return node

    def _field(self, spec: dict[str, Any], record: Node) -> Field:
        field_type = self.parse(spec.get("type"), record.namespace)
        result = Field(
            name=spec["name"],
            type=field_type,
            doc=spec.get("doc") if isinstance(spec.get("doc"), str) else None,
            has_default="default" in spec,
            default=spec.get("default"),
            order=str(spec.get("order", "ascending")).lower(),
            aliases=list(spec.get("aliases") or []),
            props=_props(spec, _FIELD_RESERVED),
        )
        if (
            self.validate_defaults
            and result.has_default
            and not _valid_default(field_type, result.default)
        ):
            raise InvalidSchema(
                f"Invalid default for field {result.name}: {_json(result.default)} "
                f"not a {_Writer(set()).render(field_type)}"
            )
        return result


# Logical types Avro Java recognises, by the types they may annotate.
_LOGICAL_TYPES = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}


def _logical_keys(node: Node, props: dict[str, Any]) -> tuple[str, ...]:
    logical = props.get("logicalType")
    if not isinstance(logical, str) or node.type not in _LOGICAL_TYPES.get(logical, ()):
        return ()
    if logical != "decimal":
        return ("logicalType",)
    keys = ["logicalType"]
    if isinstance(props.get("precision"), int):
        keys.append("precision")
        if props.get("scale"):
            keys.append("scale")
    return tuple(keys)


def _props(value: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in reserved}


def _qualify(name: str, space: str | None) -> str:
    return name if "." in name or not space else f"{space}.{name}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _valid_default(node: Node, value: Any) -> bool:
    """Java's `Schema.isValidDefault` (a union's default matches its first branch)."""
    kind = node.type
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return (isinstance(value, int | float) and not isinstance(value, bool)) or (
            isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity")
        )
    if kind in ("bytes", "string", "fixed"):
        return isinstance(value, str)
    if kind == "enum":
        return isinstance(value, str) and value in node.symbols
    if kind == "array":
        assert node.items is not None
        items = node.items
        return isinstance(value, list) and all(_valid_default(items, v) for v in value)
    if kind == "map":
        assert node.items is not None
        values = node.items
        return isinstance(value, dict) and all(_valid_default(values, v) for v in value.values())
    if kind == "union":
        return bool(node.branches) and _valid_default(node.branches[0], value)
    if kind == "record":
        if not isinstance(value, dict):
            return False
        return all(
            (f.name in value and _valid_default(f.type, value[f.name])) or f.has_default
            for f in node.fields
        )
    return False


class _Writer:
    """Avro Java's `Schema.toJson`: the compact text `Schema.toString()` prints."""

    def __init__(self, known: set[str], sort_extras: bool = False) -> None:
        self.known = set(known)  # full names already written (or defined by references)
        self.space: str | None = None
        self.sort_extras = sort_extras

    def render(self, node: Node) -> str:
        return _json(self.tree(node))

    def tree(self, node: Node) -> Any:
        if node.type in PRIMITIVES:
            if not node.props:
                return node.type
            return {"type": node.type, **self._extras(node.props, node)}
        if node.type == "union":
            return [self.tree(b) for b in node.branches]
        if node.type in ("array", "map"):
            assert node.items is not None
            key = "items" if node.type == "array" else "values"
            extras = self._extras(node.props, node)
            return {"type": node.type, key: self.tree(node.items), **extras}
        if node.fullname in self.known:
            return self._name_ref(node)
        self.known.add(node.fullname)
        out: dict[str, Any] = {"type": "error" if node.is_error else node.type}
        out["name"] = node.name
        if node.namespace is not None:
            if node.namespace != self.space:
                out["namespace"] = node.namespace
        elif self.space is not None:
            out["namespace"] = ""
        saved, self.space = self.space, node.namespace
        try:
            if node.doc is not None and not (self.sort_extras and node.doc == ""):
                out["doc"] = node.doc
            if node.type == "record":
                out["fields"] = [self._field(f) for f in node.fields]
            elif node.type == "enum":
                out["symbols"] = list(node.symbols)
                if node.enum_default is not None:
                    out["default"] = node.enum_default
            else:
                out["size"] = node.size
            out.update(self._extras(node.props, node))
            if node.aliases:
                aliases = [self._relative(a, node.namespace) for a in node.aliases]
                out["aliases"] = sorted(aliases) if self.sort_extras else aliases
        finally:
            self.space = saved
        return out

    def _field(self, f: Field) -> dict[str, Any]:
        out: dict[str, Any] = {"name": f.name, "type": self.tree(f.type)}
        if f.doc is not None:
            out["doc"] = f.doc
        if f.has_default:
            out["default"] = f.default
        if f.order != "ascending":
            out["order"] = f.order
        if f.aliases:
            out["aliases"] = sorted(f.aliases) if self.sort_extras else list(f.aliases)
        out.update(self._extras(f.props))
        return out

    def _extras(self, props: dict[str, Any], node: Node | None = None) -> dict[str, Any]:
        """Other attributes: as given; normalized, a valid logical type's attributes first
        and the rest sorted (Confluent's normalize writes them so)."""
        if not self.sort_extras:
            return props
        first = _logical_keys(node, props) if node is not None else ()
        out = {k: props[k] for k in first}
        out.update((k, v) for k, v in sorted(props.items()) if k not in out)
        return out

    def _name_ref(self, node: Node) -> str:
        # Java writes the full name outside the current namespace, and for names that are
        # also type names.
        if node.namespace is not None and node.namespace == self.space:
            return node.name if node.name not in _TYPE_NAMES else node.fullname
        return node.fullname

    @staticmethod
    def _relative(full: str, space: str | None) -> str:
        namespace, _, name = full.rpartition(".")
        return name if space and namespace == space else full


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """A parsed AVRO schema; `root` is the tree the checks walk."""

    root: Node
    reference_names: frozenset[str]
    text: str
    normalized_text: str
    schema_type: str = "AVRO"

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> AvroSchema:
        return AvroSchema(
            self.root, self.reference_names, self.normalized_text, self.normalized_text
        )

    def formatted(self, fmt: str | None) -> str:
        if fmt == "resolved":
            return _Writer(set()).render(self.root)
        return self.text


def parse(
    text: str, references: Sequence[tuple[str, str]] = (), *, validate_defaults: bool = True
) -> AvroSchema:
    """Parse an AVRO schema whose references (name, text) are given dependencies first.

    `validate_defaults` (field defaults must match their types, a union's its first branch)
    is what Confluent does for a schema being registered; the Java registry parses schemas
    it reads back from `_schemas` with it off."""
    documents = []
    for ref_name, ref_text in references:
        documents.append((_load(ref_text, f"reference {ref_name}"), True))
    documents.append((_load(text, "schema"), False))

    # Apache Avro's parser validates (names, unions, symbols, duplicates) ...
    avro_names = avro.name.Names()
    for document, _ in documents:
        try:
            with warnings.catch_warnings():
                # Unknown or invalid logical types are kept as attributes, as in Java;
                # the library's warnings about them would only fill the broker's log.
                warnings.simplefilter("ignore")
                avro.schema.make_avsc_object(document, avro_names)
        except (avro.errors.AvroException, ValueError, TypeError, KeyError) as exc:
            raise InvalidSchema(str(exc) or type(exc).__name__) from exc
        except RecursionError as exc:
            raise InvalidSchema("Schema nested too deeply") from exc
    # ... and the tree below keeps what the registry renders and compares.
    parser = _Parser(validate_defaults)
    reference_names: set[str] = set()
    root: Node | None = None
    try:
        for document, is_reference in documents:
            node = parser.parse(document, None)
            if is_reference:
                if node.type in ("record", "enum", "fixed"):
                    reference_names.add(node.fullname)
            else:
                root = node
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, InvalidSchema):
            raise
        raise InvalidSchema(f"Invalid schema: {exc}") from exc
    except RecursionError as exc:
        raise InvalidSchema("Schema nested too deeply") from exc
    assert root is not None
    try:
        canonical = _Writer(reference_names).render(root)
        normalized = _Writer(reference_names, sort_extras=True).render(root)
    except RecursionError as exc:
        raise InvalidSchema("Schema nested too deeply") from exc
    return AvroSchema(root, frozenset(reference_names), canonical, normalized)


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid {what}: not JSON ({exc})") from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"unexpected {name}")


# --- reader/writer compatibility (Avro Java's SchemaCompatibility) -------------------------

_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": (
        "The size of FIXED type field at path '{path}' in the %s schema does not match "
        "with the %s schema"
    ),
    "TYPE_MISMATCH": (
        "The type (path '{path}') of a field in the %s schema does not match with the %s schema"
    ),
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": (
        "The %s schema is missing enum symbols '{info}' at path '{path}' in the %s schema"
    ),
    "MISSING_UNION_BRANCH": (
        "The %s schema is missing a type inside a union field at path '{path}' in the %s schema"
    ),
    "READER_FIELD_MISSING_DEFAULT_VALUE": (
        "The field '{info}' at path '{path}' in the %s schema has no default value and is "
        "missing in the %s schema"
    ),
}
_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}


def _problem(error_type: str, info: str, location: list[str]) -> Problem:
    path = "/" + "/".join(location)
    description = _DESCRIPTIONS[error_type].format(path=path, info=info)
    return Problem(error_type, description, info)


class _Checker:
    def __init__(self) -> None:
        # (reader, writer) pairs: None while in progress (a recursive type reads itself).
        self.memo: dict[tuple[int, int], list[Problem] | None] = {}

    def compat(self, reader: Node, writer: Node, location: list[str]) -> list[Problem]:
        key = (id(reader), id(writer))
        if key in self.memo:
            return self.memo[key] or []
        self.memo[key] = None
        result = self._calculate(reader, writer, location)
        self.memo[key] = result
        return result

    def _calculate(self, reader: Node, writer: Node, loc: list[str]) -> list[Problem]:
        if reader.type == writer.type:
            kind = reader.type
            if kind in PRIMITIVES:
                return []
            if kind in ("array", "map"):
                assert reader.items is not None and writer.items is not None
                token = "items" if kind == "array" else "values"
                return self.compat(reader.items, writer.items, [*loc, token])
            if kind == "fixed":
                out = self._names(reader, writer, loc)
                if reader.size != writer.size:
                    info = f"expected: {writer.size}, found: {reader.size}"
                    out.append(_problem("FIXED_SIZE_MISMATCH", info, [*loc, "size"]))
                return out
            if kind == "enum":
                out = self._names(reader, writer, loc)
                missing = sorted(set(writer.symbols) - set(reader.symbols))
                default_ok = reader.enum_default is not None and (
                    reader.enum_default in reader.symbols
                )
                if missing and not default_ok:
                    info = "[" + ", ".join(missing) + "]"
                    out.append(_problem("MISSING_ENUM_SYMBOLS", info, [*loc, "symbols"]))
                return out
            if kind == "record":
                return self._names(reader, writer, loc) + self._fields(reader, writer, loc)
            # Both unions: every writer branch must be readable.
            out = []
            for index, branch in enumerate(writer.branches):
                if self.compat(reader, branch, loc):
                    info = f"reader union lacking writer type: {branch.type.upper()}"
                    out.append(_problem("MISSING_UNION_BRANCH", info, [*loc, str(index)]))
            return out
        if writer.type == "union":
            out = []
            for branch in writer.branches:
                out.extend(self.compat(reader, branch, loc))
            return out
        if reader.type == "union":
            if any(not self.compat(branch, writer, loc) for branch in reader.branches):
                return []
            info = f"reader union lacking writer type: {writer.type.upper()}"
            return [_problem("MISSING_UNION_BRANCH", info, loc)]
        if writer.type in _PROMOTIONS.get(reader.type, ()):
            return []
        info = (
            f"reader type: {reader.type.upper()} not compatible with writer type: "
            f"{writer.type.upper()}"
        )
        return [_problem("TYPE_MISMATCH", info, loc)]

    @staticmethod
    def _names(reader: Node, writer: Node, loc: list[str]) -> list[Problem]:
        # Java compares the unqualified names, or the reader's aliases with the full name.
        if reader.name == writer.name or writer.fullname in reader.aliases:
            return []
        return [_problem("NAME_MISMATCH", f"expected: {writer.fullname}", [*loc, "name"])]

    def _fields(self, reader: Node, writer: Node, loc: list[str]) -> list[Problem]:
        out: list[Problem] = []
        by_name = {f.name: f for f in writer.fields}
        for index, reader_field in enumerate(reader.fields):
            here = [*loc, "fields", str(index)]
            writer_field = by_name.get(reader_field.name)
            if writer_field is None:
                for alias in reader_field.aliases:
                    if alias in by_name:
                        writer_field = by_name[alias]
                        break
            if writer_field is not None:
                out.extend(self.compat(reader_field.type, writer_field.type, [*here, "type"]))
            elif not reader_field.has_default:
                if reader_field.type.type == "enum" and reader_field.type.enum_default is not None:
                    # Java checks the enum against the writer record itself here.
                    out.extend(self.compat(reader_field.type, writer, [*here, "type"]))
                else:
                    out.append(
                        _problem("READER_FIELD_MISSING_DEFAULT_VALUE", reader_field.name, here)
                    )
        return out


def reader_errors(reader: Any, writer: Any) -> list[Problem]:
    """Why `reader` cannot read data written with `writer` ([] when it can)."""
    if not isinstance(reader, AvroSchema) or not isinstance(writer, AvroSchema):
        raise TypeError("AVRO schemas compare only with AVRO schemas")
    try:
        return _Checker().compat(reader.root, writer.root, [])
    except RecursionError:
        # Only schemas nested hundreds deep get here; refuse rather than guess.
        info = "schema nested too deeply to compare"
        return [Problem("TYPE_MISMATCH", _DESCRIPTIONS["TYPE_MISMATCH"].format(path="/"), info)]


__all__ = ["AvroSchema", "parse", "reader_errors"]


def parse_stored(text: str, references: Sequence[tuple[str, str]] = ()) -> AvroSchema:
    """A stored schema: field defaults are not checked again, as the Java registry reads them."""
    return parse(text, references, validate_defaults=False)
