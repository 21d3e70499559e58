"""OffsetFetch answers a consumer resumes from, checked sans-IO: the committed offset,
leader epoch and metadata of each partition, and -1 / -1 / "" for a partition without a
commit, for named partitions and for a null topic list (every committed partition), in
the single-group (v5, v7) and batched (v8) shapes.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.raw_client import make
from tests.sansio import SansIOBroker

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
NONE = 0

COMMITTED = [(0, 10, 5, "meta"), (1, 11, 6, ""), (2, 12, 7, None)]
# What OffsetFetch reports for those commits (a null metadata reads back as "").
READ_BACK = [(0, 10, 5, "meta"), (1, 11, 6, ""), (2, 12, 7, "")]
NOT_COMMITTED = (3, -1, -1, "")


@pytest.fixture
def broker() -> SansIOBroker:
    broker = SansIOBroker()
    broker.cluster.topics.create("orders", 4)
    partitions = tuple(
        make(
            OFFSET_COMMIT,
            8,
            "OffsetCommitRequestPartition",
            partition_index=index,
            committed_offset=offset,
            committed_leader_epoch=epoch,
            committed_metadata=metadata,
        )
        for index, offset, epoch, metadata in COMMITTED
    )
    topic = make(OFFSET_COMMIT, 8, "OffsetCommitRequestTopic", name="orders", partitions=partitions)
    answer = broker.call(
        OFFSET_COMMIT,
        8,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    assert all(p.error_code.value == NONE for p in answer.topics[0].partitions)
    return broker


def offsets(broker: SansIOBroker, version: int, indexes: list[int] | None) -> list[Any]:
    batched = version >= 8
    topics = None
    if indexes is not None:
        name = "OffsetFetchRequestTopics" if batched else "OffsetFetchRequestTopic"
        topics = (make(OFFSET_FETCH, version, name, name="orders", partition_indexes=indexes),)
    if batched:
        group = make(OFFSET_FETCH, version, "OffsetFetchRequestGroup", group_id="g", topics=topics)
        response = broker.call(OFFSET_FETCH, version, groups=(group,), require_stable=False)
        (answer,) = response.groups
    else:
        answer = broker.call(
            OFFSET_FETCH, version, group_id="g", topics=topics, require_stable=False
        )
    assert answer.error_code.value == NONE
    (topic,) = answer.topics
    assert topic.name == "orders"
    assert all(p.error_code.value == NONE for p in topic.partitions)
    return [
        (int(p.partition_index), int(p.committed_offset), int(p.committed_leader_epoch), p.metadata)
        for p in topic.partitions
    ]


@pytest.mark.parametrize("version", [5, 7, 8])
def test_named_partitions_with_and_without_commits(broker: SansIOBroker, version: int) -> None:
    assert offsets(broker, version, [0, 1, 2, 3]) == [*READ_BACK, NOT_COMMITTED]


@pytest.mark.parametrize("version", [5, 7, 8])
def test_a_null_topic_list_gets_every_commit(broker: SansIOBroker, version: int) -> None:
    assert offsets(broker, version, None) == READ_BACK
