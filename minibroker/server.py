"""asyncio transport for one broker node: accept, read frames, answer in order.

Requests of one connection are handled one at a time, so responses leave in request
order (clients rely on it) and a long poll holds back only its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from minibroker.dispatch import CloseConnection, Dispatcher, PendingReply
from minibroker.protocol.framing import FrameDecoder, FrameError
from minibroker.state.cluster import ClusterState, Node

log = logging.getLogger("minibroker.server")

# One read takes a whole typical produce request; the stream buffer may hold two such
# reads before the socket is paused, so reading does not toggle epoll registration.
READ_CHUNK = 1024 * 1024
WRITE_HIGH_WATER = 4 * 1024 * 1024
GROUP_TIMER_IDLE = 1.0


def _write(writer: asyncio.StreamWriter, answers: list[bytes]) -> None:
    if answers:
        writer.write(answers[0] if len(answers) == 1 else b"".join(answers))
        answers.clear()


class AppendSignal:
    """Wakes every waiting long poll when any partition gets new data."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def fire(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)


class NodeServer:
    def __init__(
        self,
        cluster: ClusterState,
        node_id: int,
        host: str,
        port: int,
        advertised_host: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.host = host
        self.port = port
        self.advertised_host = advertised_host or host
        self.dispatcher = Dispatcher(cluster, node_id)
        self.signal = AppendSignal()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._timer: asyncio.Task[None] | None = None

    @property
    def connection_count(self) -> int:
        return len(self._writers)

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, limit=READ_CHUNK
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.cluster.add_node(Node(self.node_id, self.advertised_host, self.port))
        self.cluster.on_append.append(self.signal.fire)
        self._timer = asyncio.create_task(self._group_timer(), name=f"group-timer-{self.node_id}")
        log.info("broker %d listening on %s:%d", self.node_id, self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(BaseException):
                await self._timer
            self._timer = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()
        with contextlib.suppress(ValueError):
            self.cluster.on_append.remove(self.signal.fire)
        self._server = None
        log.info("broker %d stopped", self.node_id)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if len(self._writers) >= self.cluster.config.max_connections:
            log.warning(
                "refusing %s: max_connections=%d reached", peer, self.cluster.config.max_connections
            )
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer, str(peer[0]) if peer else "")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", peer)
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_host: str
    ) -> None:
        decoder = FrameDecoder(self.cluster.config.max_frame_bytes)
        transport = writer.transport
        while True:
            data = await reader.read(READ_CHUNK)
            if not data:
                return
            try:
                frames = decoder.feed(data)
            except FrameError as exc:
                log.warning("closing connection from %s: %s", client_host, exc)
                return
            # Answers to the requests of one read leave in one write: a client that
            # pipelines requests gets the answers together (librdkafka retires its
            # bootstrap connection as soon as the first Metadata answer names the broker,
            # failing a request still in flight on it), and it saves a send per request.
            answers: list[bytes] = []
            for frame in frames:
                try:
                    outcome = self.dispatcher.dispatch(frame, client_host)
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", client_host, exc)
                    _write(writer, answers)
                    return
                if isinstance(outcome, PendingReply):
                    _write(writer, answers)  # earlier answers do not wait for a long poll
                    outcome = await self._finish(outcome)
                if outcome is not None:
                    answers.append(outcome)
            _write(writer, answers)
            if transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                await writer.drain()

    async def _finish(self, pending: PendingReply) -> bytes | None:
        while True:
            remaining = pending.deadline - self.cluster.clock.monotonic()
            if remaining <= 0:
                return pending.finish(True)
            await self.signal.wait(remaining)
            if self.cluster.clock.monotonic() >= pending.deadline:
                return pending.finish(True)
            response = pending.finish(False)
            if response is not None:
                return response

    async def _group_timer(self) -> None:
        """Run the group coordinator's deadlines: session expiry, rebalance timeouts."""
        clock = self.cluster.clock
        while True:
            deadline = self.cluster.groups.next_deadline()
            wait = GROUP_TIMER_IDLE if deadline is None else deadline - clock.monotonic()
            if wait > 0:
                # Any request may move the deadlines, so wake on every change too.
                await self.signal.wait(min(wait, GROUP_TIMER_IDLE))
                continue
            try:
                self.cluster.groups.tick(clock.monotonic())
            except Exception:
                log.exception("group coordinator tick failed")
            self.cluster.notify_append()
            await asyncio.sleep(0)
