"""kafka-python, once for both uses: the adapter the client catalogue drives in-process
(tests/interop/test_client_catalogue.py, the compaction tests) and the client matrix's
scenario (SCENARIOS.md's steps, `main`), run in a child process through
tests/interop/python/kafka_python_driver.py.

kafka-python: a synchronous client; its futures are waited on where they are made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any

import kafka.errors as errors
from kafka import (
    ConsumerRebalanceListener,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
)
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    OffsetSpec,
    OffsetTimestamp,
)
from kafka.errors import KafkaError, UnknownTopicOrPartitionError
from kafka.structs import OffsetAndMetadata

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
from tests.interop.python.scenario import (
    CONFIG_RETRIES,
    PARTITIONS,
    RETENTION_MS,
    TXN_OFFSET,
    Scenario,
    drive,
    read_late,
    rebalance,
    txn_keys,
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


# --- the client matrix's scenario (SCENARIOS.md) ---

CLIENT = "kafka-python"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SCENARIO_TIMEOUT = 20.0
POLL_MS = 500  # a poll long enough for kafka-python to finish a group join


def main() -> int:
    return drive(CLIENT, metadata.version(CLIENT), scenario)


def scenario(run: Scenario) -> None:
    flags, report = run.flags, run.report
    common: dict[str, Any] = {
        "bootstrap_servers": flags.bootstrap,
        "client_id": f"{CLIENT}-scenarios",
    }
    admin = KafkaAdminClient(**common)
    topic, group = flags.topic, flags.group
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    with run.step("create_topic"):
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, 1, topic_configs={"retention.ms": RETENTION_MS})]
        )

    with run.step("describe_configs"):
        entries = describe_topic(admin, topic)
        report["topic_configs"] = {name: entry["value"] for name, entry in entries.items()}
        report["default_config"] = {
            name: entry["config_source"] == "DEFAULT_CONFIG" for name, entry in entries.items()
        }

    with run.step("produce"):
        report["codecs"], report["partitioner"] = list(CODECS), "murmur2"
        report["produced"] = produce(run, common)
    run.done("headers", "timestamps", "keyed")

    with run.step("consume_group"):
        reader = group_member(common, topic, group, "earliest", enable_auto_commit=False)
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while len(report.get("consumed", {})) < flags.messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(report.get('consumed', {}))} messages")
            for message in (m for batch in reader.poll(200).values() for m in batch):
                run.record(
                    message.key.decode(),
                    message.value,
                    message.partition,
                    message.offset,
                    message.timestamp,
                    message.headers,
                )
        reader.commit()
        reader.close()

    with run.step("committed"):
        committed = admin.list_group_offsets({group: partitions})[group]
        report["committed"] = {tp.partition: found.offset for tp, found in committed.items()}

    with run.step("list_offsets"):
        report["oldest"] = list_offsets(admin, partitions, OffsetSpec.EARLIEST)
        report["newest"] = list_offsets(admin, partitions, OffsetSpec.LATEST)

    target = run.time_target()
    with run.step("offsets_for_time"):
        report["time_target"] = target
        at_time = list_offsets(admin, partitions, OffsetTimestamp(target))
        report["offsets_for_time"] = at_time

    with run.step("from_timestamp"):
        report["from_timestamp"] = read_from(common, topic, at_time, report["newest"])

    with run.step("from_latest"):
        report["from_latest"] = from_latest(common, topic, f"{group}-latest")

    with run.step("rebalance"):
        two, three = rebalance(lambda: Member(common, topic, f"{group}-trio"))
        report["group_of_two"], report["group_of_three"] = two, three
    run.skip(
        "rebalance_consumer_protocol",
        "kafka-python has only the classic group protocol (JoinGroup, SyncGroup), "
        "not KIP-848's ConsumerGroupHeartbeat",
    )

    with run.step("list_groups"):
        report["groups"] = sorted(found["group_id"] for found in admin.list_groups())

    with run.step("describe_group"):
        report["group_state"] = admin.describe_groups([group])[group]["group_state"]

    # One producer's transactions carry all three steps: reported in the catalogue's order.
    with run.step("transactions"):
        transactions(run, common, admin)
    run.done("transaction_offsets", "fencing")

    with run.step("delete_topic"):
        admin.delete_topics([topic])
    admin.close()


def transactions(run: Scenario, common: dict[str, Any], admin: KafkaAdminClient) -> None:
    """SCENARIOS.md's transactions, transaction_offsets and fencing steps."""
    report, topic, group = run.report, run.flags.topic, run.flags.group
    txn_topic, txn_id, txn_group = f"{topic}-txn", f"{group}-txn", f"{group}-txn"
    admin.create_topics([NewTopic(txn_topic, PARTITIONS, 1)])
    producer = KafkaProducer(transactional_id=txn_id, **common)

    def send(writer: KafkaProducer, kind: str) -> None:
        sent = [
            writer.send(txn_topic, key=key.encode(), value=f"value-{key}".encode())
            for key in txn_keys(kind)
        ]
        for future in sent:
            future.get(SCENARIO_TIMEOUT)

    producer.init_transactions()
    producer.begin_transaction()
    send(producer, "commit")
    offsets = {TopicPartition(topic, 0): OffsetAndMetadata(TXN_OFFSET, "", -1)}
    producer.send_offsets_to_transaction(offsets, txn_group)
    producer.commit_transaction()
    producer.begin_transaction()
    send(producer, "abort")
    producer.abort_transaction()

    successor = KafkaProducer(transactional_id=txn_id, **common)
    successor.init_transactions()
    try:
        producer.begin_transaction()
        send(producer, "zombie")
        producer.commit_transaction()
    except KafkaError as exc:
        report["fenced"] = f"{type(exc).__name__}: {exc}"
    else:
        raise AssertionError("the fenced producer committed")
    finally:
        # The fenced producer's batches fail one at a time; close(0) would raise on the
        # first one still pending, so wait for them all.
        producer.close(SCENARIO_TIMEOUT)
    successor.begin_transaction()
    send(successor, "after")
    successor.commit_transaction()
    successor.close(SCENARIO_TIMEOUT)

    committed = admin.list_group_offsets({txn_group: [TopicPartition(topic, 0)]})[txn_group]
    report["transaction_offsets"] = {tp.partition: meta.offset for tp, meta in committed.items()}
    report["read_committed"] = read_committed(common, txn_topic)


def read_committed(common: dict[str, Any], topic: str) -> list[str]:
    """Every key of `topic` a read_committed consumer reads to the end, once the last
    stable offsets have caught up with the log ends (a real Kafka writes the markers
    after answering the commit)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = KafkaConsumer(isolation_level="read_committed", enable_auto_commit=False, **common)
    looker = KafkaConsumer(enable_auto_commit=False, **common)
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while (ends := reader.end_offsets(partitions)) != looker.end_offsets(partitions):
        if time.monotonic() > deadline:
            raise TimeoutError("the transactions' markers")
        time.sleep(0.1)
    looker.close()
    reader.assign(partitions)
    reader.seek_to_beginning(*partitions)
    keys: list[str] = []
    while any(reader.position(tp) < ends[tp] for tp in partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} not read to its end")
        keys += [m.key.decode() for batch in reader.poll(200).values() for m in batch]
    reader.close()
    return keys


def group_member(
    common: dict[str, Any],
    topic: str,
    group: str,
    reset: str,
    listener: Any = None,
    **settings: Any,
) -> KafkaConsumer:
    """A consumer subscribed to `topic` in `group`, knowing the topic's partitions first:
    kafka-python 3.0 can stall in a group whose first assignment it made without the
    topic's metadata (the leader then never applies its own share)."""
    consumer = KafkaConsumer(group_id=group, auto_offset_reset=reset, **common, **settings)
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic], listener=listener)
    return consumer


def describe_topic(admin: KafkaAdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    for attempt in range(CONFIG_RETRIES):
        try:
            found: dict[str, Any] = admin.describe_configs([resource], config_filter="all")
            return found["topic"][topic]  # type: ignore[no-any-return]
        except UnknownTopicOrPartitionError:
            if attempt == CONFIG_RETRIES - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def produce(run: Scenario, common: dict[str, Any]) -> dict[str, int]:
    producers = [
        KafkaProducer(
            acks="all", compression_type=None if codec == "none" else codec, linger_ms=5, **common
        )
        for codec in CODECS
    ]
    sent = []
    for index, key in enumerate(run.keys):
        future = producers[index % len(CODECS)].send(
            run.flags.topic,
            key=key.encode(),
            value=f"value-{key}".encode(),
            headers=[("origin", f"header-{key}".encode())],
            timestamp_ms=run.timestamp(index),
        )
        sent.append((key, future))
    produced = {key: future.get(SCENARIO_TIMEOUT).partition for key, future in sent}
    for producer in producers:
        producer.close(SCENARIO_TIMEOUT)
    return produced


def list_offsets(
    admin: KafkaAdminClient, partitions: list[TopicPartition], spec: Any
) -> dict[int, int]:
    found = admin.list_partition_offsets({tp: spec for tp in partitions})
    return {tp.partition: answer.offset for tp, answer in found.items()}


def read_from(
    common: dict[str, Any], topic: str, start: dict[int, int], newest: dict[int, int]
) -> list[str]:
    reader = KafkaConsumer(enable_auto_commit=False, **common)
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
        for message in (m for batch in reader.poll(200).values() for m in batch):
            keys.append(message.key.decode())
            if message.offset + 1 >= newest[message.partition]:
                remaining.discard(message.partition)
    reader.close()
    return keys


def from_latest(common: dict[str, Any], topic: str, group: str) -> list[str]:
    reader = group_member(common, topic, group, "latest")
    writer = KafkaProducer(acks="all", **common)

    def send(key: str) -> None:
        writer.send(topic, key=key.encode(), value=b"late").get(SCENARIO_TIMEOUT)

    def poll() -> list[str]:
        return [m.key.decode() for batch in reader.poll(POLL_MS).values() for m in batch]

    keys = read_late(send, poll)
    writer.close(SCENARIO_TIMEOUT)
    reader.close()
    return keys


class Member(threading.Thread, ConsumerRebalanceListener):  # type: ignore[misc]
    """A group member polling in its own thread, holding its current assignment."""

    def __init__(self, common: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.stopping = threading.Event()
        self.consumer = group_member(common, topic, group, "earliest", listener=self)
        self.start()

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.held = {tp.partition for tp in assigned}

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.held = set()

    def run(self) -> None:
        # kafka-python 3.0 rejoins a group only within a poll long enough to finish the
        # join; 50 ms polls on a busy machine left a member out for good.
        while not self.stopping.is_set():
            self.consumer.poll(POLL_MS)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(SCENARIO_TIMEOUT)
