"""The registry's state: a view of the `_schemas` topic, and the rules of each command.

Rules (Confluent's, as clients rely on them):
- A subject's versions are numbered from 1. A new version is one more than the highest the
  subject ever had: soft-deleted versions keep their numbers.
- A schema id names one schema: its type, its text (as the type renders it) and its
  references. The same schema under two subjects, or registered again, has the same id.
  A new schema gets one more than the highest id ever read.
- Registering a schema the subject already has (live) answers its id and writes nothing.
- A new version must be compatible, under the subject's level (else the global level,
  else BACKWARD), with the subject's live versions (compatibility.check).
- Mode (the subject's, else the global one): READONLY and READONLY_OVERRIDE refuse
  writes (42205); IMPORT lets a registration give its own id and version.
- A soft delete marks versions deleted: they keep their ids and stay readable with
  `deleted=true`. A permanent delete removes versions soft-deleted first. A version that a
  live schema references cannot be deleted (42206).
- Two registries writing to one topic at once: the first record read for an id, or for a
  subject's version, wins; a later one that gives the id to another schema, or the
  version to another id, is ignored, and the command that wrote it runs again after
  writing the winner's record once more (compaction keeps a key's last record).

Commands validate against the state and answer either a `Reply` or a `Write`: records to
append to the topic, and how to answer once they have been read back and applied.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from minibroker.schema_registry import errors
from minibroker.schema_registry import records as rec
from minibroker.schema_registry.records import Record, Reference, SchemaValue
from minibroker.schema_registry.schemas import (
    SCHEMA_TYPES,
    InvalidSchema,
    ParsedSchema,
    schema_type,
)

MAX_VERSION = 2**31 - 1
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_REFERENCE_DEPTH = 32


def _levels() -> tuple[str, ...]:
    from minibroker.schema_registry import compatibility

    return tuple(compatibility.LEVELS)


def _default_level() -> str:
    from minibroker.schema_registry import compatibility

    return compatibility.DEFAULT_LEVEL


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: Any  # JSON-able, or str for a raw schema


@dataclass(frozen=True, slots=True)
class Write:
    records: list[Record]
    answer: Callable[[RegistryState], Reply]  # raises Lost when another registry won


class Lost(Exception):
    """The records were read back but another registry's records won: run it again."""


@dataclass(frozen=True, slots=True)
class StoredSchema:
    schema_id: int
    schema_type: str
    text: str
    references: tuple[Reference, ...]

    @property
    def identity(self) -> tuple[str, str, tuple[Reference, ...]]:
        return self.schema_type, self.text, self.references


@dataclass(slots=True)
class VersionEntry:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass(slots=True)
class RegistryState:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    ids: dict[tuple[str, str, tuple[Reference, ...]], int] = field(default_factory=dict)
    subjects: dict[str, dict[int, VersionEntry]] = field(default_factory=dict)
    max_id: int = 0
    global_level: str | None = None
    subject_levels: dict[str, str] = field(default_factory=dict)
    global_mode: str | None = None
    subject_modes: dict[str, str] = field(default_factory=dict)
    _parsed: dict[int, ParsedSchema] = field(default_factory=dict)

    # --- the topic ---

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Apply one `_schemas` record; records that are not the registry's are skipped."""
        parsed_key = rec.parse_key(key)
        if parsed_key is None:
            return
        keytype = parsed_key["keytype"]
        subject = parsed_key.get("subject")
        if keytype == rec.SCHEMA and isinstance(subject, str):
            if value is None:
                self._forget_version(subject, parsed_key.get("version"))
            elif (schema_value := rec.parse_schema_value(value)) is not None:
                self._apply_schema(schema_value)
        elif keytype == rec.CONFIG:
            level = rec.parse_field(value, "compatibilityLevel")
            self._set(subject, level, "global_level", self.subject_levels)
        elif keytype == rec.MODE:
            mode = rec.parse_field(value, "mode")
            self._set(subject, mode, "global_mode", self.subject_modes)

    def _set(
        self, subject: object, value: str | None, global_name: str, per: dict[str, str]
    ) -> None:
        if subject is None:
            setattr(self, global_name, value)
        elif isinstance(subject, str):
            if value is None:
                per.pop(subject, None)
            else:
                per[subject] = value

    def _apply_schema(self, value: SchemaValue) -> None:
        stored = StoredSchema(value.schema_id, value.schema_type, value.schema, value.references)
        known = self.schemas.get(value.schema_id)
        if known is not None and known.identity != stored.identity:
            return  # the id already names another schema: the first record wins
        versions = self.subjects.setdefault(value.subject, {})
        entry = versions.get(value.version)
        if entry is not None and entry.schema_id != value.schema_id:
            return  # the version already holds another schema
        if known is None:
            self.schemas[value.schema_id] = stored
            self.ids.setdefault(stored.identity, value.schema_id)
        self.max_id = max(self.max_id, value.schema_id)
        versions[value.version] = VersionEntry(value.version, value.schema_id, value.deleted)

    def _forget_version(self, subject: str, version: object) -> None:
        versions = self.subjects.get(subject)
        if versions is None or not isinstance(version, int):
            return
        entry = versions.pop(version, None)
        if not versions:
            del self.subjects[subject]
        if entry is not None and not self._id_in_use(entry.schema_id):
            stored = self.schemas.pop(entry.schema_id)
            self._parsed.pop(entry.schema_id, None)
            if self.ids.get(stored.identity) == entry.schema_id:
                del self.ids[stored.identity]

    def _id_in_use(self, schema_id: int) -> bool:
        return any(
            entry.schema_id == schema_id
            for versions in self.subjects.values()
            for entry in versions.values()
        )

    def current_record(self, key: bytes) -> Record | None:
        """The SCHEMA record that gives what the state holds for this key, or None.

        A registry whose record lost a race writes this again, so that compaction, which
        keeps the last record of a key, keeps the winner's.
        """
        parsed_key = rec.parse_key(key)
        if parsed_key is None or parsed_key["keytype"] != rec.SCHEMA:
            return None
        subject, version = parsed_key.get("subject"), parsed_key.get("version")
        if not isinstance(subject, str) or not isinstance(version, int):
            return None
        entry = self.subjects.get(subject, {}).get(version)
        if entry is None:
            return None
        stored = self.schemas[entry.schema_id]
        value = SchemaValue(
            subject,
            version,
            stored.schema_id,
            stored.schema_type,
            stored.text,
            stored.references,
            entry.deleted,
        )
        return rec.schema_record(value)

    # --- reading ---

    def live_versions(self, subject: str) -> list[VersionEntry]:
        return sorted(
            (e for e in self.subjects.get(subject, {}).values() if not e.deleted),
            key=lambda e: e.version,
        )

    def all_versions(self, subject: str) -> list[VersionEntry]:
        return sorted(self.subjects.get(subject, {}).values(), key=lambda e: e.version)

    def level_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_levels:
            return self.subject_levels[subject]
        return self.global_level or _default_level()

    def mode_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_modes:
            return self.subject_modes[subject]
        return self.global_mode or DEFAULT_MODE

    def parsed(self, schema_id: int) -> ParsedSchema:
        """The schema behind an id, parsed once (its references resolved)."""
        if schema_id not in self._parsed:
            stored = self.schemas[schema_id]
            refs = self.resolve(stored.references, stored.schema_type)
            kind = schema_type(stored.schema_type)
            self._parsed[schema_id] = kind.parse_stored(stored.text, refs)
        return self._parsed[schema_id]

    def resolve(
        self, references: Iterable[Reference], kind: str, depth: int = 0
    ) -> list[tuple[str, str]]:
        """(name, text) of every schema the references name, dependencies first."""
        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("Invalid schema: references nested too deeply")
        resolved: list[tuple[str, str]] = []
        seen: set[str] = set()
        for ref in references:
            entry = self.subjects.get(ref.subject, {}).get(ref.version)
            stored = self.schemas.get(entry.schema_id) if entry is not None else None
            if stored is None:
                raise errors.invalid_schema(
                    f"Invalid schema: reference '{ref.name}' names subject '{ref.subject}' "
                    f"version {ref.version}, which does not exist"
                )
            for pair in [
                *self.resolve(stored.references, kind, depth + 1),
                (ref.name, stored.text),
            ]:
                if pair[0] not in seen:
                    seen.add(pair[0])
                    resolved.append(pair)
        return resolved

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name this version."""
        found = {
            entry.schema_id
            for versions in self.subjects.values()
            for entry in versions.values()
            if not entry.deleted
            and any(
                ref.subject == subject and ref.version == version
                for ref in self.schemas[entry.schema_id].references
            )
        }
        return sorted(found)

    def schema_json(
        self,
        stored: StoredSchema,
        *,
        subject: str | None = None,
        version: int | None = None,
        fmt: str | None = None,
    ) -> dict[str, Any]:
        """A schema as Confluent answers it: subject, version, id, type, references, text."""
        body: dict[str, Any] = {}
        if subject is not None:
            body["subject"] = subject
            body["version"] = version
        body["id"] = stored.schema_id
        if stored.schema_type != "AVRO":
            body["schemaType"] = stored.schema_type
        if stored.references:
            body["references"] = [ref.as_json() for ref in stored.references]
        body["schema"] = self.text_as(stored, fmt)
        return body

    def text_as(self, stored: StoredSchema, fmt: str | None) -> str:
        if not fmt:
            return stored.text
        try:
            return self.parsed(stored.schema_id).formatted(fmt)
        except InvalidSchema as exc:
            raise errors.invalid_schema(str(exc)) from exc


# --- request bodies ---


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    schema: str
    schema_type: str
    references: tuple[Reference, ...]
    schema_id: int | None = None
    version: int | None = None


def schema_request(body: Any) -> SchemaRequest:
    """The body of a register, lookup or compatibility request, checked."""
    if not isinstance(body, dict):
        raise errors.bad_request(422, 422, "The request body must be a JSON object")
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise errors.invalid_schema("Empty schema")
    kind = body.get("schemaType") or "AVRO"
    if not isinstance(kind, str) or kind.upper() not in SCHEMA_TYPES:
        raise errors.invalid_schema(f"Invalid schema type {kind}")
    raw_refs = body.get("references") or []
    references: list[Reference] = []
    if not isinstance(raw_refs, list):
        raise errors.invalid_schema("Invalid schema: references must be a list")
    for ref in raw_refs:
        if (
            not isinstance(ref, dict)
            or not isinstance(ref.get("name"), str)
            or not isinstance(ref.get("subject"), str)
            or not isinstance(ref.get("version"), int)
            or isinstance(ref.get("version"), bool)
        ):
            raise errors.invalid_schema(f"Invalid schema: invalid reference {json.dumps(ref)}")
        references.append(Reference(ref["name"], ref["subject"], ref["version"]))
    given_id = body.get("id")
    given_version = body.get("version")
    return SchemaRequest(
        text,
        kind.upper(),
        tuple(references),
        given_id if isinstance(given_id, int) and given_id > 0 else None,
        given_version if isinstance(given_version, int) and given_version > 0 else None,
    )


def check_subject(subject: str) -> None:
    if not subject or any(unicodedata.category(ch) == "Cc" for ch in subject):
        raise errors.invalid_subject(subject)


def parse_version(text: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for latest (-1); spaces
    around it and the case of "latest" do not matter, as in Confluent's registry."""
    trimmed = text.strip()
    if trimmed.lower() == "latest" or trimmed == "-1":
        return None
    if trimmed.isascii() and trimmed.isdigit() and 1 <= int(trimmed) <= MAX_VERSION:
        return int(trimmed)
    raise errors.invalid_version(text)


# --- commands ---


def _parse_new(state: RegistryState, request: SchemaRequest, normalize: bool) -> ParsedSchema:
    refs = state.resolve(request.references, request.schema_type)
    try:
        parsed = schema_type(request.schema_type).parse(request.schema, refs)
        return parsed.normalized() if normalize else parsed
    except InvalidSchema as exc:
        raise errors.invalid_schema(f"Invalid schema {request.schema}, details: {exc}") from exc


def _previous(state: RegistryState, entries: list[VersionEntry]) -> list[tuple[int, ParsedSchema]]:
    return [(e.version, state.parsed(e.schema_id)) for e in entries]


def _check_writable(state: RegistryState, subject: str | None) -> None:
    mode = state.mode_of(subject)
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        raise errors.not_permitted(f"Subject {subject or ''} is in read-only mode")


def register(state: RegistryState, subject: str, body: Any, normalize: bool) -> Reply | Write:
    from minibroker.schema_registry import compatibility

    check_subject(subject)
    _check_writable(state, subject)
    request = schema_request(body)
    parsed = _parse_new(state, request, normalize)
    identity = (request.schema_type, parsed.canonical(), request.references)
    importing = state.mode_of(subject) == "IMPORT"
    for entry in state.live_versions(subject):
        if state.schemas[entry.schema_id].identity == identity:
            if request.schema_id is not None and request.schema_id != entry.schema_id:
                raise errors.RegistryError(
                    422,
                    errors.ID_DOES_NOT_MATCH,
                    f"Schema already registered with id {entry.schema_id} instead of input "
                    f"id {request.schema_id}",
                )
            return Reply(200, {"id": entry.schema_id})
    if not importing:
        if request.schema_id is not None:
            raise errors.not_permitted(
                f"Subject {subject} is not in import mode; an id can be given only in IMPORT mode"
            )
        kind = schema_type(request.schema_type)
        previous = _previous(state, state.live_versions(subject))
        messages = compatibility.check(state.level_of(subject), kind, parsed, previous)
        if messages:
            raise errors.incompatible(subject, messages)
    schema_id = state.ids.get(identity)
    if request.schema_id is not None:
        taken = state.schemas.get(request.schema_id)
        if taken is not None and taken.identity != identity:
            raise errors.RegistryError(
                422,
                errors.ID_DOES_NOT_MATCH,
                f"Overwrite new schema with id {request.schema_id} is not permitted.",
            )
        schema_id = request.schema_id
    if schema_id is None:
        schema_id = state.max_id + 1
    versions = state.subjects.get(subject, {})
    version = max(versions, default=0) + 1
    if request.version is not None:
        if request.version in versions or (not importing and request.version != version):
            raise errors.invalid_version(str(request.version))
        version = request.version
    value = SchemaValue(
        subject, version, schema_id, request.schema_type, parsed.canonical(), request.references
    )

    def answer(after: RegistryState) -> Reply:
        entry = after.subjects.get(subject, {}).get(version)
        if entry is None or entry.schema_id != schema_id:
            raise Lost
        # Confluent answers the id alone: a client caches a schema text in the answer as
        # the schema of that id, whatever form (e.g. Protobuf's serialized one) it sent.
        return Reply(200, {"id": schema_id})

    return Write([rec.schema_record(value)], answer)


def lookup(state: RegistryState, subject: str, body: Any, normalize: bool, deleted: bool) -> Reply:
    request = schema_request(body)
    entries = state.all_versions(subject) if deleted else state.live_versions(subject)
    if not entries:
        raise errors.subject_not_found(subject)
    parsed = _parse_new(state, request, normalize)
    identity = (request.schema_type, parsed.canonical(), request.references)
    for entry in reversed(entries):
        stored = state.schemas[entry.schema_id]
        if stored.identity == identity:
            return Reply(200, state.schema_json(stored, subject=subject, version=entry.version))
    raise errors.schema_not_found()


def find_version(
    state: RegistryState, subject: str, version_text: str, deleted: bool
) -> VersionEntry:
    version = parse_version(version_text)
    entries = state.all_versions(subject) if deleted else state.live_versions(subject)
    if not entries:
        raise errors.subject_not_found(subject)
    if version is None:
        return entries[-1]
    for entry in entries:
        if entry.version == version:
            return entry
    raise errors.version_not_found(version)


def compatibility_of(
    state: RegistryState,
    subject: str,
    version_text: str | None,
    body: Any,
    normalize: bool,
    verbose: bool,
) -> Reply:
    """POST /compatibility/subjects/{subject}/versions[/{version}]."""
    from minibroker.schema_registry import compatibility

    request = schema_request(body)
    parsed = _parse_new(state, request, normalize)
    live = state.live_versions(subject)
    level = state.level_of(subject)
    if version_text is None:
        against = live
    else:
        version = parse_version(version_text)
        if version is None:
            against = live[-1:]
        else:
            if not state.subjects.get(subject):
                raise errors.subject_not_found(subject)
            against = [e for e in live if e.version == version]
            if not against:
                raise errors.version_not_found(version)
        # One named version: the level's direction, without the transitive part.
        level = level.removesuffix("_TRANSITIVE")
    messages = compatibility.check(
        level, schema_type(request.schema_type), parsed, _previous(state, against)
    )
    answer: dict[str, Any] = {"is_compatible": not messages}
    if verbose:
        answer["messages"] = messages
    return Reply(200, answer)


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> Write:
    _check_writable(state, subject)
    versions = state.all_versions(subject)
    if not versions:
        raise errors.subject_not_found(subject)
    live = [e for e in versions if not e.deleted]
    if permanent:
        if live:
            raise errors.subject_not_soft_deleted(subject)
        records: list[Record] = [(rec.schema_key(subject, e.version), None) for e in versions]
        if subject in state.subject_levels:
            records.append(rec.config_record(subject, None))
        if subject in state.subject_modes:
            records.append(rec.mode_record(subject, None))
        gone = [e.version for e in versions]
    else:
        if not live:
            raise errors.subject_soft_deleted(subject)
        for entry in live:
            _refuse_if_referenced(state, subject, entry.version)
        records = [_deleted_record(state, subject, e) for e in live]
        gone = [e.version for e in live]
    return Write(records, lambda _after: Reply(200, gone))


def delete_version(state: RegistryState, subject: str, version_text: str, permanent: bool) -> Write:
    _check_writable(state, subject)
    version = parse_version(version_text)
    versions = state.all_versions(subject)
    if not versions:
        raise errors.subject_not_found(subject)
    if version is None:
        candidates = versions if permanent else [e for e in versions if not e.deleted]
        if not candidates:
            raise errors.version_not_found(version_text)
        entry = candidates[-1]
    else:
        found = [e for e in versions if e.version == version]
        if not found:
            raise errors.version_not_found(version)
        entry = found[0]
    if permanent:
        if not entry.deleted:
            raise errors.version_not_soft_deleted(subject, entry.version)
        record: Record = (rec.schema_key(subject, entry.version), None)
    else:
        if entry.deleted:
            raise errors.version_soft_deleted(subject, entry.version)
        _refuse_if_referenced(state, subject, entry.version)
        record = _deleted_record(state, subject, entry)
    return Write([record], lambda _after: Reply(200, entry.version))


def _refuse_if_referenced(state: RegistryState, subject: str, version: int) -> None:
    if state.referenced_by(subject, version):
        raise errors.reference_exists(
            f"One or more references exist to the schema "
            f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}."
        )


def _deleted_record(state: RegistryState, subject: str, entry: VersionEntry) -> Record:
    stored = state.schemas[entry.schema_id]
    value = SchemaValue(
        subject,
        entry.version,
        stored.schema_id,
        stored.schema_type,
        stored.text,
        stored.references,
        deleted=True,
    )
    return rec.schema_record(value)


def set_level(state: RegistryState, subject: str | None, body: Any) -> Write:
    level = body.get("compatibility") if isinstance(body, dict) else None
    if not isinstance(level, str) or level.upper() not in _levels():
        raise errors.invalid_compatibility_level()
    if subject is not None:
        check_subject(subject)
    chosen = level.upper()
    return Write(
        [rec.config_record(subject, chosen)], lambda _after: Reply(200, {"compatibility": chosen})
    )


def get_level(state: RegistryState, subject: str | None, default_to_global: bool) -> Reply:
    if subject is not None and subject not in state.subject_levels and not default_to_global:
        raise errors.compatibility_not_configured(subject)
    return Reply(200, {"compatibilityLevel": state.level_of(subject)})


def delete_level(state: RegistryState, subject: str | None) -> Write:
    if (
        subject is not None
        and subject not in state.subject_levels
        and subject not in state.subjects
    ):
        raise errors.subject_not_found(subject)
    previous = state.level_of(subject)
    return Write(
        [rec.config_record(subject, None)],
        lambda _after: Reply(200, {"compatibilityLevel": previous}),
    )


def set_mode(state: RegistryState, subject: str | None, body: Any, force: bool) -> Write:
    mode = body.get("mode") if isinstance(body, dict) else None
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise errors.invalid_mode()
    chosen = mode.upper()
    if subject is not None:
        check_subject(subject)
    has_schemas = bool(state.subjects.get(subject)) if subject is not None else bool(state.subjects)
    if chosen == "IMPORT" and has_schemas and not force:
        raise errors.not_permitted("Cannot import since found existing subjects")
    return Write([rec.mode_record(subject, chosen)], lambda _after: Reply(200, {"mode": chosen}))


def get_mode(state: RegistryState, subject: str | None, default_to_global: bool) -> Reply:
    if subject is not None and subject not in state.subject_modes and not default_to_global:
        raise errors.mode_not_configured(subject)
    return Reply(200, {"mode": state.mode_of(subject)})


def delete_mode(state: RegistryState, subject: str | None) -> Write:
    if subject is not None and subject not in state.subject_modes and subject not in state.subjects:
        raise errors.subject_not_found(subject)
    previous = state.mode_of(subject)
    return Write([rec.mode_record(subject, None)], lambda _after: Reply(200, {"mode": previous}))
