"""FindCoordinator (key 10), versions 0-6.

The coordinator of a group (key type 0) or transactional id (key type 1) is the leader of
partition abs(hashCode(key)) % partitions of __consumer_offsets (or __transaction_state),
created with offsets.topic.num.partitions partitions on first use. v4+ answers a batch of
keys. Other key types are INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api

KEY_TYPES = (0, 1)


def _locate(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int]:
    if key_type not in KEY_TYPES:
        return ErrorCode.invalid_request, f"key type {key_type} is not served", -1
    if not key:
        code = ErrorCode.invalid_group_id if key_type == 0 else ErrorCode.invalid_request
        return code, "empty key", -1
    return ErrorCode.none, None, ctx.cluster.coordinator_for(key, key_type)


@api(10, "FindCoordinator", 0, 6)
def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", 0)
    nodes = ctx.cluster.nodes
    if hasattr(request, "coordinator_keys"):
        coordinators = []
        for key in request.coordinator_keys:
            code, message, node_id = _locate(ctx, key, key_type)
            node = nodes.get(node_id)
            host, port = ctx.endpoint(node) if node else ("", -1)
            coordinators.append(
                ctx.make(
                    "Coordinator",
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=message,
                )
            )
        return ctx.response(throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
    code, message, node_id = _locate(ctx, request.key, key_type)
    node = nodes.get(node_id)
    host, port = ctx.endpoint(node) if node else ("", -1)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
