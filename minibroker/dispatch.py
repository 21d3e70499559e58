"""The one place every request passes through: frame in, outcome out. Sans-IO.

Outcomes (`Outcome`): bytes to send, nothing to send (acks=0), or a `Deferred` answer --
a long poll to finish later, a response to work out in pieces (only when the caller asks
for them), a request a fault rule acted on -- or CloseConnection when the frame cannot
be understood (the stream can no longer be trusted, so only this
client's connection is dropped). Decoding (`decode`) touches no state, so the server may
run it off the event loop for large frames; `answer` then runs on the loop.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from typing import Any

from minibroker import handlers
from minibroker.faults import (
    PARTITION_APIS,
    Fault,
    RequestFacts,
    custom_response,
    error_response,
)
from minibroker.handlers import _access as access
from minibroker.handlers import api_versions
from minibroker.handlers.registry import (
    OPEN_SESSION,
    ApiHandler,
    Pending,
    RequestContext,
    Steps,
)
from minibroker.inspection import Recording
from minibroker.protocol import messages
from minibroker.state.cluster import ClusterState
from minibroker.state.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    quota_user,
)
from minibroker.state.sessions import Refused, Session

log = logging.getLogger("minibroker.requests")


PRODUCE_KEY, FETCH_KEY = 0, 1
# Requests no client quota counts (Kafka's exempt ones a client sends): ApiVersions and
# the SASL exchange.
QUOTA_EXEMPT_APIS = frozenset({17, 18, 36})
# Request-handling time as request_percentage counts it: 100 per second.
NANOS_TO_PERCENT = 100 / 1e9


def _emptied_fetch(response: Any) -> Any:
    """A Fetch answer without its records (what Kafka sends a throttled consumer)."""
    if isinstance(response, messages.SplicedResponse):
        return response.response  # its spliced array left empty
    return dataclasses.replace(response, responses=())


class CloseConnection(Exception):
    """The frame is unusable; the connection must be closed."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One line of the request log kept for test reports."""

    at: float
    node_id: int
    client_id: str | None
    api: str
    version: int
    correlation_id: int
    outcome: str


class Deferred:
    """An answer that is not bytes yet: the server settles it (server._settle)."""

    __slots__ = ()


@dataclass(slots=True)
class PendingReply(Deferred):
    """A long poll: call `finish(final)` until it returns the encoded response."""

    deadline: float
    finish: Callable[[bool], messages.Encoded | None]
    wait_keys: tuple[Hashable, ...]


@dataclass(slots=True)
class SteppedReply(Deferred):
    """A response worked out in pieces: each `next(pieces)` does one; the generator
    returns the encoded response. It raises CloseConnection like `dispatch` does."""

    pieces: Generator[None, None, messages.Encoded]


@dataclass(slots=True)
class FaultedReply(Deferred):
    """A request a fault rule acted on (faults.py): the server waits `delay` seconds
    before the answer, never answers (`stall`: the connection answers nothing more), or
    closes the connection instead of answering (`close`: the request was served)."""

    outcome: messages.Encoded | PendingReply | SteppedReply | None
    delay: float = 0.0
    stall: bool = False
    close: bool = False


# What `dispatch` and `answer` return.
Outcome = messages.Encoded | Deferred | None


@dataclass(frozen=True, slots=True)
class Decoded:
    """A request read from its frame, with the handler that serves it."""

    handler: ApiHandler
    header: messages.RequestHeader
    request: Any
    size: int = 0  # the frame's bytes (a Produce counts them against its byte rate)


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """What one request of a connection counts against its client quotas."""

    session: Session
    user: str
    client_id: str
    request_bytes: int
    handled_ns: int


class Dispatcher:
    def __init__(
        self, cluster: ClusterState, node_id: int, history: int = 1000, *, in_pieces: bool = False
    ) -> None:
        self.cluster = cluster
        self.node_id = node_id
        # Large answers as FramePieces, for a transport that writes them unjoined.
        self.in_pieces = in_pieces
        self.recent: deque[RequestRecord] = deque(maxlen=history)
        # Milliseconds of throttle time every answer reports (Cluster.set_throttle).
        self.throttle_ms = 0
        # Connections over a client quota: how long (ms) to mute each after its answer,
        # taken by the server (`take_throttle`).
        self._throttles: dict[Session, int] = {}
        # Answered requests, decoded (inspection.py), while recording is on.
        self.recording: Recording | None = (
            Recording(cluster.config.record_requests_max_bytes)
            if cluster.config.record_requests
            else None
        )
        # Emulating a Kafka release: the versions it served (None: every served version).
        kafka_version = cluster.config.kafka_version
        self.emulated = (
            api_versions.advertised_ranges(kafka_version) if kafka_version is not None else None
        )

    def _record(
        self,
        header: messages.RequestHeader | None,
        api: str,
        version: int,
        correlation_id: int,
        outcome: str,
    ) -> None:
        self.recent.append(
            RequestRecord(
                time.time(),
                self.node_id,
                header.client_id if header else None,
                api,
                version,
                correlation_id,
                outcome,
            )
        )

    def dispatch(
        self,
        frame: bytes | memoryview,
        client_host: str = "",
        *,
        stepped: bool = False,
        session: Session = OPEN_SESSION,
    ) -> Outcome:
        """The outcome of one request frame: `decode`, then `answer`."""
        decoded = self.decode(frame, session)
        if isinstance(decoded, bytes):
            return decoded
        return self.answer(decoded, client_host, stepped=stepped, session=session)

    def decode(self, frame: bytes | memoryview, session: Session = OPEN_SESSION) -> Decoded | bytes:
        """The request and its handler, or an answer given without decoding (ApiVersions
        at a version above the served ones, a bare SASL token). Touches no cluster state;
        a connection's SASL exchange moves on (state/sessions.py)."""
        if not session.unrestricted and session.expects_bare_token:
            return self._bare_token(frame, session)
        try:
            api_key, version, correlation_id = messages.peek_header_prefix(frame)
        except messages.InvalidRequest as exc:
            self._record(None, "?", -1, -1, "closed: malformed")
            raise CloseConnection(str(exc)) from exc
        if not session.unrestricted:
            try:
                session.admit(api_key, self._now_ms())
            except Refused as exc:
                self._record(
                    None,
                    messages.api_name(api_key),
                    version,
                    correlation_id,
                    "closed: not authenticated",
                )
                raise CloseConnection(str(exc)) from exc
        registered = handlers.HANDLERS.get(api_key)
        name = registered.name if registered is not None else messages.api_name(api_key)
        emulated = self.emulated
        newest_api_versions = (
            api_versions.MAX_VERSION if emulated is None else emulated[messages.API_VERSIONS_KEY][1]
        )
        if api_key == messages.API_VERSIONS_KEY and version > newest_api_versions:
            self._record(None, name, version, correlation_id, "UNSUPPORTED_VERSION")
            return messages.encode_response(
                correlation_id,
                api_versions.unsupported_version_response(newest=newest_api_versions),
            )
        handler = handlers.lookup(api_key, version)
        if emulated is not None and handler is not None:
            oldest, newest = emulated.get(api_key, (0, -1))
            if not oldest <= version <= newest:
                self._record(None, name, version, correlation_id, "closed: unsupported")
                raise CloseConnection(
                    f"{name} v{version} (api key {api_key}) was not served by Kafka "
                    f"{self.cluster.config.kafka_version}"
                )
        if handler is None:
            self._record(None, name, version, correlation_id, "closed: unsupported")
            raise CloseConnection(f"{name} v{version} (api key {api_key}) is not served")
        try:
            header, request = messages.decode_request(frame)
        except (messages.InvalidRequest, LookupError) as exc:
            self._record(None, name, version, correlation_id, "closed: malformed")
            raise CloseConnection(str(exc)) from exc
        return Decoded(handler, header, request, len(frame))

    def _now_ms(self) -> int:
        return int(self.cluster.clock.monotonic() * 1000)

    def _bare_token(self, frame: bytes | memoryview, session: Session) -> bytes:
        """A SASL token sent without a request header (after SaslHandshake v0), answered
        with a bare token in a frame of its own."""
        try:
            answer = session.bare_token(bytes(frame), self._now_ms())
        except Refused as exc:
            self._record(None, "SaslToken", 0, -1, "closed: authentication failed")
            raise CloseConnection(f"SASL authentication failed: {exc}") from exc
        self._record(None, "SaslToken", 0, -1, "ok")
        return len(answer).to_bytes(4, "big") + answer

    def answer(
        self,
        decoded: Decoded,
        client_host: str = "",
        *,
        stepped: bool = False,
        session: Session = OPEN_SESSION,
    ) -> Outcome:
        """Serve a decoded request. A handler that works in pieces (`Steps`) is run
        through at once, unless `stepped`: then its pieces are handed back. A fault rule
        that acts on the request (faults.py) changes what happens."""
        if self.cluster.faults.rules:  # a list: no call when there are none
            action = self.cluster.faults.match(
                RequestFacts(
                    decoded.header.api_key,
                    decoded.header.api_version,
                    self.node_id,
                    decoded.header.client_id,
                    decoded.request,
                    self._topic_name,
                )
            )
            if action is not None:
                return self._faulted(decoded, action, client_host, stepped, session)
        return self._serve(decoded, client_host, stepped, session=session)

    def _topic_name(self, topic_id: Any) -> str | None:
        topic = self.cluster.topics.by_id(topic_id)
        return topic.name if topic is not None else None

    def _faulted(
        self, decoded: Decoded, action: Fault, client_host: str, stepped: bool, session: Session
    ) -> Outcome:
        handler, header = decoded.handler, decoded.header
        version, correlation_id = header.api_version, header.correlation_id
        if action.close:
            self._record(header, handler.name, version, correlation_id, "closed: fault")
            raise CloseConnection(f"{handler.name} v{version}: a fault rule closes it")
        if action.drop:
            self._record(header, handler.name, version, correlation_id, "dropped: fault")
            return FaultedReply(None, stall=True)
        if action.respond is not None or (
            action.error is not None and header.api_key not in PARTITION_APIS
        ):
            if action.respond is not None:
                try:
                    fields = action.respond(decoded.request)
                    response = custom_response(header.api_key, version, fields)
                except Exception as exc:
                    log.exception("node %d: a fault rule's respond= failed", self.node_id)
                    self._record(
                        header, handler.name, version, correlation_id, "closed: respond failed"
                    )
                    raise CloseConnection(f"{handler.name} v{version}: respond= failed") from exc
            else:
                assert action.error is not None
                response = error_response(header.api_key, version, decoded.request, action.error)
            return self._encode(
                header, handler.name, version, correlation_id, response, decoded.request
            )
        outcome = self._serve(decoded, client_host, stepped, action, session)
        if action.delay or action.lose_response:
            return FaultedReply(outcome, delay=action.delay, close=action.lose_response)
        return outcome

    def _serve(
        self,
        decoded: Decoded,
        client_host: str,
        stepped: bool,
        fault: Fault | None = None,
        session: Session = OPEN_SESSION,
    ) -> messages.Encoded | PendingReply | SteppedReply | None:
        handler, header = decoded.handler, decoded.header
        version, correlation_id = header.api_version, header.correlation_id
        ctx = RequestContext(self.cluster, self.node_id, header, client_host, fault, session)
        if self.cluster.acls.enabled:
            try:
                refused = access.refusal(ctx, decoded.request)
            except access.SuperUsersOnly as exc:
                self._record(header, handler.name, version, correlation_id, "closed: not allowed")
                raise CloseConnection(
                    f"{handler.name} is served to super users only while ACLs are on"
                ) from exc
            if refused is not None:
                response = error_response(header.api_key, version, decoded.request, refused)
                return self._encode(
                    header, handler.name, version, correlation_id, response, decoded.request
                )
        started = time.perf_counter_ns()
        try:
            result = handler.handle(ctx, decoded.request)
        except Exception as exc:
            # A handler bug met by odd input: this client loses its connection, the
            # broker and every other connection carry on.
            log.exception("node %d: %s v%d failed", self.node_id, handler.name, version)
            self._record(header, handler.name, version, correlation_id, "closed: handler error")
            raise CloseConnection(f"{handler.name} v{version} failed: {exc!r}") from exc
        storage = self.cluster.storage
        if storage is not None and storage.dirty:
            try:
                storage.request_done()
            except OSError as exc:
                # Not known to be on disk: no answer, so the client does not count on it.
                storage.storage_error(f"node {self.node_id}: syncing before an answer", exc)
                raise CloseConnection(f"data directory sync failed: {exc}") from exc
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "node %d %s v%d from %s", self.node_id, handler.name, version, header.client_id
            )
        usage = None
        if self.cluster.client_quotas.any and header.api_key not in QUOTA_EXEMPT_APIS:
            usage = QuotaUse(
                session,
                quota_user(session.principal),
                header.client_id or "",
                decoded.size,
                time.perf_counter_ns() - started,
            )
        if result is None:
            if usage is not None:  # acks=0: over its byte rate, the connection is muted
                self._enforce(header, usage, None)
            self._record(header, handler.name, version, correlation_id, "ok")
            return None
        if isinstance(result, Pending):
            pending = result

            def finish(final: bool) -> messages.Encoded | None:
                response: Any = pending.poll(final)
                if response is None:
                    return None
                return self._encode(
                    header, handler.name, version, correlation_id, response, decoded.request, usage
                )

            return PendingReply(
                deadline=pending.deadline, finish=finish, wait_keys=pending.wait_keys
            )
        if isinstance(result, Steps):
            pieces = self._pieces(handler, header, result, decoded.request, usage)
            if stepped:
                return SteppedReply(pieces)
            encoded: messages.Encoded = Steps(pieces).run()
            return encoded
        return self._encode(
            header, handler.name, version, correlation_id, result, decoded.request, usage
        )

    def take_throttle(self, session: Session) -> int:
        """Milliseconds the connection of `session` is to be muted for after its last
        answer (0: not over a client quota)."""
        return self._throttles.pop(session, 0)

    def _enforce(
        self, header: messages.RequestHeader, usage: QuotaUse, response_bytes: int | None
    ) -> int:
        """Record a request against its connection's client quotas (state/quotas.py): the
        throttle time it earns, as Kafka's KafkaApis takes it (the larger of the byte-rate
        and the request-time throttles)."""
        quotas = self.cluster.client_quotas
        now_ms = self.cluster.clock.monotonic() * 1000
        user, client_id = usage.user, usage.client_id
        bandwidth = 0
        if header.api_key == PRODUCE_KEY:
            bandwidth = quotas.record(
                PRODUCER_BYTE_RATE, user, client_id, usage.request_bytes, now_ms
            )
        elif header.api_key == FETCH_KEY and response_bytes is not None:
            bandwidth = quotas.record(CONSUMER_BYTE_RATE, user, client_id, response_bytes, now_ms)
        request_time = 0
        if response_bytes is not None:  # an acks=0 Produce is not counted by its time
            percent = usage.handled_ns * NANOS_TO_PERCENT
            request_time = quotas.record(REQUEST_PERCENTAGE, user, client_id, percent, now_ms)
        throttle = max(bandwidth, request_time)
        if throttle > 0:
            self._throttles[usage.session] = throttle
            if header.api_key == FETCH_KEY and response_bytes is not None:
                # Answered empty (below): what it would have carried is not counted.
                quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, response_bytes)
        return throttle

    def _throttled(self, response: Any, throttle_ms: int) -> Any:
        """`response` reporting `throttle_ms`, where its version has a throttle time."""
        body = response.response if isinstance(response, messages.SplicedResponse) else response
        if "throttle_time" not in getattr(body, "__dataclass_fields__", {}):
            return response
        body = dataclasses.replace(body, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
        if isinstance(response, messages.SplicedResponse):
            return dataclasses.replace(response, response=body)
        return body

    def _pieces(
        self,
        handler: ApiHandler,
        header: messages.RequestHeader,
        steps: Steps,
        request: Any = None,
        usage: QuotaUse | None = None,
    ) -> Generator[None, None, messages.Encoded]:
        version, correlation_id = header.api_version, header.correlation_id
        try:
            response = yield from steps.pieces
        except Exception as exc:
            log.exception("node %d: %s v%d failed", self.node_id, handler.name, version)
            self._record(header, handler.name, version, correlation_id, "closed: handler error")
            raise CloseConnection(f"{handler.name} v{version} failed: {exc!r}") from exc
        return self._encode(header, handler.name, version, correlation_id, response, request, usage)

    def _encode(
        self,
        header: messages.RequestHeader,
        name: str,
        version: int,
        correlation_id: int,
        response: Any,
        request: Any = None,
        usage: QuotaUse | None = None,
    ) -> messages.Encoded:
        """The framed answer, recorded as sent; a response the handler built wrongly
        (a field the version cannot carry) closes the connection and says so. Over a
        client quota it reports the throttle time; a throttled Fetch is answered empty."""
        if self.throttle_ms:
            response = self._throttled(response, self.throttle_ms)
        try:
            encoded = messages.encode_response(
                correlation_id, response, version, in_pieces=self.in_pieces
            )
            if usage is not None:
                throttle = self._enforce(header, usage, len(encoded))
                if throttle > 0:
                    if header.api_key == FETCH_KEY:
                        response = _emptied_fetch(response)
                    response = self._throttled(response, max(throttle, self.throttle_ms))
                    encoded = messages.encode_response(
                        correlation_id, response, version, in_pieces=self.in_pieces
                    )
        except Exception as exc:
            log.exception("node %d: %s v%d response failed to encode", self.node_id, name, version)
            self._record(header, name, version, correlation_id, "closed: response failed to encode")
            raise CloseConnection(f"{name} v{version} response failed to encode: {exc!r}") from exc
        self._record(header, name, version, correlation_id, "ok")
        recording = self.recording
        if recording is not None and header is not None:
            try:
                recording.keep(time.time(), self.node_id, header, version, request, encoded)
            except Exception:  # the answer goes out whatever becomes of its record
                log.exception("node %d: recording %s v%d failed", self.node_id, name, version)
        return encoded
