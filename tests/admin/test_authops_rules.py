"""The rules of authorized operations (state/acl.py) and of per-node broker configs
(state/broker_configs.py), without sockets."""

from __future__ import annotations

import random

import pytest

from minibroker.state.acl import (
    CLUSTER_NAME,
    OPERATIONS_NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    AclBinding,
    Acls,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    operation_bits,
)
from minibroker.state.broker_configs import (
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    BrokerConfigError,
    BrokerConfigs,
)
from minibroker.state.topic_configs import DELETE, SET

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE, HOST = "User:alice", "127.0.0.1"


def allow(
    kind: ResourceType,
    name: str,
    operation: Operation,
    permission: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(kind, name, pattern, ALICE, "*", operation, permission)


def test_the_bit_set_has_bit_n_for_operation_code_n() -> None:
    assert operation_bits([]) == 0
    assert operation_bits([Operation.READ]) == 8
    assert operation_bits([Operation.READ, Operation.READ, Operation.ALTER_CONFIGS]) == 8 | 2048
    # Kafka's answers without an authorizer (measured on Kafka 4.4)
    assert operation_bits(SUPPORTED_OPERATIONS[TOPIC]) == 3576
    assert operation_bits(SUPPORTED_OPERATIONS[GROUP]) == 3400
    assert operation_bits(SUPPORTED_OPERATIONS[CLUSTER]) == 8096
    assert OPERATIONS_NOT_REQUESTED == -(2**31)


@pytest.mark.parametrize("kind", [TOPIC, GROUP, CLUSTER])
def test_with_acls_off_or_for_a_super_user_every_supported_operation(kind: ResourceType) -> None:
    everything = operation_bits(SUPPORTED_OPERATIONS[kind])
    assert Acls(enabled=False).authorized_operations(ALICE, HOST, kind, "x") == everything
    supers = Acls(enabled=True, super_users=[ALICE])
    assert supers.authorized_operations(ALICE, HOST, kind, "x") == everything
    assert supers.authorized_operations("User:bob", HOST, kind, "x") == 0


def test_the_acls_decide_each_operation_with_implied_ones() -> None:
    acls = Acls(enabled=True)
    for binding in (
        allow(TOPIC, "orders", Operation.WRITE),
        allow(TOPIC, "ord", Operation.ALL, pattern=PatternType.PREFIXED),
        allow(TOPIC, "orders", Operation.DELETE, Permission.DENY),
        allow(GROUP, "billing", Operation.ALTER_CONFIGS),
        allow(CLUSTER, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE),
    ):
        acls.add(binding)
    topic = set(SUPPORTED_OPERATIONS[TOPIC]) - {Operation.DELETE}
    assert acls.authorized_operations(ALICE, HOST, TOPIC, "orders") == operation_bits(topic)
    # ALTER_CONFIGS brings DESCRIBE_CONFIGS (not DESCRIBE)
    assert acls.authorized_operations(ALICE, HOST, GROUP, "billing") == operation_bits(
        [Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS]
    )
    assert acls.authorized_operations(ALICE, HOST, CLUSTER, CLUSTER_NAME) == operation_bits(
        [Operation.IDEMPOTENT_WRITE]
    )
    assert acls.authorized_operations(ALICE, HOST, TOPIC, "payments") == 0
    assert acls.authorized_operations("User:bob", HOST, TOPIC, "orders") == 0


# --- per-node broker configs ---------------------------------------------------------------

RETENTION = "log.retention.ms"


def test_each_node_keeps_its_own_values_before_the_cluster_wide_ones() -> None:
    configs = BrokerConfigs({"message.max.bytes": "2000000", "num.partitions": "1"})
    assert configs.alter("1", [(RETENTION, SET, "7000")], node_id=1)
    assert configs.alter("", [(RETENTION, SET, "9000")], node_id=2)
    assert configs.value(RETENTION, 1) == "7000"
    assert configs.value(RETENTION, 2) == "9000"
    assert configs.value(RETENTION) == "9000"  # no node's own values
    own = configs.describe(RETENTION, 1)
    assert (own.value, own.source) == ("7000", SOURCE_DYNAMIC_BROKER)
    assert own.synonyms == (
        (RETENTION, "7000", SOURCE_DYNAMIC_BROKER),
        (RETENTION, "9000", SOURCE_DYNAMIC_DEFAULT_BROKER),
        ("log.retention.hours", "168", SOURCE_DEFAULT),
    )
    other = configs.describe(RETENTION, 2)
    assert (other.value, other.source) == ("9000", SOURCE_DYNAMIC_DEFAULT_BROKER)
    cluster_wide = configs.describe(RETENTION, None)
    assert cluster_wide.synonyms == ((RETENTION, "9000", SOURCE_DYNAMIC_DEFAULT_BROKER),)
    static = configs.describe("message.max.bytes", 2)
    assert (static.value, static.source) == ("2000000", SOURCE_STATIC_BROKER)
    # "" lists the cluster-wide values; a node also what it set itself
    assert configs.described_names(None) == [RETENTION]
    assert "my.setting" not in configs.described_names(1)
    configs.alter("2", [("my.setting", SET, "x")], node_id=2)
    assert "my.setting" in configs.described_names(2)
    assert "my.setting" not in configs.described_names(1)
    # topics follow the node given (a cluster of one) or the cluster-wide values
    assert configs.topic_default("retention.ms", 1).value == "7000"
    assert configs.topic_default("retention.ms").value == "9000"
    # DELETE goes back to the cluster-wide value
    assert configs.alter("1", [(RETENTION, DELETE, None)], node_id=1)
    assert configs.describe(RETENTION, 1).source == SOURCE_DYNAMIC_DEFAULT_BROKER


def test_a_change_naming_another_node_is_refused_and_changes_nothing() -> None:
    configs = BrokerConfigs({})
    with pytest.raises(BrokerConfigError) as refused:
        configs.replace("2", {RETENTION: "1"}, node_id=1)
    assert refused.value.message == "Unexpected broker id, expected 1, but received 2"
    assert configs.per_broker.get(2, {}) == {}
    assert not configs.replace("1", {RETENTION: "1"}, node_id=1, validate_only=True)
    assert configs.value(RETENTION, 1) is None


def test_the_bit_set_agrees_with_deciding_each_operation_alone() -> None:
    """One read of the ACLs gives what `allows` decides operation by operation."""
    rng = random.Random(7)
    names = ["orders", "ord", "*", "payments"]
    operations = [op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)]
    for _ in range(200):
        acls = Acls(enabled=True, allow_if_no_acl=rng.random() < 0.5)
        for _ in range(rng.randrange(6)):
            kind = rng.choice([TOPIC, GROUP, CLUSTER])
            pattern = rng.choice([PatternType.LITERAL, PatternType.PREFIXED])
            name = rng.choice(names)
            acls.add(
                AclBinding(
                    kind,
                    CLUSTER_NAME if kind is CLUSTER else name,
                    pattern,
                    rng.choice([ALICE, "User:*", "User:bob"]),
                    rng.choice(["*", HOST, "10.0.0.1"]),
                    rng.choice(operations),
                    rng.choice([Permission.ALLOW, Permission.DENY]),
                )
            )
        for kind in (TOPIC, GROUP, CLUSTER):
            name = CLUSTER_NAME if kind is CLUSTER else rng.choice([*names[:2], "other"])
            one_by_one = operation_bits(
                op for op in SUPPORTED_OPERATIONS[kind] if acls.allows(ALICE, HOST, op, kind, name)
            )
            assert acls.authorized_operations(ALICE, HOST, kind, name) == one_by_one
