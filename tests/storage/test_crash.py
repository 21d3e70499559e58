"""kill -9 of a broker with a data directory in the middle of a steady produce: after a
restart every acknowledged record is there at its offset, committed offsets are kept,
and an idempotent producer carries on without a duplicate."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from harness.child_broker import ChildBroker
from tests.storage.reading import read_all

TIMEOUT = 30.0
PARTITIONS = 3


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _broker(tmp_path: Path, port: int) -> ChildBroker:
    return ChildBroker(
        port=port, data_dir=str(tmp_path), log_flush="write", topics=[f"steady:{PARTITIONS}"]
    )


def _kill(broker: ChildBroker) -> None:
    os.kill(broker.pid, signal.SIGKILL)
    assert broker.process is not None
    broker.process.wait(10)


def _read_all(bootstrap: str) -> dict[tuple[int, int], bytes | None]:
    """(partition, offset) -> value of every record in the topic."""
    return {(p, o): value for p, o, _, value, _ in read_all(bootstrap, "steady")}


def test_acknowledged_records_and_committed_offsets_survive_kill_9(tmp_path: Path) -> None:
    port = _free_port()
    broker = _broker(tmp_path, port).start()
    acknowledged: dict[tuple[int, int], bytes] = {}

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is None:
            acknowledged[(message.partition(), message.offset())] = message.value()

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "message.timeout.ms": 2000,
            "retries": 0,
        }
    )
    committer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    committed: list[TopicPartition] = []
    try:
        number = 0
        while len(acknowledged) < 3000:
            producer.produce(
                "steady", b"record-%d" % number, key=b"%d" % number, on_delivery=delivered
            )
            number += 1
            producer.poll(0)
            if not committed and len(acknowledged) >= 1000:
                committed = [TopicPartition("steady", p, 100 + p) for p in range(PARTITIONS)]
                committer.commit(offsets=committed, asynchronous=False)
        for _ in range(200):  # still producing when the broker dies
            producer.produce("steady", b"record-%d" % number, on_delivery=delivered)
            number += 1
        _kill(broker)
        producer.flush(10)  # what was in flight fails: not acknowledged, not counted
    finally:
        committer.close()
        broker.stop()

    broker = _broker(tmp_path, port).start()
    try:
        stored = _read_all(broker.bootstrap)
        missing = {key: value for key, value in acknowledged.items() if stored.get(key) != value}
        assert not missing, f"{len(missing)} acknowledged records lost or moved"
        assert len(acknowledged) >= 3000
        reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
        try:
            found = reader.committed([TopicPartition("steady", p) for p in range(PARTITIONS)], 10)
            assert [(tp.partition, tp.offset) for tp in found] == [
                (tp.partition, tp.offset) for tp in committed
            ]
        finally:
            reader.close()
    finally:
        broker.stop()


def test_an_idempotent_producer_carries_on_across_kill_9_without_duplicates(
    tmp_path: Path,
) -> None:
    port = _free_port()
    broker = _broker(tmp_path, port).start()
    total = 6000
    failures: list[object] = []

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            failures.append(error)

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 200,
        }
    )
    restarted = False
    try:
        for number in range(total):
            producer.produce(
                "steady", b"%d" % number, partition=number % PARTITIONS, on_delivery=delivered
            )
            producer.poll(0)
            if number == total // 3:
                producer.poll(0.2)  # batches in flight and acknowledged
                _kill(broker)
                broker = _broker(tmp_path, port).start()
                restarted = True
        assert producer.flush(TIMEOUT) == 0
        assert restarted and not failures
        stored = _read_all(broker.bootstrap)
        values = [int(value) for _, value in sorted(stored.items())]
        assert len(values) == len(set(values)) == total  # none lost, none twice
        for partition in range(PARTITIONS):  # and in the order sent
            in_partition = [int(v) for (p, _), v in sorted(stored.items()) if p == partition]
            assert in_partition == sorted(in_partition)
    finally:
        broker.stop()


@pytest.mark.parametrize("stop", ["kill -9", "clean stop"])
def test_a_batch_stored_before_a_restart_and_retried_after_is_not_stored_twice(
    tmp_path: Path, stop: str
) -> None:
    """The broker stores a batch but its answer is lost; it dies (or stops cleanly); the
    producer sends the batch again to the restarted broker, which knows it from the
    producer state it rebuilt from the log (or read from its clean stop's checkpoint)
    and answers with the offset it got the first time."""
    port = _free_port()
    lost_answer = "Produce:lose_response,times=1"
    broker = ChildBroker(
        port=port,
        data_dir=str(tmp_path),
        log_flush="write",
        topics=["steady:1"],
        fault=lost_answer,
    ).start()
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 50,
            "retry.backoff.ms": 1500,
            "retry.backoff.max.ms": 1500,
            "message.timeout.ms": 60000,
        }
    )
    try:
        for number in range(10):
            producer.produce("steady", b"%d" % number, partition=0)
        producer.poll(0.6)  # stored, its answer lost; the retry waits 1.5 s
        if stop == "kill -9":
            _kill(broker)
        else:
            broker.stop()
            assert list(tmp_path.glob("logs/*/0/checkpoint"))
        broker = _broker(tmp_path, port).start()
        assert producer.flush(TIMEOUT) == 0
        stored = _read_all(broker.bootstrap)
        assert sorted(stored.values(), key=int) == [b"%d" % n for n in range(10)]
    finally:
        broker.stop()
