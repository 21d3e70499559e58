"""max_connection_creation_rate: new connections per client address, refused in accept()
once over the rate; connections already open are never touched."""

from __future__ import annotations

import socket
import struct

import pytest

from harness.raw_client import RawClient, encode, make_request, parse_host_port
from minibroker import Broker
from minibroker.connection_rate import BURST_SECONDS, TRACKED_ADDRESSES, ConnectionRate

API_VERSIONS = 18


def test_a_quiet_address_may_open_its_burst_then_the_rate() -> None:
    rate = ConnectionRate(10)
    admitted = [rate.admit("10.0.0.1", 100.0) for _ in range(10 * BURST_SECONDS + 5)]
    assert admitted.count(True) == 10 * BURST_SECONDS
    assert admitted[-5:] == [False] * 5
    # A second later it has refilled a second's worth, no more.
    later = [rate.admit("10.0.0.1", 101.0) for _ in range(12)]
    assert later.count(True) == 10


def test_addresses_have_buckets_of_their_own() -> None:
    rate = ConnectionRate(1)
    while rate.admit("10.0.0.1", 5.0):
        pass
    assert rate.admit("10.0.0.2", 5.0)
    assert not rate.admit("10.0.0.1", 5.0)


def test_no_limit_at_zero() -> None:
    rate = ConnectionRate(0)
    assert all(rate.admit("10.0.0.1", 0.0) for _ in range(10_000))
    assert len(rate) == 0


def test_refusals_are_reported_now_and_then_with_how_many() -> None:
    rate = ConnectionRate(1)
    while rate.admit("10.0.0.1", 0.0):
        pass
    assert rate.to_report("10.0.0.1", 0.0) == 1  # the first at once
    for _ in range(5):
        rate.admit("10.0.0.1", 0.0)
    assert rate.to_report("10.0.0.1", 1.0) == 0  # not again so soon
    assert rate.to_report("10.0.0.1", 20.0) == 5
    assert rate.to_report("10.0.0.2", 20.0) == 0


def test_addresses_remembered_stay_bounded() -> None:
    rate = ConnectionRate(1)
    for index in range(5 * TRACKED_ADDRESSES):
        rate.admit(f"address-{index}", index * 10.0)  # each has refilled by the next
    assert len(rate) <= TRACKED_ADDRESSES


API_VERSIONS_REQUEST = encode(
    API_VERSIONS,
    3,
    make_request(API_VERSIONS, 3, client_software_name="rate", client_software_version="1"),
    1,
)


def _api_versions_answered(address: tuple[str, int]) -> bool:
    """Whether a new connection gets its ApiVersions answered (False: it was closed)."""
    sock = socket.create_connection(address, timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    try:
        sock.sendall(API_VERSIONS_REQUEST)
        return len(sock.recv(4)) == 4
    except OSError:
        return False
    finally:
        sock.close()


def _reachable(port: int) -> tuple[str, int]:
    """The loopback address the broker's first socket answers on (every interface: the
    IPv4 and IPv6 sockets each got a port of their own)."""
    for host in ("127.0.0.1", "::1"):
        try:
            with socket.create_connection((host, port), timeout=5):
                return host, port
        except OSError:
            continue
    raise AssertionError(f"nothing listens on port {port}")


# One address: refused in accept(); every interface (two sockets): once connected.
@pytest.mark.parametrize("host", ["127.0.0.1", ""])
def test_connections_over_the_rate_are_closed_and_open_ones_kept(host: str) -> None:
    with Broker(host=host, max_connection_creation_rate=5) as broker:
        address = _reachable(parse_host_port(broker.bootstrap_servers)[1])
        with RawClient(f"{address[0]}:{address[1]}") as kept:
            served = [_api_versions_answered(address) for _ in range(5 * BURST_SECONDS + 10)]
            # The burst (less the two connections above) is served, the rest refused.
            assert served.count(True) in range(5 * BURST_SECONDS - 2, 5 * BURST_SECONDS + 1)
            assert not any(served[-5:])
            # The connection opened before the storm is still served.
            answer = kept.request(
                API_VERSIONS,
                3,
                make_request(
                    API_VERSIONS, 3, client_software_name="rate", client_software_version="1"
                ),
            )
            assert answer.error_code.value == 0
