"""A raw-request scenario for share groups (KIP-932): ShareGroupHeartbeat (key 76),
ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79) and
DescribeShareGroupOffsets (90), sent request by request on one connection as
raw_scenarios.py sends the consumer group protocol's, and compared step by step the same
way (harness.scripted): member ids are "<member N>", topic ids "<topic NAME>", the
configured heartbeat interval a placeholder, error messages compared by presence. Then
(`relative`) the fetched record batches (`records`: their create times and checksums are
each run's own) are set aside, as for every Fetch; what the broker acquired
(`acquired_records`: offsets and delivery counts) is compared. Epochs are compared
relative to A's first one: Kafka 4.4 gives a new share group's first member epoch 2 and
bumps the group's epoch again once the share-partition state of its topics is
initialised, a moment later (the member is assigned nothing until then), where
minibroker initialises that state with the first assignment (epoch 1), so the probe
member leaves Kafka's group two epochs ahead.

The Kafka these run against assigns a share group's partitions in the heartbeat that
changes the group (group.share.assignment.interval.ms=0, test_differential.py), as
minibroker does.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from harness.raw_client import make
from tests.differential.harness import Step
from tests.differential.raw_scenarios import Script
from tests.differential.scenarios import QUIET, TIMEOUT, admin, create
from tests.share.share_clients import share_group_ready

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
SHARE_FETCH, SHARE_ACKNOWLEDGE, DESCRIBE_SHARE_GROUP_OFFSETS = 78, 79, 90
ACCEPT, RELEASE, REJECT = 1, 2, 3
FETCH_WAIT = datetime.timedelta(seconds=5)
RECORDS = 5

GROUP, TOPIC = "diff-share", "diff-share-topic"
MEMBER_A = "aaaaaaaaaaaaaaaaaaaaaa"  # 22 characters, as a client's base64 Uuid is
MEMBER_Z = "zzzzzzzzzzzzzzzzzzzzzz"


def _set_earliest(bootstrap: str, group: str) -> None:
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    client = admin(bootstrap)  # held: a client dropped early fails its pending requests
    for future in client.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(count):
        producer.produce(topic, f"share-{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0


class ShareScript(Script):
    def heartbeat(self, label: str, **fields: Any) -> Any:
        request = {"group_id": GROUP, "rack_id": None, "subscribed_topic_names": None}
        request.update(fields)
        return self.send(label, SHARE_GROUP_HEARTBEAT, 1, **request)

    def describe(self, label: str, *group_ids: str) -> Any:
        return self.send(
            label,
            SHARE_GROUP_DESCRIBE,
            1,
            group_ids=group_ids,
            include_authorized_operations=False,
        )

    def fetch(
        self,
        label: str,
        version: int,
        topic_id: Any,
        epoch: int,
        acks: tuple[tuple[int, int, int], ...] = (),
        member: str = MEMBER_A,
    ) -> Any:
        batches = tuple(
            make(
                SHARE_FETCH,
                version,
                "AcknowledgementBatch",
                first_offset=first,
                last_offset=last,
                acknowledge_types=(kind,),
            )
            for first, last, kind in acks
        )
        partition = make(
            SHARE_FETCH,
            version,
            "FetchPartition",
            partition_index=0,
            acknowledgement_batches=batches,
        )
        topic = make(SHARE_FETCH, version, "FetchTopic", topic_id=topic_id, partitions=(partition,))
        extra = {"share_acquire_mode": 0, "is_renew_ack": False} if version >= 2 else {}
        return self.send(
            label,
            SHARE_FETCH,
            version,
            group_id=GROUP,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=FETCH_WAIT,
            min_bytes=1,
            max_bytes=1_048_576,
            max_records=RECORDS,
            batch_size=RECORDS,
            topics=(topic,),
            forgotten_topics_data=(),
            **extra,
        )

    def acknowledge(
        self, label: str, topic_id: Any, epoch: int, acks: tuple[tuple[int, int, int], ...]
    ) -> Any:
        batches = tuple(
            make(
                SHARE_ACKNOWLEDGE,
                1,
                "AcknowledgementBatch",
                first_offset=first,
                last_offset=last,
                acknowledge_types=(kind,),
            )
            for first, last, kind in acks
        )
        partition = make(
            SHARE_ACKNOWLEDGE,
            1,
            "AcknowledgePartition",
            partition_index=0,
            acknowledgement_batches=batches,
        )
        topic = make(
            SHARE_ACKNOWLEDGE, 1, "AcknowledgeTopic", topic_id=topic_id, partitions=(partition,)
        )
        return self.send(
            label,
            SHARE_ACKNOWLEDGE,
            1,
            group_id=GROUP,
            member_id=MEMBER_A,
            share_session_epoch=epoch,
            topics=(topic,),
        )

    def offsets(self, label: str, version: int) -> Any:
        topic = make(
            DESCRIBE_SHARE_GROUP_OFFSETS,
            version,
            "DescribeShareGroupOffsetsRequestTopic",
            topic_name=TOPIC,
            partitions=(0,),
        )
        group = make(
            DESCRIBE_SHARE_GROUP_OFFSETS,
            version,
            "DescribeShareGroupOffsetsRequestGroup",
            group_id=GROUP,
            topics=(topic,),
        )
        return self.send(label, DESCRIBE_SHARE_GROUP_OFFSETS, version, groups=(group,))


def share_group(bootstrap: str) -> list[str]:
    """One member on a topic of one partition holding 5 records, with the group's
    share.auto.offset.reset set to earliest and its share-partition state initialised by
    a member that joined and left (`share_group_ready`).

    ShareGroupDescribe of the group (empty) and of one nobody made (GROUP_ID_NOT_FOUND);
    A joins (epoch, assignment by topic id); ShareGroupDescribe with A; a ShareFetch
    opening a session (epoch 0): the 5 records acquired, delivery count 1;
    ShareAcknowledge (epoch 1): 0-1 accepted, 2 released, 3 rejected; a ShareFetch
    (v2, epoch 2) accepting 4: offset 2 again, delivery count 2; a ShareAcknowledge with
    a wrong epoch (INVALID_SHARE_SESSION_EPOCH), a ShareFetch of a member without a
    session (SHARE_SESSION_NOT_FOUND); DescribeShareGroupOffsets v0 and v1 (start offset,
    lag); the session closed (epoch -1) accepting 2; a heartbeat of an unknown member
    (UNKNOWN_MEMBER_ID) and one with an empty group id (INVALID_REQUEST); A leaves;
    ShareGroupDescribe after.

    Set aside (harness.scripted): member and topic ids, the configured heartbeat interval,
    the text of error messages, the record batches themselves.
    """
    create(bootstrap, TOPIC, 1)
    _set_earliest(bootstrap, GROUP)
    _produce(bootstrap, TOPIC, RECORDS)
    share_group_ready(bootstrap, GROUP, TOPIC)
    with ShareScript(bootstrap) as s:
        s.describe("the group after the probe left", GROUP)
        s.describe("a group nobody made", "diff-share-nobody")
        a = s.heartbeat(
            "A joins", member_id=MEMBER_A, member_epoch=0, subscribed_topic_names=(TOPIC,)
        )
        epoch = a.member_epoch
        topic_id = a.assignment.topic_partitions[0].topic_id if a.assignment else None
        s.describe("A in the group", GROUP)
        s.fetch("a fetch opening a session", 1, topic_id, 0)
        s.acknowledge(
            "accept 0-1, release 2, reject 3",
            topic_id,
            1,
            ((0, 1, ACCEPT), (2, 2, RELEASE), (3, 3, REJECT)),
        )
        s.fetch("a fetch accepting 4: 2 again", 2, topic_id, 2, ((4, 4, ACCEPT),))
        s.acknowledge("a wrong session epoch", topic_id, 7, ((2, 2, ACCEPT),))
        s.fetch("a member without a session", 1, topic_id, 1, member=MEMBER_Z)
        s.offsets("the group's offsets (v0)", 0)
        s.offsets("the group's offsets", 1)
        s.acknowledge("closing the session, accepting 2", topic_id, -1, ((2, 2, ACCEPT),))
        s.heartbeat("an unknown member", member_id=MEMBER_Z, member_epoch=epoch)
        s.heartbeat("an empty group id", group_id="", member_id=MEMBER_A, member_epoch=epoch)
        s.heartbeat("A leaves", member_id=MEMBER_A, member_epoch=-1)
        s.describe("A left", GROUP)
        return s.labels


SHARE_RAW_SCENARIOS = {"share_group": share_group}
EPOCHS = frozenset({"member_epoch", "group_epoch", "assignment_epoch"})
RECORDS_SET_ASIDE = "<records>"


def relative(steps: list[Step]) -> list[Step]:
    """The steps with positive epochs written relative to the first ShareGroupHeartbeat
    answer's member epoch ("<join>", "<join+1>", "<join-1>"; 0 and -1 stay as they are)
    and the fetched record batches set aside."""
    joins = [
        step.response["member_epoch"]
        for step in steps
        if step.api == "ShareGroupHeartbeat" and isinstance(step.response, dict)
        and isinstance(step.response.get("member_epoch"), int)
        and step.response["member_epoch"] > 0
    ]  # fmt: skip
    base = joins[0] if joins else 0

    def rewrite(value: Any) -> Any:
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if key in EPOCHS and isinstance(item, int) and item > 0:
                out[key] = f"<join{item - base:+d}>" if item != base else "<join>"
            elif key == "records" and item is not None:
                out[key] = RECORDS_SET_ASIDE
            else:
                out[key] = rewrite(item)
        return out

    return [
        replace(step, request=rewrite(step.request), response=rewrite(step.response))
        for step in steps
    ]
