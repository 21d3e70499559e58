"""PROTOBUF schemas of the registry: parsing, canonical and normalized text, compatibility.

Sans-IO. A schema arrives in either form the Confluent registry accepts: `.proto` text, or
the base64 of a serialized `FileDescriptorProto` (what confluent-kafka's ProtobufSerializer
registers). Either way it is kept as a `FileDescriptorProto`; text is parsed with
proto-schema-parser and the descriptor is built here (type names resolved by protobuf's
scoping rules, map fields turned into their entry messages, proto3 `optional` into synthetic
oneofs), then checked by loading it into a protobuf `DescriptorPool` with its imports.

References are imports: `(import path, schema text)` pairs, dependencies first. The
well-known `google/protobuf/*.proto`, `google/type/*.proto` and `confluent/*.proto` files
resolve without references, as in Confluent's registry.

`canonical()` renders the descriptor back to `.proto` text in the layout Confluent's
registry answers (two-space indents; fields, then oneofs, then nested messages, then
nested enums); type names are written fully qualified. `normalized()` renders the way
Confluent's `normalize=true` does: options sorted by name, fields and enum constants by
number, oneofs by their first field, reserved ranges one per entry and sorted, imports
sorted, no `syntax` line for proto2; messages keep their order (message indexes in the wire
format count on it). `formatted("serialized")` is the base64 descriptor whose dependencies
are the import paths, which is what confluent-kafka's deserializer asks for.

Custom options of well-known extensions (Confluent's `confluent.field_meta` and friends) are
set as real extensions, so deserializers see their tags; other custom options are kept as
protobuf's uninterpreted options. Groups and editions are refused. `.proto` text longer than
`MAX_TEXT_CHARS` (1 MiB) is refused too: its parser is pure Python.

`reader_errors(reader, writer)` follows Confluent's Protobuf diff: fields are matched by
number (names are not checked), scalar kinds in one group are interchangeable
(int32/uint32/int64/uint64/bool and enums; sint32/sint64; fixed32/sfixed32;
fixed64/sfixed64; string/bytes), labels count only for scalars, and a field whose message
type comes from an import is compared with the other side's type (types declared in the
schema itself are compared where they are declared). Each problem carries Confluent's
error type and its description, whose two `%s` stand for the reader's and the writer's
schema ("new"/"old" as the compatibility level decides); `format_problem` words a verbose
message as Confluent does for Protobuf.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeAlias

from google.protobuf import descriptor_pb2, descriptor_pool  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped]
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from minibroker.schema_registry.schemas import InvalidSchema, Problem

SCHEMA_TYPE = "PROTOBUF"
# protobuf ships no type stubs here: its classes are Any to the type checker.
_DP: TypeAlias = descriptor_pb2.DescriptorProto
_EDP: TypeAlias = descriptor_pb2.EnumDescriptorProto
_FDP: TypeAlias = descriptor_pb2.FieldDescriptorProto
_FileDP: TypeAlias = descriptor_pb2.FileDescriptorProto
MAIN_FILE_NAME = "default"
# `.proto` text is parsed by a pure-Python ANTLR parser at about 40 KiB/s of CPU; longer
# text is refused rather than hold the process for minutes. Base64 descriptors (parsed by
# protobuf's own C code) are not limited here.
MAX_TEXT_CHARS = 1024 * 1024
MAX_FIELD_NUMBER = 536870911  # 2^29 - 1

_SCALARS: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "uint32": _FDP.TYPE_UINT32,
    "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "sint32": _FDP.TYPE_SINT32,
    "sint64": _FDP.TYPE_SINT64,
}
_SCALAR_NAMES = {number: name for name, number in _SCALARS.items()}

# Modules whose descriptors stand in for the imports that need no reference.
_BUILTIN_MODULES = (
    "google.protobuf.any_pb2",
    "google.protobuf.api_pb2",
    "google.protobuf.descriptor_pb2",
    "google.protobuf.duration_pb2",
    "google.protobuf.empty_pb2",
    "google.protobuf.field_mask_pb2",
    "google.protobuf.source_context_pb2",
    "google.protobuf.struct_pb2",
    "google.protobuf.timestamp_pb2",
    "google.protobuf.type_pb2",
    "google.protobuf.wrappers_pb2",
    "google.type.calendar_period_pb2",
    "google.type.color_pb2",
    "google.type.date_pb2",
    "google.type.datetime_pb2",
    "google.type.dayofweek_pb2",
    "google.type.decimal_pb2",
    "google.type.expr_pb2",
    "google.type.fraction_pb2",
    "google.type.interval_pb2",
    "google.type.latlng_pb2",
    "google.type.money_pb2",
    "google.type.month_pb2",
    "google.type.phone_number_pb2",
    "google.type.postal_address_pb2",
    "google.type.quaternion_pb2",
    "google.type.timeofday_pb2",
    "confluent_kafka.schema_registry.confluent.meta_pb2",
    "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
    "confluent_kafka.schema_registry.confluent.type.variant_pb2",
)


def is_builtin_import(path: str) -> bool:
    """Imports Confluent's registry resolves without a reference."""
    return path.startswith(("google/protobuf/", "google/type/", "confluent/"))


@cache
def _builtin_files() -> dict[str, _FileDP]:
    files: dict[str, _FileDP] = {}
    for module_name in _BUILTIN_MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # an optional package is absent or broken
            continue
        proto = _FileDP.FromString(module.DESCRIPTOR.serialized_pb)
        files[proto.name] = proto
    return files


# ---------------------------------------------------------------------------------------------
# The parsed schema


@dataclass(frozen=True, eq=False)
class ProtobufSchema:
    """A PROTOBUF schema: its file descriptor and the files it imports, by import path."""

    file: _FileDP
    dependencies: dict[str, _FileDP]
    is_normalized: bool = False
    schema_type: str = SCHEMA_TYPE
    _text: list[str] = field(default_factory=list, repr=False)

    def canonical(self) -> str:
        if not self._text:
            self._text.append(render(self.file, normalize=self.is_normalized))
        return self._text[0]

    def normalized(self) -> ProtobufSchema:
        if self.is_normalized:
            return self
        return ProtobufSchema(self.file, self.dependencies, is_normalized=True)

    def formatted(self, fmt: str | None) -> str:
        if fmt is not None and fmt.strip().lower() == "serialized":
            return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode()
        # Unknown formats answer the canonical text, as Confluent does.
        return self.canonical()


def parse(text: str, references: Sequence[tuple[str, str]]) -> ProtobufSchema:
    """Parse `.proto` text or a base64 FileDescriptorProto; references are (import, text)."""
    dependencies: dict[str, _FileDP] = {}
    try:
        for name, ref_text in references:
            where = f"reference {name!r}: "
            dependencies[name] = _parse_file(ref_text, name, dependencies, where)
        main = _parse_file(text, MAIN_FILE_NAME, dependencies, "")
    except RecursionError:
        raise InvalidSchema("the schema nests too deeply") from None
    used = _closure(main, dependencies)
    return ProtobufSchema(main, used)


def _parse_file(text: str, name: str, known: dict[str, _FileDP], where: str) -> _FileDP:
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema(f"{where}empty PROTOBUF schema")
    proto = _from_base64(text)
    try:
        if proto is None and len(text) > MAX_TEXT_CHARS:
            raise InvalidSchema(f".proto text longer than {MAX_TEXT_CHARS} characters")
        if proto is None:
            proto = _Builder(name, known).build(_parse_text(text))
        else:
            proto.name = name
        _validate(proto, known)
    except InvalidSchema as exc:
        raise InvalidSchema(f"{where}{exc}") from None
    return proto


def _from_base64(text: str) -> _FileDP | None:
    """The descriptor when `text` is base64 of one; None when it reads as `.proto` text."""
    compact = "".join(text.split())
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    proto = _FileDP()
    try:
        proto.ParseFromString(data)
    except DecodeError:
        return None
    if not (proto.message_type or proto.enum_type or proto.service or proto.package):
        return None
    return proto


def _lookup(path: str, known: dict[str, _FileDP]) -> _FileDP | None:
    """An imported file: a reference, else a well-known file."""
    found = known.get(path)
    if found is None and is_builtin_import(path):
        found = _builtin_files().get(path)
    return found


def _closure(main: _FileDP, known: dict[str, _FileDP]) -> dict[str, _FileDP]:
    """Every file `main` imports, directly or not, builtins included."""
    found: dict[str, _FileDP] = {}
    pending = list(main.dependency)
    while pending:
        path = pending.pop()
        if path in found:
            continue
        dep = _lookup(path, known)
        if dep is None:
            continue
        found[path] = dep
        pending.extend(dep.dependency)
    return found


def _validate(proto: _FileDP, known: dict[str, _FileDP]) -> None:
    """Load the file and its imports into a descriptor pool: protobuf's own checks."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: _FileDP, chain: tuple[str, ...]) -> None:
        for path in file.dependency:
            if path in added:
                continue
            if path in chain:
                raise InvalidSchema(f"import cycle through {path!r}")
            dep = _lookup(path, known)
            if dep is None:
                raise InvalidSchema(f"import {path!r} is neither a reference nor well known")
            add(dep, (*chain, path))
        if file.name not in added:
            added.add(file.name)
            try:
                pool.Add(file)
            except (TypeError, ValueError, KeyError) as exc:
                raise InvalidSchema(str(exc)) from None

    add(proto, (proto.name,))


# ---------------------------------------------------------------------------------------------
# Text to descriptor


def _raise_syntax_error(line: int, column: int, message: str) -> None:
    raise InvalidSchema(f"line {line}:{column}: {message}")


def _parse_text(text: str) -> ast.File:
    from antlr4.error.ErrorListener import ErrorListener  # type: ignore[import-untyped]

    class _Raise(ErrorListener):  # type: ignore[misc]
        def syntaxError(
            self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any
        ) -> None:
            _raise_syntax_error(line, column, msg)

    def quiet(target: Any) -> None:
        target.removeErrorListeners()
        target.addErrorListener(_Raise())

    try:
        return Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
    except InvalidSchema:
        raise
    except Exception as exc:  # the generated parser's own failures
        raise InvalidSchema(f"unparsable .proto text: {exc}") from None


def _json_name(name: str) -> str:
    """protoc's default JSON name: underscores dropped, the next letter upper-cased."""
    out: list[str] = []
    upper = False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def _map_entry_name(field_name: str) -> str:
    parts = field_name.split("_")
    return "".join(part[:1].upper() + part[1:] for part in parts) + "Entry"


def _unquote(value: str) -> str:
    """A string literal's value: the parser drops the quotes but leaves escapes as written."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if "\\" not in value:
        return value
    return value.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _is_repeated(descriptor: Any) -> bool:
    repeated = getattr(descriptor, "is_repeated", None)  # protobuf 7 dropped `label`
    if repeated is not None:
        return bool(repeated)
    return bool(descriptor.label == descriptor.LABEL_REPEATED)


class _Builder:
    """Builds a FileDescriptorProto from proto-schema-parser's syntax tree."""

    def __init__(self, name: str, known: dict[str, _FileDP]) -> None:
        self.name = name
        self.known = known
        self.symbols: dict[str, str] = {}  # full name -> "message" | "enum" | "package"

    def build(self, tree: ast.File) -> _FileDP:
        if tree.edition is not None:
            raise InvalidSchema("editions are not supported; use syntax proto2 or proto3")
        syntax = _unquote(tree.syntax) if tree.syntax is not None else ""
        if syntax not in ("", "proto2", "proto3"):
            raise InvalidSchema(f"unknown syntax {syntax!r}")
        proto = _FileDP(name=self.name)
        if syntax:
            proto.syntax = syntax
        self.proto3 = syntax == "proto3"
        elements = tree.file_elements
        packages = [e.name for e in elements if isinstance(e, ast.Package)]
        if len(packages) > 1:
            raise InvalidSchema("multiple package declarations")
        package = packages[0] if packages else ""
        if package:
            proto.package = package
        for element in elements:
            if isinstance(element, ast.Import):
                path = _unquote(element.name)
                if element.public:
                    proto.public_dependency.append(len(proto.dependency))
                if element.weak:
                    proto.weak_dependency.append(len(proto.dependency))
                proto.dependency.append(path)
        for path in proto.dependency:
            if _lookup(path, self.known) is None:
                raise InvalidSchema(f"import {path!r} is neither a reference nor well known")
        self._collect_symbols(proto, package, elements)
        scope = package
        for element in elements:
            if isinstance(element, ast.Message):
                self._message(proto.message_type.add(), element, scope)
            elif isinstance(element, ast.Enum):
                self._enum(proto.enum_type.add(), element)
            elif isinstance(element, ast.Extension):
                self._extend(proto.extension, element, scope)
            elif isinstance(element, ast.Service):
                self._service(proto.service.add(), element, scope)
            elif isinstance(element, ast.Option):
                self._option(proto.options, element)
        return proto

    # -- symbols and name resolution

    def _collect_symbols(self, proto: _FileDP, package: str, elements: Iterable[Any]) -> None:
        for path in _import_closure(proto.dependency, self.known):
            dep = _lookup(path, self.known)
            if dep is not None:
                self._add_package(dep.package)
                for message in dep.message_type:
                    self._add_descriptor_symbols(_join(dep.package, message.name), message)
                for enum in dep.enum_type:
                    self.symbols[_join(dep.package, enum.name)] = "enum"
        self._add_package(package)
        self._add_tree_symbols(package, elements)

    def _add_package(self, package: str) -> None:
        parts = package.split(".") if package else []
        for i in range(1, len(parts) + 1):
            self.symbols.setdefault(".".join(parts[:i]), "package")

    def _add_descriptor_symbols(self, full: str, message: _DP) -> None:
        self.symbols[full] = "message"
        for nested in message.nested_type:
            self._add_descriptor_symbols(f"{full}.{nested.name}", nested)
        for enum in message.enum_type:
            self.symbols[f"{full}.{enum.name}"] = "enum"

    def _add_tree_symbols(self, scope: str, elements: Iterable[Any]) -> None:
        for element in elements:
            if isinstance(element, ast.Message):
                full = _join(scope, element.name)
                if self.symbols.get(full) in ("message", "enum"):
                    raise InvalidSchema(f"{full!r} is already defined")
                self.symbols[full] = "message"
                self._add_tree_symbols(full, element.elements)
            elif isinstance(element, ast.Enum):
                full = _join(scope, element.name)
                if self.symbols.get(full) in ("message", "enum"):
                    raise InvalidSchema(f"{full!r} is already defined")
                self.symbols[full] = "enum"

    def _resolve(self, name: str, scope: str) -> tuple[str, str]:
        """(".full.Name", "message" | "enum") by protobuf's scoping rules."""
        if name.startswith("."):
            kind = self.symbols.get(name[1:])
            if kind in ("message", "enum"):
                return name, kind
            raise InvalidSchema(f"type {name!r} is not defined")
        first = name.split(".")[0]
        parts = scope.split(".") if scope else []
        for i in range(len(parts), -1, -1):
            prefix = ".".join(parts[:i])
            if _join(prefix, first) in self.symbols:
                full = _join(prefix, name)
                kind = self.symbols.get(full)
                if kind in ("message", "enum"):
                    return "." + full, kind
        raise InvalidSchema(f"type {name!r} is not defined in scope {scope or '(top)'}")

    # -- declarations

    def _message(self, out: _DP, message: ast.Message, scope: str) -> None:
        out.name = message.name
        full = _join(scope, message.name)
        synthetic: list[str] = []
        for element in message.elements:
            if isinstance(element, ast.Field):
                self._field(out.field.add(), element, full, synthetic)
            elif isinstance(element, ast.MapField):
                self._map_field(out, element, full)
            elif isinstance(element, ast.OneOf):
                index = len(out.oneof_decl)
                oneof = out.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        if member.cardinality is not None:
                            raise InvalidSchema(
                                f"field {member.name!r} in oneof {element.name!r} has a label"
                            )
                        target = out.field.add()
                        self._field(target, member, full, synthetic)
                        target.oneof_index = index
                    elif isinstance(member, ast.Option):
                        self._option(oneof.options, member)
                    elif isinstance(member, ast.Group):
                        raise InvalidSchema("groups are not supported")
            elif isinstance(element, ast.Message):
                self._message(out.nested_type.add(), element, full)
            elif isinstance(element, ast.Enum):
                self._enum(out.enum_type.add(), element)
            elif isinstance(element, ast.Reserved):
                for text in element.ranges:
                    start, end = _range(text, MAX_FIELD_NUMBER)
                    out.reserved_range.add(start=start, end=end + 1)
                out.reserved_name.extend(_unquote(n) for n in element.names)
            elif isinstance(element, ast.ExtensionRange):
                for text in element.ranges:
                    start, end = _range(text, MAX_FIELD_NUMBER)
                    ext_range = out.extension_range.add(start=start, end=end + 1)
                    for option in element.options:
                        self._option(ext_range.options, option)
            elif isinstance(element, ast.Extension):
                self._extend(out.extension, element, full)
            elif isinstance(element, ast.Option):
                self._option(out.options, element)
            elif isinstance(element, ast.Group):
                raise InvalidSchema("groups are not supported")
        # proto3 optional fields get synthetic oneofs, after the declared ones.
        for field_name in synthetic:
            target = next(f for f in out.field if f.name == field_name)
            target.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=_synthetic_oneof_name(field_name, out))

    def _field(self, out: _FDP, node: ast.Field, scope: str, synthetic: list[str]) -> None:
        out.name = node.name
        out.number = node.number
        out.json_name = _json_name(node.name)
        card = node.cardinality
        if card == ast.FieldCardinality.REPEATED:
            out.label = _FDP.LABEL_REPEATED
        elif card == ast.FieldCardinality.REQUIRED:
            if self.proto3:
                raise InvalidSchema(f"required field {node.name!r} is not allowed in proto3")
            out.label = _FDP.LABEL_REQUIRED
        else:
            out.label = _FDP.LABEL_OPTIONAL
            if card == ast.FieldCardinality.OPTIONAL and self.proto3:
                out.proto3_optional = True
                synthetic.append(node.name)
        self._set_type(out, node.type, scope)
        for option in node.options:
            self._field_option(out, option)

    def _set_type(self, out: _FDP, type_name: str, scope: str) -> None:
        if type_name in _SCALARS:
            out.type = _SCALARS[type_name]  # type: ignore[assignment]
            return
        full, kind = self._resolve(type_name, scope)
        out.type_name = full
        out.type = _FDP.TYPE_MESSAGE if kind == "message" else _FDP.TYPE_ENUM

    def _field_option(self, out: _FDP, option: ast.Option) -> None:
        if option.name == "default":
            if out.type == _FDP.TYPE_BYTES and isinstance(option.value, str):
                out.default_value = option.value  # descriptors keep bytes C-escaped
            else:
                out.default_value = _default_text(option.value)
        elif option.name == "json_name":
            out.json_name = str(
                option.value if not isinstance(option.value, str) else _unquote(option.value)
            )
        else:
            self._option(out.options, option)

    def _map_field(self, out: _DP, node: ast.MapField, scope: str) -> None:
        entry = out.nested_type.add(name=_map_entry_name(node.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL, json_name="key")
        self._set_type(key, node.key_type, scope)
        value = entry.field.add(
            name="value", number=2, label=_FDP.LABEL_OPTIONAL, json_name="value"
        )
        self._set_type(value, node.value_type, scope)
        target = out.field.add(
            name=node.name,
            number=node.number,
            label=_FDP.LABEL_REPEATED,
            type=_FDP.TYPE_MESSAGE,
            type_name="." + _join(scope, entry.name),
            json_name=_json_name(node.name),
        )
        for option in node.options:
            self._field_option(target, option)

    def _enum(self, out: _EDP, node: ast.Enum) -> None:
        out.name = node.name
        for element in node.elements:
            if isinstance(element, ast.EnumValue):
                value = out.value.add(name=element.name, number=element.number)
                for option in element.options:
                    self._option(value.options, option)
            elif isinstance(element, ast.EnumReserved):
                for text in element.ranges:
                    start, end = _range(text, 2147483647)
                    out.reserved_range.add(start=start, end=end)  # inclusive in enums
                out.reserved_name.extend(_unquote(n) for n in element.names)
            elif isinstance(element, ast.Option):
                self._option(out.options, element)

    def _extend(self, out: Any, node: ast.Extension, scope: str) -> None:
        extendee, kind = self._resolve(node.typeName, scope)
        if kind != "message":
            raise InvalidSchema(f"cannot extend the enum {node.typeName!r}")
        for element in node.elements:
            if isinstance(element, ast.Field):
                target = out.add()
                self._field(target, element, scope, [])
                target.extendee = extendee
                target.ClearField("proto3_optional")
            elif isinstance(element, ast.Group):
                raise InvalidSchema("groups are not supported")

    def _service(self, out: descriptor_pb2.ServiceDescriptorProto, node: Any, scope: str) -> None:
        out.name = node.name
        for element in node.elements:
            if isinstance(element, ast.Method):
                method = out.method.add(name=element.name)
                method.input_type = self._resolve(element.input_type.type, scope)[0]
                method.output_type = self._resolve(element.output_type.type, scope)[0]
                if element.input_type.stream:
                    method.client_streaming = True
                if element.output_type.stream:
                    method.server_streaming = True
                for option in element.elements:
                    if isinstance(option, ast.Option):
                        self._option(method.options, option)
            elif isinstance(element, ast.Option):
                self._option(out.options, element)

    def _option(self, options: Message, option: ast.Option) -> None:
        """A standard option on its typed field; a custom one kept uninterpreted."""
        name = option.name
        if name.startswith("("):
            if not _set_known_extension(options, name, option.value):
                self._uninterpreted(options, name, option.value)
            return
        fields = options.DESCRIPTOR.fields_by_name
        descriptor = fields.get(name)
        if descriptor is None or name == "uninterpreted_option":
            raise InvalidSchema(f"option {name!r} is unknown")
        value = option.value
        try:
            if descriptor.message_type is not None:
                target = getattr(options, name)
                _merge_literal(target.add() if _is_repeated(descriptor) else target, value)
            elif _is_repeated(descriptor):
                getattr(options, name).append(_scalar_value(descriptor, value))
            else:
                setattr(options, name, _scalar_value(descriptor, value))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InvalidSchema(f"option {name!r} has an invalid value {value!r}") from None

    def _uninterpreted(self, options: Message, name: str, value: Any) -> None:
        kept = options.uninterpreted_option.add()  # type: ignore[attr-defined]
        for part, is_extension in _option_name_parts(name):
            kept.name.add(name_part=part, is_extension=is_extension)
        if isinstance(value, ast.MessageLiteral):
            kept.aggregate_value = _literal_text(value)
        elif isinstance(value, bool):
            kept.identifier_value = "true" if value else "false"
        elif isinstance(value, ast.Identifier):
            kept.identifier_value = value.name
        elif isinstance(value, int):
            if value >= 0:
                kept.positive_int_value = value
            else:
                kept.negative_int_value = value
        elif isinstance(value, float):
            kept.double_value = value
        else:
            kept.string_value = _unquote(str(value)).encode()


def _set_known_extension(options: Message, name: str, value: Any) -> bool:
    """Set a custom option whose extension is well known (Confluent's metadata options).

    False when the extension is not known here: the option is then kept uninterpreted.
    """
    parts = list(_option_name_parts(name))
    extension_name, is_extension = parts[0]
    if not is_extension or any(ext for _, ext in parts[1:]):
        return False
    _builtin_files()  # registers the well-known extensions with the default pool
    try:
        extension = descriptor_pool.Default().FindExtensionByName(extension_name)
    except KeyError:
        return False
    if extension.containing_type.full_name != options.DESCRIPTOR.full_name:
        return False
    path = [part for part, _ in parts[1:]]
    try:
        if not path:
            if extension.message_type is None:
                options.Extensions[extension] = _scalar_value(extension, value)  # type: ignore[attr-defined]
            else:
                target = options.Extensions[extension]  # type: ignore[attr-defined]
                _merge_literal(target, value)
            return True
        target = options.Extensions[extension]  # type: ignore[attr-defined]
        for part in path[:-1]:
            target = getattr(target, part)
        descriptor = target.DESCRIPTOR.fields_by_name[path[-1]]
        if descriptor.message_type is not None:
            _merge_literal(getattr(target, path[-1]), value)
        elif _is_repeated(descriptor):
            getattr(target, path[-1]).append(_scalar_value(descriptor, value))
        else:
            setattr(target, path[-1], _scalar_value(descriptor, value))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidSchema(f"option {name} has an invalid value {value!r}: {exc}") from None
    return True


def _merge_literal(target: Message, value: Any) -> None:
    from google.protobuf import text_format  # type: ignore[import-untyped]

    if not isinstance(value, ast.MessageLiteral):
        raise TypeError("a message literal { ... } is needed")
    try:
        text_format.Merge(_literal_text(value), target)
    except text_format.ParseError as exc:
        raise ValueError(str(exc)) from None


def _scalar_value(descriptor: Any, value: Any) -> Any:
    if descriptor.enum_type is not None:
        text = value.name if isinstance(value, ast.Identifier) else str(value)
        return descriptor.enum_type.values_by_name[text].number
    if isinstance(value, ast.Identifier | ast.MessageLiteral):
        raise TypeError(f"{descriptor.name} needs a scalar value")
    if isinstance(value, str):
        return _unquote(value)
    return value


def _import_closure(direct: Iterable[str], known: dict[str, _FileDP]) -> list[str]:
    seen: list[str] = []
    pending = list(direct)
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.append(path)
        dep = _lookup(path, known)
        if dep is not None:
            pending.extend(dep.dependency)
    return seen


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _synthetic_oneof_name(field_name: str, message: _DP) -> str:
    taken = {o.name for o in message.oneof_decl} | {f.name for f in message.field}
    name = "_" + field_name
    while name in taken:
        name = "X" + name
    return name


def _range(text: str, maximum: int) -> tuple[int, int]:
    parts = [p.strip() for p in text.split("to")]
    try:
        start = int(parts[0], 0)
        if len(parts) == 1:
            return start, start
        end = maximum if parts[1] == "max" else int(parts[1], 0)
    except ValueError:
        raise InvalidSchema(f"invalid range {text!r}") from None
    if end < start:
        raise InvalidSchema(f"invalid range {text!r}")
    return start, end


def _option_name_parts(name: str) -> Iterator[tuple[str, bool]]:
    rest = name
    while rest:
        if rest.startswith("("):
            close = rest.index(")")
            yield rest[1:close].lstrip("."), True
            rest = rest[close + 1 :].lstrip(".")
        else:
            head, _, rest = rest.partition(".")
            yield head, False


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, str):
        return _unquote(value)
    return str(value)


def _literal_text(literal: ast.MessageLiteral) -> str:
    parts: list[str] = []
    for element in literal.elements:
        if isinstance(element, ast.MessageLiteralField):
            parts.append(f"{element.name}: {_literal_value(element.value)}")
    return " ".join(parts)


def _literal_value(value: Any) -> str:
    if isinstance(value, ast.MessageLiteral):
        return "{ " + _literal_text(value) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_literal_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, str):
        return '"' + _escape(_unquote(value)) + '"'
    return str(value)


# ---------------------------------------------------------------------------------------------
# Descriptor to text

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in text)


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.rstrip("\n").split("\n"))


def render(proto: _FileDP, *, normalize: bool = False) -> str:
    """`.proto` text of a file descriptor, in the layout of Confluent's registry."""
    return _Renderer(proto, normalize).file()


class _Renderer:
    def __init__(self, proto: _FileDP, normalize: bool) -> None:
        self.proto = proto
        self.normalize = normalize
        self.proto3 = proto.syntax == "proto3"

    def file(self) -> str:
        proto = self.proto
        out: list[str] = []
        if proto.syntax and (not self.normalize or self.proto3):
            out.append(f'syntax = "{proto.syntax}";\n')
        if proto.package:
            out.append(f"package {proto.package};\n")
        public = set(proto.public_dependency)
        plain = [p for i, p in enumerate(proto.dependency) if i not in public]
        exported = [p for i, p in enumerate(proto.dependency) if i in public]
        if self.normalize:
            plain, exported = sorted(set(plain)), sorted(set(exported))
        if plain or exported:
            out.append("\n")
            out.extend(f'import "{p}";\n' for p in plain)
            out.extend(f'import public "{p}";\n' for p in exported)
        options = self.options(proto.options)
        if options:
            out.append("\n")
            out.extend(f"option {o};\n" for o in options)
        if proto.message_type or proto.enum_type:
            out.append("\n")
            out.extend(self.message(m, _join(proto.package, m.name)) for m in proto.message_type)
            out.extend(self.enum(e) for e in proto.enum_type)
        if proto.extension:
            out.append("\n")
            out.extend(self.extends(proto.extension))
        if proto.service:
            out.append("\n")
            out.extend(self.service(s) for s in proto.service)
        return "".join(out)

    def options(self, options: Message) -> list[str]:
        """`name = value` for each option set, custom ones included."""
        items: list[str] = []
        for descriptor, value in options.ListFields():
            if descriptor.name == "uninterpreted_option":
                continue
            if descriptor.is_extension:
                items.extend(_extension_items(descriptor, value))
                continue
            if descriptor.message_type is not None:
                values = value if _is_repeated(descriptor) else [value]
                items.extend(f"{descriptor.name} = {{ {_text_format(v)} }}" for v in values)
            elif _is_repeated(descriptor):
                items.extend(f"{descriptor.name} = {_option_value(descriptor, v)}" for v in value)
            else:
                items.append(f"{descriptor.name} = {_option_value(descriptor, value)}")
        for kept in options.uninterpreted_option:  # type: ignore[attr-defined]
            items.append(_uninterpreted_text(kept))
        if self.normalize:
            items.sort(key=lambda item: item.split(" = ", 1)[0].strip("()"))
        return items

    def message(self, message: _DP, full: str) -> str:
        out = [f"message {message.name} {{"]
        reserved = self.reserved(message.reserved_range, message.reserved_name, exclusive=True)
        if reserved:
            out.append("\n")
            out.extend(_indent(r) for r in reserved)
        options = self.options(message.options)
        if options:
            out.append("\n")
            out.extend(_indent(f"option {o};") for o in options)
        entries = {"." + _join(full, n.name): n for n in message.nested_type if n.options.map_entry}
        real_oneofs = [
            i
            for i, o in enumerate(message.oneof_decl)
            if not any(f.proto3_optional and f.oneof_index == i for f in message.field)
        ]
        plain = [
            f for f in message.field if not (f.HasField("oneof_index") and not f.proto3_optional)
        ]
        if self.normalize:
            plain.sort(key=lambda f: f.number)
        if plain:
            out.append("\n")
            out.extend(_indent(self.field(f, entries)) for f in plain)
        oneofs: list[tuple[str, list[_FDP], Message]] = []
        for index in real_oneofs:
            members = [
                f for f in message.field if f.HasField("oneof_index") and f.oneof_index == index
            ]
            if self.normalize:
                members.sort(key=lambda f: f.number)
                if not members:
                    continue
            decl = message.oneof_decl[index]
            oneofs.append((decl.name, members, decl.options))
        if self.normalize:
            oneofs.sort(key=lambda o: o[1][0].number)
        if oneofs:
            out.append("\n")
            for name, members, oneof_options in oneofs:
                body = [f"oneof {name} {{"]
                rendered = self.options(oneof_options)
                if rendered:
                    body.append("\n")
                    body.extend(_indent(f"option {o};") for o in rendered)
                if members:
                    body.append("\n")
                    body.extend(_indent(self.field(f, entries, in_oneof=True)) for f in members)
                body.append("}\n")
                out.append(_indent("".join(body)))
        if message.extension_range:
            out.append("\n")
            out.extend(_indent(e) for e in self.extension_ranges(message))
        if message.extension:
            out.append("\n")
            out.extend(_indent(e) for e in self.extends(message.extension))
        nested = [n for n in message.nested_type if not n.options.map_entry]
        if nested or message.enum_type:
            out.append("\n")
            out.extend(_indent(self.message(n, _join(full, n.name))) for n in nested)
            out.extend(_indent(self.enum(e)) for e in message.enum_type)
        out.append("}\n")
        return "".join(out)

    def field(self, f: _FDP, entries: dict[str, _DP], *, in_oneof: bool = False) -> str:
        entry = entries.get(f.type_name) if f.type == _FDP.TYPE_MESSAGE else None
        if entry is not None:
            key, value = entry.field[0], entry.field[1]
            text = f"map<{_type_text(key)}, {_type_text(value)}> {f.name} = {f.number}"
        else:
            label = ""
            if f.label == _FDP.LABEL_REPEATED:
                label = "repeated "
            elif f.label == _FDP.LABEL_REQUIRED:
                label = "required "
            elif not in_oneof and (f.proto3_optional or not self.proto3):
                label = "optional "
            text = f"{label}{_type_text(f)} {f.name} = {f.number}"
        options = self.options(f.options)
        if f.HasField("default_value"):
            options.append(f"default = {_default_value(f)}")
        if f.HasField("json_name") and f.json_name != _json_name(f.name):
            options.append(f'json_name = "{_escape(f.json_name)}"')
        if self.normalize:
            options.sort(key=lambda item: item.split(" = ", 1)[0].strip("()"))
        return text + _option_list(options) + ";\n"

    def enum(self, enum: _EDP) -> str:
        out = [f"enum {enum.name} {{"]
        reserved = self.reserved(enum.reserved_range, enum.reserved_name, exclusive=False)
        if reserved:
            out.append("\n")
            out.extend(_indent(r) for r in reserved)
        elif enum.options.ListFields() or enum.value:
            out.append("\n")
        out.extend(_indent(f"option {o};") for o in self.options(enum.options))
        values = list(enum.value)
        if self.normalize:
            values.sort(key=lambda v: (v.number, v.name))
        for value in values:
            text = f"{value.name} = {value.number}" + _option_list(self.options(value.options))
            out.append(_indent(text + ";"))
        out.append("}\n")
        return "".join(out)

    def reserved(
        self, ranges: Iterable[Any], names: Iterable[str], *, exclusive: bool
    ) -> list[str]:
        limit = MAX_FIELD_NUMBER if exclusive else 2147483647
        values: list[tuple[int, str]] = []
        for r in ranges:
            start, last = r.start, (r.end - 1 if exclusive else r.end)
            if start == last:
                values.append((start, str(start)))
            else:
                values.append((start, f"{start} to {last if last < limit else 'max'}"))
        quoted = [(2**31, f'"{name}"') for name in names]
        if self.normalize:
            entries = sorted(values + quoted, key=lambda v: (v[0], v[1]))
            return [f"reserved {text};" for _, text in entries]
        lines = []
        if values:
            lines.append("reserved " + ", ".join(text for _, text in values) + ";")
        if quoted:
            lines.append("reserved " + ", ".join(text for _, text in quoted) + ";")
        return lines

    def extension_ranges(self, message: _DP) -> list[str]:
        items = []
        for r in message.extension_range:
            last = r.end - 1
            text = (
                str(r.start)
                if r.start == last
                else f"{r.start} to {last if last < MAX_FIELD_NUMBER else 'max'}"
            )
            items.append((r.start, f"extensions {text}{_option_list(self.options(r.options))};"))
        if self.normalize:
            items.sort()
        return [text for _, text in items]

    def extends(self, extensions: Iterable[_FDP]) -> list[str]:
        groups: dict[str, list[_FDP]] = {}
        for ext in extensions:
            groups.setdefault(ext.extendee, []).append(ext)
        out = []
        for extendee, fields in groups.items():
            if self.normalize:
                fields.sort(key=lambda f: f.number)
            body = "".join(_indent(self.field(f, {})) for f in fields)
            out.append(f"extend {extendee} {{\n{body}}}\n")
        return out

    def service(self, service: descriptor_pb2.ServiceDescriptorProto) -> str:
        out = [f"service {service.name} {{"]
        options = self.options(service.options)
        if options:
            out.append("\n")
            out.extend(_indent(f"option {o};") for o in options)
        if service.method:
            out.append("\n")
            for method in service.method:
                request = ("stream " if method.client_streaming else "") + method.input_type
                response = ("stream " if method.server_streaming else "") + method.output_type
                text = f"rpc {method.name} ({request}) returns ({response})"
                method_options = self.options(method.options)
                if method_options:
                    text += " {\n" + "".join(_indent(f"option {o};") for o in method_options) + "}"
                out.append(_indent(text + ";"))
        out.append("}\n")
        return "".join(out)


def _type_text(f: _FDP) -> str:
    if f.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_ENUM, _FDP.TYPE_GROUP) or f.type_name:
        return str(f.type_name)
    return _SCALAR_NAMES[f.type]


def _option_value(descriptor: Any, value: Any) -> str:
    if descriptor.enum_type is not None:
        return str(descriptor.enum_type.values_by_number[value].name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{_escape(value)}"'
    if isinstance(value, bytes):
        return '"' + _escape(value.decode("latin-1")) + '"'
    return str(value)


def _default_value(f: _FDP) -> str:
    if f.type == _FDP.TYPE_STRING:
        return f'"{_escape(f.default_value)}"'
    if f.type == _FDP.TYPE_BYTES:
        return f'"{f.default_value}"'  # already C-escaped in descriptors
    return str(f.default_value)


def _uninterpreted_text(kept: descriptor_pb2.UninterpretedOption) -> str:
    name = ".".join(f"({p.name_part})" if p.is_extension else p.name_part for p in kept.name)
    if kept.HasField("identifier_value"):
        value = kept.identifier_value
    elif kept.HasField("positive_int_value"):
        value = str(kept.positive_int_value)
    elif kept.HasField("negative_int_value"):
        value = str(kept.negative_int_value)
    elif kept.HasField("double_value"):
        value = repr(kept.double_value)
    elif kept.HasField("string_value"):
        value = '"' + _escape(kept.string_value.decode("utf-8", "backslashreplace")) + '"'
    else:
        value = "{ " + kept.aggregate_value + " }"
    return f"{name} = {value}"


def _extension_items(descriptor: Any, value: Any) -> list[str]:
    """A custom option as `(ext).field = value` lines, or `(ext) = { ... }` when nested."""
    name = f"({descriptor.full_name})"
    if descriptor.message_type is None:
        if _is_repeated(descriptor):
            return [f"{name} = {_option_value(descriptor, v)}" for v in value]
        return [f"{name} = {_option_value(descriptor, value)}"]
    fields = value.ListFields()
    if any(f.message_type is not None for f, _ in fields):
        return [f"{name} = {{ {_text_format(value)} }}"]
    items: list[str] = []
    for f, v in fields:
        values = v if _is_repeated(f) else [v]
        items.extend(f"{name}.{f.name} = {_option_value(f, one)}" for one in values)
    return items


def _text_format(value: Message) -> str:
    from google.protobuf import text_format  # type: ignore[import-untyped]

    return str(text_format.MessageToString(value, as_one_line=True))


def _option_list(options: list[str]) -> str:
    if not options:
        return ""
    if len(options) == 1:
        return f" [{options[0]}]"
    body = "".join(f"  {o}{',' if i < len(options) - 1 else ''}\n" for i, o in enumerate(options))
    return f" [\n{body}]"


# ---------------------------------------------------------------------------------------------
# Compatibility (Confluent's Protobuf diff)

# Changes that leave the reader able to read the writer's data.
COMPATIBLE_CHANGES = frozenset(
    {
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)

# Descriptions of the incompatible changes; the first %s is the reader, the second the writer.
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package "
    "in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not match "
    "the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the %s schema "
    "does not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the %s schema "
    "does not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the %s "
    "schema does not match its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in "
    "the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in "
    "the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s "
    "schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{path}' in the %s schema was "
    "moved out of its oneof to a top-level field in the %s schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the %s "
    "schema are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the %s schema is "
    "outside an existing oneof in the %s schema",
}

_SCALAR_KINDS = {
    "int32": "GENERAL_NUMBER",
    "int64": "GENERAL_NUMBER",
    "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER",
    "bool": "GENERAL_NUMBER",
    "sint32": "SIGNED_NUMBER",
    "sint64": "SIGNED_NUMBER",
    "string": "STRING_OR_BYTES",
    "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32",
    "sfixed32": "FIXED32",
    "fixed64": "FIXED64",
    "sfixed64": "FIXED64",
    "float": "FLOAT",
    "double": "DOUBLE",
}


@dataclass(frozen=True, slots=True)
class Difference:
    """One change between a writer's (original) and a reader's (update) schema."""

    kind: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.kind in COMPATIBLE_CHANGES


@dataclass(frozen=True, slots=True)
class _TypeInfo:
    package: str
    origin: str  # the import path of the file that declares it, "" for the schema itself
    message: _DP | None
    enum: _EDP | None
    key: _FDP | None = None  # map entries
    value: _FDP | None = None


def _index_types(schema: ProtobufSchema) -> dict[str, _TypeInfo]:
    types: dict[str, _TypeInfo] = {}

    def walk(
        package: str, origin: str, scope: str, messages: Iterable[_DP], enums: Iterable[_EDP]
    ) -> None:
        for message in messages:
            full = _join(scope, message.name)
            if message.options.map_entry and len(message.field) == 2:
                types[full] = _TypeInfo(
                    package, origin, message, None, message.field[0], message.field[1]
                )
            else:
                types[full] = _TypeInfo(package, origin, message, None)
            walk(package, origin, full, message.nested_type, message.enum_type)
        for enum in enums:
            types[_join(scope, enum.name)] = _TypeInfo(package, origin, None, enum)

    files = dict(_builtin_files())
    files.update(schema.dependencies)
    for path, dep in files.items():
        walk(dep.package, path, dep.package, dep.message_type, dep.enum_type)
    main = schema.file
    walk(main.package, "", main.package, main.message_type, main.enum_type)
    return types


class _Diff:
    def __init__(self, original: ProtobufSchema, update: ProtobufSchema) -> None:
        self.original = original
        self.update = update
        self.types = (_index_types(original), _index_types(update))
        self.syntax = (original.file.syntax == "proto3", update.file.syntax == "proto3")
        self.path: list[str] = []
        self.visiting: set[str] = set()
        self.found: list[Difference] = []

    def add(self, kind: str, *extra: str) -> None:
        self.found.append(Difference(kind, "#/" + "/".join([*self.path, *extra])))

    def run(self) -> list[Difference]:
        if self.original.file.package != self.update.file.package:
            self.add("PACKAGE_CHANGED")
        a, b = self.original.file, self.update.file
        self.types_of(
            a.package, b.package, a.message_type, b.message_type, a.enum_type, b.enum_type
        )
        return self.found

    def types_of(
        self,
        scope_a: str,
        scope_b: str,
        messages_a: Sequence[_DP],
        messages_b: Sequence[_DP],
        enums_a: Sequence[_EDP],
        enums_b: Sequence[_EDP],
    ) -> None:
        def by_name(messages: Sequence[_DP]) -> dict[str, tuple[int, _DP]]:
            kept = [m for m in messages if not m.options.map_entry]
            return {m.name: (i, m) for i, m in enumerate(kept)}

        old, new = by_name(messages_a), by_name(messages_b)
        for name in sorted(old.keys() | new.keys()):
            self.path.append(name)
            if name not in new:
                self.add("MESSAGE_REMOVED")
            elif name not in old:
                self.add("MESSAGE_ADDED")
            else:
                self.message(_join(scope_a, name), _join(scope_b, name), old[name][1], new[name][1])
                if old[name][0] != new[name][0]:
                    self.add("MESSAGE_MOVED")
            self.path.pop()
        old_enums = {e.name: e for e in enums_a}
        new_enums = {e.name: e for e in enums_b}
        for name in sorted(old_enums.keys() | new_enums.keys()):
            self.path.append(name)
            if name not in new_enums:
                self.add("ENUM_REMOVED")
            elif name not in old_enums:
                self.add("ENUM_ADDED")
            else:
                self.enum(old_enums[name], new_enums[name])
            self.path.pop()

    def enum(self, a: _EDP, b: _EDP) -> None:
        old = {v.number: v.name for v in a.value}
        new = {v.number: v.name for v in b.value}
        for number in sorted(old.keys() | new.keys()):
            if number not in new:
                self.add("ENUM_CONST_REMOVED", str(number))
            elif number not in old:
                self.add("ENUM_CONST_ADDED", str(number))
            elif old[number] != new[number]:
                self.add("ENUM_CONST_CHANGED", str(number))

    def message(self, full_a: str, full_b: str, a: _DP, b: _DP) -> None:
        guard = "original:" + full_a
        if guard not in self.visiting:
            self.visiting.add(guard)
            try:
                self.fields(a, b)
            finally:
                self.visiting.discard(guard)
        self.types_of(full_a, full_b, a.nested_type, b.nested_type, a.enum_type, b.enum_type)

    def fields(self, a: _DP, b: _DP) -> None:
        old_by, old_oneof_of, old_oneofs = _collect_fields(a)
        new_by, new_oneof_of, new_oneofs = _collect_fields(b)
        deleted = {
            name
            for name, members in old_oneofs.items()
            if name not in new_oneofs and not any(m in new_by for m in members)
        }
        for name, members in new_oneofs.items():
            groups: set[str] = set()
            moved_in = 0
            for number in members:
                if number in old_oneof_of:
                    groups.add("oneof:" + old_oneof_of[number])
                elif number in old_by:
                    groups.add(f"field:{number}")
                    moved_in += 1
            if len(groups) > 1:
                self.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                    if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF",
                    name,
                )
        for name in sorted(old_oneofs.keys() | new_oneofs.keys()):
            if name not in new_oneofs:
                self.add("ONEOF_REMOVED", name)
            elif name not in old_oneofs:
                self.add("ONEOF_ADDED", name)
        for number in sorted(old_by.keys() | new_by.keys()):
            was, now = old_by.get(number), new_by.get(number)
            old_oneof, new_oneof = old_oneof_of.get(number), new_oneof_of.get(number)
            if now is None:
                assert was is not None
                if old_oneof is not None:
                    if old_oneof not in deleted:
                        self.add("ONEOF_FIELD_REMOVED", old_oneof, str(number))
                elif was.label == _FDP.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_REMOVED", str(number))
                else:
                    self.add("FIELD_REMOVED", str(number))
            elif was is None:
                if new_oneof is not None:
                    self.add("ONEOF_FIELD_ADDED", new_oneof, str(number))
                elif now.label == _FDP.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_ADDED", str(number))
                else:
                    self.add("FIELD_ADDED", str(number))
            else:
                if old_oneof is not None and new_oneof is None:
                    self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(number))
                where = [new_oneof, str(number)] if new_oneof is not None else [str(number)]
                self.path.extend(where)
                self.field(was, now, old_oneof is not None, new_oneof is not None)
                del self.path[-len(where) :]

    def field(self, a: _FDP, b: _FDP, a_in_oneof: bool, b_in_oneof: bool) -> None:
        if a.name != b.name:
            self.add("FIELD_NAME_CHANGED")
        label_a = _label(a, self.syntax[0], a_in_oneof)
        label_b = _label(b, self.syntax[1], b_in_oneof)
        self.labels_and_types(label_a, label_b, self.field_type(a, 0), self.field_type(b, 1))

    def field_type(self, f: _FDP, side: int) -> Any:
        """A scalar name, ("map", key, value), or ("named", full name)."""
        if not f.type_name:
            return _SCALAR_NAMES.get(f.type, "bytes")
        full = f.type_name.lstrip(".")
        info = self.types[side].get(full)
        if info is not None and info.key is not None and info.value is not None:
            return ("map", self.field_type(info.key, side), self.field_type(info.value, side))
        return ("named", full)

    def kind(self, t: Any, side: int) -> str:
        if isinstance(t, str):
            return "SCALAR"
        if t[0] == "map":
            return "MAP"
        info = self.types[side].get(t[1])
        return "SCALAR" if info is not None and info.enum is not None else "MESSAGE"

    def scalar_kind(self, t: Any) -> str:
        return _SCALAR_KINDS[t] if isinstance(t, str) else "GENERAL_NUMBER"  # enums

    def labels_and_types(self, label_a: str | None, label_b: str | None, a: Any, b: Any) -> None:
        kind_a, kind_b = self.kind(a, 0), self.kind(b, 1)
        if kind_a != kind_b:
            self.add("FIELD_KIND_CHANGED")
        elif kind_a == "SCALAR":
            scalar_a, scalar_b = self.scalar_kind(a), self.scalar_kind(b)
            if scalar_a != scalar_b:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            elif label_a is not None and label_b is not None and label_a != label_b:
                if scalar_a == "STRING_OR_BYTES":
                    self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
                else:
                    self.add("FIELD_NUMERIC_LABEL_CHANGED")
        elif kind_a == "MESSAGE":
            self.named_types(a[1], b[1])
        else:
            self.labels_and_types(None, None, a[1], b[1])
            self.labels_and_types(None, None, a[2], b[2])

    def named_types(self, full_a: str, full_b: str) -> None:
        info_a, info_b = self.types[0].get(full_a), self.types[1].get(full_b)
        if info_a is None or info_b is None or info_a.message is None or info_b.message is None:
            if full_a != full_b:
                self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        local_a = _local_name(full_a, info_a.package)
        local_b = _local_name(full_b, info_b.package)
        if local_a != local_b:
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        if info_a.origin == info_b.origin == "":
            return  # both declared in the schemas themselves: compared where they are declared
        if info_a.origin == info_b.origin and self._same_file(info_a.origin):
            return  # the same imported file on both sides
        # An imported message is compared here, under its local name.
        saved, self.path = self.path, local_a.split(".")
        start = len(self.found)
        self.message(full_a, full_b, info_a.message, info_b.message)
        self.path = saved
        if any(not d.compatible for d in self.found[start:]):
            self.add("FIELD_NAMED_TYPE_CHANGED")

    def _same_file(self, path: str) -> bool:
        a = self.original.dependencies.get(path)
        b = self.update.dependencies.get(path)
        return a is not None and b is not None and a.SerializeToString() == b.SerializeToString()


def _local_name(full: str, package: str) -> str:
    return full[len(package) + 1 :] if package and full.startswith(package + ".") else full


def _label(f: _FDP, proto3: bool, in_oneof: bool) -> str | None:
    """The label as written in `.proto` text; None where none is written."""
    if f.label == _FDP.LABEL_REPEATED:
        return "repeated"
    if f.label == _FDP.LABEL_REQUIRED:
        return "required"
    if in_oneof:
        return None
    if f.proto3_optional or not proto3:
        return "optional"
    return None


def _collect_fields(message: _DP) -> tuple[dict[int, _FDP], dict[int, str], dict[str, list[int]]]:
    by_number: dict[int, _FDP] = {}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    synthetic = {f.oneof_index for f in message.field if f.proto3_optional}
    for index, decl in enumerate(message.oneof_decl):
        if index not in synthetic:
            oneofs[decl.name] = []
    for f in message.field:
        by_number[f.number] = f
        if f.HasField("oneof_index") and f.oneof_index not in synthetic:
            name = message.oneof_decl[f.oneof_index].name
            oneof_of[f.number] = name
            oneofs[name].append(f.number)
    return by_number, oneof_of, oneofs


def differences(writer: ProtobufSchema, reader: ProtobufSchema) -> list[Difference]:
    """Every change from the writer's schema to the reader's, compatible ones included."""
    return _Diff(writer, reader).run()


def reader_errors(reader: Any, writer: Any) -> list[Problem]:
    """Why `reader` cannot read data written with `writer` (empty: it can)."""
    if not isinstance(reader, ProtobufSchema) or not isinstance(writer, ProtobufSchema):
        return [Problem("TYPE_MISMATCH", "Incompatible because of different schema type")]
    problems = []
    for diff in differences(writer, reader):
        if not diff.compatible:
            description = _DESCRIPTIONS.get(diff.kind, "{path}").format(path=diff.path)
            problems.append(Problem(diff.kind, description))
    return problems


def format_problem(problem: Problem, reader: str, writer: str) -> str:
    """A verbose message the way Confluent words its Protobuf findings (double quotes)."""
    description = problem.description.replace("%s", reader, 1).replace("%s", writer, 1)
    return f'{{errorType:"{problem.error_type}", description:"{description}"}}'


def summary(found: Iterable[Difference]) -> Counter[str]:
    """The differences as "TYPE #/path" strings, counted (order is not significant)."""
    return Counter(f"{d.kind} {d.path}" for d in found)


parse_stored = parse  # nothing is checked on registration that a stored schema could fail
