"""DescribeTopicPartitions, DescribeLogDirs and DescribeProducers over the wire.

Topics are made on a real broker, written to through Produce (plain and idempotent
batches built by hand, so their sizes, sequences and timestamps are known), and then
described through a raw client at every version served, checking every field against
what was created and sent, as Kafka 3.9 answers:
- DescribeTopicPartitions pages through topics in name order, at most
  response_partition_limit partitions (clamped to 1-2000) a page, the cursor naming the
  first topic and partition of the next page;
- DescribeLogDirs reports one log dir per broker with the bytes each partition holds;
- DescribeProducers reports each idempotent producer's epoch, last sequence and last
  timestamp per partition.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.raw_client import RawClient, delete_records_request, make, produce_batch
from minibroker import Broker
from minibroker.cluster import host_port
from minibroker.protocol import records
from minibroker.testing.plugin import ClusterFactory, TopicFactory, unique_topic_name
from tests.produce_fetch.test_produce_idempotence import NOW_MS, Producer, batch, init_producer
from tests.produce_fetch.test_produce_idempotence import produce as produce_idempotent

METADATA, DELETE_RECORDS, DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS = 3, 21, 35, 61
DESCRIBE_TOPIC_PARTITIONS = 75
NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 3, 6
INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 17, 42
# Every topic operation (READ ... ALTER_CONFIGS, bits 3-8, 10, 11): what Kafka fills in
# without an authorizer (DescribeTopicPartitions has no switch for them).
ALL_TOPIC_OPERATIONS = 3576
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."

DTP_VERSIONS = [0]
LOG_DIRS_VERSIONS = [0, 1, 2, 3, 4]
PRODUCERS_VERSIONS = [0]


def node_address(cluster: Any, node_id: int) -> str:
    (node,) = [n for n in cluster.nodes if n.node_id == node_id]
    return host_port(node.advertised_host, node.port)


# --- DescribeTopicPartitions ---------------------------------------------------------


def describe_partitions(
    client: RawClient,
    version: int,
    names: list[str],
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Any:
    return client.call(
        DESCRIBE_TOPIC_PARTITIONS,
        version,
        topics=tuple(
            make(DESCRIBE_TOPIC_PARTITIONS, version, "TopicRequest", name=n) for n in names
        ),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else make(
            DESCRIBE_TOPIC_PARTITIONS,
            version,
            "Cursor",
            topic_name=cursor[0],
            partition_index=cursor[1],
        ),
    )


def page(response: Any) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    """The (topic, partition) pairs a response describes, and its next cursor."""
    pairs = [(t.name, int(p.partition_index)) for t in response.topics for p in t.partitions]
    cursor = response.next_cursor
    return pairs, None if cursor is None else (cursor.topic_name, int(cursor.partition_index))


def topic_ids(client: RawClient) -> dict[str, uuid.UUID]:
    response = client.call(
        METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {t.name: t.topic_id for t in response.topics}


def three_topics(kafka_topic: TopicFactory) -> list[tuple[str, int]]:
    """Topics "<prefix>-a" (3 partitions), "-b" (1) and "-c" (4): (name, partitions)."""
    prefix = unique_topic_name("dtp")
    made = [(f"{prefix}-a", 3), (f"{prefix}-b", 1), (f"{prefix}-c", 4)]
    for name, count in made:
        kafka_topic(name=name, partitions=count)
    return made


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_topic_partitions_are_paged_by_the_limit_and_cursor_across_topics(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """With a limit of 2, a client following next_cursor sees every partition of the
    named topics exactly once, in (name, index) order; the cursor names the first
    partition left out, or the next topic at 0 when a page ends with a topic."""
    (a, _), (b, _), (c, _) = three_topics(kafka_topic)
    named = [c, a, b, a]  # any order, repeats: Kafka sorts a set of names
    with RawClient(kafka_broker.bootstrap_servers) as client:
        pages = []
        cursor = None
        while True:
            pairs, cursor = page(describe_partitions(client, version, named, 2, cursor))
            pages.append((pairs, cursor))
            if cursor is None:
                break
            assert len(pages) < 10
    assert pages == [
        ([(a, 0), (a, 1)], (a, 2)),
        ([(a, 2), (b, 0)], (c, 0)),
        ([(c, 0), (c, 1)], (c, 2)),
        ([(c, 2), (c, 3)], None),
    ]


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_topic_partitions_describe_leaders_replicas_and_ids(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Each topic has Metadata's id, each partition the broker as leader, only replica
    and only in-sync replica, and empty ELR, last known ELR and offline replicas."""
    made = three_topics(kafka_topic)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        response = describe_partitions(client, version, [name for name, _ in made])
        ids = topic_ids(client)
    assert response.next_cursor is None
    assert [(t.name, len(t.partitions)) for t in response.topics] == made
    for topic in response.topics:
        assert topic.error_code.value == NONE
        assert topic.topic_id == ids[topic.name]
        assert topic.topic_id not in (None, ZERO_UUID)
        assert topic.is_internal is False
        assert topic.topic_authorized_operations == ALL_TOPIC_OPERATIONS
        for index, partition in enumerate(topic.partitions):
            assert partition.error_code.value == NONE
            assert partition.partition_index == index
            assert partition.leader_id == kafka_broker.node_id
            assert partition.leader_epoch == 0
            assert partition.replica_nodes == (kafka_broker.node_id,)
            assert partition.isr_nodes == (kafka_broker.node_id,)
            assert partition.eligible_leader_replicas == ()
            assert partition.last_known_elr == ()
            assert partition.offline_replicas == ()


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_no_topic_named_describes_every_topic_from_the_cursor(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """An empty topic list asks for every topic of the cluster (those Metadata lists),
    in name order; a cursor starts at its topic and partition and skips the topics
    before it; paging works the same."""
    (a, _), (b, _), (c, _) = three_topics(kafka_topic)
    other = kafka_topic(name="aaa-" + unique_topic_name(), partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        everything = describe_partitions(client, version, [])
        known = sorted(topic_ids(client))
        from_cursor = describe_partitions(client, version, [], cursor=(a, 1))
        first, cursor = page(describe_partitions(client, version, [], 3, (a, 1)))
        second, end = page(describe_partitions(client, version, [], 3, cursor))
    assert [t.name for t in everything.topics] == known
    assert known[0] == other and {a, b, c} <= set(known)
    assert everything.next_cursor is None
    assert page(from_cursor)[0] == [(a, 1), (a, 2), (b, 0)] + [(c, i) for i in range(4)]
    assert (first, cursor) == ([(a, 1), (a, 2), (b, 0)], (c, 0))
    assert (second, end) == ([(c, i) for i in range(3)], (c, 3))


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_unknown_topics_are_answered_with_an_error_and_use_none_of_the_limit(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """An unknown topic is UNKNOWN_TOPIC_OR_PARTITION (an illegal name
    INVALID_TOPIC_EXCEPTION) with no partitions and a zero id, in its place in name
    order, and takes nothing from the limit; when the limit runs out before it, the
    cursor points at it."""
    (a, _), (b, _), _ = three_topics(kafka_topic)
    missing = a + "-missing"  # sorts between a and b
    illegal = "zz illegal!"
    with RawClient(kafka_broker.bootstrap_servers) as client:
        response = describe_partitions(client, version, [b, illegal, missing, a], 5)
        stopped = describe_partitions(client, version, [missing, a], 3)
        resumed = describe_partitions(client, version, [missing, a], 3, (missing, 0))
    entries = [(t.name, t.error_code.value, len(t.partitions)) for t in response.topics]
    assert entries == [
        (a, NONE, 3),
        (missing, UNKNOWN_TOPIC_OR_PARTITION, 0),
        (b, NONE, 1),
        (illegal, INVALID_TOPIC_EXCEPTION, 0),
    ]
    assert response.next_cursor is None
    for topic in response.topics[1], response.topics[3]:
        assert topic.topic_id is None  # kio reads the zero uuid as None
        assert topic.is_internal is False
    assert page(stopped) == ([(a, 0), (a, 1), (a, 2)], (missing, 0))
    assert [t.name for t in stopped.topics] == [a]
    assert [(t.name, t.error_code.value) for t in resumed.topics] == [
        (missing, UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert resumed.next_cursor is None


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_a_cursor_kafka_refuses_is_invalid_request_for_every_topic_named(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """A negative cursor partition, or a cursor topic that is not named, makes the whole
    request INVALID_REQUEST: each named topic with that error and nothing else. A cursor
    past the end of its topic is no error: the topic is answered without partitions."""
    (a, _), (b, _), _ = three_topics(kafka_topic)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        negative = describe_partitions(client, version, [a, b], cursor=(a, -1))
        not_named = describe_partitions(client, version, [b, a], cursor=(a + "x", 0))
        past_end = describe_partitions(client, version, [a, b], cursor=(a, 7))
    for response, names in ((negative, [a, b]), (not_named, [b, a])):
        assert [(t.name, t.error_code.value) for t in response.topics] == [
            (name, INVALID_REQUEST) for name in names
        ]
        assert all(t.partitions == () and t.topic_id is None for t in response.topics)
        assert response.next_cursor is None
    assert [(t.name, t.error_code.value) for t in past_end.topics] == [(a, NONE), (b, NONE)]
    assert page(past_end) == ([(b, 0)], None)


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_the_partition_limit_is_clamped_to_one_and_two_thousand(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Kafka answers at least one partition a page (a limit of 0 or below counts as 1)
    and at most max.request.partition.size.limit (2000) whatever the client asks."""
    big = kafka_topic(partitions=2001)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        zero = page(describe_partitions(client, version, [big], 0))
        negative = page(describe_partitions(client, version, [big], -5, (big, 7)))
        huge = page(describe_partitions(client, version, [big], 1_000_000))
        rest = page(describe_partitions(client, version, [big], 1_000_000, huge[1]))
    assert zero == ([(big, 0)], (big, 1))
    assert negative == ([(big, 7)], (big, 8))
    assert huge == ([(big, i) for i in range(2000)], (big, 2000))
    assert rest == ([(big, 2000)], None)


# --- DescribeLogDirs -----------------------------------------------------------------


def describe_log_dirs(
    client: RawClient, version: int, wanted: list[tuple[str, list[int]]] | None
) -> Any:
    topics = None
    if wanted is not None:
        topics = tuple(
            make(DESCRIBE_LOG_DIRS, version, "DescribableLogDirTopic", topic=t, partitions=tuple(p))
            for t, p in wanted
        )
    return client.call(DESCRIBE_LOG_DIRS, version, topics=topics)


def sizes(response: Any) -> dict[str, dict[int, int]]:
    """topic -> partition -> size of the single log dir, checking the other fields."""
    (result,) = response.results
    assert result.error_code.value == NONE
    found: dict[str, dict[int, int]] = {}
    for topic in result.topics:
        assert topic.name not in found
        found[topic.name] = {}
        for partition in topic.partitions:
            assert partition.offset_lag == 0
            assert partition.is_future_key is False
            found[topic.name][int(partition.partition_index)] = int(partition.partition_size)
    return found


def plain_batch(count: int, size: int, timestamp_ms: int = NOW_MS) -> bytes:
    return records.build_batch([(None, b"v" * size)] * count, timestamp_ms=timestamp_ms)


@pytest.mark.parametrize("version", LOG_DIRS_VERSIONS)
def test_log_dirs_report_the_bytes_each_partition_holds(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """A null topic list describes every partition: each size is the sum of the batches
    produced to it (0 for an empty one), in the one log dir of the broker, and v4 reports
    the volume sizes as unknown (-1)."""
    topic, empty = kafka_topic(partitions=2), kafka_topic(partitions=1)
    sent = {0: [plain_batch(3, 10), plain_batch(1, 500)], 1: [plain_batch(7, 33)]}
    with RawClient(kafka_broker.bootstrap_servers) as client:
        for partition, batches in sent.items():
            for data in batches:
                produce_batch(client.request, topic, partition, data)
        response = describe_log_dirs(client, version, None)
    assert len({len(b) for batches in sent.values() for b in batches}) == 3
    found = sizes(response)
    assert found[topic] == {p: sum(map(len, batches)) for p, batches in sent.items()}
    assert found[empty] == {0: 0}
    assert set(found) == {topic, empty}
    (result,) = response.results
    assert result.log_dir == f"/minibroker/{kafka_broker.node_id}"
    if version >= 3:
        assert response.error_code.value == NONE
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)


@pytest.mark.parametrize("version", LOG_DIRS_VERSIONS)
def test_log_dirs_describe_only_the_partitions_asked_for(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Only the partitions named are described; unknown topics and partitions, and
    topics with no partition asked for, are absent; an empty list describes nothing."""
    topic, other = kafka_topic(partitions=3), kafka_topic(partitions=1)
    data = plain_batch(2, 77)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce_batch(client.request, topic, 1, data)
        produce_batch(client.request, other, 0, data)
        asked = [(topic, [1, 9]), ("no-such-topic", [0]), (other, []), (topic, [2, 1])]
        filtered = describe_log_dirs(client, version, asked)
        nothing = describe_log_dirs(client, version, [])
    assert sizes(filtered) == {topic: {1: len(data), 2: 0}}
    assert sizes(nothing) == {}


@pytest.mark.parametrize("version", [0, 4])
def test_log_dirs_count_what_delete_records_left(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Batches DeleteRecords dropped no longer count in the partition size."""
    topic = kafka_topic(partitions=1)
    first, second = plain_batch(2, 40), plain_batch(1, 300)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce_batch(client.request, topic, 0, first)
        produce_batch(client.request, topic, 0, second)
        before = sizes(describe_log_dirs(client, version, [(topic, [0])]))
        client.request(DELETE_RECORDS, 2, delete_records_request(topic, {0: 2}, timeout_ms=5_000))
        after = sizes(describe_log_dirs(client, version, [(topic, [0])]))
    assert before == {topic: {0: len(first) + len(second)}}
    assert after == {topic: {0: len(second)}}


# --- DescribeProducers ---------------------------------------------------------------


def describe_producers(client: RawClient, version: int, wanted: list[tuple[str, list[int]]]) -> Any:
    topics = tuple(
        make(DESCRIBE_PRODUCERS, version, "TopicRequest", name=t, partition_indexes=tuple(p))
        for t, p in wanted
    )
    return client.call(DESCRIBE_PRODUCERS, version, topics=topics)


def producer_states(partition: Any) -> list[tuple[int, int, int, int]]:
    """(producer id, epoch, last sequence, last timestamp) of each active producer,
    checking the transactional fields are unset."""
    assert partition.error_code.value == NONE
    assert partition.error_message is None
    for state in partition.active_producers:
        assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    return [
        (
            int(s.producer_id),
            int(s.producer_epoch),
            int(s.last_sequence),
            int(s.last_timestamp),
        )
        for s in partition.active_producers
    ]


@pytest.mark.parametrize("version", PRODUCERS_VERSIONS)
def test_producers_are_listed_with_their_epoch_and_last_sequence(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """After idempotent sends, partition 0 lists each producer (by id) with its epoch,
    the last sequence of its last batch and that batch's timestamp; a new epoch starts
    again; a partition written only by a plain producer (and one never written) has
    none."""
    topic = kafka_topic(partitions=3)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        first, second = init_producer(client), init_producer(client)
        assert (
            produce_idempotent(client, topic, batch(first, 0, [b"a", b"b", b"c"])).error_code == 0
        )
        assert produce_idempotent(client, topic, batch(first, 3, [b"d", b"e"])).error_code == 0
        later = records.build_batch(
            [(None, b"x")],
            timestamp_ms=NOW_MS + 5000,
            producer_id=second.producer_id,
            producer_epoch=second.epoch,
            base_sequence=0,
        )
        assert produce_idempotent(client, topic, later).error_code == 0
        produce_batch(client.request, topic, 1, plain_batch(4, 10))
        before = describe_producers(client, version, [(topic, [0, 1, 2])])
        bumped = Producer(second.producer_id, second.epoch + 1)
        assert produce_idempotent(client, topic, batch(bumped, 0, [b"y", b"z"])).error_code == 0
        after = describe_producers(client, version, [(topic, [0])])
    (answer,) = before.topics
    assert answer.name == topic
    assert [int(p.partition_index) for p in answer.partitions] == [0, 1, 2]
    assert first.producer_id < second.producer_id
    assert producer_states(answer.partitions[0]) == [
        (first.producer_id, first.epoch, 4, NOW_MS),
        (second.producer_id, second.epoch, 0, NOW_MS + 5000),
    ]
    assert producer_states(answer.partitions[1]) == []
    assert producer_states(answer.partitions[2]) == []
    assert producer_states(after.topics[0].partitions[0]) == [
        (first.producer_id, first.epoch, 4, NOW_MS),
        (second.producer_id, second.epoch + 1, 1, NOW_MS),
    ]


@pytest.mark.parametrize("version", PRODUCERS_VERSIONS)
def test_producers_of_unknown_topics_and_partitions_are_errors(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Topics and partitions are answered in the order asked: an unknown topic is
    UNKNOWN_TOPIC_OR_PARTITION with Kafka's message for each partition, an illegal name
    INVALID_TOPIC_EXCEPTION, an unknown partition of a known topic
    UNKNOWN_TOPIC_OR_PARTITION without a message."""
    topic = kafka_topic(partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        response = describe_producers(
            client,
            version,
            [(topic, [1, 2, -1, 1]), ("no-such-topic", [0, 4]), ("bad name!", [0])],
        )
    answers = [
        (
            t.name,
            [(int(p.partition_index), p.error_code.value, p.error_message) for p in t.partitions],
        )
        for t in response.topics
    ]
    assert answers[0] == (
        topic,
        [
            (1, NONE, None),
            (2, UNKNOWN_TOPIC_OR_PARTITION, None),
            (-1, UNKNOWN_TOPIC_OR_PARTITION, None),
            (1, NONE, None),
        ],
    )
    assert answers[1] == (
        "no-such-topic",
        [
            (0, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE),
            (4, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE),
        ],
    )
    ((index, code, message),) = answers[2][1]
    assert (answers[2][0], index, code) == ("bad name!", 0, INVALID_TOPIC_EXCEPTION)
    assert message
    assert all(p.active_producers == () for t in response.topics for p in t.partitions)


# --- several brokers -----------------------------------------------------------------


def test_each_node_describes_the_cluster_and_its_own_partitions(
    kafka_cluster: ClusterFactory,
) -> None:
    """On a 2-node cluster any node describes every partition with its real leader;
    each node's log dir holds (and DescribeProducers serves) only the partitions it
    leads, the others being NOT_LEADER_OR_FOLLOWER."""
    cluster = kafka_cluster(brokers=2)
    topic = unique_topic_name("spread")
    cluster.create_topic(topic, 4)
    leaders = cluster.leaders(topic)
    assert sorted(set(leaders.values())) == [0, 1]
    data = {p: plain_batch(p + 1, 20) for p in leaders}
    for partition, leader in leaders.items():
        with RawClient(node_address(cluster, leader)) as client:
            produce_batch(client.request, topic, partition, data[partition])
    for node_id in (0, 1):
        with RawClient(node_address(cluster, node_id)) as client:
            described = describe_partitions(client, 0, [topic])
            log_dirs = describe_log_dirs(client, 4, None)
            producers = describe_producers(client, 0, [(topic, sorted(leaders))])
        (entry,) = described.topics
        assert {int(p.partition_index): int(p.leader_id) for p in entry.partitions} == leaders
        assert all(p.replica_nodes == (p.leader_id,) for p in entry.partitions)
        mine = {p for p, leader in leaders.items() if leader == node_id}
        assert sizes(log_dirs) == {topic: {p: len(data[p]) for p in sorted(mine)}}
        assert log_dirs.results[0].log_dir == f"/minibroker/{node_id}"
        codes = {int(p.partition_index): p.error_code.value for p in producers.topics[0].partitions}
        assert codes == {p: NONE if p in mine else NOT_LEADER_OR_FOLLOWER for p in leaders}


def test_log_dirs_name_the_data_directory_and_its_volume(tmp_path: Path) -> None:
    """With a data directory, its logs directory and volume sizes are reported (v4)."""
    with Broker(data_dir=str(tmp_path)) as broker:
        broker.create_topic("kept", 1)
        with RawClient(broker.bootstrap_servers) as client:
            produce_batch(client.request, "kept", 0, plain_batch(2, 50))
            response = describe_log_dirs(client, 4, None)
    (result,) = response.results
    assert result.log_dir == str(tmp_path / "logs")
    assert 0 < result.usable_bytes <= result.total_bytes
    assert sizes(response) == {"kept": {0: len(plain_batch(2, 50))}}
