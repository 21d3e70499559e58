"""The authorization decision and the ACL store (state/acl.py), rule by rule."""

from __future__ import annotations

import pytest

from minibroker.state.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Acls,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(
    operation: Operation,
    name: str = "orders",
    *,
    resource: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    principal: str = ALICE,
    host: str = "*",
    permission: Permission = ALLOW,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def store(*bindings: AclBinding, **options: object) -> Acls:
    acls = Acls(enabled=True, **options)  # type: ignore[arg-type]
    for binding in bindings:
        acls.add(binding)
    return acls


def allowed(acls: Acls, operation: Operation, name: str = "orders", **kwargs: object) -> bool:
    principal = str(kwargs.get("principal", ALICE))
    resource = kwargs.get("resource", TOPIC)
    host = str(kwargs.get("host", HOST))
    return acls.allows(principal, host, operation, resource, name)  # type: ignore[arg-type]


def test_nothing_is_allowed_without_an_acl_unless_configured_or_acls_are_off() -> None:
    assert not allowed(store(), Operation.READ)
    assert allowed(store(allow_if_no_acl=True), Operation.READ)
    assert Acls(enabled=False).allows(BOB, HOST, Operation.ALTER, CLUSTER, CLUSTER_NAME)
    # A resource some ACL names is no longer "without an ACL", even for others.
    named = store(acl(Operation.READ), allow_if_no_acl=True)
    assert not allowed(named, Operation.READ, principal=BOB)
    assert allowed(named, Operation.READ, "payments", principal=BOB)


def test_an_allow_grants_its_operation_and_all_grants_every_one() -> None:
    acls = store(acl(Operation.READ))
    assert allowed(acls, Operation.READ)
    assert not allowed(acls, Operation.WRITE)
    assert not allowed(acls, Operation.READ, principal=BOB)
    everything = store(acl(Operation.ALL))
    assert all(allowed(everything, op) for op in (Operation.READ, Operation.WRITE, Operation.ALTER))


@pytest.mark.parametrize(
    "granted", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER]
)
def test_describe_is_implied_by_read_write_delete_and_alter(granted: Operation) -> None:
    assert allowed(store(acl(granted)), Operation.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert allowed(store(acl(Operation.ALTER_CONFIGS)), Operation.DESCRIBE_CONFIGS)
    assert not allowed(store(acl(Operation.WRITE)), Operation.DESCRIBE_CONFIGS)
    assert not allowed(store(acl(Operation.DESCRIBE)), Operation.READ)  # not the other way


def test_deny_wins_over_allow_but_implies_nothing() -> None:
    acls = store(acl(Operation.ALL), acl(Operation.WRITE, permission=DENY))
    assert not allowed(acls, Operation.WRITE)
    assert allowed(acls, Operation.READ)
    assert allowed(acls, Operation.DESCRIBE)  # a DENY of WRITE does not deny DESCRIBE
    deny_all = store(acl(Operation.READ), acl(Operation.ALL, permission=DENY, principal="User:*"))
    assert not allowed(deny_all, Operation.READ)


def test_wildcards_prefixes_principals_and_hosts() -> None:
    acls = store(
        acl(Operation.READ, "*"),
        acl(Operation.WRITE, "orders-", pattern=PREFIXED),
        acl(Operation.DELETE, "audit", principal="User:*"),
        acl(Operation.ALTER, "orders", host="10.0.0.1"),
    )
    assert allowed(acls, Operation.READ, "anything")
    assert allowed(acls, Operation.WRITE, "orders-eu")
    assert not allowed(acls, Operation.WRITE, "orders")  # the prefix is "orders-"
    assert not allowed(acls, Operation.WRITE, "eu-orders-1")
    assert allowed(acls, Operation.DELETE, "audit", principal=BOB)
    assert not allowed(acls, Operation.ALTER, "orders")
    assert allowed(acls, Operation.ALTER, "orders", host="10.0.0.1")
    # A literal "*" is a wildcard only as a name, and a resource type is its own.
    assert not allowed(acls, Operation.READ, "anything", resource=GROUP)


def test_super_users_may_do_everything() -> None:
    acls = store(acl(Operation.ALL, "*", principal="User:*", permission=DENY), super_users=[BOB])
    assert allowed(acls, Operation.ALTER, CLUSTER_NAME, resource=CLUSTER, principal=BOB)
    assert not allowed(acls, Operation.READ, principal=ALICE)


def test_allows_some_for_idempotent_producers() -> None:
    acls = store(acl(Operation.WRITE, "orders-", pattern=PREFIXED))
    assert acls.allows_some(ALICE, HOST, Operation.WRITE, TOPIC)
    assert not acls.allows_some(BOB, HOST, Operation.WRITE, TOPIC)
    acls.add(acl(Operation.WRITE, "*", permission=DENY))
    assert not acls.allows_some(ALICE, HOST, Operation.WRITE, TOPIC)


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(Operation.READ, resource=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(Operation.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(Operation.ANY), "Invalid operation ANY"),
        (acl(Operation.READ, permission=Permission.ANY), "Invalid permissionType ANY"),
        (acl(Operation.READ, ""), "Resource name should not be empty"),
        (acl(Operation.READ, principal="alice"), "Could not parse principal"),
        (acl(Operation.ALTER, "other", resource=CLUSTER), "kafka-cluster"),
    ],
)
def test_acls_that_cannot_be_stored(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        store(binding)


def test_filters_select_describe_and_delete() -> None:
    literal = acl(Operation.READ, "orders")
    prefixed = acl(Operation.WRITE, "ord", pattern=PREFIXED)
    wildcard = acl(Operation.DESCRIBE, "*", principal=BOB)
    group = acl(Operation.READ, "readers", resource=GROUP)
    acls = store(literal, prefixed, wildcard, group)
    assert acls.describe(AclFilter()) == [literal, prefixed, wildcard, group]
    assert acls.describe(AclFilter(resource_type=TOPIC, resource_name="orders")) == [literal]
    # MATCH: every ACL that applies to the named resource.
    match = AclFilter(resource_type=TOPIC, resource_name="orders", pattern_type=PatternType.MATCH)
    assert acls.describe(match) == [literal, prefixed, wildcard]
    assert acls.describe(AclFilter(principal=BOB)) == [wildcard]
    assert acls.describe(AclFilter(operation=Operation.WRITE, permission=ALLOW)) == [prefixed]
    assert acls.delete(AclFilter(resource_type=TOPIC, pattern_type=PREFIXED)) == [prefixed]
    assert acls.describe(AclFilter()) == [literal, wildcard, group]
    assert not allowed(acls, Operation.WRITE, "orders")
    acls.add(literal)  # the same ACL twice is stored once
    assert len(acls) == 3
