"""The examples/ downstream project's own test suite, run as part of this one.

It runs in this process through pytester so it shares the session's SparkSession (the
`spark` fixture reuses an active session and leaves it running) instead of paying for
a second JVM. It runs on the Kafka this suite runs on (`--kafka-backend`); the example
tests that inject faults need minibroker's broker and skip on the others, saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minibroker.testing import jvm
from minibroker.testing.spark.session import jvm_kafka_available

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_job"
# Found before pytester gives the inner run a home folder of its own.
JAR_CACHE = jvm.cache_dir()
# Through Spark's connector, the whole suite; through the Python source, the first job's
# test only (the trigger and sink paths the others take through it are tested in
# tests/spark/test_triggers.py and test_streaming.py), which saves half a minute.
SUITES = [
    pytest.param("kafka", ["tests"], 6, id="kafka"),
    pytest.param("minibroker", ["tests/test_clicks_job.py"], 1, id="minibroker"),
]
FAULT_TESTS = 2  # of the whole suite's, those that use kafka_faults


@pytest.mark.parametrize(("kafka_format", "paths", "tests"), SUITES)
def test_streaming_job_example_suite_passes(
    kafka_format: str,
    paths: list[str],
    tests: int,
    kafka_backend: str,
    spark: Any,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The example's own tests pass unchanged through Spark's connector and through the
    Python source, on the Kafka this suite runs on."""
    if kafka_format == "kafka" and not jvm_kafka_available(spark):
        pytest.skip(
            "Spark's Kafka connector is not on the classpath (python -m minibroker jars spark)"
        )
    monkeypatch.setenv(jvm.CACHE_ENV, str(JAR_CACHE))  # where --kafka-backend finds Kafka
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--spark-kafka-format={kafka_format}",
        f"--kafka-backend={kafka_backend}",
        "--rootdir",
        str(EXAMPLE),
        "-c",
        str(EXAMPLE / "pyproject.toml"),
        "-rs",
        *(str(EXAMPLE / path) for path in paths),
    )
    skipped = FAULT_TESTS if kafka_backend != "embedded" and paths == ["tests"] else 0
    result.assert_outcomes(passed=tests - skipped, skipped=skipped)
    if skipped:
        result.stdout.fnmatch_lines(["*fault rules are a feature of minibroker*"])
    assert spark.sparkContext._jsc is not None, "the example suite stopped the shared session"
