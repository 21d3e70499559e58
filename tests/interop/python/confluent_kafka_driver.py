"""The client matrix's scenario with confluent-kafka (librdkafka): SCENARIOS.md's steps."""

from __future__ import annotations

import threading
import time
from importlib import metadata
from typing import Any

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
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
    wait_until,
)

CLIENT = "confluent-kafka"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TIMEOUT = 20.0


def main() -> int:
    return drive(CLIENT, metadata.version(CLIENT), scenario)


def scenario(run: Scenario) -> None:
    flags, report = run.flags, run.report
    common = {"bootstrap.servers": flags.bootstrap, "client.id": f"{CLIENT}-scenarios"}
    admin = AdminClient(common)
    topic, group = flags.topic, flags.group
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    with run.step("create_topic"):
        new = NewTopic(topic, PARTITIONS, 1, config={"retention.ms": RETENTION_MS})
        admin.create_topics([new])[topic].result(TIMEOUT)

    with run.step("describe_configs"):
        entries = describe_topic(admin, topic)
        report["topic_configs"] = {name: entry.value for name, entry in entries.items()}
        report["default_config"] = {name: entry.is_default for name, entry in entries.items()}

    with run.step("produce"):
        report["codecs"], report["partitioner"] = list(CODECS), "crc32"
        report["produced"] = produce(run, common)
    run.done("headers", "timestamps", "keyed")

    with run.step("consume_group"):
        reader = Consumer(
            {
                **common,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        reader.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(report.get("consumed", {})) < flags.messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(report.get('consumed', {}))} messages")
            message = reader.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise RuntimeError(message.error())
            keep(run, message)
        reader.commit(asynchronous=False)
        reader.close()

    with run.step("committed"):
        wanted = confluent_kafka.ConsumerGroupTopicPartitions(group, partitions)
        [listed] = admin.list_consumer_group_offsets([wanted]).values()
        found = listed.result(TIMEOUT).topic_partitions
        report["committed"] = {tp.partition: tp.offset for tp in found}

    with run.step("list_offsets"):
        report["oldest"] = list_offsets(admin, partitions, OffsetSpec.earliest())
        report["newest"] = list_offsets(admin, partitions, OffsetSpec.latest())

    target = run.time_target()
    with run.step("offsets_for_time"):
        report["time_target"] = target
        at_time = list_offsets(admin, partitions, OffsetSpec.for_timestamp(target))
        report["offsets_for_time"] = at_time

    with run.step("from_timestamp"):
        start = [TopicPartition(topic, p, at) for p, at in at_time.items() if at >= 0]
        report["from_timestamp"] = read_from(common, start, report["newest"])

    with run.step("from_latest"):
        report["from_latest"] = from_latest(common, topic, f"{group}-latest")

    with run.step("rebalance"):
        two, three = rebalance(lambda: Member(common, topic, f"{group}-trio"))
        report["group_of_two"], report["group_of_three"] = two, three
    run.skip(
        "rebalance_consumer_protocol",
        "not run with this client: the driver's groups use the classic protocol "
        "(librdkafka's group.protocol=consumer is not exercised here)",
    )

    with run.step("list_groups"):
        listed_groups = admin.list_consumer_groups().result(TIMEOUT)
        report["groups"] = sorted(found.group_id for found in listed_groups.valid)

    with run.step("describe_group"):
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
        # The enum's names are Kafka's states in capitals (EMPTY, STABLE, ...).
        report["group_state"] = described.state.name.replace("_", "").title()

    # One producer's transactions carry all three steps: reported in the catalogue's order.
    with run.step("transactions"):
        transactions(run, common, admin)
    run.done("transaction_offsets", "fencing")

    with run.step("delete_topic"):
        admin.delete_topics([topic])[topic].result(TIMEOUT)


def transactions(run: Scenario, common: dict[str, Any], admin: AdminClient) -> None:
    """SCENARIOS.md's transactions, transaction_offsets and fencing steps."""
    report, topic, group = run.report, run.flags.topic, run.flags.group
    txn_topic, txn_id, txn_group = f"{topic}-txn", f"{group}-txn", f"{group}-txn"
    admin.create_topics([NewTopic(txn_topic, PARTITIONS, 1)])[txn_topic].result(TIMEOUT)
    settings = {**common, "transactional.id": txn_id}
    producer = Producer(settings)
    producer.init_transactions(TIMEOUT)

    def send(writer: Producer, kind: str) -> None:
        for key in txn_keys(kind):
            writer.produce(txn_topic, key=key.encode(), value=f"value-{key}".encode())

    producer.begin_transaction()
    send(producer, "commit")
    consumer_group = Consumer({**common, "group.id": txn_group})
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, TXN_OFFSET)], consumer_group.consumer_group_metadata(), TIMEOUT
    )
    consumer_group.close()
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    send(producer, "abort")
    if producer.flush(TIMEOUT) != 0:
        raise TimeoutError("aborted transaction's records not acknowledged")
    producer.abort_transaction(TIMEOUT)

    successor = Producer(settings)
    successor.init_transactions(TIMEOUT)
    try:
        producer.begin_transaction()
        send(producer, "zombie")
        producer.commit_transaction(TIMEOUT)
    except KafkaException as exc:
        report["fenced"] = str(exc)
    else:
        raise AssertionError("the fenced producer committed")
    successor.begin_transaction()
    send(successor, "after")
    successor.commit_transaction(TIMEOUT)

    wanted = confluent_kafka.ConsumerGroupTopicPartitions(txn_group, [TopicPartition(topic, 0)])
    [listed] = admin.list_consumer_group_offsets([wanted]).values()
    committed = listed.result(TIMEOUT).topic_partitions
    report["transaction_offsets"] = {tp.partition: tp.offset for tp in committed}
    report["read_committed"] = read_committed(common, admin, txn_topic)


def read_committed(common: dict[str, Any], admin: AdminClient, topic: str) -> list[str]:
    """Every key of `topic` a read_committed consumer reads to the end, once the last
    stable offsets have caught up with the log ends (a real Kafka writes the markers
    after answering the commit)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def ends(isolation: IsolationLevel) -> dict[int, int]:
        answers = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=isolation
        )
        return {tp.partition: answer.result(TIMEOUT).offset for tp, answer in answers.items()}

    wait_until(
        lambda: ends(IsolationLevel.READ_COMMITTED) == ends(IsolationLevel.READ_UNCOMMITTED),
        TIMEOUT,
        "the transactions' markers",
        interval=0.1,
    )
    reader = Consumer(
        {
            **common,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    keys: list[str] = []
    ended: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    while len(ended) < PARTITIONS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(ended)} of {topic} read to their end")
        message = reader.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            continue
        keys.append(message.key().decode())
    reader.close()
    return keys


def describe_topic(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource("topic", topic)
    for attempt in range(CONFIG_RETRIES):
        try:
            return dict(admin.describe_configs([resource])[resource].result(TIMEOUT))
        except confluent_kafka.KafkaException as exc:
            code = exc.args[0].code()
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or attempt == CONFIG_RETRIES - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def produce(run: Scenario, common: dict[str, Any]) -> dict[str, int]:
    produced: dict[str, int] = {}
    errors: list[str] = []

    def delivered(error: KafkaError | None, message: confluent_kafka.Message) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            produced[message.key().decode()] = message.partition()

    producers = [
        Producer({**common, "acks": "all", "compression.type": codec, "linger.ms": 5})
        for codec in CODECS
    ]
    for index, key in enumerate(run.keys):
        producers[index % len(CODECS)].produce(
            run.flags.topic,
            key=key.encode(),
            value=f"value-{key}".encode(),
            headers=[("origin", f"header-{key}".encode())],
            timestamp=run.timestamp(index),
            on_delivery=delivered,
        )
    for producer in producers:
        if producer.flush(TIMEOUT) != 0:
            raise TimeoutError("messages left undelivered")
    if errors:
        raise RuntimeError(errors[0])
    return produced


def keep(run: Scenario, message: confluent_kafka.Message) -> None:
    _, timestamp = message.timestamp()
    run.record(
        message.key().decode(),
        message.value(),
        message.partition(),
        message.offset(),
        timestamp,
        message.headers(),
    )


def list_offsets(admin: AdminClient, partitions: list[TopicPartition], spec: Any) -> dict[int, int]:
    answers = admin.list_offsets({tp: spec for tp in partitions})
    return {tp.partition: answer.result(TIMEOUT).offset for tp, answer in answers.items()}


def read_from(
    common: dict[str, Any], start: list[TopicPartition], newest: dict[int, int]
) -> list[str]:
    reader = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
    reader.assign(start)
    remaining = {tp.partition for tp in start if tp.offset < newest[tp.partition]}
    keys: list[str] = []
    deadline = time.monotonic() + TIMEOUT
    while remaining:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(remaining)} not read to their end")
        message = reader.poll(0.2)
        if message is None or message.error() is not None:
            continue
        keys.append(message.key().decode())
        if message.offset() + 1 >= newest[message.partition()]:
            remaining.discard(message.partition())
    reader.close()
    return keys


def from_latest(common: dict[str, Any], topic: str, group: str) -> list[str]:
    reader = Consumer({**common, "group.id": group, "auto.offset.reset": "latest"})
    reader.subscribe([topic])
    writer = Producer({**common, "acks": "all"})

    def send(key: str) -> None:
        writer.produce(topic, key=key.encode(), value=b"late")
        writer.flush(TIMEOUT)

    def poll() -> list[str]:
        message = reader.poll(0.05)
        ok = message is not None and message.error() is None
        return [message.key().decode()] if ok else []

    keys = read_late(send, poll)
    reader.close()
    return keys


class Member(threading.Thread):
    """A group member polling in its own thread, holding its current assignment."""

    def __init__(self, common: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.stopping = threading.Event()
        self.consumer = Consumer({**common, "group.id": group, "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic], on_assign=self.assigned, on_revoke=self.revoked)
        self.start()

    def assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.held = {tp.partition for tp in partitions}

    def revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.held = set()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT)


if __name__ == "__main__":
    raise SystemExit(main())
