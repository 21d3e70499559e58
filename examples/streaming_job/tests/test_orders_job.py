"""The always-running orders job tested as it runs in production: fed, drained with
`spark_stream.wait` (which returns once everything fed has gone through, the query
still running), checked, fed again, drained again, stopped."""

from __future__ import annotations

from typing import Any

import orders_job


def test_prices_orders_as_they_arrive(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Any,
    kafka_produce: Any,
    kafka_consume: Any,
) -> None:
    orders = kafka_topic(partitions=2)
    priced = kafka_topic()
    query = orders_job.start(
        spark,
        spark_kafka_source.format,
        spark_kafka_source.options,
        orders,
        priced,
        spark_stream.checkpoint(),
    )
    kafka_produce(
        orders,
        [
            ("o-1", {"order": "o-1", "cents": 1000, "country": "DE"}),
            ("o-2", {"order": "o-2", "cents": 500, "country": "US"}),
            ("junk", "not an order"),
        ],
    )
    spark_stream.wait(query)
    first = {r.key: r.value for r in kafka_consume(priced, None, decode_as="json")}
    assert first == {
        "o-1": {"order": "o-1", "cents": 1000, "tax_cents": 190, "total_cents": 1190},
        "o-2": {"order": "o-2", "cents": 500, "tax_cents": 0, "total_cents": 500},
    }

    # The same query takes the next orders; nothing already priced comes out again.
    kafka_produce(orders, [("o-3", {"order": "o-3", "cents": 200, "country": "FR"})])
    spark_stream.wait(query)
    everything = kafka_consume(priced, None, decode_as="json")
    assert [r.key for r in everything].count("o-1") == 1
    assert len(everything) == 3
    assert {r.key: r.value for r in everything}["o-3"]["total_cents"] == 240
    assert query.isActive
    spark_stream.stop(query)
