"""The consumer protocol's embedded formats: what a classic consumer-group member puts in
JoinGroup's protocol metadata (ConsumerProtocolSubscription) and what SyncGroup carries
back (ConsumerProtocolAssignment), in every version Kafka defines. Sans-IO.

ConsumerProtocolSubscription: version (int16), topics [string], user data (nullable
bytes); v1+ owned partitions [topic string, partitions [int32]]; v2+ generation id
(int32); v3+ rack id (nullable string). A reader of an older version ignores what a
newer one appends, as Kafka's does.
ConsumerProtocolAssignment: version (int16), assigned [topic string, partitions [int32]],
user data (nullable bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)
    generation: int = -1
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.position)
        self.position += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.unpack(">h")
        if length < 0:
            return None
        text = self.data[self.position : self.position + length]
        if len(text) < length:
            raise struct.error("string runs past the end")
        self.position += length
        return text.decode()

    def nullable_bytes(self) -> None:
        length = self.unpack(">i")
        if length > 0:
            if self.position + length > len(self.data):
                raise struct.error("bytes run past the end")
            self.position += length

    def partitions(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for _ in range(max(self.unpack(">i"), 0)):
            topic = self.string() or ""
            count = max(self.unpack(">i"), 0)
            found[topic] = list(struct.unpack_from(f">{count}i", self.data, self.position))
            self.position += 4 * count
        return found


def read_subscription(metadata: bytes) -> Subscription | None:
    """The whole ConsumerProtocolSubscription, or None if the bytes are not one."""
    try:
        reader = _Reader(metadata)
        version = reader.unpack(">h")
        topics = [reader.string() or "" for _ in range(max(reader.unpack(">i"), 0))]
        if reader.position == len(metadata):
            return Subscription(topics)  # no user data field at all
        reader.nullable_bytes()
        owned = reader.partitions() if version >= 1 else {}
        generation = reader.unpack(">i") if version >= 2 else -1
        rack_id = reader.string() if version >= 3 else None
        return Subscription(topics, owned, generation, rack_id)
    except (struct.error, UnicodeDecodeError):
        return None


def parse_subscription(metadata: bytes) -> list[str] | None:
    """Topic names of a ConsumerProtocolSubscription (any version), or None."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, position)
        position += 4
        topics = []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            topics.append(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def read_assignment(data: bytes) -> dict[str, list[int]] | None:
    """Topic -> partitions of a ConsumerProtocolAssignment (any version), or None when the
    bytes are not one (another protocol type, or none given yet: empty)."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", data, position)
        position += 4
        assigned: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, position)
            position += 2
            topic = data[position : position + max(length, 0)].decode()
            position += max(length, 0)
            (partitions,) = struct.unpack_from(">i", data, position)
            position += 4
            assigned[topic] = list(struct.unpack_from(f">{max(partitions, 0)}i", data, position))
            position += 4 * max(partitions, 0)
        return assigned
    except (struct.error, UnicodeDecodeError):
        return None


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment; {} when the bytes are not one."""
    return read_assignment(data) or {}


def encode_assignment(assigned: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 of topic -> partitions (no user data)."""
    data = struct.pack(">hi", 0, len(assigned))
    for topic, partitions in assigned.items():
        name = topic.encode()
        data += struct.pack(f">h{len(name)}si", len(name), name, len(partitions))
        data += struct.pack(f">{len(partitions)}i", *partitions)
    return data + struct.pack(">i", -1)
