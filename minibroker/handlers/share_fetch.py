"""ShareFetch (key 78), versions 1-2 (Kafka 4.4's range).

A member of a share group fetches records acquired for it alone (state/share_partitions.py
has the rules) within its share session (state/share_sessions.py has the epochs).
Acknowledgements ride along: each acknowledged partition's result is its
acknowledge_error_code. The records returned are the log's batches covering the acquired
offsets, with acquired_records ranges and their delivery counts; the consumer drops the
records outside them. A full fetch (epoch 0), and any answer with records, lists every
partition of its session; a later one without records only those with an error or an
acknowledgement result, as Kafka 4.4 lists them. When nothing can be acquired the request waits
(long poll) up to max_wait, woken by appends to its partitions and by records released
(acknowledgements, expired locks, share sessions closing).
Checks as Kafka's KafkaApis: a group id (INVALID_REQUEST), READ on the group
(GROUP_AUTHORIZATION_FAILED), a member id of 1 to 36 characters (INVALID_REQUEST), READ
on each topic (TOPIC_AUTHORIZATION_FAILED), UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER
with current_leader and node_endpoints. A share group no member ever joined has no
share-partition state to start from: Kafka 4.4 answers its partitions
UNKNOWN_SERVER_ERROR, and so does this broker. Group membership is not checked, as Kafka 4.4's
share-partition leaders do not check it (the group coordinator assigns partitions; a
partition's leader serves whichever member id fetches): records are acquired for the
member id the request names, and only that member id may acknowledge them.
v2: a renew-only request (is_renew_ack, with max_bytes, min_bytes, max_records and
max_wait 0, else INVALID_REQUEST) acknowledges without fetching, and only it may renew
(type 4); share_acquire_mode 1 (record limit) keeps max_records strictly.
New records are taken whole batches at a time up to max_bytes (at most the broker's
fetch_max_bytes; the first batch always, as Fetch does); records acquired again after a
release are not counted against it. The session's partitions are taken in turn from the
one at the request's epoch (Kafka 4.4's round robin), so max_records is shared out.
Not done: min_bytes beyond answering as soon as something was acquired.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers import _share
from minibroker.handlers._common import NO_THROTTLE, millis
from minibroker.handlers.registry import Pending, RequestContext, api
from minibroker.protocol import records
from minibroker.state.log import PartitionLog
from minibroker.state.share_partitions import Acquired
from minibroker.state.share_sessions import FINAL_EPOCH, ShareSession
from minibroker.state.topics import Topic

DEFAULT_MAX_RECORDS = 500
RECORD_LIMIT_MODE = 1


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=NO_THROTTLE,
        responses=(),
        node_endpoints=(),
    )


def _records(log: PartitionLog, acquired: list[Acquired]) -> bytes:
    """The log's batches covering the acquired offsets, each once."""
    out = bytearray()
    emitted_to = -1  # the first offset after the last batch written
    for item in acquired:
        start = max(item.first, emitted_to)
        if start > item.last:
            continue
        pieces, _ = log.read_pieces(start, 2**31 - 1, end_offset=item.last + 1)
        data = b"".join(pieces)
        position = 0
        while position + records.HEADER_SIZE <= len(data):
            header = records.read_header(data, position)
            if header.base_offset > item.last:
                break
            end = position + header.total_size
            last = header.base_offset + header.last_offset_delta
            if last >= emitted_to:
                out += data[position:end]
                emitted_to = last + 1
            position = end
    return bytes(out)


class _Answer:
    """The partitions of one response, by topic id, in the order first met."""

    def __init__(self) -> None:
        self.topics: dict[Any, dict[int, dict[str, Any]]] = {}
        self.leaders: set[int] = set()

    def entry(self, topic_id: Any, index: int, topic: Topic | None) -> dict[str, Any]:
        partitions = self.topics.setdefault(topic_id, {})
        found = partitions.get(index)
        if found is None:
            leader, epoch = _share.leader_of(topic, index)
            found = partitions[index] = {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "acknowledge_error_code": 0,
                "current_leader": (leader, epoch),
                "records": b"",
                "acquired_records": (),
            }
        return found

    def error(self, topic_id: Any, index: int, topic: Topic | None, code: ErrorCode) -> None:
        entry = self.entry(topic_id, index, topic)
        entry["error_code"] = code
        if code == ErrorCode.not_leader_or_follower:
            leader = entry["current_leader"][0]
            if leader >= 0:
                self.leaders.add(leader)

    def build(self, ctx: RequestContext, group_id: str) -> Any:
        responses = []
        for topic_id, partitions in self.topics.items():
            built = []
            for fields in partitions.values():
                leader, epoch = fields["current_leader"]
                built.append(
                    ctx.make(
                        "PartitionData",
                        **{
                            **fields,
                            "current_leader": ctx.make(
                                "LeaderIdAndEpoch", leader_id=leader, leader_epoch=epoch
                            ),
                        },
                    )
                )
            responses.append(
                ctx.make("ShareFetchableTopicResponse", topic_id=topic_id, partitions=tuple(built))
            )
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            acquisition_lock_timeout=_share.lock_timeout(ctx, group_id),
            responses=tuple(responses),
            node_endpoints=_share.endpoints(ctx, self.leaders),
        )


def _acquire(
    ctx: RequestContext,
    request: Any,
    session: ShareSession,
    answer: _Answer,
    *,
    first_try: bool,
) -> bool:
    """Acquire records of the session's partitions into `answer`; whether any were (or
    a partition has an error to answer with)."""
    cluster = ctx.cluster
    group_id, member_id = request.group_id, request.member_id
    budget = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    strict = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT_MODE
    byte_budget = cluster.config.fetch_max_bytes
    if request.max_bytes > 0:
        byte_budget = min(byte_budget, request.max_bytes)
    found = acquired_any = False
    now = cluster.clock.monotonic()
    group_exists = cluster.group_type(group_id) == "share"

    def started(topic_name: str, index: int) -> bool:
        known = cluster.share_partitions.partition(group_id, topic_name, index) is not None
        return group_exists or known

    for topic_id, index in _rotated(list(session.partitions), request.share_session_epoch):
        topic, code = _share.locate(ctx, topic_id, index)
        if code != ErrorCode.none:
            if first_try:
                answer.error(topic_id, index, topic, code)
            found = True
            continue
        assert topic is not None
        if not started(topic.name, index):
            # Kafka 4.4 starts a share partition's state when its group coordinator hands
            # the partition out; in a group no member ever joined it has none to read.
            if first_try:
                answer.error(topic_id, index, topic, ErrorCode.unknown_server_error)
            found = True
            continue
        if budget <= 0 or byte_budget <= 0:
            continue
        acquired = cluster.share_partitions.acquire(
            group_id,
            topic.name,
            index,
            member_id,
            now,
            budget,
            strict=strict,
            max_bytes=byte_budget,
        )
        if not acquired:
            continue
        found = True
        budget -= sum(item.last - item.first + 1 for item in acquired)
        entry = answer.entry(topic_id, index, topic)
        entry["records"] = _records(topic.partitions[index].log, acquired)
        byte_budget -= len(entry["records"])
        entry["acquired_records"] = tuple(
            ctx.make(
                "AcquiredRecords",
                first_offset=item.first,
                last_offset=item.last,
                delivery_count=item.delivery_count,
            )
            for item in acquired
        )
        acquired_any = True
    if acquired_any:
        # An answer with records lists every partition of the session, as Kafka 4.4's
        # (a later fetch with none lists only errors and acknowledgement results).
        for topic_id, index in session.partitions:
            answer.entry(topic_id, index, cluster.topics.by_id(topic_id))
    return found


def _rotated(partitions: list[Any], epoch: int) -> list[Any]:
    """The session's partitions from the one at the request's epoch on (Kafka 4.4's
    round-robin PartitionRotateStrategy), so max_records does not always go to the
    first ones."""
    if epoch < 1 or len(partitions) < 2:
        return partitions
    turn = epoch % len(partitions)
    return partitions[turn:] + partitions[:turn]


def _wait_keys(ctx: RequestContext, session: ShareSession) -> tuple[Any, ...]:
    keys = []
    for topic_id, index in session.partitions:
        topic, code = _share.locate(ctx, topic_id, index)
        if code == ErrorCode.none and topic is not None:
            keys.append(topic.partitions[index].log)
    return tuple(keys)


@api(78, "ShareFetch", 1, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    group_id, member_id = request.group_id, request.member_id
    refused = _share.refusal(ctx, request)
    if refused is not None:
        return _error(ctx, *refused)
    renew_ack = bool(getattr(request, "is_renew_ack", False))
    if renew_ack and (
        request.max_bytes or request.min_bytes or request.max_records or millis(request.max_wait)
    ):
        # A renew-only request fetches nothing: Kafka 4.4 wants its fetch fields zero.
        return _error(
            ctx,
            ErrorCode.invalid_request,
            "max_bytes, min_bytes, max_records and max_wait must be 0 with is_renew_ack",
        )
    epoch = request.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [
        (t.topic_id, index) for t in request.forgotten_topics_data for index in t.partitions
    ]
    sessions = ctx.cluster.share_partitions.sessions(ctx.node_id)
    sessions.max_sessions = _share.max_sessions(ctx)
    step = sessions.fetch(
        group_id, member_id, epoch, wanted, forgotten, has_acks=has_acks, connection=ctx.session
    )
    if step.error != ErrorCode.none or step.session is None:
        return _error(ctx, step.error)
    if step.full:
        _share.end_with_connection(ctx)
    session = step.session
    answer = _Answer()
    if step.full:
        # A full fetch lists every partition of the session, records or not (Kafka 4.4);
        # a later one only those with records, an error or an acknowledgement result.
        for topic_id, index in session.partitions:
            answer.entry(topic_id, index, ctx.cluster.topics.by_id(topic_id))
    for fetch_topic in request.topics:
        for wanted_partition in fetch_topic.partitions:
            batches = wanted_partition.acknowledgement_batches
            if not batches:
                continue
            index = wanted_partition.partition_index
            topic, code = _share.locate(ctx, fetch_topic.topic_id, index)
            message = None
            if code == ErrorCode.none and topic is not None:
                code, message = _share.acknowledge(
                    ctx, group_id, member_id, topic, index, batches, renew_ack
                )
            entry = answer.entry(fetch_topic.topic_id, index, topic)
            entry["acknowledge_error_code"] = code
            entry["acknowledge_error_message"] = message
    if epoch == FINAL_EPOCH:
        _share.close_session(ctx, session)
        return answer.build(ctx, group_id)
    if renew_ack:
        return answer.build(ctx, group_id)
    wait_ms = millis(request.max_wait)
    if _acquire(ctx, request, session, answer, first_try=True) or wait_ms <= 0:
        return answer.build(ctx, group_id)

    def poll(final: bool) -> Any:
        if _acquire(ctx, request, session, answer, first_try=False) or final:
            return answer.build(ctx, group_id)
        return None

    return Pending(
        deadline=ctx.cluster.clock.monotonic() + wait_ms / 1000,
        poll=poll,
        wait_keys=_wait_keys(ctx, session),
    )
