"""The corpus: real clients (aiokafka, kafka-python, confluent-kafka) produce with
every codec, consume in a group and call admin APIs against an in-process broker through
a loopback proxy that records every client->broker request frame. The broker advertises a
second loopback address (127.0.0.2) where the proxy listens on the broker's own port, so
clients reach every broker connection through the proxy without rewriting metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from harness.fuzz.mutation import INT16, INT32, MAX_FRAME_BYTES, head_of
from minibroker.loop_thread import LoopThread

# --- the corpus: frames captured from real clients ----------------------------------

CAPTURE_HOST = "127.0.0.2"  # the proxy's address; the broker listens on 127.0.0.1
FRAMES_PER_KIND = 40
CODECS: tuple[str | None, ...] = (None, "gzip", "snappy", "lz4", "zstd")
CREATE_TIME_MS = 1_600_000_000_000


@dataclass
class Corpus:
    frames: list[bytes]  # each with its size prefix
    captured: int = 0  # frames seen before de-duplication
    errors: list[str] = field(default_factory=list)  # capture steps that failed

    @classmethod
    def from_captured(cls, frames: Iterable[bytes], errors: Iterable[str] = ()) -> Corpus:
        """De-duplicate (ignoring correlation ids) and cap each (API, version, client)."""
        captured = list(frames)
        seen: set[bytes] = set()
        kinds: dict[tuple[int, int, bytes], list[bytes]] = {}
        for frame in captured:
            body = frame[4:]
            head = head_of(body)
            if head is None:
                continue
            key = body[:4] + b"\0\0\0\0" + body[8:]
            if key in seen:
                continue
            seen.add(key)
            client_id = _client_id(body)
            kinds.setdefault((head.api_key, head.api_version, client_id), []).append(frame)
        kept: list[bytes] = []
        for group in kinds.values():
            if len(group) > FRAMES_PER_KIND:
                step = len(group) / FRAMES_PER_KIND
                group = [group[int(i * step)] for i in range(FRAMES_PER_KIND)]
            kept.extend(group)
        kept.sort(key=lambda frame: (frame[4:8], len(frame), frame))
        return cls(kept, len(captured), list(errors))

    def api_counts(self) -> Counter[str]:
        return Counter(
            head.api for head in (head_of(frame[4:]) for frame in self.frames) if head is not None
        )

    def api_keys(self) -> set[int]:
        return {head.api_key for head in (head_of(f[4:]) for f in self.frames) if head}

    def describe(self) -> str:
        counts = self.api_counts()
        listed = ", ".join(f"{api} x{n}" for api, n in sorted(counts.items()))
        return f"{len(self.frames)} frames ({self.captured} captured): {listed}"

    def dump(self, path: Path) -> None:
        lines = [f"# capture error: {error}" for error in self.errors]
        lines += [frame.hex() for frame in self.frames]
        path.write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: Path) -> Corpus:
        frames, errors = [], []
        for line in path.read_text().splitlines():
            if line.startswith("# capture error: "):
                errors.append(line.removeprefix("# capture error: "))
            elif line.strip() and not line.startswith("#"):
                frames.append(bytes.fromhex(line.strip()))
        return cls(frames, len(frames), errors)


def _client_id(body: bytes) -> bytes:
    if len(body) < 10:
        return b""
    (length,) = INT16.unpack_from(body, 8)
    return bytes(body[10 : 10 + max(length, 0)])


class FrameRecorder:
    """Forwards loopback TCP connections and records every client->broker frame."""

    # Not minibroker.proxy.RecordingProxy: that one decodes what it records and rewrites
    # Metadata answers; the corpus needs the raw frames, undecodable ones included.

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int]) -> None:
        self.listen = listen
        self.upstream = upstream
        self.frames: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, *self.listen)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        pumps = [
            asyncio.create_task(self._requests(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the proxy is stopping
        finally:
            for pump in pumps:
                pump.cancel()
            writer.close()
            up_writer.close()
            self._tasks.discard(task)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pending = bytearray()
        recording = True
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            if recording:
                pending += chunk
                while len(pending) >= 4:
                    (size,) = INT32.unpack_from(pending, 0)
                    if not 0 <= size <= MAX_FRAME_BYTES:
                        recording = False
                        pending.clear()
                        break
                    if len(pending) < 4 + size:
                        break
                    self.frames.append(bytes(pending[: 4 + size]))
                    del pending[: 4 + size]
            await writer.drain()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()


class _Steps:
    """Runs capture steps, recording failures instead of stopping at the first."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.errors: list[str] = []

    def run(self, name: str, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as exc:
            self.errors.append(f"{self.family} {name}: {exc!r}"[:300])

    async def arun(self, name: str, step: Awaitable[Any], timeout: float = 30) -> None:
        try:
            await asyncio.wait_for(step, timeout)
        except Exception as exc:
            self.errors.append(f"{self.family} {name}: {exc!r}"[:300])


def capture_corpus(timeout: float = 120.0) -> Corpus:
    """Run every client scenario against an in-process broker through a recording proxy."""
    from minibroker import Broker

    loop = LoopThread()
    try:
        # ACLs on, the capturing clients super users: the security admin APIs answer.
        with Broker(
            advertised_host=CAPTURE_HOST, acls_enabled=True, super_users="User:ANONYMOUS"
        ) as broker:
            proxy = FrameRecorder((CAPTURE_HOST, broker.port), ("127.0.0.1", broker.port))
            loop.run(proxy.start())
            bootstrap = f"{CAPTURE_HOST}:{broker.port}"
            tag = secrets.token_hex(3)
            families = (
                ("aiokafka", lambda s: asyncio.run(_aiokafka_scenarios(bootstrap, tag, s))),
                ("kafka-python", lambda s: _kafka_python_scenarios(bootstrap, tag, s)),
                ("confluent-kafka", lambda s: _confluent_scenarios(bootstrap, tag, s)),
            )
            threads, all_steps = [], []
            for family, body in families:
                steps = _Steps(family)
                all_steps.append(steps)
                thread = threading.Thread(
                    target=steps.run, args=("scenarios", partial(body, steps)), daemon=True
                )
                thread.start()
                threads.append((family, thread))
            deadline = time.monotonic() + timeout
            errors: list[str] = []
            for family, thread in threads:
                thread.join(max(deadline - time.monotonic(), 0.1))
                if thread.is_alive():
                    errors.append(f"{family}: scenarios still running after {timeout:.0f} s")
            loop.run(proxy.stop())
            frames = list(proxy.frames)
        for steps in all_steps:
            errors.extend(steps.errors)
        return Corpus.from_captured(frames, errors)
    finally:
        loop.close()


# aiokafka ---------------------------------------------------------------------------

_GROUP_TIMEOUTS_MS = {"session": 3000, "heartbeat": 500, "poll": 3000}


async def _aiokafka_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-aio-{tag}", f"fz-aio-group-{tag}"
    for codec in CODECS:
        await steps.arun(f"produce {codec}", _aio_produce(bootstrap, topic, codec, "all", True))
    await steps.arun("produce acks=1", _aio_produce(bootstrap, topic, None, 1, False))
    await steps.arun("produce acks=0", _aio_produce(bootstrap, topic, None, 0, False))
    await steps.arun("group consumer", _aio_group(bootstrap, topic, group))
    await steps.arun("offsets", _aio_offsets(bootstrap, topic))
    await steps.arun("admin", _aio_admin(bootstrap, f"fz-aio-admin-{tag}", group, steps))


async def _aio_produce(
    bootstrap: str, topic: str, codec: str | None, acks: Any, idempotent: bool
) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks=acks,
        enable_idempotence=idempotent,
        linger_ms=5,
        request_timeout_ms=10_000,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                b"value-%d-" % i * (1 + i % 7),
                key=b"key-%d" % i,
                headers=[("trace", b"t-%d" % i)],
                timestamp_ms=CREATE_TIME_MS + i,
            )
            for i in range(20)
        ]
        await asyncio.gather(*futures)
        await producer.send_and_wait(topic, None, key=b"tombstone", partition=0)
    finally:
        await producer.stop()


async def _aio_group(bootstrap: str, topic: str, group: str) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=_GROUP_TIMEOUTS_MS["session"],
        heartbeat_interval_ms=_GROUP_TIMEOUTS_MS["heartbeat"],
        max_poll_interval_ms=_GROUP_TIMEOUTS_MS["poll"],
        rebalance_timeout_ms=_GROUP_TIMEOUTS_MS["poll"],
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    await consumer.start()
    try:
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            received += sum(len(batch) for batch in batches.values())
        await consumer.commit()
        await consumer.committed(next(iter(consumer.assignment())))
    finally:
        await consumer.stop()


async def _aio_offsets(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=100, request_timeout_ms=10_000
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.beginning_offsets([tp])
        await consumer.end_offsets([tp])
        await consumer.offsets_for_times({tp: CREATE_TIME_MS + 5})
        consumer.seek(tp, 3)
        await consumer.getmany(tp, timeout_ms=300)
    finally:
        await consumer.stop()


async def _aio_admin(bootstrap: str, name: str, group: str, steps: _Steps) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        topic = NewTopic(name, 2, 1, topic_configs={"retention.ms": "60000"})
        await steps.arun("create_topics", admin.create_topics([topic]))
        await steps.arun("create_partitions", admin.create_partitions({name: NewPartitions(4)}))
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name),
            ConfigResource(ConfigResourceType.BROKER, "0"),
        ]
        await steps.arun("describe_configs", admin.describe_configs(resources))
        await steps.arun("list_consumer_groups", admin.list_consumer_groups())
        await steps.arun("describe_consumer_groups", admin.describe_consumer_groups([group]))
        await steps.arun("list_consumer_group_offsets", admin.list_consumer_group_offsets(group))
        await steps.arun("describe_cluster", admin.describe_cluster())
        await steps.arun("describe_topics", admin.describe_topics([name]))
        await steps.arun("delete_topics", admin.delete_topics([name]))
    finally:
        await admin.close()


# kafka-python -----------------------------------------------------------------------


def _kafka_python_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-kp-{tag}", f"fz-kp-group-{tag}"
    for codec in CODECS:
        steps.run(f"produce {codec}", partial(_kp_produce, bootstrap, topic, codec, "all", True))
    steps.run("produce acks=1", lambda: _kp_produce(bootstrap, topic, None, 1, False))
    steps.run("produce acks=0", lambda: _kp_produce(bootstrap, topic, None, 0, False))
    steps.run("group consumer", lambda: _kp_group(bootstrap, topic, group))
    steps.run("offsets", lambda: _kp_offsets(bootstrap, topic))
    steps.run("admin", lambda: _kp_admin(bootstrap, f"fz-kp-admin-{tag}", topic, group, steps))


def _kp_produce(bootstrap: str, topic: str, codec: str | None, acks: Any, idem: bool) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks=acks,
        enable_idempotence=idem,
        linger_ms=5,
        request_timeout_ms=10_000,
        max_block_ms=10_000,
    )
    try:
        for i in range(20):
            producer.send(
                topic,
                b"value-%d-" % i * (1 + i % 7),
                key=b"key-%d" % i,
                headers=[("trace", b"t-%d" % i)],
                timestamp_ms=CREATE_TIME_MS + i,
            )
        producer.flush(10)
    finally:
        producer.close(timeout=10)


def _kp_group(bootstrap: str, topic: str, group: str) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=_GROUP_TIMEOUTS_MS["session"],
        heartbeat_interval_ms=_GROUP_TIMEOUTS_MS["heartbeat"],
        max_poll_interval_ms=_GROUP_TIMEOUTS_MS["poll"],
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    try:
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            received += sum(len(batch) for batch in batches.values())
        consumer.commit()
        for tp in consumer.assignment():
            consumer.committed(tp)
    finally:
        consumer.close()


def _kp_offsets(bootstrap: str, topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=100, request_timeout_ms=10_000
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.beginning_offsets([tp])
        consumer.end_offsets([tp])
        consumer.offsets_for_times({tp: CREATE_TIME_MS + 5})
        consumer.seek(tp, 3)
        consumer.poll(timeout_ms=300)
    finally:
        consumer.close()


def _kp_admin(bootstrap: str, name: str, topic: str, group: str, steps: _Steps) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec, OffsetTimestamp

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        spec = {name: {"num_partitions": 2, "replication_factor": 1}}
        steps.run("create_topics", lambda: admin.create_topics(spec))
        steps.run("create_partitions", lambda: admin.create_partitions({name: 4}))
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name),
            ConfigResource(ConfigResourceType.BROKER, "0"),
        ]
        steps.run("describe_configs", lambda: admin.describe_configs(resources))
        steps.run("list_groups", lambda: admin.list_groups())
        steps.run("describe_groups", lambda: admin.describe_groups([group]))
        steps.run("list_group_offsets", lambda: admin.list_group_offsets(group))
        tp = TopicPartition(topic, 0)
        for label, offset_spec in (
            ("latest", OffsetSpec.LATEST),
            ("earliest", OffsetSpec.EARLIEST),
            ("max_timestamp", OffsetSpec.MAX_TIMESTAMP),
            ("timestamp", OffsetTimestamp(CREATE_TIME_MS + 5)),
        ):
            steps.run(
                f"list_partition_offsets {label}",
                partial(admin.list_partition_offsets, {tp: offset_spec}),
            )
        steps.run("describe_cluster", lambda: admin.describe_cluster())
        steps.run("describe_topics", lambda: admin.describe_topics([name]))
        moved = {TopicPartition(name, 0): [0]}  # onto the replica it has: node 0
        steps.run(
            "alter_partition_reassignments", partial(admin.alter_partition_reassignments, moved)
        )
        steps.run("list_partition_reassignments", lambda: admin.list_partition_reassignments())
        steps.run("delete_topics", lambda: admin.delete_topics([name]))
        steps.run("delete_groups", lambda: admin.delete_groups([group]))
    finally:
        admin.close()


# confluent-kafka --------------------------------------------------------------------


def _confluent_common(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 10_000,
        "log.connection.close": False,
        "log_level": 0,
    }


def _confluent_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-ck-{tag}", f"fz-ck-group-{tag}"
    for codec in CODECS:
        steps.run(f"produce {codec}", partial(_ck_produce, bootstrap, topic, codec, "all", True))
    steps.run("produce acks=1", lambda: _ck_produce(bootstrap, topic, None, "1", False))
    steps.run("produce acks=0", lambda: _ck_produce(bootstrap, topic, None, "0", False))
    steps.run("group consumer", lambda: _ck_group(bootstrap, topic, group))
    steps.run(
        "consumer-protocol group", lambda: _ck_consumer_protocol(bootstrap, topic, group + "-848")
    )
    steps.run("share group", lambda: _ck_share_group(bootstrap, topic, group + "-share"))
    steps.run("transactions", lambda: _ck_transactions(bootstrap, topic, tag))
    steps.run("acls and credentials", lambda: _ck_security(bootstrap, topic, tag))
    steps.run("admin", lambda: _ck_admin(bootstrap, f"fz-ck-admin-{tag}", topic, group, steps))
    steps.run("client quotas", lambda: _client_quotas(bootstrap, tag))


def _ck_produce(bootstrap: str, topic: str, codec: str | None, acks: str, idem: bool) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            **_confluent_common(bootstrap),
            "compression.type": codec or "none",
            "acks": acks,
            "enable.idempotence": idem,
            "linger.ms": 5,
            "message.timeout.ms": 10_000,
        }
    )
    for i in range(20):
        producer.produce(
            topic,
            b"value-%d-" % i * (1 + i % 7),
            key=b"key-%d" % i,
            headers=[("trace", b"t-%d" % i)],
            timestamp=CREATE_TIME_MS + i,
        )
    producer.flush(10)


def _ck_group(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": _GROUP_TIMEOUTS_MS["session"],
            "heartbeat.interval.ms": _GROUP_TIMEOUTS_MS["heartbeat"],
            "max.poll.interval.ms": _GROUP_TIMEOUTS_MS["poll"],
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received += 1
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition(topic, 0)], timeout=10)
        consumer.offsets_for_times([TopicPartition(topic, 0, CREATE_TIME_MS + 5)], timeout=10)
        consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def _ck_consumer_protocol(bootstrap: str, topic: str, group: str) -> None:
    """A member of Kafka 4's consumer group protocol reads, commits and leaves; the admin
    client describes the group (ConsumerGroupHeartbeat and ConsumerGroupDescribe frames)."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    consumer = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                break
        consumer.commit(asynchronous=False)
        admin = AdminClient(_confluent_common(bootstrap))
        admin.describe_consumer_groups([group])[group].result(10)
    finally:
        consumer.close()


def _ck_share_group(bootstrap: str, topic: str, group: str) -> None:
    """A share consumer reads from the start, accepting, releasing and rejecting records,
    once the admin client has set where the group starts (the frames of
    ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and IncrementalAlterConfigs on a
    group)."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient(_confluent_common(bootstrap))
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(10)
    consumer = ShareConsumer(
        {
            **_confluent_common(bootstrap),
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    kinds = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
    try:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            for message in consumer.poll(0.2):
                if message.error() is None:
                    consumer.acknowledge(message, kinds[received % len(kinds)])
                    received += 1
            consumer.commit_sync()
    finally:
        consumer.close()


def _ck_transactions(bootstrap: str, topic: str, tag: str) -> None:
    """A committed transaction with a group's offsets and an aborted one, read back with
    read_committed (the frames of every transaction API and isolated reads)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**_confluent_common(bootstrap), "transactional.id": f"fz-ck-txn-{tag}"})
    producer.init_transactions(10)
    group = Consumer({**_confluent_common(bootstrap), "group.id": f"fz-ck-txn-group-{tag}"})
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, b"txn-%d" % i, key=b"key-%d" % i)
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 1)], group.consumer_group_metadata(), 10
        )
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    group.close()
    reader = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": f"fz-ck-txn-reader-{tag}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None:
                break
        reader.offsets_for_times([TopicPartition(topic, 0, -1)], timeout=10)
    finally:
        reader.close()


def _ck_security(bootstrap: str, topic: str, tag: str) -> None:
    """ACLs created, described and deleted (literal and prefixed, allow and deny), and SCRAM
    credentials set, described and deleted: the frames of the security admin APIs."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(_confluent_common(bootstrap))
    user = f"User:fz-{tag}"
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, user, "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "fz-", ResourcePatternType.PREFIXED, user, "127.0.0.1",
                   AclOperation.DESCRIBE, AclPermissionType.DENY),
    ]  # fmt: skip
    for future in admin.create_acls(bindings, request_timeout=10).values():
        future.result(10)
    any_of_user = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, user, None,
                                   AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    admin.describe_acls(any_of_user, request_timeout=10).result(10)
    for future in admin.delete_acls([any_of_user], request_timeout=10).values():
        future.result(10)
    name = f"fz-{tag}"
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion(name, info, b"password", b"salt-of-16-bytes")
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=10).values():
        future.result(10)
    for future in admin.describe_user_scram_credentials([name], request_timeout=10).values():
        future.result(10)
    deletion = UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_256)
    for future in admin.alter_user_scram_credentials([deletion], request_timeout=10).values():
        future.result(10)


def _client_quotas(bootstrap: str, tag: str) -> None:
    """Client quotas set, described and removed, as the Java Admin sends them (no Python
    client has them). Only request_percentage, whose throttle is at most a second: a
    mutated frame cannot mute the campaign's connections for long."""
    from harness.raw_client import RawClient, make

    def entity(api_key: int) -> tuple[Any, ...]:
        return (
            make(api_key, 1, "EntityData", entity_type="user", entity_name=f"fz-{tag}"),
            make(api_key, 1, "EntityData", entity_type="client-id", entity_name=None),
        )

    with RawClient(bootstrap) as client:
        for remove in (False, True):
            op = make(49, 1, "OpData", key="request_percentage", value=1e9, remove=remove)
            entry = make(49, 1, "EntryData", entity=entity(49), ops=(op,))
            client.call(49, 1, entries=(entry,), validate_only=False)
            components = (
                make(48, 1, "ComponentData", entity_type="user", match_type=0, match=f"fz-{tag}"),
                make(48, 1, "ComponentData", entity_type="client-id", match_type=2, match=None),
            )
            client.call(48, 1, components=components, strict=remove)


def _ck_admin(bootstrap: str, name: str, topic: str, group: str, steps: _Steps) -> None:
    from confluent_kafka import (
        ConsumerGroupTopicPartitions,
        ElectionType,
        TopicCollection,
        TopicPartition,
    )
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    admin = AdminClient(_confluent_common(bootstrap))
    wait = 10

    def each(futures: Mapping[Any, Any]) -> None:
        for future in futures.values():
            future.result(wait)

    new = NewTopic(name, num_partitions=2, replication_factor=1, config={"retention.ms": "60000"})
    steps.run("create_topics", lambda: each(admin.create_topics([new], request_timeout=wait)))
    steps.run(
        "create_partitions",
        lambda: each(admin.create_partitions([NewPartitions(name, 4)], request_timeout=wait)),
    )
    resources = [ConfigResource(ResourceType.TOPIC, name), ConfigResource(ResourceType.BROKER, "0")]
    steps.run("describe_configs", lambda: each(admin.describe_configs(resources)))
    steps.run(
        "list_consumer_groups", lambda: admin.list_consumer_groups(request_timeout=wait).result()
    )
    steps.run(
        "describe_consumer_groups",
        lambda: each(admin.describe_consumer_groups([group], request_timeout=wait)),
    )
    steps.run(
        "list_consumer_group_offsets",
        lambda: each(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])),
    )
    tp = TopicPartition(topic, 0)
    for label, spec in (
        ("latest", OffsetSpec.latest()),  # type: ignore[no-untyped-call]
        ("earliest", OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
        ("max_timestamp", OffsetSpec.max_timestamp()),  # type: ignore[no-untyped-call]
        ("timestamp", OffsetSpec.for_timestamp(CREATE_TIME_MS + 5)),
    ):
        steps.run(
            f"list_offsets {label}",
            partial(lambda s: each(admin.list_offsets({tp: s}, request_timeout=wait)), spec),
        )
    steps.run("describe_cluster", lambda: admin.describe_cluster(request_timeout=wait).result())
    steps.run(
        "describe_topics",
        lambda: each(admin.describe_topics(TopicCollection([name]), request_timeout=wait)),
    )
    steps.run(
        "describe with authorized operations",
        lambda: (
            admin.describe_cluster(include_authorized_operations=True).result(wait),
            each(
                admin.describe_topics(TopicCollection([name]), include_authorized_operations=True)
            ),
        ),
    )
    steps.run("list_topics", lambda: admin.list_topics(timeout=wait))
    placed = NewTopic(f"{name}-placed", num_partitions=2, replica_assignment=[[0], [0]])
    steps.run("create_topics assigned", lambda: each(admin.create_topics([placed])))
    elected = [TopicPartition(placed.topic, 0)]
    steps.run(
        "elect_leaders", lambda: admin.elect_leaders(ElectionType.PREFERRED, elected).result(wait)
    )
    steps.run(
        "delete_topics",
        lambda: each(admin.delete_topics([name, placed.topic], request_timeout=wait)),
    )
    steps.run(
        "delete_consumer_groups",
        lambda: each(admin.delete_consumer_groups([group], request_timeout=wait)),
    )
