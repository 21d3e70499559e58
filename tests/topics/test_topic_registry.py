"""TopicRegistry: names, configs, partitions, leaders, and the error codes of each refusal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.state.topic_configs import (
    DELETE,
    SET,
    TOPIC_CONFIG_DEFAULTS,
    apply_config_operations,
    validate_topic_configs,
)
from minibroker.state.topic_errors import (
    INVALID_CONFIG,
    INVALID_PARTITIONS,
    INVALID_REPLICATION_FACTOR,
    INVALID_TOPIC_EXCEPTION,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    TopicError,
)
from minibroker.state.topics import TopicRegistry, validate_topic_name


def _registry(brokers: list[int] | None = None) -> TopicRegistry:
    ids = brokers or [0]
    return TopicRegistry(lambda: ids)


def _code(call: object, *args: object, **kwargs: object) -> int:
    assert callable(call)
    with pytest.raises(TopicError) as info:
        call(*args, **kwargs)
    return info.value.error_code


def test_create_and_look_up() -> None:
    registry = _registry()
    topic = registry.create("orders", 3)
    assert topic is not None
    assert registry.get("orders") is topic
    assert registry.by_id(topic.topic_id) is topic
    assert "orders" in registry and "other" not in registry
    assert [p.index for p in topic.partitions] == [0, 1, 2]
    assert [t.name for t in registry] == ["orders"]


def test_names_are_sorted() -> None:
    registry = _registry()
    for name in ["b", "a", "c.d", "A_1"]:
        registry.create(name, 1)
    assert registry.names() == sorted(["b", "a", "c.d", "A_1"])


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a b", "a/b", "ä", "x" * 250, "abc\n", "tab\t", "a:b", "a,b"],
)
def test_illegal_names(name: str) -> None:
    assert _code(_registry().create, name, 1) == INVALID_TOPIC_EXCEPTION == 17


@pytest.mark.parametrize("name", ["a", "x" * 249, "a.b_c-D9", "...", "_", "-"])
def test_legal_names(name: str) -> None:
    validate_topic_name(name)
    assert _registry().create(name, 1) is not None


@given(st.text(max_size=260))
@settings(max_examples=200, deadline=None)
def test_name_rule_matches_kafka(name: str) -> None:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    legal = 1 <= len(name) <= 249 and set(name) <= allowed and name not in (".", "..")
    try:
        validate_topic_name(name)
    except TopicError as exc:
        assert not legal
        assert exc.error_code == INVALID_TOPIC_EXCEPTION
    else:
        assert legal


def test_duplicate_name() -> None:
    registry = _registry()
    registry.create("t", 1)
    assert _code(registry.create, "t", 2) == TOPIC_ALREADY_EXISTS == 36


@pytest.mark.parametrize("count", [0, -1, 100_001])
def test_bad_partition_counts(count: int) -> None:
    assert _code(_registry().create, "t", count) == INVALID_PARTITIONS == 37


@pytest.mark.parametrize("factor", [0, -1, 2])
def test_replication_factor_must_fit_the_brokers(factor: int) -> None:
    assert _code(_registry().create, "t", 1, replication_factor=factor) == 38
    assert INVALID_REPLICATION_FACTOR == 38


def test_replication_factor_up_to_the_broker_count() -> None:
    assert _registry([0, 1, 2]).create("t", 1, replication_factor=3) is not None


def test_leaders_are_spread_round_robin() -> None:
    registry = _registry([2, 0, 1])
    topic = registry.create("t", 5)
    assert topic is not None
    assert [p.leader for p in topic.partitions] == [0, 1, 2, 0, 1]
    registry.add_partitions("t", 7)
    assert [p.leader for p in topic.partitions] == [0, 1, 2, 0, 1, 2, 0]


def test_configs_are_stored_and_defaults_fill_in() -> None:
    registry = _registry()
    topic = registry.create(
        "t",
        1,
        configs={
            "max.message.bytes": "2048",
            "message.timestamp.type": "LogAppendTime",
            "retention.ms": None,
        },
    )
    assert topic is not None
    assert topic.configs == {"max.message.bytes": "2048", "message.timestamp.type": "LogAppendTime"}
    assert topic.max_message_bytes == 2048
    assert topic.log_append_time
    assert topic.config("retention.ms") == TOPIC_CONFIG_DEFAULTS["retention.ms"]
    plain = registry.create("u", 1)
    assert plain is not None
    assert plain.max_message_bytes == int(TOPIC_CONFIG_DEFAULTS["max.message.bytes"])
    assert not plain.log_append_time


@pytest.mark.parametrize(
    "configs",
    [
        {"no.such.config": "1"},
        {"max.message.bytes": "0"},
        {"max.message.bytes": "-5"},
        {"max.message.bytes": "lots"},
        {"max.message.bytes": "²"},
        {"max.message.bytes": ""},
        {"message.timestamp.type": "Whenever"},
    ],
)
def test_bad_configs(configs: dict[str, str]) -> None:
    registry = _registry()
    assert _code(registry.create, "t", 1, configs=configs) == INVALID_CONFIG == 40
    assert "t" not in registry


def test_validate_only_creates_nothing_but_still_validates() -> None:
    registry = _registry()
    assert registry.create("t", 2, validate_only=True) is None
    assert "t" not in registry
    assert _code(registry.create, "bad name", 1, validate_only=True) == INVALID_TOPIC_EXCEPTION


def test_delete() -> None:
    registry = _registry()
    topic = registry.create("t", 1)
    assert topic is not None
    assert registry.delete("t") is topic
    assert registry.get("t") is None and registry.by_id(topic.topic_id) is None
    assert _code(registry.delete, "t") == UNKNOWN_TOPIC_OR_PARTITION == 3
    again = registry.create("t", 1)
    assert again is not None and again.topic_id != topic.topic_id


def test_add_partitions() -> None:
    registry = _registry()
    registry.create("t", 2)
    registry.add_partitions("t", 3, validate_only=True)
    topic = registry.get("t")
    assert topic is not None and len(topic.partitions) == 2
    registry.add_partitions("t", 4)
    assert [p.index for p in topic.partitions] == [0, 1, 2, 3]
    assert _code(registry.add_partitions, "t", 4) == INVALID_PARTITIONS
    assert _code(registry.add_partitions, "t", 1) == INVALID_PARTITIONS
    assert _code(registry.add_partitions, "t", 100_001) == INVALID_PARTITIONS
    assert _code(registry.add_partitions, "nope", 5) == UNKNOWN_TOPIC_OR_PARTITION


def test_change_callbacks() -> None:
    registry = _registry()
    calls: list[str] = []
    registry.on_change.append(lambda: calls.append("changed"))
    registry.create("t", 1)
    registry.create("v", 1, validate_only=True)
    registry.add_partitions("t", 2)
    registry.delete("t")
    assert calls == ["changed"] * 3


def test_error_carries_a_message() -> None:
    with pytest.raises(TopicError) as info:
        _registry().create("a b", 1)
    assert "a b" in info.value.message and str(info.value) == info.value.message


# --- the cluster's partition limit and what errors tell the client ---

POLICY_VIOLATION = 44


def _limited(per_broker: int, brokers: list[int] | None = None) -> TopicRegistry:
    ids = brokers or [0]
    return TopicRegistry(lambda: ids, max_partitions_per_broker=per_broker)


def _message(call: object, *args: object, **kwargs: object) -> str:
    assert callable(call)
    with pytest.raises(TopicError) as info:
        call(*args, **kwargs)
    return info.value.message


def test_the_partition_limit_counts_every_topic_created() -> None:
    registry = _limited(6)
    registry.create("a", 2)
    registry.create("b", 2)
    assert _code(registry.create, "c", 3) == POLICY_VIOLATION
    registry.create("c", 2)  # exactly at the limit
    assert _code(registry.create, "d", 1) == POLICY_VIOLATION
    message = _message(registry.create, "d", 1)
    assert "limit of 6" in message and "6 exist" in message


def test_the_partition_limit_scales_with_the_broker_count() -> None:
    assert _code(_limited(3).create, "t", 4) == POLICY_VIOLATION
    registry = _limited(3, [0, 1])
    registry.create("t", 6)
    assert _code(registry.create, "u", 1) == POLICY_VIOLATION


def test_the_default_partition_limit_is_100000_per_broker() -> None:
    registry = _registry()
    assert registry.create("big", 100_000, validate_only=True) is None
    registry.create("t", 1)
    assert _code(registry.create, "big", 100_000, validate_only=True) == POLICY_VIOLATION
    registry.add_partitions("t", 100_000, validate_only=True)
    assert _code(registry.add_partitions, "t", 100_001, validate_only=True) == INVALID_PARTITIONS


def test_deleting_a_topic_frees_its_partitions_for_the_limit() -> None:
    registry = _limited(5)
    registry.create("a", 3)
    registry.create("b", 2)
    registry.delete("a")
    registry.create("c", 3)
    assert _code(registry.create, "d", 1) == POLICY_VIOLATION


def test_added_partitions_count_against_the_limit_by_how_many_are_new() -> None:
    registry = _limited(10)
    registry.create("t", 4)
    registry.add_partitions("t", 7)  # 3 more: 7 in all
    registry.create("u", 3)
    assert _code(registry.create, "v", 1) == POLICY_VIOLATION
    assert _code(registry.add_partitions, "t", 8) == POLICY_VIOLATION


def test_internal_topics_are_marked_internal() -> None:
    registry = _registry()
    internal = registry.create("__consumer_offsets", 1, internal=True)
    plain = registry.create("t", 1)
    assert internal is not None and internal.internal is True
    assert plain is not None and plain.internal is False


def test_refusals_explain_themselves_to_the_client() -> None:
    registry = _registry()
    registry.create("orders", 2)
    assert "'orders'" in _message(registry.create, "orders", 1)
    assert "0" in _message(registry.create, "t", 0)
    assert "100001" in _message(registry.create, "t", 100_001)
    assert "replication factor 2" in _message(registry.create, "t", 1, replication_factor=2)
    assert "'nope'" in _message(registry.delete, "nope")
    assert "'nope'" in _message(registry.add_partitions, "nope", 3)
    assert "2 partitions" in _message(registry.add_partitions, "orders", 2)
    assert "100001" in _message(registry.add_partitions, "orders", 100_001)
    assert "'retention.forever'" in _message(
        registry.create, "t", 1, configs={"retention.forever": "1"}
    )
    assert "'-5'" in _message(registry.create, "t", 1, configs={"max.message.bytes": "-5"})
    assert "'Sometime'" in _message(
        registry.create, "t", 1, configs={"message.timestamp.type": "Sometime"}
    )


def test_long_names_are_cut_short_in_messages() -> None:
    registry = _registry()
    exact = "n" * 100
    registry.create(exact, 1)
    assert repr(exact) in _message(registry.create, exact, 1)
    long = "l" * 150
    registry.create(long, 1)
    message = _message(registry.create, long, 1)
    assert repr("l" * 100 + "...") in message and long not in message


def test_configs_set_to_null_are_skipped_and_the_rest_still_checked() -> None:
    registry = _registry()
    with_null = {"cleanup.policy": None, "max.message.bytes": "0"}
    assert _code(registry.create, "t", 1, configs=with_null) == INVALID_CONFIG
    topic = registry.create(
        "t", 1, configs={"cleanup.policy": None, "message.timestamp.type": "CreateTime"}
    )
    assert topic is not None and topic.configs == {"message.timestamp.type": "CreateTime"}
    smallest = registry.create("u", 1, configs={"max.message.bytes": "1"})
    assert smallest is not None and smallest.max_message_bytes == 1


def test_values_are_trimmed_as_java_trims_them() -> None:
    """Java's String.trim() removes every character up to U+0020 (control characters
    included) and nothing else: a no-break space is part of the value."""
    assert validate_topic_configs({"retention.ms": "\x01\t 60000 \x1f"}) == {
        "retention.ms": "60000"
    }
    with pytest.raises(TopicError) as refused:
        validate_topic_configs({"retention.ms": "\u00a060000"})
    assert refused.value.error_code == INVALID_CONFIG


def test_operations_after_a_delete_are_applied_too() -> None:
    changed = apply_config_operations(
        {"retention.ms": "1000"},
        [("retention.ms", DELETE, None), ("cleanup.policy", SET, "compact")],
    )
    assert changed == {"cleanup.policy": "compact"}
