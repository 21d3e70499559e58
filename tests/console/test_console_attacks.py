"""The console's HTTP surface under bad input, against a broker in a child process.

`python -m minibroker --console-port 0` with SASL users (so every request needs HTTP Basic
auth) gets malformed requests, huge bodies, slow clients and requests without or with
wrong credentials. Each is refused (4xx) or its connection closed, and afterwards the
process is alive, the console answers a signed-in request, and Kafka clients produce and
consume. Never a 5xx, a traceback or a stalled server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from harness.child_broker import ChildBroker
from minibroker.testing.clients import KafkaHelper
from tests.raw_http import Answer, exchange, read_answer

_URL = re.compile(r"console\.url=(\S+)")
_BOOTSTRAP = re.compile(r"bootstrap\.servers=(\S+)")
MAX_BODY = 1024 * 1024
MAX_HEAD = 64 * 1024
AUTH = "Basic " + base64.b64encode(b"alice:secret").decode()


@dataclass
class Console:
    child: ChildBroker
    port: int
    kafka: KafkaHelper
    output: list[str] = field(default_factory=list)


def _drain(stream: Any, into: list[str]) -> None:
    with contextlib.suppress(ValueError, OSError):
        for line in stream:
            into.append(line)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    users = Path(tmp_path_factory.mktemp("console")) / "users.toml"
    users.write_text('[users]\nalice = "secret"\n')
    child = ChildBroker(console_port=0, sasl_users_file=str(users)).launch()
    process = child.process
    assert process is not None and process.stdout is not None and process.stderr is not None
    url = bootstrap = ""
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while not (url and bootstrap) and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if found := _URL.search(line):
            url = found.group(1)
        elif found := _BOOTSTRAP.search(line):
            bootstrap = found.group(1)
    if not (url and bootstrap):
        child.stop()
        raise RuntimeError(f"the child broker printed no console URL: {lines}")
    # The console's line comes before the one saying the broker listens.
    assert [i for i, line in enumerate(lines) if "console.url=" in line] < [
        i for i, line in enumerate(lines) if "listening, bootstrap.servers=" in line
    ], lines
    port = urlsplit(url).port
    assert port is not None
    started = Console(child, port, KafkaHelper(bootstrap), lines)
    for stream in (process.stdout, process.stderr):
        threading.Thread(target=_drain, args=(stream, started.output), daemon=True).start()
    try:
        yield started
    finally:
        started.kafka.close()
        child.stop()


def _exchange(console: Console, *parts: bytes, timeout: float = 10.0) -> Answer:
    return exchange(console.port, *parts, timeout=timeout)


def _request(
    method: str, path: str, body: bytes = b"", auth: str | None = AUTH, **extra: str
) -> bytes:
    headers = {"Host": "127.0.0.1", "Content-Length": str(len(body)), **extra}
    if auth is not None:
        headers["Authorization"] = auth
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body


def _assert_refused(answer: Answer, *statuses: int) -> None:
    assert answer.status is None or answer.status in statuses, (answer.status, answer.body[:300])
    if answer.status is not None and answer.body:
        body = json.loads(answer.body)
        assert body["error_code"] == answer.status


def _assert_still_serving(console: Console) -> None:
    assert console.child.alive(), "".join(console.output[-20:])
    answer = _exchange(console, _request("GET", "/api/topics"))
    assert answer.status == 200, answer.body[:300]
    topic = f"health-{time.monotonic_ns()}"
    console.kafka.produce(topic, [b"still here"])
    assert [r.value for r in console.kafka.consume(topic, 1, decode_as="bytes")] == [b"still here"]
    assert not any("Traceback" in line for line in console.output), "".join(console.output[-40:])


@pytest.mark.parametrize(
    "sent",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40),  # a TLS ClientHello
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
        b"POST /api/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x00" * 1000,
    ],
    ids=["tls", "no-target", "http-9", "bad-header", "negative-length", "bad-chunk", "zeros"],
)
def test_malformed_requests_get_400_or_are_closed(console: Console, sent: bytes) -> None:
    # 421: a request naming no loopback host is refused before it is looked at further.
    _assert_refused(_exchange(console, sent), 400, 401, 421)
    _assert_still_serving(console)


def test_a_head_over_64_kib_gets_431(console: Console) -> None:
    padding = "a" * (4 * MAX_HEAD)
    _assert_refused(_exchange(console, _request("GET", "/api/topics", X_Padding=padding)), 431)
    _assert_refused(_exchange(console, _request("GET", "/api/topics?" + padding)), 431)
    _assert_still_serving(console)


def test_huge_bodies_get_413_before_they_are_read(console: Console) -> None:
    declared = _request("POST", "/api/messages", auth=AUTH).replace(
        b"Content-Length: 0", f"Content-Length: {8 * 1024**3}".encode()
    )
    _assert_refused(_exchange(console, declared), 413)
    chunk = b"%x\r\n%s\r\n" % (256 * 1024, b"x" * 256 * 1024)
    chunked = (
        b"POST /api/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
        + AUTH.encode()
        + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    _assert_refused(_exchange(console, chunked, *[chunk] * 8), 413)
    _assert_still_serving(console)


def test_slow_clients_do_not_hold_up_others(console: Console) -> None:
    slow = []
    try:
        for _ in range(64):  # each sends part of a request head and then nothing
            sock = socket.create_connection(("127.0.0.1", console.port), timeout=10)
            sock.sendall(b"GET /api/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(sock)
        for sock in slow[:8]:  # a byte at a time
            sock.sendall(b"a")
        _assert_still_serving(console)
        with socket.create_connection(("127.0.0.1", console.port), timeout=10) as sock:
            sock.sendall(b"GET /api/topics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # head unfinished
            sock.sendall(f"Authorization: {AUTH}\r\n\r\n".encode())
            assert read_answer(sock).status == 200
    finally:
        for sock in slow:
            sock.close()


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "Basic " + base64.b64encode(b"alice:wrong").decode(),
        "Basic " + base64.b64encode(b"mallory:secret").decode(),
        "Basic " + base64.b64encode(b"alice").decode(),
        "Basic !!!not-base64!!!",
        "Basic " + base64.b64encode(b"\xff\xfe:\xff").decode(),
        "Bearer alice:secret",
        "Basic",
    ],
    ids=[
        "none",
        "wrong-password",
        "unknown-user",
        "no-colon",
        "not-base64",
        "not-utf8",
        "bearer",
        "empty",
    ],
)
def test_requests_without_valid_credentials_get_401(console: Console, auth: str | None) -> None:
    for method, path in [("GET", "/"), ("GET", "/api/groups"), ("POST", "/api/topics")]:
        body = b'{"name": "sneaked"}' if method == "POST" else b""
        answer = _exchange(
            console, _request(method, path, body, auth=auth, **{"Content-Type": "application/json"})
        )
        _assert_refused(answer, 401)
        assert answer.status == 401
        assert answer.headers["www-authenticate"].startswith("Basic realm=")
    _assert_still_serving(console)


def test_writes_of_a_signed_in_user_get_403_on_a_read_only_console(console: Console) -> None:
    body = b'{"name": "sneaked"}'
    answer = _exchange(
        console, _request("POST", "/api/topics", body, **{"Content-Type": "application/json"})
    )
    assert answer.status == 403, answer.body
    answer = _exchange(console, _request("GET", "/api/topics"))
    assert b"sneaked" not in answer.body


def test_many_requests_on_one_connection_are_answered_in_order(console: Console) -> None:
    pipelined = b"".join(_request("GET", f"/api/nothing-{i}") for i in range(50))
    received = b""
    with socket.create_connection(("127.0.0.1", console.port), timeout=10) as sock:
        sock.sendall(pipelined)
        while received.count(b"HTTP/1.1 404") < 50 or not received.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, received[-300:]
            received += chunk
    named = re.findall(rb"no API /api/nothing-(\d+)", received)
    assert [int(n) for n in named] == list(range(50))


def test_a_head_request_is_answered_without_a_body_and_the_connection_kept(
    console: Console,
) -> None:
    with socket.create_connection(("127.0.0.1", console.port), timeout=10) as sock:
        sock.sendall(_request("HEAD", "/api/topics") + _request("GET", "/api/overview"))
        received = b""
        while received.count(b"HTTP/1.1 200") < 2 or not received.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, received[-300:]
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert b"content-length: " in head.lower()
    assert rest.startswith(b"HTTP/1.1 200") and b'"cluster_id"' in rest
