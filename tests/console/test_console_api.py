"""The console's JSON API against an embedded broker: what it shows of topics, messages
(decoded through the Schema Registry too), groups of each type, transactions and fault
rules; writes refused (403) when changes are not allowed; HTTP Basic
auth (401 and a challenge) when the broker has SASL users."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.raw_client import RawClient
from minibroker import Broker
from minibroker.testing.clients import KafkaHelper

SHARE_GROUP_HEARTBEAT = 76


def call(
    url: str,
    path: str,
    body: Any = None,
    *,
    method: str | None = None,
    user: tuple[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": content_type}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(user).encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), json.loads(refused.read() or b"null")


@pytest.fixture(scope="module")
def writable() -> Iterator[Broker]:
    with Broker(console_port=0, console_allow_changes=True) as broker:
        yield broker


@pytest.fixture(scope="module")
def read_only() -> Iterator[Broker]:
    with Broker(console_port=0) as broker:
        broker.create_topic("kept", 1)
        yield broker


def test_topics_show_partitions_offsets_and_configs(writable: Broker) -> None:
    writable.create_topic("shown", 2, configs={"retention.ms": "60000"})
    KafkaHelper(writable.bootstrap_servers).produce("shown", [b"a", b"b"], partition=1)
    status, _, body = call(writable.console_url, "/api/topics")
    assert status == 200
    topic = next(t for t in body["topics"] if t["name"] == "shown")
    assert [(p["partition"], p["end"]) for p in topic["partitions"]] == [(0, 0), (1, 2)]
    assert topic["configs"]["retention.ms"] == {"value": "60000", "default": False}


def test_a_message_produced_through_the_console_is_browsed_with_its_headers(
    writable: Broker,
) -> None:
    writable.create_topic("typed", 1)
    produced = {"topic": "typed", "key": "k1", "value": '{"n": 1}', "headers": {"h": "v"}}
    status, _, answer = call(writable.console_url, "/api/messages", produced)
    assert (status, answer["offset"]) == (201, 0)
    status, _, answer = call(
        writable.console_url, "/api/messages", {"topic": "typed", "value": {"hex": "00ff"}}
    )
    assert status == 201
    status, _, page = call(writable.console_url, "/api/messages?topic=typed&partition=0&offset=0")
    assert status == 200
    first, second = page["messages"]
    assert (first["key"]["text"], first["value"]["json"]) == ("k1", {"n": 1})
    assert first["headers"] == [{"key": "h", "value": first["headers"][0]["value"]}]
    assert first["headers"][0]["value"]["text"] == "v"
    assert (second["key"], second["value"]["hex"], "text" in second["value"]) == (
        None,
        "00ff",
        False,
    )
    status, _, tail = call(writable.console_url, "/api/messages?topic=typed&offset=-1")
    assert [m["offset"] for m in tail["messages"]] == [1]
    status, _, by_time = call(
        writable.console_url, f"/api/messages?topic=typed&time={first['timestamp'] + 10**9}"
    )
    assert (status, by_time["messages"]) == (200, [])


def test_bad_input_gets_4xx(writable: Broker) -> None:
    url = writable.console_url
    assert call(url, "/api/messages?topic=missing")[0] == 404
    assert call(url, "/api/messages?topic=typed&partition=x")[0] == 400
    assert call(url, "/api/topics", {"name": ""})[0] == 400
    assert call(url, "/api/topics", ["not", "an", "object"])[0] == 400
    assert call(url, "/api/faults", {"rule": "Produce:error=NO_SUCH_ERROR"})[0] == 400
    assert call(url, "/api/nothing")[0] == 404
    assert call(url, "/api/groups", {}, method="POST")[0] == 405
    # A form post from another site cannot send JSON's content type.
    assert call(url, "/api/topics", {"name": "csrf"}, content_type="text/plain")[0] == 415


def test_topics_and_fault_rules_are_added_and_removed(writable: Broker) -> None:
    url = writable.console_url
    assert call(url, "/api/topics", {"name": "made", "partitions": 3})[0] == 201
    assert len(writable.end_offsets("made")) == 3
    assert call(url, "/api/topics/made", method="DELETE")[0] == 200
    assert "made" not in writable.topics()
    status, _, rule = call(
        url, "/api/faults", {"rule": "Produce:error=NOT_LEADER_OR_FOLLOWER,times=2"}
    )
    assert status == 201 and rule["action"] == "error=NOT_LEADER_OR_FOLLOWER"
    assert [r.times for r in writable.faults] == [2]
    assert call(url, "/api/faults")[2]["faults"][0]["id"] == rule["id"]
    assert call(url, f"/api/faults/{rule['id']}", method="DELETE")[0] == 200
    assert list(writable.faults) == []


def test_groups_show_members_assignments_and_lag(writable: Broker) -> None:
    writable.create_topic("lagging", 2)
    kafka = KafkaHelper(writable.bootstrap_servers)
    kafka.produce("lagging", [b"x"] * 3, partition=0)
    kafka.produce("lagging", [b"y"] * 5, partition=1)
    committer = Consumer({"bootstrap.servers": writable.bootstrap_servers, "group.id": "lag-group"})
    try:
        offsets = [TopicPartition("lagging", 0, 3), TopicPartition("lagging", 1, 1)]
        committer.commit(offsets=offsets, asynchronous=False)
    finally:
        committer.close()
    status, _, body = call(writable.console_url, "/api/groups")
    assert status == 200
    group = next(g for g in body["groups"] if g["group_id"] == "lag-group")
    lags = {(p["topic"], p["partition"]): p["lag"] for p in group["partitions"]}
    assert lags == {("lagging", 0): 0, ("lagging", 1): 4}


def test_writes_are_refused_when_changes_are_not_allowed(read_only: Broker) -> None:
    url = read_only.console_url
    assert call(url, "/api/topics")[0] == 200
    assert call(url, "/api/overview")[2]["allow_changes"] is False
    for path, body, method in [
        ("/api/topics", {"name": "new"}, None),
        ("/api/topics/kept", None, "DELETE"),
        ("/api/messages", {"topic": "kept", "value": "v"}, None),
        ("/api/faults", {"rule": "Produce:drop"}, None),
    ]:
        assert call(url, path, body, method=method)[0] == 403, path
    assert read_only.topics() == ["kept"] and read_only.end_offsets("kept") == {0: 0}
    assert list(read_only.faults) == []


def test_the_console_of_a_broker_with_users_asks_for_one() -> None:
    with Broker(console_port=0, sasl_users={"alice": "secret"}) as broker:
        url = broker.console_url
        for user in (None, ("alice", "wrong"), ("mallory", "secret")):
            status, headers, body = call(url, "/api/topics", user=user)
            assert status == 401, user
            assert headers["WWW-Authenticate"].startswith("Basic realm=")
            assert body["error_code"] == 401
        assert call(url, "/", user=None)[0] == 401
        status, _, body = call(url, "/api/security", user=("alice", "secret"))
        assert (status, body["enabled"], body["users"]) == (200, True, ["alice"])


def test_a_request_for_another_host_name_is_refused(read_only: Broker) -> None:
    # A page of another site reaching the loopback console through DNS rebinding.
    request = urllib.request.Request(
        read_only.console_url + "/api/topics", headers={"Host": "attacker.example:80"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 421


def test_values_in_confluents_framing_are_decoded_through_the_registry() -> None:
    pytest.importorskip("minibroker.schema_registry.schemas.avro")
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}],
        }
    )
    with Broker(console_port=0, schema_registry=True) as broker:
        broker.create_topic("orders", 1)
        registry = SchemaRegistryClient({"url": broker.schema_registry_url})
        serialize = AvroSerializer(registry, schema)
        framed = serialize(
            {"id": 7, "item": "tea"}, SerializationContext("orders", MessageField.VALUE)
        )
        assert framed is not None
        KafkaHelper(broker.bootstrap_servers).produce("orders", [framed, b"\x00\x00\x00\x03\xe7x"])
        status, _, page = call(broker.console_url, "/api/messages?topic=orders")
        assert status == 200
        decoded, unknown_id = (m["value"] for m in page["messages"])
        assert decoded["schema"]["type"] == "AVRO"
        assert decoded["schema"]["value"] == {"id": 7, "item": "tea"}
        assert "schema" not in unknown_id and unknown_id["hex"] == "00000003e778"


def test_a_consumer_protocol_group_shows_its_idle_member(writable: Broker) -> None:
    writable.create_topic("single", 1)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": writable.bootstrap_servers,
                "group.id": "kip848",
                "group.protocol": "consumer",
            }
        )
        for _ in range(2)
    ]
    try:
        for consumer in consumers:
            consumer.subscribe(["single"])
        deadline = time.monotonic() + 20
        held: dict[str, int] = {}
        while time.monotonic() < deadline:
            for consumer in consumers:
                consumer.poll(0.05)
            assignments = writable.group_assignments("kip848")
            held = {
                member: sum(map(len, topics.values())) for member, topics in assignments.items()
            }
            if len(held) == 2 and sum(held.values()) == 1:
                break
        status, _, body = call(writable.console_url, "/api/groups")
        assert status == 200
        (group,) = (g for g in body["groups"] if g["group_id"] == "kip848")
        assert group["type"] == "consumer"
        shown = {m["member_id"]: m["idle"] for m in group["members"]}
        assert shown == {member: count == 0 for member, count in held.items()}
        assert sorted(shown.values()) == [False, True]
    finally:
        for consumer in consumers:
            consumer.close()


def test_an_open_transaction_is_listed_with_its_partitions(writable: Broker) -> None:
    writable.create_topic("txn-out", 1)
    producer = Producer(
        {"bootstrap.servers": writable.bootstrap_servers, "transactional.id": "console-txn"}
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("txn-out", b"pending")
    producer.flush(10)
    status, _, body = call(writable.console_url, "/api/transactions")
    assert status == 200
    (shown,) = (t for t in body["transactions"] if t["transactional_id"] == "console-txn")
    assert (shown["state"], shown["partitions"]) == ("Ongoing", [["txn-out", 0]])
    producer.abort_transaction(10)


def test_a_share_group_shows_its_members_and_partitions(writable: Broker) -> None:
    writable.create_topic("shared", 2)
    members = [str(uuid.uuid4()), str(uuid.uuid4())]
    with RawClient(writable.bootstrap_servers, client_id="sharer") as client:
        for member in members:
            answer = client.call(
                SHARE_GROUP_HEARTBEAT,
                1,
                group_id="sharing",
                member_id=member,
                member_epoch=0,
                rack_id=None,
                subscribed_topic_names=("shared",),
            )
            assert answer.error_code == 0
    status, _, body = call(writable.console_url, "/api/groups")
    assert status == 200
    (group,) = (g for g in body["groups"] if g["group_id"] == "sharing")
    assert (group["type"], group["state"]) == ("share", "Stable")
    assert {m["member_id"] for m in group["members"]} == set(members)
    assert all(m["client_id"] == "sharer" and not m["idle"] for m in group["members"])
