"""The Schema Registry's REST API as confluent-kafka's SchemaRegistryClient and raw HTTP see it.

Every expected answer is Confluent Schema Registry's: the status codes, error codes and
messages of io.confluent.kafka.schemaregistry.rest.exceptions (Errors.java,
RestInvalidVersionException, RestInvalidCompatibilityException, RestInvalidModeException),
the resources' documented answers (docs.confluent.io, Schema Registry API reference) and
rest-utils' mappers for malformed JSON (400) and unknown routes (404/405, "HTTP 404 Not
Found"). Subjects get unique names, so the tests share one broker; the tests that change
the global config or mode get a broker of their own.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError

from minibroker import Broker

# Registering needs the Avro schema type and the compatibility rules.
from tests.schema_registry.conftest import INCOMPATIBLE, RawHttp, Response

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _avro(name: str, *fields: tuple[str, Any], default: dict[str, Any] | None = None) -> str:
    """An Avro record in Avro's own canonical layout (compact, attributes in the order
    Avro's Schema.toString writes them), so the text answered equals the text sent."""
    listed = []
    for field_name, field_type in fields:
        field: dict[str, Any] = {"name": field_name, "type": field_type}
        if default and field_name in default:
            field["default"] = default[field_name]
        listed.append(field)
    return json.dumps({"type": "record", "name": name, "fields": listed}, separators=(",", ":"))


USER_V1 = _avro("User", ("name", "string"))
USER_V2 = _avro("User", ("name", "string"), ("age", "int"), default={"age": 0})
# A reader whose `name` is an int cannot read the strings USER_V1 wrote: refused by BACKWARD.
USER_RETYPED = _avro("User", ("name", "int"))


def _subject(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def registry_url() -> Iterator[str]:
    with Broker(schema_registry=True) as broker:
        yield broker.schema_registry_url


@pytest.fixture
def own_registry_url() -> Iterator[str]:
    """A broker of the test's own, for tests that change registry-wide settings."""
    with Broker(schema_registry=True) as broker:
        yield broker.schema_registry_url


@pytest.fixture
def client(registry_url: str) -> SchemaRegistryClient:
    return _client(registry_url)


@pytest.fixture
def http(registry_url: str) -> Iterator[RawHttp]:
    with RawHttp(registry_url, timeout=10) as raw:
        yield raw


def _client(url: str) -> SchemaRegistryClient:
    # No caches: every call below goes to the registry.
    return SchemaRegistryClient({"url": url, "cache.capacity": 1, "max.retries": 0})


def _avro_schema(text: str, references: list[SchemaReference] | None = None) -> Schema:
    return Schema(text, "AVRO", references or [])


def _refused(call: Any, *args: Any, **kwargs: Any) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as raised:
        call(*args, **kwargs)
    return raised.value


def _assert_refusal(
    error: SchemaRegistryError, status: int, code: int, message: str | None = None
) -> None:
    assert (error.http_status_code, error.error_code) == (status, code), str(error)
    if message is not None:
        assert error.error_message == message


def _assert_error_body(
    response: Response, status: int, code: int, message: str | None = None
) -> dict[str, Any]:
    """Confluent's error body: exactly error_code and message, in its own content type."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(CONTENT_TYPE)
    body = response.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    if message is not None:
        assert body["message"] == message
    return dict(body)


def _register(client: SchemaRegistryClient, subject: str, text: str) -> int:
    return client.register_schema(subject, _avro_schema(text))


# --- registering, looking up, reading -------------------------------------------------


def test_a_registered_schema_is_found_by_id_version_latest_and_lookup(
    client: SchemaRegistryClient,
) -> None:
    subject = _subject()
    schema_id = _register(client, subject, USER_V1)

    assert client.get_schema(schema_id).schema_str == USER_V1
    by_version = client.get_version(subject, 1)
    assert (by_version.schema_id, by_version.subject, by_version.version) == (
        schema_id,
        subject,
        1,
    )
    assert by_version.schema.schema_str == USER_V1
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    found = client.lookup_schema(subject, _avro_schema(USER_V1))
    assert (found.schema_id, found.subject, found.version) == (schema_id, subject, 1)
    assert client.get_versions(subject) == [1]
    assert subject in client.get_subjects()


def test_registering_the_same_schema_again_adds_no_version(
    client: SchemaRegistryClient, registry_url: str
) -> None:
    subject = _subject()
    first = _register(client, subject, USER_V1)
    # The same schema with other whitespace: the same schema to Confluent (canonical form).
    spaced = json.dumps(json.loads(USER_V1), indent=2)
    assert _register(_client(registry_url), subject, spaced) == first
    assert client.get_versions(subject) == [1]


def test_a_second_version_gets_a_new_id_and_becomes_latest(
    client: SchemaRegistryClient, http: RawHttp
) -> None:
    subject = _subject()
    first = _register(client, subject, USER_V1)
    second = _register(client, subject, USER_V2)
    assert second != first
    assert client.get_versions(subject) == [1, 2]
    assert client.get_latest_version(subject).schema_id == second
    assert client.get_version(subject, "latest").version == 2

    raw_latest = http.get(f"/subjects/{subject}/versions/latest/schema")
    assert raw_latest.status_code == 200
    assert raw_latest.headers["content-type"].startswith(CONTENT_TYPE)
    assert json.loads(raw_latest.text) == json.loads(USER_V2)
    assert json.loads(http.get(f"/subjects/{subject}/versions/1/schema").text) == json.loads(
        USER_V1
    )


def test_the_same_schema_under_two_subjects_gets_one_id(client: SchemaRegistryClient) -> None:
    first, second = sorted([_subject("a"), _subject("b")])
    schema = _avro("Shared" + uuid.uuid4().hex[:6], ("x", "long"))
    schema_id = _register(client, first, schema)
    assert _register(client, second, schema) == schema_id

    assert sorted(client.get_subjects_by_schema_id(schema_id)) == [first, second]
    versions = client.get_schema_versions(schema_id)
    assert sorted((v.subject, v.version) for v in versions) == [(first, 1), (second, 1)]


def _unique_record() -> str:
    """A schema no other test registers, so that its id belongs to one subject only."""
    return _avro("Only" + uuid.uuid4().hex[:8], ("name", "string"))


def test_the_raw_answers_of_schemas_by_id(client: SchemaRegistryClient, http: RawHttp) -> None:
    subject = _subject()
    text = _unique_record()
    schema_id = _register(client, subject, text)

    by_id = http.get(f"/schemas/ids/{schema_id}")
    assert by_id.status_code == 200
    assert by_id.headers["content-type"].startswith(CONTENT_TYPE)
    assert by_id.json()["schema"] == text
    assert by_id.json().get("schemaType", "AVRO") == "AVRO"

    raw = http.get(f"/schemas/ids/{schema_id}/schema")
    assert raw.status_code == 200
    assert json.loads(raw.text) == json.loads(text)

    assert http.get(f"/schemas/ids/{schema_id}/subjects").json() == [subject]
    assert http.get(f"/schemas/ids/{schema_id}/versions").json() == [
        {"subject": subject, "version": 1}
    ]

    version = http.get(f"/subjects/{subject}/versions/1").json()
    assert {key: version[key] for key in ("subject", "version", "id", "schema")} == {
        "subject": subject,
        "version": 1,
        "id": schema_id,
        "schema": text,
    }


def test_protobuf_and_json_schemas_are_answered_with_their_type(
    client: SchemaRegistryClient, http: RawHttp
) -> None:
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    package = f"acme{uuid.uuid4().hex[:6]}"
    proto = f'syntax = "proto3";\npackage {package};\n\nmessage M {{\n  string n = 1;\n}}\n'
    proto_id = client.register_schema(_subject(), Schema(proto, "PROTOBUF"))
    assert http.get(f"/schemas/ids/{proto_id}").json()["schemaType"] == "PROTOBUF"
    # format=serialized: the base64 FileDescriptorProto the Python serializers read.
    serialized = http.get(f"/schemas/ids/{proto_id}?format=serialized").json()["schema"]
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert (file.package, [m.name for m in file.message_type]) == (package, ["M"])

    document = '{"type":"object","properties":{"n":{"type":"string"}}}'
    json_id = client.register_schema(_subject(), Schema(document, "JSON"))
    answer = http.get(f"/schemas/ids/{json_id}").json()
    assert answer["schemaType"] == "JSON"
    assert json.loads(answer["schema"]) == json.loads(document)


def test_subjects_are_listed_and_filtered_by_prefix(client: SchemaRegistryClient) -> None:
    prefix = _subject("prefix")
    subjects = [f"{prefix}-one", f"{prefix}-two"]
    for subject in subjects:
        _register(client, subject, USER_V1)
    assert set(subjects) <= set(client.get_subjects())
    assert sorted(client.get_subjects(subject_prefix=prefix)) == subjects


def test_the_schema_types(client: SchemaRegistryClient) -> None:
    assert sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]


def test_a_request_in_each_accepted_content_type(http: RawHttp) -> None:
    subject = _subject()
    for content_type in (CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json"):
        answer = http.post(
            f"/subjects/{subject}/versions",
            content=json.dumps({"schema": USER_V1}),
            headers={"Content-Type": content_type},
        )
        assert answer.status_code == 200, (content_type, answer.text)
        assert answer.headers["content-type"].startswith(CONTENT_TYPE)
        assert isinstance(answer.json()["id"], int)


def test_the_clients_capitalised_booleans_are_understood(http: RawHttp) -> None:
    """confluent-kafka writes `normalize=False` and `deleted=False` into its URLs (Python's
    str(bool)); Confluent's JAX-RS parses booleans case-insensitively."""
    subject = _subject()
    answer = http.post(
        f"/subjects/{subject}/versions?normalize=False", json_body={"schema": USER_V1}
    )
    assert answer.status_code == 200, answer.text
    looked_up = http.post(
        f"/subjects/{subject}?normalize=True&deleted=False", json_body={"schema": USER_V1}
    )
    assert looked_up.status_code == 200, looked_up.text
    assert looked_up.json()["id"] == answer.json()["id"]


def test_latest_is_also_minus_one_and_any_case(client: SchemaRegistryClient, http: RawHttp) -> None:
    """Confluent's VersionId: "latest" in any case, and -1, name the latest version."""
    subject = _subject()
    _register(client, subject, USER_V1)
    _register(client, subject, USER_V2)
    answers = {}
    for version in ("latest", "LATEST", "-1", "%20latest%20", "02"):
        answer = http.get(f"/subjects/{subject}/versions/{version}")
        answers[version] = answer.json().get("version", answer.text)
    assert answers == {"latest": 2, "LATEST": 2, "-1": 2, "%20latest%20": 2, "02": 2}


@pytest.mark.parametrize("name", ["with space", "ünïcödé-välue", "dots.and_under-scores", "a:b"])
def test_subject_names_are_taken_as_given(
    client: SchemaRegistryClient, http: RawHttp, name: str
) -> None:
    subject = f"{name}-{uuid.uuid4().hex[:6]}"
    schema_id = _register(client, subject, USER_V1)
    assert subject in client.get_subjects()
    assert client.get_version(subject, 1).subject == subject
    assert client.lookup_schema(subject, _avro_schema(USER_V1)).schema_id == schema_id
    assert client.delete_subject(subject) == [1]


# --- errors for what does not exist or is invalid -------------------------------------


def test_unknown_subject_version_and_id(client: SchemaRegistryClient) -> None:
    missing = _subject("missing")
    _assert_refusal(
        _refused(client.get_versions, missing), 404, 40401, f"Subject '{missing}' not found."
    )
    _assert_refusal(_refused(client.get_version, missing, 1), 404, 40401)
    _assert_refusal(_refused(client.get_latest_version, missing), 404, 40401)

    subject = _subject()
    _register(client, subject, USER_V1)
    _assert_refusal(_refused(client.get_version, subject, 99), 404, 40402, "Version 99 not found.")
    _assert_refusal(_refused(client.get_schema, 987654), 404, 40403, "Schema 987654 not found")


def test_lookup_of_an_unregistered_schema(client: SchemaRegistryClient) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    _assert_refusal(
        _refused(client.lookup_schema, subject, _avro_schema(USER_V2)),
        404,
        40403,
        "Schema not found",
    )
    missing = _subject("missing")
    _assert_refusal(_refused(client.lookup_schema, missing, _avro_schema(USER_V1)), 404, 40401)


@pytest.mark.parametrize("version", ["0", "-2", "abc", "2147483648"])
def test_invalid_version_ids(http: RawHttp, client: SchemaRegistryClient, version: str) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    _assert_error_body(
        http.get(f"/subjects/{subject}/versions/{version}"),
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "record", "name": "NoFields"}',
        '{"type": "nonsense"}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}',
        "not json at all",
        "[" * 50_000 + "]" * 50_000,
    ],
    ids=["no fields", "unknown type", "unknown named type", "not json", "deeply nested"],
)
def test_an_invalid_schema_is_refused_with_42201(client: SchemaRegistryClient, text: str) -> None:
    _assert_refusal(_refused(client.register_schema, _subject(), _avro_schema(text)), 422, 42201)


def test_an_unknown_schema_type_is_refused_with_42201(http: RawHttp) -> None:
    answer = http.post(
        f"/subjects/{_subject()}/versions", json_body={"schema": USER_V1, "schemaType": "XML"}
    )
    _assert_error_body(answer, 422, 42201)


def test_malformed_json_gets_400(http: RawHttp) -> None:
    answer = http.post(
        f"/subjects/{_subject()}/versions",
        content=b'{"schema": ',
        headers={"Content-Type": CONTENT_TYPE},
    )
    _assert_error_body(answer, 400, 400)


def test_unknown_routes_and_methods(http: RawHttp) -> None:
    _assert_error_body(http.get("/no/such/route"), 404, 404, "HTTP 404 Not Found")
    _assert_error_body(http.request("PATCH", "/subjects"), 405, 405, "HTTP 405 Method Not Allowed")


# --- deleting ------------------------------------------------------------------------


def test_soft_and_permanent_deletes_of_versions(client: SchemaRegistryClient) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    _register(client, subject, USER_V2)

    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.get_versions(subject, deleted=True) == [1, 2]
    _assert_refusal(_refused(client.get_version, subject, 1), 404, 40402)
    assert client.get_version(subject, 1, deleted=True).schema.schema_str == USER_V1

    _assert_refusal(
        _refused(client.delete_version, subject, 1),
        404,
        40406,
        f"Subject '{subject}' Version 1 was soft deleted.Set permanent=true to delete permanently",
    )
    _assert_refusal(
        _refused(client.delete_version, subject, 2, permanent=True),
        404,
        40407,
        f"Subject '{subject}' Version 2 was not deleted first before being permanently deleted",
    )
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.get_versions(subject, deleted=True) == [2]
    _assert_refusal(_refused(client.delete_version, subject, 7), 404, 40402)


def test_soft_and_permanent_deletes_of_subjects(client: SchemaRegistryClient) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    _register(client, subject, USER_V2)

    _assert_refusal(
        _refused(client.delete_subject, subject, permanent=True),
        404,
        40405,
        f"Subject '{subject}' was not deleted first before being permanently deleted",
    )
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    _assert_refusal(_refused(client.get_versions, subject), 404, 40401)
    assert client.get_versions(subject, deleted=True) == [1, 2]
    _assert_refusal(
        _refused(client.delete_subject, subject),
        404,
        40404,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )

    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in client.get_subjects(deleted=True)
    _assert_refusal(_refused(client.delete_subject, _subject("missing")), 404, 40401)


def test_deleted_only_listings(client: SchemaRegistryClient, http: RawHttp) -> None:
    """`deletedOnly=true` (SubjectsResource, SubjectVersionsResource): subjects whose every
    version is soft-deleted, and a subject's soft-deleted versions."""
    live, gone = _subject("live"), _subject("gone")
    _register(client, live, USER_V1)
    _register(client, live, USER_V2)
    _register(client, gone, USER_V1)
    client.delete_version(live, 2)
    client.delete_subject(gone)

    deleted_only = http.get("/subjects?deletedOnly=true").json()
    assert gone in deleted_only and live not in deleted_only
    assert http.get(f"/subjects/{live}/versions?deletedOnly=true").json() == [2]
    assert http.get(f"/subjects/{live}/versions?deleted=true&deletedOnly=true").json() == [2]
    # confluent-kafka sends `deleted_only`, a parameter Confluent does not read: the
    # answer is the default listing, here as there.
    assert gone not in client.get_subjects(deleted_only=True)
    assert client.get_versions(live, deleted_only=True) == [1]


def test_registering_after_a_soft_delete(client: SchemaRegistryClient, registry_url: str) -> None:
    """Confluent's KafkaSchemaRegistry.register: versions go on from the highest ever
    given, deleted ones included; only live versions are checked for compatibility; a
    schema registered before keeps its id."""
    subject = _subject()
    first_id = _register(client, subject, USER_V1)
    _register(client, subject, USER_V2)
    client.delete_subject(subject)

    retyped_id = _register(client, subject, USER_RETYPED)
    assert client.get_versions(subject) == [3]
    assert client.get_version(subject, 3).schema_id == retyped_id
    client.set_compatibility(subject, "NONE")
    again = _client(registry_url).register_schema(subject, _avro_schema(USER_V1))
    assert again == first_id
    assert client.get_versions(subject)[-1] == 4


def test_deleted_listings_by_id(client: SchemaRegistryClient) -> None:
    subject = _subject()
    text = _unique_record()
    schema_id = _register(client, subject, text)
    client.delete_subject(subject)
    assert client.get_subjects_by_schema_id(schema_id) == []
    assert client.get_subjects_by_schema_id(schema_id, deleted=True) == [subject]
    # The schema itself stays readable by id after a soft delete.
    assert client.get_schema(schema_id).schema_str == text


# --- config and compatibility --------------------------------------------------------


def test_global_config(own_registry_url: str) -> None:
    client = _client(own_registry_url)
    with RawHttp(own_registry_url, timeout=10) as http:
        assert http.get("/config").json()["compatibilityLevel"] == "BACKWARD"
        updated = http.put("/config", json_body={"compatibility": "FULL"})
        assert updated.status_code == 200
        assert updated.json() == {"compatibility": "FULL"}
        assert client.get_compatibility() == "FULL"
        _assert_error_body(
            http.put("/config", json_body={"compatibility": "SIDEWAYS"}),
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )
        assert client.get_compatibility() == "FULL"


def test_subject_config(client: SchemaRegistryClient, http: RawHttp) -> None:
    subject = _subject()
    _assert_error_body(
        http.get(f"/config/{subject}"),
        404,
        40408,
        f"Subject '{subject}' does not have subject-level compatibility configured",
    )
    assert (
        http.get(f"/config/{subject}?defaultToGlobal=true").json()["compatibilityLevel"]
        == (http.get("/config").json()["compatibilityLevel"])
    )

    # The client's annotation says str; it hands back the registry's JSON answer.
    updated: Any = client.set_compatibility(subject, "none")
    assert updated == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert http.get(f"/config/{subject}").json()["compatibilityLevel"] == "NONE"
    # The subject's level lets an evolution through that the global BACKWARD refuses.
    _register(client, subject, USER_V1)
    _register(client, subject, USER_RETYPED)

    deleted = http.delete(f"/config/{subject}")
    assert deleted.status_code == 200
    assert deleted.json()["compatibilityLevel"] == "NONE"
    _assert_error_body(http.get(f"/config/{subject}"), 404, 40408)


def test_an_incompatible_schema_is_refused_with_409(client: SchemaRegistryClient) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    error = _refused(client.register_schema, subject, _avro_schema(USER_RETYPED))
    assert error.http_status_code == 409
    assert error.error_code in INCOMPATIBLE, str(error)
    assert error.error_message.startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}"'
    )
    assert client.get_versions(subject) == [1]


def test_compatibility_checks(client: SchemaRegistryClient, http: RawHttp) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    assert client.test_compatibility(subject, _avro_schema(USER_V2)) is True
    assert client.test_compatibility(subject, _avro_schema(USER_RETYPED)) is False
    assert client.test_compatibility(subject, _avro_schema(USER_V2), version=1) is True
    assert client.test_compatibility_all_versions(subject, _avro_schema(USER_RETYPED)) is False

    terse = http.post(
        f"/compatibility/subjects/{subject}/versions/latest", json_body={"schema": USER_RETYPED}
    )
    assert terse.status_code == 200
    assert terse.json() == {"is_compatible": False}
    verbose = http.post(
        f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
        json_body={"schema": USER_RETYPED},
    )
    assert verbose.status_code == 200
    body = verbose.json()
    assert body["is_compatible"] is False
    messages = body["messages"]
    assert messages and all(isinstance(line, str) for line in messages)
    # Confluent's lines: the difference (AvroSchema's Difference), then the version it
    # was found against (SchemaValidatorBuilder) and the level (AbstractSchemaRegistry).
    assert any(line.startswith("{errorType:'TYPE_MISMATCH'") for line in messages), messages
    assert "{oldSchemaVersion: 1}" in messages
    assert "{validateFields: 'false', compatibility: 'BACKWARD'}" in messages

    good = http.post(
        f"/compatibility/subjects/{subject}/versions/1?verbose=true", json_body={"schema": USER_V2}
    ).json()
    assert good["is_compatible"] is True
    assert good.get("messages", []) == []


def test_compatibility_check_errors(client: SchemaRegistryClient, http: RawHttp) -> None:
    subject = _subject()
    _register(client, subject, USER_V1)
    _assert_refusal(
        _refused(client.test_compatibility, subject, _avro_schema(USER_V2), version=5),
        404,
        40402,
    )
    _assert_error_body(
        http.post(f"/compatibility/subjects/{subject}/versions/abc", json_body={"schema": USER_V2}),
        422,
        42202,
    )
    _assert_error_body(
        http.post(
            f"/compatibility/subjects/{subject}/versions/latest",
            json_body={"schema": '{"type": "nonsense"}'},
        ),
        422,
        42201,
    )
    # "latest" of a subject with no versions: nothing to be incompatible with.
    fresh = http.post(
        f"/compatibility/subjects/{_subject('fresh')}/versions/latest",
        json_body={"schema": USER_V1},
    )
    assert fresh.status_code == 200 and fresh.json()["is_compatible"] is True


# --- mode -------------------------------------------------------------------------------


def test_readonly_mode_refuses_registration_and_serves_reads(own_registry_url: str) -> None:
    client = _client(own_registry_url)
    subject = _subject()
    schema_id = _register(client, subject, USER_V1)
    assert client.get_global_mode() == "READWRITE"
    with RawHttp(own_registry_url, timeout=10) as http:
        assert http.get("/mode").json() == {"mode": "READWRITE"}
        answer = http.put("/mode", json_body={"mode": "READONLY"})
        assert answer.status_code == 200 and answer.json() == {"mode": "READONLY"}
        assert client.get_global_mode() == "READONLY"

        error = _refused(client.register_schema, subject, _avro_schema(USER_V2))
        _assert_refusal(error, 422, 42205)
        assert "read-only mode" in error.error_message
        _assert_refusal(_refused(client.delete_subject, subject), 422, 42205)
        assert client.get_version(subject, 1).schema_id == schema_id
        assert client.lookup_schema(subject, _avro_schema(USER_V1)).schema_id == schema_id

        refused = _assert_error_body(http.put("/mode", json_body={"mode": "SOMETIMES"}), 422, 42204)
        assert refused["message"].startswith("Invalid mode. Valid values are READWRITE, READONLY")
        assert client.update_global_mode("READWRITE") == "READWRITE"
        assert _register(client, subject, USER_V2) != schema_id


def test_subject_mode(client: SchemaRegistryClient, http: RawHttp) -> None:
    subject, other = _subject(), _subject("other")
    _register(client, subject, USER_V1)
    _assert_error_body(
        http.get(f"/mode/{subject}"),
        404,
        40409,
        f"Subject '{subject}' does not have subject-level mode configured",
    )
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    _assert_refusal(_refused(client.register_schema, subject, _avro_schema(USER_V2)), 422, 42205)
    # Only that subject: the registry and other subjects still take registrations.
    assert client.get_global_mode() == "READWRITE"
    _register(client, other, USER_V1)
    assert client.delete_mode(subject) == "READONLY"
    _register(client, subject, USER_V2)


# --- references and normalize --------------------------------------------------------


ADDRESS = json.dumps(
    {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "street", "type": "string"}],
    },
    separators=(",", ":"),
)
PERSON = json.dumps(
    {
        "type": "record",
        "name": "Person",
        "namespace": "com.acme",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "home", "type": "com.acme.Address"},
        ],
    },
    separators=(",", ":"),
)


def test_references(client: SchemaRegistryClient, http: RawHttp) -> None:
    address_subject, person_subject = _subject("address"), _subject("person")
    address_id = _register(client, address_subject, ADDRESS)
    reference = SchemaReference("com.acme.Address", address_subject, 1)
    person_id = client.register_schema(person_subject, _avro_schema(PERSON, [reference]))
    assert person_id != address_id

    registered: RegisteredSchema = client.get_version(person_subject, 1)
    assert [(r.name, r.subject, r.version) for r in registered.schema.references or []] == [
        ("com.acme.Address", address_subject, 1)
    ]
    by_id = http.get(f"/schemas/ids/{person_id}").json()
    assert by_id["references"] == [
        {"name": "com.acme.Address", "subject": address_subject, "version": 1}
    ]
    assert client.get_referenced_by(address_subject, 1) == [person_id]
    found = client.lookup_schema(person_subject, _avro_schema(PERSON, [reference]))
    assert found.schema_id == person_id

    # A schema still referenced cannot be deleted (42206), neither softly nor its subject.
    _assert_refusal(_refused(client.delete_version, address_subject, 1), 422, 42206)
    _assert_refusal(_refused(client.delete_subject, address_subject), 422, 42206)

    # Without its reference the type is unknown: an invalid schema.
    _assert_refusal(_refused(client.register_schema, _subject(), _avro_schema(PERSON)), 422, 42201)
    missing = SchemaReference("com.acme.Address", _subject("missing"), 1)
    _assert_refusal(
        _refused(client.register_schema, _subject(), _avro_schema(PERSON, [missing])), 422, 42201
    )


def test_normalize_registers_and_finds_equal_schemas_under_one_id(
    client: SchemaRegistryClient, registry_url: str
) -> None:
    subject = _subject()
    schema_id = client.register_schema(subject, _avro_schema(USER_V1), normalize_schemas=True)
    spaced = json.dumps(json.loads(USER_V1), indent=4)
    assert (
        client.register_schema(subject, _avro_schema(spaced), normalize_schemas=True) == schema_id
    )
    found = _client(registry_url).lookup_schema(
        subject, _avro_schema(spaced), normalize_schemas=True
    )
    assert (found.schema_id, found.version) == (schema_id, 1)


def test_normalize_makes_json_schemas_with_reordered_keywords_one_schema(
    client: SchemaRegistryClient,
) -> None:
    subject = _subject()
    ordered = '{"type":"object","properties":{"a":{"type":"string"}}}'
    reordered = '{"properties":{"a":{"type":"string"}},"type":"object"}'
    schema_id = client.register_schema(subject, Schema(ordered, "JSON"), normalize_schemas=True)
    again = client.register_schema(subject, Schema(reordered, "JSON"), normalize_schemas=True)
    assert again == schema_id
    assert client.get_versions(subject) == [1]


def test_the_body_limit_setting() -> None:
    """schema_registry_max_body_bytes: a body over it is refused with 413 before it is
    parsed; one within it is served."""
    with (
        Broker(schema_registry=True, schema_registry_max_body_bytes=2048) as broker,
        RawHttp(broker.schema_registry_url) as http,
    ):
        padded = _avro("Padded", ("name", "string"))
        small = http.post(f"/subjects/{_subject()}/versions", json_body={"schema": padded})
        assert small.status_code == 200, small.text
        big = json.loads(padded)
        big["doc"] = "d" * 4096
        refused = http.post(
            f"/subjects/{_subject()}/versions", json_body={"schema": json.dumps(big)}
        )
        assert refused.status_code == 413, refused.text
        body = refused.json()
        assert set(body) == {"error_code", "message"} and body["error_code"] == 413
