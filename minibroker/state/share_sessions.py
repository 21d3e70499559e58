"""Share sessions of ShareFetch and ShareAcknowledge (KIP-932). Sans-IO.

Rules (Kafka 4.4's ShareSessionCache and SharePartitionManager):
- A session is keyed by (group, member) and holds the partitions the member fetches.
- ShareFetch epoch 0 opens a session (a full request: its partitions are the session's),
  replacing the member's existing one; it may not carry acknowledgements
  (INVALID_REQUEST). Epoch -1 closes the session after its acknowledgements and fetches
  nothing. Any other epoch must equal the session's next epoch
  (INVALID_SHARE_SESSION_EPOCH), then adds the request's partitions, removes its
  forgotten ones, and moves the epoch on (after 2^31-1 comes 1). No session:
  SHARE_SESSION_NOT_FOUND.
- ShareAcknowledge epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 acknowledges then closes
  the session; otherwise the epoch rules above, without changing partitions.
- At most group.share.max.share.sessions sessions (Kafka's default 2000); one more is
  SHARE_SESSION_LIMIT_REACHED.
- A session belongs to the connection that opened it (Kafka 4.4's ShareSessionCache):
  when that connection closes, the session ends and its member's acquired records are
  released at once. Leaving the group does not end it: a consumer that leaves and then
  acknowledges its last records over the session (librdkafka's order at close) has them
  applied.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2000

Partition = tuple[uuid.UUID, int]  # topic id, partition index


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    # Partitions in the order they were added (dict keys keep it).
    partitions: dict[Partition, None] = field(default_factory=dict)
    # The connection that opened it (its authentication Session object), if any.
    connection: object | None = None


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    """What a request's epoch did: an error, or the session and whether it was full."""

    error: ErrorCode
    session: ShareSession | None = None
    full: bool = False


class ShareSessions:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        wanted: Iterable[Partition],
        forgotten: Iterable[Partition],
        *,
        has_acks: bool,
        connection: object | None = None,
    ) -> SessionAnswer:
        """A ShareFetch's session step (see the rules); for epoch -1 the session is still
        there, to be closed by `close` after the acknowledgements."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return SessionAnswer(ErrorCode.invalid_request)
            replaced = self.sessions.pop(key, None)
            if replaced is None and len(self.sessions) >= self.max_sessions:
                return SessionAnswer(ErrorCode.share_session_limit_reached)
            opened = ShareSession(
                group_id, member_id, partitions=dict.fromkeys(wanted), connection=connection
            )
            self.sessions[key] = opened
            return SessionAnswer(ErrorCode.none, opened, full=True)
        session = self.sessions.get(key)
        if session is None:
            return SessionAnswer(ErrorCode.share_session_not_found)
        if epoch == FINAL_EPOCH:
            return SessionAnswer(ErrorCode.none, session)
        if epoch != session.epoch:
            return SessionAnswer(ErrorCode.invalid_share_session_epoch)
        for partition in forgotten:
            session.partitions.pop(partition, None)
        for partition in wanted:
            session.partitions.setdefault(partition, None)
        session.epoch = next_epoch(session.epoch)
        return SessionAnswer(ErrorCode.none, session)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionAnswer:
        """A ShareAcknowledge's session step."""
        if epoch == INITIAL_EPOCH:
            return SessionAnswer(ErrorCode.invalid_share_session_epoch)
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return SessionAnswer(ErrorCode.share_session_not_found)
        if epoch == FINAL_EPOCH:
            return SessionAnswer(ErrorCode.none, session)
        if epoch != session.epoch:
            return SessionAnswer(ErrorCode.invalid_share_session_epoch)
        session.epoch = next_epoch(session.epoch)
        return SessionAnswer(ErrorCode.none, session)

    def close(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)

    def connection_closed(self, connection: object) -> list[ShareSession]:
        """The sessions `connection` opened end; they are returned."""
        ended = [s for s in self.sessions.values() if s.connection is connection]
        for session in ended:
            del self.sessions[(session.group_id, session.member_id)]
        return ended

    def group_deleted(self, group_id: str) -> None:
        for key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[key]
