"""Schema types of the registry: parsing, canonical forms and reader/writer compatibility.

Sans-IO. One module per type (avro.py, protobuf.py, json_schema.py), each exposing
`parse(text, references) -> ParsedSchema`, `parse_stored` (the same for schemas read back
from the topic) and `reader_errors(reader, writer) -> list[Problem]`
(an empty list: data written with `writer` can be read with `reader`).
`references` are the schemas a schema names, already resolved by the registry, dependencies
first: (reference name, schema text) pairs of the same type.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
DEFAULT_SCHEMA_TYPE = "AVRO"
_MODULES = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json_schema"}


class InvalidSchema(ValueError):
    """The schema text does not parse or is not a valid schema of its type (42201)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a reader cannot read a writer's data, as listed in verbose answers."""

    error_type: str  # e.g. READER_FIELD_MISSING_DEFAULT_VALUE, TYPE_MISMATCH
    description: str
    additional_info: str = ""


class ParsedSchema(Protocol):
    schema_type: str

    def canonical(self) -> str:
        """The text stored and returned: the schema as given, reformatted the way the
        registry formats it. Two registrations are the same schema when these are equal."""
        ...

    def normalized(self) -> ParsedSchema:
        """The schema under `normalize=true`: semantically equal schemas become equal."""
        ...

    def formatted(self, fmt: str | None) -> str:
        """The text answered for `?format=` (None: canonical())."""
        ...


class SchemaType(Protocol):
    def parse(self, text: str, references: Sequence[tuple[str, str]]) -> ParsedSchema: ...

    def parse_stored(self, text: str, references: Sequence[tuple[str, str]]) -> ParsedSchema:
        """A schema read back from the topic: only what a registered schema must pass is
        checked again (e.g. not Avro field defaults, which older registries let through)."""
        ...

    def reader_errors(self, reader: ParsedSchema, writer: ParsedSchema) -> list[Problem]: ...


def schema_type(name: str | None) -> SchemaType:
    """The module of a schema type; None or "" is AVRO. Unknown names: InvalidSchema."""
    key = (name or DEFAULT_SCHEMA_TYPE).upper()
    if key not in _MODULES:
        raise InvalidSchema(f"Invalid schema type {name}")
    module: SchemaType = importlib.import_module(f"{__name__}.{_MODULES[key]}")  # type: ignore[assignment]
    return module
