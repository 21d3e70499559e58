"""ApiVersions over a real socket, every served API at both ends of its advertised range,
the API table of docs/apis.md against the wire, and what happens to requests the broker
does not serve."""

from __future__ import annotations

import dataclasses
import datetime
import re
import struct
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from harness.raw_client import RawClient, encode, make_request, parse_host_port, request_class
from minibroker import Broker
from minibroker.handlers import HANDLERS
from minibroker.protocol import legacy, messages
from minibroker.protocol.records import (
    TRANSACTIONAL_FLAG,
    build_batch,
    iter_records,
    split_batches,
)
from minibroker.testing.backends import KafkaService

APIS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "apis.md"

API_VERSIONS = 18
PRODUCE = 0
UNSUPPORTED_VERSION = 35


def _registry() -> list[tuple[int, int, int]]:
    return sorted((h.api_key, h.advertised_min, h.max_version) for h in HANDLERS.values())


def _api_versions_request(version: int) -> object:
    return make_request(
        API_VERSIONS, version, client_software_name="rawclient", client_software_version="1.0"
    )


def _future_api_versions_frame(version: int, correlation_id: int) -> bytes:
    """An ApiVersions request at a version kio (and the broker) does not know.

    Header v2 (flexible) and a v4-shaped body, as a newer client would send it.
    """
    client_id = b"future-client"
    header = struct.pack(">hhih", API_VERSIONS, version, correlation_id, len(client_id))
    header += client_id + b"\x00"
    body = b"\x07future" + b"\x041.0" + b"\x00"  # compact strings, then no tagged fields
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_exactly_the_registry(kafka_broker: Broker, version: int) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        correlation_id = client.send(API_VERSIONS, version, _api_versions_request(version))
        frame = client.recv_frame()
        assert frame is not None
        got_id, response = messages.decode_response(frame, API_VERSIONS, version)
    assert got_id == correlation_id
    assert response.error_code == ErrorCode.none
    listed = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert listed == _registry()
    assert len({key for key, _, _ in listed}) == len(listed)
    assert (API_VERSIONS, 0, 4) in listed
    # Response header v0 at every version: the int16 error code follows the correlation
    # id directly, with no tagged-field byte in between.
    assert frame[:6] == struct.pack(">ih", correlation_id, 0)
    if version >= 3:
        assert frame[6] == len(listed) + 1  # compact array length, right after the error


@pytest.mark.parametrize("version", [5, 127, 32767])
def test_too_new_api_versions_gets_unsupported_version_in_v0_layout(
    kafka_broker: Broker, version: int
) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        client.send_bytes(_future_api_versions_frame(version, 4242))
        frame = client.recv_frame()
        assert frame is not None
        # Header v0 and a v0 body: correlation id, error code, int32 array of
        # (key, min, max), and nothing else (no throttle time a client could misread).
        assert frame == struct.pack(">ihihhh", 4242, UNSUPPORTED_VERSION, 1, API_VERSIONS, 0, 4)
        got_id, response = messages.decode_response(frame, API_VERSIONS, 0)
        assert got_id == 4242
        assert response.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (API_VERSIONS, 0, 4)
        ]
        # The client retries at a version both know, on the same connection.
        retry = client.request(API_VERSIONS, 4, _api_versions_request(4))
        assert retry.error_code == ErrorCode.none
        assert len(retry.api_keys) == len(HANDLERS)


def test_unknown_api_key_closes_only_that_connection(kafka_broker: Broker) -> None:
    with (
        RawClient(kafka_broker.bootstrap_servers) as bystander,
        RawClient(kafka_broker.bootstrap_servers) as offender,
    ):
        assert bystander.call(API_VERSIONS, 2).error_code == ErrorCode.none
        unknown = struct.pack(">hhih", 9999, 0, 1, -1)
        offender.send_bytes(struct.pack(">i", len(unknown)) + unknown)
        assert offender.is_closed_by_peer()
        assert bystander.call(API_VERSIONS, 2).error_code == ErrorCode.none


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (3, 14),  # Metadata above the served range, unknown to kio too
        (3, 99),
        (0, 0),  # Produce listed from v0 (as Kafka 4 lists it) but served from v3
        (0, 2),
        (1, 3),  # Fetch below the served range
        (18, -1),
    ],
)
def test_unsupported_version_of_another_api_closes_only_that_connection(
    kafka_broker: Broker, api_key: int, version: int
) -> None:
    with (
        RawClient(kafka_broker.bootstrap_servers) as bystander,
        RawClient(kafka_broker.bootstrap_servers) as offender,
    ):
        assert bystander.call(3, 4, topics=None).brokers
        request = messages.request_class(api_key, version)
        if request is not None:
            frame = encode(api_key, version, messages.build(request, topics=(), topic_data=()), 1)
        else:
            raw = struct.pack(">hhih", api_key, version, 1, -1) + b"\x00" * 8
            frame = struct.pack(">i", len(raw)) + raw
        offender.send_bytes(frame)
        assert offender.is_closed_by_peer()
        assert bystander.call(3, 4, topics=None).brokers
        assert bystander.call(API_VERSIONS, 0).error_code == ErrorCode.none
    assert any(
        r.version == version and "closed" in r.outcome for r in kafka_broker.recent_requests()
    )


def test_requests_on_one_connection_are_answered_in_order(kafka_broker: Broker) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        ids = [client.send(API_VERSIONS, v % 5, _api_versions_request(v % 5)) for v in range(20)]
        got = []
        for v in range(20):
            correlation_id, body = client.receive(API_VERSIONS, v % 5)
            assert body.error_code == ErrorCode.none
            got.append(correlation_id)
        assert got == ids


# --- every served API at both ends of the range it advertises -------------------------

TOPIC = "bounds"
PROBE_VALUE = b"probe-value"
TOPIC_RESOURCE = 2  # DescribeConfigs resource type TOPIC
MEMBER_ID_REQUIRED = 79


def _entity_class(hint: Any) -> type[Any] | None:
    """The kio entity inside an annotation such as `tuple[Topic, ...] | None`."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for argument in typing.get_args(hint):
        found = _entity_class(argument)
        if found is not None:
            return found
    return None


def _build(cls: type[Any], values: dict[str, Any]) -> Any:
    """A kio entity from plain values, nested dicts and lists included; milliseconds
    become timedeltas; names the version does not have are dropped."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        value = values[field.name]
        kafka_type = field.metadata.get("kafka_type")
        entity = _entity_class(hints[field.name])
        if value is None:
            pass
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            value = datetime.timedelta(milliseconds=value)
        elif kafka_type == "records":
            value = Records(value)
        elif isinstance(value, list):
            value = tuple(_build(entity, item) if entity else item for item in value)
        elif isinstance(value, dict):
            assert entity is not None, f"{cls.__name__}.{field.name} is not a structure"
            value = _build(entity, value)
        fields[field.name] = value
    return cls(**fields)


class Probe:
    """One connection to the broker under test; every answer is checked whole."""

    def __init__(self, broker: KafkaService, client: RawClient, topic_id: uuid.UUID | None) -> None:
        self.broker = broker
        self.client = client
        self.port = parse_host_port(broker.bootstrap_servers)[1]
        self.topic_id = topic_id

    def exchange(self, api_key: int, version: int, **values: Any) -> Any:
        """Send one request; the answer must come on this connection, carry its
        correlation id and decode at this version with no byte left over."""
        cls = request_class(api_key, version)
        correlation_id = self.client.send(api_key, version, _build(cls, values))
        frame = self.client.recv_frame()
        assert frame is not None, "the broker closed the connection"
        got, body = messages.decode_response(frame, api_key, version)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        if legacy.is_legacy(api_key, version):
            legacy.read_response(frame, api_key, version)  # raises on bytes left over
            return body
        again = messages.encode_response(got, body)
        assert again[4:] == frame, "the answer holds bytes its version does not account for"
        return body

    # setup steps, at fixed versions inside every range served

    def join(self, group: str) -> tuple[str, int]:
        """Join a fresh group alone (JoinGroup v5); return member id and generation."""
        values = _join_values(group, "")
        first = self.exchange(11, 5, **values)
        assert first.error_code == MEMBER_ID_REQUIRED
        joined = self.exchange(11, 5, **{**values, "member_id": first.member_id})
        assert joined.error_code == ErrorCode.none
        return joined.member_id, joined.generation_id

    def init_transactional(self, transactional_id: str) -> tuple[int, int]:
        """Initialise a transactional id (InitProducerId v1); return its id and epoch."""
        init = self.exchange(
            22,
            1,
            transactional_id=transactional_id,
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == ErrorCode.none
        return init.producer_id, init.producer_epoch

    def begin_transaction(self, transactional_id: str) -> tuple[int, int]:
        """Initialise a transactional id and open a transaction on partition 0 of the
        probe topic (AddPartitionsToTxn v1); return its id and epoch."""
        producer_id, epoch = self.init_transactional(transactional_id)
        added = self.exchange(
            24,
            1,
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
        )
        [topic] = added.results_by_topic_v3_and_below
        assert [p.partition_error_code for p in topic.results_by_partition] == [ErrorCode.none]
        return producer_id, epoch

    def join_and_sync(self, group: str) -> tuple[str, int]:
        member_id, generation = self.join(group)
        synced = self.exchange(
            14,
            3,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            assignments=[{"member_id": member_id, "assignment": b"assigned"}],
        )
        assert synced.error_code == ErrorCode.none
        return member_id, generation

    def commit(self, group: str, offset: int) -> None:
        """Commit an offset for a group with no members (OffsetCommit v2)."""
        answer = self.exchange(8, 2, **_commit_values(group, offset))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none

    def seed(self) -> None:
        """Offset 0 of the topic holds PROBE_VALUE before any probe runs (Produce v3)."""
        batch = build_batch([(b"key", PROBE_VALUE)], timestamp_ms=1_700_000_000_000)
        answer = self.exchange(
            0,
            3,
            transactional_id=None,
            acks=-1,
            timeout=5_000,
            topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        )
        assert answer.responses[0].partition_responses[0].base_offset == 0


def _join_values(group: str, member_id: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 30_000,
        "rebalance_timeout": 30_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
        "reason": "probe",
    }


def _commit_values(group: str, offset: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "probe",
                    }
                ],
            }
        ],
    }


def _topic_ref(probe: Probe) -> dict[str, Any]:
    """A topic named for the versions that take a name and by id for those with an id."""
    return {"name": TOPIC, "topic": TOPIC, "topic_id": probe.topic_id}


def _probe_produce(probe: Probe, version: int) -> None:
    batch = build_batch([(b"key", PROBE_VALUE)], timestamp_ms=1_700_000_000_000)
    transactional_id = None
    if version >= 12:
        # Transaction version 2: a transactional batch adds its partition to the
        # transaction itself, with no AddPartitionsToTxn before it.
        transactional_id = f"probe-produce-v{version}"
        producer_id, epoch = probe.init_transactional(transactional_id)
        batch = build_batch(
            [(b"key", PROBE_VALUE)],
            timestamp_ms=1_700_000_000_000,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=0,
            attributes=TRANSACTIONAL_FLAG,
        )
    answer = probe.exchange(
        0,
        version,
        transactional_id=transactional_id,
        acks=-1,
        timeout=5_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    )
    [topic] = answer.responses
    [partition] = topic.partition_responses
    assert (topic.name, partition.index, partition.error_code) == (TOPIC, 0, ErrorCode.none)
    assert partition.base_offset >= 1  # the setup wrote offset 0


def _probe_fetch(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        1,
        version,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                **_topic_ref(probe),
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    [topic] = answer.responses
    [partition] = topic.partitions
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark >= 1
    [(_, batch), *_] = split_batches(bytes(partition.records))
    assert next(iter_records(batch)).value == PROBE_VALUE


def _probe_list_offsets(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        2,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
        timeout=5_000,
    )
    [partition] = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    assert partition.offset >= 1  # latest: past the setup's record


def _probe_metadata(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        3,
        version,
        topics=[{"name": TOPIC, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    assert [broker.port for broker in answer.brokers] == [probe.port]
    [topic] = answer.topics
    assert (topic.name, topic.error_code) == (TOPIC, ErrorCode.none)
    assert [p.partition_index for p in topic.partitions] == [0]


def _probe_offset_commit(probe: Probe, version: int) -> None:
    answer = probe.exchange(8, version, **_commit_values(f"commit-v{version}", 1))
    [topic] = answer.topics
    assert topic.name == TOPIC
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.none)]


def _probe_offset_fetch(probe: Probe, version: int) -> None:
    group = f"fetch-v{version}"
    probe.commit(group, 7)
    topics = [{"name": TOPIC, "partition_indexes": [0]}]
    answer = probe.exchange(
        9,
        version,
        group_id=group,
        topics=topics,
        groups=[{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
        require_stable=False,
    )
    if version >= 8:
        [entry] = answer.groups
        assert (entry.group_id, entry.error_code) == (group, ErrorCode.none)
        topics_answered = entry.topics
    else:
        topics_answered = answer.topics
    [partition] = topics_answered[0].partitions
    assert (partition.error_code, partition.committed_offset) == (ErrorCode.none, 7)


def _probe_find_coordinator(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        10, version, key="some-group", key_type=0, coordinator_keys=["some-group"]
    )
    coordinator = answer.coordinators[0] if version >= 4 else answer
    assert coordinator.error_code == ErrorCode.none
    assert coordinator.port == probe.port


def _probe_join_group(probe: Probe, version: int) -> None:
    values = _join_values(f"join-v{version}", "")
    answer = probe.exchange(11, version, **values)
    if version >= 4:  # KIP-394: a member without an id is given one and asked again
        assert answer.error_code == MEMBER_ID_REQUIRED
        assert answer.member_id
        answer = probe.exchange(11, version, **{**values, "member_id": answer.member_id})
    assert answer.error_code == ErrorCode.none
    assert answer.leader == answer.member_id
    assert answer.generation_id >= 1
    assert [m.member_id for m in answer.members] == [answer.member_id]


def _probe_heartbeat(probe: Probe, version: int) -> None:
    group = f"heartbeat-v{version}"
    member_id, generation = probe.join_and_sync(group)
    answer = probe.exchange(
        12, version, group_id=group, generation_id=generation, member_id=member_id
    )
    assert answer.error_code == ErrorCode.none


def _probe_leave_group(probe: Probe, version: int) -> None:
    group = f"leave-v{version}"
    member_id, _ = probe.join_and_sync(group)
    answer = probe.exchange(
        13,
        version,
        group_id=group,
        member_id=member_id,
        members=[{"member_id": member_id, "group_instance_id": None, "reason": "probe"}],
    )
    assert answer.error_code == ErrorCode.none
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in answer.members] == [
            (member_id, ErrorCode.none)
        ]


def _probe_sync_group(probe: Probe, version: int) -> None:
    group = f"sync-v{version}"
    member_id, generation = probe.join(group)
    answer = probe.exchange(
        14,
        version,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": member_id, "assignment": b"assigned"}],
    )
    assert answer.error_code == ErrorCode.none
    assert answer.assignment == b"assigned"


def _probe_describe_groups(probe: Probe, version: int) -> None:
    group = f"describe-v{version}"
    member_id, _ = probe.join_and_sync(group)
    answer = probe.exchange(15, version, groups=[group], include_authorized_operations=False)
    [described] = answer.groups
    assert (described.group_id, described.error_code) == (group, ErrorCode.none)
    assert (described.group_state, described.protocol_type) == ("Stable", "consumer")
    assert [m.member_id for m in described.members] == [member_id]


def _probe_list_groups(probe: Probe, version: int) -> None:
    group = f"list-v{version}"
    probe.join_and_sync(group)
    answer = probe.exchange(16, version, states_filter=[], types_filter=[])
    assert answer.error_code == ErrorCode.none
    assert group in {g.group_id for g in answer.groups}


def _probe_sasl_handshake(probe: Probe, version: int) -> None:
    # On a PLAINTEXT listener, as on Kafka's: no handshake is due, none is listed.
    answer = probe.exchange(17, version, mechanism="PLAIN")
    assert (answer.error_code, answer.mechanisms) == (ErrorCode.illegal_sasl_state, ())


def _probe_sasl_authenticate(probe: Probe, version: int) -> None:
    answer = probe.exchange(36, version, auth_bytes=b"\x00user\x00password")
    assert answer.error_code == ErrorCode.illegal_sasl_state
    assert answer.error_message == (
        "SaslAuthenticate request received after successful authentication"
    )


_ACL_FIELDS = {
    "principal": "User:alice",
    "host": "*",
    "operation": 3,  # READ
    "permission_type": 3,  # ALLOW
}


def _probe_describe_acls(probe: Probe, version: int) -> None:
    # With ACLs off (no authorizer), as on Kafka: SECURITY_DISABLED.
    answer = probe.exchange(
        29,
        version,
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=3,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    assert (answer.error_code, answer.resources) == (ErrorCode.security_disabled, ())


def _probe_alter_user_scram_credentials(probe: Probe, version: int) -> None:
    user = f"scram-v{version}"
    upsertion = {
        "name": user,
        "mechanism": 1,
        "iterations": 4096,
        "salt": b"twelve-bytes",
        "salted_password": b"salted",
    }
    answer = probe.exchange(51, version, deletions=[], upsertions=[upsertion])
    assert [(r.user, r.error_code) for r in answer.results] == [(user, ErrorCode.none)]
    described = probe.exchange(50, version, users=[{"name": user}])
    [result] = described.results
    assert [(i.mechanism, i.iterations) for i in result.credential_infos] == [(1, 4096)]


def _probe_describe_user_scram_credentials(probe: Probe, version: int) -> None:
    answer = probe.exchange(50, version, users=[{"name": "nobody"}])
    assert [(r.user, r.error_code) for r in answer.results] == [
        ("nobody", ErrorCode.resource_not_found)
    ]


def _probe_alter_client_quotas(probe: Probe, version: int) -> None:
    user = f"quota-v{version}"
    entity = [{"entity_type": "user", "entity_name": user}]
    ops = [{"key": "request_percentage", "value": 1e6, "remove": False}]
    answer = probe.exchange(
        49, version, entries=[{"entity": entity, "ops": ops}], validate_only=False
    )
    assert [(e.error_code, e.entity[0].entity_name) for e in answer.entries] == [
        (ErrorCode.none, user)
    ]
    component = {"entity_type": "user", "match_type": 0, "match": user}
    described = probe.exchange(48, version, components=[component], strict=True)
    assert [[(v.key, v.value) for v in e.values] for e in described.entries] == [
        [("request_percentage", 1e6)]
    ]
    ops = [{"key": "request_percentage", "value": 0.0, "remove": True}]
    probe.exchange(49, version, entries=[{"entity": entity, "ops": ops}], validate_only=False)


def _probe_describe_client_quotas(probe: Probe, version: int) -> None:
    component = {"entity_type": "user", "match_type": 0, "match": "nobody"}
    answer = probe.exchange(48, version, components=[component], strict=False)
    assert (answer.error_code, answer.entries) == (ErrorCode.none, ())


def _probe_create_acls(probe: Probe, version: int) -> None:
    creation = {
        "resource_type": 2,
        "resource_name": TOPIC,
        "resource_pattern_type": 3,
        **_ACL_FIELDS,
    }
    answer = probe.exchange(30, version, creations=[creation])
    assert [r.error_code for r in answer.results] == [ErrorCode.security_disabled]


def _probe_delete_acls(probe: Probe, version: int) -> None:
    selection = {
        "resource_type_filter": 2,
        "resource_name_filter": TOPIC,
        "pattern_type_filter": 3,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    answer = probe.exchange(31, version, filters=[selection])
    assert [r.error_code for r in answer.filter_results] == [ErrorCode.security_disabled]


def _probe_api_versions(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        API_VERSIONS,
        version,
        client_software_name="probe",
        client_software_version="1.0",
    )
    assert answer.error_code == ErrorCode.none
    assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == _registry()
    if version >= 3:  # Kafka 4's transaction protocol, finalized as Kafka 4.x does
        finalized = {f.name: f.max_version_level for f in answer.finalized_features}
        assert finalized["transaction.version"] == 2
        assert answer.finalized_features_epoch >= 0


def _probe_create_topics(probe: Probe, version: int) -> None:
    name = f"created-v{version}"
    answer = probe.exchange(
        19,
        version,
        topics=[
            {
                "name": name,
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=5_000,
        validate_only=False,
    )
    [topic] = answer.topics
    assert (topic.name, topic.error_code) == (name, ErrorCode.none)
    if version >= 5:
        assert topic.num_partitions == 2


def _probe_delete_topics(probe: Probe, version: int) -> None:
    name = f"doomed-v{version}"
    probe.broker.create_topic(name, partitions=1)
    answer = probe.exchange(
        20,
        version,
        topic_names=[name],
        topics=[{"name": name, "topic_id": None}],
        timeout=5_000,
    )
    [result] = answer.responses
    assert (result.name, result.error_code) == (name, ErrorCode.none)


def _probe_init_producer_id(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        22,
        version,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert answer.error_code == ErrorCode.none
    assert answer.producer_id >= 0
    assert answer.producer_epoch >= 0


def _probe_add_partitions_to_txn(probe: Probe, version: int) -> None:
    tid = f"probe-add-partitions-v{version}"
    producer_id, epoch = probe.init_transactional(tid)
    topics = [{"name": TOPIC, "partitions": [0]}]
    if version < 4:
        answer = probe.exchange(
            24,
            version,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics,
        )
        [topic] = answer.results_by_topic_v3_and_below
    else:
        answer = probe.exchange(
            24,
            version,
            transactions=[
                {
                    "transactional_id": tid,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "verify_only": False,
                    "topics": topics,
                }
            ],
        )
        assert answer.error_code == ErrorCode.none
        [result] = answer.results_by_transaction
        assert result.transactional_id == tid
        [topic] = result.topic_results
    assert topic.name == TOPIC
    assert [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition] == [
        (0, ErrorCode.none)
    ]


def _probe_add_offsets_to_txn(probe: Probe, version: int) -> None:
    tid = f"probe-add-offsets-v{version}"
    producer_id, epoch = probe.begin_transaction(tid)
    answer = probe.exchange(
        25,
        version,
        transactional_id=tid,
        producer_id=producer_id,
        producer_epoch=epoch,
        group_id=f"probe-txn-group-v{version}",
    )
    assert answer.error_code == ErrorCode.none


def _probe_end_txn(probe: Probe, version: int) -> None:
    tid = f"probe-end-v{version}"
    producer_id, epoch = probe.begin_transaction(tid)
    answer = probe.exchange(
        26,
        version,
        transactional_id=tid,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=False,
    )
    assert answer.error_code == ErrorCode.none
    if version >= 5:  # transaction version 2: every end moves the epoch on
        assert (answer.producer_id, answer.producer_epoch) == (producer_id, epoch + 1)


def _probe_txn_offset_commit(probe: Probe, version: int) -> None:
    tid = f"probe-txn-commit-v{version}"
    group = f"probe-txn-commit-group-v{version}"
    producer_id, epoch = probe.begin_transaction(tid)
    if version < 5:  # from v5 (transaction version 2) the commit adds the group itself
        added = probe.exchange(
            25,
            1,
            transactional_id=tid,
            producer_id=producer_id,
            producer_epoch=epoch,
            group_id=group,
        )
        assert added.error_code == ErrorCode.none
    answer = probe.exchange(
        28,
        version,
        transactional_id=tid,
        group_id=group,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    [topic] = answer.topics
    assert topic.name == TOPIC
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.none)]


def _probe_describe_transactions(probe: Probe, version: int) -> None:
    tid = f"probe-describe-txn-v{version}"
    producer_id, epoch = probe.begin_transaction(tid)
    answer = probe.exchange(65, version, transactional_ids=[tid])
    [state] = answer.transaction_states
    assert (state.error_code, state.transactional_id, state.transaction_state) == (
        ErrorCode.none,
        tid,
        "Ongoing",
    )
    assert (state.producer_id, state.producer_epoch) == (producer_id, epoch)
    assert [(t.topic, t.partitions) for t in state.topics] == [(TOPIC, (0,))]


def _probe_list_transactions(probe: Probe, version: int) -> None:
    tid = f"probe-list-txn-v{version}"
    producer_id, _ = probe.begin_transaction(tid)
    answer = probe.exchange(
        66,
        version,
        state_filters=["Ongoing"],
        producer_id_filters=[producer_id],
        duration_filter=-1,
    )
    assert answer.error_code == ErrorCode.none
    assert [(t.transactional_id, t.transaction_state) for t in answer.transaction_states] == [
        (tid, "Ongoing")
    ]


def _probe_describe_configs(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        32,
        version,
        resources=[
            {
                "resource_type": TOPIC_RESOURCE,
                "resource_name": TOPIC,
                "configuration_keys": ["cleanup.policy"],
            }
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    [result] = answer.results
    assert (result.error_code, result.resource_name) == (ErrorCode.none, TOPIC)
    assert [(c.name, c.value) for c in result.configs] == [("cleanup.policy", "delete")]


def _probe_create_partitions(probe: Probe, version: int) -> None:
    name = f"grown-v{version}"
    probe.broker.create_topic(name, partitions=1)
    answer = probe.exchange(
        37,
        version,
        topics=[{"name": name, "count": 3, "assignments": None}],
        timeout=5_000,
        validate_only=False,
    )
    [result] = answer.results
    assert (result.name, result.error_code) == (name, ErrorCode.none)


def _probe_delete_groups(probe: Probe, version: int) -> None:
    group = f"delete-v{version}"
    probe.commit(group, 3)
    answer = probe.exchange(42, version, groups_names=[group])
    assert [(r.group_id, r.error_code) for r in answer.results] == [(group, ErrorCode.none)]


def _probe_offset_delete(probe: Probe, version: int) -> None:
    group = f"offset-delete-v{version}"
    probe.commit(group, 3)
    answer = probe.exchange(
        47,
        version,
        group_id=group,
        topics=[{"name": TOPIC, "partitions": [{"partition_index": 0}]}],
    )
    assert answer.error_code == ErrorCode.none
    assert [(p.partition_index, p.error_code) for p in answer.topics[0].partitions] == [
        (0, ErrorCode.none)
    ]


def _join_consumer_group(probe: Probe, group: str, version: int) -> Any:
    """A member joins a fresh consumer-protocol group alone (ConsumerGroupHeartbeat)."""
    return probe.exchange(
        68,
        version,
        group_id=group,
        member_id=str(uuid.uuid4()) if version >= 1 else "",
        member_epoch=0,
        rebalance_timeout=30_000,
        subscribed_topic_names=[TOPIC],
        topic_partitions=[],
    )


# A new consumer group starts at epoch 1 and the first member's subscription bumps it.
JOINED_EPOCH = 2


def _probe_consumer_group_heartbeat(probe: Probe, version: int) -> None:
    answer = _join_consumer_group(probe, f"consumer-heartbeat-v{version}", version)
    assert (answer.error_code, answer.member_epoch) == (ErrorCode.none, JOINED_EPOCH)
    assert answer.member_id
    assert answer.assignment is not None
    assert [(t.topic_id, t.partitions) for t in answer.assignment.topic_partitions] == [
        (probe.topic_id, (0,))
    ]


def _probe_share_fetch(probe: Probe, version: int) -> None:
    # A later epoch without a session: Kafka 4.4's SHARE_SESSION_NOT_FOUND.
    answer = probe.exchange(
        78,
        version,
        group_id=f"share-fetch-v{version}",
        member_id=str(uuid.uuid4()),
        share_session_epoch=1,
        max_wait=0,
        min_bytes=1,
        max_records=10,
        batch_size=10,
        topics=(),
        forgotten_topics_data=(),
    )
    assert (answer.error_code, answer.responses) == (ErrorCode.share_session_not_found, ())


def _probe_share_acknowledge(probe: Probe, version: int) -> None:
    # Epoch 0 never opens a session here: INVALID_SHARE_SESSION_EPOCH.
    answer = probe.exchange(
        79,
        version,
        group_id=f"share-ack-v{version}",
        member_id=str(uuid.uuid4()),
        share_session_epoch=0,
        topics=(),
    )
    assert (answer.error_code, answer.responses) == (ErrorCode.invalid_share_session_epoch, ())


def _probe_consumer_group_describe(probe: Probe, version: int) -> None:
    group = f"consumer-describe-v{version}"
    joined = _join_consumer_group(probe, group, 0)
    answer = probe.exchange(69, version, group_ids=[group], include_authorized_operations=False)
    [described] = answer.groups
    assert (described.error_code, described.group_id, described.group_epoch) == (
        ErrorCode.none,
        group,
        JOINED_EPOCH,
    )
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (
        joined.member_id,
        JOINED_EPOCH,
        (TOPIC,),
    )
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
        (TOPIC, (0,))
    ]


def _join_share_group(probe: Probe, group: str) -> Any:
    """A member joins a fresh share group alone (ShareGroupHeartbeat v1)."""
    return probe.exchange(
        76,
        1,
        group_id=group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=[TOPIC],
    )


# A new share group is at epoch 0; the first member's subscription bumps it.
SHARE_JOINED_EPOCH = 1


def _probe_share_group_heartbeat(probe: Probe, version: int) -> None:
    answer = _join_share_group(probe, f"share-heartbeat-v{version}")
    assert (answer.error_code, answer.member_epoch) == (ErrorCode.none, SHARE_JOINED_EPOCH)
    assert answer.heartbeat_interval.total_seconds() > 0
    # Partitions are assignable once the group's share-partition state is initialized,
    # which Kafka does after answering the join: no assignment, or the only partition.
    assert answer.assignment is None or [
        (t.topic_id, t.partitions) for t in answer.assignment.topic_partitions
    ] in ([], [(probe.topic_id, (0,))])


def _probe_share_group_describe(probe: Probe, version: int) -> None:
    group = f"share-describe-v{version}"
    joined = _join_share_group(probe, group)
    answer = probe.exchange(77, version, group_ids=[group], include_authorized_operations=False)
    [described] = answer.groups
    assert (described.error_code, described.group_id, described.assignor_name) == (
        ErrorCode.none,
        group,
        "simple",
    )
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (
        joined.member_id,
        SHARE_JOINED_EPOCH,
        (TOPIC,),
    )


def _probe_describe_share_group_offsets(probe: Probe, version: int) -> None:
    group = f"share-offsets-v{version}"
    topics = [{"topic_name": TOPIC, "partitions": [0]}]
    answer = probe.exchange(90, version, groups=[{"group_id": group, "topics": topics}])
    [described] = answer.groups
    assert (described.error_code, described.group_id) == (ErrorCode.none, group)
    [topic] = described.topics
    [partition] = topic.partitions
    assert (topic.topic_name, partition.partition_index) == (TOPIC, 0)
    assert partition.start_offset == -1  # no share state yet


def _alter_share_group_offsets(probe: Probe, group: str) -> Any:
    partitions = [{"partition_index": 0, "start_offset": 0}]
    return probe.exchange(
        91, 0, group_id=group, topics=[{"topic_name": TOPIC, "partitions": partitions}]
    )


def _probe_alter_share_group_offsets(probe: Probe, version: int) -> None:
    answer = _alter_share_group_offsets(probe, f"share-alter-v{version}")
    assert answer.error_code == ErrorCode.none
    [topic] = answer.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.none)]


def _probe_delete_share_group_offsets(probe: Probe, version: int) -> None:
    group = f"share-delete-v{version}"
    assert _alter_share_group_offsets(probe, group).error_code == ErrorCode.none
    answer = probe.exchange(92, version, group_id=group, topics=[{"topic_name": TOPIC}])
    assert answer.error_code == ErrorCode.none
    [topic] = answer.responses
    # Deleted, or (while the altered state is still being written) nothing to delete yet.
    assert topic.topic_name == TOPIC
    assert topic.error_code in (ErrorCode.none, ErrorCode.unknown_topic_or_partition)


def _probe_describe_cluster(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        60,
        version,
        include_cluster_authorized_operations=False,
        endpoint_type=1,
        include_fenced_brokers=False,
    )
    assert answer.error_code == ErrorCode.none
    assert answer.cluster_id
    assert [broker.port for broker in answer.brokers] == [probe.port]
    assert answer.controller_id in {broker.broker_id for broker in answer.brokers}


def _probe_delete_records(probe: Probe, version: int) -> None:
    name = f"trimmed-v{version}"
    probe.broker.create_topic(name, partitions=1)
    answer = probe.exchange(
        21,
        version,
        topics=[{"name": name, "partitions": [{"partition_index": 0, "offset": -1}]}],
        timeout=5_000,
    )
    [topic] = answer.topics
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions] == [
        (0, 0, ErrorCode.none)
    ]


def _probe_offset_for_leader_epoch(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        23,
        version,
        replica_id=-1,
        topics=[
            {
                "topic": TOPIC,
                "partitions": [{"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}],
            }
        ],
    )
    [partition] = answer.topics[0].partitions
    assert (partition.error_code, partition.partition) == (ErrorCode.none, 0)
    assert partition.end_offset >= 1  # seed() produced to it


def _probe_alter_configs(probe: Probe, version: int) -> None:
    resource = {
        "resource_type": TOPIC_RESOURCE,
        "resource_name": TOPIC,
        "configs": [{"name": "retention.ms", "value": "3600000"}],
    }
    answer = probe.exchange(33, version, resources=[resource], validate_only=True)
    assert [(r.error_code, r.resource_name) for r in answer.responses] == [(ErrorCode.none, TOPIC)]


def _probe_elect_leaders(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        43,
        version,
        election_type=0,
        topic_partitions=[{"topic": TOPIC, "partitions": [0]}],
        timeout=5_000,
    )
    [result] = answer.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ErrorCode.election_not_needed)
    ]


def _probe_alter_partition_reassignments(probe: Probe, version: int) -> None:
    # Onto the replica it has (node 0): accepted, nothing to move.
    answer = probe.exchange(
        45,
        version,
        timeout=5_000,
        topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [0]}]}],
    )
    [topic] = answer.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.none)]


def _probe_list_partition_reassignments(probe: Probe, version: int) -> None:
    answer = probe.exchange(46, version, timeout=5_000, topics=None)
    assert (answer.error_code, answer.topics) == (ErrorCode.none, ())


def _probe_incremental_alter_configs(probe: Probe, version: int) -> None:
    resource = {
        "resource_type": TOPIC_RESOURCE,
        "resource_name": TOPIC,
        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "3600000"}],
    }
    answer = probe.exchange(44, version, resources=[resource], validate_only=True)
    assert [(r.error_code, r.resource_name) for r in answer.responses] == [(ErrorCode.none, TOPIC)]


def _probe_describe_log_dirs(probe: Probe, version: int) -> None:
    answer = probe.exchange(35, version, topics=[{"topic": TOPIC, "partitions": [0]}])
    (result,) = answer.results
    assert result.error_code == ErrorCode.none
    ((name, partitions),) = [(t.name, t.partitions) for t in result.topics]
    assert (name, [p.partition_index for p in partitions]) == (TOPIC, [0])
    assert partitions[0].partition_size > 0  # seed() produced to it


def _probe_describe_producers(probe: Probe, version: int) -> None:
    answer = probe.exchange(61, version, topics=[{"name": TOPIC, "partition_indexes": [0]}])
    ((topic, partitions),) = [(t.name, t.partitions) for t in answer.topics]
    assert (topic, [(p.partition_index, p.error_code) for p in partitions]) == (
        TOPIC,
        [(0, ErrorCode.none)],
    )


def _probe_describe_topic_partitions(probe: Probe, version: int) -> None:
    answer = probe.exchange(
        75, version, topics=[{"name": TOPIC}], response_partition_limit=10, cursor=None
    )
    (topic,) = answer.topics
    assert (topic.name, topic.error_code, topic.topic_id) == (
        TOPIC,
        ErrorCode.none,
        probe.topic_id,
    )
    assert [p.partition_index for p in topic.partitions] == [0]
    assert answer.next_cursor is None


PROBES: dict[int, Callable[[Probe, int], None]] = {
    0: _probe_produce,
    1: _probe_fetch,
    2: _probe_list_offsets,
    3: _probe_metadata,
    8: _probe_offset_commit,
    9: _probe_offset_fetch,
    10: _probe_find_coordinator,
    11: _probe_join_group,
    12: _probe_heartbeat,
    13: _probe_leave_group,
    14: _probe_sync_group,
    15: _probe_describe_groups,
    16: _probe_list_groups,
    17: _probe_sasl_handshake,
    18: _probe_api_versions,
    19: _probe_create_topics,
    20: _probe_delete_topics,
    21: _probe_delete_records,
    22: _probe_init_producer_id,
    23: _probe_offset_for_leader_epoch,
    24: _probe_add_partitions_to_txn,
    25: _probe_add_offsets_to_txn,
    26: _probe_end_txn,
    28: _probe_txn_offset_commit,
    29: _probe_describe_acls,
    30: _probe_create_acls,
    31: _probe_delete_acls,
    32: _probe_describe_configs,
    33: _probe_alter_configs,
    35: _probe_describe_log_dirs,
    36: _probe_sasl_authenticate,
    37: _probe_create_partitions,
    42: _probe_delete_groups,
    43: _probe_elect_leaders,
    44: _probe_incremental_alter_configs,
    45: _probe_alter_partition_reassignments,
    46: _probe_list_partition_reassignments,
    47: _probe_offset_delete,
    48: _probe_describe_client_quotas,
    49: _probe_alter_client_quotas,
    50: _probe_describe_user_scram_credentials,
    51: _probe_alter_user_scram_credentials,
    60: _probe_describe_cluster,
    61: _probe_describe_producers,
    65: _probe_describe_transactions,
    66: _probe_list_transactions,
    68: _probe_consumer_group_heartbeat,
    69: _probe_consumer_group_describe,
    75: _probe_describe_topic_partitions,
    76: _probe_share_group_heartbeat,
    77: _probe_share_group_describe,
    78: _probe_share_fetch,
    79: _probe_share_acknowledge,
    90: _probe_describe_share_group_offsets,
    91: _probe_alter_share_group_offsets,
    92: _probe_delete_share_group_offsets,
}


def _uvarint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _wire_api_versions(bootstrap: str, version: int) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions answer read from its bytes, without kio: header v0
    (correlation id), error code, the (key, min, max) int16 triples in an int32-counted
    array (v0-v2) or a compact one with a tag section per entry (v3+), throttle time
    (v1+), a tag section (v3+), and nothing after it."""
    with RawClient(bootstrap) as client:
        correlation_id = client.send(API_VERSIONS, version, _api_versions_request(version))
        frame = client.recv_frame()
    assert frame is not None, "the broker closed the connection"
    got, error_code = struct.unpack_from(">ih", frame)
    assert (got, error_code) == (correlation_id, 0)
    if version >= 3:
        count, position = _uvarint(frame, 6)
        count -= 1
    else:
        (count,) = struct.unpack_from(">i", frame, 6)
        position = 10
    ranges = {}
    for _ in range(count):
        key, low, high = struct.unpack_from(">hhh", frame, position)
        position += 6
        if version >= 3:
            tags, position = _uvarint(frame, position)
            assert tags == 0
        assert key not in ranges, f"api key {key} listed twice"
        ranges[key] = (low, high)
    if version >= 1:
        position += 4  # throttle time
    if version >= 3:
        tags, position = _uvarint(frame, position)
        for _ in range(tags):
            _, position = _uvarint(frame, position)
            size, position = _uvarint(frame, position)
            position += size
    assert position == len(frame), "bytes after the answer"
    return ranges


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    """What the broker advertises, as a v0 client first asks it."""
    return _wire_api_versions(bootstrap, 0)


def test_every_served_api_answers_at_its_advertised_bounds(kafka_broker: Broker) -> None:
    """The advertised range is real: a meaningful request at the lowest and the highest
    version the broker advertises gets a full, well-formed answer on a connection that
    stays open."""
    advertised = _advertised(kafka_broker.bootstrap_servers)
    assert set(advertised) == set(PROBES), "an advertised API without a probe, or the reverse"
    kafka_broker.create_topic(TOPIC, partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        setup = Probe(kafka_broker, client, None)
        metadata = setup.exchange(
            3,
            12,
            topics=[{"name": TOPIC, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        setup.topic_id = metadata.topics[0].topic_id
        setup.seed()

    # Produce alone is listed below what it serves: v0-2 as Kafka 4 lists them (they close
    # the connection, as test_unsupported_version_of_another_api_closes_only_that_connection
    # shows).
    served_low = {key: HANDLERS[key].min_version for key in advertised}
    assert {
        key: (low, served_low[key])
        for key, (low, _) in advertised.items()
        if low != served_low[key]
    } == {PRODUCE: (0, 3)}
    failures = []
    for api_key, (_, high) in sorted(advertised.items()):
        for version in sorted({served_low[api_key], high}):
            with RawClient(kafka_broker.bootstrap_servers) as client:
                probe = Probe(kafka_broker, client, setup.topic_id)
                try:
                    PROBES[api_key](probe, version)
                    # and the connection is still usable
                    assert probe.exchange(API_VERSIONS, 0).error_code == ErrorCode.none
                except Exception as exc:  # every failing probe is reported, not the first
                    failures.append(f"{messages.api_name(api_key)} v{version}: {exc!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_on_the_wire_equals_the_registry(kafka_broker: Broker, version: int) -> None:
    """The bytes of the answer, read without kio, list exactly the registry's ranges."""
    advertised = _wire_api_versions(kafka_broker.bootstrap_servers, version)
    assert advertised == {key: (low, high) for key, low, high in _registry()}


def _docs_api_table() -> dict[int, tuple[str, int, int]]:
    """docs/apis.md's "APIs served" table: | Name | key | low, en dash, high |."""
    section = APIS_PAGE.read_text().split("# APIs served", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| *(\w+) *\| *(\d+) *\| *(\d+) *[\u2013-] *(\d+) *\|", section, re.M)
    table = {int(key): (name, int(low), int(high)) for name, key, low, high in rows}
    assert len(table) == len(rows), "a key listed twice in docs/apis.md"
    return table


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_docs_api_table_matches_the_wire(kafka_broker: Broker) -> None:
    """Every row of docs/apis.md's table is what the broker answers, and nothing is missing."""
    table = _docs_api_table()
    advertised = _advertised(kafka_broker.bootstrap_servers)
    assert {key: (low, high) for key, (_, low, high) in table.items()} == advertised
    # the names are Kafka's (kio spells them in snake case)
    assert {key: _snake_case(name) for key, (name, _, _) in table.items()} == {
        key: messages.api_name(key) for key in advertised
    }
