"""Client scenarios for the differential run: each drives a real client (confluent-kafka,
the librdkafka Kafka clients most Python code uses) against one bootstrap address, with
fixed topic and group names, so the same requests reach minibroker and Apache Kafka.

Each scenario waits for what it needs (records, assignments) rather than for time, and
ends by closing its clients, so the requests it leaves behind are complete.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from confluent_kafka import (
    OFFSET_END,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

TIMEOUT = 20.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
QUIET = {"log_level": 0}
LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # librdkafka's retries against a missing topic are expected here


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def create(
    bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})
    client = admin(bootstrap)  # held: a client dropped early fails its pending requests
    client.create_topics([topic])[name].result(TIMEOUT)
    # A real Kafka makes a new topic known to its metadata cache a moment later.
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = client.list_topics(name, timeout=TIMEOUT).topics.get(name)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            return
        time.sleep(0.05)


def consume(consumer: Consumer, count: int) -> list[tuple[int, int, bytes | None]]:
    got: list[tuple[int, int, bytes | None]] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.offset(), message.value()))
    assert len(got) == count, f"read {len(got)} of {count}"
    return got


def produce_every_codec(bootstrap: str) -> None:
    """Produce 20 keyed records per codec, idempotent, acks=all; read them back."""
    create(bootstrap, "diff-codecs", 1)
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 20,
                **QUIET,
            }
        )
        for i in range(20):
            producer.produce("diff-codecs", key=f"{codec}-{i}".encode(), value=b"v" * 100)
        assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "diff-codecs-reader", **QUIET}
        | {"auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("diff-codecs", 0, 0)])
    assert [offset for _, offset, _ in consume(consumer, 100)] == list(range(100))
    consumer.close()


def fetch_and_list_offsets(bootstrap: str) -> None:
    """Offsets: earliest, latest, by timestamp, out of range, and a read from the middle."""
    create(bootstrap, "diff-offsets", 2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
    for i in range(10):
        producer.produce(
            "diff-offsets", value=f"{i}".encode(), partition=i % 2, timestamp=1_000 + i
        )
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "diff-offsets-reader", **QUIET}
        | {"auto.offset.reset": "error", "enable.auto.commit": False}
    )
    for partition in (0, 1):
        assert consumer.get_watermark_offsets(
            TopicPartition("diff-offsets", partition), timeout=TIMEOUT
        ) == (0, 5)
    found = consumer.offsets_for_times(
        [TopicPartition("diff-offsets", 0, 1_004), TopicPartition("diff-offsets", 1, 9_999)],
        timeout=TIMEOUT,
    )
    assert [tp.offset for tp in found] == [2, -1]
    consumer.assign([TopicPartition("diff-offsets", 0, 3)])
    assert [value for _, _, value in consume(consumer, 2)] == [b"6", b"8"]
    # Beyond the end with auto.offset.reset=error: the client reports the range error.
    consumer.assign([TopicPartition("diff-offsets", 1, 50)])
    deadline = time.monotonic() + TIMEOUT
    error = None
    while error is None and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is not None:
            error = message.error()
    assert error is not None
    consumer.close()


def group_of_two(bootstrap: str) -> None:
    """Two members share a topic; the second's join rebalances; both commit and leave."""
    create(bootstrap, "diff-group", 4)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(40):
        producer.produce("diff-group", value=f"{i}".encode(), partition=i % 4)
    assert producer.flush(TIMEOUT) == 0
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": "diff-group-members",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6_000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
        **QUIET,
    }
    first = Consumer(settings | {"client.id": "first"})
    first.subscribe(["diff-group"])
    consume(first, 40)
    second = Consumer(settings | {"client.id": "second"})
    second.subscribe(["diff-group"])
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not (
        first.assignment() and second.assignment() and len(first.assignment()) == 2
    ):
        first.poll(0.1)
        second.poll(0.1)
    assert len(first.assignment()) == len(second.assignment()) == 2
    for member in (first, second):
        member.commit(
            offsets=[TopicPartition("diff-group", tp.partition, 10) for tp in member.assignment()],
            asynchronous=False,
        )
    committed = first.committed([TopicPartition("diff-group", p) for p in range(4)], TIMEOUT)
    assert [tp.offset for tp in committed] == [10] * 4
    second.close()
    first.close()


def admin_calls(bootstrap: str) -> None:
    """Topic admin and its errors, configs, partitions, records, groups."""
    client = admin(bootstrap)
    create(bootstrap, "diff-admin", 1, {"retention.ms": "3600000"})
    again = client.create_topics([NewTopic("diff-admin", 1, 1)])["diff-admin"]
    bad = client.create_topics([NewTopic("diff-bad-config", 1, 1, config={"no.such": "1"})])
    for future in (again, bad["diff-bad-config"]):
        try:
            future.result(TIMEOUT)
        except KafkaException:
            pass
        else:
            raise AssertionError("the broker accepted a topic it should refuse")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "diff-admin")
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["retention.ms"].value == "3600000"
    client.create_partitions([NewPartitions("diff-admin", 3)])["diff-admin"].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(6):
        producer.produce("diff-admin", value=b"x", partition=i % 3)
    assert producer.flush(TIMEOUT) == 0
    for done in client.delete_records([TopicPartition("diff-admin", 0, 1)]).values():
        done.result(TIMEOUT)
    client.list_consumer_groups().result(TIMEOUT)
    client.delete_topics(["diff-admin"])["diff-admin"].result(TIMEOUT)
    with contextlib.suppress(KafkaException):  # UNKNOWN_TOPIC_OR_PARTITION, compared
        client.delete_topics(["diff-never-was"])["diff-never-was"].result(TIMEOUT)


def read_all(consumer: Consumer, topic: str, partitions: int) -> list[bytes]:
    """Every record value a consumer delivers from the start of each partition to its end."""
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None:
            continue
        error = message.error()
        if error is None:
            got.append(message.value() or b"")
        elif error.code() == KafkaError._PARTITION_EOF:
            at_end.add(message.partition() or 0)
    assert len(at_end) == partitions, f"reached the end of {len(at_end)} of {partitions}"
    return got


def settled(bootstrap: str, topic: str, partitions: int) -> None:
    """Wait until read_committed ends where the log ends: Kafka writes a transaction's
    markers after answering EndTxn (an application waits the same way)."""
    client = admin(bootstrap)
    wanted = [TopicPartition(topic, p) for p in range(partitions)]

    def ends(isolation: IsolationLevel) -> list[int]:
        found = client.list_offsets({tp: LATEST for tp in wanted}, isolation_level=isolation)
        return [found[tp].result(TIMEOUT).offset for tp in wanted]

    deadline = time.monotonic() + TIMEOUT
    while ends(IsolationLevel.READ_COMMITTED) != ends(IsolationLevel.READ_UNCOMMITTED):
        assert time.monotonic() < deadline, f"{topic}'s markers not written"
        time.sleep(0.05)


def transactions(bootstrap: str) -> None:
    """A committed and an aborted transaction with a group's offsets, read back with
    read_committed and read_uncommitted; offsets under read_committed while one is open."""
    create(bootstrap, "diff-txn", 2)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "diff-txn-producer", **QUIET}
    )
    producer.init_transactions(TIMEOUT)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "diff-txn-group", **QUIET})
    producer.begin_transaction()
    for i in range(10):
        producer.produce("diff-txn", value=f"committed-{i}".encode(), partition=i % 2)
    producer.send_offsets_to_transaction(
        [TopicPartition("diff-txn", 0, 5)], group.consumer_group_metadata(), TIMEOUT
    )
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("diff-txn", value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(TIMEOUT)
    reader_settings = {"bootstrap.servers": bootstrap, "group.id": "diff-txn-reader", **QUIET}
    committed_reader = Consumer(
        reader_settings | {"isolation.level": "read_committed", "enable.partition.eof": True}
    )
    # While the second transaction is open, the latest offset under read_committed is its
    # first (five committed records and the commit marker before it).
    stable = committed_reader.offsets_for_times(
        [TopicPartition("diff-txn", 0, OFFSET_END)], timeout=TIMEOUT
    )
    assert stable[0].offset == 6
    producer.abort_transaction(TIMEOUT)
    settled(bootstrap, "diff-txn", 2)
    committed = read_all(committed_reader, "diff-txn", 2)
    assert sorted(committed) == sorted(f"committed-{i}".encode() for i in range(10))
    uncommitted_reader = Consumer(
        reader_settings | {"isolation.level": "read_uncommitted", "enable.partition.eof": True}
    )
    assert len(read_all(uncommitted_reader, "diff-txn", 2)) == 14
    assert [tp.offset for tp in group.committed([TopicPartition("diff-txn", 0)], TIMEOUT)] == [5]
    for consumer in (committed_reader, uncommitted_reader, group):
        consumer.close()


SCENARIOS: dict[str, Callable[[str], None]] = {
    "produce_every_codec": produce_every_codec,
    "fetch_and_list_offsets": fetch_and_list_offsets,
    "group_of_two": group_of_two,
    "admin_calls": admin_calls,
    "transactions": transactions,
}
