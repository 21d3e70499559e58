"""Virtual time: `broker.clock.advance(seconds)` moves the broker's time forward, and the
timeouts that fall due in it expire at once, as real clients see.

Each test uses timeouts far longer than the test waits for the outcome: a member is only
gone in time because the broker's clock was moved, never because real time ran out.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from harness.raw_client import RawClient
from minibroker import Broker
from tests.groups.conftest import (
    SETTLE_TIMEOUT,
    MemberProcess,
    RebalanceLog,
    group_snapshot,
    settled,
    unique,
    wait_until,
)
from tests.groups.test_group_boundaries import heartbeat, join_new, subscription, sync

PARTITIONS = 2
LONG_SESSION_MS = 60_000
UNKNOWN_MEMBER_ID = 25
CONSUMER_GROUP_HEARTBEAT = 68


def test_a_silent_members_session_expires_when_the_clock_is_advanced(
    kafka_broker: Broker, member_processes: list[MemberProcess]
) -> None:
    topic, group = unique("vt-session"), unique("vt-session-group")
    kafka_broker.create_topic(topic, PARTITIONS)
    log = RebalanceLog()
    for client, name in (("kafka-python", "stays"), ("aiokafka", "killed")):
        member_processes.append(
            MemberProcess(
                client,
                kafka_broker.bootstrap_servers,
                topic,
                group,
                name,
                log,
                session_ms=LONG_SESSION_MS,
                heartbeat_ms=500,
            )
        )
    killed = member_processes[1]
    assert wait_until(
        lambda: settled(kafka_broker, group, topic, PARTITIONS, log, ["stays", "killed"]),
        SETTLE_TIMEOUT,
    )
    killed.kill()  # no LeaveGroup: only its session can end its membership
    time.sleep(1.0)  # real time passes, far short of the 60 s session
    assert len(group_snapshot(kafka_broker, group)[2]) == 2

    kafka_broker.clock.advance(LONG_SESSION_MS / 1000 + 1)
    # well inside the session a real clock would still need
    assert wait_until(
        lambda: settled(kafka_broker, group, topic, PARTITIONS, log, ["stays"]),
        SETTLE_TIMEOUT,
    )
    assert log.owned("stays") == {0, 1}


def test_a_member_that_does_not_rejoin_is_dropped_at_the_advanced_rebalance_timeout(
    kafka_broker: Broker, member_processes: list[MemberProcess]
) -> None:
    """A member that keeps its session (900 s) but does not rejoin a rebalance is
    dropped when the rebalance timeout (the group's longest, kafka-python's 300 s
    max.poll.interval.ms) has passed on the broker's clock."""
    topic, group = unique("vt-rebalance"), unique("vt-rebalance-group")
    kafka_broker.create_topic(topic, PARTITIONS)
    with RawClient(kafka_broker.bootstrap_servers) as silent:
        joined = join_new(
            silent,
            group,
            session=timedelta(seconds=900),
            rebalance=timedelta(seconds=20),
            protocols=(("range", subscription(topic)),),
        )
        synced = sync(
            silent,
            group,
            joined.generation_id,
            joined.member_id,
            assignments={joined.member_id: b""},
        )
        assert synced.error_code == 0
        log = RebalanceLog()
        member_processes.append(
            MemberProcess(
                "kafka-python",
                kafka_broker.bootstrap_servers,
                topic,
                group,
                "joins",
                log,
                session_ms=LONG_SESSION_MS,
                heartbeat_ms=500,
            )
        )
        # the newcomer's join opens a rebalance the silent member never rejoins
        assert wait_until(
            lambda: group_snapshot(kafka_broker, group)[0] == "PreparingRebalance",
            SETTLE_TIMEOUT,
        )
        time.sleep(1.0)
        assert group_snapshot(kafka_broker, group)[0] == "PreparingRebalance"

        kafka_broker.clock.advance(301)
        assert wait_until(
            lambda: settled(kafka_broker, group, topic, PARTITIONS, log, ["joins"]),
            SETTLE_TIMEOUT,
        )
        assert log.owned("joins") == {0, 1}
        assert heartbeat(silent, group, joined.generation_id, joined.member_id) == UNKNOWN_MEMBER_ID


def test_a_classic_member_that_heartbeats_keeps_its_generation_across_advances(
    kafka_broker: Broker,
) -> None:
    """Each heartbeat renews the session from the broker's clock as advanced, not from
    the time it started with: 20 s on, a heartbeat, 15 s more is 15 s into a 30 s session."""
    group = unique("vt-keeps")
    with RawClient(kafka_broker.bootstrap_servers) as member:
        joined = join_new(member, group, session=timedelta(seconds=30))
        generation, member_id = joined.generation_id, joined.member_id
        assert (
            sync(member, group, generation, member_id, assignments={member_id: b""}).error_code == 0
        )
        kafka_broker.clock.advance(20)
        assert heartbeat(member, group, generation, member_id) == 0
        kafka_broker.clock.advance(15)
        time.sleep(0.5)  # the broker's timer runs on the advance
        assert heartbeat(member, group, generation, member_id) == 0
        assert group_snapshot(kafka_broker, group)[0] == "Stable"


def test_a_consumer_protocol_member_that_heartbeats_keeps_its_epoch_across_advances(
    kafka_broker: Broker,
) -> None:
    """The same for Kafka 4's protocol: the 45 s session runs on the advanced clock."""
    group, topic = unique("vt-keeps-848"), unique("vt-keeps-848-topic")
    kafka_broker.create_topic(topic, PARTITIONS)
    member_id = str(uuid.uuid4())

    def beat(epoch: int, **fields: Any) -> Any:
        fields.setdefault("topic_partitions", None)  # unchanged since the last heartbeat
        return member.call(
            CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member_id,
            member_epoch=epoch, **fields,
        )  # fmt: skip

    with RawClient(kafka_broker.bootstrap_servers) as member:
        joined = beat(
            0,
            rebalance_timeout=timedelta(seconds=30),
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
        epoch = joined.member_epoch
        assert joined.error_code == 0 and epoch > 0
        kafka_broker.clock.advance(30)
        assert beat(epoch).error_code == 0
        kafka_broker.clock.advance(30)
        time.sleep(0.5)
        again = beat(epoch)
        assert (again.error_code, again.member_epoch) == (0, epoch)
        kafka_broker.clock.advance(46)  # now silent past its session: fenced
        time.sleep(0.5)
        assert beat(epoch).error_code == UNKNOWN_MEMBER_ID


def test_a_killed_consumer_protocol_member_expires_when_the_clock_is_advanced(
    kafka_broker: Broker, member_processes: list[MemberProcess]
) -> None:
    """Kafka 4's protocol: the broker's 45 s session, run out by the clock alone, hands
    the killed member's partitions to the one left."""
    topic, group = unique("vt-848-session"), unique("vt-848-session-group")
    kafka_broker.create_topic(topic, PARTITIONS)
    log = RebalanceLog()
    for name in ("stays", "killed"):
        member_processes.append(
            MemberProcess(
                "confluent-kafka-consumer-protocol",
                kafka_broker.bootstrap_servers,
                topic,
                group,
                name,
                log,
            )
        )
    # Settled once each holds one partition (the first to join holds both a moment).
    assert wait_until(
        lambda: (
            len(log.owned("stays")) == len(log.owned("killed")) == 1
            and log.owned("stays") | log.owned("killed") == {0, 1}
        ),
        SETTLE_TIMEOUT,
    )
    member_processes[1].kill()  # no leave: only its session can end its membership
    time.sleep(1.0)
    assert log.owned("stays") != {0, 1}
    kafka_broker.clock.advance(46)
    assert wait_until(lambda: log.owned("stays") == {0, 1}, SETTLE_TIMEOUT)


def test_the_clock_moves_only_forward(kafka_broker: Broker) -> None:
    before = kafka_broker.clock.wall_ms()
    kafka_broker.clock.advance(3600)
    assert kafka_broker.clock.wall_ms() - before >= 3_600_000
    with pytest.raises(ValueError, match="only moves forward"):
        kafka_broker.clock.advance(-1)
