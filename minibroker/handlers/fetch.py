"""Fetch (key 1), versions 4-17.

Every requested partition is listed in the response, empty ones included. Fetch
sessions are not created: the response carries session id 0, which tells clients to
keep sending full, session-less fetches; a non-zero session id is unknown
(FETCH_SESSION_ID_NOT_FOUND). When fewer than min_bytes are available the request
waits (long poll) until enough data arrives or max_wait passes.
Limits: partition_max_bytes per partition and max_bytes overall, except that the first
batch found is always returned whole so a consumer can make progress (KIP-74).
Not done: isolation (no transactions, so the last stable offset is the high watermark),
preferred read replicas, diverging epochs.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, millis
from minibroker.handlers.registry import Pending, RequestContext, api
from minibroker.state.topics import Topic

FIRST_TOPIC_ID_VERSION = 13


def _topic_of(ctx: RequestContext, fetch_topic: Any) -> tuple[Topic | None, ErrorCode]:
    if ctx.version >= FIRST_TOPIC_ID_VERSION:
        topic = ctx.cluster.topics.by_id(fetch_topic.topic_id)
        return topic, ErrorCode.unknown_topic_id
    topic = ctx.cluster.topics.get(fetch_topic.topic)
    return topic, ErrorCode.unknown_topic_or_partition


def _collect(ctx: RequestContext, request: Any) -> tuple[Any, int]:
    """Build the response from what is stored now; also return the record bytes in it."""
    budget = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    total = 0
    topic_responses = []
    for fetch_topic in request.topics:
        topic, missing_code = _topic_of(ctx, fetch_topic)
        partitions = []
        for wanted in fetch_topic.partitions:
            code = ErrorCode.none
            data = b""
            high_watermark = log_start = -1
            if topic is None:
                code = missing_code
            elif not 0 <= wanted.partition < len(topic.partitions):
                code = ErrorCode.unknown_topic_or_partition
            elif topic.partitions[wanted.partition].leader != ctx.node_id:
                code = ErrorCode.not_leader_or_follower
            else:
                log = topic.partitions[wanted.partition].log
                high_watermark, log_start = log.high_watermark, log.log_start_offset
                offset = wanted.fetch_offset
                if offset < log_start or offset > high_watermark:
                    code = ErrorCode.offset_out_of_range
                elif budget > 0:
                    limit = min(wanted.partition_max_bytes, budget)
                    data = log.read(offset, limit, allow_oversized_first=total == 0)
                    total += len(data)
                    budget -= len(data)
            partitions.append(
                ctx.make(
                    "PartitionData",
                    partition_index=wanted.partition,
                    error_code=code,
                    high_watermark=high_watermark,
                    last_stable_offset=high_watermark,
                    log_start_offset=log_start,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=data,
                )
            )
        topic_responses.append(
            ctx.make(
                "FetchableTopicResponse",
                topic=getattr(fetch_topic, "topic", None),
                topic_id=getattr(fetch_topic, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    response = ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(topic_responses),
        node_endpoints=(),
    )
    return response, total


def _has_errors(response: Any) -> bool:
    return any(p.error_code != ErrorCode.none for t in response.responses for p in t.partitions)


@api(1, "Fetch", 4, 17)
def handle(ctx: RequestContext, request: Any) -> Any:
    session_id = getattr(request, "session_id", 0)
    if session_id != 0:
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
            node_endpoints=(),
        )
    response, size = _collect(ctx, request)
    wait_ms = millis(request.max_wait)
    if size >= request.min_bytes or wait_ms <= 0 or _has_errors(response):
        return response

    def poll(final: bool) -> Any:
        again, again_size = _collect(ctx, request)
        if final or again_size >= request.min_bytes or _has_errors(again):
            return again
        return None

    return Pending(deadline=ctx.cluster.clock.monotonic() + wait_ms / 1000, poll=poll)
