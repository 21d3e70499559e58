"""Every test here that uses spark_kafka_source runs twice: through Spark's own Kafka
connector (format "kafka"; skipped, saying why, when the connector is not fetched) and
through the Python "minibroker" source. The test files do not change between the two."""

from __future__ import annotations

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    pinned = metafunc.definition.get_closest_marker("spark_kafka")
    if "spark_kafka_source" in metafunc.fixturenames and pinned is None:
        metafunc.parametrize("spark_kafka_format", ["kafka", "minibroker"], indirect=True)
