"""Fetch response topics (FetchableTopicResponse, versions 4-17) written straight to bytes.

A Fetch answer lists every partition a client reads, often hundreds, on the path taken
most often; building a kio entity per partition and serialising it field by field costs
more than everything else the broker does for it. This writes the same bytes from plain
values: `write_topic` appends the pieces of one FetchableTopicResponse (the stored
batches as views, not copies) for `messages.SplicedResponse` to splice into the
response, so the records are copied once, into the frame. Tests compare it with kio's
encoding byte for byte at every version.

Layout (Kafka's FetchResponse.json): a topic is its name (string, v4-12; compact from
v12) or its id (uuid, v13+), then its partitions array (compact from v12), then, v12+,
an empty tag section. A partition is partition_index int32, error_code int16,
high_watermark int64, last_stable_offset int64, log_start_offset int64 (v5+),
aborted_transactions (nullable array of producer_id int64 + first_offset int64, each
with an empty tag section v12+), preferred_read_replica int32 (v11+), records (nullable
bytes), then v12+ an empty tag section: its tagged fields (diverging epoch, current
leader, snapshot id) are never sent here.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from minibroker.protocol.messages import array_length, nullable_length, string_field

FIRST_VERSION = 4
LAST_VERSION = 17
LOG_START_OFFSET_VERSION = 5
PREFERRED_READ_REPLICA_VERSION = 11
FLEXIBLE_VERSION = 12
TOPIC_ID_VERSION = 13
NO_TAGS = b"\x00"
ZERO_UUID = bytes(16)

_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error code, high watermark, last stable
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


class RecordPieces(NamedTuple):
    """Stored record batches as pieces (views of the log) and their total size."""

    pieces: list[bytes | memoryview]
    size: int


class PartitionAnswer(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    preferred_read_replica: int
    records: bytes | RecordPieces | None


def _partition(version: int, answer: PartitionAnswer, out: list[bytes | memoryview]) -> None:
    flexible = version >= FLEXIBLE_VERSION
    out.append(
        _PARTITION_HEAD.pack(
            answer.partition_index,
            answer.error_code,
            answer.high_watermark,
            answer.last_stable_offset,
        )
    )
    if version >= LOG_START_OFFSET_VERSION:
        out.append(_INT64.pack(answer.log_start_offset))
    aborted = answer.aborted_transactions
    out.append(nullable_length(None if aborted is None else len(aborted), flexible))
    for transaction in aborted or ():
        out.append(_ABORTED.pack(transaction.producer_id, transaction.first_offset))
        if flexible:
            out.append(NO_TAGS)
    if version >= PREFERRED_READ_REPLICA_VERSION:
        out.append(_INT32.pack(answer.preferred_read_replica))
    records = answer.records
    if records is None:
        out.append(nullable_length(None, flexible))
    elif isinstance(records, RecordPieces):
        out.append(array_length(records.size, flexible))
        out.extend(records.pieces)
    else:
        out.append(array_length(len(records), flexible))
        out.append(records)
    if flexible:
        out.append(NO_TAGS)


def write_topic(
    version: int,
    name: str | None,
    topic_id: uuid.UUID | None,
    partitions: list[PartitionAnswer],
    out: list[bytes | memoryview],
) -> None:
    """Append the pieces of one FetchableTopicResponse to `out`."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Fetch v{version} is not written here")
    flexible = version >= FLEXIBLE_VERSION
    if version >= TOPIC_ID_VERSION:
        # a request naming the zero id (read as None) gets it back, as kio writes None
        out.append(ZERO_UUID if topic_id is None else topic_id.bytes)
    else:
        if name is None:
            raise ValueError(f"Fetch v{version} names topics by name")
        out.append(string_field(name, flexible))
    out.append(array_length(len(partitions), flexible))
    for answer in partitions:
        _partition(version, answer, out)
    if flexible:
        out.append(NO_TAGS)


def suffix_size(version: int) -> int:
    """Bytes of the response body after its topics array: the empty tag section (v12+;
    node_endpoints, v16+, is a tagged field and never sent here)."""
    return 1 if version >= FLEXIBLE_VERSION else 0
