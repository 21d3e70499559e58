"""What the ACL APIs share: reading bindings and filters from requests (state/acl.py
holds the rules), and who may call them."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers.registry import RequestContext
from minibroker.protocol.messages import (
    SplicedResponse,
    array_length,
    encode_entity,
    response_class,
)
from minibroker.state.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured."


def _enum(kind: Any, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise InvalidAcl(f"Invalid {kind.__name__} {value}") from None


def binding_of(creation: Any) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, creation.resource_type),
        creation.resource_name,
        _enum(PatternType, creation.resource_pattern_type),
        creation.principal,
        creation.host,
        _enum(Operation, creation.operation),
        _enum(Permission, creation.permission_type),
    ).check()


def filter_of(request: Any) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, request.resource_type_filter),
        request.resource_name_filter,
        _enum(PatternType, request.pattern_type_filter),
        request.principal_filter,
        request.host_filter,
        _enum(Operation, request.operation),
        _enum(Permission, request.permission_type),
    ).check()


def refusal(ctx: RequestContext, operation: Operation) -> tuple[ErrorCode, str | None] | None:
    """Why this client may not call an ACL API needing `operation` on the cluster, or
    None when it may."""
    if not ctx.cluster.acls.enabled:
        return ErrorCode.security_disabled, NO_AUTHORIZER
    if not ctx.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, None
    return None


TOPIC_CONFIG = 2  # DescribeConfigs / AlterConfigs resource types
BROKER_CONFIG = 4
GROUP_CONFIG = 32


def config_refusal(ctx: RequestContext, resource: Any, operation: Operation) -> ErrorCode | None:
    """TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED when the client may not do
    `operation` (DESCRIBE_CONFIGS, ALTER_CONFIGS) to a topic's, a broker's or a group's
    configs."""
    kind = resource.resource_type
    if kind == TOPIC_CONFIG and not ctx.allows(
        operation, ResourceType.TOPIC, resource.resource_name
    ):
        return ErrorCode.topic_authorization_failed
    if kind == BROKER_CONFIG and not ctx.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed
    if kind == GROUP_CONFIG and not ctx.allows(
        operation, ResourceType.GROUP, resource.resource_name
    ):
        return ErrorCode.group_authorization_failed
    return None


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka accepts either)."""
    return ctx.allows(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or ctx.allows(
        Operation.CREATE, ResourceType.TOPIC, name
    )


# Creations, or ACLs described or deleted, worked out per turn of the event loop.
ACLS_PER_PIECE = 1_000


class Entries:
    """The entries of an array as a handler works them out, a piece at a time: encoded
    one by one where the version's response can be spliced (messages.SplicedResponse),
    so that encoding a large answer never takes one turn of the event loop; kept as
    entities for the legacy versions, which the encoder writes whole."""

    def __init__(self, ctx: RequestContext) -> None:
        body = response_class(ctx.header.api_key, ctx.version)
        self.spliced = body.__version__ == ctx.version
        self.flexible = bool(body.__flexible__)
        self.items: list[Any] = []

    def encode(self, entity: Any) -> Any:
        """An entry as `items` holds it: its encoding, or (legacy) itself."""
        return encode_entity(entity) if self.spliced else entity

    def append(self, entity: Any) -> None:
        self.items.append(self.encode(entity))

    def holding(self, entity: Any, field: str) -> Any:
        """`entity` with these entries as its array `field`, its last field, as another
        Entries of the same request holds it (`encode`)."""
        if not self.spliced:
            return dataclasses.replace(entity, **{field: tuple(self.items)})
        empty = encode_entity(dataclasses.replace(entity, **{field: ()}))
        tags = int(self.flexible)  # a flexible entity ends with its (empty) tag section
        no_items = array_length(0, self.flexible)
        start = len(empty) - tags - len(no_items)
        if empty[start : len(empty) - tags] != no_items:
            raise ValueError(f"{field} is not the last field of {type(entity).__name__}")
        count = array_length(len(self.items), self.flexible)
        return b"".join([empty[:start], count, *self.items, empty[len(empty) - tags :]])

    def response(self, ctx: RequestContext, field: str, **fields: Any) -> Any:
        """The response with these entries as its array `field`, its last field."""
        if not self.spliced:
            return ctx.response(**fields, **{field: tuple(self.items)})
        response = ctx.response(**fields, **{field: ()})
        return SplicedResponse(response, self.items, int(self.flexible))
