"""Fetch (key 1), versions 4-17.

Every requested partition is listed in the response, empty ones included. Fetch
sessions are not created: a full fetch (session epoch 0 or -1, or any fetch before v7)
is answered with session id 0, which tells clients to keep sending full, session-less
fetches; an incremental fetch (any other epoch) names a session this broker does not
have, so it gets FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for an evicted session.
When fewer than min_bytes are available the request waits (long poll) until enough
data arrives or max_wait passes.
Limits: partition_max_bytes per partition, and overall the smaller of max_bytes and the
broker's fetch_max_bytes (Kafka's fetch.max.bytes) and, under a consumer_byte_rate quota,
what it allows in ten seconds (state/quotas.py), except that the first batch found is
always returned whole so a consumer can make progress (KIP-74). A partition listed more
than once is fetched and answered once, as Kafka does (its fetch data is keyed by
partition: a later entry's offsets replace an earlier one's, in the earlier one's place).
A waiting fetch is woken only by appends to the partitions it reads.
A partition answered with an error carries -1 as its high watermark, last stable and log
start offsets, as Kafka's does. A read_committed fetch (isolation level 1) reads only below
the last stable offset (the first offset of the oldest open transaction) and lists the
aborted transactions its records touch, so the client drops their records; a
read_uncommitted one reads up to the high watermark and has no list.
A partition whose stored batch fails its checks when read (a data directory's segment
damaged on disk) is answered CORRUPT_MESSAGE, and the damage is logged once
(storage/segmented_log.py): never an empty answer a consumer would repeat forever.
Not done: preferred read replicas, diverging epochs.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, millis
from minibroker.handlers.registry import Pending, RequestContext, api
from minibroker.protocol.fetch_response import (
    AbortedTransaction,
    PartitionAnswer,
    RecordPieces,
    suffix_size,
    write_topic,
)
from minibroker.protocol.messages import SplicedResponse
from minibroker.state.log import CorruptBatch, PartitionLog
from minibroker.state.quotas import CONSUMER_BYTE_RATE, WHOLE_MAX, quota_user
from minibroker.state.topics import Topic

FIRST_TOPIC_ID_VERSION = 13
NO_RECORDS = RecordPieces([], 0)
READ_COMMITTED = 1


def _topic_of(ctx: RequestContext, fetch_topic: Any) -> tuple[Topic | None, ErrorCode]:
    if ctx.version >= FIRST_TOPIC_ID_VERSION:
        topic = ctx.cluster.topics.by_id(fetch_topic.topic_id)
        return topic, ErrorCode.unknown_topic_id
    topic = ctx.cluster.topics.get(fetch_topic.topic)
    return topic, ErrorCode.unknown_topic_or_partition


def _locate(
    ctx: RequestContext, topic: Topic | None, missing_code: ErrorCode, wanted: Any
) -> tuple[PartitionLog | None, ErrorCode]:
    """The log a requested partition reads from, or why it cannot be read."""
    if topic is None:
        return None, missing_code
    if not 0 <= wanted.partition < len(topic.partitions):
        return None, ErrorCode.unknown_topic_or_partition
    if ctx.screened:
        injected = ctx.injected_error(topic.name, wanted.partition)
        if injected is not None:
            return None, injected
    partition = topic.partitions[wanted.partition]
    if partition.leader != ctx.node_id:
        return None, ErrorCode.not_leader_or_follower
    log = partition.log
    if not log.log_start_offset <= wanted.fetch_offset <= log.high_watermark:
        return log, ErrorCode.offset_out_of_range
    return log, ErrorCode.none


Wanted = list[tuple[Any, list[Any]]]


def _distinct(ctx: RequestContext, request: Any) -> Wanted:
    """The requested topics, each with its partitions, every partition once."""
    by_topic: dict[Any, tuple[Any, dict[int, Any]]] = {}
    for fetch_topic in request.topics:
        key = fetch_topic.topic_id if ctx.version >= FIRST_TOPIC_ID_VERSION else fetch_topic.topic
        partitions = by_topic.setdefault(key, (fetch_topic, {}))[1]
        for wanted in fetch_topic.partitions:
            partitions[wanted.partition] = wanted
    return [
        (fetch_topic, list(partitions.values())) for fetch_topic, partitions in by_topic.values()
    ]


def _can_answer(ctx: RequestContext, request: Any, wanted_topics: Wanted) -> bool:
    """Whether min_bytes are available or a partition has an error: the cheap test a
    waiting fetch repeats when a partition it reads changes, before any response is built."""
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    available = 0
    for fetch_topic, wanted_partitions in wanted_topics:
        topic, missing_code = _topic_of(ctx, fetch_topic)
        for wanted in wanted_partitions:
            log, code = _locate(ctx, topic, missing_code, wanted)
            if code != ErrorCode.none or log is None:
                return True
            end = log.last_stable_offset if committed else None
            try:
                stored = log.bytes_from(wanted.fetch_offset, end)
            except CorruptBatch:
                return True  # answered now, with the error
            available += min(stored, wanted.partition_max_bytes)
            if available >= request.min_bytes:
                return True
    return bool(available >= request.min_bytes)


def _logs(ctx: RequestContext, wanted_topics: Wanted) -> tuple[Hashable, ...]:
    """The partition logs a waiting fetch reads: the keys that wake it."""
    logs: list[Hashable] = []
    for fetch_topic, wanted_partitions in wanted_topics:
        topic, missing_code = _topic_of(ctx, fetch_topic)
        for wanted in wanted_partitions:
            log, _ = _locate(ctx, topic, missing_code, wanted)
            if log is not None:
                logs.append(log)
    return tuple(logs)


def _aborted(log: PartitionLog, offset: int, size: int) -> tuple[AbortedTransaction, ...]:
    """The aborted transactions a read_committed read of `size` bytes from `offset`
    touches (none when it read nothing)."""
    if not size or not log.aborted:
        return ()
    upper = log.offset_after_read(offset, size)
    return tuple(
        AbortedTransaction(t.producer_id, t.first_offset)
        for t in log.aborted_between(offset, upper)
    )


def _quota_window_bytes(ctx: RequestContext) -> int:
    window = ctx.cluster.client_quotas.max_in_window(
        CONSUMER_BYTE_RATE, quota_user(ctx.session.principal), ctx.header.client_id or ""
    )
    return WHOLE_MAX if window is None else max(1, int(window))


def _collect(ctx: RequestContext, request: Any, wanted_topics: Wanted) -> SplicedResponse:
    """Build the response from what is stored now (its topics written straight to bytes,
    protocol/fetch_response.py)."""
    budget = ctx.cluster.config.fetch_max_bytes
    if request.max_bytes > 0:
        budget = min(budget, request.max_bytes)
    if ctx.cluster.client_quotas.any:
        # As Kafka: no more than the consumer's byte-rate quota allows in one window, so
        # an answer is not throttled (and emptied) every time.
        budget = min(budget, _quota_window_bytes(ctx))
    first = True
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    pieces: list[bytes | memoryview] = []
    for fetch_topic, wanted_partitions in wanted_topics:
        topic, missing_code = _topic_of(ctx, fetch_topic)
        partitions = []
        for wanted in wanted_partitions:
            log, code = _locate(ctx, topic, missing_code, wanted)
            if code != ErrorCode.none or log is None:
                # A partition with an error carries no offsets (-1), as on Kafka.
                partitions.append(
                    PartitionAnswer(wanted.partition, code, -1, -1, -1, None, -1, b"")
                )
                continue
            data = NO_RECORDS
            stable = log.last_stable_offset
            try:
                if budget > 0:
                    limit = min(wanted.partition_max_bytes, budget)
                    data = RecordPieces(
                        *log.read_pieces(
                            wanted.fetch_offset,
                            limit,
                            allow_oversized_first=first,
                            end_offset=stable if committed else None,
                        )
                    )
                aborted = _aborted(log, wanted.fetch_offset, data.size) if committed else None
            except CorruptBatch:
                # Kafka's answer when its log cannot read a stored batch (a
                # CorruptRecordException): CORRUPT_MESSAGE, which consumers raise to the
                # application. KAFKA_STORAGE_ERROR would say the disk failed, and
                # consumers retry it forever, a silent stall.
                partitions.append(
                    PartitionAnswer(
                        wanted.partition, ErrorCode.corrupt_message, -1, -1, -1, None, -1, b""
                    )
                )
                continue
            first = first and not data.size
            budget -= data.size
            partitions.append(
                PartitionAnswer(
                    wanted.partition,
                    ErrorCode.none,
                    log.high_watermark,
                    stable,
                    log.log_start_offset,
                    aborted,
                    -1,
                    data,
                )
            )
        write_topic(
            ctx.version,
            getattr(fetch_topic, "topic", None),
            getattr(fetch_topic, "topic_id", None),
            partitions,
            pieces,
        )
    response = ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=(),
        node_endpoints=(),
    )
    return SplicedResponse(response, pieces, suffix_size(ctx.version), len(wanted_topics))


# Session epochs that ask for a full fetch (Kafka's FetchMetadata INITIAL_EPOCH and
# FINAL_EPOCH); a full fetch naming a session closes it, and none is ever kept here.
FULL_FETCH_EPOCH = 0
FINAL_EPOCH = -1


@api(1, "Fetch", 4, 17)
def handle(ctx: RequestContext, request: Any) -> Any:
    if getattr(request, "session_epoch", FULL_FETCH_EPOCH) not in (FULL_FETCH_EPOCH, FINAL_EPOCH):
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
            node_endpoints=(),
        )
    wanted_topics = _distinct(ctx, request)
    wait_ms = millis(request.max_wait)
    if wait_ms <= 0 or _can_answer(ctx, request, wanted_topics):
        return _collect(ctx, request, wanted_topics)

    def poll(final: bool) -> Any:
        if final or _can_answer(ctx, request, wanted_topics):
            return _collect(ctx, request, wanted_topics)
        return None

    return Pending(
        deadline=ctx.cluster.clock.monotonic() + wait_ms / 1000,
        poll=poll,
        wait_keys=_logs(ctx, wanted_topics),
    )
