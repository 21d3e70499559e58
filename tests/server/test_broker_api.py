"""The Python API (`Broker` in async and sync code) and the command line, through real
clients and raw sockets."""

from __future__ import annotations

import asyncio
import json
import re
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import aiokafka
import aiokafka.errors
import confluent_kafka
import pytest

import minibroker
from harness.raw_client import RawClient, encode, make, make_request, parse_host_port
from minibroker import Broker, BrokerConfig, TopicError
from minibroker.state.topic_errors import INVALID_CONFIG, TOPIC_ALREADY_EXISTS

METADATA, API_VERSIONS = 3, 18


def _metadata(client: RawClient) -> object:
    return client.call(METADATA, 4, topics=None, allow_auto_topic_creation=False)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- async ---------------------------------------------------------------------------


async def test_async_with_broker_serves_aiokafka() -> None:
    async with Broker() as broker:
        assert broker.port > 0
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        broker.create_topic("orders", 3, {"max.message.bytes": "2000"})
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            assert await producer.partitions_for("orders") == {0, 1, 2}
            metadata = await producer.send_and_wait("orders", b"small", partition=2)
            assert (metadata.partition, metadata.offset) == (2, 0)
            # The topic config is in force: the broker refuses a batch over 2000 bytes.
            with pytest.raises(aiokafka.errors.KafkaError) as info:
                await producer.send_and_wait("orders", b"x" * 5000, partition=0)
            assert info.value.errno == 10  # MESSAGE_TOO_LARGE
        finally:
            await producer.stop()
        assert broker.end_offsets("orders") == {0: 0, 1: 0, 2: 1}

        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition("orders", 2)])
            batch = await consumer.getmany(timeout_ms=5000)
            assert [m.value for ms in batch.values() for m in ms] == [b"small"]
        finally:
            await consumer.stop()


async def test_async_stop_closes_client_connections() -> None:
    broker = Broker()
    await broker.start()
    reader, writer = await asyncio.open_connection(*parse_host_port(broker.bootstrap_servers))
    try:
        # A full request/response first, so the connection is known to be served.
        writer.write(encode(API_VERSIONS, 0, make_request(API_VERSIONS, 0), 1))
        size = int.from_bytes(await reader.readexactly(4), "big")
        assert int.from_bytes((await reader.readexactly(size))[:4], "big") == 1
        assert broker.connection_count == 1
        await broker.stop()
        assert await asyncio.wait_for(reader.read(), 10) == b"", "EOF after stop"
    finally:
        writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection(*parse_host_port(broker.bootstrap_servers))


# --- sync ----------------------------------------------------------------------------


def test_with_broker_from_sync_code() -> None:
    with Broker() as broker:
        topic = broker.create_topic("events", 2, {"message.timestamp.type": "LogAppendTime"})
        assert topic.log_append_time
        assert broker.topics() == ["events"]
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(10):
            producer.produce("events", b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert broker.end_offsets("events") == {0: 5, 1: 5}
        assert broker.end_offsets("nothing") == {}
        clients = {r.client_id for r in broker.recent_requests()}
        assert "rdkafka" in clients
        assert {r.api for r in broker.recent_requests()} >= {"ApiVersions", "Produce"}


def test_port_zero_gives_distinct_free_ports() -> None:
    with Broker() as first, Broker(port=0) as second:
        assert first.port != second.port
        for broker in (first, second):
            with RawClient(broker.bootstrap_servers) as client:
                body = _metadata(client)
                assert [(b.host, b.port) for b in body.brokers] == [("127.0.0.1", broker.port)]


def test_explicit_port_and_settings() -> None:
    port = _free_port()
    with Broker(port=port, auto_create_topics=False, num_partitions=4) as broker:
        assert broker.port == port
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        assert broker.config.num_partitions == 4
        with RawClient(broker.bootstrap_servers) as client:
            request = client.call(
                METADATA, 4, topics=(), allow_auto_topic_creation=True
            )  # empty list: no topics asked for, none created
            assert request.topics == ()
        assert broker.topics() == []


def test_config_object_and_keyword_settings_combine() -> None:
    config = BrokerConfig(num_partitions=3, max_connections=7)
    with Broker(config=config, max_frame_bytes=1 << 16) as broker:
        assert broker.config.num_partitions == 3
        assert broker.config.max_connections == 7
        assert broker.config.max_frame_bytes == 1 << 16


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"fetch_max_bytes": 0}, "fetch_max_bytes=0: must be at least 1024"),
        ({"num_partitions": 0}, "num_partitions=0: must be at least 1"),
        ({"max_frame_bytes": -1}, "max_frame_bytes=-1: must be at least 1"),
        ({"port": 65536}, "port=65536: must be at most 65535"),
        (
            {"group_min_session_timeout_ms": 500, "group_max_session_timeout_ms": 100},
            "group_max_session_timeout_ms=100: must be at least group_min_session_timeout_ms",
        ),
    ],
)
def test_settings_a_broker_cannot_work_with_are_refused(
    settings: dict[str, int], complaint: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)):
        Broker(**settings)


def test_port_in_use_raises_and_leaves_nothing_running() -> None:
    with Broker() as running:
        with pytest.raises(OSError):
            Broker(port=running.port).start_in_thread()
        with RawClient(running.bootstrap_servers) as client:
            assert client.call(API_VERSIONS, 0).error_code.value == 0


def test_create_topic_errors_carry_kafka_codes() -> None:
    with Broker() as broker:
        broker.create_topic("t")
        with pytest.raises(TopicError) as info:
            broker.create_topic("t")
        assert info.value.error_code == TOPIC_ALREADY_EXISTS
        with pytest.raises(TopicError) as info:
            broker.create_topic("u", 1, {"max.message.bytes": "big"})
        assert info.value.error_code == INVALID_CONFIG
        assert broker.topics() == ["t"]


def test_sync_shutdown_closes_client_connections() -> None:
    broker = Broker().start_in_thread()
    client = RawClient(broker.bootstrap_servers)
    try:
        assert client.call(API_VERSIONS, 0).error_code.value == 0
        broker.stop_thread()
        assert client.is_closed_by_peer(timeout=10)
    finally:
        client.close()
        broker.stop_thread()
    with pytest.raises(OSError):
        RawClient(broker.bootstrap_servers, timeout=2)


# --- command line --------------------------------------------------------------------


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if "bootstrap.servers=" in line:
                return process, line.strip().split("bootstrap.servers=", 1)[1]
            if not line and process.poll() is not None:
                break
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no bootstrap address printed; stderr: {stderr}")


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM])
def test_cli_prints_its_address_and_serves_metadata(stop_with: signal.Signals) -> None:
    process, bootstrap = _start_cli("--topic", "orders:3", "--topic", "audit")
    try:
        host, port = parse_host_port(bootstrap)
        assert host == "127.0.0.1" and port > 0
        with RawClient(bootstrap) as client:
            body = _metadata(client)
        assert [(b.host, b.port) for b in body.brokers] == [(host, port)]
        partitions = {t.name: len(t.partitions) for t in body.topics}
        assert partitions == {"orders": 3, "audit": 1}
    finally:
        process.send_signal(stop_with)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_cli_fault_rules_act_and_the_record_file_shows_them(tmp_path: Any) -> None:
    record = tmp_path / "requests.jsonl"
    process, bootstrap = _start_cli(
        "--topic",
        "orders",
        "--fault",
        "Produce:error=NOT_ENOUGH_REPLICAS,times=2",
        "--record-file",
        str(record),
    )
    try:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "retry.backoff.ms": 20}
        )
        producer.produce("orders", b"kept")
        assert producer.flush(30) == 0
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    produced = [line for line in lines if line["api"] == "Produce"]
    codes = [
        line["response"]["responses"][0]["partition_responses"][0]["error_code"]
        for line in produced
    ]
    assert codes == [19, 19, 0]  # NOT_ENOUGH_REPLICAS twice, then stored


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--fault", "Produce:error=BOGUS"], "'BOGUS' is not a Kafka error name"),
        (["--fault", "Produce:drop,close"], "one action"),
        (["--topic", "bad name"], "bad name"),
        (["--topic", "orders:zero"], "orders:zero"),
        (["--topic", "orders:0"], "orders:0"),
        (["--partitions", "0"], "--partitions"),
        (["--port", "70000"], "--port"),
        (["--fetch-max-bytes", "1000"], "--fetch-max-bytes: 1000 is not within 1024 or more"),
        (["--group-max-session-timeout-ms", "50"], "--group-max-session-timeout-ms"),
        (["--log-level", "chatty"], "--log-level"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_cli_bad_input_exits_with_a_clear_message(args: list[str], complaint: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert complaint in result.stderr
    assert "Traceback" not in result.stderr
    assert "bootstrap.servers=" not in result.stdout


def test_cli_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"minibroker {minibroker.__version__}"


def test_every_broker_setting_is_a_flag_with_help() -> None:
    import dataclasses

    from minibroker.cli import _parser, _settings
    from minibroker.config import BrokerConfig

    help_text = _parser().format_help()
    for field in dataclasses.fields(BrokerConfig):
        if not field.metadata.get("flag", True):
            assert field.metadata.get("help"), f"{field.name} has no help text"
            continue  # Python API only (a mapping or a function)
        flag = (
            "--partitions"
            if field.name == "num_partitions"
            else "--" + field.name.replace("_", "-")
        )
        assert flag in help_text, flag
        assert field.metadata.get("help"), f"{field.name} has no help text"
    args = _parser().parse_args(
        ["--group-min-session-timeout-ms", "6000", "--offsets-retention-minutes", "0.5"]
    )
    assert _settings(args)["group_min_session_timeout_ms"] == 6000
    assert _settings(args)["offsets_retention_minutes"] == 0.5


def test_cli_settings_reach_the_broker() -> None:
    process, bootstrap = _start_cli("--auto-create-topics", "false", "--max-connections", "7")
    try:
        with RawClient(bootstrap) as client:
            body = client.call(
                METADATA,
                4,
                topics=(_metadata_topic("typo"),),
                allow_auto_topic_creation=True,
            )
        assert [t.error_code.value for t in body.topics] == [3]  # not auto-created
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def _metadata_topic(name: str) -> Any:
    return make(METADATA, 4, "MetadataRequestTopic", name=name)


def test_a_listener_on_every_interface_needs_an_advertised_address() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "minibroker", "--listeners", "SASL_PLAINTEXT://0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 2
    assert "listener SASL_PLAINTEXT 0.0.0.0 listens on every interface" in refused.stderr
    assert "--advertised-listeners" in refused.stderr


def test_cli_on_every_interface_needs_an_advertised_host_and_warns() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "minibroker", "--port", "0", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 2
    assert "--advertised-host" in refused.stderr
    process, bootstrap = _start_cli("--host", "0.0.0.0", "--advertised-host", "127.0.0.1")
    try:
        assert bootstrap.startswith("127.0.0.1:")
        with RawClient(bootstrap) as client:
            body = _metadata(client)
        assert [b.host for b in body.brokers] == ["127.0.0.1"]  # type: ignore[attr-defined]
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert "no authentication" in stderr


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_cli_on_ipv6_prints_an_address_clients_accept() -> None:
    from confluent_kafka.admin import AdminClient

    process, bootstrap = _start_cli("--host", "::1", "--topic", "v6:2")
    try:
        assert bootstrap.startswith("[::1]:")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = admin.list_topics(timeout=10).topics
        assert len(topics["v6"].partitions) == 2
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_transaction_states_and_last_stable_offsets_show_an_open_transaction() -> None:
    with Broker() as broker:
        broker.create_topic("ledger", partitions=2)
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "ledger-writer"}
        )
        producer.init_transactions(10)
        assert broker.transaction_states() == {"ledger-writer": "Empty"}
        producer.begin_transaction()
        producer.produce("ledger", value=b"pending", partition=1)
        assert producer.flush(10) == 0
        assert broker.transaction_states() == {"ledger-writer": "Ongoing"}
        assert broker.end_offsets("ledger") == {0: 0, 1: 1}
        assert broker.last_stable_offsets("ledger") == {0: 0, 1: 0}
        producer.commit_transaction(10)
        assert broker.transaction_states() == {"ledger-writer": "CompleteCommit"}
        assert broker.end_offsets("ledger") == broker.last_stable_offsets("ledger") == {0: 0, 1: 2}
