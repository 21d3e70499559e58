"""Access control lists and the decision they make, as Kafka's StandardAuthorizer makes it.

Rules:
- An ACL binds a resource pattern (resource type, name, LITERAL or PREFIXED) to an entry:
  principal (`User:alice`, or `User:*` for everyone), host (an IP address, or `*`),
  operation and permission (ALLOW or DENY).
- A request is allowed when the principal is a super user; otherwise the ACLs matching
  the resource decide. A LITERAL pattern matches its own name and, named `*`, every name;
  a PREFIXED pattern every name starting with it. An entry matches the principal itself
  or `User:*`, the client's host itself or `*`.
- DENY wins: a matching DENY for the operation (or ALL) refuses it.
- Otherwise a matching ALLOW for the operation (or ALL) allows it. DESCRIBE is implied by
  an ALLOW of READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
- A resource no ACL matches at all is refused, unless allow_everyone_if_no_acl_found
  (Kafka's allow.everyone.if.no.acl.found).
- With ACLs off (the default, as with no authorizer on Kafka) everything is allowed and
  the ACL APIs answer SECURITY_DISABLED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"
EVERYONE = "User:*"

_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


class InvalidAcl(ValueError):
    """An ACL that cannot be stored (Kafka answers INVALID_REQUEST); the message says why."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> AclBinding:
        """The binding, if it can be stored; InvalidAcl otherwise."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("Resource name should not be empty")
        kind, colon, name = self.principal.partition(":")
        if not colon or not kind or not name:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}`")
        if not self.host:
            raise InvalidAcl("Invalid host: it should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        return self

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None (or ANY) matches everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def check(self) -> AclFilter:
        for kind in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if kind.name == "UNKNOWN":
                raise InvalidAcl(f"Invalid filter: {type(kind).__name__} UNKNOWN")
        return self

    def matches(self, binding: AclBinding) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != binding.resource_type
        ):
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not Operation.ANY and self.operation != binding.operation:
            return False
        return self.permission is Permission.ANY or self.permission == binding.permission

    def _matches_pattern(self, binding: AclBinding) -> bool:
        pattern = self.pattern_type
        if pattern is PatternType.MATCH:
            # Every pattern that applies to the named resource (Kafka's MATCH filter).
            name = self.resource_name
            return name is None or binding.matches_resource(binding.resource_type, name)
        if pattern is not PatternType.ANY and pattern != binding.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name


class Acls:
    """The cluster's ACLs and the decisions they make (the rules above)."""

    def __init__(
        self,
        *,
        enabled: bool = False,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: dict[AclBinding, None] = {}  # insertion order kept

    def __len__(self) -> int:
        return len(self._bindings)

    def add(self, binding: AclBinding) -> None:
        self._bindings[binding.check()] = None

    def describe(self, selection: AclFilter) -> list[AclBinding]:
        return [b for b in self._bindings if selection.matches(b)]

    def delete(self, selection: AclFilter) -> list[AclBinding]:
        removed = self.describe(selection)
        for binding in removed:
            del self._bindings[binding]
        return removed

    def allows_some(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type is open to `operation` for the principal:
        an ALLOW for it (or ALL) naming the principal or everyone, on any pattern, that no
        DENY on every name (`*`) cancels (Kafka's authorizeByResourceType)."""
        if not self.enabled or principal in self.super_users:
            return True
        entry_matches = [
            b
            for b in self._bindings
            if b.resource_type is resource_type
            and b.principal in (principal, EVERYONE)
            and b.host in (host, WILDCARD)
            and b.operation in (operation, Operation.ALL)
        ]
        if any(
            b.permission is Permission.DENY
            and b.pattern_type is PatternType.LITERAL
            and b.resource_name == WILDCARD
            for b in entry_matches
        ):
            return False
        return any(b.permission is Permission.ALLOW for b in entry_matches)

    def allows(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        found = False
        allowed = False
        granting = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
        for binding in self._bindings:
            if not binding.matches_resource(resource_type, name):
                continue
            found = True
            if binding.principal not in (principal, EVERYONE) or binding.host not in (
                host,
                WILDCARD,
            ):
                continue
            if binding.permission is Permission.DENY:
                if binding.operation in (operation, Operation.ALL):
                    return False
            elif binding.operation in granting:
                allowed = True
        return allowed or (not found and self.allow_if_no_acl)
