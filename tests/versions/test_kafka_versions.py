"""`Broker(kafka_version=...)`: the broker advertises and serves only the API versions that
Kafka release's brokers served, and clients that probe the broker's version see it."""

from __future__ import annotations

import importlib.util
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.raw_client import RawClient, encode, make_request
from minibroker import Broker
from minibroker.protocol.kafka_releases import RELEASES

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "kafka" / "request-versions.json"
API_VERSIONS, METADATA, OFFSET_COMMIT, PRODUCE = 18, 3, 8, 0
DESCRIBE_TOPIC_PARTITIONS = 75
END_TXN, TXN_OFFSET_COMMIT = 26, 28
UNSUPPORTED_VERSION = 35
KAFKA_PYTHON_NEWEST = (4, 0)  # the newest release kafka-python's version probe tells apart


def advertised(broker: Broker, version: int = 3) -> dict[int, tuple[int, int]]:
    with RawClient(broker.bootstrap_servers) as client:
        answer = client.call(
            API_VERSIONS, version, client_software_name="t", client_software_version="1"
        )
    assert answer.error_code.value == 0
    return {int(k.api_key): (k.min_version, k.max_version) for k in answer.api_keys}


@pytest.fixture(scope="module")
def unrestricted() -> dict[int, tuple[int, int]]:
    with Broker() as broker:
        return advertised(broker)


@pytest.mark.parametrize("release", list(RELEASES))
def test_each_api_is_advertised_as_far_as_both_the_release_and_minibroker_serve_it(
    release: str, unrestricted: dict[int, tuple[int, int]]
) -> None:
    served = RELEASES[release]
    expected = {
        key: (max(low, served[key][0]), min(high, served[key][1]))
        for key, (low, high) in unrestricted.items()
        if key in served and max(low, served[key][0]) <= min(high, served[key][1])
    }
    with Broker(kafka_version=release) as broker:
        assert advertised(broker) == expected


def test_known_release_facts_hold() -> None:
    """A few facts about the releases, from their notes, anchoring the derived table."""
    with Broker(kafka_version="2.8") as broker:
        old = advertised(broker)
    # KIP-966's DescribeTopicPartitions came with 3.8
    assert DESCRIBE_TOPIC_PARTITIONS not in old
    assert old[API_VERSIONS] == (0, 3)
    with Broker(kafka_version="4.0") as broker:
        new = advertised(broker)
    # KIP-896: Kafka 4.0 removed Produce v0-2 and OffsetCommit v0-1
    assert new[PRODUCE][0] == 3 and new[OFFSET_COMMIT][0] == 2


SHARE_GROUP_APIS = {76, 77, 90, 91, 92}  # membership and offsets of share groups (KIP-932)


@pytest.mark.parametrize(
    ("release", "served"), [("3.9", False), ("4.0", False), ("4.2", True), ("4.4", True)]
)
def test_share_groups_are_advertised_from_kafka_4_2(release: str, served: bool) -> None:
    """Share groups are generally available from Kafka 4.2: an emulated 4.0 or 3.9 broker
    advertises none of their APIs, a 4.2 or 4.4 one all that minibroker serves."""
    with Broker(kafka_version=release) as broker:
        listed = advertised(broker)
    assert (set(listed) >= SHARE_GROUP_APIS) is served
    assert bool(SHARE_GROUP_APIS & set(listed)) is served
    if served:
        assert listed[76] == (1, 1)


def test_a_version_the_release_did_not_serve_closes_the_connection() -> None:
    with Broker(kafka_version="2.8") as old, Broker() as unrestricted:
        newest = RELEASES["2.8"][METADATA][1]
        request = make_request(
            METADATA,
            newest + 1,
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        with RawClient(unrestricted.bootstrap_servers) as client:
            assert client.request(METADATA, newest + 1, request).brokers
        with RawClient(old.bootstrap_servers) as client:
            client.sock.sendall(encode(METADATA, newest + 1, request, correlation_id=5))
            assert client.sock.recv(1) == b""  # closed, as Kafka 2.8 closes it
        outcomes = [(r.api, r.version, r.outcome) for r in old.recent_requests()]
        assert ("Metadata", newest + 1, "closed: unsupported") in outcomes


def test_api_versions_above_the_releases_gets_unsupported_version_with_its_range() -> None:
    with (
        Broker(kafka_version="2.8") as broker,
        socket.create_connection((broker.host, broker.port), timeout=10) as sock,
    ):
        # ApiVersions v4 (newer than 2.8's v3): header v2, empty body but tags
        body = b"\x00\x12\x00\x04\x00\x00\x00\x07\x00\x01t\x00" + b"\x02t\x021\x00"
        sock.sendall(len(body).to_bytes(4, "big") + body)
        answer = _read_frame(sock)
    # correlation id, then the v0 layout: error code, [api key, min, max]
    assert answer[:4] == (7).to_bytes(4, "big")
    assert int.from_bytes(answer[4:6], "big") == UNSUPPORTED_VERSION
    assert answer[6:10] == (1).to_bytes(4, "big")
    assert answer[10:16] == bytes([0, API_VERSIONS, 0, 0, 0, 3])


def _read_frame(sock: socket.socket) -> bytes:
    size = int.from_bytes(_read(sock, 4), "big")
    return _read(sock, size)


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


@pytest.mark.parametrize("release", list(RELEASES))
def test_kafka_pythons_version_probe_sees_the_release(release: str) -> None:
    from kafka import KafkaAdminClient

    with Broker(kafka_version=release) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            probed: Any = admin._client.check_version()
        finally:
            admin.close()
    # kafka-python's probe knows releases up to 4.0: a newer one is seen as 4.0.
    assert probed == min(tuple(int(part) for part in release.split(".")), KAFKA_PYTHON_NEWEST)


def test_an_unknown_release_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("kafka_version='2.7': must be one of 2.8, 3.0")):
        Broker(kafka_version="2.7")


@pytest.mark.skipif(not SHARED_DATA.is_file(), reason=f"{SHARED_DATA} is not here")
def test_the_table_is_what_kafkas_definitions_give() -> None:
    """Kafka 2.8 to 3.9 as tools/kafka_versions.py derives them from Kafka's message
    definitions (4.0 needs its Java client: `python tools/kafka_versions.py --check`)."""
    spec = importlib.util.spec_from_file_location(
        "kafka_versions", ROOT / "tools" / "kafka_versions.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec.loader.exec_module(tool)
    finally:
        sys.path.remove(str(ROOT / "tools"))
    for line, release in tool.FROM_DATA.items():
        assert tool.from_data(release) == RELEASES[line], line


@pytest.mark.parametrize(
    ("release", "finalized"),
    [
        ("3.9", {}),
        ("4.0", {"transaction.version": 2, "group.version": 1}),
        (None, {"transaction.version": 2, "group.version": 1}),
    ],
)
def test_kafka_4_transactions_are_advertised_from_4_0_only(
    release: str | None, finalized: dict[str, int]
) -> None:
    """transaction.version 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5) is finalized as
    Kafka 4.x finalizes it for a new cluster; a Kafka 3.x emulation lists no feature and
    closes the connection on those versions, as Kafka 3.9 does."""
    with Broker(kafka_version=release) as broker:
        with RawClient(broker.bootstrap_servers) as client:
            answer = client.call(
                API_VERSIONS, 4, client_software_name="t", client_software_version="1"
            )
        levels = {f.name: f.max_version_level for f in answer.finalized_features}
        assert levels == finalized
        assert (answer.finalized_features_epoch >= 0) == bool(finalized)
        ranges = {k.api_key: k.max_version for k in answer.api_keys}
        newest = (ranges[PRODUCE], ranges[END_TXN], ranges[TXN_OFFSET_COMMIT])
        assert newest == ((12, 5, 5) if finalized else (11, 4, 4))
        if not finalized:
            request = make_request(
                END_TXN, 5, transactional_id="t", producer_id=1, producer_epoch=0, committed=True
            )
            with RawClient(broker.bootstrap_servers) as client:
                client.sock.sendall(encode(END_TXN, 5, request, correlation_id=5))
                assert client.sock.recv(1) == b""  # closed, as Kafka 3.9 closes it
