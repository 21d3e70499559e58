"""`minibroker serve --config FILE`: a broker started from a TOML file, with flags that
override it, and files it refuses (specific to minibroker: not marked parity)."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from minibroker import config_file
from minibroker.cli import _kind
from minibroker.config import BrokerConfig
from tests.cli.conftest import run_minibroker

_READY = re.compile(r"listening, bootstrap\.servers=(\S+)")


def test_serve_config_starts_a_broker_with_the_files_settings_and_topics(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        'port = 0\nauto_create_topics = false\nnum_partitions = 2\ncluster_id = "from-file"\n'
        '\n[[topic]]\nname = "orders"\npartitions = 3\n'
        'configs = { "retention.ms" = 60000 }\n'
        '\n[[topic]]\nname = "events"\n'
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "minibroker",
            "serve",
            "--config",
            str(config),
            "--partitions",
            "4",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        found = None
        while found is None:  # listener lines may come first
            line = process.stdout.readline()
            assert line, f"no listening line: {process.stderr.read() if process.stderr else ''}"
            found = _READY.search(line)
        admin = AdminClient({"bootstrap.servers": found.group(1)})
        assert admin.describe_cluster().result(10).cluster_id == "from-file"
        described = admin.describe_topics(TopicCollection(["orders", "events"]))
        assert len(described["orders"].result(10).partitions) == 3
        assert len(described["events"].result(10).partitions) == 4  # the flag over the file
        resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
        assert (
            admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "60000"
        )
        metadata = admin.list_topics("not-created", timeout=10)  # auto-create is off
        assert metadata.topics["not-created"].error is not None
        admin.create_topics([NewTopic("defaulted")])["defaulted"].result(10)
        defaulted = admin.describe_topics(TopicCollection(["defaulted"]))["defaulted"].result(10)
        assert len(defaulted.partitions) == 4
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr


def test_every_broker_setting_is_read_from_the_file_as_its_type(tmp_path: Path) -> None:
    """Generic over BrokerConfig: each setting's default, written in TOML, reads back."""
    lines, expected = [], {}
    for field in dataclasses.fields(BrokerConfig):
        value = field.default
        if value is None or isinstance(value, dict):
            continue
        literal = str(value).lower() if isinstance(value, bool) else json.dumps(value)
        lines.append(f"{field.name} = {literal}")
        expected[field.name] = value
    assert {"num_partitions", "auto_create_topics", "offsets_retention_minutes"} <= set(expected)
    config = tmp_path / "every.toml"
    config.write_text("\n".join(lines) + "\n")
    checks = {field.name: _kind(field) for field in dataclasses.fields(BrokerConfig)}
    settings, topics, brokers = config_file.load(config, checks)
    assert settings == expected
    assert topics == []
    assert brokers is None
    BrokerConfig(**settings)
    # A mapping setting (Python API only: no flag) is a TOML table.
    table = config_file._value("users", "Mapping[str, str] | None", {"alice": "pw"}, str)
    assert table == {"alice": "pw"}
    with pytest.raises(ValueError, match="users = 'alice': expected a table"):
        config_file._value("users", "Mapping[str, str] | None", "alice", str)


def test_serve_config_refuses_unknown_keys_and_wrong_types_naming_them(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    for text, complaint in [
        (
            "num_partiton = 2\n",
            "'num_partiton' is not a broker setting; did you mean 'num_partitions'?",
        ),
        ('num_partitions = "2"\n', "num_partitions = '2': expected an integer"),
        ("auto_create_topics = 1\n", "auto_create_topics = 1: expected true or false"),
        ("num_partitions = 0\n", "num_partitions = 0"),
        ("port = 70000\n", "port = 70000"),
        ('[[topic]]\nname = "a"\nreplicas = 2\n', "'replicas' is not a topic key"),
        ('[[topic]]\nname = "bad name"\n', "bad name"),
        ("port = \n", "not TOML"),
    ]:
        config.write_text(text)
        ran = run_minibroker("serve", "--config", str(config), "--port", "0")
        assert ran.returncode == 2, (text, ran.stderr)
        assert complaint in ran.stderr, (text, ran.stderr)
        assert str(config) in ran.stderr
        assert "Traceback" not in ran.stderr
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    missing = run_minibroker("--config", str(tmp_path / "missing.toml"))
    assert missing.returncode == 2
    assert "missing.toml" in missing.stderr
