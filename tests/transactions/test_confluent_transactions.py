"""Kafka transactions through confluent-kafka (librdkafka) over real sockets, beyond the
client matrix's transaction steps (which every client runs: commit, abort, offsets in a
transaction, a fenced zombie): exactly-once consume-transform-produce in a group, a
producer killed mid-transaction, interleaved transactions, a reader starting inside an
aborted one, the coordinator's timeout on the broker's clock, the last stable offset in
ListOffsets, OffsetFetch's require_stable, and the coordinator's own view
(DescribeTransactions, ListTransactions).

Tests marked parity use only clients over the wire and the KafkaService fixtures: CI runs
them against Apache Kafka too. A real Kafka writes the commit and abort markers after it
has answered EndTxn, so tests wait for the last stable offset to reach the log's end (as
an application would) instead of assuming the markers are there when the call returns.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from kio.serial.errors import OutOfBoundValue

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.testing.backends import KafkaService
from minibroker.testing.clients import ClientConfigs
from minibroker.testing.waiting import wait_for

OFFSET_FETCH, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 9, 65, 66
NONE, UNSTABLE_OFFSET_COMMIT, TRANSACTIONAL_ID_NOT_FOUND = 0, 88, 105

# A real Kafka creates __transaction_state on the first transactional id it sees.
INIT_TIMEOUT = 60.0
CALL_TIMEOUT = 30.0  # commit, abort, send_offsets_to_transaction
READ_TIMEOUT = 30.0
PROCESS_TIMEOUT = 90.0
STABLE_TIMEOUT = 30.0
TRANSACTION_TIMEOUT_MS = 60_000
# What librdkafka reports for a producer whose epoch another one with its transactional
# id has taken: _FENCED (its own code for it), or the broker's code passed through.
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]
HELPERS = Path(__file__).resolve().parent / "python"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def transactional_producer(config: ClientConfigs, transactional_id: str) -> Producer:
    """A producer with `transactional_id` that has run init_transactions()."""
    producer = Producer(
        config.confluent_producer(
            **{
                "transactional.id": transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            }
        )
    )
    producer.init_transactions(INIT_TIMEOUT)
    return producer


def produce_in_transaction(
    producer: Producer, topic: str, values: list[str], *, commit: bool, partition: int = 0
) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value.encode(), partition=partition)
    # Acknowledged first: an abort would drop records librdkafka still holds, and they
    # are to be in the log, aborted.
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(CALL_TIMEOUT)
    else:
        producer.abort_transaction(CALL_TIMEOUT)


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


# --- reading back -------------------------------------------------------------------


@dataclass(frozen=True)
class Consumed:
    """What a consumer assigned to every partition read up to the end."""

    records: list[tuple[int, int, str]]  # partition, offset, value
    positions: dict[int, int]  # where the consumer stands at the end, per partition

    @property
    def values(self) -> list[str]:
        return [value for _, _, value in self.records]


def read_to_end(
    config: ClientConfigs, topic: str, partitions: int, isolation: str, start: int = 0
) -> Consumed:
    """Read every partition from offset `start` until the consumer reports reaching its
    end (the last stable offset under read_committed, the high watermark otherwise)."""
    settings: dict[str, Any] = {
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }
    consumer = Consumer(config.confluent_consumer(**settings))
    records: list[tuple[int, int, str]] = []
    try:
        consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        at_end: set[int] = set()

        def reached_end() -> bool:
            for message in consumer.consume(100, 0.1):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(where(message)[0])
                elif error is not None:
                    raise KafkaException(error)
                else:
                    records.append((*where(message), decoded(message)))
            return len(at_end) == partitions

        wait_for(
            reached_end,
            READ_TIMEOUT,
            describe=lambda: {"read": records, "partitions at their end": sorted(at_end)},
        )
        positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        return Consumed(records, {tp.partition: tp.offset for tp in positions})
    finally:
        consumer.close()


def where(message: Message) -> tuple[int, int]:
    """A consumed message's partition and offset."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None
    return partition, offset


def decoded(message: Message) -> str:
    value = message.value()
    assert isinstance(value, bytes)
    return value.decode()


def latest_offsets(
    admin: AdminClient, topic: str, partitions: int, isolation: IsolationLevel
) -> dict[int, int]:
    """ListOffsets(latest) for each partition at this isolation level."""
    wanted = {TopicPartition(topic, p): LATEST for p in range(partitions)}
    answers = admin.list_offsets(wanted, isolation_level=isolation, request_timeout=10)
    return {tp.partition: answer.result(10).offset for tp, answer in answers.items()}


def wait_until_stable(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    """Wait until no transaction is open on the topic and every marker is written: the
    last stable offset (read_committed latest) is the high watermark. Returns it."""

    def stable() -> dict[int, int]:
        committed = latest_offsets(admin, topic, partitions, IsolationLevel.READ_COMMITTED)
        uncommitted = latest_offsets(admin, topic, partitions, IsolationLevel.READ_UNCOMMITTED)
        return committed if committed == uncommitted else {}

    ends: dict[int, int] = wait_for(stable, STABLE_TIMEOUT, describe=f"{topic} to be stable")
    return ends


def admin_for(config: ClientConfigs) -> AdminClient:
    return AdminClient(config.confluent_admin())


def fenced_error(raised: pytest.ExceptionInfo[KafkaException]) -> KafkaError:
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    return error


# --- exactly once -------------------------------------------------------------------


@pytest.mark.parity
def test_consume_transform_produce_writes_each_input_once_and_commits_the_input_offsets(
    kafka_broker: KafkaService, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """The exactly-once loop: records read in a group, transformed, written to an output
    topic with the input offsets in the same transaction (send_offsets_to_transaction),
    committed every few records. One batch fails and is aborted; the processor rewinds to
    the group's committed offsets and does it again. The output read with read_committed
    holds every input once, and the group's offsets are the input's end."""
    source, sink = kafka_topic(partitions=3), kafka_topic(partitions=2)
    inputs = names("order", 40)
    feeder = Producer(kafka_config.confluent_producer())
    for i, value in enumerate(inputs):
        feeder.produce(source, value.encode(), partition=i % 3)
    assert feeder.flush(30) == 0
    group, batch_size = unique("transform"), 7
    consumer = Consumer(
        kafka_config.confluent_consumer(
            group, **{"enable.auto.commit": False, "isolation.level": "read_committed"}
        )
    )
    producer = transactional_producer(kafka_config, unique("transform-txn"))
    processed: list[str] = []
    failed_batches: list[list[str]] = []
    try:
        consumer.subscribe([source])
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while len(processed) < len(inputs):
            assert time.monotonic() < deadline, f"processed {len(processed)} of {len(inputs)}"
            batch = [m for m in consumer.consume(batch_size, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            next_offsets: dict[int, int] = {}
            for message in batch:
                partition, offset = where(message)
                transformed = f"done:{decoded(message)}".encode()
                producer.produce(sink, transformed, partition=partition % 2)
                next_offsets[partition] = offset + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in next_offsets.items()],
                consumer.consumer_group_metadata(),
                CALL_TIMEOUT,
            )
            if len(processed) >= batch_size and not failed_batches:
                # A failure half-way, after the output was written: abort, and start
                # again from the committed offsets.
                assert producer.flush(30) == 0
                producer.abort_transaction(CALL_TIMEOUT)
                failed_batches.append([decoded(m) for m in batch])
                committed = consumer.committed(consumer.assignment(), CALL_TIMEOUT)
                for stored in committed:
                    resume = stored.offset if stored.offset >= 0 else OFFSET_BEGINNING
                    consumer.seek(TopicPartition(source, stored.partition, resume))
                continue
            producer.commit_transaction(CALL_TIMEOUT)
            processed.extend(decoded(m) for m in batch)
        assert failed_batches, "no batch was aborted: the test did not test the retry"

        def committed_offsets() -> dict[int, int]:
            wanted = [TopicPartition(source, p) for p in range(3)]
            return {tp.partition: tp.offset for tp in consumer.committed(wanted, 10)}

        ends = kafka_broker.end_offsets(source)
        wait_for(
            lambda: committed_offsets() == ends,
            STABLE_TIMEOUT,
            describe=lambda: {"committed": committed_offsets(), "ends": ends},
        )
    finally:
        consumer.close()

    wait_until_stable(admin_for(kafka_config), sink, 2)
    output = read_to_end(kafka_config, sink, 2, "read_committed")
    assert Counter(output.values) == Counter(f"done:{value}" for value in inputs)
    everything = read_to_end(kafka_config, sink, 2, "read_uncommitted")
    # The aborted batch is in the log, and only read_committed readers skip it.
    assert Counter(everything.values) == Counter(output.values) + Counter(
        f"done:{value}" for value in failed_batches[0]
    )


# --- a producer that dies, aborts, zombies --------------------------------------------


@pytest.mark.parity
def test_a_producer_killed_mid_transaction_is_aborted_by_its_successor(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs, kafka_bootstrap: str
) -> None:
    """A process with an open transaction is SIGKILLed after its records were written. A
    new producer with the same transactional id calls init_transactions(): the old
    transaction is aborted, so read_committed readers never see those records, while its
    own committed ones are seen once."""
    topic, transactional_id = kafka_topic(partitions=2), unique("crashing")
    child = subprocess.Popen(
        [
            sys.executable,
            str(HELPERS / "producer_killed_mid_transaction.py"),
            kafka_bootstrap,
            topic,
            transactional_id,
            "6",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        said = child.stdout.readline().strip()  # EOF (and "") if it exits first
        assert said == "produced", f"the child producer failed (exit {child.poll()})"
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    admin = admin_for(kafka_config)
    # The killed producer's transaction holds the last stable offset at its first record.
    assert latest_offsets(admin, topic, 2, IsolationLevel.READ_COMMITTED) == {0: 0, 1: 0}

    successor = transactional_producer(kafka_config, transactional_id)
    successor.begin_transaction()
    for i in range(4):
        successor.produce(topic, f"kept-{i}".encode(), partition=i % 2)
    successor.commit_transaction(CALL_TIMEOUT)

    wait_until_stable(admin, topic, 2)
    committed = read_to_end(kafka_config, topic, 2, "read_committed")
    assert sorted(committed.values) == names("kept", 4)
    everything = read_to_end(kafka_config, topic, 2, "read_uncommitted")
    assert sorted(everything.values) == names("kept", 4) + names("lost", 6)


@pytest.mark.parity
def test_an_aborted_transaction_is_skipped_by_read_committed_and_later_ones_are_read(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """commit, abort, commit on one partition: read_committed reads the first and third
    transactions' records and ends past the last marker; read_uncommitted reads all."""
    topic = kafka_topic(partitions=1)
    producer = transactional_producer(kafka_config, unique("aborting"))
    produce_in_transaction(producer, topic, names("first", 3), commit=True)
    produce_in_transaction(producer, topic, names("aborted", 3), commit=False)
    produce_in_transaction(producer, topic, names("third", 3), commit=True)

    ends = wait_until_stable(admin_for(kafka_config), topic, 1)
    committed = read_to_end(kafka_config, topic, 1, "read_committed")
    assert committed.values == names("first", 3) + names("third", 3)
    assert committed.positions == ends  # moved past the aborted records and the markers
    everything = read_to_end(kafka_config, topic, 1, "read_uncommitted")
    assert everything.values == names("first", 3) + names("aborted", 3) + names("third", 3)
    # Each transaction's marker takes an offset of its own: the readers skip it.
    offsets = [offset for _, offset, _ in everything.records]
    assert offsets == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert ends == {0: 12}


@pytest.mark.parity
def test_interleaved_transactions_on_one_partition_keep_only_the_committed_ones_records(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """Two producers' transactions interleave batch by batch on one partition; one aborts,
    the other commits. read_committed readers drop exactly the aborting producer's
    records; the last stable offset is the oldest open transaction's first offset."""
    topic = kafka_topic(partitions=1)
    admin = admin_for(kafka_config)
    aborting = transactional_producer(kafka_config, unique("aborting"))
    committing = transactional_producer(kafka_config, unique("committing"))
    aborting.begin_transaction()
    committing.begin_transaction()
    for i in range(3):  # one batch each, alternating: offsets 0, 2, 4 and 1, 3, 5
        for producer, prefix in ((aborting, "aborted"), (committing, "committed")):
            producer.produce(topic, f"{prefix}-{i}".encode(), partition=0)
            assert producer.flush(30) == 0
    assert latest_offsets(admin, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 0}

    aborting.abort_transaction(CALL_TIMEOUT)
    wait_for(
        lambda: latest_offsets(admin, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 1},
        STABLE_TIMEOUT,
        describe=lambda: latest_offsets(admin, topic, 1, IsolationLevel.READ_COMMITTED),
    )
    committing.commit_transaction(CALL_TIMEOUT)

    ends = wait_until_stable(admin, topic, 1)
    assert ends == {0: 8}  # six records, two markers
    committed = read_to_end(kafka_config, topic, 1, "read_committed")
    assert (committed.values, committed.positions) == (names("committed", 3), ends)
    everything = read_to_end(kafka_config, topic, 1, "read_uncommitted")
    assert everything.values == [
        f"{prefix}-{i}" for i in range(3) for prefix in ("aborted", "committed")
    ]


@pytest.mark.parity
def test_a_read_committed_reader_starting_inside_an_aborted_transaction_skips_its_rest(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """A fetch from an offset in the middle of an aborted transaction must still list
    that transaction as aborted (it began before the fetch offset), or a reader resuming
    there would get the rest of it."""
    topic = kafka_topic(partitions=1)
    producer = transactional_producer(kafka_config, unique("resumed"))
    producer.begin_transaction()
    for value in names("aborted", 6):  # one batch each, offsets 0 to 5
        producer.produce(topic, value.encode(), partition=0)
        assert producer.flush(30) == 0
    producer.abort_transaction(CALL_TIMEOUT)  # the marker is offset 6
    produce_in_transaction(producer, topic, names("kept", 2), commit=True)

    ends = wait_until_stable(admin_for(kafka_config), topic, 1)
    assert ends == {0: 10}
    committed = read_to_end(kafka_config, topic, 1, "read_committed", start=3)
    assert (committed.values, committed.positions) == (names("kept", 2), ends)
    everything = read_to_end(kafka_config, topic, 1, "read_uncommitted", start=3)
    assert everything.values == names("aborted", 6)[3:] + names("kept", 2)


def test_a_transaction_open_past_its_timeout_is_aborted_when_the_broker_clock_passes_it(
    kafka_broker: Broker, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """transaction.timeout.ms=60000: the coordinator aborts the transaction once the
    broker's clock has moved past it (no real minute passes). read_committed readers then
    move past the aborted records and the marker, the group's pending offsets are
    dropped; the producer is fenced, and a new one with its transactional id carries on."""
    if not isinstance(kafka_broker, Broker):
        pytest.skip("moving the broker's clock is a feature of minibroker's embedded broker")
    topic, transactional_id, group = kafka_topic(partitions=1), unique("slow"), unique("g")
    admin = admin_for(kafka_config)
    producer = transactional_producer(kafka_config, transactional_id)
    consumer = Consumer(kafka_config.confluent_consumer(group))  # for its group metadata
    producer.begin_transaction()
    for value in names("expired", 3):
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(30) == 0
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 2)], consumer.consumer_group_metadata(), CALL_TIMEOUT
    )
    consumer.close()
    assert latest_offsets(admin, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 0}
    assert latest_offsets(admin, topic, 1, IsolationLevel.READ_UNCOMMITTED) == {0: 3}

    kafka_broker.clock.advance(TRANSACTION_TIMEOUT_MS / 1000 + 1)

    assert wait_until_stable(admin, topic, 1) == {0: 4}  # three records and the marker
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert offset_fetch(client, group, topic, require_stable=True) == (NONE, -1)
    committed = read_to_end(kafka_config, topic, 1, "read_committed")
    assert (committed.values, committed.positions) == ([], {0: 4})
    assert read_to_end(kafka_config, topic, 1, "read_uncommitted").values == names("expired", 3)
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(CALL_TIMEOUT)
    error = fenced_error(raised)
    assert error.code() in FENCED, error
    assert error.fatal(), error
    # The transactional id is usable again: a new producer with it commits.
    successor = transactional_producer(kafka_config, transactional_id)
    produce_in_transaction(successor, topic, names("later", 2), commit=True)
    wait_until_stable(admin, topic, 1)
    assert read_to_end(kafka_config, topic, 1, "read_committed").values == names("later", 2)


# --- the last stable offset --------------------------------------------------------


@pytest.mark.parity
def test_read_committed_latest_offset_stops_at_an_open_transaction_until_it_commits(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    """ListOffsets(latest, read_committed) is the last stable offset: the first offset of
    the oldest open transaction, even with plain records written after it, which a
    read_committed consumer does not get either. After the commit it is the log's end."""
    topic = kafka_topic(partitions=1)
    admin = admin_for(kafka_config)
    plain = Producer(kafka_config.confluent_producer())
    for value in names("before", 2):
        plain.produce(topic, value.encode(), partition=0)
    assert plain.flush(30) == 0
    producer = transactional_producer(kafka_config, unique("open"))
    producer.begin_transaction()
    for value in names("pending", 3):
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(30) == 0
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(30) == 0

    assert latest_offsets(admin, topic, 1, IsolationLevel.READ_COMMITTED) == {0: 2}
    assert latest_offsets(admin, topic, 1, IsolationLevel.READ_UNCOMMITTED) == {0: 6}
    held_back = read_to_end(kafka_config, topic, 1, "read_committed")
    assert (held_back.values, held_back.positions) == (names("before", 2), {0: 2})

    producer.commit_transaction(CALL_TIMEOUT)

    assert wait_until_stable(admin, topic, 1) == {0: 7}  # the commit marker is offset 6
    released = read_to_end(kafka_config, topic, 1, "read_committed")
    assert released.values == [*names("before", 2), *names("pending", 3), "after"]
    assert released.positions == {0: 7}


# --- offsets committed in a transaction ---------------------------------------------


def offset_fetch(
    client: RawClient, group: str, topic: str, *, require_stable: bool
) -> tuple[int, int]:
    """OffsetFetch v7 for partition 0: (error code, committed offset)."""
    wanted = make(OFFSET_FETCH, 7, "OffsetFetchRequestTopic", name=topic, partition_indexes=(0,))
    answer = client.call(
        OFFSET_FETCH, 7, group_id=group, topics=(wanted,), require_stable=require_stable
    )
    assert answer.error_code.value == NONE
    (partition,) = answer.topics[0].partitions
    return partition.error_code.value, int(partition.committed_offset)


@pytest.mark.parity
def test_offset_fetch_require_stable_refuses_offsets_a_transaction_has_pending(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs, kafka_bootstrap: str
) -> None:
    """Offsets sent to an open transaction are pending: OffsetFetch with require_stable
    answers UNSTABLE_OFFSET_COMMIT for them (librdkafka's committed() keeps asking until
    its timeout), without it the offset committed before. An abort drops them; a commit
    makes them the group's."""
    topic, group = kafka_topic(partitions=1), unique("stable")
    # Not subscribed: it commits as a simple consumer and lends its group metadata.
    consumer = Consumer(kafka_config.confluent_consumer(group))
    producer = transactional_producer(kafka_config, unique("offsets"))
    partition = [TopicPartition(topic, 0)]
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert consumer.committed(partition, CALL_TIMEOUT)[0].offset == 3

        def send_offset(offset: int) -> None:
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], consumer.consumer_group_metadata(), 30
            )

        def stable_offset() -> tuple[int, int]:
            return offset_fetch(client, group, topic, require_stable=True)

        with RawClient(kafka_bootstrap) as client:
            send_offset(5)
            assert stable_offset() == (UNSTABLE_OFFSET_COMMIT, -1)
            assert offset_fetch(client, group, topic, require_stable=False) == (NONE, 3)
            with pytest.raises(KafkaException) as unstable:
                consumer.committed(partition, 1)  # read_committed: it sends require_stable
            assert unstable.value.args[0].code() == KafkaError._TIMED_OUT

            producer.abort_transaction(CALL_TIMEOUT)
            wait_for(lambda: stable_offset() == (NONE, 3), STABLE_TIMEOUT, describe=stable_offset)

            send_offset(8)
            assert stable_offset() == (UNSTABLE_OFFSET_COMMIT, -1)
            producer.commit_transaction(CALL_TIMEOUT)
            wait_for(lambda: stable_offset() == (NONE, 8), STABLE_TIMEOUT, describe=stable_offset)
            assert offset_fetch(client, group, topic, require_stable=False) == (NONE, 8)
        assert consumer.committed(partition, CALL_TIMEOUT)[0].offset == 8
    finally:
        consumer.close()


# --- the coordinator's view ---------------------------------------------------------


@dataclass(frozen=True)
class Described:
    error_code: int
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    partitions: dict[str, list[int]]


def describe_transaction(client: RawClient, transactional_id: str) -> Described:
    """DescribeTransactions v0 for one id. Kafka sends the start time of the open (or
    completed) transaction, 0 for an id it does not know and -1 only while Empty; kio
    refuses to read a negative time, which fails the test here saying so."""
    try:
        answer = client.call(DESCRIBE_TRANSACTIONS, 0, transactional_ids=(transactional_id,))
    except OutOfBoundValue as exc:
        pytest.fail(f"DescribeTransactions({transactional_id!r}) sent an unreadable field: {exc}")
    (state,) = answer.transaction_states
    assert state.transactional_id == transactional_id
    timeout = state.transaction_timeout
    assert isinstance(timeout, datetime.timedelta)
    return Described(
        state.error_code.value,
        state.transaction_state,
        int(timeout.total_seconds() * 1000),
        int(state.transaction_start_time.timestamp() * 1000),
        int(state.producer_id),
        {topic.topic: sorted(topic.partitions) for topic in state.topics},
    )


def listed_transactions(client: RawClient, *states: str) -> dict[str, tuple[str, int]]:
    """ListTransactions v0 (filtered by state): transactional id -> (state, producer id)."""
    answer = client.call(LIST_TRANSACTIONS, 0, state_filters=states, producer_id_filters=())
    assert answer.error_code.value == NONE
    return {
        t.transactional_id: (t.transaction_state, int(t.producer_id))
        for t in answer.transaction_states
    }


@pytest.mark.parity
def test_describe_and_list_transactions_show_an_open_transaction_then_its_commit(
    kafka_topic: Callable[..., str], kafka_config: ClientConfigs, kafka_bootstrap: str
) -> None:
    """What `kafka-transactions.sh describe` and `list` show: an open transaction is
    Ongoing with the partitions it wrote to; after the commit it is CompleteCommit with
    none. A transactional id the coordinator never saw is TRANSACTIONAL_ID_NOT_FOUND."""
    topic, transactional_id = kafka_topic(partitions=3), unique("described")
    producer = transactional_producer(kafka_config, transactional_id)
    producer.begin_transaction()
    for partition in (0, 2):
        producer.produce(topic, b"x", partition=partition)
    assert producer.flush(30) == 0

    with RawClient(kafka_bootstrap) as client:
        ongoing = describe_transaction(client, transactional_id)
        assert (ongoing.error_code, ongoing.state) == (NONE, "Ongoing")
        assert ongoing.partitions == {topic: [0, 2]}
        assert ongoing.timeout_ms == TRANSACTION_TIMEOUT_MS
        assert ongoing.producer_id >= 0
        assert ongoing.start_ms > 0
        listed = listed_transactions(client)
        assert listed[transactional_id] == ("Ongoing", ongoing.producer_id)
        assert transactional_id in listed_transactions(client, "Ongoing")

        producer.commit_transaction(CALL_TIMEOUT)

        deadline = time.monotonic() + STABLE_TIMEOUT
        while (done := describe_transaction(client, transactional_id)).state != "CompleteCommit":
            assert time.monotonic() < deadline, done  # PrepareCommit until the markers are in
            time.sleep(0.05)
        assert (done.error_code, done.partitions, done.producer_id) == (
            NONE,
            {},
            ongoing.producer_id,
        )
        assert done.start_ms == ongoing.start_ms  # still the committed transaction's
        assert transactional_id not in listed_transactions(client, "Ongoing")
        assert listed_transactions(client, "CompleteCommit")[transactional_id] == (
            "CompleteCommit",
            ongoing.producer_id,
        )
        unknown = describe_transaction(client, unique("never-used"))
        assert unknown.error_code == TRANSACTIONAL_ID_NOT_FOUND
