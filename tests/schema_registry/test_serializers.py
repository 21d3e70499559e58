"""confluent-kafka's own serializers against the registry, through a real topic.

AvroSerializer/AvroDeserializer, ProtobufSerializer/ProtobufDeserializer (message classes
built at runtime from FileDescriptorProtos, as protoc's output would be) and
JSONSerializer/JSONDeserializer: each record is serialized, produced to the broker,
consumed back and deserialized, and the Confluent framing (magic byte 0, the 4-byte id the
registry gave) is checked on the bytes that travelled. Also: auto-registration,
`use.latest.version`, schema references, and for each compatibility level one evolution
the level refuses (409) beside the one the level before it lets through. The evolutions
follow Avro's schema resolution rules as Confluent applies them (BACKWARD: the new schema
reads the latest's data; FORWARD: the latest reads the new one's; FULL: both;
*_TRANSITIVE: against every earlier version).
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)

from minibroker import Broker
from minibroker.testing.clients import KafkaHelper
from tests.schema_registry.conftest import INCOMPATIBLE

# Registering needs the Avro schema type and the compatibility rules.


class Registry:
    def __init__(self, bootstrap: str, url: str) -> None:
        self.bootstrap = bootstrap
        self.url = url
        self.kafka = KafkaHelper(bootstrap)

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url, "max.retries": 0})

    def through_topic(self, topic: str, values: list[bytes]) -> list[bytes]:
        """Produce the values to a topic of their own and read them back."""
        self.kafka.produce(topic, values)
        return [
            record.value for record in self.kafka.consume(topic, len(values), decode_as="bytes")
        ]


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with Broker(schema_registry=True) as broker:
        registry = Registry(broker.bootstrap_servers, broker.schema_registry_url)
        try:
            yield registry
        finally:
            registry.kafka.close()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _value(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def _framed_id(data: bytes) -> int:
    """The schema id of Confluent's wire format: magic byte 0, then a big-endian int32."""
    assert data[0] == 0, data[:5]
    return int(struct.unpack(">i", data[1:5])[0])


def _avro(name: str, fields: list[dict[str, Any]], namespace: str | None = None) -> str:
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = fields
    return json.dumps(record)


# --- Avro ---------------------------------------------------------------------------------


def test_avro_round_trip_with_auto_registration(registry: Registry) -> None:
    topic = _topic("avro")
    client = registry.client()
    schema = _avro(
        "Order",
        [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
        namespace="com.acme",
    )
    serializer = AvroSerializer(client, schema)
    orders = [{"id": n, "item": f"item-{n}"} for n in range(3)]
    sent = [serializer(order, _value(topic)) for order in orders]

    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1
    received = registry.through_topic(topic, [data for data in sent if data is not None])
    assert {_framed_id(data) for data in received} == {registered.schema_id}

    deserializer = AvroDeserializer(registry.client())
    assert [deserializer(data, _value(topic)) for data in received] == orders


def test_avro_reader_schema_and_use_latest_version(registry: Registry) -> None:
    topic = _topic("avro-latest")
    subject = f"{topic}-value"
    client = registry.client()
    v1 = _avro("User", [{"name": "name", "type": "string"}])
    v2 = _avro(
        "User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]
    )
    old = AvroSerializer(client, v1)(({"name": "ada"}), _value(topic))
    v2_id = client.register_schema(subject, Schema(v2, "AVRO"))

    # Without a schema of its own, the serializer writes with the subject's latest version.
    latest = AvroSerializer(
        registry.client(), conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    new = latest({"name": "bob", "age": 7}, _value(topic))
    assert new is not None and old is not None
    assert _framed_id(new) == v2_id != _framed_id(old)

    received = registry.through_topic(topic, [old, new])
    as_written = AvroDeserializer(registry.client())
    assert [as_written(data, _value(topic)) for data in received] == [
        {"name": "ada"},
        {"name": "bob", "age": 7},
    ]
    # The v2 reader fills in the default for the record v1 wrote.
    as_latest = AvroDeserializer(registry.client(), conf={"use.latest.version": True})
    assert [as_latest(data, _value(topic)) for data in received] == [
        {"name": "ada", "age": 0},
        {"name": "bob", "age": 7},
    ]


def test_avro_without_auto_registration_needs_the_schema_registered(registry: Registry) -> None:
    topic = _topic("avro-manual")
    schema = _avro("Manual", [{"name": "x", "type": "int"}])
    serializer = AvroSerializer(registry.client(), schema, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError) as refused:
        serializer({"x": 1}, _value(topic))
    assert (refused.value.http_status_code, refused.value.error_code) == (404, 40401)

    schema_id = registry.client().register_schema(f"{topic}-value", Schema(schema, "AVRO"))
    data = AvroSerializer(registry.client(), schema, conf={"auto.register.schemas": False})(
        {"x": 1}, _value(topic)
    )
    assert data is not None and _framed_id(data) == schema_id


def test_avro_with_a_reference(registry: Registry) -> None:
    topic = _topic("avro-ref")
    client = registry.client()
    address_subject = _topic("address")
    address = _avro("Address", [{"name": "city", "type": "string"}], namespace="com.acme")
    client.register_schema(address_subject, Schema(address, "AVRO"))
    person = _avro(
        "Person",
        [{"name": "name", "type": "string"}, {"name": "home", "type": "com.acme.Address"}],
        namespace="com.acme",
    )
    with_reference = Schema(
        person, "AVRO", [SchemaReference("com.acme.Address", address_subject, 1)]
    )
    serializer = AvroSerializer(client, with_reference)
    value = {"name": "ada", "home": {"city": "London"}}
    data = serializer(value, _value(topic))
    assert data is not None

    registered = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references or []] == [
        ("com.acme.Address", address_subject, 1)
    ]
    (received,) = registry.through_topic(topic, [data])
    assert _framed_id(received) == registered.schema_id
    assert AvroDeserializer(registry.client())(received, _value(topic)) == value


def test_the_plugin_fixtures_carry_avro_records(
    schema_registry: str, kafka_helper: KafkaHelper
) -> None:
    """What a user's test writes: the `schema_registry` fixture's URL for the serializers,
    the test's broker for the records (on every backend the plugin offers)."""
    topic = _topic("plugin")
    client = SchemaRegistryClient({"url": schema_registry})
    schema = _avro(
        "Reading", [{"name": "sensor", "type": "string"}, {"name": "c", "type": "double"}]
    )
    values = [{"sensor": "s1", "c": 20.5}, {"sensor": "s2", "c": -3.0}]
    serializer = AvroSerializer(client, schema)
    kafka_helper.produce(topic, [serializer(value, _value(topic)) for value in values])
    received = kafka_helper.consume(topic, len(values), decode_as="bytes")
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": schema_registry}))
    assert [deserializer(record.value, _value(topic)) for record in received] == values


# One chain of Avro record fields per level: every step but the last is accepted, the last
# is refused at this level while the level named beside it accepts it (so the refusal is
# the level's own rule, not a broken schema).
def _fields(*names_types: tuple[str, str] | tuple[str, str, Any]) -> list[dict[str, Any]]:
    fields = []
    for item in names_types:
        field: dict[str, Any] = {"name": item[0], "type": item[1]}
        if len(item) == 3:
            field["default"] = item[2]
        fields.append(field)
    return fields


EVOLUTIONS: dict[str, tuple[list[list[dict[str, Any]]], str]] = {
    # A field added without a default: the new schema cannot read the old data.
    "BACKWARD": ([_fields(("a", "string")), _fields(("a", "string"), ("b", "int"))], "FORWARD"),
    # A field without a default removed: the old schema cannot read the new data.
    "FORWARD": ([_fields(("a", "string"), ("b", "int")), _fields(("a", "string"))], "BACKWARD"),
    "FULL": ([_fields(("a", "string")), _fields(("a", "string"), ("b", "int"))], "FORWARD"),
    # v3 reads v2's data (a is gone there) but not v1's strings as ints.
    "BACKWARD_TRANSITIVE": (
        [
            _fields(("a", "string")),
            _fields(("c", "int", 0)),
            _fields(("a", "int", 0), ("c", "int", 0)),
        ],
        "BACKWARD",
    ),
    # v2 reads v3's data (a has a default in v2), v1 cannot (a has none there).
    "FORWARD_TRANSITIVE": (
        [_fields(("a", "string")), _fields(("a", "string", "x")), _fields(("c", "int", 0))],
        "FORWARD",
    ),
    "FULL_TRANSITIVE": (
        [_fields(("a", "string")), _fields(("a", "string", "x")), _fields(("c", "int", 0))],
        "FULL",
    ),
}


@pytest.mark.parametrize("level", sorted(EVOLUTIONS))
def test_avro_evolution_refused_by_each_level(registry: Registry, level: str) -> None:
    chain, laxer = EVOLUTIONS[level]
    client = registry.client()
    topics = {}
    for configured in (level, laxer):
        topic = topics[configured] = _topic(f"evolve-{configured.lower()}")
        client.set_compatibility(f"{topic}-value", configured)
    schemas = [_avro("Evolving", fields) for fields in chain]

    *accepted, refused = schemas
    for schema in accepted:
        for topic in topics.values():
            data = AvroSerializer(registry.client(), schema)(_record_of(schema), _value(topic))
            assert data is not None
    with pytest.raises(SchemaRegistryError) as raised:
        AvroSerializer(registry.client(), refused)(_record_of(refused), _value(topics[level]))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code in INCOMPATIBLE, str(raised.value)
    assert client.get_versions(f"{topics[level]}-value") == list(range(1, len(chain)))

    # The laxer level takes the same step, and its records still travel.
    last = AvroSerializer(registry.client(), refused)(_record_of(refused), _value(topics[laxer]))
    assert last is not None
    (received,) = registry.through_topic(topics[laxer], [last])
    assert AvroDeserializer(registry.client())(received, _value(topics[laxer])) == _record_of(
        refused
    )


def test_avro_none_accepts_any_evolution(registry: Registry) -> None:
    topic = _topic("evolve-none")
    client = registry.client()
    client.set_compatibility(f"{topic}-value", "NONE")
    for fields in (_fields(("a", "string")), _fields(("a", "int")), _fields(("z", "boolean"))):
        schema = _avro("Anything", fields)
        assert AvroSerializer(registry.client(), schema)(_record_of(schema), _value(topic))
    assert client.get_versions(f"{topic}-value") == [1, 2, 3]


def _record_of(schema: str) -> dict[str, Any]:
    samples = {"string": "s", "int": 1, "long": 2, "boolean": True}
    return {field["name"]: samples[field["type"]] for field in json.loads(schema)["fields"]}


# --- Protobuf -----------------------------------------------------------------------------

_FIELD = descriptor_pb2.FieldDescriptorProto


def _proto_file(
    name: str,
    package: str,
    message: str,
    fields: list[tuple[str, int, int, str]],
    dependencies: tuple[str, ...] = (),
) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file with one message; fields are (name, number, type, message type name)."""
    file = descriptor_pb2.FileDescriptorProto(
        name=name, package=package, syntax="proto3", dependency=list(dependencies)
    )
    described = file.message_type.add(name=message)
    for field_name, number, kind, type_name in fields:
        field = described.field.add(
            name=field_name,
            number=number,
            type=kind,
            label=_FIELD.LABEL_OPTIONAL,  # type: ignore[arg-type]
        )
        if type_name:
            field.type_name = type_name
    return file


def _message_class(files: list[descriptor_pb2.FileDescriptorProto], full_name: str) -> Any:
    """What protoc's generated module would give, built from descriptors in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


@pytest.fixture
def protobuf_serde() -> Any:
    from confluent_kafka.schema_registry import protobuf

    return protobuf


def test_protobuf_round_trip_with_a_dependency(registry: Registry, protobuf_serde: Any) -> None:
    topic = _topic("proto")
    package = f"acme{uuid.uuid4().hex[:6]}"
    address_file = _proto_file(
        f"{package}/address.proto", package, "Address", [("city", 1, _FIELD.TYPE_STRING, "")]
    )
    person_file = _proto_file(
        f"{package}/person.proto",
        package,
        "Person",
        [
            ("name", 1, _FIELD.TYPE_STRING, ""),
            ("age", 2, _FIELD.TYPE_INT32, ""),
            ("home", 3, _FIELD.TYPE_MESSAGE, f".{package}.Address"),
        ],
        dependencies=(f"{package}/address.proto",),
    )
    person_class = _message_class([address_file, person_file], f"{package}.Person")
    client = registry.client()
    serializer = protobuf_serde.ProtobufSerializer(
        person_class, client, {"use.deprecated.format": False}
    )
    person = person_class(name="ada", age=36)
    person.home.city = "London"
    data = serializer(person, _value(topic))
    assert data is not None

    # The dependency went in under its file name, and the schema names it as a reference.
    registered = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references or []] == [
        (f"{package}/address.proto", f"{package}/address.proto", 1)
    ]
    assert registered.schema.schema_type == "PROTOBUF"
    (received,) = registry.through_topic(topic, [data])
    assert _framed_id(received) == registered.schema_id

    deserializer = protobuf_serde.ProtobufDeserializer(
        person_class, {"use.deprecated.format": False}, schema_registry_client=registry.client()
    )
    back = deserializer(received, _value(topic))
    assert (back.name, back.age, back.home.city) == ("ada", 36, "London")


LEVELS = [
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
]


@pytest.mark.parametrize("level", [*LEVELS, "NONE"])
def test_protobuf_incompatible_evolution_is_refused(
    registry: Registry, protobuf_serde: Any, level: str
) -> None:
    topic = _topic("proto-evolve")
    registry.client().set_compatibility(f"{topic}-value", level)
    package = f"evolve{uuid.uuid4().hex[:6]}"

    def version(kind: int) -> Any:
        file = _proto_file(f"{package}/m.proto", package, "M", [("n", 1, kind, "")])
        return _message_class([file], f"{package}.M")

    as_string, as_int = version(_FIELD.TYPE_STRING), version(_FIELD.TYPE_INT32)
    conf = {"use.deprecated.format": False}
    assert protobuf_serde.ProtobufSerializer(as_string, registry.client(), conf)(
        as_string(n="x"), _value(topic)
    )
    # A field's scalar kind changed from string to int32: Confluent's
    # FIELD_SCALAR_KIND_CHANGED, incompatible both ways, so refused at every level but NONE.
    retyped = protobuf_serde.ProtobufSerializer(as_int, registry.client(), conf)
    if level == "NONE":
        assert retyped(as_int(n=1), _value(topic))
        return
    with pytest.raises(SchemaRegistryError) as raised:
        retyped(as_int(n=1), _value(topic))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code in INCOMPATIBLE, str(raised.value)


# --- JSON Schema --------------------------------------------------------------------------


@pytest.fixture
def json_serde() -> Any:
    from confluent_kafka.schema_registry import json_schema

    return json_schema


ITEM = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Item",
    "type": "object",
    "properties": {"sku": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["sku"],
}


def test_json_schema_round_trip_and_validation(registry: Registry, json_serde: Any) -> None:
    topic = _topic("json")
    client = registry.client()
    serializer = json_serde.JSONSerializer(json.dumps(ITEM), client)
    items = [{"sku": "a-1", "count": 2}, {"sku": "b-2"}]
    sent = [serializer(item, _value(topic)) for item in items]
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"

    received = registry.through_topic(topic, [data for data in sent if data is not None])
    assert {_framed_id(data) for data in received} == {registered.schema_id}
    deserializer = json_serde.JSONDeserializer(None, schema_registry_client=registry.client())
    assert [deserializer(data, _value(topic)) for data in received] == items


def test_json_schema_with_a_reference(registry: Registry, json_serde: Any) -> None:
    topic = _topic("json-ref")
    client = registry.client()
    address_subject = _topic("json-address")
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    client.register_schema(address_subject, Schema(json.dumps(address), "JSON"))
    person = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}},
        "required": ["name", "home"],
    }
    schema = Schema(
        json.dumps(person), "JSON", [SchemaReference("address.json", address_subject, 1)]
    )
    data = json_serde.JSONSerializer(schema, client)(
        {"name": "ada", "home": {"city": "London"}}, _value(topic)
    )
    assert data is not None
    registered = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references or []] == [
        ("address.json", address_subject, 1)
    ]
    (received,) = registry.through_topic(topic, [data])
    deserializer = json_serde.JSONDeserializer(None, schema_registry_client=registry.client())
    assert deserializer(received, _value(topic)) == {"name": "ada", "home": {"city": "London"}}


@pytest.mark.parametrize("level", [*LEVELS, "NONE"])
def test_json_schema_incompatible_evolution_is_refused(
    registry: Registry, json_serde: Any, level: str
) -> None:
    topic = _topic("json-evolve")
    registry.client().set_compatibility(f"{topic}-value", level)
    retyped = {**ITEM, "properties": {"sku": {"type": "integer"}, "count": {"type": "integer"}}}
    assert json_serde.JSONSerializer(json.dumps(ITEM), registry.client())(
        {"sku": "a"}, _value(topic)
    )
    # A property's type changed from string to integer: Confluent's TYPE_CHANGED, refused
    # both ways, so at every level but NONE.
    serializer = json_serde.JSONSerializer(json.dumps(retyped), registry.client())
    if level == "NONE":
        assert serializer({"sku": 1}, _value(topic))
        return
    with pytest.raises(SchemaRegistryError) as raised:
        serializer({"sku": 1}, _value(topic))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code in INCOMPATIBLE, str(raised.value)
