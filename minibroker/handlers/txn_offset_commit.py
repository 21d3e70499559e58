"""TxnOffsetCommit (key 28), versions 0-5.

Sent to the group's coordinator: the offsets wait in the group, pending for the
producer's transaction, until its commit marker makes them the group's committed offsets
(or its abort drops them); OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for them meanwhile. v3+ carry the member id, instance id and
generation, checked as Kafka checks them (state/transaction_rules.py). v5 (transaction
version 2) first adds the group to the producer's transaction itself, as AddOffsetsToTxn
does before v5 (a fenced epoch is INVALID_PRODUCER_EPOCH). Unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION, metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE. A share
group's id is GROUP_ID_NOT_FOUND on every partition, as Kafka answers.
Not done: checking, before v5, that AddOffsetsToTxn added the group (Kafka 3.6+ answers
INVALID_TXN_STATE, TRANSACTION_ABORTABLE at v4, without it).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._groups import commit_answer, is_coordinator, requested_offsets
from minibroker.handlers._transactions import add_implicitly
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.groups import UNKNOWN_MEMBER

IMPLICIT_ADD_VERSION = 5


@api(28, "TxnOffsetCommit", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    offsets = requested_offsets(request)
    # Partitions of topics the client may not read are refused; the others are committed.
    denied = {
        (t, p): int(ErrorCode.topic_authorization_failed)
        for t, p, *_ in offsets
        if not ctx.allows(Operation.READ, ResourceType.TOPIC, t)
    }
    offsets = [o for o in offsets if (o[0], o[1]) not in denied]
    if not request.group_id:
        codes = {(t, p): rules.INVALID_GROUP_ID for t, p, *_ in offsets}
    elif not ctx.allows(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        refused = int(ErrorCode.transactional_id_authorization_failed)
        codes = {(t, p): refused for t, p, *_ in offsets}
    elif not ctx.allows(Operation.READ, ResourceType.GROUP, request.group_id):
        refused = int(ErrorCode.group_authorization_failed)
        codes = {(t, p): refused for t, p, *_ in offsets}
    elif not is_coordinator(ctx, request.group_id):
        codes = {(t, p): rules.NOT_COORDINATOR for t, p, *_ in offsets}
    elif ctx.version >= IMPLICIT_ADD_VERSION and (
        added := add_implicitly(
            ctx,
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            groups=(request.group_id,),
        )
    ):
        codes = {(t, p): added for t, p, *_ in offsets}
    elif request.group_id in ctx.cluster.share_groups.groups:
        # A share group keeps no committed offsets (Kafka: "not a consumer group").
        codes = {(t, p): rules.GROUP_ID_NOT_FOUND for t, p, *_ in offsets}
    else:
        codes = ctx.cluster.groups.commit_transactional(
            ctx.cluster.clock.monotonic(),
            group_id=request.group_id,
            producer_id=request.producer_id,
            generation=getattr(request, "generation_id", -1),
            member_id=getattr(request, "member_id", UNKNOWN_MEMBER),
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
        )
    return commit_answer(ctx, request, {**codes, **denied}, "TxnOffsetCommit")
