"""Share group offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) and share groups in the other group APIs (ListGroups,
DeleteGroups, DescribeGroups, OffsetFetch, OffsetCommit, ConsumerGroupDescribe), as
Kafka 4.4 answers them, with raw requests against a broker without sockets.

The share-partition state is asked of `cluster.share_partitions`; here a small recording
store stands in for it, so that what the APIs ask of it and answer from it is checked on
its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import make
from minibroker.config import BrokerConfig
from minibroker.state.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from minibroker.state.sessions import ANONYMOUS
from minibroker.state.share_partitions import SharePartitionStore
from tests.sansio import SansIOBroker

HEARTBEAT, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 76, 90, 91, 92
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 8, 9, 15, 16, 42
CONSUMER_DESCRIBE = 69
TXN_OFFSET_COMMIT = 28


class RecordingStore(SharePartitionStore):
    """What the offset APIs ask of the share-partition state."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: dict[str, dict[tuple[str, int], int]] = {}
        self.calls: list[tuple[object, ...]] = []

    def member_gone(self, group_id: str, member_id: str, now: float) -> None:
        self.calls.append(("member_gone", group_id, member_id))

    def group_deleted(self, group_id: str) -> None:
        self.calls.append(("group_deleted", group_id))
        self.starts.pop(group_id, None)

    def initialized(self, group_id: str) -> dict[tuple[str, int], int]:
        return dict(self.starts.get(group_id, {}))

    def lag(self, group_id: str, topic: str, partition: int) -> int | None:
        start = self.starts.get(group_id, {}).get((topic, partition))
        return None if start is None else 10 - start

    def alter_start_offset(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        self.calls.append(("alter", group_id, topic, partition, offset))
        self.starts.setdefault(group_id, {})[(topic, partition)] = offset

    def delete_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        gone = sorted(partitions)
        self.calls.append(("delete", group_id, gone))
        for key in gone:
            self.starts.get(group_id, {}).pop(key, None)


@pytest.fixture
def broker() -> SansIOBroker:
    broker = SansIOBroker()
    broker.cluster.topics.create("t", 3)
    broker.cluster.share_partitions = RecordingStore()  # type: ignore[assignment]
    return broker


def store_of(broker: SansIOBroker) -> RecordingStore:
    store = broker.cluster.share_partitions
    assert isinstance(store, RecordingStore)
    return store


def join(broker: SansIOBroker, member: str = "m1", group: str = "sg") -> None:
    answer = broker.call(
        HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=("t",),
    )
    assert answer.error_code == ErrorCode.none


def leave(broker: SansIOBroker, member: str = "m1", group: str = "sg") -> None:
    answer = broker.call(
        HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=-1,
        rack_id=None,
        subscribed_topic_names=None,
    )
    assert answer.error_code == ErrorCode.none


def describe_offsets(
    broker: SansIOBroker, topics: list[tuple[str, tuple[int, ...]]] | None, version: int = 1
) -> object:
    def struct(name: str, **values: object) -> object:
        return make(DESCRIBE_OFFSETS, version, name, **values)

    asked = (
        None
        if topics is None
        else tuple(
            struct("DescribeShareGroupOffsetsRequestTopic", topic_name=t, partitions=p)
            for t, p in topics
        )
    )
    group_struct = struct("DescribeShareGroupOffsetsRequestGroup", group_id="sg", topics=asked)
    [group] = broker.call(DESCRIBE_OFFSETS, version, groups=(group_struct,)).groups
    return group


def alter(broker: SansIOBroker, offsets: dict[str, dict[int, int]], group: str = "sg") -> object:
    topics = tuple(
        make(
            ALTER_OFFSETS,
            0,
            "AlterShareGroupOffsetsRequestTopic",
            topic_name=name,
            partitions=tuple(
                make(
                    ALTER_OFFSETS,
                    0,
                    "AlterShareGroupOffsetsRequestPartition",
                    partition_index=p,
                    start_offset=o,
                )
                for p, o in parts.items()
            ),
        )
        for name, parts in offsets.items()
    )
    return broker.call(ALTER_OFFSETS, 0, group_id=group, topics=topics)


def delete(broker: SansIOBroker, topics: tuple[str, ...], group: str = "sg") -> object:
    return broker.call(
        DELETE_OFFSETS,
        0,
        group_id=group,
        topics=tuple(
            make(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=t)
            for t in topics
        ),
    )


def test_offsets_are_described_with_their_lag(broker: SansIOBroker) -> None:
    store_of(broker).starts["sg"] = {("t", 0): 4, ("t", 2): 7}
    group = describe_offsets(broker, [("t", (0, 1, 2)), ("missing", (0,))])
    assert group.error_code == ErrorCode.none
    [topic, missing] = group.topics
    assert topic.topic_id == broker.cluster.topics.get("t").topic_id
    assert [(p.partition_index, p.start_offset, p.lag) for p in topic.partitions] == [
        (0, 4, 6),
        (1, -1, -1),
        (2, 7, 3),
    ]
    assert missing.topic_name == "missing"
    assert missing.topic_id in (None, uuid.UUID(int=0))  # the zero id, read as none
    assert [(p.start_offset, p.error_code) for p in missing.partitions] == [(-1, ErrorCode.none)]
    # A null topic list: every partition with share state. v0 has no lag.
    everything = describe_offsets(broker, None, version=0)
    [topic] = everything.topics
    assert [(p.partition_index, p.start_offset) for p in topic.partitions] == [(0, 4), (2, 7)]


def test_altering_offsets_needs_an_empty_share_group_and_makes_one(broker: SansIOBroker) -> None:
    answer = alter(broker, {"t": {0: 5, 9: 1}, "missing": {0: 0}}, group="new")
    assert answer.error_code == ErrorCode.none
    [t, missing] = answer.responses
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [
        (0, ErrorCode.none),
        (9, ErrorCode.unknown_topic_or_partition),
    ]
    assert [p.error_code for p in missing.partitions] == [ErrorCode.unknown_topic_or_partition]
    assert store_of(broker).calls == [("alter", "new", "t", 0, 5)]
    assert broker.cluster.group_type("new") == "share"  # as Kafka, the group now exists
    join(broker)
    busy = alter(broker, {"t": {0: 1}})
    assert (busy.error_code, busy.error_message, busy.responses) == (
        ErrorCode.non_empty_group,
        "The group is not empty.",
        (),
    )
    broker.cluster.groups.commit(
        0.0, group_id="classic", generation=-1, member_id="", group_instance_id=None,
        offsets=[("t", 0, 1, -1, None)],
    )  # fmt: skip
    other = alter(broker, {"t": {0: 1}}, group="classic")
    assert (other.error_code, other.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )


def test_deleting_offsets_forgets_whole_topics(broker: SansIOBroker) -> None:
    lost = delete(broker, ("t",), group="nowhere")
    assert (lost.error_code, lost.error_message) == (
        ErrorCode.group_id_not_found,
        "Group nowhere not found.",
    )
    join(broker)
    assert delete(broker, ("t",)).error_code == ErrorCode.non_empty_group
    leave(broker)
    store_of(broker).starts["sg"] = {("t", 0): 4, ("t", 1): 2}
    answer = delete(broker, ("t", "missing"))
    assert answer.error_code == ErrorCode.none
    assert [(r.topic_name, r.error_code) for r in answer.responses] == [
        ("t", ErrorCode.none),
        ("missing", ErrorCode.unknown_topic_or_partition),
    ]
    assert ("delete", "sg", [("t", 0), ("t", 1)]) in store_of(broker).calls
    again = delete(broker, ("t",))
    [response] = again.responses
    assert (response.error_code, response.error_message) == (
        ErrorCode.unknown_topic_or_partition,
        "There is no offset information to delete.",
    )


def test_offset_apis_check_acls() -> None:
    broker = SansIOBroker(BrokerConfig(acls_enabled=True, allow_everyone_if_no_acl_found=True))
    broker.cluster.topics.create("t", 1)
    broker.cluster.share_partitions = RecordingStore()  # type: ignore[assignment]
    for resource, name, operation in [
        (ResourceType.GROUP, "sg", Operation.DESCRIBE),
        (ResourceType.TOPIC, "t", Operation.READ),
    ]:
        broker.cluster.acls.add(
            AclBinding(
                resource, name, PatternType.LITERAL, ANONYMOUS, "*", operation, Permission.DENY
            )
        )
    assert describe_offsets(broker, None).error_code == ErrorCode.group_authorization_failed
    answer = alter(broker, {"t": {0: 1}}, group="other")
    [topic] = answer.responses
    assert [p.error_code for p in topic.partitions] == [ErrorCode.topic_authorization_failed]
    assert store_of(broker).calls == []


def test_share_groups_are_listed_by_type_and_state(broker: SansIOBroker) -> None:
    join(broker)
    alter(broker, {"t": {0: 0}}, group="idle")
    listed = broker.call(LIST_GROUPS, 5, states_filter=(), types_filter=("Share",)).groups
    assert sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed) == [
        ("idle", "share", "Empty", "share"),
        ("sg", "share", "Stable", "share"),
    ]
    stable = broker.call(LIST_GROUPS, 5, states_filter=("stable",), types_filter=()).groups
    assert [g.group_id for g in stable] == ["sg"]
    classic = broker.call(LIST_GROUPS, 5, states_filter=(), types_filter=("classic",)).groups
    assert classic == ()


def test_deleting_a_share_group_needs_it_empty_and_drops_its_state(broker: SansIOBroker) -> None:
    join(broker)

    def deleted() -> ErrorCode:
        [result] = broker.call(DELETE_GROUPS, 2, groups_names=("sg",)).results
        return result.error_code

    assert deleted() == ErrorCode.non_empty_group
    leave(broker)
    assert deleted() == ErrorCode.none
    assert ("group_deleted", "sg") in store_of(broker).calls
    assert broker.cluster.group_type("sg") is None
    assert deleted() == ErrorCode.group_id_not_found


def test_a_share_group_is_no_group_for_the_classic_and_consumer_apis(broker: SansIOBroker) -> None:
    join(broker)
    [described] = broker.call(
        DESCRIBE_GROUPS, 6, groups=("sg",), include_authorized_operations=False
    ).groups
    assert (described.error_code, described.group_state, described.error_message) == (
        ErrorCode.group_id_not_found,
        "Dead",
        "Group sg is not a classic group.",
    )
    [fetched] = broker.call(
        OFFSET_FETCH,
        9,
        groups=(
            make(
                OFFSET_FETCH,
                9,
                "OffsetFetchRequestGroup",
                group_id="sg",
                member_id=None,
                member_epoch=-1,
                topics=None,
            ),
        ),
        require_stable=False,
    ).groups
    assert fetched.error_code == ErrorCode.group_id_not_found
    committed = broker.call(
        OFFSET_COMMIT,
        9,
        group_id="sg",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                OFFSET_COMMIT,
                9,
                "OffsetCommitRequestTopic",
                name="t",
                partitions=(
                    make(
                        OFFSET_COMMIT,
                        9,
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    assert [p.error_code for t in committed.topics for p in t.partitions] == [
        ErrorCode.group_id_not_found
    ]
    txn = broker.call(
        TXN_OFFSET_COMMIT,
        3,
        transactional_id="tx",
        group_id="sg",
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                TXN_OFFSET_COMMIT,
                3,
                "TxnOffsetCommitRequestTopic",
                name="t",
                partitions=(
                    make(
                        TXN_OFFSET_COMMIT,
                        3,
                        "TxnOffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    assert [p.error_code for t in txn.topics for p in t.partitions] == [
        ErrorCode.group_id_not_found
    ]
    assert broker.cluster.group_type("sg") == "share"  # no classic group made on the side
    [consumer] = broker.call(
        CONSUMER_DESCRIBE, 1, group_ids=("sg",), include_authorized_operations=False
    ).groups
    assert (consumer.error_code, consumer.error_message) == (
        ErrorCode.group_id_not_found,
        "Group sg is not a consumer group.",
    )
