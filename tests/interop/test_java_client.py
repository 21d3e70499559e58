"""Kafka's own Java client (kafka-clients 3.9 and 4.x) works against the broker.

tests/interop/jvm/ClientScenarios.java is compiled against each client line and run once
per line, in one JVM, against an embedded broker of its own; the two lines run at the
same time. Every scenario asserts inside Java what a real Kafka gives that client:
records back in order from the default (idempotent, acks=all) producer, each codec,
headers, a 1 MiB record, range and cooperative-sticky group assignment (an incremental
rebalance revokes only what moves), static membership (a restart within the session
timeout keeps its assignment without a rebalance), seek / offsetsForTimes / commits /
pause, the AdminClient's topic, config, offset, group and cluster calls with the
errors Kafka answers, and transactions: a committed, an aborted and a committed one read
by read_committed and read_uncommitted consumers, zombies fenced by a new instance with
their transactional.id, and consume-transform-produce with the consumer's offsets sent
to each transaction; kafka-clients 4.x does both with Kafka 4's transaction protocol
(transaction version 2: the broker's recording shows Produce v12, TxnOffsetCommit v5 and
EndTxn v5, no AddPartitionsToTxn or AddOffsetsToTxn), 3.9 with the first. Each scenario
is one test here.

Where a claim needs a second opinion, the test checks it with an independent client
or with what the broker stored: keys land where Java's murmur2 rule and librdkafka's
murmur2_random put them; the default producer's batches carry a producer id and
sequence numbers; compressed batches are stored as sent and librdkafka decodes them,
headers and the 1 MiB record included; offsets and metadata committed from Java read
back the same through aiokafka; librdkafka reads what the transactions wrote as Java
did at both isolation levels, and aiokafka the offsets they committed; topic configs,
broker configs and the cluster description match the broker's own state.

Scenarios Kafka serves and the broker does not yet are strict xfails saying what is
missing. Without Java or the fetched jars
the tests skip and say why.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from minibroker import Broker
from minibroker.testing import jvm
from tests.interop.conftest import (
    CODEC_IDS,
    LARGE_CLIENT_LIMIT,
    java_partition,
    stored_batch_headers,
    unique_client_id,
)

JVM_SOURCES = Path(__file__).parent / "jvm"
MAIN_CLASS = "ClientScenarios"
CLIENT_LINES = tuple(jvm.KAFKA_CLIENTS)  # "3.9", "4"
COMPILE_TIMEOUT = 180
# The whole JVM run; each scenario also has its own timeout inside Java (45-90 s).
RUN_TIMEOUT = 420
TIMEOUT = 20  # seconds for one independent-client operation here

Data = dict[str, Any]


# --- independent checks: other clients (librdkafka, aiokafka) and the broker's state ---


def _common(broker: Broker) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "client.id": unique_client_id("java")}


def _read_back(
    broker: Broker, topic: str, partitions: int, count: int, **settings: Any
) -> list[Message]:
    """Every record of `topic` (expecting `count`), read by librdkafka."""
    consumer = Consumer(
        {
            **_common(broker),
            "group.id": unique_client_id("java-check"),
            "enable.auto.commit": False,
            **settings,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[Message] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message)
        assert len(got) == count, f"librdkafka read {len(got)} of {count} records of {topic}"
        return got
    finally:
        consumer.close()


def _committed(broker: Broker, group: str) -> dict[int, tuple[int, str]]:
    """partition -> (offset, metadata) of `group`, as aiokafka's admin client reads them.

    Not librdkafka here: confluent-kafka reads a metadata string up to a NUL byte the
    committer is expected to have included (its own commits do); Java's do not, so it
    reads past the end.
    """

    async def read() -> dict[int, tuple[int, str]]:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=broker.bootstrap_servers, client_id=unique_client_id("java-check")
        )
        await admin.start()
        try:
            listed = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        return {tp.partition: (found.offset, found.metadata) for tp, found in listed.items()}

    return asyncio.run(read())


def check_idempotent_batches(broker: Broker, data: Data) -> None:
    # Idempotence is the producer's default since Kafka 3.0: each batch names the
    # producer and continues its sequence.
    headers = stored_batch_headers(broker, data["topic"])
    assert sum(h.record_count for h in headers) == data["count"]
    assert {h.producer_id for h in headers} != {-1}, "batches without a producer id"
    assert len({(h.producer_id, h.producer_epoch) for h in headers}) == 1
    sequence = 0
    for header in headers:
        assert header.base_sequence == sequence
        sequence += header.record_count


def check_codec(broker: Broker, data: Data) -> None:
    codec = CODEC_IDS[data["codec"]]
    stored = {h.compression for h in stored_batch_headers(broker, data["topic"])}
    assert stored == {codec}, f"batches stored with codecs {stored}, sent with {codec}"
    values = [m.value() for m in _read_back(broker, data["topic"], 1, len(data["values"]))]
    assert values == [v.encode() for v in data["values"]]


def _java_headers(pairs: list[list[str | None]]) -> list[tuple[str, bytes | None]]:
    return [
        (bytes.fromhex(key or "").decode(), None if value is None else bytes.fromhex(value))
        for key, value in pairs
    ]


def check_headers(broker: Broker, data: Data) -> None:
    expected = [_java_headers(pairs) for pairs in data["headers"]]
    got = [m.headers() or [] for m in _read_back(broker, data["topic"], 1, len(expected))]
    assert got == expected


def check_keyed_partitioning(broker: Broker, data: Data) -> None:
    partitions: int = data["partitions"]
    java = {bytes.fromhex(key): partition for key, partition in data["keys"]}
    assert len(java) == 200
    by_rule = {key: java_partition(key, partitions) for key in java}
    assert java == by_rule, "Java's placement differs from murmur2 & 0x7fffffff % partitions"

    # librdkafka's murmur2_random on a topic of the same size puts each key in the same place.
    topic = f"{data['topic']}-librdkafka"
    broker.create_topic(topic, partitions)
    placed: dict[bytes | None, int | None] = {}
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            placed[message.key()] = message.partition()

    producer = Producer({**_common(broker), "partitioner": "murmur2_random"})
    for key in java:
        producer.produce(topic, key=key, value=b"v", on_delivery=delivered)
    assert producer.flush(TIMEOUT) == 0
    assert not errors
    assert placed == java

    # And librdkafka finds the Java producer's records in those partitions.
    found = {m.key(): m.partition() for m in _read_back(broker, data["topic"], partitions, 200)}
    assert found == java


def check_large_record(broker: Broker, data: Data) -> None:
    (message,) = _read_back(
        broker,
        data["topic"],
        1,
        1,
        **{
            "fetch.max.bytes": LARGE_CLIENT_LIMIT,
            "max.partition.fetch.bytes": LARGE_CLIENT_LIMIT,
            "receive.message.max.bytes": 2 * LARGE_CLIENT_LIMIT,
        },
    )
    value = message.value()
    assert value is not None and len(value) == data["size"]
    assert hashlib.sha256(value).hexdigest() == data["sha256"]


def check_commits(broker: Broker, data: Data) -> None:
    expected = {int(p): (offset, meta) for p, (offset, meta) in data["offsets"].items()}
    assert _committed(broker, data["group"]) == expected


def check_group_offsets(broker: Broker, data: Data) -> None:
    assert _committed(broker, data["group"]) == {0: (4, ""), 1: (2, ""), 2: (3, "")}


Read = dict[int, list[tuple[int, str]]]


def _read_to_end(broker: Broker, topic: str, partitions: int, isolation: str) -> Read:
    """partition -> (offset, value) of every record librdkafka reads from `topic` with
    `isolation` ("read_committed" or "read_uncommitted") up to each partition's end."""
    consumer = Consumer(
        {
            **_common(broker),
            "group.id": unique_client_id("java-check"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    got: Read = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + TIMEOUT
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error, partition = message.error(), message.partition()
            assert partition is not None
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(partition)
                continue
            assert error is None, error
            offset, value = message.offset(), message.value()
            assert offset is not None and value is not None
            got[partition].append((offset, value.decode()))
    finally:
        consumer.close()
    assert len(ended) == partitions, f"{isolation}: only partitions {ended} of {topic} ended"
    return got


def _records(reported: dict[str, list[list[Any]]]) -> Read:
    """The scenario's partition -> [offset, value] lists as _read_to_end returns them."""
    return {int(p): [(offset, value) for offset, value in pairs] for p, pairs in reported.items()}


def check_transaction_protocol(broker: Broker, data: Data, *, offsets: bool) -> None:
    """What the broker recorded of the scenario's transactional producer: kafka-clients
    4.x reads transaction.version 2 from ApiVersions and speaks KIP-890 part 2 (Produce
    v12 and TxnOffsetCommit v5 with no AddPartitionsToTxn or AddOffsetsToTxn before them,
    EndTxn v5 answering the next epoch, which the next transaction uses); 3.9 speaks
    version 1."""
    sent = broker.requests(client_id=data["producer_client_id"])
    # ApiVersions v3+ names the client's version.
    [release] = {r.request.client_software_version for r in sent if r.api == "ApiVersions"}
    versions: dict[str, set[int]] = {}
    for record in sent:
        versions.setdefault(record.api, set()).add(record.version)
    ends = [r for r in sent if r.api == "EndTxn"]
    assert ends, f"no EndTxn recorded: {sorted(versions)}"
    if release.startswith("3."):
        assert max(versions["Produce"]) <= 11 and versions["EndTxn"] == {4}
        assert "AddPartitionsToTxn" in versions
        return
    assert versions["Produce"] == {12} and versions["EndTxn"] == {5}, versions
    assert not {"AddPartitionsToTxn", "AddOffsetsToTxn"} & set(versions), versions
    if offsets:
        assert versions["TxnOffsetCommit"] == {5}, versions
    for before, after in itertools.pairwise(ends):
        assert after.request.producer_epoch == before.response.producer_epoch
    for end in ends:
        assert end.response.error_code == 0
        assert end.response.producer_id == end.request.producer_id
        assert end.response.producer_epoch == end.request.producer_epoch + 1


def check_transactions(broker: Broker, data: Data) -> None:
    # librdkafka reads what Java read: read_committed the two committed transactions,
    # skipping the aborted one between them; read_uncommitted all three.
    topic, partitions = data["topic"], data["partitions"]
    committed, aborted = _records(data["committed"]), _records(data["aborted"])
    assert _read_to_end(broker, topic, partitions, "read_committed") == committed
    everything = {p: sorted(committed[p] + aborted[p]) for p in range(partitions)}
    assert _read_to_end(broker, topic, partitions, "read_uncommitted") == everything
    check_transaction_protocol(broker, data, offsets=False)


def _values(read: Read) -> list[str]:
    return [value for p in sorted(read) for _, value in read[p]]


def check_fencing(broker: Broker, data: Data) -> None:
    # The zombies' records were written and aborted: librdkafka's read_committed reads
    # only the successors'.
    topic = data["topic"]
    assert _values(_read_to_end(broker, topic, 1, "read_committed")) == data["committed"]
    assert _values(_read_to_end(broker, topic, 1, "read_uncommitted")) == data["everything"]


def check_consume_transform_produce(broker: Broker, data: Data) -> None:
    partitions, per_partition = data["partitions"], data["per_partition"]
    # The offsets sent with the transactions are the group's, read back by aiokafka.
    expected_offsets = {p: (per_partition, "") for p in range(partitions)}
    assert _committed(broker, data["group"]) == expected_offsets
    committed = _read_to_end(broker, data["output"], partitions, "read_committed")
    assert {p: [value for _, value in read] for p, read in committed.items()} == {
        int(p): values for p, values in data["expected"].items()
    }
    # The aborted transaction's output is in the log all the same.
    everything = _values(_read_to_end(broker, data["output"], partitions, "read_uncommitted"))
    assert sorted(everything) == sorted(_values(committed) + data["aborted"])
    check_transaction_protocol(broker, data, offsets=True)


def _topic_state(broker: Broker, name: str) -> tuple[str, dict[str, str]]:
    """The broker's id (as Java prints it) and configs of topic `name`."""

    def read() -> tuple[str, dict[str, str]]:
        topic = broker.state.topics.get(name)
        assert topic is not None, f"topic {name} is not on the broker"
        return str(topic.topic_id), dict(topic.configs)

    topic_id, configs = broker._on_loop(read)
    # Java prints a topic id as the URL-safe base64 of its 16 bytes, unpadded.
    java_id = base64.urlsafe_b64encode(uuid.UUID(topic_id).bytes).decode().rstrip("=")
    return java_id, configs


def check_created_topic(broker: Broker, data: Data) -> None:
    assert data["default_partitions"] == broker.config.num_partitions
    topic_id, configs = _topic_state(broker, data["topic"])
    assert topic_id == data["topic_id"]
    assert configs == {"retention.ms": "123456", "cleanup.policy": "compact"}


def check_described_topic(broker: Broker, data: Data) -> None:
    topic_id, _ = _topic_state(broker, data["topic"])
    assert topic_id == data["topic_id"]


def check_deleted_group(broker: Broker, data: Data) -> None:
    assert data["group"] not in broker.group_states()


def check_broker_configs(broker: Broker, data: Data) -> None:
    assert data["node_id"] == broker.node_id
    settings = broker.config.broker_configs()
    assert {name: data["broker"][name] for name in settings} == settings
    # the rest are the broker configs behind topic configs, at their values in force
    others = set(data["broker"]) - set(settings)
    assert others and all(
        name.startswith(("log.", "compression.", "min.", "unclean.", "message.")) for name in others
    ), others


def check_cluster(broker: Broker, data: Data) -> None:
    assert data["node_id"] == data["controller_id"] == broker.node_id
    assert (data["host"], data["port"]) == (broker.host, broker.port)
    assert data["cluster_id"] == broker.config.cluster_id


# --- the catalogue: one entry per Java scenario ---


@dataclass(frozen=True)
class Scenario:
    name: str
    # What Kafka serves here that the broker does not yet: the test is a strict xfail.
    missing: str | None = None
    # More checks here, with an independent client, given the scenario's data.
    check: Callable[[Broker, Data], None] | None = None


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("producer_default_idempotent", check=check_idempotent_batches),
    *(Scenario(f"producer_codec_{codec}", check=check_codec) for codec in CODEC_IDS),
    Scenario("producer_headers", check=check_headers),
    Scenario("producer_keyed_partitioning", check=check_keyed_partitioning),
    Scenario("producer_large_record", check=check_large_record),
    Scenario("producer_transactional", check=check_transactions),
    Scenario("producer_transactional_fencing", check=check_fencing),
    Scenario(
        "producer_transactional_consume_transform_produce", check=check_consume_transform_produce
    ),
    Scenario("consumer_range_group"),
    Scenario("consumer_cooperative_sticky"),
    Scenario("consumer_static_membership"),
    Scenario("consumer_protocol_group"),
    Scenario("consumer_seek_position_offsets_for_times"),
    Scenario("consumer_commit_sync_async", check=check_commits),
    Scenario("consumer_pause_resume"),
    Scenario("admin_create_topics", check=check_created_topic),
    Scenario("admin_delete_topics"),
    Scenario("admin_list_topics"),
    Scenario("admin_describe_topics", check=check_described_topic),
    Scenario("admin_create_partitions"),
    Scenario("admin_describe_configs", check=check_broker_configs),
    Scenario("admin_incremental_alter_configs"),
    Scenario("admin_list_offsets"),
    Scenario("admin_consumer_groups", check=check_deleted_group),
    Scenario("admin_consumer_group_offsets", check=check_group_offsets),
    Scenario("admin_describe_cluster", check=check_cluster),
    Scenario("admin_delete_records"),
)
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


# --- running the JVM ---


@dataclass
class JavaRun:
    """One JVM run of the scenarios against one broker."""

    line: str
    broker: Broker
    results: dict[str, Data] = field(default_factory=dict)
    problem: str | None = None  # compile failure, crash or timeout of the whole run
    running: str | None = None  # the scenario started and not reported when the run ended
    stderr: str = ""
    seconds: float = 0.0


def _unavailable(line: str) -> str | None:
    """Why the scenarios cannot run for this client line, or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH (Java 17+ runs the Java client tests)"
    if jvm.kafka_clients(line).jars() is None:
        return (
            f"kafka-clients {jvm.KAFKA_CLIENTS[line]} jars are not fetched: "
            "run `python -m minibroker jars clients`"
        )
    return None


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _compile_and_run(line: str, broker: Broker, names: list[str], workdir: Path) -> JavaRun:
    run = JavaRun(line, broker)
    jars = jvm.kafka_clients(line).jars()
    assert jars is not None
    classpath = os.pathsep.join(str(jar) for jar in jars)
    classes = workdir / "classes"
    sources = sorted(str(path) for path in JVM_SOURCES.glob("*.java"))
    started = time.monotonic()
    try:
        javac = ["javac", "--release", "17", "-encoding", "UTF-8", "-nowarn", "-cp", classpath]
        compiled = subprocess.run(
            [*javac, "-d", str(classes), *sources],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        run.problem = f"javac took over {COMPILE_TIMEOUT} s"
        return run
    if compiled.returncode != 0:
        run.problem = f"javac failed against kafka-clients {line}:\n{compiled.stderr[-6000:]}"
        return run
    # Startup matters more than peak speed here: the C1 compiler alone and a small heap.
    command = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m"]
    command += ["-cp", f"{classes}{os.pathsep}{classpath}", MAIN_CLASS]
    command += [broker.bootstrap_servers, ",".join(names)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        stdout, run.stderr = done.stdout, done.stderr
        if done.returncode != 0:
            run.problem = f"the JVM exited with status {done.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout, run.stderr = _text(exc.stdout), _text(exc.stderr)
        run.problem = f"the JVM run did not finish within {RUN_TIMEOUT} s"
    run.seconds = time.monotonic() - started
    for text in stdout.splitlines():
        if not text.startswith("{"):
            continue
        try:
            reported = json.loads(text)
        except ValueError:
            continue
        if "start" in reported:
            run.running = reported["start"]
        elif "scenario" in reported:
            run.results[reported["scenario"]] = reported
            run.running = None
    return run


def _selected(session: pytest.Session) -> dict[str, list[str]]:
    """client line -> the scenarios this session runs for it, in catalogue order."""
    wanted: dict[str, set[str]] = {}
    for item in session.items:
        if not isinstance(item, pytest.Function) or item.module is None:
            continue
        callspec = getattr(item, "callspec", None)
        if item.module.__name__ != __name__ or callspec is None:
            continue
        if "java_run" not in callspec.params:
            continue
        wanted.setdefault(callspec.params["java_run"], set()).add(callspec.params["scenario"].name)
    return {line: [s.name for s in SCENARIOS if s.name in names] for line, names in wanted.items()}


@pytest.fixture(scope="module")
def _java_launches(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[JavaRun]]]:
    """Every client line the session needs, compiled and run at once, each against a
    broker of its own; a line's fixture waits for its own run only."""
    brokers: list[Broker] = []
    pool = ThreadPoolExecutor(max_workers=len(CLIENT_LINES))
    launches: dict[str, Future[JavaRun]] = {}
    try:
        for line, names in _selected(request.session).items():
            if _unavailable(line) is not None:
                continue
            # Recording: the transaction scenarios' checks read which versions were used.
            broker = Broker(record_requests=True).start_in_thread()
            brokers.append(broker)
            workdir = tmp_path_factory.mktemp(f"java-client-{line}")
            launches[line] = pool.submit(_compile_and_run, line, broker, names, workdir)
        yield launches
    finally:
        # The runs end (or time out) before their brokers stop.
        pool.shutdown(wait=True)
        for broker in brokers:
            broker.stop_thread()


@pytest.fixture(scope="module")
def java_run(request: pytest.FixtureRequest, _java_launches: dict[str, Future[JavaRun]]) -> JavaRun:
    line: str = request.param
    reason = _unavailable(line)
    if reason is not None:
        pytest.skip(reason)
    launch = _java_launches.get(line)
    if launch is None:
        pytest.fail(f"kafka-clients {line} was not launched for this session")
    run = launch.result()
    print(f"kafka-clients {line}: JVM run took {run.seconds:.1f} s", file=sys.stderr)
    return run


def _cases() -> list[Any]:
    return [
        pytest.param(
            line,
            scenario,
            id=f"{line}-{scenario.name}",
            marks=[pytest.mark.xfail(strict=True, reason=scenario.missing)]
            if scenario.missing
            else [],
        )
        for line in CLIENT_LINES
        for scenario in SCENARIOS
    ]


def _stderr_tail(run: JavaRun, lines: int = 30) -> str:
    tail = run.stderr.strip().splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty)"


@pytest.mark.parametrize(("java_run", "scenario"), _cases(), indirect=["java_run"])
def test_java_client(java_run: JavaRun, scenario: Scenario) -> None:
    where = f"kafka-clients {java_run.line}, scenario {scenario.name}"
    result = java_run.results.get(scenario.name)
    if result is None:
        if java_run.running == scenario.name:
            happened = "was running when the JVM run ended"
        elif java_run.running is not None:
            happened = f"never ran: {java_run.running} was running when the JVM run ended"
        else:
            happened = "was not reported"
        pytest.fail(
            f"{where} {happened} ({java_run.problem or 'no run-level error'})\n"
            f"JVM stderr:\n{_stderr_tail(java_run)}",
            pytrace=False,
        )
    if not result["ok"]:
        pytest.fail(f"{where} failed in Java:\n{result['error']}", pytrace=False)
    if scenario.check is not None:
        scenario.check(java_run.broker, result["data"])
