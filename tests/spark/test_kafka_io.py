"""The Kafka side of the Spark source and sink (confluent-kafka), driven against the
broker without a JVM: offset resolution, range reads, read limits, data loss, producing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minibroker import Broker
from minibroker.testing.spark.kafka_io import (
    KafkaDataLoss,
    KafkaSourceError,
    OffsetReader,
    Producing,
    TopicPartitionRange,
    kafka_arrow_schema,
    limit_offsets,
    read_range,
    split_ranges,
)
from minibroker.testing.spark.options import (
    KafkaOptionError,
    parse_sink_options,
    parse_source_options,
)


def reader_for(bootstrap: str, **options: str) -> OffsetReader:
    parsed = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "kafkaConsumer.pollTimeoutMs": "5000", **options},
        streaming=True,
    )
    return OffsetReader(parsed)


def test_confluent_kafka_offsets_for_each_starting_spec(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_produce: Callable[..., Any]
) -> None:
    topic = kafka_topic(partitions=3)
    kafka_produce(topic, ["a", "b", "c"], partition=0)
    kafka_produce(topic, ["d"], partition=2)
    reader = reader_for(kafka_bootstrap, subscribe=topic)
    try:
        assert reader.topic_partitions() == {topic: [0, 1, 2]}
        assert reader.resolve("earliest", "startingOffsets") == {topic: {"0": 0, "1": 0, "2": 0}}
        assert reader.resolve("latest", "startingOffsets") == {topic: {"0": 3, "1": 0, "2": 1}}
        assert reader.resolve({topic: {"0": 1, "1": -2, "2": -1}}, "startingOffsets") == {
            topic: {"0": 1, "1": 0, "2": 1}
        }
        with pytest.raises(KafkaOptionError, match=rf"does not name {topic}-1, {topic}-2"):
            reader.resolve({topic: {"0": 1}}, "startingOffsets")
        with pytest.raises(KafkaOptionError, match=rf"names {topic}-7, which the subscription"):
            reader.resolve({topic: {"0": 1, "1": 0, "2": 0, "7": 0}}, "startingOffsets")
    finally:
        reader.close()


def test_confluent_kafka_pattern_and_assign_subscriptions(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    kafka_topic("metrics-a", partitions=2)
    kafka_topic("metrics-b")
    kafka_topic("other")
    reader = reader_for(kafka_bootstrap, subscribePattern="metrics-.*")
    assert reader.topic_partitions() == {"metrics-a": [0, 1], "metrics-b": [0]}
    reader.close()
    reader = reader_for(kafka_bootstrap, assign='{"metrics-a":[1]}')
    assert reader.latest() == {"metrics-a": {"1": 0}}
    reader.close()
    reader = reader_for(kafka_bootstrap, assign='{"metrics-a":[5]}')
    with pytest.raises(KafkaSourceError, match=r"names partitions \[5\] of 'metrics-a'"):
        reader.topic_partitions()
    reader.close()


def test_unknown_topic_is_named_with_the_topics_that_exist(
    kafka_bootstrap: str, kafka_topic: Callable[..., str]
) -> None:
    present = kafka_topic()
    reader = reader_for(kafka_bootstrap, subscribe=f"{present},missing")
    with pytest.raises(KafkaSourceError) as failure:
        reader.topic_partitions()
    reader.close()
    message = str(failure.value)
    assert f"topic(s) 'missing' named by subscribe={present},missing do not exist" in message
    assert present in message


def test_unreachable_bootstrap_names_the_address() -> None:
    with Broker() as gone:
        address = gone.bootstrap_servers
    reader = reader_for(address, subscribe="t", **{"kafkaConsumer.pollTimeoutMs": "1000"})
    with pytest.raises(KafkaSourceError, match=f"cannot reach Kafka at {address}"):
        reader.topic_partitions()
    reader.close()


def test_starting_offsets_by_timestamp(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_helper: Any
) -> None:
    from confluent_kafka import Producer

    topic = kafka_topic(partitions=1)
    producer = Producer(kafka_helper.configs.confluent_producer())
    for i, stamp in enumerate([1_000, 2_000, 3_000]):
        producer.produce(topic, value=str(i).encode(), timestamp=stamp)
    producer.flush(10)
    reader = reader_for(kafka_bootstrap, subscribe=topic, startingTimestamp="1500")
    assert reader.starting() == {topic: {"0": 1}}
    reader.close()
    reader = reader_for(
        kafka_bootstrap, subscribe=topic, startingOffsetsByTimestamp=f'{{"{topic}":{{"0":9000}}}}'
    )
    with pytest.raises(KafkaSourceError, match="startingOffsetsByTimestampStrategy=latest"):
        reader.starting()
    reader.close()
    reader = reader_for(
        kafka_bootstrap,
        subscribe=topic,
        startingTimestamp="9000",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert reader.starting() == {topic: {"0": 3}}
    reader.close()


def test_read_range_returns_exactly_the_range_as_arrow(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_produce: Callable[..., Any]
) -> None:
    pytest.importorskip("pyarrow")
    topic = kafka_topic(partitions=2)
    kafka_produce(
        topic, [(f"k{i}", f"v{i}") for i in range(25_000)], partition=1, headers={"h": "x"}
    )
    options = parse_source_options(
        {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "includeHeaders": "true"},
        streaming=False,
    )
    schema = kafka_arrow_schema(include_headers=True)
    batches = list(read_range(options, TopicPartitionRange(topic, 1, 5, 24_990), schema))
    assert all(batch.schema.equals(schema) for batch in batches)
    assert len(batches) >= 3  # split into bounded batches, not one huge one
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(5, 24_990))
    assert rows[0]["key"] == b"k5" and rows[0]["value"] == b"v5"
    assert rows[-1]["value"] == b"v24989"
    assert {row["topic"] for row in rows} == {topic} and {row["partition"] for row in rows} == {1}
    assert rows[0]["timestampType"] == 0 and rows[0]["timestamp"] is not None
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}]
    assert list(read_range(options, TopicPartitionRange(topic, 0, 0, 0), schema)) == []


def test_read_range_past_the_end_is_data_loss_or_skipped(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_produce: Callable[..., Any]
) -> None:
    pytest.importorskip("pyarrow")
    topic = kafka_topic()
    kafka_produce(topic, ["a", "b"])
    schema = kafka_arrow_schema()
    strict = parse_source_options(
        {
            "kafka.bootstrap.servers": kafka_bootstrap,
            "subscribe": topic,
            "kafkaConsumer.pollTimeoutMs": "3000",
        },
        streaming=False,
    )
    with pytest.raises(
        KafkaDataLoss,
        match=rf"{topic}-0 now ends at offset 2, before the "
        "planned end 10.*failOnDataLoss=false",
    ):
        list(read_range(strict, TopicPartitionRange(topic, 0, 0, 10), schema))
    lenient = parse_source_options(
        {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "failOnDataLoss": "false"},
        streaming=False,
    )
    rows = [
        r
        for b in read_range(lenient, TopicPartitionRange(topic, 0, 0, 10), schema)
        for r in b.to_pylist()
    ]
    assert [r["value"] for r in rows] == [b"a", b"b"]


def test_limit_offsets_shares_the_limit_by_backlog() -> None:
    start = {"t": {"0": 0, "1": 100}}
    latest = {"t": {"0": 300, "1": 200}}
    assert limit_offsets(start, latest, 1000, {}) == latest
    limited = limit_offsets(start, latest, 100, {})
    assert limited == {"t": {"0": 75, "1": 125}}
    tiny = limit_offsets(start, latest, 1, {})
    assert sum(tiny["t"].values()) - 100 == 1
    # A partition new since `start` begins at its floor (the log start).
    grown = limit_offsets(start, {"t": {"0": 300, "1": 200, "2": 50}}, 90, {("t", 2): 10})
    assert (
        grown["t"]["2"] > 10
        and sum(grown["t"][p] - b for p, b in {"0": 0, "1": 100, "2": 10}.items()) == 90
    )


def test_split_ranges_for_min_partitions() -> None:
    ranges = [TopicPartitionRange("t", 0, 0, 100), TopicPartitionRange("t", 1, 0, 0)]
    assert split_ranges(ranges, None) == ranges[:1]
    pieces = split_ranges(ranges, 4)
    assert len(pieces) == 4
    assert [(p.start, p.end) for p in pieces] == [(0, 25), (25, 50), (50, 75), (75, 100)]


def test_producing_rows_with_keys_partitions_and_headers(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_consume: Callable[..., Any]
) -> None:
    pa = pytest.importorskip("pyarrow")
    topic = kafka_topic(partitions=3)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": ["a", None, "c"],
            "value": [b"1", b"2", None],
            "partition": pa.array([2, 0, 1], pa.int32()),
            "headers": [[{"key": "h", "value": b"v"}], [], None],
        }
    )
    sent = Producing(
        parse_sink_options({"kafka.bootstrap.servers": kafka_bootstrap, "topic": topic})
    ).write_batches([batch])
    assert sent == 3
    records = {r.partition: r for r in kafka_consume(topic, 3, decode_as="bytes")}
    assert records[2].key == b"a" and records[2].value == b"1"
    assert records[2].headers == [("h", b"v")]
    assert records[0].key is None and records[0].value == b"2"
    assert records[1].value is None


def test_producing_without_a_topic_fails_clearly(kafka_bootstrap: str) -> None:
    pa = pytest.importorskip("pyarrow")
    batch = pa.RecordBatch.from_pydict({"value": [b"1"]})
    producing = Producing(parse_sink_options({"kafka.bootstrap.servers": kafka_bootstrap}))
    with pytest.raises(KafkaSourceError, match="set the sink's 'topic' option"):
        producing.write_batches([batch])
