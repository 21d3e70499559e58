"""The budget of open segment files: closed least recently used first, reopened on demand,
nothing lost, reordered or left unsynced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.protocol.records import build_batch, iter_records, read_header
from minibroker.storage.open_files import DescriptorPlan, OpenFiles, default_open_segment_files
from minibroker.storage.segmented_log import SegmentedLog
from minibroker.storage.segments import Segment, SegmentStore, recover


def test_the_least_recently_used_is_closed_first() -> None:
    budget: OpenFiles[str] = OpenFiles(2)
    a, b, c = "a", "b", "c"
    assert budget.used(a) == [] and budget.used(b) == []
    assert budget.used(a) == []  # a is now the most recent
    assert budget.used(c) == [b]
    assert a in budget and c in budget and b not in budget
    budget.closed(a)
    assert budget.oldest(keep=c) is None and len(budget) == 1


def test_the_default_leaves_half_the_limit_to_connections() -> None:
    assert default_open_segment_files(1024) == 480
    assert default_open_segment_files(80) == 16
    plan = DescriptorPlan(1024, 480, 1024)
    assert plan.refusal() is None
    assert "fewer than max_connections (1024)" in (plan.warning() or "")
    assert DescriptorPlan(1024, 480, 400).warning() is None
    assert "leaves no descriptors" in (DescriptorPlan(1024, 1000, 10).refusal() or "")


def _open_descriptors(directory: Path) -> int:
    """Descriptors of this process open on files under `directory`."""
    count = 0
    for entry in os.scandir("/proc/self/fd"):
        try:
            if os.readlink(entry.path).startswith(str(directory)):
                count += 1
        except OSError:
            continue
    return count


def _batch(partition: int, number: int) -> bytes:
    return build_batch([(b"p%d" % partition, b"%d" % number)], timestamp_ms=number)


def test_partitions_past_the_budget_keep_every_batch_in_order(tmp_path: Path) -> None:
    budget: OpenFiles[Segment] = OpenFiles(3)
    synced: set[SegmentStore] = set()
    logs = [
        SegmentedLog(SegmentStore(tmp_path / str(i), lambda: 300, synced.add, open_files=budget))
        for i in range(8)
    ]
    for number in range(12):  # every partition in turn: each append reopens a segment
        for index, log in enumerate(logs):
            batch = _batch(index, number)
            log.append(read_header(batch), batch)
            assert _open_descriptors(tmp_path) <= 3
    assert len(budget) == 3
    assert len(list((tmp_path / "0").glob("*.log"))) > 2  # rolled, some while closed
    for store in synced:
        store.sync()  # segments closed since they were written are synced too
    for log in logs:
        values = [r.value for b in log.batches() for r in iter_records(b)]
        assert values == [b"%d" % n for n in range(12)]
        log.store.close()
    assert _open_descriptors(tmp_path) == 0 and len(budget) == 0
    for index in range(8):  # and the files hold them, as recovery reads them
        _segments, recovery = recover(tmp_path / str(index))
        assert recovery.batch_count == 12 and recovery.truncated_bytes == 0


def test_a_write_error_names_the_segment_file(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path / "p", lambda: 1 << 30, lambda store: None)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "00000000000000000000.log").mkdir()  # no file can be opened there
    batch = _batch(0, 0)
    with pytest.raises(OSError, match=r"00000000000000000000\.log"):
        SegmentedLog(store).append(read_header(batch), batch)
