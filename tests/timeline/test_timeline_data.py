"""The timeline dict (minibroker/timeline.py) built from what a recording broker saw of
real clients: group generations and idle members (classic and KIP-848), a stalled
partition, transactions, fault rules that acted, errors by name, the detail bound on a
long recording, and the contract's keys in JSON."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from minibroker import Broker
from minibroker.protocol import messages
from minibroker.timeline import MAX_DETAIL_BYTES, build_timeline, stalled_groups

TOP_KEYS = {
    "version",
    "title",
    "started_ms",
    "ended_ms",
    "complete",
    "clients",
    "requests",
    "groups",
    "partitions",
    "transactions",
    "faults",
    "share",
}
REQUEST_KEYS = {"i", "at_ms", "node", "client_id", "api", "version", "correlation_id", "errors"}
GROUP_KEYS = {"group_id", "type", "state", "generations", "idle_members"}
PARTITION_KEYS = {"topic", "partition", "end_offsets", "committed", "lag", "stalled"}


def checked(timeline: dict[str, Any]) -> dict[str, Any]:
    """The timeline after a trip through JSON, its keys those of the contract."""
    again: dict[str, Any] = json.loads(json.dumps(timeline))
    assert set(again) >= TOP_KEYS and again["version"] == 1
    assert again["problems"] == []  # every request's part was read
    for row in again["requests"]:
        assert REQUEST_KEYS | {"detail"} <= set(row)
    for client in again["clients"]:
        assert {"client_id", "first_ms", "last_ms", "requests", "errors"} <= set(client)
    for group in again["groups"]:
        assert set(group) >= GROUP_KEYS
        for generation in group["generations"]:
            assert {"at_ms", "generation", "members"} <= set(generation)
            for member in generation["members"]:
                assert {"member_id", "client_id", "partitions"} <= set(member)
    for partition in again["partitions"]:
        assert set(partition) >= PARTITION_KEYS
    for transaction in again["transactions"]:
        assert {"transactional_id", "producer_id", "events"} <= set(transaction)
    for fault in again["faults"]:
        assert {"at_ms", "rule", "api", "client_id", "action"} <= set(fault)
    return again


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(record_requests=True) as running:
        yield running


def poll_until(consumers: list[Consumer], done: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the group did not settle"
        for consumer in consumers:
            consumer.poll(0.02)


def produce(broker: Broker, topic: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "writer"})
    for i in range(per_partition * partitions):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(10) == 0


def four_members_on_three_partitions(broker: Broker, protocol: str) -> dict[str, Any]:
    broker.create_topic("orders", 3)
    produce(broker, "orders", 2, 3)
    consumers = []
    for n in range(4):
        settings = {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "billing",
            "client.id": f"reader-{n}",
            "auto.offset.reset": "earliest",
            "group.protocol": protocol,
        }
        consumer = Consumer(settings)
        consumer.subscribe(["orders"])
        consumers.append(consumer)
    try:

        def settled() -> bool:
            held = broker.group_assignments("billing")
            return (
                len(held) == 4
                and sorted(p for parts in held.values() for p in parts.get("orders", []))
                == [0, 1, 2]
                and broker.group_states().get("billing") == "Stable"
                and sum(bool(c.assignment()) for c in consumers) == 3
            )

        poll_until(consumers, settled)
        timeline = checked(broker.timeline("four members"))
    finally:
        for consumer in consumers:
            consumer.close()
    (group,) = [g for g in timeline["groups"] if g["group_id"] == "billing"]
    last = group["generations"][-1]
    assert len(last["members"]) == 4
    assert sorted(m["client_id"] for m in last["members"]) == [f"reader-{n}" for n in range(4)]
    held = sorted(tuple(p) for m in last["members"] for p in m["partitions"])
    assert held == [("orders", 0), ("orders", 1), ("orders", 2)]
    (idle,) = [m for m in last["members"] if not m["partitions"]]
    assert group["idle_members"] == [idle["member_id"]]
    return group


def test_a_classic_groups_fourth_member_is_idle(broker: Broker) -> None:
    group = four_members_on_three_partitions(broker, "classic")
    timeline = checked(broker.timeline())
    assert group["type"] == "classic" and group["state"] == "Stable"
    assert group["generations"][-1]["protocol"] in ("range", "roundrobin", "cooperative-sticky")
    # the generation numbers rise as members join
    numbers = [g["generation"] for g in group["generations"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    # a first JoinGroup without a member id is answered MEMBER_ID_REQUIRED, by name
    joins = [r for r in timeline["requests"] if r["api"] == "JoinGroup"]
    assert ["MEMBER_ID_REQUIRED"] in [r["errors"] for r in joins]


def test_a_consumer_protocol_groups_fourth_member_is_idle(broker: Broker) -> None:
    group = four_members_on_three_partitions(broker, "consumer")
    assert group["type"] == "consumer"
    epochs = [g["generation"] for g in group["generations"]]
    assert epochs == sorted(epochs) and epochs[-1] > 0


def test_a_partition_whose_consumer_is_paused_stalls_while_the_others_drain(
    broker: Broker,
) -> None:
    broker.create_topic("events", 3)
    produce(broker, "events", 3, 3)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "loader",
            "client.id": "loader-1",
            "enable.auto.commit": False,
        }
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "client.id": "feeder", "linger.ms": 0}
    )
    try:
        consumer.assign([TopicPartition("events", p, 0) for p in range(3)])
        read = 0
        deadline = time.monotonic() + 20
        while read < 9:
            assert time.monotonic() < deadline
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)  # everything so far: lag 0 on all three
        consumer.pause([TopicPartition("events", 2)])
        for round_ in range(12):
            for partition in range(3):
                producer.produce("events", value=b"r%d" % round_, partition=partition)
            producer.flush(10)
            wanted = 9 + 2 * (round_ + 1)
            while read < wanted:
                assert time.monotonic() < deadline
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    assert message.partition() != 2
                    read += 1
            consumer.commit(asynchronous=False)
            time.sleep(0.05)
        timeline = checked(broker.timeline("stall"))
    finally:
        consumer.close()
    by_partition = {p["partition"]: p for p in timeline["partitions"] if p["topic"] == "events"}
    assert by_partition[2]["stalled"] == ["loader"]
    assert by_partition[0]["stalled"] == [] and by_partition[1]["stalled"] == []
    lag_2 = [lag for _, lag in by_partition[2]["lag"]["loader"]]
    assert lag_2[0] == 0 and lag_2[-1] == 12 and lag_2 == sorted(lag_2)
    assert by_partition[0]["lag"]["loader"][-1][1] == 0
    assert by_partition[2]["end_offsets"][-1][1] == 15
    assert by_partition[2]["committed"]["loader"][-1][1] == 3


def test_a_committed_and_an_aborted_transaction(broker: Broker) -> None:
    broker.create_topic("ledger", 1)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "banker",
            "transactional.id": "ledger-writer",
        }
    )
    group = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "settle"})
    try:
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("ledger", value=b"kept", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition("ledger", 0, 7)], group.consumer_group_metadata(), 10
        )
        producer.commit_transaction(10)
        producer.begin_transaction()
        producer.produce("ledger", value=b"dropped", partition=0)
        assert producer.flush(10) == 0  # sent, so the abort is the broker's to do
        producer.abort_transaction(10)
        timeline = checked(broker.timeline())
    finally:
        group.close()
    (transaction,) = [
        t for t in timeline["transactions"] if t["transactional_id"] == "ledger-writer"
    ]
    events = [e["event"] for e in transaction["events"]]
    assert events[0] == "init" and isinstance(transaction["producer_id"], int)
    assert events.index("add_partitions") < events.index("commit") < events.index("abort")
    assert "add_offsets" in events and events.count("add_partitions") == 2
    added = next(e for e in transaction["events"] if e["event"] == "add_partitions")
    assert added["detail"]["partitions"] == [["ledger", 0]]
    # the offset sent with the committed transaction counts from its commit on
    (ledger,) = [p for p in timeline["partitions"] if p["topic"] == "ledger"]
    commit_at = next(e["at_ms"] for e in transaction["events"] if e["event"] == "commit")
    assert ledger["committed"]["settle"][0] == [commit_at, 7]


def test_fault_rules_that_acted_and_errors_by_name(broker: Broker) -> None:
    broker.create_topic("flaky", 1)
    not_leader = broker.faults.add("Produce", error=6, times=2)  # NOT_LEADER_OR_FOLLOWER
    broker.faults.add("Produce", client_id="nobody", close=True)  # matches no request
    produce(broker, "flaky", 3, 1)
    assert not_leader.acted == 2
    timeline = checked(broker.timeline())
    assert len(timeline["faults"]) == 2
    for fault in timeline["faults"]:
        assert fault["api"] == "Produce" and fault["client_id"] == "writer"
        assert fault["action"] == "error=NOT_LEADER_OR_FOLLOWER"
        assert fault["rule"] == "api=Produce,error=NOT_LEADER_OR_FOLLOWER,times=2"
    failed = [r for r in timeline["requests"] if r["errors"]]
    assert [r["errors"] for r in failed if r["api"] == "Produce"] == [
        ["NOT_LEADER_OR_FOLLOWER"],
        ["NOT_LEADER_OR_FOLLOWER"],
    ]
    # every errored request is shown decoded; the client counts its errors
    assert all(r["detail"] is not None for r in failed)
    produce_detail = next(r for r in failed if r["api"] == "Produce")["detail"]
    assert produce_detail["request"]["topic_data"][0]["name"] == "flaky"
    (writer,) = [c for c in timeline["clients"] if c["client_id"] == "writer"]
    assert writer["errors"] >= 2
    (flaky,) = [p for p in timeline["partitions"] if p["topic"] == "flaky"]
    assert flaky["end_offsets"][-1][1] == 3


def test_a_closed_connection_shows_only_in_faults(broker: Broker) -> None:
    broker.create_topic("closing", 1)
    broker.faults.add("Metadata", close=True, times=1)
    produce(broker, "closing", 1, 1)
    timeline = checked(broker.timeline())
    (fault,) = timeline["faults"]
    assert fault["api"] == "Metadata" and fault["action"] == "close"
    # the connection it closed, and the one the client opened again, by client id
    (writer,) = [c for c in timeline["clients"] if c["client_id"] == "writer"]
    connections = writer["connections"]
    assert len(connections) >= 2 and writer["address"].startswith("127.0.0.1:")
    closed = [c for c in connections if c["closed_ms"] is not None]
    assert closed and closed[0]["opened_ms"] <= fault["at_ms"] <= closed[0]["closed_ms"]
    assert {c["client_id"] for c in timeline["connections"]} >= {"writer"}


def test_a_consumers_errors_are_named(broker: Broker) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "lost",
            "client.id": "asker",
            "topic.metadata.refresh.interval.ms": 100,
        }
    )
    try:
        consumer.subscribe(["no-such-topic"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            error = None if message is None else message.error()
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                break
        timeline = checked(broker.timeline())
    finally:
        consumer.close()
    named = {e for r in timeline["requests"] if r["client_id"] == "asker" for e in r["errors"]}
    assert "UNKNOWN_TOPIC_OR_PARTITION" in named


def metadata_requests(broker: Broker, count: int, unknown_every: int) -> None:
    """`count` Metadata requests on one connection, pipelined; every `unknown_every`th
    asks for a topic that does not exist."""
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    frames = []
    for i in range(count):
        name = "missing" if i % unknown_every == 0 else "present"
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        header = messages.RequestHeader(
            api_key=3, api_version=12, correlation_id=i, client_id="hammer"
        )
        frames.append(messages.encode_request(header, request))
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(b"".join(frames))
        answered, buffer = 0, b""
        while answered < count:
            chunk = connection.recv(1 << 20)
            assert chunk, "the broker closed the connection"
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
                buffer = buffer[4 + int.from_bytes(buffer[:4], "big") :]
                answered += 1


def test_the_detail_bound_holds_on_ten_thousand_requests(broker: Broker) -> None:
    broker.create_topic("present", 1)
    metadata_requests(broker, 10_000, unknown_every=5)
    timeline = checked(broker.timeline())
    rows = [r for r in timeline["requests"] if r["client_id"] == "hammer"]
    assert len(rows) == 10_000 and timeline["complete"]
    details = timeline["details"]
    shown = [r for r in timeline["requests"] if r["detail"] is not None]
    assert len(shown) == details["shown"] == details["max_details"] == 1000
    errored_shown = [r for r in shown if r["errors"]]
    assert len([r for r in rows if r["errors"]]) == 2000
    # the first errored ones, then the newest of all
    assert len(errored_shown) >= details["errored_first"] == 250
    newest = timeline["requests"][-750:]
    assert all(r["detail"] is not None for r in newest)
    for row in shown:
        assert len(json.dumps(row["detail"])) <= MAX_DETAIL_BYTES + 200
    assert {e for r in rows for e in r["errors"]} == {"UNKNOWN_TOPIC_OR_PARTITION"}
    size = len(json.dumps(timeline))
    assert size < 4 * 1024 * 1024, size
    fewer = build_timeline(broker.requests(), max_details=10)
    assert sum(r["detail"] is not None for r in fewer["requests"]) == 10


def test_a_recording_that_dropped_requests_is_not_complete() -> None:
    with Broker(record_requests=True, record_requests_max_bytes=256 * 1024) as broker:
        broker.create_topic("present", 1)
        metadata_requests(broker, 2000, unknown_every=7)
        timeline = checked(broker.timeline())
    assert timeline["complete"] is False and timeline["dropped"] > 0
    assert 0 < len(timeline["requests"]) < 2000


def test_without_recording_the_timeline_says_what_to_turn_on() -> None:
    with Broker() as broker, pytest.raises(RuntimeError, match="record_requests"):
        broker.timeline()


def test_share_group_deliveries_and_redeliveries(broker: Broker) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    broker.create_topic("jobs", 1)
    produce(broker, "jobs", 3, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=[earliest])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "workers",
            "client.id": "worker-1",
            "share.acknowledgement.mode": "explicit",
        }
    )
    try:
        consumer.subscribe(["jobs"])
        seen: dict[int, list[int]] = {}
        deadline = time.monotonic() + 20
        while sum(len(counts) for counts in seen.values()) < 6:
            assert time.monotonic() < deadline, seen
            for message in consumer.poll(0.2):
                assert message.error() is None
                offset = message.offset()
                seen.setdefault(offset, []).append(message.delivery_count())
                first = len(seen[offset]) == 1
                kind = AcknowledgeType.RELEASE if first else AcknowledgeType.ACCEPT
                consumer.acknowledge_offset("jobs", 0, offset, kind)
            consumer.commit_sync(10.0)
        timeline = checked(broker.timeline())
    finally:
        consumer.close()
    assert seen == {0: [1, 2], 1: [1, 2], 2: [1, 2]}
    (share,) = timeline["share"]
    assert (share["group_id"], share["topic"], share["partition"]) == ("workers", "jobs", 0)
    shown = sorted(
        (d["offset"], d["delivery_count"], d.get("outcome")) for d in share["deliveries"]
    )
    assert shown == [(o, n, "release" if n == 1 else "accept") for o in range(3) for n in (1, 2)]
    assert shown and all(d["member_id"] for d in share["deliveries"])
    (group,) = [g for g in timeline["groups"] if g["group_id"] == "workers"]
    assert group["type"] == "share"
    assert group["generations"][-1]["members"][0]["partitions"] == [["jobs", 0]]
    assert group["idle_members"] == []


def test_the_stalled_rule_judges_only_what_it_can() -> None:
    key_a, key_b = ("t", 0), ("t", 1)
    drained = [[0, 5], [700, 0]]

    def stalled(lag: list[list[int]]) -> dict[tuple[str, int], list[str]]:
        return stalled_groups({key_a: {"g": lag}, key_b: {"g": drained}}, 0, 900)

    assert stalled([[0, 0], [800, 4]]) == {key_a: ["g"]}  # grew in the last third
    assert stalled([[0, 4], [800, 4]]) == {}  # did not grow
    assert stalled([[0, 6], [800, 4]]) == {}  # shrank
    assert stalled([[650, 4]]) == {}  # first committed in the last third: not judged
    assert stalled([[0, 0], [800, 4], [850, 0]]) == {}  # caught up by the end
    # no other partition of the group drained: nothing stands out
    alone = {key_a: {"g": [[0, 0], [800, 4]]}, key_b: {"g": [[0, 1], [800, 3]]}}
    assert stalled_groups(alone, 0, 900) == {}
