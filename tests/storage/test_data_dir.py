"""A broker with a data directory, stopped and started again, as clients see it: topics,
records, configs, committed offsets and producer ids are as they were."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from minibroker import Broker
from minibroker.storage.data_dir import DataDirError
from tests.storage.reading import read_all

TIMEOUT = 20.0


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors segment files were fsynced on, in order."""
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr("minibroker.storage.segments.os.fsync", counting_fsync)
    return synced


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topic: NewTopic) -> None:
    admin = _admin(bootstrap)
    for future in admin.create_topics([topic]).values():
        future.result(TIMEOUT)


def _topic_id(bootstrap: str, topic: str) -> object:
    admin = _admin(bootstrap)
    [described] = admin.describe_topics(TopicCollection([topic])).values()
    found = described.result(TIMEOUT).topic_id
    return (found.get_most_significant_bits(), found.get_least_significant_bits())


def _produce(bootstrap: str, topic: str, count: int, **settings: object) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **settings})
    for number in range(count):
        producer.produce(topic, b"value-%d" % number, key=b"key-%d" % (number % 7))
    assert producer.flush(TIMEOUT) == 0


def test_topics_records_configs_and_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("orders", 3, 1, config={"retention.ms": "-1"}))
        _produce(bootstrap, "orders", 40)
        _produce(bootstrap, "orders", 20, **{"compression.type": "zstd"})
        before = read_all(bootstrap, "orders")
        topic_id = _topic_id(bootstrap, "orders")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        committed = [TopicPartition("orders", p, 3 + p) for p in range(3)]
        consumer.commit(offsets=committed, asynchronous=False)
        consumer.close()

    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        assert len(before) == 60
        assert read_all(bootstrap, "orders") == before
        assert _topic_id(bootstrap, "orders") == topic_id
        admin = _admin(bootstrap)
        [configs] = admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, "orders")]
        ).values()
        assert configs.result(TIMEOUT)["retention.ms"].value == "-1"
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
        try:
            found = consumer.committed([TopicPartition("orders", p) for p in range(3)], TIMEOUT)
            assert [(tp.partition, tp.offset) for tp in found] == [(0, 3), (1, 4), (2, 5)]
        finally:
            consumer.close()
        _produce(bootstrap, "orders", 3)  # and the log goes on from where it was
        assert len(read_all(bootstrap, "orders")) == 63


def test_a_deleted_topic_and_its_files_are_gone_after_a_restart(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("brief", 2, 1))
        _produce(bootstrap, "brief", 5)
        assert list((tmp_path / "logs").iterdir())
        admin = _admin(bootstrap)
        for future in admin.delete_topics(["brief"]).values():
            future.result(TIMEOUT)
        assert not list((tmp_path / "logs").iterdir())
    with Broker(data_dir=str(tmp_path)) as broker:
        assert "brief" not in broker.topics()


def test_a_data_directory_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)):
        second = Broker(data_dir=str(tmp_path))
        with pytest.raises(DataDirError, match="in use by another broker"):
            second.__enter__()
    with Broker(data_dir=str(tmp_path)) as again:  # free once the first has stopped
        assert again.topics() == []


def test_an_idempotent_producer_after_a_restart_gets_an_id_of_its_own(tmp_path: Path) -> None:
    settings = {"enable.idempotence": True, "acks": "all"}
    with Broker(data_dir=str(tmp_path)) as broker:
        _create(broker.bootstrap_servers, NewTopic("ids", 1, 1))
        _produce(broker.bootstrap_servers, "ids", 5, **settings)
    with Broker(data_dir=str(tmp_path)) as broker:
        # The same id again would carry on the old producer's sequences and be refused.
        _produce(broker.bootstrap_servers, "ids", 5, **settings)
        assert len(read_all(broker.bootstrap_servers, "ids")) == 10


def test_a_transaction_a_restart_left_open_is_aborted(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("payments", 1, 1))
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": "payer"}
        )
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.produce("payments", b"never committed")
        assert producer.flush(TIMEOUT) == 0
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _produce(bootstrap, "payments", 2)
        committed = read_all(bootstrap, "payments", "read_committed")
        assert [value for *_, value, _ in committed] == [b"value-0", b"value-1"]


def test_deleted_records_stay_deleted_after_a_restart(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("trimmed", 1, 1))
        _produce(bootstrap, "trimmed", 10)
        admin = _admin(bootstrap)
        [future] = admin.delete_records([TopicPartition("trimmed", 0, 6)]).values()
        assert future.result(TIMEOUT).low_watermark == 6
    with Broker(data_dir=str(tmp_path)) as broker:
        found = read_all(broker.bootstrap_servers, "trimmed")
        assert [offset for _, offset, *_ in found] == [6, 7, 8, 9]


def test_retention_deletes_old_segment_files(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        topic = NewTopic("aging", 1, 1, config={"retention.ms": "60000", "segment.bytes": "100"})
        _create(bootstrap, topic)
        for _ in range(6):
            _produce(bootstrap, "aging", 1)  # a batch each, a segment each
        [directory] = (tmp_path / "logs").iterdir()
        assert len(list((directory / "0").glob("*.log"))) == 6
        broker.clock.advance(61)
        deadline = time.monotonic() + TIMEOUT
        while len(list((directory / "0").glob("*.log"))) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        # All but the active segment, which keeps where the log ends.
        assert len(list((directory / "0").glob("*.log"))) == 1
        assert read_all(bootstrap, "aging") == []
    with Broker(data_dir=str(tmp_path)) as broker:
        _produce(broker.bootstrap_servers, "aging", 1)
        assert [o for _, o, *_ in read_all(broker.bootstrap_servers, "aging")] == [6]


def test_the_interval_policy_syncs_while_the_broker_runs(tmp_path: Path, fsyncs: list[int]) -> None:
    with Broker(data_dir=str(tmp_path), log_flush="interval", log_flush_interval_ms=20) as broker:
        _create(broker.bootstrap_servers, NewTopic("synced", 1, 1))
        fsyncs.clear()
        _produce(broker.bootstrap_servers, "synced", 3)
        deadline = time.monotonic() + TIMEOUT
        while not fsyncs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fsyncs


def test_added_partitions_survive_a_restart(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("growing", 1, 1))
        admin = _admin(bootstrap)
        for future in admin.create_partitions([NewPartitions("growing", 3)]).values():
            future.result(TIMEOUT)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        producer.produce("growing", b"in the new partition", partition=2)
        assert producer.flush(TIMEOUT) == 0
    with Broker(data_dir=str(tmp_path)) as broker:
        found = read_all(broker.bootstrap_servers, "growing")
        assert [(p, o, v) for p, o, _, v, _ in found] == [(2, 0, b"in the new partition")]


@pytest.mark.parametrize(("policy", "synced_before_stop"), [("write", True), ("os", False)])
def test_the_flush_policy_decides_when_writes_are_synced(
    tmp_path: Path, policy: str, synced_before_stop: bool, fsyncs: list[int]
) -> None:
    with Broker(data_dir=str(tmp_path), log_flush=policy) as broker:
        _create(broker.bootstrap_servers, NewTopic("synced", 1, 1))
        fsyncs.clear()
        _produce(broker.bootstrap_servers, "synced", 3, acks="all")
        assert bool(fsyncs) == synced_before_stop
    assert fsyncs  # a clean stop syncs whatever the policy


def test_a_compacted_log_is_kept_compacted_and_where_it_ends(tmp_path: Path) -> None:
    configs = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "1000",
        "segment.bytes": "150",
    }
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("latest", 1, 1, config=configs))
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None)]:
            producer.produce("latest", value, key=key)
            assert producer.flush(TIMEOUT) == 0  # a batch each
        broker.clock.advance(2)  # past delete.retention.ms: the tombstone may go
        deadline = time.monotonic() + TIMEOUT
        while len(read_all(bootstrap, "latest")) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        cleaned = [(o, k, v) for _, o, k, v, _ in read_all(bootstrap, "latest")]
        # The tombstone is the newest batch, kept whole to mark where the log ends.
        assert cleaned == [(2, b"a", b"2"), (3, b"b", None)]
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        assert [(o, k, v) for _, o, k, v, _ in read_all(bootstrap, "latest")] == cleaned
        _produce(bootstrap, "latest", 1)
        assert [o for _, o, *_ in read_all(bootstrap, "latest")] == [2, 3, 4]


def test_a_segment_rolls_when_segment_ms_old(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("hourly", 1, 1, config={"segment.ms": "3600000"}))
        _produce(bootstrap, "hourly", 1)
        _produce(bootstrap, "hourly", 1)
        [directory] = (tmp_path / "logs").iterdir()
        assert len(list((directory / "0").glob("*.log"))) == 1
        broker.clock.advance(3600)  # the broker's time: the active segment is an hour old
        _produce(bootstrap, "hourly", 1)
        assert sorted(p.name for p in (directory / "0").glob("*.log")) == [
            "00000000000000000000.log",
            "00000000000000000002.log",
        ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _transactional(bootstrap: str, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "reconnect.backoff.max.ms": 200,
        }
    )
    producer.init_transactions(TIMEOUT)
    return producer


def test_transactional_producers_carry_on_across_a_clean_restart(tmp_path: Path) -> None:
    """An idle transactional producer goes on with its producer id and epoch; one whose
    transaction was open at the stop finds it aborted and itself fenced."""
    port = _free_port()
    with Broker(port=port, data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        _create(bootstrap, NewTopic("ledger", 2, 1))
        idle, busy = _transactional(bootstrap, "idle"), _transactional(bootstrap, "busy")
        idle.begin_transaction()
        idle.produce("ledger", b"before", partition=0)
        idle.commit_transaction(TIMEOUT)
        busy.begin_transaction()
        busy.produce("ledger", b"cut short", partition=0)
        assert busy.flush(TIMEOUT) == 0
    assert (tmp_path / "transactions.json").exists()
    with Broker(port=port, data_dir=str(tmp_path)) as broker:
        assert not (tmp_path / "transactions.json").exists()
        idle.begin_transaction()
        idle.produce("ledger", b"after", partition=0)
        idle.commit_transaction(TIMEOUT)
        # The rest of the transaction, to a partition it had not written yet: committed
        # alone it would break the transaction in two.
        busy.produce("ledger", b"rest of it", partition=1)
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            busy.commit_transaction(TIMEOUT)
        assert refused.value.args[0].fatal()  # fenced: a newer epoch holds the id
        committed = read_all(broker.bootstrap_servers, "ledger", "read_committed")
        assert [value for *_, value, _ in committed] == [b"before", b"after"]
