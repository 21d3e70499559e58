"""A clean stop's checkpoint: a restart from it serves what a restart that reads every
batch serves, and a checkpoint that no longer matches its files is not trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.child_broker import ChildBroker
from minibroker import Broker
from tests.storage.reading import read_all

TIMEOUT = 20.0
TOPIC = "mixed"
PARTITIONS = 2
START_MS = 1_700_000_000_000


def _history(bootstrap: str) -> None:
    """Several segments and index stretches per partition, batches of different sizes
    and timestamps, an aborted and a committed transaction, idempotent producing and
    records deleted from the front of one partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"segment.bytes": "2000", "index.interval.bytes": "300", "retention.ms": "-1"}
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=configs)]).values():
        future.result(TIMEOUT)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for number in range(160):
        timestamp = START_MS + (number * 7919) % 1000  # not in order
        producer.produce(TOPIC, b"v" * (number % 90), key=b"%d" % number, timestamp=timestamp)
        if number % 9 == 0:
            producer.flush(TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    transactional = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "checkpointed"}
    )
    transactional.init_transactions(TIMEOUT)
    for commit in (False, True):
        transactional.begin_transaction()
        for number in range(6):
            transactional.produce(TOPIC, b"txn-%s-%d" % (str(commit).encode(), number))
        transactional.flush(TIMEOUT)
        if commit:
            transactional.commit_transaction(TIMEOUT)
        else:
            transactional.abort_transaction(TIMEOUT)
    [deleted] = admin.delete_records([TopicPartition(TOPIC, 0, 40)]).values()
    assert deleted.result(TIMEOUT).low_watermark == 40


def _answers(bootstrap: str) -> dict[str, Any]:
    """What clients see of the topic: records under both isolation levels, watermarks
    and offsets for timestamps."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "look"})
    try:
        watermarks = [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), TIMEOUT)
            for p in range(PARTITIONS)
        ]
        wanted = [
            TopicPartition(TOPIC, p, START_MS + delta)
            for p in range(PARTITIONS)
            for delta in (0, 1, 333, 998, 999, 1000)
        ]
        for_times = consumer.offsets_for_times(wanted, TIMEOUT)
    finally:
        consumer.close()
    return {
        "uncommitted": read_all(bootstrap, TOPIC),
        "committed": read_all(bootstrap, TOPIC, "read_committed"),
        "watermarks": watermarks,
        "for times": [(tp.partition, tp.offset) for tp in for_times],
    }


def _checkpoints(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("logs/*/*/checkpoint"))


def test_a_restart_from_a_checkpoint_serves_what_reading_every_batch_serves(
    tmp_path: Path,
) -> None:
    stopped = tmp_path / "stopped"
    with Broker(data_dir=str(stopped)) as broker:
        _history(broker.bootstrap_servers)
        before = _answers(broker.bootstrap_servers)
    assert len(_checkpoints(stopped)) == PARTITIONS
    assert len(list(stopped.glob("logs/*/1/*.log"))) > 2
    scanned = tmp_path / "scanned"
    shutil.copytree(stopped, scanned)
    for path in _checkpoints(scanned):
        path.unlink()  # as after a crash
    answers = {}
    for data_dir in (stopped, scanned):
        with Broker(data_dir=str(data_dir)) as broker:
            assert _checkpoints(data_dir) == []
            answers[data_dir.name] = _answers(broker.bootstrap_servers)
    assert len(before["uncommitted"]) == 160 - 40 + 12
    assert len(before["committed"]) == 160 - 40 + 6
    assert answers["stopped"] == answers["scanned"] == before


def test_a_segment_changed_after_a_clean_stop_is_read_again_not_trusted(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        _history(broker.bootstrap_servers)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(TOPIC, b"the last record", partition=1)
        assert producer.flush(TIMEOUT) == 0
        before = read_all(broker.bootstrap_servers, TOPIC)
    [partition_dir] = tmp_path.glob("logs/*/1")
    last = max(partition_dir.glob("*.log"))
    with open(last, "r+b") as segment:  # a torn last batch
        segment.truncate(last.stat().st_size - 10)
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        after = read_all(bootstrap, TOPIC)
        lost = [found for found in before if found not in after]
        assert [value for _, _, _, value, _ in lost] == [b"the last record"]
        assert [found for found in after if found not in before] == []
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        producer.produce(TOPIC, b"after the cut", partition=1)
        assert producer.flush(TIMEOUT) == 0
        appended = [f for f in read_all(bootstrap, TOPIC) if f[3] == b"after the cut"]
        # The cut batch's offset is the log's end again: the next record takes it.
        assert [offset for _, offset, *_ in appended] == [offset for _, offset, *_ in lost]


def test_a_broker_started_again_in_process_leaves_no_stale_checkpoint(tmp_path: Path) -> None:
    """Stopped and started again, a Broker goes on from memory; its checkpoints go, so a
    crash later cannot bring back what it deleted after the restart."""
    broker = Broker(data_dir=str(tmp_path / "live")).start_in_thread()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("kept", 1, 1)]).values():
            future.result(TIMEOUT)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for number in range(10):
            producer.produce("kept", b"%d" % number)
        assert producer.flush(TIMEOUT) == 0
        broker.stop_thread()
        assert len(_checkpoints(tmp_path / "live")) == 1
        broker.start_in_thread()
        assert _checkpoints(tmp_path / "live") == []
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [deleted] = admin.delete_records([TopicPartition("kept", 0, 6)]).values()
        assert deleted.result(TIMEOUT).low_watermark == 6
        shutil.copytree(tmp_path / "live", tmp_path / "crashed")  # what a crash leaves
    finally:
        broker.stop_thread()
    with Broker(data_dir=str(tmp_path / "crashed")) as crashed:
        assert [o for _, o, *_ in read_all(crashed.bootstrap_servers, "kept")] == [6, 7, 8, 9]


def test_sigterm_as_soon_as_the_broker_listens_is_a_clean_stop(tmp_path: Path) -> None:
    with ChildBroker(data_dir=str(tmp_path), topics=["early:1"]) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("early", b"kept")
        assert producer.flush(TIMEOUT) == 0
    for _ in range(3):  # each start takes the checkpoint, each stop writes it again
        broker = ChildBroker(data_dir=str(tmp_path)).start()
        broker.stop()  # SIGTERM right after "listening"
        assert broker.returncode() == 0
        assert len(_checkpoints(tmp_path)) == 1


def test_a_malformed_checkpoint_is_read_past_not_fatal(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        _history(broker.bootstrap_servers)
        before = _answers(broker.bootstrap_servers)
    for number, path in enumerate(_checkpoints(tmp_path)):
        saved = json.loads(path.read_text())
        if number == 0:
            del saved["aborted"]  # the producers' state reads, the log's does not
        else:
            saved["end_position"] -= 10  # inside the last batch
        path.write_text(json.dumps(saved))
    with Broker(data_dir=str(tmp_path)) as broker:
        assert _answers(broker.bootstrap_servers) == before
