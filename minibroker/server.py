"""asyncio transport for one broker node: accept, read frames, answer in order.

Requests of one connection are handled one at a time, so responses leave in request
order (clients rely on it) and a long poll holds back only its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from minibroker.dispatch import CloseConnection, Dispatcher, PendingReply
from minibroker.protocol.framing import FrameError, FrameReceiver
from minibroker.state.cluster import ClusterState, Node

log = logging.getLogger("minibroker.server")

WRITE_HIGH_WATER = 4 * 1024 * 1024
MAX_QUEUED_FRAMES = 64  # received but unanswered; past this, reading pauses
GROUP_TIMER_IDLE = 1.0


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
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()  # outlive their connection briefly

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.cluster.add_node(Node(self.node_id, self.advertised_host, self.port))
        self.cluster.on_append.append(self.signal.fire)
        log.info("broker %d listening on %s:%d", self.node_id, self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()
        with contextlib.suppress(ValueError):
            self.cluster.on_append.remove(self.signal.fire)
        self._server = None
        log.info("broker %d stopped", self.node_id)

    async def finish_long_poll(self, pending: PendingReply) -> bytes | None:
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


class GroupTimer:
    """Runs the group coordinator's deadlines (session expiry, rebalance timeouts); one
    per cluster, however many nodes serve it."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.signal = AppendSignal()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.cluster.on_append.append(self.signal.fire)
        self._task = asyncio.create_task(self._run(), name="group-timer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        with contextlib.suppress(ValueError):
            self.cluster.on_append.remove(self.signal.fire)

    async def _run(self) -> None:
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


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the transport reads into the frame receiver's buffers, and
    a task answers the queued frames one at a time, in order."""

    def __init__(self, node: NodeServer) -> None:
        self._node = node
        self._receiver = FrameReceiver(node.cluster.config.max_frame_bytes)
        self._frames: deque[bytes | memoryview] = deque()
        self._wake = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._reading_paused = False
        self._peer = ""

    # --- transport callbacks ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if peer else ""
        limit = self._node.cluster.config.max_connections
        if len(self._node._connections) >= limit:
            log.warning("refusing %s: max_connections=%d reached", peer, limit)
            self._closing = True
            transport.close()
            return
        self._node._connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self._node._tasks.add(self._task)
        self._task.add_done_callback(self._node._tasks.discard)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._receiver.received(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self._peer, exc)
            self.abort()
            return
        if frames:
            self._frames.extend(frames)
            self._wake.set()
            if len(self._frames) > MAX_QUEUED_FRAMES and self._transport is not None:
                self._transport.pause_reading()
                self._reading_paused = True

    def eof_received(self) -> bool:
        self._closing = True
        self._wake.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._frames.clear()
        self._wake.set()
        self._writable.set()
        self._node._connections.discard(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- control ---

    def abort(self) -> None:
        """Drop the connection now (broken stream or broker shutdown)."""
        self._closing = True
        self._frames.clear()
        self._wake.set()
        if self._transport is not None:
            self._transport.close()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()  # it may be waiting in a long poll

    # --- answering ---

    async def _serve(self) -> None:
        try:
            await self._answer_frames()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", self._peer)
        finally:
            self._node._connections.discard(self)
            if self._transport is not None:
                self._transport.close()

    async def _answer_frames(self) -> None:
        transport = self._transport
        assert transport is not None
        dispatcher = self._node.dispatcher
        while True:
            if not self._frames:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            # Answers to the frames at hand leave in one write: a client that pipelines
            # requests gets the answers together (librdkafka retires its bootstrap
            # connection as soon as the first Metadata answer names the broker, failing a
            # request still in flight on it), and it saves a send per request.
            answers: list[bytes] = []
            while self._frames:
                frame = self._frames.popleft()
                try:
                    outcome = dispatcher.dispatch(frame, self._peer)
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self._peer, exc)
                    self._send(answers)
                    self.abort()
                    return
                if isinstance(outcome, PendingReply):
                    self._send(answers)  # earlier answers do not wait for a long poll
                    outcome = await self._node.finish_long_poll(outcome)
                    if self._closing and not self._frames and transport.is_closing():
                        return
                if outcome is not None:
                    answers.append(outcome)
            self._send(answers)
            if self._reading_paused and len(self._frames) <= MAX_QUEUED_FRAMES // 2:
                self._reading_paused = False
                transport.resume_reading()
            if not self._writable.is_set():
                await self._writable.wait()

    def _send(self, answers: list[bytes]) -> None:
        if answers and self._transport is not None and not self._transport.is_closing():
            self._transport.write(answers[0] if len(answers) == 1 else b"".join(answers))
        answers.clear()
