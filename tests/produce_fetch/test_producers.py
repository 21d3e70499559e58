"""Idempotent producer sequence checks and producer id allocation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.records import build_batch, read_header
from minibroker.state.log import MemoryLog
from minibroker.state.producers import (
    CACHED_BATCHES,
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PartitionProducers,
    ProducerIdAllocator,
    SequenceError,
)

PID = 4000


class Partition:
    """A log and its producer state, appended the way the Produce handler does."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.producers = PartitionProducers()

    def send(self, sequence: int, count: int = 1, epoch: int = 0, pid: int = PID) -> int:
        batch = build_batch(
            [(None, b"v")] * count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence
        )
        header = read_header(batch)
        duplicate_of = self.producers.check(header)
        if duplicate_of is not None:
            return duplicate_of
        base_offset = self.log.append(header, batch).base_offset
        self.producers.record(header, base_offset)
        return base_offset


def _code(partition: Partition, sequence: int, count: int = 1, epoch: int = 0) -> int:
    with pytest.raises(SequenceError) as info:
        partition.send(sequence, count, epoch)
    return info.value.error_code


def test_in_order_batches_are_appended() -> None:
    p = Partition()
    assert p.send(0, 3) == 0
    assert p.send(3, 2) == 3
    assert p.send(5) == 5
    assert p.log.next_offset == 6


@pytest.mark.parametrize("back", range(CACHED_BATCHES))
def test_duplicate_of_a_recent_batch_returns_its_original_offset(back: int) -> None:
    p = Partition()
    offsets = [p.send(i * 2, 2) for i in range(CACHED_BATCHES + 2)]
    index = len(offsets) - 1 - back
    end = p.log.next_offset
    assert p.send(index * 2, 2) == offsets[index]
    assert p.log.next_offset == end, "a duplicate is not written again"


def test_duplicate_older_than_the_last_five_is_out_of_order() -> None:
    p = Partition()
    for i in range(CACHED_BATCHES + 1):
        p.send(i)
    assert _code(p, 0) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_same_first_sequence_but_different_length_is_not_a_duplicate() -> None:
    p = Partition()
    p.send(0, 2)
    assert _code(p, 0, 3) == OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("sequence", [2, 5, 100, 2**31 - 1])
def test_gap_is_out_of_order(sequence: int) -> None:
    p = Partition()
    p.send(0)
    assert _code(p, sequence) == OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert p.log.next_offset == 1
    assert p.send(1) == 1, "the producer can continue after the rejection"


def test_old_epoch_is_fenced() -> None:
    p = Partition()
    p.send(0, epoch=3)
    assert _code(p, 1, epoch=2) == INVALID_PRODUCER_EPOCH == 47
    assert _code(p, 0, epoch=0) == INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_zero() -> None:
    p = Partition()
    p.send(0, 5, epoch=0)
    assert _code(p, 5, epoch=1) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.send(0, epoch=1) == 5
    assert p.send(1, epoch=1) == 6
    # The old epoch is now fenced.
    assert _code(p, 5, epoch=0) == INVALID_PRODUCER_EPOCH


def test_unknown_producer_may_start_anywhere() -> None:
    # Its earlier state may have been lost (as after retention in Kafka).
    p = Partition()
    assert p.send(42, epoch=7) == 0
    assert p.send(43, epoch=7) == 1
    assert _code(p, 45, epoch=7) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_are_independent() -> None:
    p = Partition()
    assert p.send(0, pid=1) == 0
    assert p.send(0, pid=2) == 1
    assert p.send(1, pid=1) == 2
    assert p.send(0, pid=2) == 1  # duplicate of producer 2's first batch


def test_non_idempotent_batches_are_not_checked() -> None:
    producers = PartitionProducers()
    plain = read_header(build_batch([(None, b"v")]))
    assert producers.check(plain) is None
    producers.record(plain, 0)
    assert producers.check(plain) is None


def test_sequence_wraps_after_2_31_minus_1() -> None:
    p = Partition()
    top = 2**31 - 1
    assert p.send(top - 1, 2) == 0  # sequences top-1 and top
    assert p.send(0, 3) == 2  # wraps to 0
    assert p.send(3) == 5
    assert p.send(0, 3) == 2  # duplicate after the wrap


def test_batch_spanning_the_wrap() -> None:
    p = Partition()
    top = 2**31 - 1
    assert p.send(top - 1, 4) == 0  # top-1, top, 0, 1
    assert _code(p, 3) == OUT_OF_ORDER_SEQUENCE_NUMBER  # 2 comes next
    assert p.send(2) == 4
    assert p.send(top - 1, 4) == 0  # duplicate


@given(counts=st.lists(st.integers(1, 5), min_size=1, max_size=12), data=st.data())
@settings(max_examples=100, deadline=None)
def test_retry_of_any_recent_batch_is_idempotent(counts: list[int], data: st.DataObject) -> None:
    p = Partition()
    sent: list[tuple[int, int, int]] = []
    sequence = data.draw(st.integers(0, 2**31 - 1))
    for count in counts:
        sent.append((sequence, count, p.send(sequence, count)))
        sequence = (sequence + count) % 2**31
    end = p.log.next_offset
    retry = data.draw(st.sampled_from(sent[-CACHED_BATCHES:]))
    assert p.send(retry[0], retry[1]) == retry[2]
    assert p.log.next_offset == end


def test_allocator_hands_out_fresh_ids() -> None:
    allocator = ProducerIdAllocator(first_id=10)
    assert allocator.allocate() == (10, 0)
    assert allocator.allocate() == (11, 0)


def test_allocator_bumps_a_current_epoch_only() -> None:
    allocator = ProducerIdAllocator()
    pid, epoch = allocator.allocate()
    assert allocator.bump(pid, epoch) == (pid, 1)
    assert allocator.bump(pid, 0) is None, "a stale epoch cannot bump"
    assert allocator.bump(pid + 999, 0) is None, "an unknown producer cannot bump"


def test_allocator_moves_to_a_new_id_when_the_epoch_is_exhausted() -> None:
    allocator = ProducerIdAllocator()
    pid, _ = allocator.allocate()
    epoch = 0
    for _ in range(32766):
        bumped = allocator.bump(pid, epoch)
        assert bumped is not None
        pid, epoch = bumped
    assert epoch == 32766
    new_pid, new_epoch = allocator.bump(pid, epoch) or (None, None)
    assert new_pid != pid and new_epoch == 0


def test_refusals_name_the_producer_epoch_and_sequence() -> None:
    """The Produce handler passes these messages on to the client."""
    p = Partition()
    p.send(0, epoch=3)
    with pytest.raises(SequenceError) as old_epoch:
        p.send(1, epoch=2)
    assert f"producer {PID}" in str(old_epoch.value) and "epoch 2" in str(old_epoch.value)
    with pytest.raises(SequenceError) as new_epoch:
        p.send(5, epoch=4)
    assert "sequence 0" in str(new_epoch.value) and "got 5" in str(new_epoch.value)
    with pytest.raises(SequenceError) as gap:
        p.send(7, epoch=3)
    assert "sequence 7" in str(gap.value) and "expected 1" in str(gap.value)
