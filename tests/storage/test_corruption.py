"""Damaged segment files: a flipped byte, a cut file and a bad length field in the first,
a middle and the last segment, after a clean stop and after kill -9, with and without a
recovery point. Each case states what was dropped and checks that every other
acknowledged record is read back, the log end did not move back (unless the damage is a
cut in the last segment, which is what an unfinished write looks like), and a reader
meeting the damage gets an error."""

from __future__ import annotations

import itertools
import logging
import os
import random
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.child_broker import ChildBroker
from minibroker import Broker
from minibroker.protocol.records import iter_records, split_batches
from minibroker.state.cluster import ClusterState
from minibroker.state.log import CorruptBatch
from minibroker.storage import checkpoint, segmented_log
from minibroker.storage.data_dir import DataDir
from minibroker.storage.segmented_log import SegmentedLog
from minibroker.storage.segments import SegmentStore

TIMEOUT = 20.0
TOPIC = "damaged"
RECORDS = 48  # one batch each, about five batches a segment


@dataclass(frozen=True)
class Written:
    path: Path  # the data directory as the stop left it
    acknowledged: dict[int, bytes]  # offset -> value
    log_end: int


def _write(tmp_path: Path, stop: str) -> Written:
    """A child broker writes acknowledged one-record batches, then stops or is killed."""
    path = tmp_path / stop
    broker = ChildBroker(data_dir=str(path), log_flush="write").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"segment.bytes": "900", "index.interval.bytes": "300"}
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
            future.result(TIMEOUT)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        acknowledged: dict[int, bytes] = {}

        def delivered(error: object, message: confluent_kafka.Message) -> None:
            assert error is None, error
            acknowledged[message.offset()] = message.value()

        for number in range(RECORDS):
            producer.produce(TOPIC, b"record-%03d-" % number + b"x" * 90, on_delivery=delivered)
            assert producer.flush(TIMEOUT) == 0
        if stop == "kill":
            os.kill(broker.pid, signal.SIGKILL)
            assert broker.process is not None
            broker.process.wait(10)
        else:
            assert broker.stop() == 0
    finally:
        broker.kill()
    return Written(path, acknowledged, RECORDS)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    tmp_path = tmp_path_factory.mktemp("written")
    return {stop: _write(tmp_path, stop) for stop in ("clean", "kill")}


def _partition_dir(path: Path) -> Path:
    [directory] = (path / "logs").glob("*/0")
    return directory


@dataclass(frozen=True)
class Damaged:
    segment: Path
    first_offset: int  # the damaged batch's
    dropped: range  # the offsets a restart drops


def _damage(directory: Path, kind: str, where: str) -> Damaged:
    """Damage the middle batch of the first, a middle or the last segment."""
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 5
    segment = {"first": segments[0], "middle": segments[len(segments) // 2]}.get(
        where, segments[-1]
    )
    data = bytearray(segment.read_bytes())
    batches = split_batches(bytes(data))
    assert len(batches) >= 3
    target = len(batches) // 2
    position = sum(len(batch) for _header, batch in batches[:target])
    header, batch = batches[target]
    first, last = header.base_offset, header.base_offset + header.last_offset_delta
    if kind == "flip":
        data[position + len(batch) // 2] ^= 0x10  # a record's byte, under the CRC
        dropped = range(first, last + 1)
    elif kind == "length":
        data[position + 8 : position + 12] = (header.batch_length + 1000).to_bytes(4, "big")
        dropped = range(first, last + 1)
    else:  # cut in the middle of the batch: the rest of the segment is gone
        del data[position + len(batch) // 2 :]
        end = int(segments[segments.index(segment) + 1].stem) if segment != segments[-1] else 0
        dropped = range(first, end or RECORDS)
    segment.write_bytes(bytes(data))
    return Damaged(segment, first, dropped)


def _open(path: Path) -> tuple[SegmentedLog, DataDir]:
    """The partition's log, opened from the data directory as a broker opens it."""
    state = ClusterState()
    data_dir = DataDir(path)
    data_dir.open(state, [0])
    topic = state.topics.get(TOPIC)
    assert topic is not None
    log = topic.partitions[0].log
    assert isinstance(log, SegmentedLog)
    return log, data_dir


def _read(path: Path) -> tuple[dict[int, bytes], int, list[CorruptBatch], DataDir]:
    """Open the data directory as a broker does and read the partition from its start to
    its end: the records, the log end, the reads that failed."""
    log, data_dir = _open(path)
    found: dict[int, bytes] = {}
    errors: list[CorruptBatch] = []
    offset = log.log_start_offset
    while offset < log.next_offset and len(errors) < 5:
        try:
            chunk = log.read(offset, 1 << 20)
        except CorruptBatch as error:
            errors.append(error)  # an error, not an empty answer to ask again
            offset += 1  # as an application skips the record
            continue
        assert chunk, f"an empty read at {offset} below the log end {log.next_offset}"
        for _header, batch in split_batches(chunk):
            for record in iter_records(batch):
                found[record.offset] = record.value or b""
        offset = max(found) + 1
    data_dir.close()
    return found, log.next_offset, errors, data_dir


@pytest.mark.parametrize("recovery_point", [True, False], ids=["recovery-point", "none"])
@pytest.mark.parametrize("stop", ["clean", "kill"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("kind", ["flip", "length", "cut"])
def test_damage_drops_the_damaged_batch_and_keeps_the_rest(
    written: dict[str, Written],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    where: str,
    stop: str,
    recovery_point: bool,
) -> None:
    source = written[stop]
    path = tmp_path / "data"
    shutil.copytree(source.path, path)
    directory = _partition_dir(path)
    if not recovery_point:
        checkpoint.discard(directory)
        checkpoint.discard_recovery_point(directory)
    else:
        assert (directory / checkpoint.RECOVERY_FILE).stat().st_size > 0
    damaged = _damage(directory, kind, where)
    torn_tail = kind == "cut" and where == "last"  # as an unfinished write looks

    caplog.set_level(logging.WARNING, "minibroker.storage")
    found, log_end, errors, data_dir = _read(path)
    # A clean stop's checkpoint trusts every segment, a recovery point the sealed ones;
    # a cut file no longer matches either and is scanned at the start.
    trusted = recovery_point and (stop == "clean" or where != "last")
    assert bool(errors) == (trusted and kind != "cut")
    kept = {o: v for o, v in source.acknowledged.items() if o not in damaged.dropped}
    if errors:
        # Loaded without a scan (trusted): the read meets the damage, says where, and
        # serves what follows it.
        assert [(e.path, e.offset) for e in errors] == [
            (damaged.segment, offset) for offset in damaged.dropped
        ]
        assert f"{damaged.segment}" in caplog.text and "CORRUPT_MESSAGE" in caplog.text
        assert found == kept and log_end == source.log_end
        # Found corrupt, the partition left no checkpoint or recovery point: the next
        # start scans it and sets the damage aside.
        found, log_end, errors, data_dir = _read(path)
        assert not errors

    assert found == kept
    if torn_tail:
        assert log_end == damaged.first_offset  # truncated, as after an unfinished write
        assert data_dir.truncated_bytes > 0 or "unfinished writes" in caplog.text
    else:
        assert log_end == source.log_end  # never moved back below an acknowledged offset
        dropped = f"offsets {damaged.dropped[0]}-{damaged.dropped[-1]} dropped"
        assert dropped in caplog.text
        assert any(r.levelno == logging.ERROR and dropped in r.getMessage() for r in caplog.records)
        [aside] = directory.glob(f"{damaged.segment.name}.*.corrupt")
        assert aside.stat().st_size > 0


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("stop", ["clean", "kill"])
@pytest.mark.parametrize("kind", ["flip", "length"])
def test_a_consumer_meeting_damage_gets_an_error_not_a_stall(
    written: dict[str, Written],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    stop: str,
    isolation: str,
) -> None:
    """The segment is trusted (a clean stop's checkpoint, or a kill's recovery point), so
    the damage is met by the read, as in a long-running broker."""
    path = tmp_path / "data"
    shutil.copytree(written[stop].path, path)
    damaged = _damage(_partition_dir(path), kind, "middle")
    caplog.set_level(logging.ERROR, "minibroker.storage")
    with Broker(data_dir=str(path)) as broker:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "reader",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        try:
            consumer.subscribe([TOPIC])
            offsets: list[int] = []
            error = None
            deadline = time.monotonic() + TIMEOUT
            while error is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    error = message.error()
                else:
                    offsets.append(message.offset())
        finally:
            consumer.close()
    assert error is not None, f"no error after offsets {offsets}"
    assert error.code() == confluent_kafka.KafkaError.INVALID_MSG  # CORRUPT_MESSAGE, 2
    assert offsets == list(range(damaged.first_offset))
    assert str(damaged.segment) in caplog.text


def test_reads_check_each_trusted_byte_once(
    written: dict[str, Written], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data"
    shutil.copytree(written["clean"].path, path)
    checked: list[int] = []
    real_first_bad = segmented_log.first_bad

    def counting(view: memoryview, next_offset: int = 0) -> tuple[int, int] | None:
        checked.append(len(view))
        return real_first_bad(view, next_offset)

    monkeypatch.setattr(segmented_log, "first_bad", counting)
    log, data_dir = _open(path)
    assert log.trusted_end == log.size_bytes
    for offset, max_bytes in [(10, 500), (0, 2000), (5, 1 << 20), (0, 1 << 20)]:
        log.read(offset, max_bytes)
    data_dir.close()
    assert sum(checked) == log.size_bytes  # every byte, once


def test_checked_ranges_merge(tmp_path: Path) -> None:
    log = SegmentedLog(SegmentStore(tmp_path, lambda: 1 << 30, lambda store: None))
    chooser = random.Random(33)
    for _trial in range(300):
        log._checked.clear()
        covered: set[int] = set()
        for _read in range(chooser.randint(1, 8)):
            start = chooser.randint(0, 50)
            stop = start + chooser.randint(1, 20)
            gaps = log._unchecked(start, stop)
            assert [b for gap in gaps for b in range(*gap)] == [
                b for b in range(start, stop) if b not in covered
            ]
            log._mark_checked(start, stop)
            covered |= set(range(start, stop))
            assert [b for r in log._checked for b in range(*r)] == sorted(covered)
            assert all(a[1] < b[0] for a, b in itertools.pairwise(log._checked))


def test_compaction_never_rewrites_a_damaged_batch_into_a_sound_one(
    written: dict[str, Written], tmp_path: Path
) -> None:
    path = tmp_path / "data"
    shutil.copytree(written["clean"].path, path)
    damaged = _damage(_partition_dir(path), "flip", "middle")
    log, data_dir = _open(path)
    with pytest.raises(CorruptBatch) as raised:
        list(log.stored_batches(log.next_offset))
    data_dir.close()
    assert raised.value.path == damaged.segment


def test_a_timestamp_lookup_steps_over_a_bad_length(
    written: dict[str, Written], tmp_path: Path
) -> None:
    path = tmp_path / "data"
    shutil.copytree(written["clean"].path, path)
    segment = sorted(_partition_dir(path).glob("*.log"))
    sound = split_batches(segment[len(segment) // 2].read_bytes())
    damaged = _damage(_partition_dir(path), "length", "middle")
    # The time of the batch after the damaged one: the lookup has to step over it.
    (later,) = [h.base_timestamp for h, _ in sound if h.base_offset == damaged.first_offset + 1]
    with Broker(data_dir=str(path)) as broker:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "times"}
        )
        try:
            wanted = confluent_kafka.TopicPartition(TOPIC, 0, later)
            [found] = consumer.offsets_for_times([wanted], timeout=TIMEOUT)
            assert (found.error, found.offset) == (None, damaged.first_offset + 1)
        finally:
            consumer.close()
