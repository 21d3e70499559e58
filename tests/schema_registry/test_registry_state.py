"""The registry's rules, sans-IO: commands against a state rebuilt from `_schemas` records."""

from __future__ import annotations

import json

import pytest

from minibroker.schema_registry import api, errors
from minibroker.schema_registry import records as rec
from minibroker.schema_registry.records import SchemaValue
from minibroker.schema_registry.state import Lost, RegistryState, Reply, Write

STRING = '"string"'
LONG = '"long"'
RECORD = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'


def run(state: RegistryState, method: str, target: str, body: object = None) -> Reply:
    """One request, its records applied as the topic would give them back."""
    raw = b"" if body is None else json.dumps(body).encode()
    outcome = api.handle(state, api.Request(method, target, raw))
    if isinstance(outcome, Write):
        for key, value in outcome.records:
            state.apply(key, value)
        return outcome.answer(state)
    return outcome


def refused(state: RegistryState, method: str, target: str, body: object = None) -> int:
    with pytest.raises(errors.RegistryError) as caught:
        run(state, method, target, body)
    return caught.value.error_code


def register(state: RegistryState, subject: str, schema: str, **extra: object) -> int:
    answer = run(state, "POST", f"/subjects/{subject}/versions", {"schema": schema, **extra})
    return int(answer.body["id"])


def test_the_same_schema_has_one_id_across_subjects_and_registrations() -> None:
    state = RegistryState()
    first = register(state, "a", STRING)
    assert register(state, "b", STRING) == first
    again = api.handle(
        state, api.Request("POST", "/subjects/a/versions", b'{"schema":"\\"string\\""}')
    )
    assert isinstance(again, Reply)  # nothing to write
    assert run(state, "GET", "/subjects/a/versions").body == [1]
    run(state, "PUT", "/config/a", {"compatibility": "NONE"})
    assert register(state, "a", LONG, schemaType="AVRO") == first + 1
    assert run(state, "GET", f"/schemas/ids/{first}/subjects").body == ["a", "b"]


def test_versions_go_on_after_a_soft_delete_and_permanent_needs_soft_first() -> None:
    state = RegistryState()
    run(state, "PUT", "/config", {"compatibility": "NONE"})
    register(state, "s", STRING)
    register(state, "s", LONG)
    assert refused(state, "DELETE", "/subjects/s/versions/1?permanent=true") == 40407
    assert run(state, "DELETE", "/subjects/s/versions/1").body == 1
    assert refused(state, "DELETE", "/subjects/s/versions/1") == 40406
    assert run(state, "GET", "/subjects/s/versions").body == [2]
    assert run(state, "GET", "/subjects/s/versions?deleted=true").body == [1, 2]
    register(state, "s", RECORD)
    assert run(state, "GET", "/subjects/s/versions").body == [2, 3]
    assert refused(state, "DELETE", "/subjects/s?permanent=true") == 40405
    assert run(state, "DELETE", "/subjects/s").body == [2, 3]
    assert refused(state, "DELETE", "/subjects/s") == 40404
    assert refused(state, "GET", "/subjects/s/versions") == 40401
    assert run(state, "DELETE", "/subjects/s?permanent=true").body == [1, 2, 3]
    assert run(state, "GET", "/subjects?deleted=true").body == []
    # The ids of schemas gone for good are not given again.
    assert register(state, "t", '"bytes"') == 4


def test_the_first_record_for_an_id_wins_and_the_loser_runs_again() -> None:
    state = RegistryState()
    outcome = api.handle(
        state, api.Request("POST", "/subjects/mine/versions", b'{"schema":"\\"string\\""}')
    )
    assert isinstance(outcome, Write)
    # Another registry wrote id 1 for another schema first.
    rival = SchemaValue("theirs", 1, 1, "AVRO", LONG)
    state.apply(*rec.schema_record(rival))
    for key, value in outcome.records:
        state.apply(key, value)
    with pytest.raises(Lost):
        outcome.answer(state)
    assert run(state, "GET", "/schemas/ids/1").body["schema"] == LONG
    assert register(state, "mine", STRING) == 2


def test_the_loser_of_a_version_race_can_write_the_winners_record_again() -> None:
    state = RegistryState()
    winner = rec.schema_record(SchemaValue("s", 1, 1, "AVRO", LONG))
    loser = rec.schema_record(SchemaValue("s", 1, 2, "AVRO", STRING))
    state.apply(*winner)
    state.apply(*loser)
    assert run(state, "GET", "/subjects/s/versions/1").body["id"] == 1
    assert state.current_record(loser[0]) == winner
    # Compaction keeps only the last record of the key: written again, the winner's stays.
    compacted = RegistryState()
    compacted.apply(*winner)
    assert run(compacted, "GET", "/subjects/s/versions/1").body["id"] == 1
    assert state.current_record(b'{"keytype":"CONFIG","subject":null,"magic":0}') is None


def test_a_referenced_version_cannot_be_deleted() -> None:
    state = RegistryState()
    register(state, "ref", RECORD)
    outer = '{"type":"record","name":"Outer","fields":[{"name":"r","type":"R"}]}'
    references = [{"name": "R", "subject": "ref", "version": 1}]
    outer_id = register(state, "outer", outer, references=references)
    assert refused(state, "DELETE", "/subjects/ref/versions/1") == errors.REFERENCE_EXISTS
    assert run(state, "GET", "/subjects/ref/versions/1/referencedby").body == [outer_id]
    assert run(state, "GET", f"/schemas/ids/{outer_id}").body["references"] == references
    missing = [{"name": "X", "subject": "nowhere", "version": 1}]
    assert (
        refused(state, "POST", "/subjects/x/versions", {"schema": outer, "references": missing})
        == 42201
    )


def test_read_only_mode_refuses_writes_and_import_mode_takes_ids() -> None:
    state = RegistryState()
    run(state, "PUT", "/mode", {"mode": "READONLY"})
    assert refused(state, "POST", "/subjects/s/versions", {"schema": STRING}) == 42205
    run(state, "PUT", "/mode", {"mode": "IMPORT"})
    assert register(state, "s", STRING, id=42, version=7) == 42
    assert run(state, "GET", "/subjects/s/versions/7").body["id"] == 42
    run(state, "PUT", "/mode", {"mode": "READWRITE"})
    assert refused(state, "POST", "/subjects/s/versions", {"schema": LONG, "id": 9}) == 42205
    assert refused(state, "PUT", "/mode", {"mode": "SIDEWAYS"}) == 42204


def test_config_levels_and_their_errors() -> None:
    state = RegistryState()
    assert run(state, "GET", "/config").body == {"compatibilityLevel": "BACKWARD"}
    assert refused(state, "GET", "/config/s") == 40408
    assert run(state, "GET", "/config/s?defaultToGlobal=true").body == {
        "compatibilityLevel": "BACKWARD"
    }
    assert run(state, "PUT", "/config/s", {"compatibility": "full"}).body == {
        "compatibility": "FULL"
    }
    assert run(state, "GET", "/config/s").body == {"compatibilityLevel": "FULL"}
    assert refused(state, "PUT", "/config", {"compatibility": "SOMETIMES"}) == 42203
    assert run(state, "DELETE", "/config/s").body == {"compatibilityLevel": "FULL"}
    assert refused(state, "GET", "/config/s") == 40408


def test_versions_and_paths_are_checked() -> None:
    state = RegistryState()
    register(state, "s", STRING)
    assert refused(state, "GET", "/subjects/s/versions/0") == 42202
    assert refused(state, "GET", "/subjects/s/versions/2147483648") == 42202
    assert refused(state, "GET", "/subjects/s/versions/2") == 40402
    assert run(state, "GET", "/subjects/s/versions/latest").body["version"] == 1
    assert refused(state, "GET", "/schemas/ids/99") == 40403
    assert refused(state, "GET", "/no/such/route") == 404
    assert refused(state, "PATCH", "/subjects") == 405
    assert refused(state, "POST", "/subjects/s/versions", None) == 422
    assert refused(state, "POST", "/subjects/s/versions", {"schemaType": "AVRO"}) == 42201
    assert refused(state, "POST", "/subjects/%00/versions", {"schema": STRING}) == 42208
    assert (
        refused(state, "POST", "/subjects/s/versions", {"schema": STRING, "schemaType": "XML"})
        == 42201
    )
    # A subject may be named like a route's literal segment, or hold an encoded "/".
    register(state, "types", STRING)
    register(state, "a%2Fb", STRING)
    assert run(state, "GET", "/subjects").body == ["a/b", "s", "types"]


def test_a_state_rebuilt_from_the_records_answers_the_same() -> None:
    state = RegistryState()
    written: list[tuple[bytes, bytes | None]] = []
    for method, target, body in [
        ("PUT", "/config", {"compatibility": "NONE"}),
        ("POST", "/subjects/a/versions", {"schema": STRING}),
        ("POST", "/subjects/a/versions", {"schema": LONG}),
        ("POST", "/subjects/b/versions", {"schema": LONG}),
        ("DELETE", "/subjects/a/versions/1", None),
        ("PUT", "/mode/b", {"mode": "READONLY"}),
    ]:
        outcome = api.handle(state, api.Request(method, target, json.dumps(body).encode()))
        assert isinstance(outcome, Write)
        for key, value in outcome.records:
            state.apply(key, value)
            written.append((key, value))
    replayed = RegistryState()
    for key, value in [*written, (b"not json", b"x"), (b'{"keytype":"NOOP","magic":0}', None)]:
        replayed.apply(key, value)
    for target in [
        "/subjects",
        "/subjects/a/versions?deleted=true",
        "/schemas/ids/2/versions",
        "/mode/b",
        "/config",
    ]:
        assert run(replayed, "GET", target).body == run(state, "GET", target).body
