"""Looking at share groups: `Broker.share_group_state(group)`, the group states and types
the broker reports, and the failure report's share-group lines."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from harness.raw_client import RawClient, produce_batch
from minibroker import Broker
from minibroker.protocol import records
from minibroker.state.share_groups import SharePartitionView, share_group_view
from minibroker.testing.report import report_section
from minibroker.testing.waiting import wait_for
from tests.sansio import SansIOBroker
from tests.share.share_wire import ShareMember, acquired_offsets
from tests.share.test_share_fetch import set_group_configs

SHARE_HEARTBEAT = 76


def _join(client: RawClient, group: str, member: str, topic: str) -> None:
    answer = client.call(
        SHARE_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=(topic,),
    )
    assert answer.error_code == 0


def test_share_group_state_shows_members_and_who_reads_what() -> None:
    with Broker() as broker:
        broker.create_topic("orders", 2)
        first, second = str(uuid.uuid4()), str(uuid.uuid4())
        with RawClient(broker.bootstrap_servers, client_id="reader") as client:
            _join(client, "billing", first, "orders")
            _join(client, "billing", second, "orders")
        state = broker.share_group_state("billing")
        assert state is not None
        assert (state.state, state.group_epoch, state.assignment_epoch) == ("Stable", 2, 2)
        assert set(state.members) == {first, second}
        assert state.members[second].client_id == "reader"
        assert state.members[second].subscribed == ("orders",)
        # The first member still holds both partitions until its next heartbeat.
        assert state.members[first].partitions == (("orders", 0), ("orders", 1))
        assert len(state.members[second].partitions) == 1
        [(key, taken)] = [(k, p) for k, p in state.partitions.items() if second in p.readers]
        assert set(taken.readers) == {first, second}
        assert broker.group_states()["billing"] == "Stable"
        assert broker.group_types()["billing"] == "share"
        assert broker.share_group_state("nothing") is None

        text = report_section([broker], since=0.0, limit=100)
        assert "billing: share group, Stable, group epoch 2, assignment epoch 2" in text
        assert f"member {second} client=reader epoch 2: reads [{key[0]}-{key[1]}]" in text


@dataclass
class Held:
    """What a share-partition store holds for one partition."""

    in_flight: int
    archived: int

    def archived_past_limit(self, limit: int) -> int:
        return self.archived if limit == 5 else -1


class Store:
    def initialized(self, group_id: str) -> dict[tuple[str, int], int]:
        return {("t", 0): 40, ("t", 1): 7}

    def lag(self, group_id: str, topic: str, partition: int) -> int | None:
        return {0: 12, 1: 0}[partition]

    def partition(self, group_id: str, topic: str, index: int) -> Held | None:
        return Held(in_flight=9, archived=2) if index == 0 else None

    def member_gone(self, group_id: str, member_id: str, now: float) -> None:
        pass

    def delete_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        pass


def test_the_view_takes_start_offsets_and_counts_from_the_share_partition_store() -> None:
    broker = SansIOBroker()
    topic = broker.cluster.topics.create("t", 2)
    assert topic is not None
    broker.call(
        SHARE_HEARTBEAT,
        1,
        group_id="g",
        member_id="m",
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=("t",),
    )
    cluster = broker.cluster
    view = share_group_view(cluster.share_groups, Store(), lambda i: "t")("g")
    assert view is not None
    first, second = view.partitions[("t", 0)], view.partitions[("t", 1)]
    assert (first.readers, first.start_offset, first.in_flight, first.lag) == (("m",), 40, 9, 12)
    assert first.past_delivery_limit == 2  # share.delivery.count.limit, 5 by default
    assert (second.start_offset, second.in_flight, second.past_delivery_limit) == (7, None, None)


def test_share_group_state_follows_records_in_flight_until_the_delivery_limit() -> None:
    """A member fetches three records and never acknowledges them: while their locks
    hold they are in flight; once the second lock expires (share.delivery.count.limit
    2) they are archived and the share partition moves past them."""
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        broker.create_topic("jobs", 1)
        set_group_configs(
            client, "workers", share_auto_offset_reset="earliest", share_delivery_count_limit="2"
        )
        produce_batch(client.request, "jobs", 0, records.build_batch([(None, b"a")] * 3))
        _join(client, "workers", "w1", "jobs")
        topic = broker._on_loop(lambda: broker.state.topics.get("jobs"))
        assert topic is not None
        member = ShareMember(client.request, "workers", "w1", topic.topic_id)

        def partition() -> SharePartitionView:
            state = broker.share_group_state("workers")
            assert state is not None
            return state.partitions[("jobs", 0)]

        assert sum(acquired_offsets(member.fetch()).values()) == 3
        assert (partition().start_offset, partition().in_flight) == (0, 3)
        assert partition().past_delivery_limit == 0
        for _ in range(2):
            broker.clock.advance(31)  # past share.record.lock.duration.ms
            member.fetch()
        broker.clock.advance(31)
        # Archived past the limit, they left flight: the share partition starts after
        # them, with nothing left to deliver (and the silent member's session is over).
        done = wait_for(lambda: partition().start_offset == 3 and partition())
        assert (done.in_flight, done.lag, done.readers) == (0, 0, ())
