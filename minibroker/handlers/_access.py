"""ACLs before a handler runs: requests refused whole, and who may send the rest.

With ACLs on (state/acl.py), each API is one of:
- checked by its handler, resource by resource (topics, groups, configs, ACLs, the
  transactional APIs' partitions): HANDLER_CHECKED;
- open to every signed-in client: ApiVersions, the SASL APIs, DescribeCluster;
- refused whole, with the API's top-level error code, when the principal may not act
  on the group or transactional id it names (`refusal` below, Kafka's rules):
  FindCoordinator DESCRIBE on the group / transactional id; JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup READ on the group; InitProducerId WRITE on the transactional id,
  or for an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic;
  AddOffsetsToTxn WRITE on the transactional id and READ on the group; EndTxn WRITE on
  the transactional id;
- the rest (DescribeLogDirs, ElectLeaders, OffsetDelete, DescribeProducers,
  DescribeTransactions, ListTransactions) are served to super users only: anyone else's
  connection is closed (SUPER_USERS_ONLY).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers.registry import RequestContext
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType

HANDLER_CHECKED = frozenset(
    {0, 1, 2, 3, 8, 9, 15, 16, 19, 20, 21, 23, 24, 28, 29, 30, 31, 32, 33, 37, 42, 44, 75}
)
OPEN = frozenset({17, 18, 36, 60})
SUPER_USERS_ONLY = frozenset({35, 43, 47, 61, 65, 66})

GROUP_KEY_TYPE = 0


def _group(ctx: RequestContext, operation: Operation, group_id: str) -> ErrorCode | None:
    if ctx.allows(operation, ResourceType.GROUP, group_id):
        return None
    return ErrorCode.group_authorization_failed


def _transactional_id(ctx: RequestContext, operation: Operation, txn_id: str) -> ErrorCode | None:
    if ctx.allows(operation, ResourceType.TRANSACTIONAL_ID, txn_id):
        return None
    return ErrorCode.transactional_id_authorization_failed


def _find_coordinator(ctx: RequestContext, request: Any) -> ErrorCode | None:
    # v4+ lists its keys (perhaps none); earlier versions name one.
    keys = request.coordinator_keys if hasattr(request, "coordinator_keys") else (request.key,)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    for key in keys:
        refused = (
            _group(ctx, Operation.DESCRIBE, key)
            if key_type == GROUP_KEY_TYPE
            else _transactional_id(ctx, Operation.DESCRIBE, key)
        )
        if refused is not None:
            return refused
    return None


def _init_producer_id(ctx: RequestContext, request: Any) -> ErrorCode | None:
    if request.transactional_id is not None:
        return _transactional_id(ctx, Operation.WRITE, request.transactional_id)
    acls = ctx.cluster.acls
    if ctx.allows(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) or (
        acls.allows_some(
            ctx.session.principal, ctx.client_host, Operation.WRITE, ResourceType.TOPIC
        )
    ):
        return None
    return ErrorCode.cluster_authorization_failed


def _add_offsets_to_txn(ctx: RequestContext, request: Any) -> ErrorCode | None:
    return _transactional_id(ctx, Operation.WRITE, request.transactional_id) or _group(
        ctx, Operation.READ, request.group_id
    )


_RULES: dict[int, Callable[[RequestContext, Any], ErrorCode | None]] = {
    10: _find_coordinator,
    11: lambda ctx, request: _group(ctx, Operation.READ, request.group_id),
    12: lambda ctx, request: _group(ctx, Operation.READ, request.group_id),
    13: lambda ctx, request: _group(ctx, Operation.READ, request.group_id),
    14: lambda ctx, request: _group(ctx, Operation.READ, request.group_id),
    22: _init_producer_id,
    25: _add_offsets_to_txn,
    26: lambda ctx, request: _transactional_id(ctx, Operation.WRITE, request.transactional_id),
}


class SuperUsersOnly(Exception):
    """The API is served to super users only while ACLs are on."""


def refusal(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """The error a request is refused with whole, None to serve it (its handler may still
    refuse parts); SuperUsersOnly for an API served to super users only."""
    api_key = ctx.header.api_key
    rule = _RULES.get(api_key)
    if rule is not None:
        return rule(ctx, request)
    if api_key in SUPER_USERS_ONLY and ctx.session.principal not in ctx.cluster.acls.super_users:
        raise SuperUsersOnly(api_key)
    return None
