"""Produce response topics (TopicProduceResponse, versions 3-12) written straight to bytes.

Every acknowledged produce request is answered, so its answer is on the busiest write
path; building kio entities for it and serialising them field by field cost more than
checking and storing the batches. `write_topic` appends one encoded TopicProduceResponse
for `messages.SplicedResponse` to splice into the response. Tests compare it with kio's
encoding byte for byte at every version.

Layout (Kafka's ProduceResponse.json): a topic is its name (string; compact from v9),
then its partitions array (compact from v9), then, v9+, an empty tag section. A
partition is index int32, error_code int16, base_offset int64, log_append_time_ms int64,
log_start_offset int64 (v5+), record_errors (v8+: an array of batch_index int32 and
batch_index_error_message, a nullable string, each with an empty tag section v9+),
error_message (v8+, nullable string), then v9+ an empty tag section: its tagged field
(current_leader, v10+) is never sent here. After the topics array the response has
throttle_time_ms int32 and, v9+, its own empty tag section.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from minibroker.protocol.messages import array_length, string_field

FIRST_VERSION = 3
LAST_VERSION = 12
LOG_START_OFFSET_VERSION = 5
RECORD_ERRORS_VERSION = 8
FLEXIBLE_VERSION = 9
NO_TAGS = b"\x00"

_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error code, base offset, append time
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordError(NamedTuple):
    batch_index: int
    message: str | None


class ProducePartitionAnswer(NamedTuple):
    partition_index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    error_message: str | None = None


def write_topic(
    version: int, name: str, partitions: list[ProducePartitionAnswer], out: list[bytes]
) -> None:
    """Append the pieces of one TopicProduceResponse to `out`."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Produce v{version} is not written here")
    flexible = version >= FLEXIBLE_VERSION
    out.append(string_field(name, flexible))
    out.append(array_length(len(partitions), flexible))
    for answer in partitions:
        out.append(
            _PARTITION_HEAD.pack(
                answer.partition_index,
                answer.error_code,
                answer.base_offset,
                answer.log_append_time_ms,
            )
        )
        if version >= LOG_START_OFFSET_VERSION:
            out.append(_INT64.pack(answer.log_start_offset))
        if version >= RECORD_ERRORS_VERSION:
            out.append(array_length(len(answer.record_errors), flexible))
            for record_error in answer.record_errors:
                out.append(_INT32.pack(record_error.batch_index))
                out.append(string_field(record_error.message, flexible))
                if flexible:
                    out.append(NO_TAGS)
            out.append(string_field(answer.error_message, flexible))
        if flexible:
            out.append(NO_TAGS)
    if flexible:
        out.append(NO_TAGS)


def suffix_size(version: int) -> int:
    """Bytes of the response body after its topics array: throttle_time_ms and, v9+, the
    empty tag section (node_endpoints, v10+, is a tagged field and never sent here)."""
    return _INT32.size + (version >= FLEXIBLE_VERSION)
