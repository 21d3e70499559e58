"""The timeline report in a real browser: a deliberately failing test's report (a group
whose 4th member never gets a partition, a partition that stalls) opened from disk in
headless Chromium, and a hand-made timeline with every part filled."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from minibroker.timeline_html import render_report

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

FAILING_PIPELINE = """
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def test_billing_keeps_up(kafka_topic, kafka_config, kafka_faults):
    topic = kafka_topic("orders", partitions=3)
    producer = Producer(kafka_config.confluent_producer(**{"client.id": "shop"}))
    # One Produce answer carries an error (the producer retries it).
    kafka_faults.add("Produce", topic=topic, partition=1, error=6, times=1)
    workers = [
        Consumer(kafka_config.confluent_consumer(
            "billing", **{"client.id": f"worker-{n}", "enable.auto.commit": False}
        ))
        for n in range(4)
    ]
    try:
        for worker in workers:
            worker.subscribe([topic])

        def produce(count):
            for partition in range(3):
                for n in range(count):
                    producer.produce(topic, value=b"order %d" % n, partition=partition)
            producer.flush(10)

        def poll_all(seconds, paused=()):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for worker in workers:
                    held = [tp for tp in worker.assignment() if tp.partition in paused]
                    if held:
                        worker.pause(held)
                    if worker.poll(0.05) is not None:
                        try:
                            worker.commit(asynchronous=False)
                        except KafkaException:
                            pass

        # Three partitions, four members: the group settles with one member idle.
        deadline = time.monotonic() + 20
        while sum(len(w.assignment()) for w in workers) < 3 and time.monotonic() < deadline:
            poll_all(0.2)
        produce(5)
        poll_all(1.5)
        # Partition 0 stops moving while the others drain.
        for _ in range(4):
            produce(5)
            poll_all(0.6, paused={0})
        assert False, "billing fell behind on orders-0"
    finally:
        for worker in workers:
            worker.close()
"""


def test_a_failed_test_gets_a_timeline_report(
    pytester: pytest.Pytester, page: Any, screenshot: Any
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_pipeline=FAILING_PIPELINE)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    found = re.findall(r"minibroker: timeline report: (\S+\.html)", result.stdout.str())
    assert len(found) == 1, result.stdout.str()
    report = Path(found[0])
    assert report.parent == pytester.path / "test-artefacts" / "kafka-reports"
    timeline = json.loads(report.with_suffix(".json").read_text())
    assert timeline["title"].endswith("test_pipeline.py::test_billing_keeps_up")

    page.goto(report.as_uri())
    (group,) = [g for g in timeline["groups"] if g["group_id"] == "billing"]
    idle = group["idle_members"]
    assert len(idle) == 1
    member = page.locator(f'[data-testid="member-{idle[0]}"]')
    assert "idle" in (member.get_attribute("class") or "").split()
    assert page.locator('[data-testid^="member-"].idle').count() == 1
    topic = next(p["topic"] for p in timeline["partitions"] if p["topic"].startswith("orders"))
    stalled = page.locator(f'[data-testid="partition-{topic}-0"]')
    assert "stalled" in (stalled.get_attribute("class") or "").split()
    for other in (1, 2):
        moving = page.locator(f'[data-testid="partition-{topic}-{other}"]')
        assert "stalled" not in (moving.get_attribute("class") or "").split()
    screenshot("overview")

    errors = page.locator('tr[data-testid^="request-"].error')
    assert errors.count() >= 1
    produce = page.locator('tr[data-testid^="request-"].error', has_text="Produce").first
    produce.click()
    detail = page.locator('[data-testid="request-detail"]')
    assert "NOT_LEADER_OR_FOLLOWER" in detail.inner_text()
    assert topic in detail.inner_text()  # the decoded request names its topic
    screenshot("request-detail")


def test_the_report_draws_every_part_of_a_timeline(
    page: Any, screenshot: Any, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    report.write_text(render_report(hand_made_timeline()), encoding="utf-8")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())
    assert errors == []
    # A client id holding markup is shown as text, not run.
    assert page.locator("header h1").inner_text() == "tests/test_x.py::test_y[</script>]"
    assert page.locator('[data-testid="member-m4"]').get_attribute("class") == "member idle"
    assert page.locator('[data-testid="member-m1"]').get_attribute("class") == "member"
    assert "stalled" in (page.locator('[data-testid="partition-t-0"]').get_attribute("class") or "")
    assert page.locator('tr[data-testid^="request-"]').count() == 40
    assert page.locator('tr[data-testid^="request-"].error').count() == 1
    page.locator('[data-testid="request-8"]').click()
    assert '"x": 8' in page.locator('[data-testid="request-detail"]').inner_text()
    assert "abort" in page.locator('[data-testid="transactions"]').inner_text()
    assert "NOT_LEADER_OR_FOLLOWER" in page.locator('[data-testid="faults"]').inner_text()
    shares = page.locator('[data-testid="share"] tr.redelivery')
    assert shares.count() == 1
    screenshot("hand-made")


def hand_made_timeline() -> dict[str, Any]:
    t0 = 1_700_000_000_000
    requests = [
        {
            "i": i,
            "at_ms": t0 + i * 100,
            "node": 0,
            "client_id": "<b>c3</b>" if i % 4 == 3 else f"c{i % 4}",
            "api": "Fetch" if i % 2 else "JoinGroup",
            "version": 12,
            "correlation_id": i,
            "errors": ["UNKNOWN_MEMBER_ID"] if i == 7 else [],
            "detail": {"request": {"group_id": "g", "x": i}, "response": {"error_code": 0}},
        }
        for i in range(40)
    ]
    members = [
        {
            "member_id": f"m{n}",
            "client_id": f"c{n - 1}",
            "partitions": [["t", n - 1]] if n < 4 else [],
        }
        for n in range(1, 5)
    ]
    return {
        "version": 1,
        "title": "tests/test_x.py::test_y[</script>]",
        "started_ms": t0,
        "ended_ms": t0 + 4000,
        "complete": True,
        "clients": [
            {
                "client_id": f"c{n}",
                "first_ms": t0 + n,
                "last_ms": t0 + 3900,
                "requests": 10,
                "errors": 0,
            }
            for n in range(4)
        ],
        "requests": requests,
        "groups": [
            {
                "group_id": "g",
                "type": "classic",
                "state": "Stable",
                "generations": [
                    {"at_ms": t0 + 500, "generation": 1, "members": members[:1]},
                    {"at_ms": t0 + 1500, "generation": 2, "protocol": "range", "members": members},
                ],
                "idle_members": ["m4"],
            }
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": p,
                "end_offsets": [[t0 + k * 500, (k + 1) * 10] for k in range(8)],
                "committed": {
                    "g": [[t0 + k * 500, (k + 1) * 10 - (k * 8 if p == 0 else 2)] for k in range(8)]
                },
                "lag": {"g": [[t0 + k * 500, k * 8 if p == 0 else 2] for k in range(8)]},
                "stalled": ["g"] if p == 0 else [],
            }
            for p in range(3)
        ],
        "transactions": [
            {
                "transactional_id": "tx",
                "producer_id": 1000,
                "events": [
                    {"at_ms": t0 + 100, "event": "init"},
                    {"at_ms": t0 + 300, "event": "abort"},
                ],
            }
        ],
        "faults": [
            {
                "at_ms": t0 + 700,
                "rule": "Fetch error=6",
                "api": "Fetch",
                "client_id": "c1",
                "action": "error NOT_LEADER_OR_FOLLOWER",
            }
        ],
        "share": [
            {
                "group_id": "s",
                "topic": "t",
                "partition": 0,
                "deliveries": [
                    {"at_ms": t0 + 900, "offset": 0, "delivery_count": 1, "member_id": "m1"},
                    {
                        "at_ms": t0 + 1900,
                        "offset": 0,
                        "delivery_count": 2,
                        "member_id": "m2",
                        "outcome": "ACCEPT",
                    },
                ],
            }
        ],
    }
