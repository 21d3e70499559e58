"""An HTTP/1.1 listener (the edge) for the Schema Registry and the console: h11's state
machine over asyncio streams, answering through one `answer(request)` callback.

Limits, each answered before any work is done: a request head over 64 KiB gets 431, a
body over `max_body_bytes` gets 413, a request not complete
within 30 s (slow senders included) and a connection idle for 30 s are closed, and
connections beyond 1,024 are closed on accept. A request that is not HTTP gets 400 and
its connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11

log = logging.getLogger("minibroker.http")

MAX_HEAD_BYTES = 64 * 1024
REQUEST_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str
    body: bytes
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()


Answer = Callable[[Request], Awaitable[Response]]


def error_body(status: int, message: str) -> bytes:
    return json.dumps({"error_code": status, "message": message}).encode()


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpServer:
    def __init__(
        self,
        answer: Answer,
        host: str,
        port: int,
        max_body_bytes: int,
        *,
        error_content_type: str = JSON,
        name: str = "the HTTP listener",
    ) -> None:
        self._answer = answer
        self._error_content_type = error_content_type
        self._name = name
        self._host = host
        self._port = port
        self._max_body = max_body_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._connections):
                writer.close()  # the connection's read ends; cancelling it would log an error
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._connections.add(writer)
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            while True:
                try:
                    async with asyncio.timeout(REQUEST_TIMEOUT_S):
                        request = await self._read_request(connection, reader, writer)
                except TimeoutError:
                    return
                if request is None:
                    return
                try:
                    response = await self._answer(request)
                except Exception:
                    log.exception("%s failed on %s %s", self._name, request.method, request.target)
                    response = self._error(500, "Internal Server Error")
                await self._send(connection, writer, response, head=request.method == "HEAD")
                if connection.our_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
        except _Refused as refusal:
            with contextlib.suppress(Exception):
                if connection.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    refused = self._error(refusal.status, str(refusal))
                    await self._send(connection, writer, refused, close=True)
        except (ConnectionError, h11.LocalProtocolError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _error(self, status: int, message: str) -> Response:
        return Response(status, error_body(status, message), self._error_content_type)

    async def _read_request(
        self, connection: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        method = target = ""
        headers: dict[str, str] = {}
        body = bytearray()
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as exc:
                too_long = "too long" in str(exc) or "larger than" in str(exc)
                raise _Refused(431 if too_long else 400, f"Bad request: {exc}") from exc
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data and connection.their_state is h11.IDLE:
                    return None
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                method = event.method.decode("ascii", "replace")
                target = event.target.decode("latin-1")
                headers = {
                    name.decode("latin-1").lower(): value.decode("latin-1")
                    for name, value in event.headers
                }
                length = headers.get("content-length")
                if length is not None and int(length) > self._max_body:
                    raise _Refused(413, f"The request body is over {self._max_body} bytes")
                if connection.they_are_waiting_for_100_continue:
                    writer.write(
                        connection.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_body:
                    raise _Refused(413, f"The request body is over {self._max_body} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return Request(method, target, bytes(body), headers)
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _send(
        self,
        connection: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Response,
        *,
        close: bool = False,
        head: bool = False,
    ) -> None:
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers,
        ]
        if close:
            headers.append(("Connection", "close"))
        writer.write(connection.send(h11.Response(status_code=response.status, headers=headers)))
        if not head:  # a HEAD answer has the headers of a GET and no body
            writer.write(connection.send(h11.Data(data=response.body)))
        writer.write(connection.send(h11.EndOfMessage()))
        await writer.drain()
