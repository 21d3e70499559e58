"""ApiVersions over a real socket, and what happens to requests the broker does not serve."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from minibroker import Broker
from minibroker.handlers import HANDLERS
from minibroker.protocol import messages
from tests.rawclient import RawClient, encode, make_request

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


def _registry() -> list[tuple[int, int, int]]:
    return sorted((h.api_key, h.min_version, h.max_version) for h in HANDLERS.values())


def _api_versions_request(version: int) -> object:
    return make_request(
        API_VERSIONS, version, client_software_name="rawclient", client_software_version="1.0"
    )


def _future_api_versions_frame(version: int, correlation_id: int) -> bytes:
    """An ApiVersions request at a version kio (and the broker) does not know.

    Header v2 (flexible) and a v4-shaped body, as a newer client would send it.
    """
    client_id = b"future-client"
    header = struct.pack(">hhih", API_VERSIONS, version, correlation_id, len(client_id))
    header += client_id + b"\x00"
    body = b"\x07future" + b"\x041.0" + b"\x00"  # compact strings, then no tagged fields
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_exactly_the_registry(kafka_broker: Broker, version: int) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        correlation_id = client.send(API_VERSIONS, version, _api_versions_request(version))
        frame = client.recv_frame()
        assert frame is not None
        got_id, response = messages.decode_response(frame, API_VERSIONS, version)
    assert got_id == correlation_id
    assert response.error_code == ErrorCode.none
    listed = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert listed == _registry()
    assert len({key for key, _, _ in listed}) == len(listed)
    assert (API_VERSIONS, 0, 4) in listed
    # Response header v0 at every version: the int16 error code follows the correlation
    # id directly, with no tagged-field byte in between.
    assert frame[:6] == struct.pack(">ih", correlation_id, 0)
    if version >= 3:
        assert frame[6] == len(listed) + 1  # compact array length, right after the error


def test_every_served_api_answers_at_its_advertised_bounds(kafka_broker: Broker) -> None:
    """The advertised range is real: a request at min and max version is not refused."""
    with RawClient(kafka_broker.bootstrap_servers) as client:
        body = client.request(API_VERSIONS, 3, _api_versions_request(3))
        for entry in body.api_keys:
            assert messages.request_class(entry.api_key, entry.min_version) is not None
            assert messages.request_class(entry.api_key, entry.max_version) is not None
        metadata = client.call(
            3,
            12,
            topics=(),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert metadata.brokers[0].port == kafka_broker.port


@pytest.mark.parametrize("version", [5, 127, 32767])
def test_too_new_api_versions_gets_unsupported_version_in_v0_layout(
    kafka_broker: Broker, version: int
) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        client.send_bytes(_future_api_versions_frame(version, 4242))
        frame = client.recv_frame()
        assert frame is not None
        # Header v0 and a v0 body: correlation id, error code, int32 array of
        # (key, min, max), and nothing else (no throttle time a client could misread).
        assert frame == struct.pack(">ihihhh", 4242, UNSUPPORTED_VERSION, 1, API_VERSIONS, 0, 4)
        got_id, response = messages.decode_response(frame, API_VERSIONS, 0)
        assert got_id == 4242
        assert response.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (API_VERSIONS, 0, 4)
        ]
        # The client retries at a version both know, on the same connection.
        retry = client.request(API_VERSIONS, 4, _api_versions_request(4))
        assert retry.error_code == ErrorCode.none
        assert len(retry.api_keys) == len(HANDLERS)


def test_unknown_api_key_closes_only_that_connection(kafka_broker: Broker) -> None:
    with (
        RawClient(kafka_broker.bootstrap_servers) as bystander,
        RawClient(kafka_broker.bootstrap_servers) as offender,
    ):
        assert bystander.call(API_VERSIONS, 2).error_code == ErrorCode.none
        unknown = struct.pack(">hhih", 9999, 0, 1, -1)
        offender.send_bytes(struct.pack(">i", len(unknown)) + unknown)
        assert offender.is_closed_by_peer()
        assert bystander.call(API_VERSIONS, 2).error_code == ErrorCode.none


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (3, 14),  # Metadata above the served range, unknown to kio too
        (3, 99),
        (0, 2),  # Produce below the served range (legacy message format)
        (1, 3),  # Fetch below the served range
        (18, -1),
    ],
)
def test_unsupported_version_of_another_api_closes_only_that_connection(
    kafka_broker: Broker, api_key: int, version: int
) -> None:
    with (
        RawClient(kafka_broker.bootstrap_servers) as bystander,
        RawClient(kafka_broker.bootstrap_servers) as offender,
    ):
        assert bystander.call(3, 4, topics=None).brokers
        request = messages.request_class(api_key, version)
        if request is not None:
            frame = encode(api_key, version, messages.build(request, topics=(), topic_data=()), 1)
        else:
            raw = struct.pack(">hhih", api_key, version, 1, -1) + b"\x00" * 8
            frame = struct.pack(">i", len(raw)) + raw
        offender.send_bytes(frame)
        assert offender.is_closed_by_peer()
        assert bystander.call(3, 4, topics=None).brokers
        assert bystander.call(API_VERSIONS, 0).error_code == ErrorCode.none
    assert any(
        r.version == version and "closed" in r.outcome for r in kafka_broker.recent_requests()
    )


def test_requests_on_one_connection_are_answered_in_order(kafka_broker: Broker) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        ids = [client.send(API_VERSIONS, v % 5, _api_versions_request(v % 5)) for v in range(20)]
        got = []
        for v in range(20):
            correlation_id, body = client.receive(API_VERSIONS, v % 5)
            assert body.error_code == ErrorCode.none
            got.append(correlation_id)
        assert got == ids
