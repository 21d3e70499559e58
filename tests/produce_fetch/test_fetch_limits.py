"""Fetch size limits and per-partition errors over the wire, at Fetch v4 and v11.

A consumer sizes its memory by `max_bytes` (the whole response) and
`partition_max_bytes` (each partition), and relies on KIP-74 to make progress past a
batch larger than those limits: Kafka's ReplicaManager returns the first batch of the
first partition that has data whole, and from then on honours both limits strictly, so
a later partition whose next batch does not fit gets no records (and no error). Every
partition here is filled with batches of one known size, so the number of whole
batches each partition gets is exact. Kafka may end a partition's records with a
truncated batch cut at the byte limit (clients drop it); only whole batches are counted,
and the byte limits cover the truncated piece too.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from harness.raw_client import RawClient, make, produce_batch
from minibroker import Broker
from minibroker.cluster import Cluster, host_port
from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader
from minibroker.testing.plugin import ClusterFactory, TopicFactory

PRODUCE, FETCH, METADATA = 0, 1, 3

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
FETCH_SESSION_ID_NOT_FOUND = 70
UNKNOWN_TOPIC_ID = 100

NOW_MS = int(time.time() * 1000)
VALUE_BYTES = 200
BATCHES_PER_PARTITION = 4
LARGE = 1 << 20

FETCH_VERSIONS = [4, 11]
SESSION_VERSIONS = [7, 11]


def one_batch(tag: int, value_bytes: int = VALUE_BYTES) -> bytes:
    """An uncompressed one-record batch; every tag gives a batch of the same size."""
    return records.build_batch([(None, bytes([tag % 256]) * value_bytes)], timestamp_ms=NOW_MS)


BATCH = len(one_batch(0))
BIG_BATCH = len(one_batch(0, 10 * VALUE_BYTES))


@dataclasses.dataclass(frozen=True)
class Want:
    partition: int
    fetch_offset: int = 0
    partition_max_bytes: int = LARGE


def produce(client: RawClient, topic: str, partition: int, data: bytes) -> None:
    produce_batch(client.request, topic, partition, data)


def fill(
    client: RawClient, topic: str, partitions: int, count: int = BATCHES_PER_PARTITION
) -> None:
    """`count` batches of BATCH bytes into each of the first `partitions` partitions."""
    for partition in range(partitions):
        for i in range(count):
            produce(client, topic, partition, one_batch(partition * 16 + i))


def fetch(
    client: RawClient,
    version: int,
    wanted: Sequence[Want],
    *,
    topic: str | None = None,
    topic_id: uuid.UUID | None = None,
    max_bytes: int = LARGE,
    session_id: int = 0,
    session_epoch: int = -1,
    isolation_level: int = 0,
) -> Any:
    """One Fetch that answers at once (max_wait 0) for one topic's `wanted` partitions."""
    partitions = tuple(
        make(
            FETCH,
            version,
            "FetchPartition",
            partition=w.partition,
            current_leader_epoch=-1,
            fetch_offset=w.fetch_offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=w.partition_max_bytes,
        )
        for w in wanted
    )
    fetch_topic = make(
        FETCH, version, "FetchTopic", topic=topic, topic_id=topic_id, partitions=partitions
    )
    return client.call(
        FETCH,
        version,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def partitions_of(response: Any) -> list[Any]:
    """The partitions of a one-topic answer (the top-level error code exists from v7)."""
    if hasattr(response, "error_code"):
        assert response.error_code.value == NONE
    (topic,) = response.responses
    return list(topic.partitions)


def whole_batches(data: bytes | None) -> list[BatchHeader]:
    """The complete batches in a partition's records; a truncated last one is left out,
    as clients do."""
    raw = bytes(data or b"")
    found: list[BatchHeader] = []
    position = 0
    while position + records.HEADER_SIZE <= len(raw):
        header = records.read_header(raw, position)
        if position + header.total_size > len(raw):
            break
        found.append(header)
        position += header.total_size
    return found


def batch_counts(partitions: Sequence[Any]) -> list[int]:
    for partition in partitions:
        assert partition.error_code.value == NONE
    return [len(whole_batches(p.records)) for p in partitions]


def record_bytes(partitions: Sequence[Any]) -> list[int]:
    return [len(p.records or b"") for p in partitions]


# --- max_bytes ----------------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_max_bytes_caps_the_whole_response_across_partitions(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Partitions are filled in request order until max_bytes is used up; a partition
    whose next batch no longer fits gets nothing."""
    topic = kafka_topic(partitions=3)
    max_bytes = 5 * BATCH + BATCH // 2
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 3)
        response = fetch(
            client, version, [Want(0), Want(1), Want(2)], topic=topic, max_bytes=max_bytes
        )
    partitions = partitions_of(response)
    assert batch_counts(partitions) == [4, 1, 0]
    assert sum(record_bytes(partitions)) <= max_bytes


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_max_bytes_and_partition_max_bytes_apply_together(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Each partition is held to the smaller of its own limit and what is left of the
    response's."""
    topic = kafka_topic(partitions=3)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 3)
        wanted = [Want(p, partition_max_bytes=2 * BATCH) for p in range(3)]
        response = fetch(client, version, wanted, topic=topic, max_bytes=5 * BATCH)
    partitions = partitions_of(response)
    assert batch_counts(partitions) == [2, 2, 1]
    assert record_bytes(partitions) == [2 * BATCH, 2 * BATCH, BATCH]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_first_batch_larger_than_max_bytes_is_returned_whole_and_alone(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """KIP-74: a consumer whose max_bytes is smaller than the next batch still gets that
    one batch, whole, so it can make progress; nothing else comes with it. The partitions
    left out get empty records, not null ones, as on Kafka."""
    topic = kafka_topic(partitions=3)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 3)
        response = fetch(
            client, version, [Want(0), Want(1), Want(2)], topic=topic, max_bytes=BATCH // 2
        )
    partitions = partitions_of(response)
    assert batch_counts(partitions) == [1, 0, 0]
    assert record_bytes(partitions) == [BATCH, 0, 0]
    assert [p.records is None for p in partitions] == [False, False, False]


# --- partition_max_bytes --------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_partition_max_bytes_caps_each_partition(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """No partition gets more than its partition_max_bytes, however much max_bytes allows."""
    topic = kafka_topic(partitions=3)
    limit = 2 * BATCH + BATCH // 2
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 3)
        wanted = [Want(p, partition_max_bytes=limit) for p in range(3)]
        response = fetch(client, version, wanted, topic=topic)
    partitions = partitions_of(response)
    assert batch_counts(partitions) == [2, 2, 2]
    assert all(size <= limit for size in record_bytes(partitions))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_only_the_first_partition_with_data_may_exceed_partition_max_bytes(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """KIP-74's exception is for the first partition that has data (an empty partition
    before it does not use it up): that partition's oversized first batch comes whole;
    a later partition whose first batch exceeds its limit gets no records, not an error."""
    topic = kafka_topic(partitions=3)
    limit = BIG_BATCH // 2
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce(client, topic, 0, one_batch(0))
        for partition in (1, 2):
            for i in range(2):
                produce(client, topic, partition, one_batch(i, 10 * VALUE_BYTES))
        wanted = [
            Want(0, fetch_offset=1, partition_max_bytes=limit),  # at its end: no data
            Want(1, partition_max_bytes=limit),
            Want(2, partition_max_bytes=limit),
        ]
        response = fetch(client, version, wanted, topic=topic)
    partitions = partitions_of(response)
    assert batch_counts(partitions) == [0, 1, 0]
    assert record_bytes(partitions) == [0, BIG_BATCH, 0]
    assert [int(p.high_watermark) for p in partitions] == [1, 2, 2]


# --- errors per partition -------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_an_unknown_topic_is_unknown_topic_or_partition(kafka_broker: Broker, version: int) -> None:
    """A topic the cluster does not have is answered per partition, not by failing the
    request."""
    with RawClient(kafka_broker.bootstrap_servers) as client:
        response = fetch(client, version, [Want(0)], topic=f"no-such-topic-{uuid.uuid4().hex}")
    (partition,) = partitions_of(response)
    assert partition.error_code.value == UNKNOWN_TOPIC_OR_PARTITION
    assert not partition.records


def topic_id_of(client: RawClient, topic: str) -> uuid.UUID:
    wanted = make(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=uuid.UUID(int=0))
    response = client.call(
        METADATA,
        12,
        topics=(wanted,),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (found,) = response.topics
    assert found.error_code.value == NONE
    return uuid.UUID(str(found.topic_id))


def test_an_unknown_topic_id_is_unknown_topic_id_at_v13(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """From v13 topics are named by id: an id the cluster does not know is
    UNKNOWN_TOPIC_ID, the zero id included (it is answered with that id, not by closing
    the connection), while a known id is served."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 1, count=1)
        known = fetch(client, 13, [Want(0)], topic_id=topic_id_of(client, topic))
        unknown = fetch(client, 13, [Want(0)], topic_id=uuid.uuid4())
        zero = fetch(client, 16, [Want(0)], topic_id=uuid.UUID(int=0))
    assert batch_counts(partitions_of(known)) == [1]
    for answer in (unknown, zero):
        (partition,) = partitions_of(answer)
        assert partition.error_code.value == UNKNOWN_TOPIC_ID
        assert not partition.records
    assert zero.responses[0].topic_id in (None, uuid.UUID(int=0))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_fetch_offset_past_the_end_is_offset_out_of_range(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """Fetching at the log end is an empty answer; beyond it is OFFSET_OUT_OF_RANGE (the
    consumer then resets its position), for that partition only."""
    topic = kafka_topic(partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 2, count=2)
        response = fetch(
            client, version, [Want(0, fetch_offset=3), Want(1, fetch_offset=2)], topic=topic
        )
        still_served = fetch(client, version, [Want(0, fetch_offset=1), Want(1)], topic=topic)
    beyond, at_end = partitions_of(response)
    assert beyond.error_code.value == OFFSET_OUT_OF_RANGE
    assert not beyond.records
    # A partition with an error carries no offsets, as on Kafka.
    offsets = (beyond.high_watermark, beyond.last_stable_offset)
    assert [int(o) for o in offsets] == [-1, -1]
    assert int(getattr(beyond, "log_start_offset", -1)) == -1  # a field from v5
    assert beyond.aborted_transactions is None
    assert (at_end.error_code.value, int(at_end.high_watermark)) == (NONE, 2)
    assert not at_end.records
    assert batch_counts(partitions_of(still_served)) == [1, 2]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_partition_the_topic_lacks_is_unknown_topic_or_partition(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """A partition number past the topic's partitions is UNKNOWN_TOPIC_OR_PARTITION; the
    topic's real partitions in the same request are served."""
    topic = kafka_topic(partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 2, count=1)
        response = fetch(client, version, [Want(0), Want(7), Want(1)], topic=topic)
    first, missing, second = partitions_of(response)
    assert missing.error_code.value == UNKNOWN_TOPIC_OR_PARTITION
    assert not missing.records
    assert batch_counts([first, second]) == [1, 1]


def node_address(cluster: Cluster, node_id: int) -> str:
    (node,) = [n for n in cluster.nodes if n.node_id == node_id]
    return host_port(node.advertised_host, node.port)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_node_that_does_not_lead_a_partition_is_not_leader_or_follower(
    kafka_cluster: ClusterFactory, version: int
) -> None:
    """A fetch sent to the wrong node is NOT_LEADER_OR_FOLLOWER for the partitions it does
    not lead (the consumer refreshes metadata), and served for the ones it leads."""
    cluster = kafka_cluster(brokers=2)
    cluster.create_topic("spread", 2)
    leaders = cluster.leaders("spread")
    assert sorted(leaders.values()) == [0, 1]
    for partition, leader in leaders.items():
        with RawClient(node_address(cluster, leader)) as client:
            produce(client, "spread", partition, one_batch(partition))
    for node_id in (0, 1):
        with RawClient(node_address(cluster, node_id)) as client:
            response = fetch(client, version, [Want(0), Want(1)], topic="spread")
        codes = {p.partition_index: p.error_code.value for p in partitions_of(response)}
        counts = {p.partition_index: len(whole_batches(p.records)) for p in partitions_of(response)}
        for partition, leader in leaders.items():
            if leader == node_id:
                assert (codes[partition], counts[partition]) == (NONE, 1)
            else:
                assert (codes[partition], counts[partition]) == (NOT_LEADER_OR_FOLLOWER, 0)


# --- fetch sessions -------------------------------------------------------------------
#
# Kafka's FetchManager.newContext: session epoch 0 (INITIAL) or -1 (FINAL) makes a full
# fetch, which closes the session named (if there is one) and is answered normally; any
# other epoch is an incremental fetch of the named session, FETCH_SESSION_ID_NOT_FOUND
# when there is no such session (session id 0 included).


@pytest.mark.parametrize("version", SESSION_VERSIONS)
@pytest.mark.parametrize("session_id", [0, 12345])
def test_an_incremental_fetch_of_an_unknown_session_is_fetch_session_id_not_found(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, session_id: int
) -> None:
    """A consumer continuing a session the broker does not have must start over: the
    answer is FETCH_SESSION_ID_NOT_FOUND with no partition data."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 1, count=1)
        response = fetch(
            client, version, [Want(0)], topic=topic, session_id=session_id, session_epoch=1
        )
    assert response.error_code.value == FETCH_SESSION_ID_NOT_FOUND
    assert response.session_id == 0
    assert response.responses == ()


@pytest.mark.parametrize("version", SESSION_VERSIONS)
@pytest.mark.parametrize("session_epoch", [0, -1])
def test_a_full_fetch_naming_an_unknown_session_is_served(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, session_epoch: int
) -> None:
    """A full fetch (epoch 0 opens a new session, -1 asks for none) that names a session
    the broker does not have is served like any full fetch, not refused."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 1, count=1)
        response = fetch(
            client, version, [Want(0)], topic=topic, session_id=12345, session_epoch=session_epoch
        )
    assert response.error_code.value == NONE
    assert batch_counts(partitions_of(response)) == [1]
    if session_epoch == -1:
        assert response.session_id == 0


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_only_read_committed_fetches_carry_an_aborted_transactions_list(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """read_committed (isolation 1) gets a list of the aborted transactions in range
    (empty: no transactions here); read_uncommitted gets none at all (null), as on Kafka."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        fill(client, topic, 1, count=1)
        (committed,) = partitions_of(
            fetch(client, version, [Want(0)], topic=topic, isolation_level=1)
        )
        (uncommitted,) = partitions_of(fetch(client, version, [Want(0)], topic=topic))
    assert committed.aborted_transactions == ()
    assert uncommitted.aborted_transactions is None
    assert batch_counts([committed]) == batch_counts([uncommitted]) == [1]


def test_fetched_batches_carry_the_leader_epoch_they_were_stored_in(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """Kafka stamps each batch with the partition's leader epoch when it stores it,
    whatever the producer wrote there (consumers commit that epoch with their offsets);
    here every partition's epoch is 0. The CRC does not cover the field."""
    topic = kafka_topic(partitions=1)
    batch = bytearray(one_batch(0))
    batch[12:16] = (7).to_bytes(4, "big", signed=True)  # what a producer might send
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce(client, topic, 0, bytes(batch))
        produce(client, topic, 0, one_batch(1))  # -1, as producers send it
        (partition,) = partitions_of(fetch(client, 12, [Want(0)], topic=topic))
    headers = [header for header, _ in records.split_batches(bytes(partition.records))]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 0), (1, 0)]
