"""Option parsing of the "minibroker" Spark source and sink (no JVM needed)."""

from __future__ import annotations

import pytest

from minibroker.testing.spark.options import (
    KafkaOptionError,
    Subscription,
    parse_offsets,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming: bool = True, **options: str) -> object:
    return parse_source_options({**BASE, **options}, streaming=streaming)


def test_subscribe_list_and_defaults() -> None:
    parsed = parse_source_options({**BASE, "subscribe": "a, b,,c"}, streaming=True)
    assert parsed.subscription == Subscription("subscribe", topics=("a", "b", "c"))
    assert parsed.starting is None and parsed.ending == "latest"
    assert parsed.fail_on_data_loss is True and parsed.include_headers is False
    assert parsed.bootstrap_servers == "127.0.0.1:9092"


def test_option_names_are_case_insensitive_like_spark() -> None:
    parsed = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "ev.*", "FAILONDATALOSS": "false"},
        streaming=True,
    )
    assert parsed.subscription.kind == "subscribePattern"
    assert parsed.subscription.matches("events") and not parsed.subscription.matches("xevents")
    assert parsed.fail_on_data_loss is False


def test_assign_json() -> None:
    parsed = parse_source_options({**BASE, "assign": '{"a":[0,2],"b":[1]}'}, streaming=False)
    assert parsed.subscription.assignment == {"a": (0, 2), "b": (1,)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({**BASE}, "exactly one of the options 'subscribe', 'subscribePattern' and 'assign'"),
        ({**BASE, "subscribe": "a", "assign": '{"a":[0]}'}, "got 2 (subscribe, assign)"),
        ({**BASE, "subscribe": " , "}, "names no topics"),
        ({**BASE, "subscribePattern": "(unclosed"}, "not a valid regex"),
        ({**BASE, "assign": "{a:[0]}"}, "option 'assign' is not valid JSON"),
        ({**BASE, "assign": '{"a":"0"}'}, "must map topic names to lists of partition numbers"),
        (
            {**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "set the source option 'startingOffsets' instead",
        ),
        ({**BASE, "subscribe": "a", "kafka.key.deserializer": "x"}, "read as bytes"),
        ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "must be at least 1"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "lots"}, "must be an integer"),
        ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, "for batch queries"),
        ({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "5"}, "not supported"),
        ({**BASE, "subscribe": "a", "startingOffsetsByTimestamp": "{"}, "must be JSON like"),
    ],
)
def test_bad_source_options_say_what_is_wrong(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_source_options(options, streaming=True)


def test_batch_only_rules() -> None:
    with pytest.raises(KafkaOptionError, match="cannot be 'latest' for batch queries"):
        parse_source_options(
            {**BASE, "subscribe": "a", "startingOffsets": "latest"}, streaming=False
        )
    with pytest.raises(KafkaOptionError, match="cannot be 'earliest'"):
        parse_source_options(
            {**BASE, "subscribe": "a", "endingOffsets": "earliest"}, streaming=False
        )
    parsed = parse_source_options(
        {**BASE, "subscribe": "a", "endingOffsets": '{"a":{"0":5,"1":-1}}'}, streaming=False
    )
    assert parsed.ending == {"a": {"0": 5, "1": -1}}


def test_offsets_json_in_the_built_in_form() -> None:
    assert parse_offsets('{"t":{"0":23,"1":-2,"2":-1}}', "startingOffsets") == {
        "t": {"0": 23, "1": -2, "2": -1}
    }
    assert parse_offsets(" Earliest ", "startingOffsets") == "earliest"
    assert parse_offsets("latest", "startingOffsets") == "latest"
    assert parse_offsets(None, "startingOffsets") is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"t":{"0":23', "neither 'earliest', 'latest' nor valid JSON"),
        ("[1,2]", "must be a JSON object like"),
        ('{"t":[0,1]}', "topic 't' must map partition numbers to offsets"),
        ('{"t":{"x":1}}', "t-x -> 1 is not a partition number and an offset"),
        ('{"t":{"0":-3}}', "t-0 -> -3 is not a partition number and an offset"),
        ('{"t":{"0":"5"}}', "t-0 -> '5' is not"),
    ],
)
def test_malformed_offsets(raw: str, message: str) -> None:
    with pytest.raises(KafkaOptionError, match=message):
        parse_offsets(raw, "startingOffsets")


def test_kafka_settings_carry_over_and_java_only_ones_are_translated_or_dropped() -> None:
    parsed = parse_source_options(
        {
            **BASE,
            "subscribe": "a",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="user" password="secret";',
            "kafka.default.api.timeout.ms": "5000",
            "kafka.fetch.min.bytes": "1",
            "kafka.fetch.max.wait.ms": "10",
        },
        streaming=True,
    )
    assert parsed.client == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "user",
        "sasl.password": "secret",
        "fetch.min.bytes": "1",
        "fetch.wait.max.ms": "10",
    }


def test_sink_options() -> None:
    sink = parse_sink_options({**BASE, "topic": "out", "kafka.acks": "all"})
    assert sink.topic == "out" and sink.client == {"acks": "all"}
    # One options dict often serves a query's source and sink: the consumer's settings
    # are no business of the producer's.
    shared = {**BASE, "kafka.fetch.max.wait.ms": "10", "kafka.fetch.min.bytes": "1"}
    assert parse_sink_options(shared).client == {}
    assert parse_sink_options(BASE).topic is None
    with pytest.raises(KafkaOptionError, match="keys and values are written"):
        parse_sink_options({**BASE, "kafka.value.serializer": "x"})
    with pytest.raises(KafkaOptionError, match=r"kafka\.bootstrap\.servers"):
        parse_sink_options({"topic": "out"})
