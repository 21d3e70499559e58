"""The examples/ downstream project's own test suite, run as part of this one.

It runs in this process through pytester so it shares the session's SparkSession (the
`spark` fixture reuses an active session and leaves it running) instead of paying for
a second JVM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from minibroker.testing.spark.session import jvm_kafka_available

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_job"


@pytest.mark.parametrize("kafka_format", ["kafka", "minibroker"])
def test_streaming_job_example_suite_passes(
    kafka_format: str, spark: Any, pytester: pytest.Pytester
) -> None:
    """The example's own tests pass unchanged through Spark's connector and through the
    Python source."""
    if kafka_format == "kafka" and not jvm_kafka_available(spark):
        pytest.skip(
            "Spark's Kafka connector is not on the classpath (python -m minibroker jars spark)"
        )
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--spark-kafka-format={kafka_format}",
        "--rootdir",
        str(EXAMPLE),
        "-c",
        str(EXAMPLE / "pyproject.toml"),
        str(EXAMPLE / "tests"),
    )
    result.assert_outcomes(passed=1)
    assert spark.sparkContext._jsc is not None, "the example suite stopped the shared session"
