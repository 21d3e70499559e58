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
    string_field,
)
from minibroker.state.acl import (
    CLUSTER_NAME,
    OPERATIONS_NOT_REQUESTED,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

NO_AUTHORIZER = "No Authorizer is configured."


# Each enum's members by value: a lookup costs less than calling the enum.
_MEMBERS: dict[Any, dict[int, Any]] = {
    kind: {member.value: member for member in kind}
    for kind in (ResourceType, PatternType, Operation, Permission)
}


def _enum(kind: Any, value: int) -> Any:
    member = _MEMBERS[kind].get(value)
    if member is None:
        raise InvalidAcl(f"Invalid {kind.__name__} {value}")
    return member


def binding_of(creation: Any) -> AclBinding:
    """The ACL a creation asks for (the store checks it: state/acl.py)."""
    return AclBinding(
        _enum(ResourceType, creation.resource_type),
        creation.resource_name,
        _enum(PatternType, creation.resource_pattern_type),
        creation.principal,
        creation.host,
        _enum(Operation, creation.operation),
        _enum(Permission, creation.permission_type),
    )


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


def authorized_operations(
    ctx: RequestContext, resource_type: ResourceType, name: str, asked: bool = True
) -> int:
    """What a describe answers as the client's authorized operations on a resource:
    the bit set the ACLs allow (state/acl.py), or Kafka's "not requested" value."""
    if not asked:
        return OPERATIONS_NOT_REQUESTED
    return ctx.cluster.acls.authorized_operations(
        ctx.session.principal, ctx.client_host, resource_type, name
    )


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka accepts either)."""
    return ctx.allows(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or ctx.allows(
        Operation.CREATE, ResourceType.TOPIC, name
    )


# Creations or filters worked out per turn of the event loop, and ACLs read, described
# or deleted per turn: a piece takes about as long as serving a small request, so a
# client creating or describing many ACLs shares the broker with the others.
CREATIONS_PER_PIECE = 10
ACLS_PER_PIECE = 50

_NO_TAGS = b"\x00"  # an empty tag section, ending every entity of a flexible version
_NO_ERROR = b"\x00\x00"  # error code 0 (int16)


class Entries:
    """The entries of an array as a handler works them out, a piece at a time: encoded
    one by one where the version's response can be spliced (messages.SplicedResponse),
    so that encoding a large answer never takes one turn of the event loop; kept as
    entities for the legacy versions, which the encoder writes whole."""

    def __init__(self, ctx: RequestContext) -> None:
        body = response_class(ctx.header.api_key, ctx.version)
        self.ctx = ctx
        self.spliced = body.__version__ == ctx.version
        self.flexible = bool(body.__flexible__)
        self.items: list[Any] = []

    def sibling(self) -> Entries:
        """Another array of the same response."""
        other = Entries.__new__(Entries)
        other.ctx, other.spliced, other.flexible = self.ctx, self.spliced, self.flexible
        other.items = []
        return other

    def encode(self, entity: Any) -> Any:
        """An entry as `items` holds it: its encoding, or (legacy) itself."""
        return encode_entity(entity) if self.spliced else entity

    def append(self, entity: Any) -> None:
        self.items.append(self.encode(entity))

    def description(self, binding: AclBinding) -> Any:
        """DescribeAcls: an AclDescription of the ACL, encoded where spliced."""
        if not self.spliced:
            return self.ctx.make(
                "AclDescription",
                principal=binding.principal,
                host=binding.host,
                operation=binding.operation,
                permission_type=binding.permission,
            )
        # principal, host, operation (int8), permission_type (int8)
        flexible = self.flexible
        return b"".join(
            (
                string_field(binding.principal, flexible),
                string_field(binding.host, flexible),
                bytes((binding.operation, binding.permission)),
                _NO_TAGS if flexible else b"",
            )
        )

    def resource(self, resource: tuple[int, str, int], count: int, acls: Any) -> None:
        """DescribeAcls: a DescribeAclsResource listing `count` ACLs, `acls` being their
        descriptions (`description`), joined where spliced."""
        resource_type, name, pattern_type = resource
        if not self.spliced:
            self.items.append(
                self.ctx.make(
                    "DescribeAclsResource",
                    resource_type=resource_type,
                    resource_name=name,
                    pattern_type=pattern_type,
                    acls=tuple(acls),
                )
            )
            return
        # resource_type (int8), resource_name, pattern_type (int8), acls
        flexible = self.flexible
        self.items.append(
            b"".join(
                (
                    bytes((resource_type,)),
                    string_field(name, flexible),
                    bytes((pattern_type,)),
                    array_length(count, flexible),
                    acls,
                    _NO_TAGS if flexible else b"",
                )
            )
        )

    def matching_acl(self, binding: AclBinding) -> None:
        """DeleteAcls: a DeleteAclsMatchingAcl for a deleted ACL."""
        if not self.spliced:
            self.items.append(
                self.ctx.make(
                    "DeleteAclsMatchingAcl",
                    error_code=ErrorCode.none,
                    error_message=None,
                    resource_type=binding.resource_type,
                    resource_name=binding.resource_name,
                    pattern_type=binding.pattern_type,
                    principal=binding.principal,
                    host=binding.host,
                    operation=binding.operation,
                    permission_type=binding.permission,
                )
            )
            return
        # error_code (int16), error_message (null), resource_type (int8), resource_name,
        # pattern_type (int8), principal, host, operation (int8), permission_type (int8)
        flexible = self.flexible
        self.items.append(
            b"".join(
                (
                    _NO_ERROR,
                    string_field(None, flexible),
                    bytes((binding.resource_type,)),
                    string_field(binding.resource_name, flexible),
                    bytes((binding.pattern_type,)),
                    string_field(binding.principal, flexible),
                    string_field(binding.host, flexible),
                    bytes((binding.operation, binding.permission)),
                    _NO_TAGS if flexible else b"",
                )
            )
        )

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

    def response(self, field: str, **fields: Any) -> Any:
        """The response with these entries as its array `field`, its last field."""
        if not self.spliced:
            return self.ctx.response(**fields, **{field: tuple(self.items)})
        response = self.ctx.response(**fields, **{field: ()})
        return SplicedResponse(response, self.items, int(self.flexible))
