"""A recovery point: after a crash only the segments written since it are read, and a
start from it goes on writing one that the next crash can start from."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker import Broker
from minibroker.storage import checkpoint, data_dir
from tests.storage.test_corruption import TOPIC, _partition_dir, _read

TIMEOUT = 20.0


def _produce(bootstrap: str, first: int, count: int) -> dict[int, bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    acknowledged: dict[int, bytes] = {}

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        assert error is None, error
        acknowledged[message.offset()] = message.value()

    for number in range(first, first + count):
        producer.produce(TOPIC, b"record-%03d-" % number + b"x" * 90, on_delivery=delivered)
        assert producer.flush(TIMEOUT) == 0
    return acknowledged


def _crash_image(path: Path, image: Path) -> None:
    """What kill -9 would leave: the files as they are while the broker runs (every
    write is in them; flush policy `write` synced them too)."""
    shutil.copytree(path, image, ignore=shutil.ignore_patterns(".lock"))


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """For each partition recovery read, the segment files it read batch by batch."""
    read: list[list[str]] = []
    real_recover = data_dir.recover

    def recording(directory: Path, *args: Any, **kwargs: Any) -> Any:
        segments, recovery = real_recover(directory, *args, **kwargs)
        read.append([segment.path.name for segment in segments])
        return segments, recovery

    monkeypatch.setattr(data_dir, "recover", recording)
    return read


def test_a_start_after_a_crash_reads_only_what_was_written_since_the_recovery_point(
    tmp_path: Path, scanned: list[list[str]]
) -> None:
    first = tmp_path / "first"
    with Broker(data_dir=str(first), log_flush="write") as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        configs = {"segment.bytes": "900", "index.interval.bytes": "300"}
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
            future.result(TIMEOUT)
        acknowledged = _produce(bootstrap, 0, 30)
        _crash_image(first, tmp_path / "second")
    second = tmp_path / "second"
    segments = sorted(p.name for p in _partition_dir(second).glob("*.log"))
    with Broker(data_dir=str(second), log_flush="write") as broker:
        [read] = [names for names in scanned if names]
        assert read == segments[-1:]  # the active segment only
        acknowledged |= _produce(broker.bootstrap_servers, 30, 30)  # more segments sealed
        _crash_image(second, tmp_path / "third")
    third = tmp_path / "third"
    segments = sorted(p.name for p in _partition_dir(third).glob("*.log"))
    assert len(segments) >= 10
    scanned.clear()
    found, log_end, errors, opened = _read(third)
    assert opened.recovery_point_partitions == 1
    assert [names for names in scanned if names] == [segments[-1:]]
    assert not errors
    assert found == acknowledged
    assert log_end == 60


def test_a_recovery_point_that_no_longer_matches_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with Broker(data_dir=str(path), log_flush="write") as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        configs = {"segment.bytes": "900"}
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
            future.result(TIMEOUT)
        acknowledged = _produce(bootstrap, 0, 20)
        _crash_image(path, tmp_path / "image")
    directory = _partition_dir(tmp_path / "image")
    described = (directory / checkpoint.RECOVERY_FILE).read_bytes()
    assert described.count(b"\n") >= 3
    second = sorted(directory.glob("*.log"))[1]
    second.write_bytes(second.read_bytes() + b"\0" * 7)  # a sealed segment changed
    found, log_end, errors, opened = _read(tmp_path / "image")
    assert opened.recovery_point_partitions == 1  # the first segment is still trusted
    assert not errors
    assert found == acknowledged and log_end == 20
