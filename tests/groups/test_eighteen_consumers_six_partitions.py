"""Eighteen consumers on six partitions with real clients (confluent-kafka): 3 machines x 6
consumers.

Eighteen members share a six-partition topic. The range assignor gives 6 // 18 = 0
partitions to everyone plus one extra to the first 6 % 18 = 6 members in member-id order,
so 12 members own nothing. Member ids start with the client id, so the machine whose
client ids sort first takes every partition and the other two sit idle. Round-robin
keeps the count (one topic, fewer partitions than members); another naming scheme moves
which machine idles.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer

from minibroker import Broker
from tests.groups.conftest import (
    HEARTBEAT_MS,
    SETTLE_TIMEOUT,
    RebalanceLog,
    broker_assignments,
    by_client_id,
    settled,
    unique,
    wait_until,
)

PARTITIONS = 6
MACHINES = ("host-a", "host-b", "host-c")
THREADS = 6
SESSION_MS = 6_000  # eighteen members share two cores; leave room for scheduling


@dataclass(frozen=True)
class Row:
    machine: str
    client_id: str
    member_id: str
    partitions: tuple[int, ...]


Naming = Callable[[str, int], str]


def machine_first(machine: str, thread: int) -> str:
    return f"{machine}-{thread}"


def machine_reversed(machine: str, thread: int) -> str:
    rank = {"host-a": 2, "host-b": 1, "host-c": 0}[machine]
    return f"{rank}-{machine}-{thread}"


def thread_first(machine: str, thread: int) -> str:
    return f"t{thread}-{machine}"


def run_group(broker: Broker, strategy: str, naming: Naming) -> list[Row]:
    """Start 18 consumers, wait until the group settles, return who owns what."""
    topic, group, log = unique("eighteen-on-six"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    machine_of = {naming(m, t): m for m in MACHINES for t in range(THREADS)}
    consumers: dict[str, Consumer] = {}
    try:
        for client_id in machine_of:

            def on_assign(_: Consumer, parts: list, who: str = client_id) -> None:
                log.record(who, "assigned", (p.partition for p in parts))

            def on_revoke(_: Consumer, parts: list, who: str = client_id) -> None:
                log.record(who, "revoked", (p.partition for p in parts))

            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "group.id": group,
                    "client.id": client_id,
                    "partition.assignment.strategy": strategy,
                    "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                    "log_level": 3,
                }
            )
            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
            consumers[client_id] = consumer

        def pump() -> None:
            for consumer in consumers.values():
                consumer.poll(0)
            time.sleep(0.01)

        names = list(machine_of)
        assert wait_until(
            lambda: settled(broker, group, topic, PARTITIONS, log, names),
            SETTLE_TIMEOUT * 2,
            pump=pump,
        ), f"18 members did not settle: {log.events}"
        stored = by_client_id(broker_assignments(broker, group, topic), names)
        rows = [
            Row(
                machine_of[client_id],
                client_id,
                consumer.memberid() or "",
                tuple(stored[client_id]),
            )
            for client_id, consumer in consumers.items()
        ]
    finally:
        for consumer in consumers.values():
            consumer.close()
    print_table(strategy, naming.__name__, rows)
    return rows


def print_table(strategy: str, naming: str, rows: list[Row]) -> None:
    print(f"\neighteen consumers on six partitions, {strategy} assignor, client ids {naming}:")
    print(f"{'machine':8} {'member id':50} partitions")
    for row in sorted(rows, key=lambda r: r.member_id):
        owned = ",".join(map(str, row.partitions)) or (
            "none  (No broker partitions consumed by consumer thread)"
        )
        print(f"{row.machine:8} {row.member_id:50} {owned}")


def owners_per_machine(rows: list[Row]) -> dict[str, int]:
    return {m: sum(1 for r in rows if r.machine == m and r.partitions) for m in MACHINES}


def check_shape(rows: list[Row]) -> None:
    """18 members, member ids prefixed by client ids, 6 own one partition, 12 own none."""
    assert len(rows) == 18
    for row in rows:
        assert row.member_id.startswith(f"{row.client_id}-"), row
    sizes = sorted(len(r.partitions) for r in rows)
    assert sizes == [0] * 12 + [1] * 6, sizes
    assert sorted(p for r in rows for p in r.partitions) == list(range(PARTITIONS))


def test_confluent_kafka_range_leaves_two_machines_idle(broker: Broker) -> None:
    rows = run_group(broker, "range", machine_first)
    check_shape(rows)
    # The owners are the first six member ids in sort order, partition i to the i-th.
    ordered = sorted(rows, key=lambda r: r.member_id)
    assert [r.partitions for r in ordered[:PARTITIONS]] == [(p,) for p in range(PARTITIONS)]
    assert owners_per_machine(rows) == {"host-a": 6, "host-b": 0, "host-c": 0}


def test_confluent_kafka_roundrobin_keeps_the_count(broker: Broker) -> None:
    rows = run_group(broker, "roundrobin", machine_first)
    check_shape(rows)
    assert sum(owners_per_machine(rows).values()) == 6


def test_confluent_kafka_member_id_order_decides_which_machine_idles(broker: Broker) -> None:
    reversed_rows = run_group(broker, "range", machine_reversed)
    check_shape(reversed_rows)
    assert owners_per_machine(reversed_rows) == {"host-a": 0, "host-b": 0, "host-c": 6}

    interleaved = run_group(broker, "range", thread_first)
    check_shape(interleaved)
    assert owners_per_machine(interleaved) == {"host-a": 2, "host-b": 2, "host-c": 2}
