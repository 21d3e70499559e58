"""The web console of a running broker, in headless Chromium: a group whose fourth member
holds nothing is marked idle, a partition whose lag grows shows it between two refreshes,
and a message produced from the console's form is read by confluent-kafka."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from minibroker import Broker
from minibroker.testing.clients import KafkaHelper

expect = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need playwright"
).expect


@pytest.fixture(scope="module")
def console_broker() -> Iterator[Broker]:
    with Broker(
        console_port=0, console_allow_changes=True, group_initial_rebalance_delay_ms=0
    ) as broker:
        yield broker


class Member(threading.Thread):
    """One consumer of a group, polling on its own thread until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"member-{uuid.uuid4().hex[:4]}",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 200,
            }
        )
        self.consumer.subscribe([topic])
        self.stop = stop

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.consumer.poll(0.1)
        finally:
            self.consumer.close()


def test_a_fourth_member_of_a_group_on_three_partitions_is_shown_idle(
    console_broker: Broker, page: Any, screenshot: Any
) -> None:
    console_broker.create_topic("three", 3)
    stop = threading.Event()
    members = [Member(console_broker.bootstrap_servers, "crowd", "three", stop) for _ in range(4)]
    for member in members:
        member.start()
    try:
        deadline = time.monotonic() + 30
        held: dict[str, int] = {}
        while time.monotonic() < deadline:
            assignments = console_broker.group_assignments("crowd")
            held = {
                member: sum(map(len, topics.values())) for member, topics in assignments.items()
            }
            stable = console_broker.group_states().get("crowd") == "Stable"
            if stable and len(held) == 4 and sum(held.values()) == 3:
                break
            time.sleep(0.1)
        idle = [member for member, count in held.items() if count == 0]
        busy = [member for member, count in held.items() if count]
        assert len(idle) == 1, held
        page.goto(console_broker.console_url + "/#groups")
        group = page.get_by_test_id("group-crowd")
        expect(group.get_by_test_id(f"member-{idle[0]}")).to_have_class(re.compile(r"\bidle\b"))
        for member_id in busy:
            expect(group.get_by_test_id(f"member-{member_id}")).not_to_have_class(
                re.compile(r"\bidle\b")
            )
        expect(group.get_by_test_id(f"member-{idle[0]}")).to_contain_text("idle")
        screenshot("idle-member")
        # The timeline tab draws the broker's timeline with the test report's renderer.
        page.get_by_role("link", name="Timeline").click()
        drawn = page.get_by_test_id("timeline")
        expect(drawn.get_by_test_id(f"member-{idle[0]}").first).to_have_class(
            re.compile(r"\bidle\b")
        )
        screenshot("timeline")
    finally:
        stop.set()
        for member in members:
            member.join(15)


def test_a_stalled_partitions_lag_grows_between_two_refreshes(page: Any, screenshot: Any) -> None:
    with Broker(console_port=0) as console_broker:  # a timeline of this test alone
        _grow_a_lag(console_broker, page, screenshot)


def _grow_a_lag(console_broker: Broker, page: Any, screenshot: Any) -> None:
    console_broker.create_topic("drain", 2)
    kafka = KafkaHelper(console_broker.bootstrap_servers)
    committer = Consumer(
        {"bootstrap.servers": console_broker.bootstrap_servers, "group.id": "stall"}
    )
    try:
        kafka.produce("drain", [b"a"] * 4, partition=0)
        kafka.produce("drain", [b"b"] * 4, partition=1)
        committer.commit(
            offsets=[TopicPartition("drain", 0, 4), TopicPartition("drain", 1, 1)],
            asynchronous=False,
        )
        page.goto(console_broker.console_url + "/#groups")
        group = page.get_by_test_id("group-stall")
        expect(group.get_by_test_id("lag-drain-1")).to_have_text("3")
        expect(group.get_by_test_id("lag-drain-0")).to_have_text("0")
        screenshot("lag-before")
        # Partition 0 keeps draining; partition 1 gets more and its group does not move.
        kafka.produce("drain", [b"a"] * 2, partition=0)
        # The timeline judges a partition stalled when its lag grew in the last third of
        # what was recorded: the growth comes last, after a quiet stretch.
        time.sleep(2)
        kafka.produce("drain", [b"b"] * 5, partition=1)
        committer.commit(offsets=[TopicPartition("drain", 0, 6)], asynchronous=False)
        kafka.produce("drain", [b"b"], partition=1)
        page.get_by_test_id("refresh").click()
        expect(group.get_by_test_id("lag-drain-1")).to_have_text("9")
        expect(group.get_by_test_id("lag-drain-0")).to_have_text("0")
        # The timeline (recorded since the console started) names it stalled as well.
        stalled = re.compile(r"\bstalled\b")
        expect(group.get_by_test_id("partition-drain-1")).to_have_class(stalled)
        expect(group.get_by_test_id("partition-drain-0")).not_to_have_class(stalled)
        screenshot("lag-after")
    finally:
        committer.close()
        kafka.close()


def test_a_message_produced_from_the_console_is_read_by_confluent_kafka(
    console_broker: Broker, page: Any, screenshot: Any
) -> None:
    console_broker.create_topic("from-console", 1)
    page.goto(console_broker.console_url + "/#messages?topic=from-console&partition=0")
    form = page.get_by_test_id("produce")
    form.get_by_test_id("produce-key").fill("greeting")
    form.get_by_test_id("produce-value").fill('{"hello": "kafka"}')
    form.get_by_test_id("produce-headers").fill("source=console")
    form.get_by_test_id("produce-submit").click()
    expect(page.get_by_test_id("status")).to_contain_text("produced at offset 0")
    expect(page.get_by_test_id("message-0")).to_contain_text("hello")
    screenshot("produced")
    consumer = Consumer(
        {
            "bootstrap.servers": console_broker.bootstrap_servers,
            "group.id": "reader",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["from-console"])
        deadline = time.monotonic() + 20
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert (message.key(), message.value()) == (b"greeting", b'{"hello": "kafka"}')
        assert message.headers() == [("source", b"console")]
    finally:
        consumer.close()
