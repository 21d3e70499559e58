"""Idempotent producer state: producer id allocation and per-partition sequence checks.

Rules follow Kafka's ProducerStateManager:
- an epoch older than the one seen for this producer is fenced (INVALID_PRODUCER_EPOCH);
- a new epoch must start again at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise),
  except for a producer the partition has never seen, whose state may have been lost;
- a batch equal to one of the last five appended is a duplicate: it is acknowledged
  with the offset it got the first time and not written again;
- any other sequence but last + 1 is OUT_OF_ORDER_SEQUENCE_NUMBER.
Sequences wrap from 2**31 - 1 to 0.
A transaction marker written at a newer epoch (the coordinator fenced the producer) moves
the producer to that epoch here too, so its older epoch is refused from then on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minibroker.protocol.records import NO_PRODUCER_ID, BatchHeader

CACHED_BATCHES = 5
SEQUENCE_SPAN = 2**31

INVALID_PRODUCER_EPOCH = 47
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


class SequenceError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(slots=True)
class _BatchMetadata:
    first_sequence: int
    last_sequence: int
    base_offset: int


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    batches: deque[_BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1  # max timestamp of the last batch appended

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True, slots=True)
class ProducerState:
    """What DescribeProducers reports of one producer (Kafka's ProducerStateEntry)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int


class PartitionProducers:
    """Sequence bookkeeping of every idempotent producer that wrote to one partition."""

    def __init__(self) -> None:
        self._entries: dict[int, _ProducerEntry] = {}

    def active(self) -> list[ProducerState]:
        """Every producer the partition holds state for, by producer id."""
        return [
            ProducerState(producer_id, entry.epoch, entry.last_sequence, entry.last_timestamp)
            for producer_id, entry in sorted(self._entries.items())
        ]

    def epoch_of(self, producer_id: int) -> int | None:
        """The newest epoch this partition has seen of a producer (a batch or a marker)."""
        entry = self._entries.get(producer_id)
        return None if entry is None else entry.epoch

    def check(self, header: BatchHeader) -> int | None:
        """Validate a batch before it is appended.

        Returns the base offset of an earlier identical batch (a retried duplicate), or
        None when the batch is new and must be appended. Raises SequenceError.
        """
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self._entries.get(header.producer_id)
        first, last = header.base_sequence, header.last_sequence
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise SequenceError(
                INVALID_PRODUCER_EPOCH,
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than "
                f"{entry.epoch}",
            )
        if header.producer_epoch > entry.epoch:
            if first != 0:
                raise SequenceError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {header.producer_epoch} must start at sequence 0, got {first}",
                )
            return None
        for cached in entry.batches:
            if cached.first_sequence == first and cached.last_sequence == last:
                return cached.base_offset
        expected = (entry.last_sequence + 1) % SEQUENCE_SPAN
        if first != expected:
            raise SequenceError(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {header.producer_id} sent sequence {first}, expected {expected}",
            )
        return None

    def record(self, header: BatchHeader, base_offset: int) -> None:
        """Remember an appended batch (call only after check() allowed it)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self._entries.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = _ProducerEntry(epoch=header.producer_epoch)
            self._entries[header.producer_id] = entry
        entry.batches.append(
            _BatchMetadata(
                first_sequence=header.base_sequence,
                last_sequence=header.last_sequence,
                base_offset=base_offset,
            )
        )
        entry.last_timestamp = header.max_timestamp

    def state(self) -> list[list[Any]]:
        """Every producer's epoch, last timestamp and cached batches, as plain data."""
        return [
            [
                producer_id,
                entry.epoch,
                entry.last_timestamp,
                [[b.first_sequence, b.last_sequence, b.base_offset] for b in entry.batches],
            ]
            for producer_id, entry in self._entries.items()
        ]

    def load_state(self, state: list[list[Any]]) -> None:
        """Take what `state()` gave (all of it, or nothing when it is malformed)."""
        entries: dict[int, _ProducerEntry] = {}
        for producer_id, epoch, last_timestamp, batches in state:
            entry = _ProducerEntry(epoch=int(epoch), last_timestamp=int(last_timestamp))
            for first, last, offset in batches:
                entry.batches.append(_BatchMetadata(int(first), int(last), int(offset)))
            entries[int(producer_id)] = entry
        self._entries = entries

    def marker_written(self, producer_id: int, epoch: int, timestamp: int) -> None:
        """A commit or abort marker of the producer was appended at `epoch`."""
        entry = self._entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = _ProducerEntry(epoch=epoch)
            self._entries[producer_id] = entry
        entry.last_timestamp = timestamp


class ProducerIdAllocator:
    """Hands out producer ids and epochs (InitProducerId)."""

    def __init__(self, first_id: int = 1000) -> None:
        self._next_id = first_id
        # With a data directory: keeps the block of ids starting at the one given, and
        # returns its end; ids are handed out only from a kept block.
        self.reserve: Callable[[int], int] | None = None
        self._reserved_until = -1
        self._epochs: dict[int, int] = {}
        self._transactional: dict[str, int] = {}

    def seen(self, producer_id: int) -> None:
        """Ids up to `producer_id` were handed out before a restart: never again."""
        self._next_id = max(self._next_id, producer_id + 1)

    def allocate(self) -> tuple[int, int]:
        producer_id = self._next_id
        if self.reserve is not None and producer_id >= self._reserved_until:
            self._reserved_until = self.reserve(producer_id)
        self._next_id += 1
        self._epochs[producer_id] = 0
        return producer_id, 0

    def bump(self, producer_id: int, epoch: int) -> tuple[int, int] | None:
        """Bump the epoch of a known producer that presents its current epoch (KIP-360)."""
        current = self._epochs.get(producer_id)
        if current is None or current != epoch:
            return None
        if current >= 32766:
            return self.allocate()
        self._epochs[producer_id] = current + 1
        return producer_id, current + 1
