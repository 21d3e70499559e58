"""Committed offsets of a group: how they are accepted, kept for a transaction, made
committed and expired. Sans-IO; both group coordinators keep a group's offsets this way
(the consumer protocol's through the classic coordinator, which holds them).

Rules:
    Accept      an offset is kept when its partition exists (else
                UNKNOWN_TOPIC_OR_PARTITION) and its metadata is at most
                MAX_METADATA_BYTES encoded (else OFFSET_METADATA_TOO_LARGE); each partition
                of a request gets its own error code.
    Transaction a TxnOffsetCommit's offsets wait under the producer id until the
                transaction's marker reaches the group: commit makes them the committed
                offsets (their retention starts then), abort drops them.
    Expiry      (group_rules: Offset expiry) an Empty group that had members loses all its
                offsets offsets.retention.minutes after it became Empty; one that never had
                members loses each offset that long after its commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

MAX_METADATA_BYTES = 4096  # offset.metadata.max.bytes
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12

PartitionKey = tuple[str, int]
# (topic, partition, offset, leader epoch, metadata) as a commit request carries them
OffsetEntry = tuple[str, int, int, int, str | None]


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    committed_at: float = 0.0  # monotonic seconds, for offset expiry


# Told of every change to committed offsets (a data directory keeps them):
# (group id, {partition: offset, or None when deleted}), or (group id, None) when the
# group is gone.
OffsetsListener = Callable[[str, "dict[PartitionKey, CommittedOffset | None] | None"], None]


def accept(
    now: float,
    offsets: Iterable[OffsetEntry],
    partition_exists: Callable[[str, int], bool],
    into: dict[PartitionKey, CommittedOffset],
) -> dict[PartitionKey, int]:
    """Keep each acceptable offset in `into`; the error code of each partition."""
    results: dict[PartitionKey, int] = {}
    for topic, partition, offset, leader_epoch, metadata in offsets:
        if not partition_exists(topic, partition):
            results[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
        elif metadata is not None and len(metadata.encode()) > MAX_METADATA_BYTES:
            results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
        else:
            into[(topic, partition)] = CommittedOffset(offset, leader_epoch, metadata, now)
            results[(topic, partition)] = NONE
    return results


def end_transaction(
    now: float,
    committed: dict[PartitionKey, CommittedOffset],
    pending: dict[int, dict[PartitionKey, CommittedOffset]],
    producer_id: int,
    commit: bool,
) -> dict[PartitionKey, CommittedOffset]:
    """The producer's transaction ended: its pending offsets become committed (commit)
    or are dropped (abort); the offsets now committed."""
    ended = pending.pop(producer_id, {})
    if not commit:
        return {}
    for key, stored in ended.items():
        stored.committed_at = now
        committed[key] = stored
    return ended


def expiry_deadline(
    committed: dict[PartitionKey, CommittedOffset],
    retention: float,
    empty_since: float,
    had_members: bool,
) -> float:
    """When an Empty group's next offset (or, without offsets, the group) expires."""
    if had_members or not committed:
        return empty_since + retention
    return min(stored.committed_at for stored in committed.values()) + retention


def expire(
    now: float,
    committed: dict[PartitionKey, CommittedOffset],
    retention: float,
    empty_since: float,
    had_members: bool,
) -> list[PartitionKey]:
    """Drop an Empty group's offsets whose retention has run out; the keys dropped."""
    if had_members or not committed:
        if now < empty_since + retention:
            return []
        expired = list(committed)
    else:
        expired = [k for k, o in committed.items() if o.committed_at + retention <= now]
    for key in expired:
        del committed[key]
    return expired
