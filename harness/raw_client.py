"""A blocking raw-socket Kafka client for tests: encoded requests out, decoded responses in.

It sends whatever it is given, well-formed or not, and reads frames back without any of
a real client's retries or version negotiation, so tests can see exactly what the
broker answers (or that it closed the connection).
"""

from __future__ import annotations

import datetime
import itertools
import socket
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType, TracebackType
from typing import Any

from minibroker.protocol import legacy, messages
from minibroker.protocol.messages import RequestHeader


def _kio_version(api_key: int, version: int) -> int:
    """Versions older than kio's classes are built with the first one (protocol/legacy.py)."""
    return legacy.proxy_version(api_key) if legacy.is_legacy(api_key, version) else version


def request_module(api_key: int, version: int) -> ModuleType:
    module = messages.request_module(api_key, _kio_version(api_key, version))
    assert module is not None, f"kio has no request for api {api_key} v{version}"
    return module


def request_class(api_key: int, version: int) -> type[Any]:
    """The class a request of this version is built with (a legacy version's proxy)."""
    cls = messages.request_class(api_key, _kio_version(api_key, version))
    assert cls is not None, f"kio has no request for api {api_key} v{version}"
    return cls


def make_request(api_key: int, version: int, **fields: Any) -> Any:
    """The request entity at this version; fields the version lacks are dropped."""
    return messages.build(request_class(api_key, version), **fields)


def make(api_key: int, version: int, struct_name: str, **fields: Any) -> Any:
    """A nested request structure (by its schema name) at this version."""
    return messages.build(getattr(request_module(api_key, version), struct_name), **fields)


def encode(
    api_key: int,
    version: int,
    request: Any,
    correlation_id: int,
    client_id: str | None = "rawclient",
) -> bytes:
    header = RequestHeader(api_key, version, correlation_id, client_id)
    return messages.encode_request(header, request)


def parse_host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "rawclient"):
        self.sock = socket.create_connection(parse_host_port(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._buffer = bytearray()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # --- sending ---

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, request: Any) -> int:
        """Send one request; return its correlation id."""
        correlation_id = next(self._ids)
        self.send_bytes(encode(api_key, version, request, correlation_id, self.client_id))
        return correlation_id

    # --- receiving ---

    def _fill(self, count: int) -> bool:
        while len(self._buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def recv_frame(self) -> bytes | None:
        """The next response frame body (without its size), or None at end of stream."""
        if not self._fill(4):
            return None
        (size,) = struct.unpack_from(">i", self._buffer)
        if not self._fill(4 + size):
            return None
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.recv_frame()
        if frame is None:
            raise ConnectionError("the broker closed the connection")
        return messages.decode_response(frame, api_key, version)

    def request(self, api_key: int, version: int, request: Any) -> Any:
        """Send and wait for the matching response body."""
        correlation_id = self.send(api_key, version, request)
        got, body = self.receive(api_key, version)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return body

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.request(api_key, version, make_request(api_key, version, **fields))

    def drain_until_closed(self, timeout: float = 10.0) -> list[bytes]:
        """Read every frame until the broker closes the connection; fail on timeout."""
        frames: list[bytes] = []
        deadline = time.monotonic() + timeout
        self.sock.settimeout(timeout)
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("the broker kept the connection open")
            try:
                frame = self.recv_frame()
            except ConnectionResetError:
                return frames
            if frame is None:
                return frames
            frames.append(frame)

    def is_closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within `timeout`."""
        try:
            return not self.drain_until_closed(timeout)
        except TimeoutError:
            return False
        except OSError:
            return True


# --- the requests many tests send -------------------------------------------------------

PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 1, 2, 3, 19
DELETE_RECORDS = 21


def metadata_request(version: int = 12) -> Any:
    """Metadata of every topic, creating none."""
    return make_request(
        METADATA,
        version,
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def produce_request(
    topic: str,
    batch: bytes | None,
    *,
    partition: int = 0,
    version: int = 9,
    acks: int = -1,
    timeout_ms: int = 5_000,
    transactional_id: str | None = None,
) -> Any:
    """Produce of one record batch (or null records) to one partition."""
    data = make(PRODUCE, version, "PartitionProduceData", index=partition, records=batch)
    topic_data = make(PRODUCE, version, "TopicProduceData", name=topic, partition_data=(data,))
    return make_request(
        PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(topic_data,),
    )


def produce_codes(response: Any) -> list[int]:
    """Every partition's error code in a Produce response, in order."""
    return [p.error_code.value for t in response.responses for p in t.partition_responses]


def fetch_request(
    topic: str,
    partitions: Sequence[int] = (0,),
    *,
    version: int = 11,
    max_wait: datetime.timedelta = datetime.timedelta(0),
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    fetch_offset: int = 0,
) -> Any:
    """A session-less Fetch of one topic's `partitions` (an index may repeat)."""
    wanted = tuple(
        make(
            FETCH,
            version,
            "FetchPartition",
            partition=index,
            current_leader_epoch=-1,
            fetch_offset=fetch_offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        )
        for index in partitions
    )
    fetch_topic = make(FETCH, version, "FetchTopic", topic=topic, partitions=wanted)
    return make_request(
        FETCH,
        version,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_request(
    topic: str,
    *,
    version: int = 7,
    timestamp: int = -1,
    repeats: int = 1,
    isolation_level: int = 0,
) -> Any:
    """ListOffsets of partition 0 of `topic` at `timestamp`, named `repeats` times."""
    partition = make(
        LIST_OFFSETS,
        version,
        "ListOffsetsPartition",
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=timestamp,
    )
    entry = make(
        LIST_OFFSETS, version, "ListOffsetsTopic", name=topic, partitions=(partition,) * repeats
    )
    return make_request(
        LIST_OFFSETS, version, replica_id=-1, isolation_level=isolation_level, topics=(entry,)
    )


def create_topics_request(
    specs: Iterable[tuple[str, int, Mapping[str, str]]],
    *,
    version: int = 7,
    timeout_ms: int = 5_000,
) -> Any:
    """CreateTopics of (name, partitions, configs) specs, replication factor 1."""
    topics = tuple(
        make(
            CREATE_TOPICS,
            version,
            "CreatableTopic",
            name=name,
            num_partitions=partitions,
            replication_factor=1,
            assignments=(),
            configs=tuple(
                make(CREATE_TOPICS, version, "CreatableTopicConfig", name=key, value=value)
                for key, value in configs.items()
            ),
        )
        for name, partitions, configs in specs
    )
    return make_request(
        CREATE_TOPICS,
        version,
        topics=topics,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        validate_only=False,
    )


def delete_records_request(
    topic: str, before: Mapping[int, int], *, timeout_ms: int = 30_000
) -> Any:
    """DeleteRecords (v2) of `topic`: each partition's records below its offset."""
    partitions = tuple(
        make(DELETE_RECORDS, 2, "DeleteRecordsPartition", partition_index=partition, offset=offset)
        for partition, offset in before.items()
    )
    return make_request(
        DELETE_RECORDS,
        2,
        topics=(make(DELETE_RECORDS, 2, "DeleteRecordsTopic", name=topic, partitions=partitions),),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
    )


def produce_batch(call: Callable[..., Any], topic: str, partition: int, batch: bytes) -> None:
    """Produce one record batch with acks=-1 through `call` (RawClient.request, or any
    callable with its signature) and check it was accepted."""
    response = call(PRODUCE, 9, produce_request(topic, batch, partition=partition))
    assert produce_codes(response) == [0]
