"""What the client catalogue asks of a client: the operations, the records, the options.

Each driver (one module per client) maps these onto its client's own API and declares,
in `lacks`, every capability its client has no API for, with the reason.
"""

from __future__ import annotations

import abc
import enum
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Self

from minibroker import Broker

TIMEOUT = 15  # seconds for any one client operation
POLL_MS = 200  # one poll while a reader waits for records

# Kafka's timestamp types, as the record batch attributes carry them.
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class Capability(enum.Enum):
    RECORD_TIMESTAMPS = "the producer sets each record's CreateTime"
    RECORD_HEADERS = "each record of one send carries headers of its own"
    NULL_AND_EMPTY = "one send writes null and empty keys and values side by side"
    RECORD_PARTITION = "each record of one send names a partition of its own"
    DELIVERY_REPORTS = "the producer reports each record's partition, offset and timestamp"
    DELIVERY_TIMESTAMP_TYPE = "an acknowledgement says which kind of timestamp it carries"
    READER_POSITION = "a reader reports the offset it reads next"
    LOOKUP_TIMESTAMP = "an offset-for-time lookup returns the found record's timestamp"
    ADMIN = "creates, describes, grows and deletes topics; describes configs and the cluster"
    ADMIN_LIST_OFFSETS = "lists a partition's offsets by spec (earliest, latest, max, time)"
    MISSING_CONFIG_ERRORS = "describing a missing topic's configs reports the topic's error"


class Refusal(enum.Enum):
    """Why a produce failed, as the drivers read their clients' errors."""

    MESSAGE_TOO_LARGE = "message too large"
    UNKNOWN_TOPIC = "unknown topic"
    TIMED_OUT = "timed out"


class ProduceRejected(Exception):
    def __init__(self, reason: Refusal, detail: object) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason


class AdminFailed(Exception):
    """An admin operation the broker refused, with the Kafka error code it answered."""

    def __init__(self, code: int, detail: object = "") -> None:
        super().__init__(f"error {code}: {detail}")
        self.code = code


Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Record:
    """A record to send: a None key or value is null; a None timestamp or partition is
    left to the client."""

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class Received:
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    timestamp: int
    timestamp_type: int
    offset: int
    partition: int


@dataclass(frozen=True)
class Delivery:
    """One record's acknowledgement; None where the client does not say (under acks=0,
    the offset; in some clients, the timestamp type)."""

    partition: int | None
    offset: int | None
    timestamp: int | None
    timestamp_type: int | None


@dataclass(frozen=True)
class ProduceOptions:
    """Producer settings; None leaves the client's default."""

    codec: str | None = None
    acks: int | None = None
    idempotence: bool | None = None
    linger_ms: int | None = None
    one_batch: bool = False  # every record of one send in a single batch
    max_request_bytes: int | None = None
    retries: int | None = None
    java_partitioner: bool = False  # keyed records placed by Java's murmur2 rule
    delivery_timeout_ms: int | None = None  # also bounds the wait for the topic's metadata


@dataclass(frozen=True)
class ReadOptions:
    # Readers seek by finishing an in-flight fetch first: keep long polls short.
    max_wait_ms: int = 100
    fetch_limit: int | None = None  # both the per-partition and the per-request limit
    client_id: str | None = None


PRODUCE_DEFAULTS = ProduceOptions()
READ_DEFAULTS = ReadOptions()


@dataclass(frozen=True)
class OffsetAndTime:
    offset: int
    timestamp: int | None  # None where the client's lookup returns the offset alone


class Spec(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    MAX_TIMESTAMP = "max_timestamp"


OffsetQuery = Spec | int  # an int: the first offset at or after that time


@dataclass(frozen=True)
class ConfigEntry:
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG


# DescribeConfigs' config_source values.
CONFIG_SOURCES = {
    0: "UNKNOWN_CONFIG",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


class ResourceKind(enum.Enum):
    TOPIC = "topic"
    BROKER = "broker"


Node = tuple[int, str, int]  # node id, host, port


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    nodes: list[Node]


@dataclass(frozen=True)
class TopicMetadata:
    error: int
    partitions: list[int]


@dataclass(frozen=True)
class Metadata:
    brokers: list[Node]
    topics: dict[str, TopicMetadata]


class Producer(abc.ABC):
    @abc.abstractmethod
    def send(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        """Send every record and wait for them all; one Delivery per record, in order,
        where the client reports them (else an empty list). Raises ProduceRejected."""


class Reader(abc.ABC):
    """A group-less consumer of a topic's partitions, starting at the earliest offsets;
    an offset out of range resets to the earliest. Seeks apply to every partition."""

    @abc.abstractmethod
    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Received]:
        """What arrives within `timeout_ms` (returning once anything has)."""

    def read(self, count: int) -> list[Received]:
        """Exactly `count` records, or fail after TIMEOUT seconds."""
        received: list[Received] = []
        deadline = time.monotonic() + TIMEOUT
        while len(received) < count and time.monotonic() < deadline:
            received.extend(self.poll(POLL_MS, count - len(received)))
        assert len(received) == count, f"got {len(received)} of {count} records: {received}"
        return received

    @abc.abstractmethod
    def seek(self, offset: int) -> None: ...

    @abc.abstractmethod
    def seek_to_beginning(self) -> None: ...

    @abc.abstractmethod
    def seek_to_end(self) -> None:
        """Returns once the end is resolved: a record produced afterwards is read next."""

    def position(self, partition: int = 0) -> int:
        raise NotImplementedError(Capability.READER_POSITION.value)

    @abc.abstractmethod
    def offset_for_time(self, timestamp: int, partition: int = 0) -> OffsetAndTime | None:
        """The first record at or after `timestamp`; None if none is that late."""

    @abc.abstractmethod
    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        """The partition's earliest and end offsets."""


class Admin(abc.ABC):
    """Admin operations; a refusal raises AdminFailed with the broker's error code."""

    @abc.abstractmethod
    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None: ...

    @abc.abstractmethod
    def describe_topic(self, name: str) -> list[int]:
        """The topic's partition ids."""

    @abc.abstractmethod
    def create_partitions(self, name: str, total: int) -> None: ...

    @abc.abstractmethod
    def describe_configs(self, kind: ResourceKind, name: str) -> dict[str, ConfigEntry]:
        """Every config of the resource, defaults included."""

    @abc.abstractmethod
    def describe_cluster(self) -> ClusterInfo: ...

    def list_offsets(
        self, topic: str, partition: int, queries: Sequence[OffsetQuery]
    ) -> list[OffsetAndTime]:
        """The offset (and its record's timestamp) each query finds, in order."""
        raise NotImplementedError(Capability.ADMIN_LIST_OFFSETS.value)

    @abc.abstractmethod
    def delete_topic(self, name: str) -> None: ...


class Client(abc.ABC):
    """A driver: one client library or tool against one broker."""

    name: ClassVar[str]
    lacks: ClassVar[Mapping[Capability, str]] = {}  # capability -> why the client lacks it
    # What a produce to a topic the broker does not know (auto-create off) fails with.
    unknown_topic_refusal: ClassVar[Refusal]

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @classmethod
    def unavailable(cls) -> str | None:
        """Why the client cannot run here, or None."""
        return None

    @classmethod
    def can(cls, capability: Capability) -> bool:
        return capability not in cls.lacks

    def close(self) -> None:
        """Release what the driver holds (an event loop, say)."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @abc.abstractmethod
    def producer(
        self, options: ProduceOptions = PRODUCE_DEFAULTS
    ) -> AbstractContextManager[Producer]: ...

    @abc.abstractmethod
    def reader(
        self, topic: str, partitions: int = 1, options: ReadOptions = READ_DEFAULTS
    ) -> AbstractContextManager[Reader]: ...

    @abc.abstractmethod
    def metadata(self, topics: Sequence[str] | None = None) -> Metadata:
        """The brokers and the named topics (every topic if None), as a Metadata request
        returns them."""

    def admin(self) -> AbstractContextManager[Admin]:
        raise NotImplementedError(Capability.ADMIN.value)


def one_partition(records: Sequence[Record]) -> int | None:
    """The partition every record names (None: left to the partitioner)."""
    partitions = {r.partition for r in records}
    assert len(partitions) == 1, f"records for several partitions in one send: {partitions}"
    return partitions.pop()
