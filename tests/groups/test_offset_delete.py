"""OffsetDelete over a real socket: which committed offsets a group lets go, by its state
and its members' subscriptions, and the exact Kafka error code of each refusal (the
requests and the groups in a known state are those of test_group_boundaries)."""

from __future__ import annotations

import pytest

from harness.raw_client import RawClient
from minibroker import Broker
from tests.groups.test_group_boundaries import (
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    NON_EMPTY_GROUP,
    NONE,
    TOPIC,
    client,
    commit,
    committed,
    delete_offsets,
    describe,
    join,
    listed,
    stable,
    subscription,
    sync,
    topic,
)

# Offsets are committed only for partitions that exist.
pytestmark = pytest.mark.usefixtures("topic")
__all__ = ["client", "topic"]  # fixtures, reached by name


def test_offset_delete_spares_subscribed_topics_of_a_stable_consumer_group(
    broker: Broker, client: RawClient
) -> None:
    """With the group Stable, OffsetDelete deletes the offsets of a topic its members no
    longer subscribe to and refuses those of a subscribed one per partition with
    GROUP_SUBSCRIBED_TO_TOPIC."""
    broker.create_topic("old", 1)
    member_id, generation = stable(client, "g", protocols=(("range", subscription(TOPIC, "old")),))
    offsets = {(TOPIC, 0): 5, (TOPIC, 1): 6, ("old", 0): 7}
    assert commit(client, "g", generation, member_id, offsets) == dict.fromkeys(offsets, NONE)
    # The member drops "old" from its subscription: a new generation.
    rejoined = join(client, 5, "g", member_id, protocols=(("range", subscription(TOPIC)),))
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, generation + 1)
    assert sync(client, "g", generation + 1, member_id, assignments={}).error_code == NONE

    deleted = delete_offsets(client, "g", [(TOPIC, 0), ("old", 0)])
    assert deleted.error_code == NONE
    assert {
        (t.name, p.partition_index): p.error_code for t in deleted.topics for p in t.partitions
    } == {(TOPIC, 0): GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): NONE}
    assert committed(client, "g", offsets) == {(TOPIC, 0): 5, (TOPIC, 1): 6, ("old", 0): -1}
    assert describe(client, "g").group_state == "Stable"


def test_offset_delete_of_an_empty_group_deletes_any_partition(client: RawClient) -> None:
    """An Empty group has no subscriptions to protect: any committed offset can go."""
    offsets = {(TOPIC, 0): 1, (TOPIC, 1): 2}
    assert commit(client, "g", -1, "", offsets) == dict.fromkeys(offsets, NONE)
    deleted = delete_offsets(client, "g", [(TOPIC, 1)])
    assert deleted.error_code == NONE
    assert [p.error_code for t in deleted.topics for p in t.partitions] == [NONE]
    assert committed(client, "g", offsets) == {(TOPIC, 0): 1, (TOPIC, 1): -1}


def test_offset_delete_of_a_non_consumer_group_with_members_is_non_empty_group(
    client: RawClient,
) -> None:
    """Without the consumer protocol the coordinator cannot tell what is subscribed: a
    group with members refuses OffsetDelete as a whole with NON_EMPTY_GROUP."""
    offsets = {(TOPIC, 0): 1}
    assert commit(client, "g", -1, "", offsets) == {(TOPIC, 0): NONE}
    stable(client, "g", protocol_type="connect", protocols=(("v0", b"whatever"),))
    assert delete_offsets(client, "g", offsets).error_code == NON_EMPTY_GROUP
    assert committed(client, "g", offsets) == offsets


def test_offset_delete_of_an_unknown_group_is_group_id_not_found(client: RawClient) -> None:
    """OffsetDelete for a group the coordinator does not have: GROUP_ID_NOT_FOUND."""
    assert delete_offsets(client, "nowhere", [(TOPIC, 0)]).error_code == GROUP_ID_NOT_FOUND
    assert listed(client) == {}


def test_offset_delete_group_error_carries_no_topics(client: RawClient) -> None:
    """Kafka answers a group-level OffsetDelete error with the error code alone."""
    deleted = delete_offsets(client, "nowhere", [(TOPIC, 0)])
    assert (deleted.error_code, deleted.topics) == (GROUP_ID_NOT_FOUND, ())
