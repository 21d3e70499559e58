"""A three-node Cluster: leaders, routing errors, coordinator placement, static members.

Routing is checked with raw requests (one socket per node, encoded with the broker's own
codec) so that the error codes are seen as sent, before any client retries them away;
produce/consume and static membership go through confluent-kafka.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from harness.raw_client import RawClient
from harness.raw_client import make as entity
from minibroker import Cluster
from minibroker.protocol import messages, records
from tests.groups.conftest import (
    HEARTBEAT_MS,
    SETTLE_TIMEOUT,
    RebalanceLog,
    _watchdog,  # noqa: F401  (autouse: a stuck client fails the run)
    group_snapshot,
    left_group,
    settled,
    unique,
    wait_until,
)

NODES = 3
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default
NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
FENCED_INSTANCE_ID = 82


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=NODES) as running:
        yield running


# --- raw requests: one request, one response ---


def call(cluster: Cluster, node: int, api_key: int, version: int, request: Any) -> Any:
    """Send `request` to one node and return the decoded response body."""
    server = cluster.nodes[node]
    with RawClient(f"{server.advertised_host}:{server.port}", client_id="raw-test") as client:
        return client.request(api_key, version, request)


def java_hash(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int."""
    value = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def expected_coordinator(cluster: Cluster, group: str) -> int:
    partition = abs(java_hash(group)) % OFFSETS_PARTITIONS
    return cluster.leaders("__consumer_offsets")[partition]


def find_coordinator(cluster: Cluster, node: int, version: int, groups: list[str]) -> list[int]:
    """Coordinator node ids for `groups`, asked of `node` (batched from v4)."""
    if version >= 4:
        request = entity(
            10, version, "FindCoordinatorRequest", key_type=0, coordinator_keys=tuple(groups)
        )
        response = call(cluster, node, 10, version, request)
        by_key = {c.key: c for c in response.coordinators}
        assert all(by_key[g].error_code == 0 for g in groups)
        for group in groups:
            server = cluster.nodes[by_key[group].node_id]
            assert (by_key[group].host, by_key[group].port) == (server.advertised_host, server.port)
        return [by_key[g].node_id for g in groups]
    found = []
    for group in groups:
        fields: dict[str, Any] = {"key": group}
        if version >= 1:
            fields["key_type"] = 0
        response = call(
            cluster, node, 10, version, entity(10, version, "FindCoordinatorRequest", **fields)
        )
        assert response.error_code == 0
        server = cluster.nodes[response.node_id]
        assert (response.host, response.port) == (server.advertised_host, server.port)
        found.append(response.node_id)
    return found


# --- leaders and routing ---


def test_cluster_spreads_leaders_and_serves_confluent_kafka(cluster: Cluster) -> None:
    topic, group = unique("spread"), unique("group")
    cluster.create_topic(topic, 6)
    leaders = cluster.leaders(topic)
    assert set(leaders.values()) == set(range(NODES)), leaders

    # Metadata through a real client tells the same story, from any node.
    for node in cluster.nodes:
        consumer = Consumer(
            {
                "bootstrap.servers": f"{node.advertised_host}:{node.port}",
                "group.id": group,
                "log_level": 3,
            }
        )
        try:
            metadata = consumer.list_topics(topic, timeout=10)
        finally:
            consumer.close()
        assert sorted(metadata.brokers) == list(range(NODES))
        seen = {p.id: p.leader for p in metadata.topics[topic].partitions.values()}
        assert seen == leaders

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
    for partition in range(6):
        for i in range(5):
            producer.produce(topic, f"{partition}:{i}".encode(), partition=partition)
    assert producer.flush(15) == 0
    assert cluster.end_offsets(topic) == dict.fromkeys(range(6), 5)

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + SETTLE_TIMEOUT
    try:
        while len(values) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"{p}:{i}" for p in range(6) for i in range(5))


def test_cluster_raw_request_to_non_leader_gets_not_leader_or_follower(cluster: Cluster) -> None:
    topic = unique("routing")
    cluster.create_topic(topic, 3)
    leaders = cluster.leaders(topic)
    for partition, leader in leaders.items():
        for node in range(NODES):
            listed = call(
                cluster,
                node,
                2,
                1,
                entity(
                    2,
                    1,
                    "ListOffsetsRequest",
                    replica_id=-1,
                    topics=(
                        entity(
                            2,
                            1,
                            "ListOffsetsTopic",
                            name=topic,
                            partitions=(
                                entity(
                                    2,
                                    1,
                                    "ListOffsetsPartition",
                                    partition_index=partition,
                                    timestamp=-1,
                                ),
                            ),
                        ),
                    ),
                ),
            )
            code = listed.topics[0].partitions[0].error_code
            produced = call(
                cluster,
                node,
                0,
                3,
                entity(
                    0,
                    3,
                    "ProduceRequest",
                    transactional_id=None,
                    acks=-1,
                    timeout=datetime.timedelta(seconds=5),
                    topic_data=(
                        entity(
                            0,
                            3,
                            "TopicProduceData",
                            name=topic,
                            partition_data=(
                                entity(
                                    0,
                                    3,
                                    "PartitionProduceData",
                                    index=partition,
                                    records=records.build_batch([(None, b"x")]),
                                ),
                            ),
                        ),
                    ),
                ),
            )
            produce_code = produced.responses[0].partition_responses[0].error_code
            if node == leader:
                assert (code, produce_code) == (0, 0), (partition, node)
            else:
                assert (code, produce_code) == (NOT_LEADER_OR_FOLLOWER,) * 2, (partition, node)
    # Only the leaders' appends landed.
    assert cluster.end_offsets(topic) == dict.fromkeys(range(3), 1)


# --- coordinators ---


def test_cluster_raw_find_coordinator_single_and_batched(cluster: Cluster) -> None:
    # Non-ASCII names (one outside the BMP) hash over UTF-16 code units, as Java does.
    groups = [f"group-{i}" for i in range(12)] + ["x" * 300, "ünïcödé-группа", "group-😀"]
    assert java_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert any(java_hash(g) < 0 for g in groups)  # abs() matters for some of them
    expected: list[int] | None = None
    for version in range(7):
        for node in range(NODES):
            found = find_coordinator(cluster, node, version, groups)
            if expected is None:  # __consumer_offsets exists from the first lookup on
                expected = [expected_coordinator(cluster, g) for g in groups]
            assert found == expected, (version, node)
    assert expected is not None and set(expected) == set(range(NODES))


def test_cluster_raw_group_requests_to_other_nodes_get_not_coordinator(cluster: Cluster) -> None:
    group = unique("group")
    [coordinator] = find_coordinator(cluster, 0, 4, [group])
    protocol = entity(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b"")
    join = entity(
        11,
        5,
        "JoinGroupRequest",
        group_id=group,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
    )
    requests: list[tuple[int, int, Any, Callable[[Any], int]]] = [
        (11, 5, join, lambda r: r.error_code),
        (
            14,
            3,
            entity(
                14,
                3,
                "SyncGroupRequest",
                group_id=group,
                generation_id=1,
                member_id="m",
                group_instance_id=None,
                assignments=(),
            ),
            lambda r: r.error_code,
        ),
        (
            12,
            3,
            entity(
                12,
                3,
                "HeartbeatRequest",
                group_id=group,
                generation_id=1,
                member_id="m",
                group_instance_id=None,
            ),
            lambda r: r.error_code,
        ),
        (
            13,
            3,
            entity(
                13,
                3,
                "LeaveGroupRequest",
                group_id=group,
                members=(entity(13, 3, "MemberIdentity", member_id="m", group_instance_id=None),),
            ),
            lambda r: r.error_code,
        ),
        (
            8,
            2,
            entity(
                8,
                2,
                "OffsetCommitRequest",
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time=datetime.timedelta(milliseconds=-1),
                topics=(
                    entity(
                        8,
                        2,
                        "OffsetCommitRequestTopic",
                        name="t",
                        partitions=(
                            entity(
                                8,
                                2,
                                "OffsetCommitRequestPartition",
                                partition_index=0,
                                committed_offset=1,
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            ),
            lambda r: r.topics[0].partitions[0].error_code,
        ),
        (
            9,
            1,
            entity(
                9,
                1,
                "OffsetFetchRequest",
                group_id=group,
                topics=(entity(9, 1, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,)),),
            ),
            lambda r: r.topics[0].partitions[0].error_code,
        ),
        (
            15,
            1,
            entity(15, 1, "DescribeGroupsRequest", groups=(group,)),
            lambda r: r.groups[0].error_code,
        ),
    ]
    for node in range(NODES):
        for api_key, version, request, code_of in requests:
            code = code_of(call(cluster, node, api_key, version, request))
            if node == coordinator:
                assert code != NOT_COORDINATOR, (messages.api_name(api_key), node)
            else:
                assert code == NOT_COORDINATOR, (messages.api_name(api_key), node, code)


# --- static membership ---


class StaticMember:
    def __init__(
        self,
        cluster: Cluster,
        topic: str,
        group: str,
        name: str,
        log: RebalanceLog,
        instance: str | None,
    ) -> None:
        self.name = name
        self.errors: list[KafkaError] = []
        settings: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "client.id": name,
            "session.timeout.ms": 6_000,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": "range",
            "error_cb": self.errors.append,
            "log_level": 0,
        }
        if instance is not None:
            settings["group.instance.id"] = instance
        self.consumer = Consumer(settings)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, ps: log.record(name, "assigned", (p.partition for p in ps)),
            on_revoke=lambda _, ps: log.record(name, "revoked", (p.partition for p in ps)),
        )
        self.closed = False

    def pump(self) -> None:
        if not self.closed:
            try:
                message = self.consumer.poll(0.01)
            except Exception as exc:  # a fenced consumer raises its fatal error here
                self.errors.append(exc.args[0] if exc.args else exc)
                return
            if message is not None and message.error() is not None:
                self.errors.append(message.error())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def is_fenced(error: object) -> bool:
    """librdkafka raises fencing as a fatal error that carries FENCED_INSTANCE_ID's text."""
    if not isinstance(error, KafkaError):
        return False
    fenced = KafkaError(FENCED_INSTANCE_ID).str()
    fatal = error.code() == KafkaError._FATAL or error.fatal()
    return error.code() == FENCED_INSTANCE_ID or (fatal and fenced in error.str())


def test_cluster_confluent_kafka_static_member_restart_and_fencing(
    cluster: Cluster,
) -> None:
    topic, group, log = unique("static"), unique("group"), RebalanceLog()
    cluster.create_topic(topic, 6)
    started: list[StaticMember] = []

    def pump() -> None:
        for member in started:
            member.pump()

    try:
        started.append(StaticMember(cluster, topic, group, "dynamic", log, None))
        assert wait_until(
            lambda: settled(cluster, group, topic, 6, log, ["dynamic"]), SETTLE_TIMEOUT, pump=pump
        )
        started.append(StaticMember(cluster, topic, group, "first", log, "instance-a"))
        assert wait_until(
            lambda: settled(
                cluster, group, topic, 6, log, ["dynamic", "first"], {"first": "instance-a"}
            ),
            SETTLE_TIMEOUT,
            pump=pump,
        ), log.events
        held = log.owned("first")
        assert held and len(held) == 3
        _, generation, members = group_snapshot(cluster, group)
        static_id = next(m for m in members if m.startswith("instance-a-"))

        # A static member's close sends no LeaveGroup; a restart within the session
        # timeout takes its old place without a rebalance.
        quiet_since = time.monotonic()
        started[1].close()
        assert not left_group(cluster, "first")
        started.append(StaticMember(cluster, topic, group, "second", log, "instance-a"))
        assert wait_until(lambda: log.owned("second") == held, SETTLE_TIMEOUT, pump=pump), (
            log.events
        )
        state, generation_after, members_after = group_snapshot(cluster, group)
        assert (state, generation_after) == ("Stable", generation)
        assert static_id not in members_after and len(members_after) == 2
        assert [e for e in log.since(quiet_since) if e[1] == "dynamic"] == []

        # A third process with the same instance id replaces the running one, which is
        # fenced: its next heartbeat is refused with FENCED_INSTANCE_ID.
        second_id = next(m for m in members_after if m.startswith("instance-a-"))
        started.append(StaticMember(cluster, topic, group, "third", log, "instance-a"))
        assert wait_until(lambda: log.owned("third") == held, SETTLE_TIMEOUT, pump=pump), log.events
        assert wait_until(
            lambda: any(map(is_fenced, started[2].errors)), SETTLE_TIMEOUT, pump=pump
        ), started[2].errors
        [coordinator] = find_coordinator(cluster, 0, 4, [group])
        heartbeat = call(
            cluster,
            coordinator,
            12,
            3,
            entity(
                12,
                3,
                "HeartbeatRequest",
                group_id=group,
                generation_id=generation,
                member_id=second_id,
                group_instance_id="instance-a",
            ),
        )
        assert heartbeat.error_code == FENCED_INSTANCE_ID
        assert group_snapshot(cluster, group)[1] == generation
        assert [e for e in log.since(quiet_since) if e[1] == "dynamic"] == []
    finally:
        for member in started:
            member.close()
