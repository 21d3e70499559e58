"""The one table of APIs this broker serves. ApiVersions is answered from it."""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.faults import Fault
from minibroker.protocol.messages import RequestHeader, build, response_class, response_module
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.cluster import ClusterState, Node
from minibroker.state.sessions import Session, open_session

# What each API does to the topics it names, for ACLs (Kafka's KafkaApis).
TOPIC_OPERATIONS = {
    0: Operation.WRITE,  # Produce
    1: Operation.READ,  # Fetch
    2: Operation.DESCRIBE,  # ListOffsets
    3: Operation.DESCRIBE,  # Metadata
    8: Operation.READ,  # OffsetCommit
    9: Operation.DESCRIBE,  # OffsetFetch
    21: Operation.DELETE,  # DeleteRecords
    23: Operation.DESCRIBE,  # OffsetForLeaderEpoch
    78: Operation.READ,  # ShareFetch
    79: Operation.READ,  # ShareAcknowledge
}

# Every request of a connection that needs no authentication (sans-IO callers, tests).
OPEN_SESSION = open_session()


@dataclass(slots=True)
class RequestContext:
    cluster: ClusterState
    node_id: int
    header: RequestHeader
    client_host: str = ""
    # A fault rule acting on this request (faults.py), or None.
    fault: Fault | None = None
    # The connection's listener and authentication (state/sessions.py).
    session: Session = OPEN_SESSION

    def allows(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the connection's principal may do `operation` on the resource
        (state/acl.py; always, with ACLs off)."""
        acls = self.cluster.acls
        if not acls.enabled:
            return True
        return acls.allows(self.session.principal, self.client_host, operation, resource_type, name)

    def now_ms(self) -> int:
        """Monotonic milliseconds of the cluster's clock (for deadlines)."""
        return int(self.cluster.clock.monotonic() * 1000)

    def endpoint(self, node: Node) -> tuple[str, int]:
        """Where a client of this connection's listener reaches `node`."""
        return node.endpoint(self.session.listener_name)

    @property
    def screened(self) -> bool:
        """Whether partitions may be refused before they are served: a fault rule acts on
        the request, or ACLs are on (`injected_error` then says which)."""
        return self.fault is not None or self.cluster.acls.enabled

    def injected_error(self, topic: str, partition: int | None) -> ErrorCode | None:
        """Why this partition (or topic, for None) is refused: the principal may not do
        what this API does to topics (TOPIC_AUTHORIZATION_FAILED), or a fault rule."""
        operation = TOPIC_OPERATIONS.get(self.header.api_key)
        if operation is not None and not self.allows(operation, ResourceType.TOPIC, topic):
            return ErrorCode.topic_authorization_failed
        return None if self.fault is None else self.fault.partition_error(topic, partition)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def module(self) -> ModuleType:
        return response_module(self.header.api_key, self.header.api_version)

    def response(self, **fields: Any) -> Any:
        """The response body at the request's version; fields it lacks are dropped."""
        return build(response_class(self.header.api_key, self.header.api_version), **fields)

    def make(self, struct_name: str, **fields: Any) -> Any:
        """A nested response structure (by its schema name) at the request's version."""
        return build(getattr(self.module, struct_name), **fields)


@dataclass(slots=True)
class Pending:
    """A response that is not ready yet (a long poll).

    The server calls `poll(False)` whenever one of `wait_keys` changes (see
    `ClusterState.announce`) and `poll(True)` at `deadline` (monotonic seconds);
    `poll` returns the response or None to keep waiting. With final=True it must return
    the response.
    """

    deadline: float
    poll: Callable[[bool], Any]
    wait_keys: tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class Steps:
    """A response worked out in bounded pieces, for requests whose size the client
    chooses (one CreateTopics may name 100,000 topics).

    Each `next()` of `pieces` does one piece; the generator's return value is the
    response. The server serves other connections between pieces, so one large request
    slows the others down instead of stopping them.
    """

    pieces: Generator[None, None, Any]

    def run(self) -> Any:
        """Every piece at once (sans-IO callers and tests)."""
        while True:
            try:
                next(self.pieces)
            except StopIteration as done:
                return done.value


Handler = Callable[[RequestContext, Any], Any]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler
    # What ApiVersions lists as the lowest version, when it is below the lowest served.
    advertised_min_version: int | None = None

    @property
    def advertised_min(self) -> int:
        if self.advertised_min_version is None:
            return self.min_version
        return self.advertised_min_version


HANDLERS: dict[int, ApiHandler] = {}


def api(
    api_key: int,
    name: str,
    min_version: int,
    max_version: int,
    *,
    advertised_min_version: int | None = None,
) -> Callable[[Handler], Handler]:
    def register(handle: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"api key {api_key} registered twice")
        HANDLERS[api_key] = ApiHandler(
            api_key, name, min_version, max_version, handle, advertised_min_version
        )
        return handle

    return register


def lookup(api_key: int, version: int) -> ApiHandler | None:
    handler = HANDLERS.get(api_key)
    if handler is None or not handler.min_version <= version <= handler.max_version:
        return None
    return handler
