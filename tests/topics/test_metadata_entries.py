"""Metadata topic entries at every version, checked sans-IO as a client decodes them.

A client routes produce and fetch requests by the partitions, leaders, replicas and
leader epochs of a known topic's entry, hides internal topics from users by is_internal,
and decides by an entry's error code (and, for a lookup by id, the id echoed back) whether
to retry, create or give up. Entries for topics that cannot be described (unknown names,
unknown ids, illegal names, creations over the per-request limit) are encoded from a
template and spliced in; they must decode exactly as kio's own encoding would.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from harness.raw_client import make
from minibroker.config import BrokerConfig
from tests.sansio import SansIOBroker

METADATA, FIND_COORDINATOR = 3, 10
VERSIONS = list(range(14))
TOPIC_ID_VERSIONS = list(range(10, 14))

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
POLICY_VIOLATION = 44
UNKNOWN_TOPIC_ID = 100
NOT_REQUESTED = -(2**31)
NO_ID = uuid.UUID(int=0)


def metadata(
    broker: SansIOBroker,
    version: int,
    names: list[str] | None,
    *,
    topic_ids: list[uuid.UUID] = (),  # type: ignore[assignment]
    allow_auto_topic_creation: bool = False,
) -> Any:
    topics: tuple[Any, ...] | None = None
    if names is not None:
        topics = tuple(
            make(METADATA, version, "MetadataRequestTopic", name=name, topic_id=NO_ID)
            for name in names
        ) + tuple(
            make(METADATA, version, "MetadataRequestTopic", name=None, topic_id=topic_id)
            for topic_id in topic_ids
        )
    return broker.call(
        METADATA,
        version,
        topics=topics,
        allow_auto_topic_creation=allow_auto_topic_creation,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def entries(response: Any) -> dict[str, dict[str, Any]]:
    """The topic entries, by name, as the fields a client reads."""
    out = {}
    for topic in response.topics:
        entry = {
            "error_code": topic.error_code.value,
            "is_internal": getattr(topic, "is_internal", False),
            "topic_id": getattr(topic, "topic_id", None) or NO_ID,  # all-zero decodes as None
            "authorized_operations": getattr(topic, "topic_authorized_operations", NOT_REQUESTED),
            "partitions": [
                (
                    p.error_code.value,
                    int(p.partition_index),
                    int(p.leader_id),
                    int(getattr(p, "leader_epoch", 0)),
                    tuple(int(n) for n in p.replica_nodes),
                    tuple(int(n) for n in p.isr_nodes),
                    tuple(int(n) for n in getattr(p, "offline_replicas", ())),
                )
                for p in topic.partitions
            ],
        }
        out[topic.name] = entry
    return out


def unknown(code: int, topic_id: uuid.UUID = NO_ID) -> dict[str, Any]:
    return {
        "error_code": code,
        "is_internal": False,
        "topic_id": topic_id,
        "authorized_operations": NOT_REQUESTED,
        "partitions": [],
    }


@pytest.fixture
def broker() -> SansIOBroker:
    broker = SansIOBroker(
        BrokerConfig(offsets_topic_partitions=2, auto_create_topics=False), nodes=2
    )
    broker.cluster.topics.create("orders", 3)
    return broker


def _coordinator(broker: SansIOBroker) -> None:
    """Ask for a group's coordinator: this creates the internal offsets topic."""
    answer = broker.call(FIND_COORDINATOR, 3, key="g", key_type=0)
    assert answer.error_code.value == NONE


@pytest.mark.parametrize("version", VERSIONS)
def test_every_topic_with_its_partitions(broker: SansIOBroker, version: int) -> None:
    _coordinator(broker)
    orders = broker.cluster.topics.get("orders")
    assert orders is not None
    orders.partitions[2].leader_epoch = 4
    response = metadata(broker, version, None if version else [])
    got = entries(response)
    assert set(got) == {"orders", "__consumer_offsets"}
    internal = got["__consumer_offsets"]
    assert internal["is_internal"] is (version >= 1)
    assert sorted(p[2] for p in internal["partitions"]) == [0, 1]
    epochs = [0, 0, 4] if version >= 7 else [0, 0, 0]
    assert got["orders"]["is_internal"] is False
    assert got["orders"]["partitions"] == [
        (NONE, index, leader, epoch, (leader,), (leader,), ())
        for index, leader, epoch in zip([0, 1, 2], [0, 1, 0], epochs, strict=True)
    ]
    if version >= 10:
        assert got["orders"]["topic_id"] == orders.topic_id
    if version >= 8:
        assert got["orders"]["authorized_operations"] == NOT_REQUESTED


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_topic_names(broker: SansIOBroker, version: int) -> None:
    names = ["missing", "m" * 200, "orders", "ünïcode"]
    response = metadata(broker, version, names)
    assert [t.name for t in response.topics] == names
    got = entries(response)
    for name in ("missing", "m" * 200, "ünïcode"):
        assert got[name] == unknown(UNKNOWN_TOPIC_OR_PARTITION)
    assert got["orders"]["error_code"] == NONE
    assert broker.cluster.topics.names() == ["orders"]


@pytest.mark.parametrize("version", TOPIC_ID_VERSIONS)
def test_unknown_topic_ids_are_echoed(broker: SansIOBroker, version: int) -> None:
    orders = broker.cluster.topics.get("orders")
    assert orders is not None
    wanted = [uuid.UUID(int=7), orders.topic_id, uuid.UUID(int=8)]
    response = metadata(broker, version, [], topic_ids=wanted)
    names = [t.name for t in response.topics]
    unknown_name = None if version >= 12 else ""
    assert names == [unknown_name, "orders", unknown_name]
    first, known, last = response.topics
    assert entries(response)["orders"]["topic_id"] == orders.topic_id
    for topic, topic_id in ((first, wanted[0]), (last, wanted[2])):
        assert topic.error_code.value == UNKNOWN_TOPIC_ID
        assert topic.topic_id == topic_id
        assert topic.is_internal is False
        assert topic.partitions == ()
        assert topic.topic_authorized_operations == NOT_REQUESTED
    assert known.error_code.value == NONE


@pytest.mark.parametrize("version", TOPIC_ID_VERSIONS)
def test_a_topic_id_with_an_empty_name_is_looked_up_by_id(
    broker: SansIOBroker, version: int
) -> None:
    """The Java client's describeTopics(TopicCollection.ofTopicIds(...)) sends name ""
    beside the id: a non-zero id decides, as on Kafka."""
    orders = broker.cluster.topics.get("orders")
    assert orders is not None
    asked = [
        make(METADATA, version, "MetadataRequestTopic", name="", topic_id=topic_id)
        for topic_id in (orders.topic_id, uuid.UUID(int=9))
    ]
    response = broker.call(
        METADATA,
        version,
        topics=tuple(asked),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    known, missing = response.topics
    assert (known.name, known.error_code.value, known.topic_id) == ("orders", NONE, orders.topic_id)
    assert len(known.partitions) == 3
    assert (missing.error_code.value, missing.topic_id) == (UNKNOWN_TOPIC_ID, uuid.UUID(int=9))


@pytest.mark.parametrize("version", [4, 9, 12, 13])
def test_auto_creation_refusals(version: int) -> None:
    broker = SansIOBroker(BrokerConfig(num_partitions=2, max_partitions_per_request=4))
    names = ["bad name!", "fine", "over", "other"]
    response = metadata(broker, version, names, allow_auto_topic_creation=True)
    got = entries(response)
    assert [t.name for t in response.topics] == names
    assert got["fine"]["error_code"] == NONE
    assert len(got["fine"]["partitions"]) == 2
    assert got["bad name!"] == unknown(INVALID_TOPIC_EXCEPTION)
    assert got["over"] == unknown(POLICY_VIOLATION)
    assert got["other"] == unknown(POLICY_VIOLATION)
    assert broker.cluster.topics.names() == ["fine"]


def test_a_topic_created_later_is_described(broker: SansIOBroker) -> None:
    """The encoded entries are cached per topic: a new topic gets its own."""
    assert (
        entries(metadata(broker, 12, ["later"]))["later"]["error_code"]
        == UNKNOWN_TOPIC_OR_PARTITION
    )
    broker.cluster.topics.create("later", 1)
    later = entries(metadata(broker, 12, ["later", "orders"]))
    assert len(later["later"]["partitions"]) == 1
    assert len(later["orders"]["partitions"]) == 3


def test_throttle_time_is_zero(broker: SansIOBroker) -> None:
    assert metadata(broker, 13, []).throttle_time == datetime.timedelta(0)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topic_named_twice_is_answered_once(broker: SansIOBroker, version: int) -> None:
    """Kafka reads the requested topics as a set: the Java client 4.x names a topic twice
    in one request and expects one entry."""
    response = metadata(broker, version, ["orders", "missing", "orders", "missing"])
    assert [t.name for t in response.topics] == ["orders", "missing"]
    assert [t.error_code.value for t in response.topics] == [NONE, UNKNOWN_TOPIC_OR_PARTITION]


@pytest.mark.parametrize("version", TOPIC_ID_VERSIONS)
def test_a_topic_named_and_asked_by_id_is_answered_once(broker: SansIOBroker, version: int) -> None:
    orders = broker.cluster.topics.get("orders")
    assert orders is not None
    unknown_id = uuid.UUID(int=7)
    wanted = [orders.topic_id, unknown_id, orders.topic_id, unknown_id]
    response = metadata(broker, version, ["orders"], topic_ids=wanted)
    assert [t.error_code.value for t in response.topics] == [NONE, UNKNOWN_TOPIC_ID]
    assert response.topics[1].topic_id == unknown_id
