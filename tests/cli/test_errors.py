"""What the tools say when the command line is wrong (exit 2) or the broker cannot be
reached (exit 1): one line, no traceback; and the client settings the options become."""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

import pytest

from minibroker.commands import parser
from minibroker.commands.common import client_settings, read_properties
from tests.cli.conftest import run_minibroker


def _one_line_failure(ran_stderr: str) -> None:
    assert "Traceback" not in ran_stderr
    assert len(ran_stderr.strip().splitlines()) == 1, ran_stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["topics", "frobnicate"], "invalid choice: 'frobnicate'"),
        (["topics", "create"], "the following arguments are required: NAME"),
        (["topics", "create", "t", "--partitions", "0"], "0 is less than 1"),
        (["groups", "reset-offsets", "g", "--topic", "t"], "one of the arguments --to-earliest"),
        (["consume", "t", "--output", "yaml"], "invalid choice: 'yaml'"),
        (["produce", "t", "-X", "novalue"], "'novalue' is not KEY=VALUE"),
        (["consume", "t", "--from-timestamp", "yesterday"], "ISO 8601"),
        (["configs", "describe"], "one of the arguments --topic --broker is required"),
        (["--port", "0", "topics"], "put topics first"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], complaint: str) -> None:
    ran = run_minibroker(*args)
    assert ran.returncode == 2, ran.stderr
    assert complaint in ran.stderr
    _one_line_failure(ran.stderr)


def test_an_unreachable_broker_exits_1_quickly_naming_the_address() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    for args in (["topics", "list"], ["consume", "t"], ["produce", "t"]):
        started = time.monotonic()
        ran = run_minibroker(*args, "--bootstrap-server", address, "--timeout", "1")
        assert ran.returncode == 1, ran.stderr
        assert f"cannot reach a broker at {address} within 1s" in ran.stderr
        assert "Connection refused" in ran.stderr
        _one_line_failure(ran.stderr)
        assert time.monotonic() - started < 15


def _options(*args: str) -> argparse.Namespace:
    return parser().parse_args(["topics", "list", *args])


def test_security_options_become_librdkafka_properties(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MINIBROKER_BOOTSTRAP", raising=False)
    monkeypatch.setenv("MINIBROKER_SASL_PASSWORD", "from-env")
    settings = client_settings(
        _options(
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-512",
            "--sasl-username",
            "alice",
            "--ssl-cafile",
            "ca.pem",
            "--ssl-certfile",
            "me.pem",
            "--ssl-keyfile",
            "me.key",
            "-X",
            "client.id=tools",
            "-X",
            "sasl.username=bob",
        )
    )
    assert settings["bootstrap.servers"] == "127.0.0.1:9092"
    assert settings["security.protocol"] == "SASL_SSL"
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512"
    assert settings["sasl.username"] == "bob"  # -X has the last word
    assert settings["sasl.password"] == "from-env"
    assert (settings["ssl.ca.location"], settings["ssl.certificate.location"]) == (
        "ca.pem",
        "me.pem",
    )
    assert settings["ssl.key.location"] == "me.key"
    assert settings["client.id"] == "tools"
    monkeypatch.setenv("MINIBROKER_BOOTSTRAP", "kafka:9093")
    assert client_settings(_options())["bootstrap.servers"] == "kafka:9093"
    explicit = client_settings(_options("--bootstrap-server", "other:1", "--sasl-password", "x"))
    assert (explicit["bootstrap.servers"], explicit["sasl.password"]) == ("other:1", "x")


def test_command_config_reads_java_properties_as_kafkas_tools_do(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# a comment\n! another\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="alice" password="s3cr\\\\\\"t";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
        "client.id tools\\u0021\n"
    )
    assert read_properties(properties)["client.id"] == "tools!"
    settings = client_settings(
        _options("--command-config", str(properties), "--security-protocol", "SSL")
    )
    assert settings["security.protocol"] == "SSL"  # the option over the file
    assert settings["sasl.mechanism"] == "PLAIN"
    assert (settings["sasl.username"], settings["sasl.password"]) == ("alice", 's3cr"t')
    assert settings["ssl.ca.location"] == "/etc/ca.pem"
    assert settings["ssl.endpoint.identification.algorithm"] == "none"
    assert "sasl.jaas.config" not in settings
    missing = run_minibroker("topics", "list", "--command-config", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "nope" in missing.stderr


def test_every_tool_has_help_with_an_example() -> None:
    for args in (
        ["topics", "create"],
        ["groups", "reset-offsets"],
        ["consume"],
        ["configs", "alter"],
    ):
        ran = run_minibroker(*args, "--help")
        assert ran.returncode == 0
        assert "Example:\n  minibroker " + args[0] in ran.stdout
        assert "--bootstrap-server" in ran.stdout


def test_a_refused_sign_in_is_told_apart_from_an_unreachable_broker() -> None:
    from confluent_kafka import KafkaError

    from minibroker.commands.common import Connection

    conn = Connection(_options("--bootstrap-server", "kafka:9093", "--timeout", "3"))
    conn.errors.append(
        KafkaError(
            KafkaError._TRANSPORT, "kafka:9093/bootstrap: Connect to ipv4#10.0.0.1:9093 failed"
        )
    )
    assert str(conn.unreachable()) == (
        "cannot reach a broker at kafka:9093 within 3s: Connect to ipv4#10.0.0.1:9093 failed"
    )
    conn.errors.append(
        KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials")
    )
    assert str(conn.unreachable()) == (
        "could not sign in to the broker at kafka:9093: "
        "SASL authentication error: invalid credentials"
    )
