"""Exactly-once output through a sink failure and a restart from the checkpoint.

The sink failure is injected with `kafka_faults` (a rule of minibroker's broker: the
first write to partition 1 of the output topic is refused with INVALID_RECORD, a
non-retriable error), so those tests need minibroker: they ask for `kafka_faults` first
and, on another Kafka, skip saying so before anything is set up. The crash after a
commit is simulated in the job and runs against any Kafka.
"""

from __future__ import annotations

from typing import Any

import payments_job
import pytest

INVALID_RECORD = 87
PAYMENTS = [
    (f"p-{i}", {"payment": f"p-{i}", "account": f"a-{i % 3}", "cents": 100 * i})
    for i in range(1, 11)
]


@pytest.fixture
def job(
    spark: Any, spark_kafka_source: Any, spark_stream: Any, kafka_topic: Any, kafka_produce: Any
) -> Any:
    """Runs the job over PAYMENTS: `job(**start_kwargs)` runs it once (AvailableNow)
    from its checkpoint; `job.output` is the output topic."""
    source = kafka_topic(partitions=2)
    output = kafka_topic(partitions=2)
    kafka_produce(source, PAYMENTS)
    checkpoint = spark_stream.checkpoint("payments")

    def run(**kwargs: Any) -> None:
        spark_stream.wait(
            payments_job.start(
                spark,
                spark_kafka_source.format,
                spark_kafka_source.options,
                source,
                output,
                checkpoint,
                availableNow=True,
                **kwargs,
            )
        )

    run.output = output  # type: ignore[attr-defined]
    return run


def fail_the_first_write_to_partition_1(kafka_faults: Any, topic: str) -> Any:
    return kafka_faults.add("Produce", topic=topic, partition=1, error=INVALID_RECORD, times=1)


def test_exactly_once_through_a_sink_failure_and_a_restart(
    kafka_faults: Any, job: Any, kafka_assert_exactly_once: Any
) -> None:
    failure = fail_the_first_write_to_partition_1(kafka_faults, job.output)
    with pytest.raises(AssertionError, match="streaming query failed"):
        job()
    assert failure.acted == 1
    job()  # restarted from the checkpoint: the failed batch runs again

    kafka_assert_exactly_once(
        job.output, by="value.payment", decode_as="json", expected={p for p, _ in PAYMENTS}
    )


def test_spark_kafka_sink_writes_twice_through_the_same_failure(
    kafka_faults: Any, job: Any, kafka_assert_exactly_once: Any
) -> None:
    failure = fail_the_first_write_to_partition_1(kafka_faults, job.output)
    with pytest.raises(AssertionError, match="streaming query failed"):
        job(exactly_once=False)
    assert failure.acted == 1
    job(exactly_once=False)

    with pytest.raises(AssertionError, match=r"appear more than once") as duplicates:
        kafka_assert_exactly_once(job.output, by="value.payment", decode_as="json")
    assert "partition 0 offset 0" in str(duplicates.value)


class CrashAfterCommit(payments_job.TransactionalSink):
    """The sink, with the driver dying after a batch is committed to Kafka and before
    Spark records the batch as done."""

    def __call__(self, batch: Any, batch_id: int) -> None:
        super().__call__(batch, batch_id)
        raise RuntimeError("the driver died")


def test_a_batch_committed_before_a_crash_is_not_written_again(
    job: Any, kafka_assert_exactly_once: Any
) -> None:
    with pytest.raises(AssertionError, match="the driver died"):
        job(sink_class=CrashAfterCommit)
    job()  # Spark runs the batch again; the sink finds its id committed

    by_payment = kafka_assert_exactly_once(
        job.output, by="value.payment", decode_as="json", expected=len(PAYMENTS)
    )
    assert by_payment["p-3"].value["fee_cents"] == 6
