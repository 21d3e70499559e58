"""Transaction version 2 (KIP-890 part 2) as a client reads it, sans-IO: the features
ApiVersions finalizes, Produce v12 adding its partition, EndTxn v5 moving the epoch on at
every end (and to a new producer id past 32766), TxnOffsetCommit v5 adding its group,
and version 1 kept beside it (rules: minibroker/state/transaction_rules.py). The answers
are the ones Apache Kafka 4.4 gives to the same requests
(tests/transactions/test_transactions_on_kafka.py holds the wire against it)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import make, produce_request
from minibroker.config import BrokerConfig
from minibroker.protocol.records import (
    TRANSACTIONAL_FLAG,
    build_batch,
    iter_records,
    split_batches,
)
from minibroker.state import transaction_rules as rules
from minibroker.state.transaction_rules import TxnState
from tests.produce_fetch.test_fetch_limits import Want, fetch
from tests.sansio import SansIOBroker

PRODUCE, FETCH, OFFSET_FETCH, API_VERSIONS, INIT = 0, 1, 9, 18, 22
ADD_PARTITIONS, ADD_OFFSETS, END, TXN_COMMIT, DESCRIBE = 24, 25, 26, 28, 65
TOPIC, GROUP, TID = "orders", "g", "tx"
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@pytest.fixture
def broker() -> SansIOBroker:
    sansio = SansIOBroker()
    sansio.cluster.topics.create(TOPIC, 3)
    return sansio


def init(broker: SansIOBroker, tid: str = TID) -> tuple[int, int]:
    answer = broker.call(
        INIT,
        5,
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    assert answer.error_code == ErrorCode.none
    return answer.producer_id, answer.producer_epoch


def produce(
    broker: SansIOBroker,
    pid: int,
    epoch: int,
    sequence: int,
    *,
    partition: int = 0,
    version: int = 12,
    tid: str | None = TID,
    value: bytes = b"v",
) -> ErrorCode:
    batch = build_batch(
        [(None, value)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        attributes=TRANSACTIONAL_FLAG,
    )
    request = produce_request(
        TOPIC, batch, partition=partition, version=version, transactional_id=tid
    )
    answer = broker.request(PRODUCE, version, request)
    code: ErrorCode = answer.responses[0].partition_responses[0].error_code
    return code


def end(
    broker: SansIOBroker, pid: int, epoch: int, commit: bool, version: int = 5
) -> tuple[ErrorCode, int | None, int | None]:
    """EndTxn's (error, producer id, epoch); v0-4 carry no producer id or epoch (None)."""
    answer = broker.call(
        END, version, transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return (
        answer.error_code,
        getattr(answer, "producer_id", None),
        getattr(answer, "producer_epoch", None),
    )


def txn_commit(broker: SansIOBroker, pid: int, epoch: int, offset: int, version: int = 5) -> Any:
    partition = make(
        TXN_COMMIT,
        version,
        "TxnOffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=offset,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    topic = make(
        TXN_COMMIT, version, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(partition,)
    )
    answer = broker.call(
        TXN_COMMIT,
        version,
        transactional_id=TID,
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    return answer.topics[0].partitions[0].error_code


def committed_offset(broker: SansIOBroker) -> tuple[ErrorCode, int]:
    wanted = make(OFFSET_FETCH, 7, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,))
    answer = broker.call(OFFSET_FETCH, 7, group_id=GROUP, topics=(wanted,), require_stable=True)
    [partition] = answer.topics[0].partitions
    return partition.error_code, partition.committed_offset


def state(broker: SansIOBroker) -> tuple[TxnState, set[tuple[str, int]], set[str]]:
    txn = broker.cluster.transactions.transactions[TID]
    return txn.state, set(txn.partitions), set(txn.groups)


def batches(broker: SansIOBroker, partition: int = 0) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, is a marker) of each batch in the partition."""
    answer = fetch(broker, 12, [Want(partition)], topic=TOPIC)
    records = answer.responses[0].partitions[0].records or b""
    return [(h.producer_id, h.producer_epoch, h.is_control) for h, _ in split_batches(records)]


def values_read(broker: SansIOBroker, isolation: int, partition: int = 0) -> list[bytes]:
    """The values a consumer reads: read_committed skips each aborted transaction's
    batches, from its first offset (the answer's aborted_transactions) to its marker, as
    Kafka's consumers do."""
    answer = fetch(broker, 12, [Want(partition)], topic=TOPIC, isolation_level=isolation)
    [read] = answer.responses[0].partitions
    aborted = sorted((a.first_offset, a.producer_id) for a in read.aborted_transactions or ())
    skipping: set[int] = set()
    values: list[bytes] = []
    for header, batch in split_batches(read.records or b""):
        while aborted and aborted[0][0] <= header.base_offset:
            skipping.add(aborted.pop(0)[1])
        if header.is_control:
            skipping.discard(header.producer_id)
        elif header.producer_id not in skipping:
            values.extend(record.value or b"" for record in iter_records(batch))
    return values


# --- ApiVersions: the features clients act on ---


def features(answer: Any) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], int]:
    return (
        {f.name: (f.min_version, f.max_version) for f in answer.supported_features},
        {f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features},
        answer.finalized_features_epoch,
    )


def api_versions(broker: SansIOBroker, version: int) -> Any:
    return broker.call(API_VERSIONS, version, client_software_name="t", client_software_version="1")


def test_api_versions_finalizes_transaction_version_2_as_kafka_4_does(
    broker: SansIOBroker,
) -> None:
    supported, finalized, epoch = features(api_versions(broker, 4))
    assert supported == {"transaction.version": (0, 2), "group.version": (0, 1)}
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1)}
    assert epoch >= 0, "clients ignore the features of epoch -1"
    # v3: Kafka leaves out a supported feature whose minimum is 0 (KAFKA-17011)
    supported, finalized, epoch = features(api_versions(broker, 3))
    assert supported == {}
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1)}
    assert epoch >= 0


@pytest.mark.parametrize("release", ["2.8", "3.0", "3.5", "3.9"])
def test_a_kafka_3_emulation_advertises_none_of_it(release: str) -> None:
    broker = SansIOBroker(BrokerConfig(kafka_version=release))
    answer = api_versions(broker, 3)
    assert features(answer) == ({}, {}, -1)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[PRODUCE][1] <= 11 and ranges[END][1] <= 4 and ranges[TXN_COMMIT][1] <= 4


def test_a_kafka_4_0_emulation_finalizes_it_as_kafka_4_0_did() -> None:
    broker = SansIOBroker(BrokerConfig(kafka_version="4.0"))
    _, finalized, epoch = features(api_versions(broker, 4))
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1)}
    assert epoch >= 0


# --- Produce v12 ---


def test_produce_v12_adds_its_partition_and_opens_the_transaction(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    assert state(broker) == (TxnState.EMPTY, set(), set())
    assert produce(broker, pid, epoch, 0) == ErrorCode.none
    assert state(broker) == (TxnState.ONGOING, {(TOPIC, 0)}, set())
    assert produce(broker, pid, epoch, 0, partition=2) == ErrorCode.none
    assert produce(broker, pid, epoch, 1) == ErrorCode.none
    assert state(broker)[1] == {(TOPIC, 0), (TOPIC, 2)}


def test_before_v12_the_partition_must_have_been_added(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    assert produce(broker, pid, epoch, 0, version=11) == ErrorCode.transaction_abortable
    assert produce(broker, pid, epoch, 0, version=10) == ErrorCode.invalid_txn_state
    assert produce(broker, pid, epoch, 0, version=12) == ErrorCode.none
    # a partition of the open transaction takes the older versions too
    assert produce(broker, pid, epoch, 1, version=11) == ErrorCode.none


def test_produce_v12_refuses_what_adding_refuses(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    assert produce(broker, pid, epoch + 1, 0) == ErrorCode.invalid_producer_epoch
    assert produce(broker, pid, epoch - 1, 0) == ErrorCode.invalid_producer_epoch
    assert produce(broker, pid + 1, epoch, 0) == ErrorCode.invalid_producer_id_mapping
    assert produce(broker, pid, epoch, 0, tid="unknown") == ErrorCode.invalid_producer_id_mapping
    assert produce(broker, pid, epoch, 0, tid=None) == (
        ErrorCode.transactional_id_authorization_failed
    )
    assert state(broker) == (TxnState.EMPTY, set(), set()), "nothing was added"


# --- EndTxn v5 ---


def test_every_end_moves_the_epoch_on_and_the_markers_carry_the_new_one(
    broker: SansIOBroker,
) -> None:
    pid, epoch = init(broker)
    produce(broker, pid, epoch, 0, value=b"first")
    assert end(broker, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
    assert batches(broker) == [(pid, epoch, False), (pid, epoch + 1, True)]
    # the next transaction at the new epoch starts its sequence again
    assert produce(broker, pid, epoch + 1, 0, value=b"aborted") == ErrorCode.none
    assert end(broker, pid, epoch + 1, commit=False) == (ErrorCode.none, pid, epoch + 2)
    assert produce(broker, pid, epoch + 2, 0, value=b"second") == ErrorCode.none
    assert end(broker, pid, epoch + 2, commit=True) == (ErrorCode.none, pid, epoch + 3)
    assert values_read(broker, READ_COMMITTED) == [b"first", b"second"]
    assert values_read(broker, READ_UNCOMMITTED) == [b"first", b"aborted", b"second"]


def test_the_old_epoch_is_fenced_after_an_end(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    produce(broker, pid, epoch, 0)
    end(broker, pid, epoch, commit=True)
    # the partition has the marker's epoch: the old one is refused there
    assert produce(broker, pid, epoch, 1) == ErrorCode.invalid_producer_epoch
    assert produce(broker, pid, epoch, 0, partition=1) == ErrorCode.invalid_producer_epoch
    assert state(broker)[0] is TxnState.COMPLETE_COMMIT, "the fenced batches added nothing"


def test_end_retries_and_outcomes_by_state(broker: SansIOBroker) -> None:
    """Kafka's table for version 2: a retry is one epoch behind the id's."""
    failed = (ErrorCode.invalid_txn_state, -1, -1)
    pid, e = init(broker)
    # Empty: an abort moves the epoch on, a commit is refused, a retry is fenced
    assert end(broker, pid, e, commit=True) == failed
    assert end(broker, pid, e - 1, commit=False) == (ErrorCode.producer_fenced, -1, -1)
    assert end(broker, pid, e, commit=False) == (ErrorCode.none, pid, e + 1)
    assert state(broker)[0] is TxnState.COMPLETE_ABORT
    e += 1
    # CompleteAbort: a retried abort is answered with the current epoch; a new abort
    # moves it on; a commit is refused
    assert end(broker, pid, e - 1, commit=False) == (ErrorCode.none, pid, e)
    assert end(broker, pid, e - 1, commit=True) == failed
    assert end(broker, pid, e, commit=True) == failed
    produce(broker, pid, e, 0)
    assert end(broker, pid, e, commit=True) == (ErrorCode.none, pid, e + 1)
    e += 1
    # CompleteCommit: a retried commit is answered, a retried abort and a new commit are
    # refused, a new abort moves the epoch on
    assert end(broker, pid, e - 1, commit=True) == (ErrorCode.none, pid, e)
    assert end(broker, pid, e - 1, commit=False) == failed
    assert end(broker, pid, e, commit=True) == failed
    assert end(broker, pid, e, commit=False) == (ErrorCode.none, pid, e + 1)
    # epochs ahead, other ids and unknown ids
    assert end(broker, pid, e + 5, commit=False) == (ErrorCode.producer_fenced, -1, -1)
    mapping = (ErrorCode.invalid_producer_id_mapping, -1, -1)
    assert end(broker, pid + 1, e + 1, commit=False) == mapping
    assert (
        broker.call(
            END, 5, transactional_id="nope", producer_id=pid, producer_epoch=0, committed=False
        ).error_code
        == ErrorCode.invalid_producer_id_mapping
    )


def test_an_abort_with_nothing_open_writes_no_marker_and_starts_now(
    broker: SansIOBroker,
) -> None:
    pid, epoch = init(broker)
    broker.clock.advance(7)
    assert end(broker, pid, epoch, commit=False)[0] == ErrorCode.none
    txn = broker.cluster.transactions.transactions[TID]
    assert txn.start_wall_ms == broker.clock.wall_ms()
    assert batches(broker) == []


def test_the_last_epoch_ends_on_a_new_producer_id(broker: SansIOBroker) -> None:
    pid, _ = init(broker)
    broker.cluster.transactions.transactions[TID].epoch = rules.MAX_EPOCH
    assert produce(broker, pid, rules.MAX_EPOCH, 0) == ErrorCode.none
    assert txn_commit(broker, pid, rules.MAX_EPOCH, 5) == ErrorCode.none
    code, new_pid, new_epoch = end(broker, pid, rules.MAX_EPOCH, commit=True)
    assert (code, new_epoch) == (ErrorCode.none, 0) and new_pid != pid
    # the markers are the old producer id's, at the epoch above the last
    assert batches(broker) == [(pid, rules.MAX_EPOCH, False), (pid, rules.MAX_EPOCH + 1, True)]
    assert committed_offset(broker) == (ErrorCode.none, 5)
    # a retry names the old id at its last epoch
    assert end(broker, pid, rules.MAX_EPOCH, commit=True) == (ErrorCode.none, new_pid, 0)
    assert end(broker, pid, rules.MAX_EPOCH, commit=False) == (ErrorCode.invalid_txn_state, -1, -1)
    assert produce(broker, pid, rules.MAX_EPOCH, 1) == ErrorCode.invalid_producer_epoch
    assert produce(broker, new_pid, 0, 0) == ErrorCode.none
    assert end(broker, new_pid, 0, commit=True) == (ErrorCode.none, new_pid, 1)


def test_end_v4_keeps_the_epoch_of_a_transaction_produce_v12_opened(
    broker: SansIOBroker,
) -> None:
    pid, epoch = init(broker)
    produce(broker, pid, epoch, 0)
    assert end(broker, pid, epoch, commit=True, version=4) == (ErrorCode.none, None, None)
    assert batches(broker)[-1] == (pid, epoch, True)
    assert end(broker, pid, epoch, commit=True, version=4)[0] == ErrorCode.none, "a retry"
    # v5 at the same epoch is no retry there: the commit is refused, an abort moves on
    assert end(broker, pid, epoch, commit=True)[0] == ErrorCode.invalid_txn_state
    assert end(broker, pid, epoch, commit=False) == (ErrorCode.none, pid, epoch + 1)


def test_a_new_instance_fences_an_open_transaction_of_version_2(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    produce(broker, pid, epoch, 0)
    retried = broker.call(
        INIT,
        5,
        transactional_id=TID,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    assert retried.error_code == ErrorCode.concurrent_transactions
    assert batches(broker)[-1] == (pid, epoch + 1, True), "aborted at the fenced epoch"
    assert init(broker) == (pid, epoch + 2)
    assert produce(broker, pid, epoch, 1) == ErrorCode.invalid_producer_epoch
    assert end(broker, pid, epoch, commit=True) == (ErrorCode.producer_fenced, -1, -1)


def test_a_transaction_produce_v12_opened_times_out(broker: SansIOBroker) -> None:
    pid, epoch = init(broker)
    produce(broker, pid, epoch, 0)
    broker.clock.advance(61)
    broker.cluster.transactions.tick(broker.clock.monotonic())
    assert state(broker)[0] is TxnState.COMPLETE_ABORT
    assert produce(broker, pid, epoch, 1) == ErrorCode.invalid_producer_epoch


# --- TxnOffsetCommit v5 ---


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_txn_offset_commit_v5_adds_its_group(broker: SansIOBroker, commit: bool) -> None:
    pid, epoch = init(broker)
    assert txn_commit(broker, pid, epoch, 7) == ErrorCode.none
    assert state(broker) == (TxnState.ONGOING, set(), {GROUP})
    assert committed_offset(broker) == (ErrorCode.unstable_offset_commit, -1)
    assert end(broker, pid, epoch, commit)[0] == ErrorCode.none
    assert committed_offset(broker) == (ErrorCode.none, 7 if commit else -1)


def test_txn_offset_commit_v5_refuses_a_fenced_or_unknown_producer(
    broker: SansIOBroker,
) -> None:
    pid, epoch = init(broker)
    assert txn_commit(broker, pid, epoch - 1, 7) == ErrorCode.invalid_producer_epoch
    assert txn_commit(broker, pid, epoch + 1, 7) == ErrorCode.invalid_producer_epoch
    assert txn_commit(broker, pid + 1, epoch, 7) == ErrorCode.invalid_producer_id_mapping
    assert state(broker) == (TxnState.EMPTY, set(), set())
    assert committed_offset(broker) == (ErrorCode.none, -1)


def test_consume_transform_produce_without_an_add_request(broker: SansIOBroker) -> None:
    """A version 2 client's loop: Produce v12, TxnOffsetCommit v5, EndTxn v5, and again
    at the epoch EndTxn gave; no AddPartitionsToTxn or AddOffsetsToTxn at all."""
    pid, epoch = init(broker)
    for round_, commit in enumerate((True, False, True)):
        assert produce(broker, pid, epoch, 0, value=b"out-%d" % round_) == ErrorCode.none
        assert txn_commit(broker, pid, epoch, 10 * (round_ + 1)) == ErrorCode.none
        code, pid, epoch = end(broker, pid, epoch, commit)
        assert code == ErrorCode.none
    assert epoch == 3
    assert values_read(broker, READ_COMMITTED) == [b"out-0", b"out-2"]
    assert committed_offset(broker) == (ErrorCode.none, 30)
