"""Client quotas enforced: a producer over its byte rate is told to wait
(throttle_time_ms, which confluent-kafka reports through `throttle_cb`) and its
connection is muted meanwhile, and nothing it sent is lost. How closely the rate follows
the quota is measured in bench/quotas.py, side by side with Kafka. The `parity` test runs
against Apache Kafka too."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.raw_client import RawClient, fetch_request, make, metadata_request, produce_request
from minibroker import Broker
from minibroker.protocol.records import build_batch

ALTER, DESCRIBE = 49, 48
RATE = 1024  # bytes per second
RECORDS = 120  # about 14 KB: more than the 10 s a first window counts at RATE


def set_quota(bootstrap: str, entity: dict[str, str | None], key: str, value: float | None) -> None:
    """Set (or, with None, remove) one quota and wait until the broker describes it."""
    with RawClient(bootstrap) as client:
        entry = make(
            ALTER,
            1,
            "EntryData",
            entity=tuple(
                make(ALTER, 1, "EntityData", entity_type=t, entity_name=n)
                for t, n in entity.items()
            ),
            ops=(make(ALTER, 1, "OpData", key=key, value=value or 0.0, remove=value is None),),
        )
        response = client.call(ALTER, 1, entries=(entry,), validate_only=False)
        assert [int(e.error_code) for e in response.entries] == [0]
        components = tuple(
            make(DESCRIBE, 1, "ComponentData", entity_type=t, match_type=0 if n else 1, match=n)
            for t, n in entity.items()
        )
        deadline = time.monotonic() + 10
        while True:
            found = client.call(DESCRIBE, 1, components=components, strict=True).entries
            values = {v.key: v.value for entry in found for v in entry.values}
            if values.get(key) == value:
                return
            assert time.monotonic() < deadline, "the quota never showed"
            time.sleep(0.1)


@pytest.mark.parity
def test_a_producer_over_its_byte_rate_is_throttled_and_loses_nothing(
    kafka_bootstrap: str, kafka_topic: Callable[..., str], kafka_consume: Callable[..., Any]
) -> None:
    topic = kafka_topic()
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    entity: dict[str, str | None] = {"client-id": client_id}
    set_quota(kafka_bootstrap, entity, "producer_byte_rate", RATE)
    throttled: list[float] = []
    failed: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "client.id": client_id,
            "linger.ms": 200,
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        }
    )
    try:
        for index in range(RECORDS):
            producer.produce(
                topic,
                key=str(index),
                value=b"v" * 100,
                on_delivery=lambda err, _msg: err is not None and failed.append(err),
            )
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 10
        while not throttled and time.monotonic() < deadline:
            producer.poll(0.1)
    finally:
        set_quota(kafka_bootstrap, entity, "producer_byte_rate", None)
    assert failed == []
    assert throttled and max(throttled) > 0
    records = kafka_consume(topic, RECORDS, timeout=20)
    assert sorted(int(r.key) for r in records) == list(range(RECORDS))


def test_a_throttled_connection_is_muted_until_the_moved_clock_passes_it(
    tmp_path: Path,
) -> None:
    """The mute counts on the broker's clock: moving it forward ends the mute; another
    connection is served meanwhile. The quota survives a restart of the data directory."""
    with Broker(data_dir=str(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("muted", 1)
        set_quota(bootstrap, {"client-id": "slow"}, "producer_byte_rate", 100)
        batch = build_batch([(None, b"x" * 3000)])
        with RawClient(bootstrap, client_id="slow", timeout=30) as slow:
            answer = slow.request(0, 9, produce_request("muted", batch))
            throttle_ms = answer.throttle_time.total_seconds() * 1000
            assert throttle_ms > 5000  # (3000 B / 10 s - 100) / 100 * 10 s: about 20 s
            started = time.monotonic()
            slow.send(3, 12, metadata_request())
            with RawClient(bootstrap, client_id="other") as other:
                other.request(3, 12, metadata_request())  # not muted
            time.sleep(0.3)
            slow.sock.settimeout(0.2)
            with pytest.raises(TimeoutError):
                slow.recv_frame()  # muted: not read, not answered
            slow.sock.settimeout(30)
            broker.clock.advance(throttle_ms / 1000)
            slow.receive(3, 12)
            assert time.monotonic() - started < throttle_ms / 1000
    with Broker(data_dir=str(tmp_path)) as broker, RawClient(broker.bootstrap_servers) as client:
        component = make(
            DESCRIBE, 1, "ComponentData", entity_type="client-id", match_type=2, match=None
        )
        found = client.call(DESCRIBE, 1, components=(component,), strict=False).entries
        assert [(e.entity[0].entity_name, e.values[0].value) for e in found] == [("slow", 100.0)]


def test_an_old_produce_version_gets_its_throttled_answer_late() -> None:
    """Produce v5 predates client-side throttling: the answer itself waits out the
    throttle time (on the broker's clock)."""
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("old-client", 1)
        set_quota(bootstrap, {"client-id": "old"}, "producer_byte_rate", 100)
        batch = build_batch([(None, b"x" * 3000)], timestamp_ms=int(time.time() * 1000))
        with RawClient(bootstrap, client_id="old", timeout=0.3) as old:
            old.send(0, 5, produce_request("old-client", batch, version=5))
            with pytest.raises(TimeoutError):
                old.recv_frame()
            broker.clock.advance(60)
            old.sock.settimeout(30)
            _, answer = old.receive(0, 5)
            assert answer.throttle_time.total_seconds() > 5
            assert [p.error_code for t in answer.responses for p in t.partition_responses] == [0]


def test_a_consumer_over_its_byte_rate_gets_an_empty_throttled_answer() -> None:
    """A Fetch answer holds at most ten seconds of consumer_byte_rate; the one that goes
    over the rate is answered without records, throttled, and its bytes are not counted:
    once the throttle time has passed (the broker's clock moved), the records come."""
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("read-slowly", 1)
        with RawClient(bootstrap) as writer:
            for _ in range(3):
                writer.request(
                    0,
                    9,
                    produce_request(
                        "read-slowly",
                        build_batch([(None, b"r" * 6000)], timestamp_ms=int(time.time() * 1000)),
                    ),
                )
        set_quota(bootstrap, {"client-id": "reader"}, "consumer_byte_rate", 1000)
        with RawClient(bootstrap, client_id="reader", timeout=30) as reader:

            def fetch(offset: int) -> tuple[int, int]:
                answer = reader.request(1, 11, fetch_request("read-slowly", fetch_offset=offset))
                records = sum(
                    len(partition.records or b"")
                    for topic in answer.responses
                    for partition in topic.partitions
                )
                return int(answer.throttle_time.total_seconds() * 1000), records

            throttle_ms, size = fetch(0)
            assert throttle_ms == 0 and 6000 < size < 10_000  # one batch: 10 s of the rate
            throttle_ms, size = fetch(1)
            assert throttle_ms > 0 and size == 0  # no partition at all, as Kafka answers
            broker.clock.advance(30)  # past the throttle, and past the rate's window
            throttle_ms, size = fetch(1)
            assert throttle_ms == 0 and 6000 < size < 10_000
