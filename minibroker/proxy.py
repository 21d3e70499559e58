"""`minibroker proxy`: a recording proxy in front of any Kafka (minibroker or not).

Clients connect to the proxy as to a broker. Every frame is forwarded unchanged to the
upstream broker, except that broker addresses in responses are replaced by the proxy's
own (one loopback listener per upstream broker), so clients stay on the proxy after their
first Metadata request. Each request and its response are decoded and recorded:
`exchanges()` in Python, and JSON lines through `record=` (the command writes them to a
file or stdout). The decoding rules are in protocol/recording.py.

    with RecordingProxy("127.0.0.1:9092") as proxy:
        run_client(proxy.bootstrap_servers)
        joins = proxy.exchanges(api="JoinGroup")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from minibroker.cluster import host_port
from minibroker.loop_thread import RunsInThread
from minibroker.protocol import messages
from minibroker.protocol.recording import (
    Address,
    Conversation,
    Exchange,
    broker_addresses,
    with_addresses,
)

log = logging.getLogger("minibroker.proxy")

_SIZE = struct.Struct(">i")
MAX_FRAME_BYTES = 100 * 1024 * 1024  # a frame larger than this closes the connection
KEPT_EXCHANGES = 100_000  # exchanges() returns at most the newest this many
CHUNK_BYTES = 1024 * 1024  # large frames are read and written this much at a time


def parse_address(text: str) -> Address:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def json_line(exchange: Exchange) -> str:
    return json.dumps(exchange.as_json(), separators=(",", ":"))


class RecordingProxy(RunsInThread):
    """Forward clients to `upstream` ("HOST:PORT") and record what they exchange.

    What it holds: per connection and direction, the frame in flight (at most
    `max_frame_bytes`) and, while a frame is decoded for the record, the decoded copy of
    its bytes fields; frames are read and written a chunk at a time, so no stream or
    transport buffer holds another copy. Besides, the newest `keep` exchanges, decoded
    (bytes fields over 1 KiB as their size)."""

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record: Callable[[Exchange], None] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        keep: int = KEPT_EXCHANGES,
    ) -> None:
        self.upstream = parse_address(upstream)
        self.host = host
        self._first_port = port
        self._record = record
        self._max_frame = max_frame_bytes
        self._listeners: dict[Address, asyncio.Server] = {}
        self._ports: dict[Address, int] = {}
        self._opening: dict[Address, asyncio.Future[int]] = {}
        # For exchanges(): the newest `keep` (0 when they are only handed to `record`).
        self._recorded: deque[Exchange] = deque(maxlen=keep)
        self._connections = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def bootstrap_servers(self) -> str:
        return host_port(self.host, self._ports[self.upstream])

    def exchanges(self, api: str | None = None, client_id: str | None = None) -> list[Exchange]:
        """What was recorded (newest last), optionally only one API's or one client's."""
        snapshot = self._on_loop(lambda: list(self._recorded))
        return [
            e
            for e in snapshot
            if (api is None or e.api == api) and (client_id is None or e.client_id == client_id)
        ]

    async def start(self) -> None:
        await self._listen(self.upstream, self._first_port)

    async def stop(self) -> None:
        for server in self._listeners.values():
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._listeners.values():
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._listeners.clear()

    # --- listeners: one per upstream broker ---

    async def _listen(self, upstream: Address, port: int = 0) -> int:
        if upstream in self._ports:
            return self._ports[upstream]
        if upstream in self._opening:  # another response named it first
            return await self._opening[upstream]
        opening: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._opening[upstream] = opening
        try:
            server = await asyncio.start_server(
                lambda r, w: self._serve(r, w, upstream), self.host, port
            )
        except BaseException as exc:
            opening.set_exception(exc)
            opening.exception()  # retrieved: awaiting callers see it, nobody else logs it
            raise
        finally:
            del self._opening[upstream]
        self._listeners[upstream] = server
        self._ports[upstream] = server.sockets[0].getsockname()[1]
        opening.set_result(self._ports[upstream])
        log.info(
            "proxy: %s forwards to %s",
            host_port(self.host, self._ports[upstream]),
            host_port(*upstream),
        )
        return self._ports[upstream]

    # --- one client connection ---

    async def _serve(
        self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter, to: Address
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._connections += 1
        conversation = Conversation(self._connections)
        try:
            await self._relay(client_reader, client, to, conversation)
        except asyncio.CancelledError:
            pass  # the proxy stops; asyncio's stream callback must not see a cancelled task
        finally:
            client.close()
            for exchange in conversation.unanswered():
                self._keep(exchange)
            self._tasks.discard(task)

    async def _relay(
        self,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        to: Address,
        conversation: Conversation,
    ) -> None:
        try:
            broker_reader, broker = await asyncio.open_connection(*to)
        except OSError as exc:
            log.warning("proxy: cannot reach %s: %s", host_port(*to), exc)
            return
        upstream = asyncio.create_task(self._requests(client_reader, broker, conversation))
        downstream = asyncio.create_task(self._responses(broker_reader, client, conversation))
        try:
            await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            broker.close()
            for piece in (upstream, downstream):
                piece.cancel()
            await asyncio.gather(upstream, downstream, return_exceptions=True)

    async def _frames(self, reader: asyncio.StreamReader) -> Any:
        """Each frame (without its size prefix), read a chunk at a time into memory of
        its own: the stream's buffer never holds more than a chunk of it."""
        while True:
            try:
                prefix = await reader.readexactly(_SIZE.size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            (size,) = _SIZE.unpack(prefix)
            if not 0 <= size <= self._max_frame:
                log.warning("proxy: a frame of %d bytes: connection closed", size)
                return
            if size <= CHUNK_BYTES:
                try:
                    yield await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                continue
            frame = bytearray(size)
            view = memoryview(frame)
            filled = 0
            try:
                while filled < size:
                    chunk = await reader.read(min(CHUNK_BYTES, size - filled))
                    if not chunk:
                        return
                    view[filled : filled + len(chunk)] = chunk
                    filled += len(chunk)
            except ConnectionError:
                return
            finally:
                view.release()
            yield memoryview(frame).toreadonly()  # kio reads only read-only buffers
            del frame  # the next frame is not read while this one is still held here

    @staticmethod
    async def _forward(writer: asyncio.StreamWriter, frame: bytes | memoryview) -> None:
        """Write a frame with its size prefix a chunk at a time, each once the last has
        mostly gone: the transport's buffer never holds a copy of a large frame."""
        writer.write(_SIZE.pack(len(frame)))
        with memoryview(frame) as view:
            for start in range(0, len(view), CHUNK_BYTES):
                writer.write(view[start : start + CHUNK_BYTES])
                await writer.drain()
        await writer.drain()

    async def _requests(
        self, reader: asyncio.StreamReader, broker: asyncio.StreamWriter, conversation: Conversation
    ) -> None:
        async for frame in self._frames(reader):
            conversation.asked(frame, time.time())
            await self._forward(broker, frame)

    async def _responses(
        self, reader: asyncio.StreamReader, client: asyncio.StreamWriter, conversation: Conversation
    ) -> None:
        async for frame in self._frames(reader):
            answer = conversation.answered(frame, time.time())
            out = frame
            if answer.exchange is not None and answer.response is not None:
                out = await self._with_own_addresses(answer.exchange, answer.response, frame)
            if answer.exchange is not None:
                self._keep(answer.exchange)
            del answer  # the decoded response (a copy of the records) goes before writing
            await self._forward(client, out)
            del frame, out  # gone before the next frame is read

    async def _with_own_addresses(
        self, exchange: Exchange, response: Any, frame: bytes | memoryview
    ) -> bytes | memoryview:
        named = broker_addresses(exchange.api_key, response)
        if not named:
            return frame
        moved: dict[Address, Address] = {}
        for address in named:
            try:
                moved[address] = (self.host, await self._listen(address))
            except OSError as exc:
                exchange.problems.append(f"no listener for {host_port(*address)}: {exc}")
        rewritten = with_addresses(exchange.api_key, response, moved)
        if rewritten is response:
            return frame
        encoded = messages.encode_response(exchange.correlation_id, rewritten, exchange.version)
        return encoded[_SIZE.size :]

    def _keep(self, exchange: Exchange) -> None:
        self._recorded.append(exchange)
        if self._record is not None:
            try:
                self._record(exchange)
            except Exception:
                log.exception("proxy: recording an exchange failed")
