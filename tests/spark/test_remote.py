"""The spark fixture over Spark Connect (`--spark-remote`): a shared local server started
by the first run, reused by the next, stopped by its command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.testing.spark import remote
from minibroker.testing.spark.session import java_problem, pyspark_problem

pytest_plugins = ["pytester"]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_dead_servers_state_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(remote.STATE_ENV, str(tmp_path))
    state = {"pid": dead_pid(), "port": 1, "fingerprint": "f", "log": "l"}
    (tmp_path / "server.json").write_text(json.dumps(state))
    assert remote.status() == "no shared Spark Connect server is running"
    assert remote.stop_server() == "no shared Spark Connect server is running"
    assert not (tmp_path / "server.json").exists()


def test_the_fingerprint_follows_the_settings_and_jars() -> None:
    base = remote.fingerprint({"spark.sql.shuffle.partitions": "2"}, ("a.jar",))
    assert base == remote.fingerprint({"spark.sql.shuffle.partitions": "2"}, ("a.jar",))
    assert base != remote.fingerprint({"spark.sql.shuffle.partitions": "3"}, ("a.jar",))
    assert base != remote.fingerprint({"spark.sql.shuffle.partitions": "2"}, ())


def test_spark_remote_takes_off_auto_or_an_address(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--spark-remote=yes", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*spark_remote must be off, auto or sc://HOST:PORT, not 'yes'"])


def test_auto_falls_back_to_a_local_session_and_an_address_fails(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from minibroker.testing import plugin
    from minibroker.testing.spark.session import Connector

    said: list[str] = []
    monkeypatch.setattr(remote, "connect_problem", lambda: "no Connect client here")
    monkeypatch.setattr(plugin, "_say", lambda config, line: said.append(line))
    none = Connector((), "no connector")
    assert plugin._remote_spark(pytestconfig, "auto", {}, none) is None
    assert said == [
        "minibroker: spark_remote=auto: no Connect client here; using a local SparkSession"
    ]
    with pytest.raises(pytest.fail.Exception, match="spark_remote=sc://h:1: no Connect client"):
        plugin._remote_spark(pytestconfig, "sc://h:1", {}, none)


STREAMING_TEST = """
import pytest

def test_streams_over_connect(spark, spark_stream, spark_kafka_source, kafka_topic,
                              kafka_produce):
    assert type(spark).__module__.startswith("pyspark.sql.connect")
    topic = kafka_topic(partitions=2)
    kafka_produce(topic, [("k", "a"), ("k", "b")])
    df = spark_kafka_source.read_stream(spark, subscribe=topic, startingOffsets="earliest")
    rows = spark_stream.collect(df.selectExpr("CAST(value AS STRING) AS v"))
    assert sorted(r.v for r in rows) == ["a", "b"]

def test_no_spark_context(spark):
    with pytest.raises(Exception, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        spark.sparkContext

def test_an_rdd(spark):
    spark.sparkContext.parallelize([1]).count()
"""


def test_a_shared_server_serves_one_run_then_the_next_then_stops(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checked before pytester takes its snapshot of sys.modules: modules first imported
    # inside it (pandas, by the check) are unloaded after it and cannot load again.
    problem = pyspark_problem() or java_problem() or remote.connect_problem()
    if problem:
        pytest.skip(problem)
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    monkeypatch.setenv(remote.STATE_ENV, str(tmp_path / "connect"))
    pytester.makepyfile(test_stream=STREAMING_TEST)
    try:
        first = pytester.runpytest_subprocess("--spark-remote=auto", "-p", "no:cacheprovider")
        first.assert_outcomes(passed=2, failed=1)
        first.stdout.fnmatch_lines(["*started the shared Spark Connect server at sc://*"])
        first.stdout.fnmatch_lines(
            ["*minibroker: Spark Connect*", "*RDDs*over Spark Connect; run with --spark-remote=off"]
        )
        server = json.loads((tmp_path / "connect" / "server.json").read_text())

        again = pytester.runpytest_subprocess(
            "--spark-remote=auto", "-p", "no:cacheprovider", "-k", "no_spark_context"
        )
        again.assert_outcomes(passed=1, deselected=2)
        assert "started the shared" not in again.stdout.str()
        again.stdout.fnmatch_lines([f"*Spark Connect at sc://127.0.0.1:{server['port']};*"])
    finally:
        stopped = subprocess.run(
            [sys.executable, "-m", "minibroker.testing.spark.remote", "stop"],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            check=False,
        )
    assert stopped.stdout.startswith("stopped the shared Spark Connect server"), stopped
    with pytest.raises(ProcessLookupError):
        os.kill(server["pid"], 0)
