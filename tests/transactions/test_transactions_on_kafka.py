"""A transactional id's life as a client sees it on the wire, held against Apache Kafka
(parity): epochs and fencing, adding partitions, what Produce accepts, the last stable
offset in ListOffsets and Fetch, markers, the aborted transactions list, retried and
wrong EndTxn, and DescribeTransactions' view. Kafka writes markers after answering EndTxn
and loads its coordinator on first use, so the steps that depend on those wait for them."""

from __future__ import annotations

import datetime
import io
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, make, produce_request
from minibroker.protocol.records import TRANSACTIONAL_FLAG, build_batch
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import TopicFactory
from tests.produce_fetch.test_fetch_limits import Want, fetch

FIND_COORDINATOR, INIT, ADD_PARTITIONS, END, PRODUCE = 10, 22, 24, 26, 0
LIST_OFFSETS, FETCH, DESCRIBE = 2, 1, 65
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
# What a Kafka answers while its transaction coordinator loads or writes markers.
SETTLING = {
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
}


def until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def init(client: RawClient, tid: str, producer_id: int = -1, epoch: int = -1) -> Any:
    return client.call(
        INIT,
        4,
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def init_settled(client: RawClient, tid: str) -> Any:
    """InitProducerId asked again while the coordinator settles (or aborts a fenced
    transaction)."""

    def attempt() -> Any:
        answer = init(client, tid)
        return None if answer.error_code in SETTLING else answer

    return until(attempt, "InitProducerId")


def add(
    client: RawClient, tid: str, pid: int, epoch: int, topic: str, partitions: list[int]
) -> Any:
    answer = client.call(
        ADD_PARTITIONS,
        3,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(
            make(ADD_PARTITIONS, 3, "AddPartitionsToTxnTopic", name=topic, partitions=partitions),
        ),
    )
    return {
        p.partition_index: p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def add_settled(client: RawClient, tid: str, pid: int, epoch: int, topic: str, index: int) -> Any:
    def attempt() -> tuple[ErrorCode] | None:
        code = add(client, tid, pid, epoch, topic, [index])[index]
        return None if code in SETTLING else (code,)

    return until(attempt, "AddPartitionsToTxn")[0]


def produce(
    client: RawClient,
    tid: str | None,
    topic: str,
    index: int,
    pid: int,
    epoch: int,
    seq: int,
    version: int = 9,
) -> Any:
    batch = build_batch(
        [(None, f"v{seq}".encode())],
        # The time now: Kafka starts a new segment for a batch a week older than the
        # segment's first, and a fetch reads one segment.
        timestamp_ms=int(time.time() * 1000),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL_FLAG,
    )
    request = produce_request(
        topic, batch, partition=index, version=version, transactional_id=tid, timeout_ms=10_000
    )
    answer = client.request(PRODUCE, version, request)
    [partition] = answer.responses[0].partition_responses
    return partition.error_code


def end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    return client.call(
        END, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    ).error_code


def latest(client: RawClient, topic: str, index: int, isolation: int) -> int:
    wanted = make(LIST_OFFSETS, 5, "ListOffsetsPartition", partition_index=index, timestamp=LATEST)
    answer = client.call(
        LIST_OFFSETS,
        5,
        replica_id=-1,
        isolation_level=isolation,
        topics=(make(LIST_OFFSETS, 5, "ListOffsetsTopic", name=topic, partitions=(wanted,)),),
    )
    [partition] = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


def fetch_committed(client: RawClient, topic: str, index: int) -> Any:
    answer = fetch(client, 11, [Want(index)], topic=topic, isolation_level=READ_COMMITTED)
    [partition] = answer.responses[0].partitions
    return partition


@pytest.mark.parity
def test_a_transactional_id_lives_as_on_kafka(
    kafka_broker: KafkaService, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=2)
    tid = f"lifecycle-{uuid.uuid4()}"
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        until(
            lambda: (
                client.call(FIND_COORDINATOR, 3, key=tid, key_type=1).error_code == ErrorCode.none
            ),
            "the transaction coordinator",
        )
        first = init_settled(client, tid)
        assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0)
        pid = first.producer_id
        second = init(client, tid)
        assert (second.error_code, second.producer_id, second.producer_epoch) == (
            ErrorCode.none,
            pid,
            1,
        )
        assert init(client, tid, pid, 0).error_code == ErrorCode.producer_fenced
        assert describe(client, tid) == (ErrorCode.none, "Empty", -1, [])

        # partitions: one unknown, the others not attempted; then added
        assert add(client, tid, pid, 1, topic, [0, 7]) == {
            0: ErrorCode.operation_not_attempted,
            7: ErrorCode.unknown_topic_or_partition,
        }
        assert add(client, tid, pid, 0, topic, [0]) == {0: ErrorCode.producer_fenced}
        assert add_settled(client, tid, pid, 1, topic, 0) == ErrorCode.none
        error, state, start, partitions = describe(client, tid)
        assert (error, state, partitions) == (ErrorCode.none, "Ongoing", [(topic, [0])])
        assert start > 0

        # records inside the transaction; a partition outside it is refused
        assert produce(client, tid, topic, 1, pid, 1, 0) == ErrorCode.invalid_txn_state
        assert produce(client, None, topic, 0, pid, 1, 0) == (
            ErrorCode.transactional_id_authorization_failed
        )
        assert produce(client, "other", topic, 0, pid, 1, 0) == (
            ErrorCode.invalid_producer_id_mapping
        )
        assert produce(client, tid, topic, 0, pid, 1, 0) == ErrorCode.none
        assert latest(client, topic, 0, READ_UNCOMMITTED) == 1
        assert latest(client, topic, 0, READ_COMMITTED) == 0
        open_read = fetch_committed(client, topic, 0)
        assert (open_read.high_watermark, open_read.last_stable_offset) == (1, 0)
        assert not open_read.records and list(open_read.aborted_transactions or ()) == []

        # commit; a retry of it is fine, the other outcome is not
        assert end(client, tid, pid, 1, commit=True) == ErrorCode.none
        until(lambda: describe(client, tid)[1] == "CompleteCommit", "the commit to complete")
        assert describe(client, tid)[2] == start, "the completed transaction's start is kept"
        assert end(client, tid, pid, 1, commit=True) == ErrorCode.none
        assert end(client, tid, pid, 1, commit=False) == ErrorCode.invalid_txn_state
        until(lambda: latest(client, topic, 0, READ_COMMITTED) == 2, "the commit marker")
        assert produce(client, tid, topic, 0, pid, 1, 1) == ErrorCode.invalid_txn_state

        # a second transaction, fenced by a new InitProducerId: aborted at the next epoch
        assert add_settled(client, tid, pid, 1, topic, 0) == ErrorCode.none
        assert produce(client, tid, topic, 0, pid, 1, 1) == ErrorCode.none
        assert init(client, tid).error_code == ErrorCode.concurrent_transactions
        fenced = init_settled(client, tid)
        assert (fenced.producer_id, fenced.producer_epoch) == (pid, 3)
        assert produce(client, tid, topic, 0, pid, 1, 2) == ErrorCode.invalid_producer_epoch
        assert end(client, tid, pid, 1, commit=True) == ErrorCode.producer_fenced
        until(lambda: latest(client, topic, 0, READ_COMMITTED) == 4, "the abort marker")
        after_abort = fetch_committed(client, topic, 0)
        assert (after_abort.high_watermark, after_abort.last_stable_offset) == (4, 4)
        assert [(t.producer_id, t.first_offset) for t in after_abort.aborted_transactions] == [
            (pid, 2)
        ]
        assert describe(client, tid)[:2] == (ErrorCode.none, "Empty")


def describe(
    client: RawClient, tid: str
) -> tuple[ErrorCode, str, int, list[tuple[str, list[int]]]]:
    """(error, state, start time ms, partitions) from DescribeTransactions v0, read from
    the bytes: Kafka's start time of -1 is a timestamp kio refuses to decode."""
    request = make(DESCRIBE, 0, "DescribeTransactionsRequest", transactional_ids=(tid,))
    client.send(DESCRIBE, 0, request)
    frame = client.recv_frame()
    assert frame is not None
    body = io.BytesIO(frame[4 + 1 + 4 + 1 :])  # correlation id, tags, throttle, count

    def integer(size: int) -> int:
        return int.from_bytes(body.read(size), "big", signed=True)

    def varint() -> int:
        value = shift = 0
        while True:
            byte = body.read(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def text() -> str:
        return body.read(varint() - 1).decode()

    error = ErrorCode(integer(2))
    assert text() == tid
    state = text()
    integer(4)  # timeout
    start = integer(8)
    integer(8)  # producer id
    integer(2)  # epoch
    topics = []
    for _ in range(varint() - 1):
        name = text()
        topics.append((name, [integer(4) for _ in range(varint() - 1)]))
        varint()  # tags
    return error, state, start, topics


# --- transaction version 2 (KIP-890 part 2) ---

TXN_OFFSET_COMMIT, OFFSET_FETCH, API_VERSIONS = 28, 9, 18


def finalized_transaction_version(client: RawClient) -> int:
    answer = client.call(API_VERSIONS, 4, client_software_name="t", client_software_version="1")
    levels = {f.name: f.max_version_level for f in answer.finalized_features}
    return levels.get("transaction.version", 0) if answer.finalized_features_epoch >= 0 else 0


def end_v5(
    client: RawClient, tid: str, pid: int, epoch: int, commit: bool
) -> tuple[ErrorCode, int, int]:
    answer = client.call(
        END, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return answer.error_code, answer.producer_id, answer.producer_epoch


def txn_offset_commit_v5(
    client: RawClient, tid: str, group: str, topic: str, pid: int, epoch: int, offset: int
) -> Any:
    partition = make(
        TXN_OFFSET_COMMIT,
        5,
        "TxnOffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=offset,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    answer = client.call(
        TXN_OFFSET_COMMIT,
        5,
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                TXN_OFFSET_COMMIT,
                5,
                "TxnOffsetCommitRequestTopic",
                name=topic,
                partitions=(partition,),
            ),
        ),
    )
    return answer.topics[0].partitions[0].error_code


def stable_offset(client: RawClient, group: str, topic: str) -> tuple[ErrorCode, int]:
    wanted = make(OFFSET_FETCH, 7, "OffsetFetchRequestTopic", name=topic, partition_indexes=(0,))
    answer = client.call(OFFSET_FETCH, 7, group_id=group, topics=(wanted,), require_stable=True)
    [partition] = answer.topics[0].partitions
    return partition.error_code, partition.committed_offset


@pytest.mark.parity
def test_transaction_version_2_lives_as_on_kafka(
    kafka_broker: KafkaService, kafka_topic: TopicFactory
) -> None:
    """Kafka 4's second transaction protocol on the wire: Produce v12 and TxnOffsetCommit
    v5 add what they write to, EndTxn v5 answers the next epoch and writes the markers at
    it, and the old epoch is fenced; retries and ends by state as Kafka 4.4 answers them."""
    topic = kafka_topic(partitions=2)
    tid, group = f"tv2-{uuid.uuid4()}", f"tv2-group-{uuid.uuid4()}"
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        if finalized_transaction_version(client) < 2:
            pytest.skip("the broker finalizes no transaction.version 2 (Kafka 3.x)")
        for key, key_type in ((tid, 1), (group, 0)):
            until(
                lambda k=key, t=key_type: (
                    client.call(FIND_COORDINATOR, 3, key=k, key_type=t).error_code == ErrorCode.none
                ),
                "the coordinators",
            )
        first = init_settled(client, tid)
        pid, epoch = first.producer_id, first.producer_epoch

        # Produce v12 opens the transaction; v11 still needs the partition added
        assert produce(client, tid, topic, 0, pid, epoch, 0, version=12) == ErrorCode.none
        error, state, _, partitions = describe(client, tid)
        assert (error, state, partitions) == (ErrorCode.none, "Ongoing", [(topic, [0])])
        assert produce(client, tid, topic, 1, pid, epoch, 0) == ErrorCode.invalid_txn_state

        def offset_commit(at_epoch: int) -> Any:
            def attempt() -> tuple[Any] | None:
                code = txn_offset_commit_v5(client, tid, group, topic, pid, at_epoch, 5)
                return None if code in SETTLING else (code,)

            return until(attempt, "TxnOffsetCommit")[0]

        assert offset_commit(epoch) == ErrorCode.none
        assert offset_commit(epoch + 1) == ErrorCode.invalid_producer_epoch
        assert stable_offset(client, group, topic) == (ErrorCode.unstable_offset_commit, -1)

        # EndTxn v5: the next epoch; a retry gets it again; the other outcome does not
        assert end_v5(client, tid, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        until(lambda: describe(client, tid)[1] == "CompleteCommit", "the commit to complete")
        assert end_v5(client, tid, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        refused = (ErrorCode.invalid_txn_state, -1, -1)
        assert end_v5(client, tid, pid, epoch, commit=False) == refused
        assert end_v5(client, tid, pid, epoch + 1, commit=True) == refused
        until(lambda: latest(client, topic, 0, READ_COMMITTED) == 2, "the commit marker")
        until(lambda: stable_offset(client, group, topic) == (ErrorCode.none, 5), "the offsets")
        assert produce(client, tid, topic, 0, pid, epoch, 1, version=12) == (
            ErrorCode.invalid_producer_epoch
        )

        # an abort with nothing open moves the epoch on too; a commit is refused
        assert end_v5(client, tid, pid, epoch + 1, commit=False) == (
            ErrorCode.none,
            pid,
            epoch + 2,
        )
        until(lambda: describe(client, tid)[1] == "CompleteAbort", "the abort to complete")
        assert end_v5(client, tid, pid, epoch + 1, commit=False) == (
            ErrorCode.none,
            pid,
            epoch + 2,
        )

        # the next transaction at the new epoch starts its sequence at 0, and is aborted
        epoch += 2
        assert produce(client, tid, topic, 0, pid, epoch, 0, version=12) == ErrorCode.none
        assert end_v5(client, tid, pid, epoch, commit=False) == (ErrorCode.none, pid, epoch + 1)
        until(lambda: latest(client, topic, 0, READ_COMMITTED) == 4, "the abort marker")
        read = fetch_committed(client, topic, 0)
        assert (read.high_watermark, read.last_stable_offset) == (4, 4)
        assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(pid, 2)]
        # Kafka answers CONCURRENT_TRANSACTIONS until the abort has completed
        until(lambda: describe(client, tid)[1] == "CompleteAbort", "the abort to complete")
        assert end_v5(client, tid, pid, epoch - 1, commit=False) == (
            ErrorCode.producer_fenced,
            -1,
            -1,
        )
