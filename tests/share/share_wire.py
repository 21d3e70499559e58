"""A share-group member speaking ShareFetch and ShareAcknowledge over a raw socket (or a
sans-IO broker), keeping its share session's epoch as a client does."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from harness.raw_client import make, make_request
from minibroker.protocol import records

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
VERSION = 2
Ack = tuple[int, int, Sequence[int]]  # first offset, last offset, types


def join(request: Callable[[int, int, Any], Any], group: str, member: str, topic: str) -> None:
    """`member` joins share group `group` subscribed to `topic` (ShareGroupHeartbeat)."""
    answer = request(
        SHARE_GROUP_HEARTBEAT,
        1,
        make_request(
            SHARE_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            member_epoch=0,
            rack_id=None,
            subscribed_topic_names=(topic,),
        ),
    )
    assert answer.error_code == 0, answer


def leave(request: Callable[[int, int, Any], Any], group: str, member: str) -> None:
    answer = request(
        SHARE_GROUP_HEARTBEAT,
        1,
        make_request(
            SHARE_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            member_epoch=-1,
            rack_id=None,
            subscribed_topic_names=None,
        ),
    )
    assert answer.error_code == 0, answer


def ack_batches(api_key: int, acks: Sequence[Ack]) -> tuple[Any, ...]:
    return tuple(
        make(
            api_key,
            VERSION,
            "AcknowledgementBatch",
            first_offset=first,
            last_offset=last,
            acknowledge_types=tuple(types),
        )
        for first, last, types in acks
    )


def fetch_request(
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    partitions: Sequence[int] = (0,),
    *,
    acks: Sequence[Ack] = (),
    max_wait_ms: int = 0,
    max_records: int = 500,
) -> Any:
    wanted = tuple(
        make(
            SHARE_FETCH,
            VERSION,
            "FetchPartition",
            partition_index=index,
            acknowledgement_batches=ack_batches(SHARE_FETCH, acks) if n == 0 else (),
        )
        for n, index in enumerate(partitions)
    )
    return make_request(
        SHARE_FETCH,
        VERSION,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        topics=(make(SHARE_FETCH, VERSION, "FetchTopic", topic_id=topic_id, partitions=wanted),),
        forgotten_topics_data=(),
    )


def acknowledge_request(
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: Sequence[Ack],
    *,
    renew: bool = False,
) -> Any:
    partition = make(
        SHARE_ACKNOWLEDGE,
        VERSION,
        "AcknowledgePartition",
        partition_index=0,
        acknowledgement_batches=ack_batches(SHARE_ACKNOWLEDGE, acks),
    )
    topic = make(
        SHARE_ACKNOWLEDGE, VERSION, "AcknowledgeTopic", topic_id=topic_id, partitions=(partition,)
    )
    return make_request(
        SHARE_ACKNOWLEDGE,
        VERSION,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=(topic,),
    )


def partitions_of(response: Any) -> list[Any]:
    return [p for topic in response.responses for p in topic.partitions]


def acquired_offsets(response: Any) -> dict[int, int]:
    """Offset -> delivery count of every record acquired, control records excluded."""
    delivered = {}
    for partition in partitions_of(response):
        counts = {
            offset: item.delivery_count
            for item in partition.acquired_records
            for offset in range(item.first_offset, item.last_offset + 1)
        }
        for header, batch in records.split_batches(partition.records or b""):
            if header.is_control:
                continue
            for record in records.iter_records(batch):
                if record.offset in counts:
                    delivered[record.offset] = counts[record.offset]
    return delivered


class ShareMember:
    """One member's share session: epochs as a client keeps them."""

    def __init__(
        self, request: Callable[[int, int, Any], Any], group: str, member: str, topic_id: uuid.UUID
    ) -> None:
        self.request = request
        self.group = group
        self.member = member
        self.topic_id = topic_id
        self.epoch = 0

    def fetch(self, *, acks: Sequence[Ack] = (), max_wait_ms: int = 0, **more: Any) -> Any:
        answer = self.request(
            SHARE_FETCH,
            VERSION,
            fetch_request(
                self.group,
                self.member,
                self.epoch,
                self.topic_id,
                acks=acks,
                max_wait_ms=max_wait_ms,
                **more,
            ),
        )
        if answer.error_code == 0:
            self.epoch += 1
        return answer

    def acknowledge(
        self, acks: Sequence[Ack], *, epoch: int | None = None, renew: bool = False
    ) -> Any:
        sent = self.epoch if epoch is None else epoch
        answer = self.request(
            SHARE_ACKNOWLEDGE,
            VERSION,
            acknowledge_request(self.group, self.member, sent, self.topic_id, acks, renew=renew),
        )
        if answer.error_code == 0 and sent > 0:
            self.epoch += 1
        return answer
