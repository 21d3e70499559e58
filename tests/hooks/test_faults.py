"""Fault rules (minibroker/faults.py) against real clients over real sockets: errors,
lost answers, requests never answered, closed connections, custom answers, and the rules'
counting (times, after, hits, observe-only)."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.raw_client import RawClient, make
from minibroker import Broker, Faults
from minibroker.faults import TOP_LEVEL_ERROR_APIS, blank, error_response
from minibroker.handlers.registry import HANDLERS
from minibroker.protocol.legacy import proxy_version
from minibroker.protocol.messages import (
    decode_response,
    encode_response,
    request_class,
    response_module,
)
from minibroker.testing.plugin import TopicFactory
from tests.produce_fetch.test_fetch_limits import Want, fetch

PRODUCE, FETCH, METADATA, HEARTBEAT, FIND_COORDINATOR, LIST_GROUPS = 0, 1, 3, 12, 10, 16
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 6, 7, 19
COORDINATOR_NOT_AVAILABLE, REBALANCE_IN_PROGRESS, LEADER_NOT_AVAILABLE = 15, 27, 5


def idempotent_producer(broker: Broker, **extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 50,
            **extra,
        }
    )


def produce_all(producer: Producer, topic: str, count: int, partition: int = 0) -> list[Any]:
    """Produce `count` values to one partition, one by one; every delivery report."""
    reports: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            partition=partition,
            on_delivery=lambda err, msg: reports.append((err, msg)),
        )
        producer.flush(30)
    assert producer.flush(30) == 0
    return reports


def read_values(broker: Broker, topic: str, count: int, partition: int = 0) -> list[bytes]:
    """Every value of one partition, from the start (count expected), by raw Fetch."""
    values: list[bytes] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None and message.partition() == partition:
                values.append(message.value())
        # anything beyond `count` would be a duplicate: read a little longer
        extra_deadline = time.monotonic() + 0.5
        while time.monotonic() < extra_deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None and message.partition() == partition:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_produce_errors_are_retried_and_every_record_lands_once_in_order(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    rule = kafka_faults.add("Produce", topic=topic, error=NOT_ENOUGH_REPLICAS, times=3)
    reports = produce_all(idempotent_producer(kafka_broker), topic, 20)
    assert [err for err, _ in reports] == [None] * 20
    assert rule.acted == 3 and rule.hits >= 23
    assert read_values(kafka_broker, topic, 20) == [f"v{i}".encode() for i in range(20)]


def test_a_lost_produce_answer_is_retried_and_stored_once(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    """The broker stores the batch, then the connection drops before the answer: the
    idempotent producer sends it again and the broker answers it as a duplicate."""
    topic = kafka_topic()
    rule = kafka_faults.add("Produce", topic=topic, lose_response=True, after=5, times=1)
    reports = produce_all(idempotent_producer(kafka_broker), topic, 12)
    assert [err for err, _ in reports] == [None] * 12
    assert rule.acted == 1
    assert kafka_broker.end_offsets(topic) == {0: 12}
    assert read_values(kafka_broker, topic, 12) == [f"v{i}".encode() for i in range(12)]


def test_a_request_never_answered_times_out_and_the_client_reconnects(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    rule = kafka_faults.add("Produce", topic=topic, drop=True, times=1)
    # librdkafka times a request out in flight after socket.timeout.ms (60 s by default)
    producer = idempotent_producer(
        kafka_broker, **{"request.timeout.ms": 1500, "socket.timeout.ms": 1500}
    )
    reports = produce_all(producer, topic, 3)
    assert [err for err, _ in reports] == [None] * 3
    assert rule.acted == 1 and rule.hits >= 2  # the dropped request, then its retry
    assert read_values(kafka_broker, topic, 3) == [b"v0", b"v1", b"v2"]
    dropped = [r for r in kafka_broker.recent_requests() if r.outcome == "dropped: fault"]
    assert [(r.api, r.client_id is not None) for r in dropped] == [("Produce", True)]


def test_a_closed_connection_is_reopened_by_the_consumer(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    produce_all(idempotent_producer(kafka_broker), topic, 5)
    rule = kafka_faults.add("Fetch", close=True, times=2)
    assert read_values(kafka_broker, topic, 5) == [f"v{i}".encode() for i in range(5)]
    assert rule.acted == 2
    assert [r.outcome for r in kafka_broker.recent_requests() if r.api == "Fetch"][:2] == [
        "closed: fault",
        "closed: fault",
    ]


def test_an_error_on_one_partition_leaves_the_others_served(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=2)
    producer = idempotent_producer(kafka_broker)
    produce_all(producer, topic, 2, partition=0)
    produce_all(producer, topic, 2, partition=1)
    kafka_faults.add("Fetch", topic=topic, partition=1, error=NOT_LEADER_OR_FOLLOWER)
    kafka_faults.add("ListOffsets", topic=topic, partition=1, error=LEADER_NOT_AVAILABLE)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        answer = fetch(client, 12, [Want(0), Want(1)], topic=topic)
    partitions = {p.partition_index: p for p in answer.responses[0].partitions}
    assert partitions[0].error_code.value == 0 and partitions[0].high_watermark == 2
    assert partitions[0].records
    assert partitions[1].error_code.value == NOT_LEADER_OR_FOLLOWER
    assert partitions[1].high_watermark == -1


def test_a_group_error_makes_the_consumer_rejoin_and_still_consume(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    produce_all(idempotent_producer(kafka_broker), topic, 3)
    lookups = kafka_faults.add("FindCoordinator", error=COORDINATOR_NOT_AVAILABLE, times=2)
    heartbeats = kafka_faults.add("Heartbeat", error=REBALANCE_IN_PROGRESS, times=1)
    group = f"faulted-{uuid.uuid4()}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": 100,
            "session.timeout.ms": 6000,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while (len(values) < 3 or heartbeats.acted < 1) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert sorted(values) == [b"v0", b"v1", b"v2"]
    assert lookups.acted == 2 and heartbeats.acted == 1
    joins = [r for r in kafka_broker.recent_requests() if r.api == "JoinGroup"]
    assert len(joins) >= 2  # joined, then joined again after REBALANCE_IN_PROGRESS


def test_respond_answers_with_the_fields_given(kafka_broker: Broker, kafka_faults: Faults) -> None:
    def listed(request: Any) -> dict[str, Any]:
        return {
            "groups": (
                response_module(LIST_GROUPS, 4).ListedGroup(
                    group_id="invented", protocol_type="consumer", group_state="Stable"
                ),
            )
        }

    kafka_faults.add("ListGroups", respond=listed)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        answer = client.call(LIST_GROUPS, 4, states_filter=())
    assert answer.error_code.value == 0
    assert [(g.group_id, g.group_state) for g in answer.groups] == [("invented", "Stable")]


def test_rules_count_every_match_and_act_after_and_times_as_told(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    watched = kafka_faults.add("Metadata")  # observe only
    refused = kafka_faults.add(
        "Metadata", topic=topic, error=LEADER_NOT_AVAILABLE, after=1, times=1
    )
    codes = []
    with RawClient(kafka_broker.bootstrap_servers) as client:
        for _ in range(3):
            answer = client.call(
                METADATA,
                12,
                topics=(
                    make(
                        METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=uuid.UUID(int=0)
                    ),
                ),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            codes.append(answer.topics[0].error_code.value)
    assert codes == [0, LEADER_NOT_AVAILABLE, 0]
    assert (watched.hits, refused.hits, refused.acted) == (3, 3, 1)
    assert watched.wait_hits(3, timeout=1) == 3
    with pytest.raises(TimeoutError):
        watched.wait_hits(4, timeout=0.2)
    refused.remove()
    assert list(kafka_faults) == [watched]


def test_wait_hits_wakes_when_a_client_reaches_the_rule(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    rule = kafka_faults.add("Produce", topic=topic)
    worker = threading.Thread(
        target=produce_all, args=(idempotent_producer(kafka_broker), topic, 1), daemon=True
    )
    worker.start()
    assert rule.wait_hits(1, timeout=30) >= 1
    worker.join(30)


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"api": "Produce", "error": 6, "drop": True}, "one action"),
        ({"api": "DeleteTopics", "error": 3}, "error= needs an API"),
        ({"api": "NoSuchApi"}, "unknown API"),
        ({"api": "Produce", "error": 99999}, "99999"),
        ({"respond": lambda request: {}}, "respond= needs an API"),
        ({"api": "Produce", "delay": -1}, "negative"),
    ],
)
def test_a_rule_that_cannot_work_is_refused_when_added(
    arguments: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        Faults().add(**arguments)


def test_the_fixture_leaves_no_rule_behind(kafka_broker: Broker) -> None:
    """Run after the tests above with their own brokers: a fresh broker has none."""
    assert not kafka_broker.faults
    with socket.create_connection((kafka_broker.host, kafka_broker.port), timeout=5):
        pass


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (key, version)
        for key in sorted(TOP_LEVEL_ERROR_APIS)
        for version in range(HANDLERS[key].min_version, HANDLERS[key].max_version + 1)
    ],
)
def test_every_top_level_error_answer_encodes_and_carries_the_code(
    api_key: int, version: int
) -> None:
    # old versions are decoded into their proxy class (protocol/legacy.py)
    cls = request_class(api_key, version) or request_class(api_key, proxy_version(api_key))
    request = blank(cls)
    if api_key == FIND_COORDINATOR and version >= 4:
        request = dataclasses.replace(request, coordinator_keys=("g1", "g2"))
    answer = error_response(api_key, version, request, COORDINATOR_NOT_AVAILABLE)
    frame = encode_response(7, answer, version)
    correlation_id, decoded = decode_response(frame[4:], api_key, version)
    assert correlation_id == 7
    if api_key == FIND_COORDINATOR and version >= 4:
        assert [(c.key, c.error_code.value) for c in decoded.coordinators] == [
            ("g1", COORDINATOR_NOT_AVAILABLE),
            ("g2", COORDINATOR_NOT_AVAILABLE),
        ]
    else:
        assert decoded.error_code.value == COORDINATOR_NOT_AVAILABLE


CONCURRENT_TRANSACTIONS = 51


def read_committed(broker: Broker, topic: str, count: int) -> list[bytes]:
    """Every value a read_committed consumer delivers from the start, until `count`
    arrive or the partition's end is reached."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                if len(values) >= count:
                    break  # at the end, with all expected
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_lost_commit_answer_is_retried_and_commits_once(
    kafka_broker: Broker, kafka_faults: Faults, kafka_topic: TopicFactory
) -> None:
    """EndTxn is served, then its answer lost: the producer asks again and the retry of
    the outcome reached is answered NONE, so the records are committed exactly once."""
    topic = kafka_topic()
    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": str(uuid.uuid4())}
    )
    producer.init_transactions(20)
    lost = kafka_faults.add("EndTxn", lose_response=True, times=1)
    busy = kafka_faults.add("AddOffsetsToTxn", error=CONCURRENT_TRANSACTIONS, times=2)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
    group = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g"})
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 5)], group.consumer_group_metadata(), 20
    )
    producer.commit_transaction(30)
    assert (lost.acted, busy.acted) == (1, 2)
    assert lost.hits >= 2, "the commit was sent again after its answer was lost"
    assert read_committed(kafka_broker, topic, 5) == [f"v{i}".encode() for i in range(5)]
    assert kafka_broker.committed_offsets("g") == {(topic, 0): 5}
    group.close()
