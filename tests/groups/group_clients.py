"""A thin driver per Python client for the group scenarios (test_group_scenarios.py): how
each client produces, joins a group as a member whose rebalance callbacks go into a
RebalanceLog, and reads, commits and looks up offsets as a plain subscriber.

Every driver is synchronous to the scenarios: confluent-kafka is pumped by the waits,
kafka-python members poll in threads of their own, and aiokafka runs on an event loop in
a thread the driver holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from tests.groups.conftest import HEARTBEAT_MS, SESSION_MS, SETTLE_TIMEOUT, RebalanceLog

T = TypeVar("T")
Position = tuple[int, int]  # (partition, offset)

# kafka-python 3.0.12 loses a join that is still in flight when poll() times out if, by
# the next poll, need_rejoin() has turned false (the leader's own assignment brought its
# metadata snapshot up to date): the member then never completes the join, stops
# heartbeating and is expelled. A poll long enough to cover join + sync avoids it.
KAFKA_PYTHON_POLL_MS = 1_000


class Member(Protocol):
    name: str

    def read(self) -> list[Position]: ...

    def stop_polling(self) -> None: ...

    def close(self) -> None: ...


class Subscriber(Protocol):
    """A consumer of one group without rebalance bookkeeping, committing by hand."""

    def read(self, count: int) -> list[Position]:
        """Up to `count` records, within SETTLE_TIMEOUT."""
        ...

    def commit(self, offsets: Mapping[int, int]) -> None: ...

    def nothing_more(self) -> bool:
        """Whether half a second's poll returns no records."""
        ...

    def committed(self, partitions: Iterable[int]) -> dict[int, int]: ...

    def close(self) -> None: ...


class GroupClient(Protocol):
    name: ClassVar[str]  # the client, as tests.groups.member takes it
    member_prefix: ClassVar[str]  # the names of a scenario's members start with it

    def produce(
        self, bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0
    ) -> None:
        """`count` records into each partition, values `p:i` for i from `start`."""
        ...

    def member(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog
    ) -> Member: ...

    def pump(self, members: list[Member]) -> Callable[[], object] | None:
        """What drives the members while a scenario waits; None where they run alone."""
        ...

    def subscriber(self, bootstrap: str, topic: str, group: str, session_ms: int) -> Subscriber: ...

    def close(self) -> None: ...


# --- confluent-kafka ---


class ConfluentKafka:
    name = "confluent-kafka"
    member_prefix = "c"

    def produce(
        self, bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0
    ) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        for partition, count in per_partition.items():
            for i in range(start, start + count):
                producer.produce(topic, f"{partition}:{i}".encode(), partition=partition)
        assert producer.flush(15) == 0, "records were not acknowledged"

    def member(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog
    ) -> ConfluentMember:
        return ConfluentMember(bootstrap, topic, group, name, log)

    def pump(self, members: list[Member]) -> Callable[[], object] | None:
        def pump_all() -> None:
            for member in members:
                assert isinstance(member, ConfluentMember)
                member.pump()

        return pump_all

    def subscriber(
        self, bootstrap: str, topic: str, group: str, session_ms: int
    ) -> ConfluentSubscriber:
        return ConfluentSubscriber(bootstrap, topic, group, session_ms)

    def close(self) -> None:
        return None


class ConfluentMember:
    """An in-process confluent-kafka consumer whose callbacks go into a RebalanceLog."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog, **settings: Any
    ) -> None:
        from confluent_kafka import Consumer

        self.name = name
        self.records: list[Position] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "auto.offset.reset": "earliest",
                "log_level": 3,
                **settings,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, parts: log.record(name, "assigned", (p.partition for p in parts)),
            on_revoke=lambda _, parts: log.record(name, "revoked", (p.partition for p in parts)),
        )

    def pump(self) -> None:
        for message in self.consumer.consume(100, 0.01):
            if message.error() is None:
                self.records.append((message.partition(), message.offset()))

    def read(self) -> list[Position]:
        return list(self.records)

    def stop_polling(self) -> None:
        return None

    def close(self) -> None:
        self.consumer.close()


class ConfluentSubscriber:
    def __init__(self, bootstrap: str, topic: str, group: str, session_ms: int) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": session_ms,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )
        self.consumer.subscribe([topic])

    def read(self, count: int) -> list[Position]:
        got: list[Position] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset()))
        return got

    def commit(self, offsets: Mapping[int, int]) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.commit(
            offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )

    def nothing_more(self) -> bool:
        return not self.consumer.poll(0.5)

    def committed(self, partitions: Iterable[int]) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        wanted = [TopicPartition(self.topic, p) for p in partitions]
        return {tp.partition: tp.offset for tp in self.consumer.committed(wanted, timeout=10)}

    def close(self) -> None:
        self.consumer.close()


# --- kafka-python ---


def kafka_python_settings(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "auto_offset_reset": "earliest",
        "retry_backoff_ms": 50,
        "request_timeout_ms": 10_000,
        **overrides,
    }


class KafkaPython:
    name = "kafka-python"
    member_prefix = "k"

    def produce(
        self, bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0
    ) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10_000
        )
        try:
            futures = [
                producer.send(topic, f"{partition}:{i}".encode(), partition=partition)
                for partition, count in per_partition.items()
                for i in range(start, start + count)
            ]
            for future in futures:
                future.get(timeout=15)
        finally:
            producer.close(timeout=10)

    def member(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog
    ) -> KafkaPythonMember:
        return KafkaPythonMember(bootstrap, topic, group, name, log)

    def pump(self, members: list[Member]) -> Callable[[], object] | None:
        return None

    def subscriber(
        self, bootstrap: str, topic: str, group: str, session_ms: int
    ) -> KafkaPythonSubscriber:
        return KafkaPythonSubscriber(bootstrap, topic, group, session_ms)

    def close(self) -> None:
        return None


class KafkaPythonMember:
    """A kafka-python consumer polling in its own thread; callbacks go into a RebalanceLog."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog, **settings: Any
    ) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        self.name = name
        self.records: list[Position] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(
            **kafka_python_settings(bootstrap, group, client_id=name, **settings)
        )

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                log.record(name, "revoked", (tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.record(name, "assigned", (tp.partition for tp in assigned))

        self.consumer.subscribe([topic], listener=Listener())
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batches = self.consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS)
            with self._lock:
                for tp, found in batches.items():
                    self.records.extend((tp.partition, r.offset) for r in found)

    def read(self) -> list[Position]:
        with self._lock:
            return list(self.records)

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()


class KafkaPythonSubscriber:
    def __init__(self, bootstrap: str, topic: str, group: str, session_ms: int) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        self.consumer = KafkaConsumer(
            **kafka_python_settings(
                bootstrap,
                group,
                enable_auto_commit=False,
                max_poll_records=1,
                session_timeout_ms=session_ms,
            )
        )
        self.consumer.subscribe([topic])

    def read(self, count: int) -> list[Position]:
        got: list[Position] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            for tp, found in self.consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS).items():
                got.extend((tp.partition, r.offset) for r in found)
        return got

    def commit(self, offsets: Mapping[int, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        topic = self.topic
        at = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        self.consumer.commit(at)

    def nothing_more(self) -> bool:
        return not self.consumer.poll(timeout_ms=500)

    def committed(self, partitions: Iterable[int]) -> dict[int, int]:
        from kafka import TopicPartition

        return {p: self.consumer.committed(TopicPartition(self.topic, p)) for p in partitions}

    def close(self) -> None:
        self.consumer.close(autocommit=False)


# --- aiokafka ---


class Aiokafka:
    """aiokafka on an event loop in a thread of the driver's: members fetch in tasks on it,
    and each call from a scenario waits for its coroutine there."""

    name = "aiokafka"
    member_prefix = "a"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, step: Coroutine[Any, Any, T], timeout: float = SETTLE_TIMEOUT + 30) -> T:
        return asyncio.run_coroutine_threadsafe(step, self.loop).result(timeout)

    def produce(
        self, bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0
    ) -> None:
        from aiokafka import AIOKafkaProducer

        async def produce() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
            await producer.start()
            try:
                sent = [
                    await producer.send(topic, f"{partition}:{i}".encode(), partition=partition)
                    for partition, count in per_partition.items()
                    for i in range(start, start + count)
                ]
                await asyncio.wait_for(asyncio.gather(*sent), 15)
            finally:
                await producer.stop()

        self.run(produce())

    def member(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog
    ) -> AiokafkaMember:
        return AiokafkaMember(self, bootstrap, topic, group, name, log)

    def pump(self, members: list[Member]) -> Callable[[], object] | None:
        return None

    def subscriber(
        self, bootstrap: str, topic: str, group: str, session_ms: int
    ) -> AiokafkaSubscriber:
        return AiokafkaSubscriber(self, bootstrap, topic, group, session_ms)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def aiokafka_settings(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "auto_offset_reset": "earliest",
        "retry_backoff_ms": 50,
        "request_timeout_ms": 10_000,
        **overrides,
    }


class AiokafkaMember:
    """An aiokafka consumer on the driver's event loop, fetching in a task of its own."""

    def __init__(
        self,
        driver: Aiokafka,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        log: RebalanceLog,
    ) -> None:
        from aiokafka.abc import ConsumerRebalanceListener

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                log.record(name, "revoked", (tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.record(name, "assigned", (tp.partition for tp in assigned))

        self.name = name
        self.records: list[Position] = []
        self._driver = driver
        self._task: asyncio.Task[None] | None = None
        self.consumer = driver.run(self._start(bootstrap, topic, group, Listener()))

    async def _start(self, bootstrap: str, topic: str, group: str, listener: Any) -> Any:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(**aiokafka_settings(bootstrap, group, client_id=self.name))
        await consumer.start()
        consumer.subscribe([topic], listener=listener)
        self._task = asyncio.create_task(self._run(consumer))
        return consumer

    async def _run(self, consumer: Any) -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=100)
            for tp, found in batches.items():
                self.records.extend((tp.partition, r.offset) for r in found)

    def read(self) -> list[Position]:
        return list(self.records)

    def stop_polling(self) -> None:
        return None

    def close(self) -> None:
        async def stop() -> None:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            await self.consumer.stop()

        self._driver.run(stop())


class AiokafkaSubscriber:
    def __init__(
        self, driver: Aiokafka, bootstrap: str, topic: str, group: str, session_ms: int
    ) -> None:
        from aiokafka import AIOKafkaConsumer

        self.topic = topic
        self._driver = driver
        settings = aiokafka_settings(
            bootstrap, group, enable_auto_commit=False, session_timeout_ms=session_ms
        )

        async def start() -> Any:
            consumer = AIOKafkaConsumer(**settings)
            await consumer.start()
            consumer.subscribe([topic])
            return consumer

        self.consumer = driver.run(start())

    def read(self, count: int) -> list[Position]:
        async def read() -> list[Position]:
            got: list[Position] = []
            deadline = time.monotonic() + SETTLE_TIMEOUT
            while len(got) < count and time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    record = await asyncio.wait_for(self.consumer.getone(), 0.5)
                    got.append((record.partition, record.offset))
            return got

        return self._driver.run(read())

    def commit(self, offsets: Mapping[int, int]) -> None:
        from aiokafka import TopicPartition

        self._driver.run(
            self.consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        )

    def nothing_more(self) -> bool:
        extra = self._driver.run(self.consumer.getmany(timeout_ms=500))
        return not any(extra.values())

    def committed(self, partitions: Iterable[int]) -> dict[int, int]:
        from aiokafka import TopicPartition

        async def committed() -> dict[int, int]:
            return {
                p: await self.consumer.committed(TopicPartition(self.topic, p)) for p in partitions
            }

        return self._driver.run(committed())

    def close(self) -> None:
        self._driver.run(self.consumer.stop())


GROUP_CLIENTS: dict[str, Callable[[], GroupClient]] = {
    ConfluentKafka.name: ConfluentKafka,
    KafkaPython.name: KafkaPython,
    Aiokafka.name: Aiokafka,
}
