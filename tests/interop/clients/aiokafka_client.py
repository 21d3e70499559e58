"""aiokafka: its coroutines run on an event loop the driver holds, so scenarios stay sync."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
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
