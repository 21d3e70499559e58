"""asyncio transport for one broker node: accept, read frames, answer in order.

Requests of one connection are handled one at a time, so responses leave in request
order (clients rely on it) and a long poll holds back only its own connection. A
connection stops reading while a request is in progress, so one client can make the
broker hold at most one request and its answer; budgets and timeouts follow the rules
in `minibroker.limits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable

from minibroker import listen_socket
from minibroker.accept_guard import AcceptGuard
from minibroker.config import PLAINTEXT, SSL, Listener
from minibroker.connection_rate import ConnectionRate
from minibroker.dispatch import (
    CloseConnection,
    Deferred,
    Dispatcher,
    FaultedReply,
    PendingReply,
    SteppedReply,
)
from minibroker.handlers.registry import OPEN_SESSION
from minibroker.inspection import ConnectionSeen, client_id_of
from minibroker.limits import ConnectionMeter, MemoryBudget, Verdict
from minibroker.protocol.framing import FrameError, FrameReceiver
from minibroker.protocol.messages import Encoded, FramePieces
from minibroker.state.cluster import CLOCK_ADVANCED, ClusterState, Node
from minibroker.state.sessions import ANONYMOUS, PRE_AUTH_MAX_FRAME_BYTES, Session, open_session
from minibroker.tls import principal_of, tls_context, tls_server_protocol
from minibroker.waiters import WaiterIndex

log = logging.getLogger("minibroker.server")

WRITE_HIGH_WATER = 4 * 1024 * 1024
# How much a client may send ahead while one of its requests is in progress: past it the
# connection stops reading until its requests are answered. (Reading goes on below it so
# that a client that disconnects during a long poll is noticed at once.)
PIPELINE_BYTES = 512 * 1024
# Requests at least this large (other than Produce, whose records stay undecoded bytes)
# are decoded in a worker thread: one CreateTopics naming 100,000 topics takes a fifth of
# a second to decode, and the event loop keeps serving other connections meanwhile.
LARGE_REQUEST_BYTES = 256 * 1024
PRODUCE_KEY = b"\x00\x00"
# From Python 3.12 a socket transport's writelines() hands the pieces to sendmsg() as
# they are; before, it joins them. There, answers are joined a chunk at a time instead:
# the chunk's memory is reused from one to the next, where one join of a many-MB Fetch
# answer would write it all into fresh pages first.
ZERO_COPY_WRITELINES = sys.version_info >= (3, 12)
WRITE_CHUNK_BYTES = 1024 * 1024


# The first Produce and Fetch versions whose clients wait out a throttle time themselves
# (KIP-219): an older one's answer is held back for the throttle time instead, as Kafka does.
CLIENT_THROTTLES_FROM = {0: 6, 1: 8}


def _answered_late(frame: bytes | memoryview) -> bool:
    api_key = int.from_bytes(frame[:2], "big")
    first = CLIENT_THROTTLES_FROM.get(api_key)
    return first is not None and int.from_bytes(frame[2:4], "big") < first


class NodeServer:
    """One broker node: a server socket per listener, all serving the same node."""

    def __init__(
        self,
        cluster: ClusterState,
        node_id: int,
        host: str,
        port: int,
        advertised_host: str | None = None,
        *,
        listeners: list[Listener] | None = None,
        advertised: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.listeners = listeners or [Listener(PLAINTEXT, PLAINTEXT, host, port)]
        first = self.listeners[0]
        self.host = first.host
        self.port = first.port
        self._advertised_host = advertised_host
        self._advertised = advertised or {}
        # listener name -> (host, port) clients are told, known once listening
        self.addresses: dict[str, tuple[str, int]] = {}
        self.advertised_host = self._advertised_address(first, first.port)[0]
        self.dispatcher = Dispatcher(cluster, node_id, in_pieces=True)
        self.waiters = WaiterIndex()
        self.budget = MemoryBudget(cluster.config.queued_max_request_bytes)
        self.connection_rate = ConnectionRate(cluster.config.max_connection_creation_rate)
        self._rate_checked_when_connected: set[str] = set()  # listener names
        self._servers: list[asyncio.Server] = []
        self._connections: set[_Connection] = set()
        self._memory_waiters: set[_Connection] = set()  # muted until the budget frees
        self._tasks: set[asyncio.Task[None]] = set()  # outlive their connection briefly
        self._sweeper: asyncio.Task[None] | None = None
        # Reports accept() failing for want of descriptors once, not per failure.
        self.accept_guard = AcceptGuard(f"broker {node_id}")
        # Seconds every answer of this node waits before it leaves (Cluster.set_latency).
        self.latency = 0.0

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _advertised_address(self, listener: Listener, bound_port: int) -> tuple[str, int]:
        host, port = self._advertised.get(listener.name, ("", 0))
        return host or self._advertised_host or listener.host, port or bound_port

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        tls = tls_context(self.cluster.config) if any(x.uses_tls for x in self.listeners) else None
        try:
            for listener in self.listeners:
                server = await self._listen(listener, tls)
                self._servers.append(server)
                bound = server.sockets[0].getsockname()[1]
                self.addresses[listener.name] = self._advertised_address(listener, bound)
                log.info(
                    "broker %d listening on %s:%d (%s)",
                    self.node_id,
                    listener.host,
                    bound,
                    listener.name,
                )
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers.clear()
            raise
        # A restart listens on the same ports.
        self.listeners = [
            dataclasses.replace(listener, port=server.sockets[0].getsockname()[1])
            for listener, server in zip(self.listeners, self._servers, strict=True)
        ]
        self.advertised_host = self.addresses[self.listeners[0].name][0]
        self.port = self.listeners[0].port
        self.cluster.add_node(
            Node(
                self.node_id,
                self.advertised_host,
                self.addresses[self.listeners[0].name][1],
                endpoints=dict(self.addresses),
            )
        )
        self.cluster.on_change.append(self.waiters.fire)
        self.accept_guard.watch(loop, [sock for s in self._servers for sock in s.sockets])
        self._sweeper = loop.create_task(self._sweep(), name=f"node-{self.node_id}-sweep")

    async def _listen(self, listener: Listener, tls: ssl.SSLContext | None) -> asyncio.Server:
        """A server for `listener`. Its socket refuses new connections over
        max_connection_creation_rate in accept() (listen_socket.py); for a host of several
        addresses the event loop listens on each, and they are checked once connected."""
        loop = asyncio.get_running_loop()
        factory: Callable[[], asyncio.BaseProtocol] = functools.partial(_Connection, self, listener)
        if tls is not None and listener.uses_tls:
            # TLS on the plain server, so a refused handshake's alert reaches the client;
            # a TLS handshake left unfinished is a partial request too.
            timeout = self.cluster.config.partial_request_timeout_ms / 1000
            factory = tls_server_protocol(factory, tls, timeout)
        sock = await listen_socket.bind(listener.host, listener.port, self.admit_connection)
        if sock is None:
            self._rate_checked_when_connected.add(listener.name)
            return await loop.create_server(factory, listener.host, listener.port)
        try:
            return await loop.create_server(factory, sock=sock)
        except BaseException:
            sock.close()
            raise

    async def stop(self) -> None:
        if not self._servers:
            return
        self.accept_guard.unwatch()
        for server in self._servers:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(BaseException):
                await self._sweeper
            self._sweeper = None
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for server in self._servers:
            await server.wait_closed()
        with contextlib.suppress(ValueError):
            self.cluster.on_change.remove(self.waiters.fire)
        self._servers.clear()
        log.info("broker %d stopped", self.node_id)

    async def finish_long_poll(self, pending: PendingReply) -> Encoded | None:
        clock = self.cluster.clock
        place = self.waiters.place_in_line()  # kept while it waits again
        while True:
            remaining = pending.deadline - clock.monotonic()
            if remaining <= 0:
                return pending.finish(True)
            await self.waiters.wait(pending.wait_keys, remaining, place)
            if clock.monotonic() >= pending.deadline:
                return pending.finish(True)
            response = pending.finish(False)
            if response is not None:
                return response

    def admit_connection(self, address: str, now: float) -> bool:
        """Whether a new connection from `address` is within max_connection_creation_rate;
        refusals are logged now and then, with how many."""
        if self.connection_rate.admit(address, now):
            return True
        refused = self.connection_rate.to_report(address, now)
        if refused:
            log.warning(
                "closed %d new connection(s) from %s: over max_connection_creation_rate=%d/s",
                refused,
                address,
                self.connection_rate.per_second,
            )
        return False

    # --- memory budget ---

    def wait_for_memory(self, connection: _Connection) -> None:
        self._memory_waiters.add(connection)

    def memory_freed(self) -> None:
        """Let connections muted for memory read again while the budget allows."""
        while self._memory_waiters and not self.budget.exhausted:
            self._memory_waiters.pop().memory_available()

    def forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        self._memory_waiters.discard(connection)
        self.budget.release(connection.meter)
        self.memory_freed()

    # --- timeouts ---

    async def _sweep(self) -> None:
        """Close connections past their idle or partial-request timeout; shrink idle ones."""
        config = self.cluster.config
        interval = max(
            0.05,
            min(
                1.0, config.partial_request_timeout_ms / 4000, config.connections_max_idle_ms / 4000
            ),
        )
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self._connections):
                verdict = connection.meter.verdict(now, config)
                if verdict is Verdict.SHRINK:
                    connection.shrink()
                elif verdict is not Verdict.KEEP:
                    log.info("closing connection from %s: %s", connection.peer, verdict.value)
                    connection.abort()
            self.memory_freed()


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the transport reads into the frame receiver's buffers, and
    a task answers the received frames one at a time, in order. Reading pauses while the
    client is PIPELINE_BYTES ahead of its answers (answers that have not drained count as
    not given), and while the node's memory budget is exhausted and this connection is
    mid-frame."""

    def __init__(self, node: NodeServer, listener: Listener) -> None:
        self._node = node
        self._listener = listener
        self._loop = asyncio.get_running_loop()
        self._receiver = FrameReceiver(node.cluster.config.max_frame_bytes)
        self.session: Session = OPEN_SESSION
        self.meter = ConnectionMeter(opened_at=self._loop.time())
        self._frames: deque[bytes | memoryview] = deque()
        self._unsent: deque[bytes | memoryview] = deque()  # answers not yet written
        self._queued_bytes = 0  # received frames not yet answered
        self._wake = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._reading_paused = False
        self._short_of_memory = False
        self._muted = False  # throttled by a client quota
        self.peer = ""
        # This connection as the recording notes it (inspection.py), while recording.
        self.seen: ConnectionSeen | None = None

    # --- transport callbacks ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else ""
        node = self._node
        if self._listener.name in node._rate_checked_when_connected and not node.admit_connection(
            self.peer, time.monotonic()
        ):
            self._closing = True
            transport.abort()  # at once, before reading anything (connection_rate.py)
            return
        limit = self._node.cluster.max_connections
        if len(self._node._connections) >= limit:
            log.warning("refusing %s: max_connections=%d reached", peer, limit)
            self._closing = True
            transport.close()
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.session = self._open_session(transport)
        self._limit_frames()
        self._node._connections.add(self)
        recording = node.dispatcher.recording
        if recording is not None and peer:
            self.seen = recording.connection_opened(
                node.node_id, f"{peer[0]}:{peer[1]}", time.time()
            )
        self._account()
        self._task = self._loop.create_task(self._serve())
        self._node._tasks.add(self._task)
        self._task.add_done_callback(self._node._tasks.discard)

    def _open_session(self, transport: asyncio.Transport) -> Session:
        listener, config = self._listener, self._node.cluster.config
        if listener.security_protocol == PLAINTEXT:
            # OPEN_SESSION's like, but its own: what ends with the connection hangs on it.
            return open_session()
        principal = ANONYMOUS
        if listener.security_protocol == SSL:
            principal = principal_of(transport.get_extra_info("peercert"))
        return Session(
            listener.name,
            listener.security_protocol,
            self._node.cluster.credentials,
            mechanisms=config.mechanisms(),
            max_reauth_ms=config.connections_max_reauth_ms,
            principal=principal,
        )

    def _limit_frames(self) -> None:
        """Until a SASL client is authenticated its frames are held to Kafka's small
        pre-authentication limit."""
        limit = self._node.cluster.config.max_frame_bytes
        if not self.session.authenticated:
            limit = min(limit, PRE_AUTH_MAX_FRAME_BYTES)
        self._receiver.max_frame_bytes = limit

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        receiver = self._receiver
        try:
            frames = receiver.received(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
            return
        self.meter.received(self._loop.time(), partial=receiver.partial)
        if frames:
            self._frames.extend(frames)
            self._queued_bytes += sum(len(frame) for frame in frames)
            self._wake.set()
        self._account()
        if receiver.partial and self._node.budget.exhausted:
            self._short_of_memory = True
            self._node.wait_for_memory(self)
        self._update_reading()

    def eof_received(self) -> bool:
        self._closing = True
        self._wake.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        closing, self.session.on_close = self.session.on_close, []
        for callback in closing:
            try:
                callback()
            except Exception:
                log.exception("a callback at the close of a connection failed")
        self._frames.clear()
        self._unsent.clear()
        self._queued_bytes = 0
        self._wake.set()
        self._writable.set()
        self._node.forget(self)
        if self.seen is not None:
            self.seen.closed_at = time.time()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()  # it may be waiting in a long poll nobody will read

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
        if self._unsent:  # the rest of an answer, whatever the task is waiting for
            self._write_unsent()

    # --- control ---

    def abort(self) -> None:
        """Drop the connection now (broken stream, timeout or broker shutdown)."""
        self._closing = True
        self._frames.clear()
        self._wake.set()
        if self._transport is not None:
            self._transport.close()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()  # it may be waiting in a long poll

    def shrink(self) -> None:
        self._receiver.shrink()
        self._account()

    def memory_available(self) -> None:
        self._short_of_memory = False
        self._update_reading()

    def _account(self) -> None:
        self._node.budget.update(self.meter, self._receiver.held + self._queued_bytes)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        ahead = self._receiver.pending + self._queued_bytes
        mute = (
            self._muted
            or self._short_of_memory
            or (ahead >= PIPELINE_BYTES and (bool(self._frames) or self.meter.busy))
        )
        if mute and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not mute and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    # --- answering ---

    async def _serve(self) -> None:
        try:
            await self._answer_frames()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection from %s failed; closing it", self.peer)
        finally:
            self._node.forget(self)
            if self._transport is not None:
                self._transport.close()

    async def _answer_frames(self) -> None:
        transport = self._transport
        assert transport is not None
        dispatcher = self._node.dispatcher
        meter = self.meter
        session = self.session
        while True:
            if not self._frames:
                if self._closing:
                    return
                meter.busy = False
                meter.last_activity = self._loop.time()
                self._update_reading()
                self._wake.clear()
                await self._wake.wait()
                continue
            meter.busy = True
            # Answers to the frames at hand leave in one write: a client that pipelines
            # requests gets the answers together (librdkafka retires its bootstrap
            # connection as soon as the first Metadata answer names the broker, failing a
            # request still in flight on it), and it saves a send per request.
            answers: list[Encoded] = []
            pending_bytes = 0
            while self._frames:
                frame = self._frames.popleft()
                fault: FaultedReply | None = None
                if self.seen is not None and self.seen.client_id is None:
                    self.seen.client_id = client_id_of(frame)
                try:
                    if (
                        len(frame) >= LARGE_REQUEST_BYTES
                        and frame[:2] != PRODUCE_KEY
                        and session.unrestricted
                    ):
                        # Decoded off the loop: other connections are served meanwhile.
                        self._send(answers)
                        pending_bytes = 0
                        decoded = await asyncio.to_thread(dispatcher.decode, frame)
                        outcome = (
                            decoded
                            if isinstance(decoded, bytes)
                            else dispatcher.answer(
                                decoded, self.peer, stepped=True, session=session
                            )
                        )
                    else:
                        outcome = dispatcher.dispatch(
                            frame, self.peer, stepped=True, session=session
                        )
                    if isinstance(outcome, Deferred):
                        self._send(answers)  # earlier answers do not wait for it
                        pending_bytes = 0
                        outcome, fault = await self._settle(outcome)
                        if self._closing and transport.is_closing():
                            return
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self._send(answers)
                    self.abort()
                    return
                self._queued_bytes -= len(frame)
                latency = self._node.latency
                if fault is not None or latency:
                    self._send(answers)  # earlier answers are not held back
                    pending_bytes = 0
                    delay = latency + (fault.delay if fault is not None else 0.0)
                    if delay:
                        await asyncio.sleep(delay)
                    if fault is not None and fault.close:
                        log.info("closing connection from %s: a fault rule", self.peer)
                        self.abort()
                        return
                if not session.unrestricted:
                    if session.closing:
                        # Refused authentication: the answer says why, then it closes.
                        log.info("closing connection from %s: SASL refused", self.peer)
                        if outcome is not None:
                            answers.append(outcome)
                        self._send(answers)
                        await self._drained()
                        # As Kafka: closed a moment later, so the client reads the answer
                        # before it sees the connection end.
                        delay = self._node.cluster.config.connection_failed_authentication_delay_ms
                        if delay and not transport.is_closing():
                            self._update_reading()
                            await asyncio.sleep(delay / 1000)
                        self.abort()
                        return
                    self._limit_frames()
                throttle_ms = dispatcher.take_throttle(session)
                if throttle_ms and _answered_late(frame):
                    # A client from before client-side throttling: its answer waits.
                    self._send(answers)
                    pending_bytes = 0
                    await self._drained()
                    await self._mute(throttle_ms)
                    throttle_ms = 0
                if outcome is not None:
                    answers.append(outcome)
                    pending_bytes += len(outcome)
                    if pending_bytes >= WRITE_HIGH_WATER:
                        self._send(answers)
                        pending_bytes = 0
                        await self._drained()
                if throttle_ms:
                    # Over a client quota: the answer (saying how long) leaves now, then
                    # nothing more is read or served from this client until then.
                    self._send(answers)
                    pending_bytes = 0
                    await self._drained()
                    await self._mute(throttle_ms)
            self._send(answers)
            await self._drained()
            self._account()
            self._node.memory_freed()

    async def _mute(self, throttle_ms: int) -> None:
        """Read nothing from this connection for `throttle_ms` of the broker's clock, as
        Kafka mutes a throttled channel; moving the clock forward ends it sooner."""
        node = self._node
        clock = node.cluster.clock
        deadline = clock.monotonic() + throttle_ms / 1000
        self._muted = True
        self._update_reading()
        try:
            place = node.waiters.place_in_line()
            while (remaining := deadline - clock.monotonic()) > 0:
                await node.waiters.wait((CLOCK_ADVANCED,), remaining, place)
        finally:
            self._muted = False
            self._update_reading()

    async def _settle(self, outcome: Deferred) -> tuple[Encoded | None, FaultedReply | None]:
        """A deferred answer made bytes (or nothing), and the fault rule that acted on it."""
        fault = None
        if isinstance(outcome, FaultedReply):
            fault, inner = outcome, outcome.outcome
            if fault.stall:
                # Never answered: neither is anything after it, as on a broker that
                # hangs; the client times out and closes.
                await asyncio.get_running_loop().create_future()
            if not isinstance(inner, Deferred):
                return inner, fault
            outcome = inner
        if isinstance(outcome, SteppedReply):
            return await self._work_through(outcome), fault
        assert isinstance(outcome, PendingReply)
        self._update_reading()
        return await self._node.finish_long_poll(outcome), fault

    @staticmethod
    async def _work_through(reply: SteppedReply) -> Encoded:
        """A large request's response, one piece per turn of the event loop: every other
        connection is served between pieces."""
        pieces = reply.pieces
        while True:
            try:
                next(pieces)
            except StopIteration as done:
                response: Encoded = done.value
                return response
            await asyncio.sleep(0)

    async def _drained(self) -> None:
        """Wait until the answers written so far are (mostly) sent. A client that does
        not read them is idle meanwhile, and is closed after connections_max_idle_ms."""
        while True:
            if not self._writable.is_set():
                self.meter.busy = False
                self._account()
                self._update_reading()
                await self._writable.wait()
                self.meter.busy = True
                self.meter.last_activity = self._loop.time()
            if not self._unsent:
                return
            self._write_unsent()

    def _send(self, answers: list[Encoded]) -> None:
        for answer in answers:
            if isinstance(answer, FramePieces):
                self._unsent.extend(answer.pieces)
            else:
                self._unsent.append(answer)
        answers.clear()
        self._write_unsent()

    def _write_unsent(self) -> None:
        """Hand the transport what is waiting to be sent. Before Python 3.12 it gets
        chunks joined from the pieces only while its buffer is below the high-water mark
        (`_drained` writes the rest as it drains), so neither the join nor the buffer
        grows with the answer."""
        transport, unsent = self._transport, self._unsent
        if transport is None or transport.is_closing():
            unsent.clear()
            return
        if ZERO_COPY_WRITELINES:
            # No empty piece: left at the end of the transport's buffer, it would never
            # be taken out (CPython 3.12.1), and the connection could never close.
            transport.writelines([piece for piece in unsent if piece])
            unsent.clear()
            return
        while unsent and self._writable.is_set():
            chunk: list[bytes | memoryview] = []
            size = 0
            while unsent and size < WRITE_CHUNK_BYTES:
                piece = unsent.popleft()
                chunk.append(piece)
                size += len(piece)
            transport.write(chunk[0] if len(chunk) == 1 else b"".join(chunk))
