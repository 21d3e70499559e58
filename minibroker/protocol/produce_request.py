"""Produce requests (versions 3-12) read without copying their record batches.

kio's reader copies every partition's records into a new bytes object; on a broker that
keeps them, each copy lands in fresh memory (a page fault per 4 KiB) and costs more than
all the rest of a Produce. Here each partition's records are a read-only view of the
frame they arrived in, which the log then keeps as it is: the bytes are written once, by
the socket read. Everything else is the kio entities kio's reader would build (tests
compare the two on generated frames at every version).

The frame has been walked by the bounds pass first (`bounds.request_checker`), so every
length and count here is known to fit; what is still checked is what that pass does not
look at: that strings are UTF-8.

Layout (Kafka's ProduceRequest.json): transactional_id (nullable string), acks int16,
timeout_ms int32, topic_data array of { name string, partition_data array of { index
int32, records nullable bytes } }. From v9 strings, bytes and arrays are compact and
each struct ends in a tag section (Produce defines no tagged fields: they are skipped).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

from kio.schema.produce import v3, v4, v5, v6, v7, v8, v9, v10, v11, v12

from minibroker.protocol.bounds import uvarint

FIRST_VERSION = 3
LAST_VERSION = 12
FLEXIBLE_VERSION = 9

_SCHEMAS: dict[int, ModuleType] = {
    3: v3.request,
    4: v4.request,
    5: v5.request,
    6: v6.request,
    7: v7.request,
    8: v8.request,
    9: v9.request,
    10: v10.request,
    11: v11.request,
    12: v12.request,
}

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi")

Reader = Callable[[bytes | memoryview, int], tuple[Any, int]]


def _skip_tags(buf: memoryview, pos: int) -> int:
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        _, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos += size
    return pos


def _text(raw: memoryview) -> str:
    return str(raw, "utf-8")


Body = tuple[str | None, int, int, list[Any], int]
"""transactional id, acks, timeout in ms, topics and the position after them."""


def _classic(buf: memoryview, pos: int, topic_cls: Any, partition_cls: Any) -> Body:
    """v3-8: int16 string lengths, int32 array counts and records lengths, no tags."""
    size = _INT16(buf, pos)[0]
    pos += 2
    transactional_id = None
    if size >= 0:
        transactional_id = _text(buf[pos : pos + size])
        pos += size
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topic_count = _INT32(buf, pos)[0]
    pos += 4
    topics = []
    for _ in range(topic_count):
        size = _INT16(buf, pos)[0]
        name = _text(buf[pos + 2 : pos + 2 + size])
        pos += 2 + size
        partition_count = _INT32(buf, pos)[0]
        pos += 4
        partitions = []
        for _ in range(partition_count):
            index, size = _INT32(buf, pos)[0], _INT32(buf, pos + 4)[0]
            pos += 8
            records = None
            if size >= 0:
                records = buf[pos : pos + size]
                pos += size
            partitions.append(partition_cls(index=index, records=records))
        topics.append(topic_cls(name=name, partition_data=tuple(partitions)))
    return transactional_id, acks, timeout_ms, topics, pos


def _flexible(buf: memoryview, pos: int, topic_cls: Any, partition_cls: Any) -> Body:
    """v9-12: compact strings, arrays and records, a tag section after each struct."""
    size, pos = uvarint(buf, pos)
    transactional_id = None
    if size:
        transactional_id = _text(buf[pos : pos + size - 1])
        pos += size - 1
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topic_count, pos = uvarint(buf, pos)
    topics = []
    for _ in range(topic_count - 1):
        size, pos = uvarint(buf, pos)
        name = _text(buf[pos : pos + size - 1])
        pos += size - 1
        partition_count, pos = uvarint(buf, pos)
        partitions = []
        for _ in range(partition_count - 1):
            index = _INT32(buf, pos)[0]
            size, pos = uvarint(buf, pos + 4)
            records = None
            if size:
                records = buf[pos : pos + size - 1]
                pos += size - 1
            pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
            partitions.append(partition_cls(index=index, records=records))
        pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
        topics.append(topic_cls(name=name, partition_data=tuple(partitions)))
    return transactional_id, acks, timeout_ms, topics, _skip_tags(buf, pos)


@cache
def reader(version: int) -> Reader:
    """The reader for Produce `version` (3-12): (frame, body offset) -> (request, end)."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise LookupError(f"Produce v{version} is not read here")
    schema = _SCHEMAS[version]
    read_body = _flexible if version >= FLEXIBLE_VERSION else _classic
    request_cls, topic_cls, partition_cls = (
        schema.ProduceRequest,
        schema.TopicProduceData,
        schema.PartitionProduceData,
    )
    timedelta = datetime.timedelta

    def read(frame: bytes | memoryview, pos: int) -> tuple[Any, int]:
        buf = memoryview(frame).toreadonly()
        transactional_id, acks, timeout_ms, topics, end = read_body(
            buf, pos, topic_cls, partition_cls
        )
        request = request_cls(
            transactional_id=transactional_id,
            acks=acks,
            timeout=timedelta(milliseconds=timeout_ms),
            topic_data=tuple(topics),
        )
        return request, end

    return read
