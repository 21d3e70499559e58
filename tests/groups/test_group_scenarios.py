"""Consumer groups with each Python client: growth 1 -> 2 -> 3, a killed member, committed
offsets. Each scenario is written once and runs through every client's thin driver
(group_clients.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from minibroker import Broker
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import (
    SESSION_MS,
    SETTLE_TIMEOUT,
    MemberProcess,
    RebalanceLog,
    left_group,
    session_ms_for,
    settled,
    unique,
    wait_until,
)
from tests.groups.group_clients import GROUP_CLIENTS, GroupClient, Member

PARTITIONS = 6


@pytest.fixture(params=list(GROUP_CLIENTS))
def client(request: pytest.FixtureRequest) -> Iterator[GroupClient]:
    driver = GROUP_CLIENTS[request.param]()
    yield driver
    driver.close()


@pytest.fixture
def members(client: GroupClient) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    # Stop every poll loop first: a member still polling would rejoin after the first
    # LeaveGroup, and its next close would queue LeaveGroup behind the pending JoinGroup.
    for member in started:
        member.stop_polling()
    for member in started:
        member.close()


def test_group_grows_one_two_three(
    broker: Broker, client: GroupClient, members: list[Member]
) -> None:
    topic, group, log = unique("grow"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    pump = client.pump(members)
    names = [f"{client.member_prefix}{n}" for n in (1, 2, 3)]
    for count, name in enumerate(names, start=1):
        mark = time.monotonic()
        members.append(client.member(broker.bootstrap_servers, topic, group, name, log))
        present = names[:count]
        assert wait_until(
            lambda present=present: settled(broker, group, topic, PARTITIONS, log, present),
            SETTLE_TIMEOUT,
            pump=pump,
        ), f"{count} members did not settle: {log.events}"
        # Each member already there saw the rebalance through its callbacks.
        for earlier in present[:-1]:
            kinds = [kind for _, who, kind, _ in log.since(mark) if who == earlier]
            assert "revoked" in kinds and kinds[-1] == "assigned", (earlier, kinds)
        sizes = sorted(len(log.owned(name)) for name in present)
        assert sizes == {1: [6], 2: [3, 3], 3: [2, 2, 2]}[count]

    # The final assignment is acted on: every record is read once, by its owner.
    client.produce(broker.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS), 10))
    assert wait_until(
        lambda: sum(len(m.read()) for m in members) >= 10 * PARTITIONS, SETTLE_TIMEOUT, pump=pump
    )
    if pump is not None:
        pump()
    for member in members:
        assert {p for p, _ in member.read()} <= log.owned(member.name)
    read = sorted(r for m in members for r in m.read())
    assert read == [(p, o) for p in range(PARTITIONS) for o in range(10)]


def test_killed_member_expelled_after_session_timeout(
    broker: Broker,
    client: GroupClient,
    members: list[Member],
    member_processes: list[MemberProcess],
) -> None:
    topic, group, log = unique("kill"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    pump = client.pump(members)
    survivors = ["s1", "s2"]
    for name in survivors:
        members.append(client.member(broker.bootstrap_servers, topic, group, name, log))
    # In a child process so that SIGKILL cuts its connections with no LeaveGroup.
    victim = MemberProcess(client.name, broker.bootstrap_servers, topic, group, "victim", log)
    member_processes.append(victim)
    everyone = [*survivors, "victim"]
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, everyone), SETTLE_TIMEOUT, pump=pump
    ), log.events
    held = log.owned("victim")
    assert held

    killed_at = time.monotonic()
    victim.kill()
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, survivors),
        SETTLE_TIMEOUT,
        pump=pump,
    ), log.events
    assert not left_group(broker, "victim"), "SIGKILL must leave no LeaveGroup behind"
    moves = [at for at, who, kind, _ in log.since(killed_at) if kind == "assigned"]
    # Expelled by the session timeout, not by the closed connection: moved by the session
    # timeout (not at once), and not long after it expired.
    assert SESSION_MS / 2000 <= min(moves) - killed_at <= SESSION_MS / 1000 + 10, (
        min(moves) - killed_at
    )
    assert held <= log.owned("s1") | log.owned("s2")


@pytest.mark.parity
def test_committed_offsets_survive_restart(broker: KafkaService, client: GroupClient) -> None:
    topic, group = unique("commit"), unique("group")
    partitions, per_partition = 3, 20
    broker.create_topic(topic, partitions)
    bootstrap, session_ms = broker.bootstrap_servers, session_ms_for(broker)
    client.produce(bootstrap, topic, dict.fromkeys(range(partitions), per_partition))

    first = client.subscriber(bootstrap, topic, group, session_ms)
    try:
        processed = first.read(30)
        assert len(processed) == 30
        committed = {p: max(o for q, o in processed if q == p) + 1 for p, _ in processed}
        first.commit(committed)
        tail = first.read(partitions * per_partition - 30)  # consumed, never committed
    finally:
        first.close()
    assert sorted(processed + tail) == [
        (p, o) for p in range(partitions) for o in range(per_partition)
    ]

    client.produce(bootstrap, topic, dict.fromkeys(range(partitions), 5), start=per_partition)
    second = client.subscriber(bootstrap, topic, group, session_ms)
    try:
        starts = {p: committed.get(p, 0) for p in range(partitions)}
        expected = [(p, o) for p in range(partitions) for o in range(starts[p], per_partition + 5)]
        resumed = second.read(len(expected))
        assert second.nothing_more(), "records beyond the end"
        stored = second.committed(committed)
    finally:
        second.close()
    assert stored == committed
    assert sorted(resumed) == expected
    for p in range(partitions):
        mine = [o for q, o in resumed if q == p]
        assert mine[0] == starts[p], f"partition {p} resumed at {mine[0]}, not {starts[p]}"
    # Duplicates are exactly the consumed-but-uncommitted tail; nothing was lost.
    duplicates = set(processed + tail) & set(resumed)
    assert duplicates == {r for r in tail if r[1] >= committed.get(r[0], 0)}
    assert set(processed) & set(resumed) == set()
    assert 0 < sum(committed.values()) < partitions * per_partition
