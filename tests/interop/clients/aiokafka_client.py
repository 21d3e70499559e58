"""aiokafka, once for both uses: the adapter the client catalogue drives in-process
(tests/interop/test_client_catalogue.py, the compaction tests) and the client matrix's
scenario (SCENARIOS.md's steps, `main`), run in a child process through
tests/interop/python/aiokafka_driver.py.

aiokafka: its coroutines run on an event loop the adapter holds, so the catalogue's
scenarios stay sync; the matrix's scenario runs on its own loop (asyncio.run).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
    for_code,
)

from minibroker import Broker
from tests.interop.clients.base import (
    CONFIG_SOURCES,
    PRODUCE_DEFAULTS,
    READ_DEFAULTS,
    TIMEOUT,
    Admin,
    AdminFailed,
    Capability,
    Client,
    ClusterInfo,
    ConfigEntry,
    Delivery,
    Metadata,
    OffsetAndTime,
    ProduceOptions,
    Producer,
    ProduceRejected,
    Reader,
    ReadOptions,
    Received,
    Record,
    Refusal,
    ResourceKind,
    TopicMetadata,
    one_partition,
)
from tests.interop.python.scenario import (
    CONFIG_RETRIES,
    LATE_INTERVAL,
    LATE_MESSAGES,
    PARTITIONS,
    RETENTION_MS,
    TXN_OFFSET,
    Scenario,
    covers_all,
    drive,
    txn_keys,
)

T = TypeVar("T")

REFUSALS: dict[type[KafkaError], Refusal] = {
    MessageSizeTooLargeError: Refusal.MESSAGE_TOO_LARGE,
    UnknownTopicOrPartitionError: Refusal.UNKNOWN_TOPIC,
    KafkaTimeoutError: Refusal.TIMED_OUT,
}


class AiokafkaClient(Client):
    name = "aiokafka"
    lacks = {Capability.ADMIN_LIST_OFFSETS: "AIOKafkaAdminClient has no ListOffsets call"}
    unknown_topic_refusal = Refusal.UNKNOWN_TOPIC

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self._loop = asyncio.new_event_loop()

    def close(self) -> None:
        self._loop.close()

    def run(self, step: Awaitable[T]) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(step, TIMEOUT)

        return self._loop.run_until_complete(bounded())

    def call(self, function: Callable[[], T]) -> T:
        """Call `function` on the running loop: aiokafka binds what it makes to that loop."""

        async def on_loop() -> T:
            return function()

        return self.run(on_loop())

    @contextmanager
    def producer(self, options: ProduceOptions = PRODUCE_DEFAULTS) -> Iterator[Producer]:
        settings: dict[str, Any] = {}
        if options.codec is not None:
            settings["compression_type"] = options.codec
        if options.acks is not None:
            settings["acks"] = "all" if options.acks == -1 else options.acks
        if options.idempotence is not None:
            settings["enable_idempotence"] = options.idempotence
        if options.linger_ms is not None:
            settings["linger_ms"] = options.linger_ms
        if options.max_request_bytes is not None:
            settings["max_request_size"] = options.max_request_bytes
        # aiokafka has no retry count; its default partitioner is Java's murmur2 rule.
        client = self.call(
            lambda: AIOKafkaProducer(
                bootstrap_servers=self.broker.bootstrap_servers,
                # aiokafka waits for a topic's metadata up to the request timeout.
                request_timeout_ms=options.delivery_timeout_ms or 10_000,
                **settings,
            )
        )
        self.run(client.start())
        try:
            yield _Producer(self, client, options.one_batch)
        finally:
            self.run(client.stop())

    @contextmanager
    def reader(
        self, topic: str, partitions: int = 1, options: ReadOptions = READ_DEFAULTS
    ) -> Iterator[Reader]:
        settings: dict[str, Any] = {"fetch_max_wait_ms": options.max_wait_ms}
        if options.client_id is not None:
            settings["client_id"] = options.client_id
        if options.fetch_limit is not None:
            settings["max_partition_fetch_bytes"] = options.fetch_limit
            settings["fetch_max_bytes"] = options.fetch_limit
        client = self.call(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=self.broker.bootstrap_servers,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                request_timeout_ms=10_000,
                **settings,
            )
        )
        self.run(client.start())
        try:
            self.call(lambda: client.assign([TopicPartition(topic, p) for p in range(partitions)]))
            yield _Reader(self, client, topic, partitions)
        finally:
            self.run(client.stop())

    @contextmanager
    def _admin_client(self) -> Iterator[AIOKafkaAdminClient]:
        client = self.call(
            lambda: AIOKafkaAdminClient(
                bootstrap_servers=self.broker.bootstrap_servers, request_timeout_ms=10_000
            )
        )
        self.run(client.start())
        try:
            yield client
        finally:
            self.run(client.close())

    def metadata(self, topics: Sequence[str] | None = None) -> Metadata:
        with self._admin_client() as client:
            described = self.run(client.describe_topics(None if topics is None else list(topics)))
            cluster = self.run(client.describe_cluster())
        return Metadata(
            brokers=[(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]],
            topics={
                t["topic"]: TopicMetadata(
                    t["error_code"], [p["partition"] for p in t["partitions"]]
                )
                for t in described
            },
        )

    @contextmanager
    def admin(self) -> Iterator[Admin]:
        with self._admin_client() as client:
            yield _Admin(self, client)


class _Producer(Producer):
    def __init__(self, driver: AiokafkaClient, client: AIOKafkaProducer, one_batch: bool) -> None:
        self._driver = driver
        self._client = client
        self._one_batch = one_batch

    def send(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        step = self._send_batch if self._one_batch else self._send_each
        try:
            return self._driver.run(step(topic, records))
        except tuple(REFUSALS) as error:
            raise ProduceRejected(REFUSALS[type(error)], error) from error

    async def _send_each(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        sent = [
            await self._client.send(
                topic,
                r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers),
            )
            for r in records
        ]
        return [_delivery(metadata) for metadata in await asyncio.gather(*sent)]

    async def _send_batch(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        batch = self._client.create_batch()
        for r in records:
            appended = batch.append(
                key=r.key, value=r.value, timestamp=r.timestamp, headers=list(r.headers)
            )
            assert appended is not None, "the batch is full"
        sent = await self._client.send_batch(batch, topic, partition=one_partition(records))
        metadata = await sent
        # One acknowledgement for the batch: its records follow its base offset.
        return [
            Delivery(metadata.partition, metadata.offset + i, None, None)
            for i in range(len(records))
        ]


def _delivery(metadata: Any) -> Delivery:
    if metadata is None:  # acks=0: aiokafka resolves the send with nothing
        return Delivery(None, None, None, None)
    return Delivery(
        metadata.partition, metadata.offset, metadata.timestamp, metadata.timestamp_type
    )


class _Reader(Reader):
    def __init__(
        self, driver: AiokafkaClient, client: AIOKafkaConsumer, topic: str, partitions: int
    ) -> None:
        self._driver = driver
        self._client = client
        self._topic = topic
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Received]:
        batches = self._driver.run(
            self._client.getmany(timeout_ms=timeout_ms, max_records=max_records)
        )
        return [
            Received(
                r.key,
                r.value,
                list(r.headers),
                r.timestamp,
                r.timestamp_type,
                r.offset,
                r.partition,
            )
            for batch in batches.values()
            for r in batch
        ]

    def seek(self, offset: int) -> None:
        def seek_each() -> None:
            for tp in self._partitions:
                self._client.seek(tp, offset)

        self._driver.call(seek_each)

    def seek_to_beginning(self) -> None:
        self._driver.run(self._client.seek_to_beginning(*self._partitions))

    def seek_to_end(self) -> None:
        # aiokafka returns once the end offsets are resolved.
        self._driver.run(self._client.seek_to_end(*self._partitions))

    def position(self, partition: int = 0) -> int:
        position: int = self._driver.run(
            self._client.position(TopicPartition(self._topic, partition))
        )
        return position

    def offset_for_time(self, timestamp: int, partition: int = 0) -> OffsetAndTime | None:
        tp = TopicPartition(self._topic, partition)
        found = self._driver.run(self._client.offsets_for_times({tp: timestamp}))[tp]
        return None if found is None else OffsetAndTime(found.offset, found.timestamp)

    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        tp = TopicPartition(self._topic, partition)
        earliest = self._driver.run(self._client.beginning_offsets([tp]))
        end = self._driver.run(self._client.end_offsets([tp]))
        return earliest[tp], end[tp]


def _check(topic_errors: Sequence[Any]) -> None:
    """aiokafka hands back the broker's per-topic error codes without raising."""
    for _name, code, *detail in topic_errors:
        if code:
            raise AdminFailed(code, detail)


class _Admin(Admin):
    def __init__(self, driver: AiokafkaClient, client: AIOKafkaAdminClient) -> None:
        self._driver = driver
        self._client = client

    def _run(self, step: Awaitable[T]) -> T:
        try:
            return self._driver.run(step)
        except KafkaError as error:
            if not error.errno:
                raise
            raise AdminFailed(error.errno, error) from error

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        new = NewTopic(name, partitions, 1, topic_configs=dict(configs or {}))
        _check(self._run(self._client.create_topics([new])).topic_errors)

    def describe_topic(self, name: str) -> list[int]:
        [described] = self._run(self._client.describe_topics([name]))
        if described["error_code"]:
            raise AdminFailed(described["error_code"], described)
        return [p["partition"] for p in described["partitions"]]

    def create_partitions(self, name: str, total: int) -> None:
        grown = self._run(self._client.create_partitions({name: NewPartitions(total)}))
        _check(grown.topic_errors)

    def describe_configs(self, kind: ResourceKind, name: str) -> dict[str, ConfigEntry]:
        resource_type = {
            ResourceKind.TOPIC: ConfigResourceType.TOPIC,
            ResourceKind.BROKER: ConfigResourceType.BROKER,
        }[kind]
        [response] = self._run(self._client.describe_configs([ConfigResource(resource_type, name)]))
        [(code, message, _type, _name, entries)] = response.resources
        if code:
            raise AdminFailed(code, message)
        return {entry[0]: ConfigEntry(entry[1], CONFIG_SOURCES[entry[3]]) for entry in entries}

    def describe_cluster(self) -> ClusterInfo:
        cluster = self._run(self._client.describe_cluster())
        return ClusterInfo(
            cluster["cluster_id"],
            cluster["controller_id"],
            [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]],
        )

    def delete_topic(self, name: str) -> None:
        _check(self._run(self._client.delete_topics([name])).topic_error_codes)


# --- the client matrix's scenario (SCENARIOS.md) ---

CLIENT = "aiokafka"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SCENARIO_TIMEOUT = 20.0
DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs' config_source for a config left at its default


def main() -> int:
    return drive(CLIENT, metadata.version(CLIENT), lambda run: asyncio.run(scenario(run)))


async def scenario(run: Scenario) -> None:
    flags, report = run.flags, run.report
    common: dict[str, Any] = {
        "bootstrap_servers": flags.bootstrap,
        "client_id": f"{CLIENT}-scenarios",
    }
    admin = AIOKafkaAdminClient(**common)
    await admin.start()
    topic, group = flags.topic, flags.group
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    with run.step("create_topic"):
        new = NewTopic(topic, PARTITIONS, 1, topic_configs={"retention.ms": RETENTION_MS})
        answer = await admin.create_topics([new])
        raise_errors(code for _, code, *_ in answer.topic_errors)

    with run.step("describe_configs"):
        entries = await describe_topic(admin, topic)
        report["topic_configs"] = {entry[0]: entry[1] for entry in entries}
        report["default_config"] = {
            entry[0]: entry[3] == DEFAULT_CONFIG_SOURCE for entry in entries
        }

    with run.step("produce"):
        report["codecs"], report["partitioner"] = list(CODECS), "murmur2"
        report["produced"] = await produce(run, common)
    run.done("headers", "timestamps", "keyed")

    with run.step("consume_group"):
        reader = AIOKafkaConsumer(
            topic,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **common,
        )
        await reader.start()
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while len(report.get("consumed", {})) < flags.messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(report.get('consumed', {}))} messages")
            found = await reader.getmany(timeout_ms=200)
            for message in (m for batch in found.values() for m in batch):
                run.record(
                    message.key.decode(),
                    message.value,
                    message.partition,
                    message.offset,
                    message.timestamp,
                    list(message.headers),
                )
        await reader.commit()
        await reader.stop()

    with run.step("committed"):
        committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
        report["committed"] = {tp.partition: found.offset for tp, found in committed.items()}

    # aiokafka offers offset lookups on its consumer, not its admin client.
    looker = AIOKafkaConsumer(enable_auto_commit=False, **common)
    await looker.start()
    with run.step("list_offsets"):
        oldest = await looker.beginning_offsets(partitions)
        newest = await looker.end_offsets(partitions)
        report["oldest"] = {tp.partition: offset for tp, offset in oldest.items()}
        report["newest"] = {tp.partition: offset for tp, offset in newest.items()}

    target = run.time_target()
    with run.step("offsets_for_time"):
        report["time_target"] = target
        at_time = await looker.offsets_for_times(dict.fromkeys(partitions, target))
        report["offsets_for_time"] = {
            tp.partition: -1 if found is None else found.offset for tp, found in at_time.items()
        }
    await looker.stop()

    with run.step("from_timestamp"):
        report["from_timestamp"] = await read_from(
            common, topic, report["offsets_for_time"], report["newest"]
        )

    with run.step("from_latest"):
        report["from_latest"] = await from_latest(common, topic, f"{group}-latest")

    with run.step("rebalance"):
        two, three = await rebalance(common, topic, f"{group}-trio")
        report["group_of_two"], report["group_of_three"] = two, three
    run.skip(
        "rebalance_consumer_protocol",
        "aiokafka has only the classic group protocol (JoinGroup, SyncGroup), "
        "not KIP-848's ConsumerGroupHeartbeat",
    )

    with run.step("list_groups"):
        report["groups"] = sorted(name for name, _ in await admin.list_consumer_groups())

    with run.step("describe_group"):
        [described] = await admin.describe_consumer_groups([group])
        [(code, _, state, *_)] = described.groups
        raise_errors([code])
        report["group_state"] = state

    # One producer's transactions carry all three steps: reported in the catalogue's order.
    with run.step("transactions"):
        await transactions(run, common, admin)
    run.done("transaction_offsets", "fencing")

    with run.step("delete_topic"):
        deleted = await admin.delete_topics([topic])
        raise_errors(code for _, code, *_ in deleted.topic_error_codes)
    await admin.close()


async def transactions(run: Scenario, common: dict[str, Any], admin: AIOKafkaAdminClient) -> None:
    """SCENARIOS.md's transactions, transaction_offsets and fencing steps."""
    report, topic, group = run.report, run.flags.topic, run.flags.group
    txn_topic, txn_id, txn_group = f"{topic}-txn", f"{group}-txn", f"{group}-txn"
    answer = await admin.create_topics([NewTopic(txn_topic, PARTITIONS, 1)])
    raise_errors(code for _, code, *_ in answer.topic_errors)
    producer = AIOKafkaProducer(transactional_id=txn_id, **common)
    successor = AIOKafkaProducer(transactional_id=txn_id, **common)
    await producer.start()

    async def send(writer: AIOKafkaProducer, kind: str) -> None:
        for key in txn_keys(kind):
            await writer.send_and_wait(txn_topic, key=key.encode(), value=f"value-{key}".encode())

    try:
        async with producer.transaction():
            await send(producer, "commit")
            offsets = {TopicPartition(topic, 0): TXN_OFFSET}
            await producer.send_offsets_to_transaction(offsets, txn_group)
        await producer.begin_transaction()
        await send(producer, "abort")
        await producer.abort_transaction()

        await successor.start()
        try:
            await producer.begin_transaction()
            await send(producer, "zombie")
            await producer.commit_transaction()
        except KafkaError as exc:
            report["fenced"] = f"{type(exc).__name__}: {exc}"
        else:
            raise AssertionError("the fenced producer committed")
        async with successor.transaction():
            await send(successor, "after")
    finally:
        await producer.stop()
        await successor.stop()

    committed = await admin.list_consumer_group_offsets(
        txn_group, partitions=[TopicPartition(topic, 0)]
    )
    report["transaction_offsets"] = {tp.partition: meta.offset for tp, meta in committed.items()}
    report["read_committed"] = await read_committed(common, txn_topic)


async def read_committed(common: dict[str, Any], topic: str) -> list[str]:
    """Every key of `topic` a read_committed consumer reads to the end, once the last
    stable offsets have caught up with the log ends (a real Kafka writes the markers
    after answering the commit)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = AIOKafkaConsumer(isolation_level="read_committed", enable_auto_commit=False, **common)
    looker = AIOKafkaConsumer(enable_auto_commit=False, **common)
    await reader.start()
    await looker.start()
    try:
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while (ends := await reader.end_offsets(partitions)) != await looker.end_offsets(
            partitions
        ):
            if time.monotonic() > deadline:
                raise TimeoutError("the transactions' markers")
            await asyncio.sleep(0.1)
        reader.assign(partitions)
        await reader.seek_to_beginning(*partitions)
        keys: list[str] = []
        while any([await reader.position(tp) < ends[tp] for tp in partitions]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not read to its end")
            found = await reader.getmany(timeout_ms=200)
            keys += [m.key.decode() for batch in found.values() for m in batch]
    finally:
        await reader.stop()
        await looker.stop()
    return keys


def raise_errors(codes: Any) -> None:
    for code in codes:
        if code:
            raise for_code(code)()


async def describe_topic(admin: AIOKafkaAdminClient, topic: str) -> list[Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    for attempt in range(CONFIG_RETRIES):
        [answer] = await admin.describe_configs([resource])
        [(code, _, _, _, entries)] = answer.resources
        if code != UnknownTopicOrPartitionError.errno or attempt == CONFIG_RETRIES - 1:
            raise_errors([code])
            return list(entries)
        await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def produce(run: Scenario, common: dict[str, Any]) -> dict[str, int]:
    producers = [
        AIOKafkaProducer(
            acks="all", compression_type=None if codec == "none" else codec, linger_ms=5, **common
        )
        for codec in CODECS
    ]
    for producer in producers:
        await producer.start()
    sent = []
    for index, key in enumerate(run.keys):
        future = await producers[index % len(CODECS)].send(
            run.flags.topic,
            key=key.encode(),
            value=f"value-{key}".encode(),
            headers=[("origin", f"header-{key}".encode())],
            timestamp_ms=run.timestamp(index),
        )
        sent.append((key, future))
    produced = {key: (await future).partition for key, future in sent}
    for producer in producers:
        await producer.stop()
    return produced


async def read_from(
    common: dict[str, Any], topic: str, start: dict[int, int], newest: dict[int, int]
) -> list[str]:
    reader = AIOKafkaConsumer(enable_auto_commit=False, **common)
    await reader.start()
    wanted = {p: at for p, at in start.items() if 0 <= at < newest[p]}
    reader.assign([TopicPartition(topic, p) for p in wanted])
    for partition, at in wanted.items():
        reader.seek(TopicPartition(topic, partition), at)
    keys: list[str] = []
    remaining = set(wanted)
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while remaining:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(remaining)} not read to their end")
        found = await reader.getmany(timeout_ms=200)
        for message in (m for batch in found.values() for m in batch):
            keys.append(message.key.decode())
            if message.offset + 1 >= newest[message.partition]:
                remaining.discard(message.partition)
    await reader.stop()
    return keys


async def from_latest(common: dict[str, Any], topic: str, group: str) -> list[str]:
    reader = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="latest", **common)
    writer = AIOKafkaProducer(acks="all", **common)
    await reader.start()
    await writer.start()
    keys: list[str] = []
    sent, next_send = 0, time.monotonic()
    while not keys:
        if time.monotonic() >= next_send:
            if sent == LATE_MESSAGES:
                raise TimeoutError(f"none of {sent} late messages was read")
            await writer.send_and_wait(topic, key=f"late-{sent:03d}".encode(), value=b"late")
            sent, next_send = sent + 1, time.monotonic() + LATE_INTERVAL
        found = await reader.getmany(timeout_ms=50)
        keys.extend(m.key.decode() for batch in found.values() for m in batch)
    await writer.stop()
    await reader.stop()
    return keys


class Member(ConsumerRebalanceListener):  # type: ignore[misc]
    """A group member fetching in its own task, holding its current assignment."""

    def __init__(self, common: dict[str, Any], topic: str, group: str) -> None:
        self.held: set[int] = set()
        self.consumer = AIOKafkaConsumer(group_id=group, auto_offset_reset="earliest", **common)
        self.topic = topic
        self.task: asyncio.Task[None] | None = None

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.held = {tp.partition for tp in assigned}

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.held = set()

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=self)
        self.task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            await self.consumer.getmany(timeout_ms=50)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
        await self.consumer.stop()


async def settled(members: list[Member], what: str) -> list[list[int]]:
    deadline = time.monotonic() + 30
    while not covers_all([m.held for m in members]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within 30 s")
        await asyncio.sleep(0.05)
    return [sorted(m.held) for m in members]


async def rebalance(
    common: dict[str, Any], topic: str, group: str
) -> tuple[list[list[int]], list[list[int]]]:
    members = [Member(common, topic, group) for _ in range(2)]
    try:
        for member in members:
            await member.start()
        two = await settled(members, "two members assigned")
        members.append(Member(common, topic, group))
        await members[-1].start()
        three = await settled(members, "three members assigned")
    finally:
        await asyncio.gather(*(member.stop() for member in members))
    return two, three
