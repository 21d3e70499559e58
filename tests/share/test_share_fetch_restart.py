"""Share-partition state in a data directory survives kill -9 and a clean stop: records
acknowledged before are never delivered again, records acquired but not acknowledged
are, with their delivery counts kept."""

from __future__ import annotations

import datetime
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from harness.child_broker import ChildBroker
from harness.raw_client import RawClient, make, produce_batch
from minibroker.protocol import records
from minibroker.state.share_partitions import (
    ACK_ACCEPT,
    ACK_RELEASE,
    RecordState,
    SharePartitionStore,
    ShareSettings,
)
from minibroker.storage import share_state
from tests.share.share_wire import ShareMember, acquired_offsets, join
from tests.share.test_share_fetch import GROUP, TOPIC, set_group_configs
from tests.share.test_share_partition_rules import log_of


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(data_dir: Path, port: int) -> ChildBroker:
    return ChildBroker(port=port, data_dir=str(data_dir)).start()


def _topic_id(client: RawClient) -> object:
    metadata = client.call(
        3,
        12,
        topics=(make(3, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return metadata.topics[0].topic_id


def test_acknowledged_records_are_not_redelivered_after_kill_9_and_clean_stop(
    tmp_path: Path,
) -> None:
    port = _free_port()
    broker = _start(tmp_path, port)
    with RawClient(broker.bootstrap) as client:
        created = client.call(
            19,
            7,
            topics=(
                make(
                    19,
                    7,
                    "CreatableTopic",
                    name=TOPIC,
                    num_partitions=1,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        )
        assert created.topics[0].error_code == 0
        set_group_configs(client, GROUP, share_auto_offset_reset="earliest")
        now_ms = int(time.time() * 1000)
        for value in (b"a", b"b", b"c", b"d"):
            batch = records.build_batch([(None, value)], timestamp_ms=now_ms)
            produce_batch(client.request, TOPIC, 0, batch)
        join(client.request, GROUP, "alice", TOPIC)
        alice = ShareMember(client.request, GROUP, "alice", _topic_id(client))  # type: ignore[arg-type]
        assert acquired_offsets(alice.fetch()) == {0: 1, 1: 1, 2: 1, 3: 1}
        assert alice.acknowledge([(0, 1, (ACK_ACCEPT,))]).error_code == 0
    os.kill(broker.pid, signal.SIGKILL)
    assert broker.process is not None
    broker.process.wait(10)

    broker = _start(tmp_path, port)
    with RawClient(broker.bootstrap) as client:
        alice = ShareMember(client.request, GROUP, "alice", _topic_id(client))  # type: ignore[arg-type]
        assert acquired_offsets(alice.fetch()) == {2: 2, 3: 2}
        assert alice.acknowledge([(2, 2, (ACK_ACCEPT,))]).error_code == 0
    assert broker.stop() == 0

    broker = _start(tmp_path, port)
    try:
        with RawClient(broker.bootstrap) as client:
            alice = ShareMember(client.request, GROUP, "alice", _topic_id(client))  # type: ignore[arg-type]
            assert acquired_offsets(alice.fetch()) == {3: 3}
    finally:
        broker.stop()


def test_the_journal_replays_the_last_state_and_compacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(share_state, "COMPACT_BYTES", 1)
    log = log_of(1, 1, 1)
    store = SharePartitionStore()
    store.log_of = lambda topic, index: log
    store.settings_of = lambda group: ShareSettings(auto_offset_reset="earliest")
    journal = share_state.ShareStateJournal(tmp_path)
    journal.load(store)
    store.on_persist = journal.changed
    store.acquire(GROUP, "other", 0, "alice", 0.0, 1)
    store.delete_partitions(GROUP, [("other", 0)])
    for _ in range(20):  # 40 changes of one share partition
        store.acquire(GROUP, TOPIC, 0, "alice", 0.0, 1, strict=True)
        store.acknowledge(GROUP, TOPIC, 0, "alice", [(0, 0, (ACK_RELEASE,))], 0.0)
    store.acquire(GROUP, TOPIC, 0, "alice", 0.0, 3)
    store.acknowledge(GROUP, TOPIC, 0, "alice", [(0, 0, (ACK_ACCEPT,))], 0.0)
    journal.close()
    # Rewritten as it grew, not a line per change.
    assert len((tmp_path / share_state.SHARE_STATE_FILE).read_text().splitlines()) < 10
    with (tmp_path / share_state.SHARE_STATE_FILE).open("a") as file:
        file.write('{"group": "torn')  # a line a killed process did not finish
    restored = SharePartitionStore()
    share_state.ShareStateJournal(tmp_path).load(restored)
    partition = restored.partition(GROUP, TOPIC, 0)
    assert partition is not None and restored.initialized(GROUP) == {(TOPIC, 0): 1}
    assert partition.state_of(1) == (RecordState.AVAILABLE, 1)
    assert restored.partition(GROUP, "other", 0) is None
