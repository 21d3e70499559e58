"""confluent-kafka, once for both uses: the adapter the client catalogue drives in-process
(tests/interop/test_client_catalogue.py, the compaction tests) and the client matrix's
scenario (SCENARIOS.md's steps, `main`), run in a child process through
tests/interop/python/confluent_kafka_driver.py.

confluent-kafka: librdkafka; its settings also serve kcat, which bundles librdkafka.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from importlib import metadata
from typing import Any, TypeVar

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.interop.clients.base import (
    CREATE_TIME,
    LOG_APPEND_TIME,
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
    Header,
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
from tests.interop.conftest import answer_times, unique_client_id, wait_until
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
from tests.interop.python.scenario import wait_until as wait_or_time_out

T = TypeVar("T")

TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}
REFUSALS = {
    KafkaError.MSG_SIZE_TOO_LARGE: Refusal.MESSAGE_TOO_LARGE,
    KafkaError._UNKNOWN_TOPIC: Refusal.UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_OR_PART: Refusal.UNKNOWN_TOPIC,
    KafkaError._MSG_TIMED_OUT: Refusal.TIMED_OUT,
}
# librdkafka's default message.max.bytes; fetch.max.bytes may not be below it.
LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000


def librdkafka_producer_settings(options: ProduceOptions, partitioner: str) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if options.codec is not None:
        settings["compression.type"] = options.codec
    if options.acks is not None:
        settings["acks"] = options.acks
    if options.idempotence is not None:
        settings["enable.idempotence"] = options.idempotence
    if options.one_batch:
        # Long enough to gather one send's records; kcat's librdkafka waits it out at exit.
        settings["linger.ms"] = 100
    if options.linger_ms is not None:
        settings["linger.ms"] = options.linger_ms
    if options.max_request_bytes is not None:
        settings["message.max.bytes"] = options.max_request_bytes
        settings["batch.size"] = options.max_request_bytes
    if options.retries is not None:
        settings["retries"] = options.retries
    if options.java_partitioner:
        settings["partitioner"] = partitioner
    if options.delivery_timeout_ms is not None:
        settings["message.timeout.ms"] = options.delivery_timeout_ms
        # A topic still unknown after this long fails as unknown rather than timing out.
        settings["topic.metadata.propagation.max.ms"] = options.delivery_timeout_ms // 5
    return settings


def librdkafka_fetch_limits(limit: int) -> dict[str, int]:
    settings = {"fetch.max.bytes": limit, "max.partition.fetch.bytes": limit}
    # librdkafka wants fetch.max.bytes >= message.max.bytes and
    # receive.message.max.bytes > fetch.max.bytes.
    if limit < LIBRDKAFKA_MESSAGE_MAX_BYTES:
        settings["message.max.bytes"] = limit
    else:
        settings["receive.message.max.bytes"] = 2 * limit
    return settings


def wait_for_end_lookup(client: Client, client_id: str, before: int) -> None:
    """librdkafka resolves a seek to the end with a ListOffsets of its own; once the
    broker has answered it, a record produced next is read, not skipped."""
    assert wait_until(
        lambda: len(answer_times(client.broker, client_id, "ListOffsets")) > before, TIMEOUT
    ), "the seek to the end sent no ListOffsets"


class ConfluentKafkaClient(Client):
    name = "confluent-kafka"
    lacks = {
        Capability.READER_POSITION: (
            "position() follows the records consumed: after a seek it is -1001 until one arrives"
        ),
        Capability.LOOKUP_TIMESTAMP: "offsets_for_times returns offsets alone",
    }
    unknown_topic_refusal = Refusal.UNKNOWN_TOPIC

    def common(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.broker.bootstrap_servers,
            "socket.timeout.ms": 10_000,
            "log.connection.close": False,  # the broker stops at teardown; that is expected
        }

    @contextmanager
    def producer(self, options: ProduceOptions = PRODUCE_DEFAULTS) -> Iterator[Producer]:
        settings = {
            **self.common(),
            "message.timeout.ms": TIMEOUT * 1000,
            **librdkafka_producer_settings(options, partitioner="murmur2_random"),
        }
        client = KafkaProducer(settings)
        try:
            yield _Producer(client)
            assert client.flush(TIMEOUT) == 0, "messages still queued after flush"
        finally:
            client.close()

    @contextmanager
    def reader(
        self, topic: str, partitions: int = 1, options: ReadOptions = READ_DEFAULTS
    ) -> Iterator[Reader]:
        client_id = options.client_id or unique_client_id("confluent-reader")
        settings = {
            **self.common(),
            # librdkafka needs a group.id for a consumer; nothing joins or commits.
            "group.id": unique_client_id("confluent-unused-group"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": options.max_wait_ms,
            "client.id": client_id,
            **(librdkafka_fetch_limits(options.fetch_limit) if options.fetch_limit else {}),
        }
        client = Consumer(settings)
        try:
            client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            yield _Reader(self, client, client_id, topic, partitions)
        finally:
            client.close()

    def metadata(self, topics: Sequence[str] | None = None) -> Metadata:
        admin = AdminClient(self.common())
        if topics is None:
            listed = [admin.list_topics(timeout=TIMEOUT)]
        else:
            listed = [admin.list_topics(topic=name, timeout=TIMEOUT) for name in topics]
        found: dict[str, TopicMetadata] = {}
        for cluster in listed:
            for name, topic in cluster.topics.items():
                error = 0 if topic.error is None else topic.error.code()
                found[name] = TopicMetadata(error, sorted(topic.partitions))
        return Metadata(
            brokers=[(b.id, str(b.host), b.port) for b in listed[0].brokers.values()],
            topics=found,
        )

    @contextmanager
    def admin(self) -> Iterator[Admin]:
        admin = _Admin(AdminClient(self.common()))
        try:
            yield admin
        finally:
            admin.release()


class _Producer(Producer):
    def __init__(self, client: KafkaProducer) -> None:
        self._client = client

    def send(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        reports: dict[int, tuple[KafkaError | None, Message]] = {}
        for i, r in enumerate(records):

            def delivered(error: KafkaError | None, message: Message, i: int = i) -> None:
                reports[i] = (error, message)

            extra: dict[str, Any] = {}
            if r.partition is not None:
                extra["partition"] = r.partition
            if r.timestamp is not None:
                extra["timestamp"] = r.timestamp
            self._client.produce(
                topic, r.value, r.key, headers=list(r.headers), on_delivery=delivered, **extra
            )
            self._client.poll(0)
        assert self._client.flush(TIMEOUT) == 0, "messages still queued after flush"
        deliveries = []
        for i in range(len(records)):
            error, message = reports[i]
            if error is not None:
                raise ProduceRejected(REFUSALS[error.code()], error)
            kind, timestamp = message.timestamp()
            deliveries.append(
                Delivery(
                    message.partition(),
                    message.offset(),
                    timestamp,
                    TIMESTAMP_TYPES.get(kind),
                )
            )
        return deliveries


def _headers(message: Message) -> list[Header]:
    found = message.headers() or []
    assert isinstance(found, list), found
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in found]


def _known(value: int | None) -> int:
    assert value is not None
    return value


class _Reader(Reader):
    def __init__(
        self,
        driver: ConfluentKafkaClient,
        client: Consumer,
        client_id: str,
        topic: str,
        partitions: int,
    ) -> None:
        self._driver = driver
        self._client = client
        self._client_id = client_id
        self._topic = topic
        self._partitions = partitions

    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Received]:
        received = []
        for message in self._client.consume(max_records or 1000, timeout=timeout_ms / 1000):
            assert message.error() is None, message.error()
            kind, timestamp = message.timestamp()
            received.append(
                Received(
                    message.key(),
                    message.value(),
                    _headers(message),
                    timestamp,
                    TIMESTAMP_TYPES[kind],
                    _known(message.offset()),
                    _known(message.partition()),
                )
            )
        return received

    def _seek(self, offset: int) -> None:
        for p in range(self._partitions):
            self._client.seek(TopicPartition(self._topic, p, offset))

    def seek(self, offset: int) -> None:
        self._seek(offset)

    def seek_to_beginning(self) -> None:
        self._seek(OFFSET_BEGINNING)

    def seek_to_end(self) -> None:
        before = len(answer_times(self._driver.broker, self._client_id, "ListOffsets"))
        self._seek(OFFSET_END)
        wait_for_end_lookup(self._driver, self._client_id, before)

    def offset_for_time(self, timestamp: int, partition: int = 0) -> OffsetAndTime | None:
        [found] = self._client.offsets_for_times(
            [TopicPartition(self._topic, partition, timestamp)], timeout=TIMEOUT
        )
        # OFFSET_END: no record is that late.
        return None if found.offset == OFFSET_END else OffsetAndTime(found.offset, None)

    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        tp = TopicPartition(self._topic, partition)
        earliest, end = self._client.get_watermark_offsets(tp, timeout=TIMEOUT)
        return earliest, end


SPECS: dict[Spec, OffsetSpec] = {
    Spec.EARLIEST: OffsetSpec.earliest(),  # type: ignore[no-untyped-call]
    Spec.LATEST: OffsetSpec.latest(),  # type: ignore[no-untyped-call]
    Spec.MAX_TIMESTAMP: OffsetSpec.max_timestamp(),  # type: ignore[no-untyped-call]
}


def _spec(query: OffsetQuery) -> OffsetSpec:
    if isinstance(query, Spec):
        return SPECS[query]
    at: OffsetSpec = OffsetSpec.for_timestamp(query)
    return at


def _result(future: Future[T]) -> T:
    """The future's result; a broker refusal raises AdminFailed with its error code."""
    try:
        return future.result(TIMEOUT)
    except KafkaException as error:
        raise AdminFailed(error.args[0].code(), error) from error


class _Admin(Admin):
    def __init__(self, client: AdminClient) -> None:
        self._held: AdminClient | None = client

    @property
    def _client(self) -> AdminClient:
        assert self._held is not None, "the admin client is released"
        return self._held

    def release(self) -> None:
        """AdminClient has no close: its connections go with its last reference, and a
        refusal's traceback can keep this wrapper alive until the broker has stopped."""
        self._held = None

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        new = NewTopic(name, partitions, 1, config=dict(configs or {}))
        _result(self._client.create_topics([new], request_timeout=TIMEOUT)[name])

    def describe_topic(self, name: str) -> list[int]:
        [future] = self._client.describe_topics(
            TopicCollection([name]), request_timeout=TIMEOUT
        ).values()
        return [p.id for p in _result(future).partitions]

    def create_partitions(self, name: str, total: int) -> None:
        grown = self._client.create_partitions(
            [NewPartitions(name, total)], request_timeout=TIMEOUT
        )
        _result(grown[name])

    def describe_configs(self, kind: ResourceKind, name: str) -> dict[str, ConfigEntry]:
        resource_type = {
            ResourceKind.TOPIC: ResourceType.TOPIC,
            ResourceKind.BROKER: ResourceType.BROKER,
        }[kind]
        resource = ConfigResource(resource_type, name)
        described = _result(
            self._client.describe_configs([resource], request_timeout=TIMEOUT)[resource]
        )
        found = {}
        for config, entry in described.items():
            source = ConfigSource(entry.source)
            # librdkafka derives is_default from the source on DescribeConfigs v1+.
            assert entry.is_default == (source is ConfigSource.DEFAULT_CONFIG), entry
            found[config] = ConfigEntry(entry.value, source.name)
        return found

    def describe_cluster(self) -> ClusterInfo:
        cluster = _result(self._client.describe_cluster(request_timeout=TIMEOUT))
        assert cluster.controller is not None
        return ClusterInfo(
            cluster.cluster_id,
            cluster.controller.id,
            [(n.id, n.host, n.port) for n in cluster.nodes],
        )

    def list_offsets(
        self, topic: str, partition: int, queries: Sequence[OffsetQuery]
    ) -> list[OffsetAndTime]:
        tp = TopicPartition(topic, partition)
        # One partition per call, so one call per query; all in flight at once.
        futures = [
            self._client.list_offsets({tp: _spec(query)}, request_timeout=TIMEOUT)[tp]
            for query in queries
        ]
        return [OffsetAndTime(found.offset, found.timestamp) for found in map(_result, futures)]

    def delete_topic(self, name: str) -> None:
        _result(self._client.delete_topics([name], request_timeout=TIMEOUT)[name])


# --- the client matrix's scenario (SCENARIOS.md) ---

CLIENT = "confluent-kafka"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SCENARIO_TIMEOUT = 20.0


def main() -> int:
    return drive(CLIENT, metadata.version(CLIENT), scenario)


def scenario(run: Scenario) -> None:
    flags, report = run.flags, run.report
    common = {"bootstrap.servers": flags.bootstrap, "client.id": f"{CLIENT}-scenarios"}
    admin = AdminClient(common)
    topic, group = flags.topic, flags.group
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    with run.step("create_topic"):
        new = NewTopic(topic, PARTITIONS, 1, config={"retention.ms": RETENTION_MS})
        admin.create_topics([new])[topic].result(SCENARIO_TIMEOUT)

    with run.step("describe_configs"):
        entries = describe_topic(admin, topic)
        report["topic_configs"] = {name: entry.value for name, entry in entries.items()}
        report["default_config"] = {name: entry.is_default for name, entry in entries.items()}

    with run.step("produce"):
        report["codecs"], report["partitioner"] = list(CODECS), "crc32"
        report["produced"] = produce(run, common)
    run.done("headers", "timestamps", "keyed")

    with run.step("consume_group"):
        reader = Consumer(
            {
                **common,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        reader.subscribe([topic])
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while len(report.get("consumed", {})) < flags.messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(report.get('consumed', {}))} messages")
            message = reader.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise RuntimeError(message.error())
            keep(run, message)
        reader.commit(asynchronous=False)
        reader.close()

    with run.step("committed"):
        wanted = confluent_kafka.ConsumerGroupTopicPartitions(group, partitions)
        [listed] = admin.list_consumer_group_offsets([wanted]).values()
        found = listed.result(SCENARIO_TIMEOUT).topic_partitions
        report["committed"] = {tp.partition: tp.offset for tp in found}

    with run.step("list_offsets"):
        report["oldest"] = list_offsets(admin, partitions, OffsetSpec.earliest())
        report["newest"] = list_offsets(admin, partitions, OffsetSpec.latest())

    target = run.time_target()
    with run.step("offsets_for_time"):
        report["time_target"] = target
        at_time = list_offsets(admin, partitions, OffsetSpec.for_timestamp(target))
        report["offsets_for_time"] = at_time

    with run.step("from_timestamp"):
        start = [TopicPartition(topic, p, at) for p, at in at_time.items() if at >= 0]
        report["from_timestamp"] = read_from(common, start, report["newest"])

    with run.step("from_latest"):
        report["from_latest"] = from_latest(common, topic, f"{group}-latest")

    with run.step("rebalance"):
        two, three = rebalance(lambda: Member(common, topic, f"{group}-trio"))
        report["group_of_two"], report["group_of_three"] = two, three
    run.skip(
        "rebalance_consumer_protocol",
        "not run with this client: the driver's groups use the classic protocol "
        "(librdkafka's group.protocol=consumer is not exercised here)",
    )

    with run.step("list_groups"):
        listed_groups = admin.list_consumer_groups().result(SCENARIO_TIMEOUT)
        report["groups"] = sorted(found.group_id for found in listed_groups.valid)

    with run.step("describe_group"):
        described = admin.describe_consumer_groups([group])[group].result(SCENARIO_TIMEOUT)
        # The enum's names are Kafka's states in capitals (EMPTY, STABLE, ...).
        report["group_state"] = described.state.name.replace("_", "").title()

    # One producer's transactions carry all three steps: reported in the catalogue's order.
    with run.step("transactions"):
        transactions(run, common, admin)
    run.done("transaction_offsets", "fencing")

    with run.step("delete_topic"):
        admin.delete_topics([topic])[topic].result(SCENARIO_TIMEOUT)


def transactions(run: Scenario, common: dict[str, Any], admin: AdminClient) -> None:
    """SCENARIOS.md's transactions, transaction_offsets and fencing steps."""
    report, topic, group = run.report, run.flags.topic, run.flags.group
    txn_topic, txn_id, txn_group = f"{topic}-txn", f"{group}-txn", f"{group}-txn"
    admin.create_topics([NewTopic(txn_topic, PARTITIONS, 1)])[txn_topic].result(SCENARIO_TIMEOUT)
    settings = {**common, "transactional.id": txn_id}
    producer = KafkaProducer(settings)
    producer.init_transactions(SCENARIO_TIMEOUT)

    def send(writer: KafkaProducer, kind: str) -> None:
        for key in txn_keys(kind):
            writer.produce(txn_topic, key=key.encode(), value=f"value-{key}".encode())

    producer.begin_transaction()
    send(producer, "commit")
    consumer_group = Consumer({**common, "group.id": txn_group})
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, TXN_OFFSET)],
        consumer_group.consumer_group_metadata(),
        SCENARIO_TIMEOUT,
    )
    consumer_group.close()
    producer.commit_transaction(SCENARIO_TIMEOUT)
    producer.begin_transaction()
    send(producer, "abort")
    if producer.flush(SCENARIO_TIMEOUT) != 0:
        raise TimeoutError("aborted transaction's records not acknowledged")
    producer.abort_transaction(SCENARIO_TIMEOUT)

    successor = KafkaProducer(settings)
    successor.init_transactions(SCENARIO_TIMEOUT)
    try:
        producer.begin_transaction()
        send(producer, "zombie")
        producer.commit_transaction(SCENARIO_TIMEOUT)
    except KafkaException as exc:
        report["fenced"] = str(exc)
    else:
        raise AssertionError("the fenced producer committed")
    successor.begin_transaction()
    send(successor, "after")
    successor.commit_transaction(SCENARIO_TIMEOUT)

    wanted = confluent_kafka.ConsumerGroupTopicPartitions(txn_group, [TopicPartition(topic, 0)])
    [listed] = admin.list_consumer_group_offsets([wanted]).values()
    committed = listed.result(SCENARIO_TIMEOUT).topic_partitions
    report["transaction_offsets"] = {tp.partition: tp.offset for tp in committed}
    report["read_committed"] = read_committed(common, admin, txn_topic)


def read_committed(common: dict[str, Any], admin: AdminClient, topic: str) -> list[str]:
    """Every key of `topic` a read_committed consumer reads to the end, once the last
    stable offsets have caught up with the log ends (a real Kafka writes the markers
    after answering the commit)."""
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def ends(isolation: IsolationLevel) -> dict[int, int]:
        answers = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=isolation
        )
        return {
            tp.partition: answer.result(SCENARIO_TIMEOUT).offset for tp, answer in answers.items()
        }

    wait_or_time_out(
        lambda: ends(IsolationLevel.READ_COMMITTED) == ends(IsolationLevel.READ_UNCOMMITTED),
        SCENARIO_TIMEOUT,
        "the transactions' markers",
        interval=0.1,
    )
    reader = Consumer(
        {
            **common,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    keys: list[str] = []
    ended: set[int] = set()
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while len(ended) < PARTITIONS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(ended)} of {topic} read to their end")
        message = reader.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            continue
        keys.append(message.key().decode())
    reader.close()
    return keys


def describe_topic(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource("topic", topic)
    for attempt in range(CONFIG_RETRIES):
        try:
            return dict(admin.describe_configs([resource])[resource].result(SCENARIO_TIMEOUT))
        except confluent_kafka.KafkaException as exc:
            code = exc.args[0].code()
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or attempt == CONFIG_RETRIES - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def produce(run: Scenario, common: dict[str, Any]) -> dict[str, int]:
    produced: dict[str, int] = {}
    errors: list[str] = []

    def delivered(error: KafkaError | None, message: confluent_kafka.Message) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            produced[message.key().decode()] = message.partition()

    producers = [
        KafkaProducer({**common, "acks": "all", "compression.type": codec, "linger.ms": 5})
        for codec in CODECS
    ]
    for index, key in enumerate(run.keys):
        producers[index % len(CODECS)].produce(
            run.flags.topic,
            key=key.encode(),
            value=f"value-{key}".encode(),
            headers=[("origin", f"header-{key}".encode())],
            timestamp=run.timestamp(index),
            on_delivery=delivered,
        )
    for producer in producers:
        if producer.flush(SCENARIO_TIMEOUT) != 0:
            raise TimeoutError("messages left undelivered")
    if errors:
        raise RuntimeError(errors[0])
    return produced


def keep(run: Scenario, message: confluent_kafka.Message) -> None:
    _, timestamp = message.timestamp()
    run.record(
        message.key().decode(),
        message.value(),
        message.partition(),
        message.offset(),
        timestamp,
        message.headers(),
    )


def list_offsets(admin: AdminClient, partitions: list[TopicPartition], spec: Any) -> dict[int, int]:
    answers = admin.list_offsets({tp: spec for tp in partitions})
    return {tp.partition: answer.result(SCENARIO_TIMEOUT).offset for tp, answer in answers.items()}


def read_from(
    common: dict[str, Any], start: list[TopicPartition], newest: dict[int, int]
) -> list[str]:
    reader = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
    reader.assign(start)
    remaining = {tp.partition for tp in start if tp.offset < newest[tp.partition]}
    keys: list[str] = []
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while remaining:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(remaining)} not read to their end")
        message = reader.poll(0.2)
        if message is None or message.error() is not None:
            continue
        keys.append(message.key().decode())
        if message.offset() + 1 >= newest[message.partition()]:
            remaining.discard(message.partition())
    reader.close()
    return keys


def from_latest(common: dict[str, Any], topic: str, group: str) -> list[str]:
    reader = Consumer({**common, "group.id": group, "auto.offset.reset": "latest"})
    reader.subscribe([topic])
    writer = KafkaProducer({**common, "acks": "all"})

    def send(key: str) -> None:
        writer.produce(topic, key=key.encode(), value=b"late")
        writer.flush(SCENARIO_TIMEOUT)

    def poll() -> list[str]:
        message = reader.poll(0.05)
        ok = message is not None and message.error() is None
        return [message.key().decode()] if ok else []

    keys = read_late(send, poll)
    reader.close()
    return keys


class Member(threading.Thread):
    """A group member polling in its own thread, holding its current assignment."""

    def __init__(self, common: dict[str, Any], topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.held: set[int] = set()
        self.stopping = threading.Event()
        self.consumer = Consumer({**common, "group.id": group, "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic], on_assign=self.assigned, on_revoke=self.revoked)
        self.start()

    def assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.held = {tp.partition for tp in partitions}

    def revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.held = set()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(SCENARIO_TIMEOUT)
