"""What the ACL APIs share: reading bindings and filters from requests (state/acl.py
holds the rules), and who may call them."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers.registry import RequestContext
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
