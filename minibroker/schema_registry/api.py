"""The REST API: a request (method, path, query, body) to a state command. Sans-IO.

The routes are those of Confluent's Schema Registry that serializers, deserializers and
the common tools call. Path segments are percent-decoded one by one, so a subject may hold
an encoded "/". Unknown paths answer 404 and known paths with another method 405, with
the registry's error body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from minibroker.schema_registry import errors
from minibroker.schema_registry import state as st
from minibroker.schema_registry.state import RegistryState, Reply, Write


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str  # path and query, as sent
    body: bytes = b""


Outcome = Reply | Write


@dataclass(frozen=True, slots=True)
class _Call:
    state: RegistryState
    params: list[str]
    query: dict[str, str]
    raw_body: bytes

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").lower() == "true"

    def body(self) -> Any:
        try:
            return json.loads(self.raw_body or b"null")
        except RecursionError as exc:  # nested deeper than the parser recurses
            raise errors.bad_request(400, 400, "The request body is nested too deeply") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.bad_request(
                400, 400, f"Unrecognized JSON in the request body: {exc}"
            ) from exc


Handler = Callable[[_Call], Outcome]


def _schema_by_id(call: _Call) -> st.StoredSchema:
    text = call.params[0]
    stored = call.state.schemas.get(int(text)) if text.isascii() and text.isdigit() else None
    if stored is None:
        raise errors.schema_not_found(int(text) if text.isascii() and text.isdigit() else None)
    return stored


def _usages(call: _Call, stored: st.StoredSchema) -> list[tuple[str, int]]:
    deleted = call.flag("deleted")
    return [
        (subject, entry.version)
        for subject, versions in sorted(call.state.subjects.items())
        for entry in sorted(versions.values(), key=lambda e: e.version)
        if entry.schema_id == stored.schema_id and (deleted or not entry.deleted)
    ]


def _get_schema_by_id(call: _Call) -> Outcome:
    stored = _schema_by_id(call)
    return Reply(200, call.state.schema_json(stored, fmt=call.query.get("format")))


def _get_raw_schema_by_id(call: _Call) -> Outcome:
    stored = _schema_by_id(call)
    return Reply(200, call.state.text_as(stored, call.query.get("format")))


def _subjects_of_id(call: _Call) -> Outcome:
    return Reply(200, sorted({s for s, _ in _usages(call, _schema_by_id(call))}))


def _versions_of_id(call: _Call) -> Outcome:
    pairs = _usages(call, _schema_by_id(call))
    return Reply(200, [{"subject": s, "version": v} for s, v in pairs])


def _list_schemas(call: _Call) -> Outcome:
    prefix = call.query.get("subjectPrefix", "")
    latest_only = call.flag("latestOnly")
    answer = []
    for subject in sorted(call.state.subjects):
        if not subject.startswith(prefix):
            continue
        entries = (
            call.state.all_versions(subject)
            if call.flag("deleted")
            else call.state.live_versions(subject)
        )
        for entry in entries[-1:] if latest_only else entries:
            stored = call.state.schemas[entry.schema_id]
            answer.append(call.state.schema_json(stored, subject=subject, version=entry.version))
    return Reply(200, answer)


def _list_subjects(call: _Call) -> Outcome:
    prefix = call.query.get("subjectPrefix", "")
    deleted_only = call.flag("deletedOnly")
    names = []
    for subject in sorted(call.state.subjects):
        if not subject.startswith(prefix):
            continue
        live = bool(call.state.live_versions(subject))
        if (deleted_only and not live) or (not deleted_only and (live or call.flag("deleted"))):
            names.append(subject)
    return Reply(200, names)


def _list_versions(call: _Call) -> Outcome:
    subject = call.params[0]
    if call.flag("deletedOnly"):
        entries = [e for e in call.state.all_versions(subject) if e.deleted]
    elif call.flag("deleted"):
        entries = call.state.all_versions(subject)
    else:
        entries = call.state.live_versions(subject)
    if not entries and not call.state.subjects.get(subject):
        raise errors.subject_not_found(subject)
    if not entries and not call.flag("deletedOnly"):
        raise errors.subject_not_found(subject)
    return Reply(200, [e.version for e in entries])


def _get_version(call: _Call) -> Outcome:
    subject, version = call.params
    entry = st.find_version(call.state, subject, version, call.flag("deleted"))
    stored = call.state.schemas[entry.schema_id]
    body = call.state.schema_json(
        stored, subject=subject, version=entry.version, fmt=call.query.get("format")
    )
    return Reply(200, body)


def _get_raw_version(call: _Call) -> Outcome:
    subject, version = call.params
    entry = st.find_version(call.state, subject, version, call.flag("deleted"))
    return Reply(
        200, call.state.text_as(call.state.schemas[entry.schema_id], call.query.get("format"))
    )


def _referenced_by(call: _Call) -> Outcome:
    subject, version = call.params
    entry = st.find_version(call.state, subject, version, True)
    return Reply(200, call.state.referenced_by(subject, entry.version))


def _register(call: _Call) -> Outcome:
    return st.register(call.state, call.params[0], call.body(), call.flag("normalize"))


def _lookup(call: _Call) -> Outcome:
    return st.lookup(
        call.state, call.params[0], call.body(), call.flag("normalize"), call.flag("deleted")
    )


def _delete_subject(call: _Call) -> Outcome:
    return st.delete_subject(call.state, call.params[0], call.flag("permanent"))


def _delete_version(call: _Call) -> Outcome:
    subject, version = call.params
    return st.delete_version(call.state, subject, version, call.flag("permanent"))


def _subject(call: _Call) -> str | None:
    return call.params[0] if call.params else None


def _compatibility(call: _Call) -> Outcome:
    version = call.params[1] if len(call.params) > 1 else None
    return st.compatibility_of(
        call.state,
        call.params[0],
        version,
        call.body(),
        call.flag("normalize"),
        call.flag("verbose"),
    )


# (method, path pattern) -> handler; "*" is one path segment.
ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", ""): lambda call: Reply(200, {}),
    ("GET", "contexts"): lambda call: Reply(200, ["."]),
    ("GET", "schemas"): _list_schemas,
    ("GET", "schemas/types"): lambda call: Reply(200, ["JSON", "PROTOBUF", "AVRO"]),
    ("GET", "schemas/ids/*"): _get_schema_by_id,
    ("GET", "schemas/ids/*/schema"): _get_raw_schema_by_id,
    ("GET", "schemas/ids/*/subjects"): _subjects_of_id,
    ("GET", "schemas/ids/*/versions"): _versions_of_id,
    ("GET", "subjects"): _list_subjects,
    ("POST", "subjects/*"): _lookup,
    ("DELETE", "subjects/*"): _delete_subject,
    ("GET", "subjects/*/versions"): _list_versions,
    ("POST", "subjects/*/versions"): _register,
    ("GET", "subjects/*/versions/*"): _get_version,
    ("DELETE", "subjects/*/versions/*"): _delete_version,
    ("GET", "subjects/*/versions/*/schema"): _get_raw_version,
    ("GET", "subjects/*/versions/*/referencedby"): _referenced_by,
    ("GET", "config"): lambda call: st.get_level(call.state, None, True),
    ("PUT", "config"): lambda call: st.set_level(call.state, None, call.body()),
    ("DELETE", "config"): lambda call: st.delete_level(call.state, None),
    ("GET", "config/*"): lambda call: st.get_level(
        call.state, _subject(call), call.flag("defaultToGlobal")
    ),
    ("PUT", "config/*"): lambda call: st.set_level(call.state, _subject(call), call.body()),
    ("DELETE", "config/*"): lambda call: st.delete_level(call.state, _subject(call)),
    ("GET", "mode"): lambda call: st.get_mode(call.state, None, True),
    ("PUT", "mode"): lambda call: st.set_mode(call.state, None, call.body(), call.flag("force")),
    ("DELETE", "mode"): lambda call: st.delete_mode(call.state, None),
    ("GET", "mode/*"): lambda call: st.get_mode(
        call.state, _subject(call), call.flag("defaultToGlobal")
    ),
    ("PUT", "mode/*"): lambda call: st.set_mode(
        call.state, _subject(call), call.body(), call.flag("force")
    ),
    ("DELETE", "mode/*"): lambda call: st.delete_mode(call.state, _subject(call)),
    ("POST", "compatibility/subjects/*/versions"): _compatibility,
    ("POST", "compatibility/subjects/*/versions/*"): _compatibility,
}


def _matches(pattern: str, segments: list[str]) -> list[str] | None:
    """The parameters of a path under a pattern, or None when it does not match."""
    parts = pattern.split("/") if pattern else []
    if len(parts) != len(segments):
        return None
    params = []
    for part, segment in zip(parts, segments, strict=True):
        if part == "*":
            params.append(segment)
        elif part != segment:
            return None
    return params


def route(request: Request) -> tuple[Handler, list[str], dict[str, str]]:
    path, _, query_text = request.target.partition("?")
    try:
        segments = [unquote(s, errors="strict") for s in path.strip("/").split("/")]
        query = {k: v[-1] for k, v in parse_qs(query_text, errors="strict").items()}
    except UnicodeDecodeError as exc:
        raise errors.bad_request(400, 400, "The request target is not valid UTF-8") from exc
    if segments == [""]:
        segments = []
    # The most literal pattern wins: "schemas/types" before a subject named "types".
    matched = sorted(
        (
            (pattern.count("*"), method, pattern, params)
            for (method, pattern) in ROUTES
            if (params := _matches(pattern, segments)) is not None
        ),
    )
    for _, method, pattern, params in matched:
        if method == request.method:
            return ROUTES[(method, pattern)], params, query
    if matched:
        raise errors.bad_request(405, 405, "HTTP 405 Method Not Allowed")
    raise errors.bad_request(404, 404, "HTTP 404 Not Found")


def handle(state: RegistryState, request: Request) -> Outcome:
    """The answer to a request, or the records to write first. Raises RegistryError."""
    handler, params, query = route(request)
    return handler(_Call(state, params, query, request.body))
