"""The examples/ downstream project's own test suite, run as part of this one.

It runs in this process through pytester so it shares the session's SparkSession (the
`spark` fixture reuses an active session and leaves it running) instead of paying for
a second JVM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming_job"


def test_streaming_job_example_suite_passes(spark: Any, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(EXAMPLE),
        "-c",
        str(EXAMPLE / "pyproject.toml"),
        str(EXAMPLE / "tests"),
    )
    result.assert_outcomes(passed=1)
    assert spark.sparkContext._jsc is not None, "the example suite stopped the shared session"
