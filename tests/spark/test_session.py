"""The spark fixture's environment checks and error summaries (no JVM needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from minibroker.testing.spark.session import explain, java_problem


def fake_java(tmp_path: Path, version_line: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return home


def test_missing_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert java_problem() == (
        "Spark needs Java 17 or later: no java on PATH and JAVA_HOME is not set"
    )


def test_old_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "1.8.0_392"')))
    problem = java_problem()
    assert problem is not None and problem.endswith("is Java 8")


def test_java_17_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "17.0.15" 2025')))
    assert java_problem() is None
    assert os.environ["JAVA_HOME"].endswith("jdk")


def test_explain_puts_the_source_error_first() -> None:
    noise = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: ...\n"
        'Traceback (most recent call last):\n  File "worker.py", line 3\n'
        "minibroker.testing.spark.kafka_io.KafkaSourceError: cannot reach Kafka at h:1 within 2s\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
    )
    assert explain(RuntimeError(noise)) == "KafkaSourceError: cannot reach Kafka at h:1 within 2s"
    assert explain(RuntimeError("\n  at x\nplain failure\n")) == "plain failure"
