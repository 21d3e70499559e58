"""Budgets, timeouts and limits over real sockets: stuck or idle connections are closed,
long polls end with their client, fetches and creation requests stay within the
broker's limits, and honest clients keep being served."""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import (
    RawClient,
    create_topics_request,
    encode,
    fetch_request,
    make,
    make_request,
    parse_host_port,
    produce_request,
)
from minibroker import Broker
from minibroker.protocol import messages, records
from minibroker.state.log import PartitionLog

PRODUCE, FETCH, METADATA, CREATE_TOPICS, CREATE_PARTITIONS = 0, 1, 3, 19, 37


def _metadata(topics: list[str] | None = None, version: int = 12, create: bool = False) -> Any:
    wanted = None
    if topics is not None:
        wanted = tuple(
            make(METADATA, version, "MetadataRequestTopic", name=t, topic_id=uuid.UUID(int=0))
            for t in topics
        )
    return make_request(
        METADATA,
        version,
        topics=wanted,
        allow_auto_topic_creation=create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _produce(topic: str, partition: int, value: bytes, count: int = 1, version: int = 9) -> Any:
    batch = records.build_batch([(None, value)] * count, timestamp_ms=1000)
    return produce_request(topic, batch, partition=partition, version=version, acks=1)


def _create_topics(specs: dict[str, int], version: int = 5) -> Any:
    return create_topics_request(
        [(name, count, {}) for name, count in specs.items()], version=version
    )


def _half_frame(bootstrap: str) -> socket.socket:
    """A connection that sends a size prefix and part of the frame, then nothing."""
    sock = socket.create_connection(parse_host_port(bootstrap))
    sock.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00")
    return sock


def _eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def broker_with() -> Iterator[Callable[..., Broker]]:
    started: list[Broker] = []

    def start(**settings: Any) -> Broker:
        broker = Broker(**settings)
        broker.__enter__()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.__exit__(None, None, None)


# --- timeouts ---


def test_a_frame_that_stops_midway_is_closed_after_the_partial_timeout(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(partial_request_timeout_ms=300)
    with RawClient(broker.bootstrap_servers) as client:
        client.send_bytes(struct.pack(">i", 500) + b"\x00\x03")
        assert client.is_closed_by_peer(timeout=5)


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(connections_max_idle_ms=400)
    with RawClient(broker.bootstrap_servers) as busy, RawClient(broker.bootstrap_servers) as idle:
        idle.request(METADATA, 12, _metadata([]))
        busy.request(METADATA, 12, _metadata([]))
        assert broker.connection_count == 2  # both accepted, so 1 means one was closed

        def idle_one_closed() -> bool:
            # A request every 20 ms (the poll interval) keeps the busy one well inside
            # the 400 ms idle timeout until the broker has dropped the idle one.
            busy.request(METADATA, 12, _metadata([]))
            return broker.connection_count == 1

        assert _eventually(idle_one_closed)
        assert idle.is_closed_by_peer(timeout=5)
        assert busy.request(METADATA, 12, _metadata([])).brokers


def test_new_clients_are_served_once_stuck_connections_time_out(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(max_connections=20, partial_request_timeout_ms=500)
    stuck = [_half_frame(broker.bootstrap_servers) for _ in range(20)]
    try:
        assert _eventually(lambda: broker.connection_count == 20)
        with RawClient(broker.bootstrap_servers) as refused:
            assert refused.is_closed_by_peer(timeout=5)

        def served() -> bool:
            try:
                with RawClient(broker.bootstrap_servers, timeout=2) as client:
                    return bool(client.request(METADATA, 12, _metadata([])).brokers)
            except (ConnectionError, OSError):
                return False

        assert _eventually(served, timeout=10)
    finally:
        for sock in stuck:
            sock.close()


# --- one request at a time ---


def test_many_pipelined_requests_are_all_answered_in_order(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with()
    with RawClient(broker.bootstrap_servers) as client:
        request = _metadata([])
        client.send_bytes(b"".join(encode(METADATA, 12, request, i) for i in range(1, 2001)))
        ids = [client.receive(METADATA, 12)[0] for _ in range(2000)]
    assert ids == list(range(1, 2001))


def test_a_long_poll_ends_when_its_client_disconnects(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with()
    broker.create_topic("quiet", partitions=2)
    servers = broker.nodes
    log = _log(broker, "quiet", 0)
    client = RawClient(broker.bootstrap_servers)
    client.send(
        FETCH,
        12,
        fetch_request("quiet", [0, 0, 0], version=12, max_wait=datetime.timedelta(seconds=60)),
    )
    assert _eventually(lambda: sum(s.waiters.waiting(log) for s in servers) == 1)
    client.close()
    assert _eventually(lambda: sum(s.waiters.waiting(log) for s in servers) == 0)


def test_an_append_answers_the_fetch_waiting_on_that_partition_only(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with()
    broker.create_topic("two", partitions=2)
    with (
        RawClient(broker.bootstrap_servers) as first,
        RawClient(broker.bootstrap_servers) as second,
        RawClient(broker.bootstrap_servers) as producer,
    ):
        first.send(
            FETCH,
            12,
            fetch_request("two", [0], version=12, max_wait=datetime.timedelta(seconds=30)),
        )
        second.send(
            FETCH,
            12,
            fetch_request("two", [1], version=12, max_wait=datetime.timedelta(seconds=30)),
        )
        servers = list(broker.nodes)
        logs = [_log(broker, "two", 0), _log(broker, "two", 1)]
        assert _eventually(lambda: all(sum(s.waiters.waiting(lg) for s in servers) for lg in logs))
        producer.request(PRODUCE, 9, _produce("two", 0, b"wake"))
        _, answer = first.receive(FETCH, 12)
        assert answer.responses[0].partitions[0].records
        assert sum(s.waiters.waiting(logs[1]) for s in servers) == 1


def _log(broker: Broker, topic: str, partition: int) -> PartitionLog:
    found = broker.state.topics.get(topic)
    assert found is not None
    return found.partitions[partition].log


# --- fetch limits ---


def test_a_partition_listed_many_times_is_fetched_once(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with()
    broker.create_topic("repeat", partitions=1)
    with RawClient(broker.bootstrap_servers) as client:
        client.request(PRODUCE, 9, _produce("repeat", 0, b"x" * 100, count=10))
        answer = client.request(FETCH, 12, fetch_request("repeat", [0] * 500, version=12))
    (topic,) = answer.responses
    (partition,) = topic.partitions
    assert [r.value for r in records.iter_records(bytes(partition.records))] == [b"x" * 100] * 10


def test_fetch_max_bytes_caps_a_response_that_asks_for_more(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(fetch_max_bytes=3000)
    broker.create_topic("capped", partitions=4)
    with RawClient(broker.bootstrap_servers) as client:
        for partition in range(4):
            for _ in range(5):
                client.request(PRODUCE, 9, _produce("capped", partition, b"y" * 400))
        answer = client.request(
            FETCH, 12, fetch_request("capped", [0, 1, 2, 3], version=12, max_bytes=50 << 20)
        )
    sizes = [len(p.records or b"") for p in answer.responses[0].partitions]
    assert 0 < sum(sizes) <= 3000
    assert sizes[0] > 0  # the first partition still makes progress


# --- creation limits ---


def test_a_request_may_create_only_max_partitions_per_request(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(max_partitions_per_request=10)
    with RawClient(broker.bootstrap_servers) as client:
        answer = client.request(CREATE_TOPICS, 5, _create_topics({"a": 6, "b": 6, "c": 4}))
    codes = {t.name: t.error_code for t in answer.topics}
    assert codes == {
        "a": ErrorCode.none,
        "b": ErrorCode.policy_violation,
        "c": ErrorCode.none,
    }
    assert broker.state.topics.get("b") is None
    assert "max_partitions_per_request" in (answer.topics[1].error_message or "")


def test_the_broker_holds_at_most_max_partitions_per_broker(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(max_partitions_per_broker=30)
    with RawClient(broker.bootstrap_servers) as client:
        first = client.request(CREATE_TOPICS, 5, _create_topics({"big": 25}))
        second = client.request(CREATE_TOPICS, 5, _create_topics({"more": 10}))
    assert first.topics[0].error_code == ErrorCode.none
    assert second.topics[0].error_code == ErrorCode.policy_violation
    assert broker.state.topics.partition_count == 25


def test_metadata_auto_creates_only_what_one_request_may(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with(max_partitions_per_request=3)
    names = [f"auto-{i}" for i in range(5)]
    with RawClient(broker.bootstrap_servers) as client:
        answer = client.request(METADATA, 12, _metadata(names, create=True))
    codes = [t.error_code for t in answer.topics]
    assert codes == [ErrorCode.none] * 3 + [ErrorCode.policy_violation] * 2
    assert sorted(n for n in broker.state.topics.names() if n.startswith("auto-")) == names[:3]


# --- Metadata entries encoded once ---


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_answers_are_the_bytes_kio_would_write(
    broker_with: Callable[..., Broker], version: int
) -> None:
    broker = broker_with()
    for index in range(3):
        broker.create_topic(f"enc-{index}", partitions=index + 1)
    wanted = None if version else []
    with RawClient(broker.bootstrap_servers) as client:
        for _ in range(2):  # the second answer comes from the cached entries
            correlation_id = client.send(METADATA, version, _metadata(wanted, version=version))
            frame = client.recv_frame()
            assert frame is not None
            got, body = messages.decode_response(frame, METADATA, version)
            assert got == correlation_id
            assert sorted(t.name for t in body.topics) == ["enc-0", "enc-1", "enc-2"]
            assert messages.encode_response(correlation_id, body)[4:] == frame


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_answers_are_the_bytes_kio_would_write(
    broker_with: Callable[..., Broker], version: int
) -> None:
    broker = broker_with(max_partitions_per_request=5)
    broker.create_topic("exists")
    specs = {"fine": 2, "exists": 1, "bad name!": 1, "refused": 4, "also-refused": 9}
    with RawClient(broker.bootstrap_servers) as client:
        correlation_id = client.send(CREATE_TOPICS, version, _create_topics(specs, version))
        frame = client.recv_frame()
    assert frame is not None
    got, body = messages.decode_response(frame, CREATE_TOPICS, version)
    assert got == correlation_id
    codes = {t.name: t.error_code for t in body.topics}
    assert codes == {
        "fine": ErrorCode.none,
        "exists": ErrorCode.topic_already_exists,
        "bad name!": ErrorCode.invalid_topic_exception,
        "refused": ErrorCode.policy_violation,
        "also-refused": ErrorCode.policy_violation,
    }
    assert messages.encode_response(correlation_id, body)[4:] == frame


def test_string_variants_match_kio_for_any_name() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    for version in range(2, 8):
        module = messages.response_module(CREATE_TOPICS, version)
        template = messages.build(
            module.CreatableTopicResult,
            name="",
            topic_id=None,
            error_code=ErrorCode.policy_violation,
            error_message="refused",
            topic_config_error_code=0,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )
        variants = messages.StringVariants(template, "name")

        @given(st.text(max_size=300))
        def same_bytes(name: str) -> None:
            entity = dataclasses.replace(template, name=name)  # noqa: B023
            assert variants.encode(name) == messages.encode_entity(entity)  # noqa: B023

        same_bytes()


# --- client-given names longer than a legacy string can carry back ---

LONG = "n" * 32_767  # the longest legacy (int16-length) string


def test_long_names_are_answered_with_errors_not_dropped_connections(
    broker_with: Callable[..., Broker],
) -> None:
    broker = broker_with()
    with RawClient(broker.bootstrap_servers) as client:
        created = client.request(CREATE_TOPICS, 3, _create_topics({LONG: 1}, version=3))
        assert created.topics[0].error_code == ErrorCode.invalid_topic_exception
        produced = client.request(PRODUCE, 8, _produce(LONG, 0, b"x", version=8))
        assert produced.responses[0].partition_responses[0].error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        resource = make(
            32,
            1,
            "DescribeConfigsResource",
            resource_type=2,
            resource_name=LONG,
            configuration_keys=None,
        )
        described = client.call(32, 1, resources=(resource,), include_synonyms=False)
        assert described.results[0].error_code == ErrorCode.unknown_topic_or_partition
        grown = client.call(
            CREATE_PARTITIONS,
            1,
            topics=(
                make(
                    CREATE_PARTITIONS,
                    1,
                    "CreatePartitionsTopic",
                    name=LONG,
                    count=2,
                    assignments=None,
                ),
            ),
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
        )
        assert grown.results[0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize(("version", "instance_id", "client_id"), [(5, LONG, "c"), (0, None, LONG)])
def test_a_long_member_id_prefix_is_cut_so_the_group_stays_describable(
    broker_with: Callable[..., Broker], version: int, instance_id: str | None, client_id: str
) -> None:
    broker = broker_with()
    protocol = make(11, version, "JoinGroupRequestProtocol", name="range", metadata=b"")
    join = make_request(
        11,
        version,
        group_id="g",
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocols=(protocol,),
    )
    with RawClient(broker.bootstrap_servers, client_id=client_id) as client:
        joined = client.request(11, version, join)
        assert joined.error_code == ErrorCode.none
        assert len(joined.member_id) < 1100
        described = client.call(15, 3, groups=("g",), include_authorized_operations=False)
        assert described.groups[0].error_code == ErrorCode.none
