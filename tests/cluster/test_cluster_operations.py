"""Cluster operations a test can do to a running cluster (docs/faults.md): move a
partition's leader or a group's coordinator, stop and start a broker, add partitions,
slow a broker down or throttle it; real clients ride through each."""

from __future__ import annotations

import datetime
import json
import socket
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.raw_client import RawClient, make
from minibroker import Broker, Cluster
from minibroker.testing.plugin import ClusterFactory

METADATA, PRODUCE = 3, 0
NOT_LEADER_OR_FOLLOWER = 6


def metadata(client: RawClient, topic: str) -> Any:
    return client.call(
        METADATA,
        12,
        topics=(make(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=uuid.UUID(int=0)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def first_node(cluster: Cluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


def test_an_idempotent_producer_rides_through_leader_moves_exactly_once_in_order(
    kafka_cluster: ClusterFactory,
) -> None:
    cluster = kafka_cluster(brokers=3)
    topic = "moving"
    cluster.create_topic(topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 20,
        }
    )
    errors: list[Any] = []
    sent = 400

    def produce() -> None:
        for i in range(sent):
            producer.produce(
                topic,
                value=f"{i:04d}".encode(),
                partition=0,
                on_delivery=lambda err, msg: errors.append(err) if err else None,
            )
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(60)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    leaders = [cluster.leaders(topic)[0]]
    for _ in range(2):
        while cluster.end_offsets(topic)[0] < 100 * len(leaders) and worker.is_alive():
            time.sleep(0.01)
        new_leader = (leaders[-1] + 1) % 3
        cluster.move_leader(topic, 0, new_leader)
        leaders.append(new_leader)
    worker.join(90)
    assert not worker.is_alive() and errors == []
    assert cluster.leaders(topic) == {0: leaders[-1]}
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < sent and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [f"{i:04d}".encode() for i in range(sent)]
    assert cluster.end_offsets(topic) == {0: sent}
    # each move showed up at the next leader epoch
    with RawClient(first_node(cluster)) as client:
        partition = metadata(client, topic).topics[0].partitions[0]
    assert (partition.leader_id, partition.leader_epoch) == (leaders[-1], 2)


def test_the_old_leader_refuses_and_metadata_names_the_new_one(
    kafka_cluster: ClusterFactory,
) -> None:
    cluster = kafka_cluster(brokers=2)
    cluster.create_topic("t", 1)
    old = cluster.leaders("t")[0]
    cluster.move_leader("t", 0, 1 - old)
    address = cluster.bootstrap_servers.split(",")[old]
    with RawClient(address) as client:
        assert metadata(client, "t").topics[0].partitions[0].leader_id == 1 - old
        answer = client.call(
            PRODUCE,
            9,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                make(
                    PRODUCE,
                    9,
                    "TopicProduceData",
                    name="t",
                    partition_data=(
                        make(PRODUCE, 9, "PartitionProduceData", index=0, records=b""),
                    ),
                ),
            ),
        )
    assert answer.responses[0].partition_responses[0].error_code.value == NOT_LEADER_OR_FOLLOWER
    with pytest.raises(ValueError, match="no running broker 7"):
        cluster.move_leader("t", 0, 7)


def test_a_consumer_group_survives_a_coordinator_move_and_a_broker_restart(
    kafka_cluster: ClusterFactory,
) -> None:
    cluster = kafka_cluster(brokers=3)
    topic, group = "survives", "survivors"
    cluster.create_topic(topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, key=str(i).encode(), value=f"m{i}".encode())
        assert producer.flush(30) == 0

    def consume_until(total: int) -> None:
        deadline = time.monotonic() + 45
        while len(set(seen)) < total and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
                consumer.commit(message=message, asynchronous=False)
        assert len(set(seen)) == total

    try:
        send(0, 30)
        consume_until(30)
        coordinator = cluster.state.coordinator_for(group)
        other = (coordinator + 1) % 3
        cluster.move_coordinator(group, other)
        send(30, 30)
        consume_until(60)
        assert cluster.state.coordinator_for(group) == other
        # the broker coordinating the group goes down, then comes back
        cluster.stop_broker(other)
        send(60, 30)
        consume_until(90)
        cluster.start_broker(other)
        send(90, 30)
        consume_until(120)
    finally:
        consumer.close()
    assert set(seen) == {f"m{i}".encode() for i in range(120)}
    # every message was committed: nothing to read again
    checker = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    committed = checker.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    checker.close()
    assert {tp.partition: tp.offset for tp in committed} == cluster.end_offsets(topic)


def test_a_stopped_broker_refuses_connections_and_keeps_its_data(
    kafka_broker: Broker,
) -> None:
    kafka_broker.create_topic("kept", 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("kept", b"before")
    assert producer.flush(30) == 0
    kafka_broker.stop_broker(kafka_broker.node_id)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((kafka_broker.host, kafka_broker.port), timeout=5)
    kafka_broker.start_broker(kafka_broker.node_id)
    producer.produce("kept", b"after")
    assert producer.flush(30) == 0
    assert kafka_broker.end_offsets("kept") == {0: 2}


async def test_an_asyncio_broker_is_stopped_with_await() -> None:
    async with Broker() as broker:
        with pytest.raises(RuntimeError, match=r"await cluster\.stop_node"):
            broker.stop_broker(broker.node_id)
        await broker.stop_node(broker.node_id)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((broker.host, broker.port), timeout=5)
        await broker.start_node(broker.node_id)
        socket.create_connection((broker.host, broker.port), timeout=5).close()


def test_throttle_time_is_reported_and_latency_delays_answers(kafka_broker: Broker) -> None:
    kafka_broker.set_throttle(kafka_broker.node_id, 250)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        answer = metadata(client, "anything")
    assert answer.throttle_time == datetime.timedelta(milliseconds=250)
    kafka_broker.set_throttle(kafka_broker.node_id, 0)

    kafka_broker.set_latency(kafka_broker.node_id, 2.0)
    with (
        RawClient(kafka_broker.bootstrap_servers, timeout=0.5) as client,
        pytest.raises(TimeoutError),
    ):
        metadata(client, "anything")
    kafka_broker.set_latency(kafka_broker.node_id, 0)
    with RawClient(kafka_broker.bootstrap_servers, timeout=5) as client:
        assert metadata(client, "anything").throttle_time == datetime.timedelta(0)


def test_added_partitions_appear_in_metadata(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("grows", 2)
    kafka_broker.add_partitions("grows", 5)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        partitions = metadata(client, "grows").topics[0].partitions
    assert sorted(p.partition_index for p in partitions) == [0, 1, 2, 3, 4]


def test_librdkafka_sees_the_throttle_time(kafka_broker: Broker) -> None:
    """librdkafka reads throttle_time_ms from every answer (and holds its next request to
    that broker back by it): its statistics report the time set."""
    kafka_broker.create_topic("throttled", 1)
    kafka_broker.set_throttle(kafka_broker.node_id, 300)
    seen: list[int] = []

    def statistics(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            if broker.get("nodeid", -1) >= 0:
                seen.append(int(broker["throttle"]["max"]))

    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "statistics.interval.ms": 100,
            "stats_cb": statistics,
        }
    )
    for i in range(5):
        producer.produce("throttled", str(i).encode())
        producer.flush(30)
    deadline = time.monotonic() + 10
    while not any(value >= 300 for value in seen) and time.monotonic() < deadline:
        producer.poll(0.1)
    assert max(seen) == 300


async def test_an_async_test_waits_for_hits_without_sleeping() -> None:
    from aiokafka import AIOKafkaProducer

    async with Broker() as broker:
        rule = broker.faults.add("Produce")
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            await producer.send("waited", b"x")
            assert await rule.hits_reached(1, timeout=10) >= 1
        finally:
            await producer.stop()
