"""The records of the `_schemas` topic, in the format Confluent's registry writes.

The topic is the registry's only storage: every change is one record, and a registry's
state is what it has read from the topic (state.py applies them). Keys and values are
JSON. Keys carry a `keytype`:

- SCHEMA {"keytype","subject","version","magic":1} -> {"subject","version","id",
  "schemaType" (absent for AVRO),"references","schema","deleted"}; a null value is a
  permanent delete of that version.
- CONFIG {"keytype","subject" (null: global),"magic":0} -> {"compatibilityLevel"}; null
  value: the subject's level is removed.
- MODE {"keytype","subject","magic":0} -> {"mode"}; null: removed.
- DELETE_SUBJECT / CLEAR_SUBJECT / NOOP: written by other registries; read and ignored
  here because SCHEMA records already carry the deleted flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False


Record = tuple[bytes, bytes | None]


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def schema_record(value: SchemaValue) -> Record:
    body: dict[str, Any] = {
        "subject": value.subject,
        "version": value.version,
        "id": value.schema_id,
    }
    if value.schema_type != "AVRO":
        body["schemaType"] = value.schema_type
    if value.references:
        body["references"] = [ref.as_json() for ref in value.references]
    body["schema"] = value.schema
    body["deleted"] = value.deleted
    return schema_key(value.subject, value.version), _dump(body)


def config_record(subject: str | None, level: str | None) -> Record:
    key = _dump({"keytype": CONFIG, "subject": subject, "magic": 0})
    return key, None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _dump({"keytype": MODE, "subject": subject, "magic": 0})
    return key, None if mode is None else _dump({"mode": mode})


def parse_key(raw: bytes) -> dict[str, Any] | None:
    """The key as a dict, or None for a record that is not the registry's."""
    try:
        key = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return key if isinstance(key, dict) and isinstance(key.get("keytype"), str) else None


def parse_schema_value(raw: bytes) -> SchemaValue | None:
    try:
        body = json.loads(raw)
        references = tuple(
            Reference(str(ref["name"]), str(ref["subject"]), int(ref["version"]))
            for ref in body.get("references") or ()
        )
        return SchemaValue(
            subject=str(body["subject"]),
            version=int(body["version"]),
            schema_id=int(body["id"]),
            schema_type=str(body.get("schemaType") or "AVRO"),
            schema=str(body["schema"]),
            references=references,
            deleted=bool(body.get("deleted", False)),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def parse_field(raw: bytes | None, field: str) -> str | None:
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    value = body.get(field) if isinstance(body, dict) else None
    return value if isinstance(value, str) else None
