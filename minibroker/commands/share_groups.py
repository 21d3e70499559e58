"""Share groups (KIP-932) for `minibroker groups list|describe`, asked over the wire with
the project's codec: the Python clients' admin APIs do not describe share groups.

ListGroups v5 (type "share") on every broker; FindCoordinator, ShareGroupDescribe and
DescribeShareGroupOffsets on the group's coordinator. Works with any broker that serves
them (minibroker, Kafka 4.2+), over PLAINTEXT or SSL, signing in with SASL PLAIN when the
options say so (with SCRAM, share groups are left out). A broker that does not advertise
ShareGroupDescribe has no share groups.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import ssl
import struct
import time
from typing import Any

from minibroker.commands.common import ToolError, client_settings
from minibroker.protocol import messages
from minibroker.protocol.messages import RequestHeader

API_VERSIONS, METADATA, FIND_COORDINATOR, LIST_GROUPS = 18, 3, 10, 16
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90
GROUP_ID_NOT_FOUND = 69
COORDINATOR_LOADING = (14, 15)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
CLIENT_ID = "minibroker-groups"


class WireClient:
    """One blocking connection, requests out, decoded answers in."""

    def __init__(self, address: tuple[str, int], settings: dict[str, str], timeout: float):
        self.address = address
        try:
            sock = socket.create_connection(address, timeout=timeout)
        except OSError as exc:
            raise ToolError(f"cannot reach a broker at {address[0]}:{address[1]}: {exc}") from None
        protocol = settings.get("security.protocol", "PLAINTEXT").upper()
        if protocol in ("SSL", "SASL_SSL"):
            context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
            if settings.get("ssl.certificate.location"):
                context.load_cert_chain(
                    settings["ssl.certificate.location"], settings.get("ssl.key.location")
                )
            sock = context.wrap_socket(sock, server_hostname=address[0])
        self.sock = sock
        self._ids = itertools.count(1)
        if protocol.startswith("SASL"):
            self._sign_in(settings)

    def _sign_in(self, settings: dict[str, str]) -> None:
        mechanism = settings.get("sasl.mechanism", "PLAIN").upper()
        if mechanism != "PLAIN":
            raise ToolError(
                f"share groups are described signing in with PLAIN only, not {mechanism}"
            )
        shake = self.call(SASL_HANDSHAKE, 1, mechanism=mechanism)
        if shake.error_code != 0:
            raise ToolError(f"the broker refused SASL {mechanism}")
        user = settings.get("sasl.username", "")
        password = settings.get("sasl.password", "")
        token = b"\0" + user.encode() + b"\0" + password.encode()
        answer = self.call(SASL_AUTHENTICATE, 1, auth_bytes=token)
        if answer.error_code != 0:
            raise ToolError(f"could not sign in: {answer.error_message}")

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        cls = messages.request_class(api_key, version)
        assert cls is not None
        correlation_id = next(self._ids)
        header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
        self.sock.sendall(messages.encode_request(header, messages.build(cls, **fields)))
        (size,) = struct.unpack(">i", self._read(4))
        _, body = messages.decode_response(self._read(size), api_key, version)
        return body

    def nested(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        module = messages.request_module(api_key, version)
        return messages.build(getattr(module, name), **fields)

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            try:
                chunk = self.sock.recv(count - len(data))
            except OSError as exc:
                raise ToolError(
                    f"no answer from {self.address[0]}:{self.address[1]}: {exc}"
                ) from None
            if not chunk:
                raise ToolError(f"{self.address[0]}:{self.address[1]} closed the connection")
            data += chunk
        return data


class ShareGroups:
    """The share groups of the cluster the options name."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.settings = client_settings(args)
        self.timeout: float = args.timeout
        first = self.settings["bootstrap.servers"].split(",")[0].strip()
        host, _, port = first.rpartition(":")
        self.bootstrap = (host.strip("[]"), int(port))
        self._served: bool | None = None

    def _connect(self, address: tuple[str, int]) -> WireClient:
        return WireClient(address, self.settings, self.timeout)

    def served(self) -> bool:
        """Whether the broker serves share groups (advertises ShareGroupDescribe); with a
        SASL mechanism other than PLAIN they are left out rather than refused."""
        protocol = self.settings.get("security.protocol", "PLAINTEXT").upper()
        mechanism = self.settings.get("sasl.mechanism", "PLAIN").upper()
        if protocol.startswith("SASL") and mechanism != "PLAIN":
            return False
        if self._served is None:
            client = self._connect(self.bootstrap)
            try:
                answer = client.call(
                    API_VERSIONS, 3, client_software_name="minibroker", client_software_version="1"
                )
            finally:
                client.close()
            self._served = any(k.api_key == SHARE_GROUP_DESCRIBE for k in answer.api_keys)
        return self._served

    def _brokers(self) -> list[tuple[str, int]]:
        client = self._connect(self.bootstrap)
        try:
            answer = client.call(
                METADATA,
                12,
                topics=(),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        finally:
            client.close()
        return [(b.host, b.port) for b in answer.brokers] or [self.bootstrap]

    def listed(self) -> list[dict[str, Any]]:
        """Every share group: id and state."""
        if not self.served():
            return []
        rows: list[dict[str, Any]] = []
        for address in self._brokers():
            client = self._connect(address)
            try:
                answer = client.call(LIST_GROUPS, 5, states_filter=(), types_filter=("share",))
            finally:
                client.close()
            rows.extend(
                {"group": g.group_id, "state": g.group_state, "type": "share"}
                for g in answer.groups
                if g.group_type == "share"
            )
        return sorted(rows, key=lambda r: r["group"])

    def _coordinator(self, group: str) -> tuple[int, tuple[str, int]] | None:
        """The group's coordinator, asked again while it is being loaded; None if the
        broker names none (the group is then left to the consumer-group path)."""
        deadline = time.monotonic() + self.timeout
        while True:
            client = self._connect(self.bootstrap)
            try:
                answer = client.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
            finally:
                client.close()
            [found] = answer.coordinators
            if found.error_code == 0:
                return found.node_id, (found.host, found.port)
            if found.error_code not in COORDINATOR_LOADING or time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def describe(self, group: str) -> dict[str, Any] | None:
        """Share group `group` (None when it is no share group): state, epochs, members
        and their partitions, and per partition its start offset, lag and readers."""
        if not self.served():
            return None
        coordinator = self._coordinator(group)
        if coordinator is None:
            return None
        node_id, address = coordinator
        client = self._connect(address)
        try:
            [described] = client.call(
                SHARE_GROUP_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
            ).groups
            if described.error_code == GROUP_ID_NOT_FOUND:
                return None
            if described.error_code != 0:
                raise ToolError(
                    f"group {group!r}: {described.error_message or described.error_code.name}"
                )
            asked = client.nested(
                DESCRIBE_SHARE_GROUP_OFFSETS,
                1,
                "DescribeShareGroupOffsetsRequestGroup",
                group_id=group,
                topics=None,
            )
            [offsets] = client.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=(asked,)).groups
        finally:
            client.close()
        readers: dict[tuple[str, int], list[str]] = {}
        members = []
        for m in sorted(described.members, key=lambda m: m.member_id):
            assigned = sorted(
                (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
            )
            for key in assigned:
                readers.setdefault(key, []).append(m.member_id)
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "assignment": [{"topic": t, "partition": p} for t, p in assigned],
                }
            )
        starts = {
            (t.topic_name, p.partition_index): (p.start_offset, p.lag)
            for t in offsets.topics
            for p in t.partitions
            if p.error_code == 0
        }
        partitions = []
        for topic, index in sorted(set(readers) | set(starts)):
            start, lag = starts.get((topic, index), (-1, -1))
            partitions.append(
                {
                    "topic": topic,
                    "partition": index,
                    "start_offset": start if start >= 0 else None,
                    "lag": lag if lag >= 0 else None,
                    "members": readers.get((topic, index), []),
                }
            )
        return {
            "group": group,
            "state": described.group_state,
            "type": "share",
            "protocol_type": "share",
            "assignor": described.assignor_name,
            "coordinator": node_id,
            "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch,
            "members": members,
            "partitions": partitions,
        }
