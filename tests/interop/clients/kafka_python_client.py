"""kafka-python: a synchronous client; its futures are waited on in the driver."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import kafka.errors as errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec, OffsetTimestamp

from tests.interop.clients.base import (
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
    OffsetQuery,
    ProduceOptions,
    Producer,
    ProduceRejected,
    Reader,
    ReadOptions,
    Received,
    Record,
    Refusal,
    ResourceKind,
    Spec,
    TopicMetadata,
)

REFUSALS: dict[type[errors.KafkaError], Refusal] = {
    errors.MessageSizeTooLargeError: Refusal.MESSAGE_TOO_LARGE,
    errors.UnknownTopicOrPartitionError: Refusal.UNKNOWN_TOPIC,
    errors.KafkaTimeoutError: Refusal.TIMED_OUT,
}


class KafkaPythonClient(Client):
    name = "kafka-python"
    lacks = {
        Capability.DELIVERY_TIMESTAMP_TYPE: "its RecordMetadata carries no timestamp type",
        Capability.MISSING_CONFIG_ERRORS: (
            "describe_configs drops a resource's error code and returns no configs"
        ),
    }
    # kafka-python waits up to max_block_ms for metadata naming the topic.
    unknown_topic_refusal = Refusal.TIMED_OUT

    @contextmanager
    def producer(self, options: ProduceOptions = PRODUCE_DEFAULTS) -> Iterator[Producer]:
        settings: dict[str, Any] = {
            "request_timeout_ms": 10_000,
            "max_block_ms": options.delivery_timeout_ms or 10_000,
        }
        if options.codec is not None:
            settings["compression_type"] = options.codec
        if options.acks is not None:
            settings["acks"] = "all" if options.acks == -1 else options.acks
            # kafka-python 3 turns idempotence on by default, and that needs acks=all.
            if options.acks != -1 and options.idempotence is None:
                settings["enable_idempotence"] = False
        if options.idempotence is not None:
            settings["enable_idempotence"] = options.idempotence
        if options.one_batch:
            settings["linger_ms"] = 1000
        if options.linger_ms is not None:
            settings["linger_ms"] = options.linger_ms
        if options.max_request_bytes is not None:
            settings["max_request_size"] = options.max_request_bytes
        if options.retries is not None:
            settings["retries"] = options.retries
        # Its default partitioner is Java's murmur2 rule.
        client = KafkaProducer(bootstrap_servers=self.broker.bootstrap_servers, **settings)
        try:
            yield _Producer(client)
        finally:
            client.close(timeout=TIMEOUT)

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
        client = KafkaConsumer(
            bootstrap_servers=self.broker.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=10_000,
            **settings,
        )
        try:
            client.assign([TopicPartition(topic, p) for p in range(partitions)])
            yield _Reader(client, topic, partitions)
        finally:
            client.close()

    @contextmanager
    def _admin_client(self) -> Iterator[KafkaAdminClient]:
        client = KafkaAdminClient(
            bootstrap_servers=self.broker.bootstrap_servers, request_timeout_ms=10_000
        )
        try:
            yield client
        finally:
            client.close()

    def metadata(self, topics: Sequence[str] | None = None) -> Metadata:
        with self._admin_client() as client:
            described = client.describe_topics(None if topics is None else list(topics))
            cluster = client.describe_cluster()
        return Metadata(
            brokers=[(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]],
            topics={
                t["name"]: TopicMetadata(
                    t["error_code"], [p["partition_index"] for p in t["partitions"]]
                )
                for t in described
            },
        )

    @contextmanager
    def admin(self) -> Iterator[Admin]:
        with self._admin_client() as client:
            yield _Admin(client)


class _Producer(Producer):
    def __init__(self, client: KafkaProducer) -> None:
        self._client = client

    def send(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        try:
            sent = [
                self._client.send(
                    topic,
                    r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
                for r in records
            ]
            self._client.flush(TIMEOUT)
            acknowledged = [future.get(TIMEOUT) for future in sent]
        except tuple(REFUSALS) as error:
            raise ProduceRejected(REFUSALS[type(error)], error) from error
        return [Delivery(m.partition, m.offset, m.timestamp, None) for m in acknowledged]


class _Reader(Reader):
    def __init__(self, client: KafkaConsumer, topic: str, partitions: int) -> None:
        self._client = client
        self._topic = topic
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Received]:
        batches = self._client.poll(timeout_ms=timeout_ms, max_records=max_records)
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
        for tp in self._partitions:
            self._client.seek(tp, offset)

    def seek_to_beginning(self) -> None:
        self._client.seek_to_beginning(*self._partitions)

    def seek_to_end(self) -> None:
        self._client.seek_to_end(*self._partitions)
        # kafka-python resolves the end lazily; asking the position resolves it now.
        for tp in self._partitions:
            self._client.position(tp, timeout_ms=TIMEOUT * 1000)

    def position(self, partition: int = 0) -> int:
        tp = TopicPartition(self._topic, partition)
        position: int = self._client.position(tp, timeout_ms=TIMEOUT * 1000)
        return position

    def offset_for_time(self, timestamp: int, partition: int = 0) -> OffsetAndTime | None:
        tp = TopicPartition(self._topic, partition)
        found = self._client.offsets_for_times({tp: timestamp}, timeout_ms=TIMEOUT * 1000)[tp]
        return None if found is None else OffsetAndTime(found.offset, found.timestamp)

    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        tp = TopicPartition(self._topic, partition)
        earliest = self._client.beginning_offsets([tp])
        end = self._client.end_offsets([tp])
        return earliest[tp], end[tp]


SPECS = {
    Spec.EARLIEST: OffsetSpec.EARLIEST,
    Spec.LATEST: OffsetSpec.LATEST,
    Spec.MAX_TIMESTAMP: OffsetSpec.MAX_TIMESTAMP,
}


def _check(topics: Sequence[Mapping[str, Any]]) -> None:
    for topic in topics:
        if topic["error_code"]:
            raise AdminFailed(topic["error_code"], topic)


class _Admin(Admin):
    def __init__(self, client: KafkaAdminClient) -> None:
        self._client = client

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        new = {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}
        _check(self._client.create_topics({name: new}, raise_errors=False)["topics"])

    def describe_topic(self, name: str) -> list[int]:
        [described] = self._client.describe_topics([name])
        _check([described])
        return [p["partition_index"] for p in described["partitions"]]

    def create_partitions(self, name: str, total: int) -> None:
        grown = self._client.create_partitions({name: total}, raise_errors=False)
        for result in grown.results:
            if result.error_code:
                raise AdminFailed(result.error_code, result)

    def describe_configs(self, kind: ResourceKind, name: str) -> dict[str, ConfigEntry]:
        resource_type = {
            ResourceKind.TOPIC: ConfigResourceType.TOPIC,
            ResourceKind.BROKER: ConfigResourceType.BROKER,
        }[kind]
        described = self._client.describe_configs(
            [ConfigResource(resource_type, name)], config_filter="all"
        )
        return {
            config: ConfigEntry(entry["value"], entry["config_source"])
            for config, entry in described[kind.value][name].items()
        }

    def describe_cluster(self) -> ClusterInfo:
        cluster = self._client.describe_cluster()
        return ClusterInfo(
            cluster["cluster_id"],
            cluster["controller_id"],
            [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]],
        )

    def list_offsets(
        self, topic: str, partition: int, queries: Sequence[OffsetQuery]
    ) -> list[OffsetAndTime]:
        tp = TopicPartition(topic, partition)
        found = [
            self._client.list_partition_offsets(
                {tp: OffsetTimestamp(query) if isinstance(query, int) else SPECS[query]}
            )[tp]
            for query in queries
        ]
        return [OffsetAndTime(f.offset, f.timestamp) for f in found]

    def delete_topic(self, name: str) -> None:
        _check(self._client.delete_topics([name], raise_errors=False)["topics"])
