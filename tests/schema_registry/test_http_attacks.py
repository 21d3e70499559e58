"""The Schema Registry's HTTP surface under bad input, against a broker in a child process.

Each test sends one kind of bad traffic to `python -m minibroker --schema-registry-port 0`
and then checks what another user would notice: the process is alive, the registry still
registers and serves a schema, and a Kafka client still produces and consumes. What the bad
request itself gets is checked against Confluent's behaviour where Confluent defines it
(rest-utils: malformed JSON 400, unknown route 404, wrong method 405, bodies
{"error_code", "message"}) and against the registry's documented limits otherwise
(headers over 64 KiB: 431, bodies over schema_registry_max_body_bytes, 16 MiB by
default: 413), or a closed connection. Never a 5xx, a traceback or a stalled server.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.child_broker import ChildBroker
from minibroker.testing.clients import KafkaHelper
from tests.raw_http import Answer, exchange
from tests.schema_registry.conftest import RawHttp

# Registering needs the Avro schema type and the compatibility rules.

MAX_BODY = 16 * 1024 * 1024  # schema_registry_max_body_bytes' default
MAX_HEADERS = 64 * 1024
_URL = re.compile(r"schema\.registry\.url=(\S+)")
_BOOTSTRAP = re.compile(r"bootstrap\.servers=(\S+)")
SCHEMA = json.dumps({"type": "record", "name": "Health", "fields": [{"name": "a", "type": "int"}]})


@dataclass
class Registry:
    child: ChildBroker
    url: str
    bootstrap: str
    kafka: KafkaHelper
    output: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port


def _start() -> Registry:
    child = ChildBroker(schema_registry_port=0).launch()
    process = child.process
    assert process is not None and process.stdout is not None and process.stderr is not None
    url = bootstrap = ""
    deadline = time.monotonic() + 30
    lines: list[str] = []
    # Both addresses are printed on lines of their own, in whichever order.
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
        raise RuntimeError(
            f"the child broker printed no registry URL: {lines} {child.stderr_text()}"
        )
    registry = Registry(child, url, bootstrap, KafkaHelper(bootstrap), lines)
    # Drained, so that a chatty log never fills a pipe and blocks the child's event loop.
    for stream in (process.stdout, process.stderr):
        threading.Thread(target=_drain, args=(stream, registry.output), daemon=True).start()
    return registry


def _drain(stream: Any, into: list[str]) -> None:
    with contextlib.suppress(ValueError, OSError):
        for line in stream:
            into.append(line)


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    started = _start()
    try:
        yield started
    finally:
        started.kafka.close()
        started.child.stop()


def _assert_still_serving(registry: Registry) -> None:
    """The registry registers and serves a schema, and Kafka clients are served."""
    assert registry.child.alive(), "".join(registry.output[-20:])
    subject = f"health-{uuid.uuid4().hex[:8]}"
    with RawHttp(registry.url, timeout=10) as http:
        registered = http.post(f"/subjects/{subject}/versions", json_body={"schema": SCHEMA})
        assert registered.status_code == 200, registered.text
        assert http.get(f"/schemas/ids/{registered.json()['id']}").status_code == 200
    topic = f"health-{uuid.uuid4().hex[:8]}"
    registry.kafka.produce(topic, [b"still here"])
    assert [r.value for r in registry.kafka.consume(topic, 1, decode_as="bytes")] == [b"still here"]


def _exchange(registry: Registry, *parts: bytes, timeout: float = 10.0) -> Answer:
    return exchange(registry.port, *parts, timeout=timeout)


def _assert_refused_or_closed(answer: Answer, *statuses: int) -> None:
    assert answer.status is None or answer.status in statuses, (answer.status, answer.body[:300])
    if answer.status is not None and answer.status >= 400 and answer.body:
        answer.error_body()


# --- the request line and headers --------------------------------------------------------


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /subjects HTTP/9.9\r\nHost: x\r\n\r\n",
    b"\x00\x01\x02\xff\xfe\r\n\r\n",
    b"GET /subjects HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
    b"POST /subjects/x/versions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"POST /subjects/x/versions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"POST /subjects/x/versions HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"POST /subjects/x/versions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /subjects HTTP/1.1\r\n" + b"Host: x\r\n" * 3 + b"\r\n\r\n\r\n\x16\x03\x01",
]


def test_malformed_requests_get_400_or_a_closed_connection(registry: Registry) -> None:
    for request in MALFORMED:
        answer = _exchange(registry, request)
        # The last one is a valid request followed by junk: the request itself is answered.
        _assert_refused_or_closed(answer, 200, 400)
    _assert_still_serving(registry)


def test_headers_over_64_kib_get_431(registry: Registry) -> None:
    # Under the limit, many headers are fine.
    under = b"".join(b"X-H%d: %s\r\n" % (n, b"u" * 1000) for n in range(40))
    answer = _exchange(
        registry, b"GET /subjects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", under, b"\r\n"
    )
    assert answer.status == 200, answer
    one_big = b"X-Big: " + b"a" * (MAX_HEADERS + 1024) + b"\r\n"
    many = b"".join(b"X-H%d: %s\r\n" % (n, b"b" * 1000) for n in range(80))
    for headers in (one_big, many):
        answer = _exchange(registry, b"GET /subjects HTTP/1.1\r\nHost: x\r\n", headers, b"\r\n")
        _assert_refused_or_closed(answer, 431)
    # A request line longer than the limit is one more header block too long. (Sent at
    # once, a block a little over the limit can arrive whole in one read and be parsed
    # before the limit is checked; four times the limit cannot.)
    long_path = b"GET /subjects/" + b"p" * (4 * MAX_HEADERS) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    _assert_refused_or_closed(_exchange(registry, long_path), 414, 431, 400)
    _assert_still_serving(registry)


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(registry: Registry) -> None:
    head = (
        b"POST /subjects/big/versions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1)
    )
    answer = _exchange(registry, head)
    assert answer.status == 413, answer
    answer.error_body()
    _assert_still_serving(registry)


def test_a_chunked_body_over_the_limit_is_refused(registry: Registry) -> None:
    chunk = b"a" * (1024 * 1024)
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    head = (
        b"POST /subjects/big/versions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    answer = _exchange(registry, head, *[framed] * 17, b"0\r\n\r\n")
    _assert_refused_or_closed(answer, 413)
    _assert_still_serving(registry)


def test_a_body_just_under_the_limit_is_read_and_refused_as_a_bad_schema(
    registry: Registry,
) -> None:
    body = json.dumps({"schema": "x" * (MAX_BODY - 100)}).encode()
    assert len(body) <= MAX_BODY
    with RawHttp(registry.url, timeout=30) as http:
        answer = http.post(
            "/subjects/almost-too-big/versions",
            content=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json()["error_code"] == 42201
    _assert_still_serving(registry)


# --- slow and idle clients ----------------------------------------------------------------


def test_slowloris_clients_do_not_starve_others(registry: Registry) -> None:
    socks = [socket.create_connection(("127.0.0.1", registry.port), timeout=5) for _ in range(50)]
    stop = threading.Event()

    def dribble() -> None:
        request = b"POST /subjects/slow/versions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 1000
        for byte_at in range(len(request)):
            if stop.is_set():
                return
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.send(request[byte_at : byte_at + 1])
            time.sleep(0.05)

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        time.sleep(0.5)
        for _ in range(3):
            _assert_still_serving(registry)
    finally:
        stop.set()
        dribbler.join(5)
        for sock in socks:
            sock.close()


def test_many_idle_connections_do_not_starve_others(registry: Registry) -> None:
    idle = []
    try:
        for _ in range(400):
            idle.append(socket.create_connection(("127.0.0.1", registry.port), timeout=5))
        # Half of them stop half-way through a request.
        for sock in idle[::2]:
            sock.sendall(b"GET /subjects HTTP/1.1\r\nHost:")
        _assert_still_serving(registry)
    finally:
        for sock in idle:
            sock.close()
    _assert_still_serving(registry)


def _answers_until_closed(data: bytes) -> list[tuple[int, bytes]]:
    """Split a stream of HTTP responses (each with a Content-Length) into (status, body)."""
    answers = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        answers.append((int(lines[0].split()[1]), rest[:length]))
        data = rest[length:]
    return answers


def test_pipelined_requests_are_answered_in_order(registry: Registry) -> None:
    requests = (
        b"GET /schemas/types HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    received = b""
    with socket.create_connection(("127.0.0.1", registry.port), timeout=10) as sock:
        sock.sendall(requests)
        while chunk := sock.recv(65536):
            received += chunk
    answers = _answers_until_closed(received)
    assert [status for status, _ in answers] == [200, 404, 200], received[:500]
    assert json.loads(answers[2][1])["compatibilityLevel"] == "BACKWARD"


def test_an_http_1_0_request_is_answered_and_closed(registry: Registry) -> None:
    received = b""
    with socket.create_connection(("127.0.0.1", registry.port), timeout=10) as sock:
        sock.sendall(b"GET /schemas/types HTTP/1.0\r\n\r\n")
        while chunk := sock.recv(65536):
            received += chunk
    ((status, body),) = _answers_until_closed(received)
    assert status == 200 and sorted(json.loads(body)) == ["AVRO", "JSON", "PROTOBUF"]


def test_expect_100_continue_is_answered_before_the_body(registry: Registry) -> None:
    """curl sends `Expect: 100-continue` with bodies over 1 KiB; Jetty, under Confluent's
    registry, answers `100 Continue` before it reads the body (RFC 9110, 10.1.1). A server
    that stays silent makes every such client wait out its own timeout first."""
    body = json.dumps({"schema": SCHEMA}).encode()
    head = (
        b"POST /subjects/continue/versions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        b"Expect: 100-continue\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    # A bound on a wait that a conforming server ends at once, not a timing measured.
    with socket.create_connection(("127.0.0.1", registry.port), timeout=3) as sock:
        sock.sendall(head)
        try:
            interim = sock.recv(65536)
        except TimeoutError:
            interim = b"(nothing within 3 s)"
        assert interim.startswith(b"HTTP/1.1 100"), interim[:200]
        sock.sendall(body)
        received = interim.partition(b"\r\n\r\n")[2]
        while chunk := sock.recv(65536):
            received += chunk
    ((status, answer),) = _answers_until_closed(received)
    assert status == 200 and isinstance(json.loads(answer)["id"], int)


# --- paths, routes and methods ------------------------------------------------------------


def test_non_utf8_paths_get_a_confluent_error(registry: Registry) -> None:
    for path in (b"/subjects/\xff\xfe/versions", b"/subjects/%ff%fe/versions", b"/schemas/ids/%00"):
        answer = _exchange(
            registry, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert answer.status is not None and 400 <= answer.status < 500, (path, answer)
        answer.error_body()
    _assert_still_serving(registry)


def test_unknown_routes_and_methods_get_confluent_bodies(registry: Registry) -> None:
    with RawHttp(registry.url, timeout=10) as http:
        for path in ("/nope", "/subjects/x/versions/1/extra", "/schemas/ids/1/nothing"):
            answer = http.get(path)
            assert (answer.status_code, answer.json()) == (
                404,
                {"error_code": 404, "message": "HTTP 404 Not Found"},
            ), path
        for method, path in (
            ("DELETE", "/schemas/types"),
            ("PATCH", "/subjects"),
            ("POST", "/config"),
        ):
            answer = http.request(method, path)
            assert (answer.status_code, answer.json()) == (
                405,
                {"error_code": 405, "message": "HTTP 405 Method Not Allowed"},
            ), (method, path)
            assert answer.headers["content-type"].startswith(
                "application/vnd.schemaregistry.v1+json"
            )
    brewed = _exchange(registry, b"BREW /subjects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    _assert_refused_or_closed(brewed, 400, 405, 501)
    _assert_still_serving(registry)


# --- bodies -------------------------------------------------------------------------------


NOT_AN_OBJECT = [
    b"",
    b"{",
    b"[]",
    b'"just a string"',
    b"\xff\xfe\x00{",
]
BAD_SCHEMA_REQUESTS = [
    *NOT_AN_OBJECT,
    b"null",
    b'{"schema": null}',
    b'{"schema": 5}',
    b'{"schema": {"type": "string"}}',
    b'{"schema": "\\"string\\"", "references": "nope"}',
    b'{"schema": "\\"string\\"", "references": [{"name": 1}]}',
    b'{"schema": "\\"string\\"", "schemaType": 7}',
]


@pytest.mark.parametrize(
    "path",
    [
        "/subjects/bodies/versions",
        "/subjects/bodies",
        "/compatibility/subjects/bodies/versions/latest",
        "/config",
        "/mode",
    ],
)
def test_bad_bodies_get_4xx_with_confluent_bodies(registry: Registry, path: str) -> None:
    settings_path = path in ("/config", "/mode")
    method = "PUT" if settings_path else "POST"
    with RawHttp(registry.url, timeout=10) as http:
        for body in NOT_AN_OBJECT if settings_path else BAD_SCHEMA_REQUESTS:
            answer = http.request(
                method, path, content=body, headers={"Content-Type": "application/json"}
            )
            assert 400 <= answer.status_code < 500, (
                body[:40],
                answer.status_code,
                answer.text[:300],
            )
            Answer(answer.status_code, {}, answer.content).error_body()
    _assert_still_serving(registry)


@pytest.mark.parametrize("path", ["/subjects/deep/versions", "/subjects/deep", "/config", "/mode"])
def test_deeply_nested_json_gets_400(registry: Registry, path: str) -> None:
    """Nesting deeper than a JSON parser recurses is malformed input to the client, as
    Jackson's nesting limit makes it for Confluent (400, rest-utils' JsonParseExceptionMapper)."""
    method = "PUT" if path in ("/config", "/mode") else "POST"
    with RawHttp(registry.url, timeout=10) as http:
        for body in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
            answer = http.request(
                method, path, content=body, headers={"Content-Type": "application/json"}
            )
            assert (answer.status_code, answer.json()["error_code"]) == (400, 400), answer.text
    _assert_still_serving(registry)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_request_bodies = st.one_of(
    st.binary(max_size=200),
    _json_values.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries(
        {"schema": st.one_of(st.text(max_size=50), _json_values.map(json.dumps))},
        optional={
            "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "", "X"]),
            "references": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.text(max_size=10),
                        "subject": st.text(max_size=10),
                        "version": st.integers(-2, 3),
                    }
                ),
                max_size=2,
            ),
            "compatibility": st.text(max_size=12),
            "mode": st.sampled_from(["READWRITE", "READONLY", "IMPORT", "x"]),
        },
    ).map(lambda value: json.dumps(value).encode()),
)
_targets = st.sampled_from(
    [
        ("POST", "/subjects/fuzz/versions"),
        ("POST", "/subjects/fuzz"),
        ("POST", "/compatibility/subjects/fuzz/versions/latest?verbose=true"),
        ("PUT", "/config/fuzz"),
        ("PUT", "/mode/fuzz"),
    ]
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(target=_targets, body=_request_bodies)
def test_fuzzed_bodies_never_get_a_server_error(
    registry: Registry, target: tuple[str, str], body: bytes
) -> None:
    method, path = target
    with RawHttp(registry.url, timeout=10) as http:
        answer = http.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
    assert answer.status_code < 500, (
        method,
        path,
        body[:100],
        answer.status_code,
        answer.text[:300],
    )
    if answer.status_code >= 400:
        Answer(answer.status_code, {}, answer.content).error_body()


_segments = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["latest", "-1", "0", "2147483648", "%00", "%ff", "..", "%2F"]),
    st.integers(-3, 5).map(str),
)
_paths = st.one_of(
    st.tuples(st.sampled_from(["GET", "DELETE"]), _segments).map(
        lambda pair: (pair[0], f"/subjects/{quote(pair[1], safe='%')}")
    ),
    st.tuples(st.sampled_from(["GET", "DELETE"]), _segments, _segments).map(
        lambda t: (t[0], f"/subjects/{quote(t[1], safe='%')}/versions/{quote(t[2], safe='%')}")
    ),
    st.tuples(
        st.just("GET"), _segments, st.sampled_from(["", "/schema", "/subjects", "/versions"])
    ).map(lambda t: (t[0], f"/schemas/ids/{quote(t[1], safe='%')}{t[2]}")),
    st.tuples(st.sampled_from(["GET", "DELETE"]), _segments).map(
        lambda pair: (pair[0], f"/config/{quote(pair[1], safe='%')}")
    ),
)
_queries = st.dictionaries(
    st.sampled_from(["deleted", "deletedOnly", "permanent", "normalize", "format", "subject", "x"]),
    st.one_of(st.sampled_from(["true", "False", "", "serialized"]), st.text(max_size=6)),
    max_size=3,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(target=_paths, query=_queries)
def test_fuzzed_paths_and_queries_never_get_a_server_error(
    registry: Registry, target: tuple[str, str], query: dict[str, str]
) -> None:
    method, path = target
    # Only subjects this fuzz makes up can be deleted: none of them exist.
    with RawHttp(registry.url, timeout=10) as http:
        answer = http.request(method, f"{path}?{urlencode(query)}" if query else path)
    assert answer.status_code < 500, (method, path, query, answer.status_code, answer.text[:300])
    if answer.status_code >= 400:
        Answer(answer.status_code, {}, answer.content).error_body()


def test_the_registry_is_still_serving_after_the_fuzz(registry: Registry) -> None:
    _assert_still_serving(registry)
    # Nothing above was the server's own failure: no traceback in the broker's log.
    log = "".join(registry.output)
    assert "Traceback" not in log, log[-3000:]
