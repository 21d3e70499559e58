"""A group member in a child process, so a test can SIGKILL it: no LeaveGroup, no close.

    python -m tests.groups.member CLIENT BOOTSTRAP TOPIC GROUP CLIENT_ID SESSION_MS HEARTBEAT_MS

CLIENT is confluent-kafka, kafka-python, aiokafka or confluent-kafka-consumer-protocol
(group.protocol=consumer, where the broker sets the session and heartbeat interval and the
callbacks are incremental: each change is printed as `assigned` with all the member then
holds). Every rebalance callback prints one line, `assigned 0,3` or `revoked 0,3`,
flushed at once; the process consumes until killed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any


def report(event: str, partitions: Iterable[int]) -> None:
    print(event, ",".join(str(p) for p in sorted(partitions)), flush=True)


def run_confluent(
    bootstrap: str, topic: str, group: str, client_id: str, session_ms: int, heartbeat_ms: int
) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": heartbeat_ms,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _, parts: report("assigned", (p.partition for p in parts)),
        on_revoke=lambda _, parts: report("revoked", (p.partition for p in parts)),
    )
    while True:
        consumer.poll(0.1)


def run_confluent_consumer_protocol(bootstrap: str, topic: str, group: str, client_id: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    held: set[int] = set()

    def assigned(_: Any, parts: Any) -> None:
        held.update(p.partition for p in parts)
        report("assigned", held)

    def revoked(_: Any, parts: Any) -> None:
        held.difference_update(p.partition for p in parts)
        report("assigned", held)

    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while True:
        consumer.poll(0.1)


def run_kafka_python(
    bootstrap: str, topic: str, group: str, client_id: str, session_ms: int, heartbeat_ms: int
) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            report("revoked", (tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            report("assigned", (tp.partition for tp in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=heartbeat_ms,
        auto_offset_reset="earliest",
        retry_backoff_ms=50,
    )
    consumer.subscribe([topic], listener=Listener())
    while True:
        consumer.poll(timeout_ms=1_000)  # a short poll can lose an in-flight join (3.0.12)


async def run_aiokafka(
    bootstrap: str, topic: str, group: str, client_id: str, session_ms: int, heartbeat_ms: int
) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            report("revoked", (tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            report("assigned", (tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=heartbeat_ms,
        auto_offset_reset="earliest",
        retry_backoff_ms=50,
    )
    await consumer.start()
    consumer.subscribe([topic], listener=Listener())
    while True:
        await consumer.getmany(timeout_ms=100)


def main(argv: list[str]) -> None:
    client, bootstrap, topic, group, client_id = argv[:5]
    session_ms, heartbeat_ms = int(argv[5]), int(argv[6])
    args = (bootstrap, topic, group, client_id, session_ms, heartbeat_ms)
    if client == "confluent-kafka":
        run_confluent(*args)
    elif client == "confluent-kafka-consumer-protocol":
        run_confluent_consumer_protocol(bootstrap, topic, group, client_id)
    elif client == "kafka-python":
        run_kafka_python(*args)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(*args))
    else:
        raise SystemExit(f"unknown client {client!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
