"""The client matrix's scenario with kafka-python: SCENARIOS.md's steps."""

from __future__ import annotations

import threading
import time
from importlib import metadata
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
    OffsetSpec,
    OffsetTimestamp,
)
from kafka.errors import KafkaError, UnknownTopicOrPartitionError
from kafka.structs import OffsetAndMetadata
from scenario import (
    CONFIG_RETRIES,
    PARTITIONS,
    RETENTION_MS,
    TXN_OFFSET,
    Scenario,
    drive,
    read_late,
    rebalance,
    txn_keys,
)

CLIENT = "kafka-python"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TIMEOUT = 20.0
POLL_MS = 500  # a poll long enough for kafka-python to finish a group join


def main() -> int:
    return drive(CLIENT, metadata.version(CLIENT), scenario)


def scenario(run: Scenario) -> None:
    flags, report = run.flags, run.report
    common: dict[str, Any] = {
        "bootstrap_servers": flags.bootstrap,
        "client_id": f"{CLIENT}-scenarios",
    }
    admin = KafkaAdminClient(**common)
    topic, group = flags.topic, flags.group
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    with run.step("create_topic"):
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, 1, topic_configs={"retention.ms": RETENTION_MS})]
        )

    with run.step("describe_configs"):
        entries = describe_topic(admin, topic)
        report["topic_configs"] = {name: entry["value"] for name, entry in entries.items()}
        report["default_config"] = {
            name: entry["config_source"] == "DEFAULT_CONFIG" for name, entry in entries.items()
        }

    with run.step("produce"):
        report["codecs"], report["partitioner"] = list(CODECS), "murmur2"
        report["produced"] = produce(run, common)
    run.done("headers", "timestamps", "keyed")

    with run.step("consume_group"):
        reader = group_member(common, topic, group, "earliest", enable_auto_commit=False)
        deadline = time.monotonic() + TIMEOUT
        while len(report.get("consumed", {})) < flags.messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(report.get('consumed', {}))} messages")
            for message in (m for batch in reader.poll(200).values() for m in batch):
                run.record(
                    message.key.decode(),
                    message.value,
                    message.partition,
                    message.offset,
                    message.timestamp,
                    message.headers,
                )
        reader.commit()
        reader.close()

    with run.step("committed"):
        committed = admin.list_group_offsets({group: partitions})[group]
        report["committed"] = {tp.partition: found.offset for tp, found in committed.items()}

    with run.step("list_offsets"):
        report["oldest"] = list_offsets(admin, partitions, OffsetSpec.EARLIEST)
        report["newest"] = list_offsets(admin, partitions, OffsetSpec.LATEST)

    target = run.time_target()
    with run.step("offsets_for_time"):
        report["time_target"] = target
        at_time = list_offsets(admin, partitions, OffsetTimestamp(target))
        report["offsets_for_time"] = at_time

    with run.step("from_timestamp"):
        report["from_timestamp"] = read_from(common, topic, at_time, report["newest"])

    with run.step("from_latest"):
        report["from_latest"] = from_latest(common, topic, f"{group}-latest")

    with run.step("rebalance"):
        two, three = rebalance(lambda: Member(common, topic, f"{group}-trio"))
        report["group_of_two"], report["group_of_three"] = two, three
    run.skip(
        "rebalance_consumer_protocol",
        "kafka-python has only the classic group protocol (JoinGroup, SyncGroup), "
        "not KIP-848's ConsumerGroupHeartbeat",
    )

    with run.step("list_groups"):
        report["groups"] = sorted(found["group_id"] for found in admin.list_groups())

    with run.step("describe_group"):
        report["group_state"] = admin.describe_groups([group])[group]["group_state"]

    # One producer's transactions carry all three steps: reported in the catalogue's order.
    with run.step("transactions"):
        transactions(run, common, admin)
    run.done("transaction_offsets", "fencing")

    with run.step("delete_topic"):
        admin.delete_topics([topic])
    admin.close()


def transactions(run: Scenario, common: dict[str, Any], admin: KafkaAdminClient) -> None:
    """SCENARIOS.md's transactions, transaction_offsets and fencing steps."""
    report, topic, group = run.report, run.flags.topic, run.flags.group
    txn_topic, txn_id, txn_group = f"{topic}-txn", f"{group}-txn", f"{group}-txn"
    admin.create_topics([NewTopic(txn_topic, PARTITIONS, 1)])
    producer = KafkaProducer(transactional_id=txn_id, **common)

    def send(writer: KafkaProducer, kind: str) -> None:
        sent = [
            writer.send(txn_topic, key=key.encode(), value=f"value-{key}".encode())
            for key in txn_keys(kind)
        ]
        for future in sent:
            future.get(TIMEOUT)

    producer.init_transactions()
    producer.begin_transaction()
    send(producer, "commit")
    offsets = {TopicPartition(topic, 0): OffsetAndMetadata(TXN_OFFSET, "", -1)}
    producer.send_offsets_to_transaction(offsets, txn_group)
    producer.commit_transaction()
    producer.begin_transaction()
    send(producer, "abort")
    producer.abort_transaction()

    successor = KafkaProducer(transactional_id=txn_id, **common)
    successor.init_transactions()
    try:
        producer.begin_transaction()
        send(producer, "zombie")
        producer.commit_transaction()
    except KafkaError as exc:
        report["fenced"] = f"{type(exc).__name__}: {exc}"
    else:
        raise AssertionError("the fenced producer committed")
    finally:
        # The fenced producer's batches fail one at a time; close(0) would raise on the
        # first one still pending, so wait for them all.
        producer.close(TIMEOUT)
    successor.begin_transaction()
    send(successor, "after")
    successor.commit_transaction()
    successor.close(TIMEOUT)

    committed = admin.list_group_offsets({txn_group: [TopicPartition(topic, 0)]})[txn_group]
    report["transaction_offsets"] = {tp.partition: meta.offset for tp, meta in committed.items()}
    report["read_committed"] = read_committed(common, txn_topic)


def read_committed(common: dict[str, Any], topic: str) -> list[str]:
    """Every key of `topic` a read_committed consumer reads to the end, once the last
    stable offsets have caught up with the log ends (a real Kafka writes the markers
    after answering the commit)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = KafkaConsumer(isolation_level="read_committed", enable_auto_commit=False, **common)
    looker = KafkaConsumer(enable_auto_commit=False, **common)
    deadline = time.monotonic() + TIMEOUT
    while (ends := reader.end_offsets(partitions)) != looker.end_offsets(partitions):
        if time.monotonic() > deadline:
            raise TimeoutError("the transactions' markers")
        time.sleep(0.1)
    looker.close()
    reader.assign(partitions)
    reader.seek_to_beginning(*partitions)
    keys: list[str] = []
    while any(reader.position(tp) < ends[tp] for tp in partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} not read to its end")
        keys += [m.key.decode() for batch in reader.poll(200).values() for m in batch]
    reader.close()
    return keys


def group_member(
    common: dict[str, Any],
    topic: str,
    group: str,
    reset: str,
    listener: Any = None,
    **settings: Any,
) -> KafkaConsumer:
    """A consumer subscribed to `topic` in `group`, knowing the topic's partitions first:
    kafka-python 3.0 can stall in a group whose first assignment it made without the
    topic's metadata (the leader then never applies its own share)."""
    consumer = KafkaConsumer(group_id=group, auto_offset_reset=reset, **common, **settings)
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic], listener=listener)
    return consumer


def describe_topic(admin: KafkaAdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    for attempt in range(CONFIG_RETRIES):
        try:
            found: dict[str, Any] = admin.describe_configs([resource], config_filter="all")
            return found["topic"][topic]  # type: ignore[no-any-return]
        except UnknownTopicOrPartitionError:
            if attempt == CONFIG_RETRIES - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def produce(run: Scenario, common: dict[str, Any]) -> dict[str, int]:
    producers = [
        KafkaProducer(
            acks="all", compression_type=None if codec == "none" else codec, linger_ms=5, **common
        )
        for codec in CODECS
    ]
    sent = []
    for index, key in enumerate(run.keys):
        future = producers[index % len(CODECS)].send(
            run.flags.topic,
            key=key.encode(),
            value=f"value-{key}".encode(),
            headers=[("origin", f"header-{key}".encode())],
            timestamp_ms=run.timestamp(index),
        )
        sent.append((key, future))
    produced = {key: future.get(TIMEOUT).partition for key, future in sent}
    for producer in producers:
        producer.close(TIMEOUT)
    return produced


def list_offsets(
    admin: KafkaAdminClient, partitions: list[TopicPartition], spec: Any
) -> dict[int, int]:
    found = admin.list_partition_offsets({tp: spec for tp in partitions})
    return {tp.partition: answer.offset for tp, answer in found.items()}


def read_from(
    common: dict[str, Any], topic: str, start: dict[int, int], newest: dict[int, int]
) -> list[str]:
    reader = KafkaConsumer(enable_auto_commit=False, **common)
    wanted = {p: at for p, at in start.items() if 0 <= at < newest[p]}
    reader.assign([TopicPartition(topic, p) for p in wanted])
    for partition, at in wanted.items():
        reader.seek(TopicPartition(topic, partition), at)
    keys: list[str] = []
    remaining = set(wanted)
    deadline = time.monotonic() + TIMEOUT
    while remaining:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(remaining)} not read to their end")
        for message in (m for batch in reader.poll(200).values() for m in batch):
            keys.append(message.key.decode())
            if message.offset + 1 >= newest[message.partition]:
                remaining.discard(message.partition)
    reader.close()
    return keys


def from_latest(common: dict[str, Any], topic: str, group: str) -> list[str]:
    reader = group_member(common, topic, group, "latest")
    writer = KafkaProducer(acks="all", **common)

    def send(key: str) -> None:
        writer.send(topic, key=key.encode(), value=b"late").get(TIMEOUT)

    def poll() -> list[str]:
        return [m.key.decode() for batch in reader.poll(POLL_MS).values() for m in batch]

    keys = read_late(send, poll)
    writer.close(TIMEOUT)
    reader.close()
    return keys


class Member(threading.Thread, ConsumerRebalanceListener):  # type: ignore[misc]
    """A group member polling in its own thread, holding its current assignment."""

    def __init__(self, common: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.stopping = threading.Event()
        self.consumer = group_member(common, topic, group, "earliest", listener=self)
        self.start()

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.held = {tp.partition for tp in assigned}

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.held = set()

    def run(self) -> None:
        # kafka-python 3.0 rejoins a group only within a poll long enough to finish the
        # join; 50 ms polls on a busy machine left a member out for good.
        while not self.stopping.is_set():
            self.consumer.poll(POLL_MS)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT)


if __name__ == "__main__":
    raise SystemExit(main())
