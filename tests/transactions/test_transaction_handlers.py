"""The transaction APIs' answers as a client reads them: errors by version, coordinators,
partition checks, the batched AddPartitionsToTxn, transactional offset commits, the admin
views (rules: minibroker/state/transaction_rules.py)."""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import make, produce_request
from minibroker.protocol.records import TRANSACTIONAL_FLAG, build_batch
from tests.sansio import SansIOBroker

INIT, ADD_PARTITIONS, ADD_OFFSETS, END, TXN_COMMIT = 22, 24, 25, 26, 28
PRODUCE, FETCH, OFFSET_FETCH, DESCRIBE, LIST = 0, 1, 9, 65, 66
TOPIC = "orders"


@pytest.fixture
def broker() -> SansIOBroker:
    sansio = SansIOBroker()
    sansio.cluster.topics.create(TOPIC, 2)
    return sansio


def init(broker: SansIOBroker, tid: str, version: int = 4, **fields: Any) -> Any:
    values = {
        "transactional_id": tid,
        "transaction_timeout": datetime.timedelta(seconds=60),
        "producer_id": -1,
        "producer_epoch": -1,
        **fields,
    }
    return broker.call(INIT, version, **values)


def add_partitions(
    broker: SansIOBroker,
    tid: str,
    pid: int,
    epoch: int,
    partitions: dict[str, list[int]],
    v: int = 3,
) -> dict[tuple[str, int], ErrorCode]:
    topics = tuple(
        make(ADD_PARTITIONS, v, "AddPartitionsToTxnTopic", name=name, partitions=tuple(indexes))
        for name, indexes in partitions.items()
    )
    answer = broker.call(
        ADD_PARTITIONS,
        v,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=topics,
    )
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in answer.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def begin(broker: SansIOBroker, tid: str) -> tuple[int, int]:
    started = init(broker, tid)
    codes = add_partitions(broker, tid, started.producer_id, started.producer_epoch, {TOPIC: [0]})
    assert codes == {(TOPIC, 0): ErrorCode.none}
    return started.producer_id, started.producer_epoch


def end(broker: SansIOBroker, tid: str, pid: int, epoch: int, commit: bool, v: int = 3) -> Any:
    return broker.call(
        END, v, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    ).error_code


def produce(broker: SansIOBroker, pid: int, epoch: int, sequence: int, partition: int = 0) -> Any:
    batch = build_batch(
        [(None, b"v")],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        attributes=TRANSACTIONAL_FLAG,
    )
    request = produce_request(TOPIC, batch, partition=partition, transactional_id="tx")
    answer = broker.request(PRODUCE, 9, request)
    return answer.responses[0].partition_responses[0].error_code


def test_fenced_is_invalid_producer_epoch_before_the_version_that_named_it(
    broker: SansIOBroker,
) -> None:
    old = init(broker, "tx")
    init(broker, "tx")
    stale = {"producer_id": old.producer_id, "producer_epoch": old.producer_epoch}
    assert init(broker, "tx", 4, **stale).error_code == ErrorCode.producer_fenced
    assert init(broker, "tx", 3, **stale).error_code == ErrorCode.invalid_producer_epoch
    for version, expected in (
        (2, ErrorCode.producer_fenced),
        (1, ErrorCode.invalid_producer_epoch),
    ):
        codes = add_partitions(
            broker, "tx", old.producer_id, old.producer_epoch, {TOPIC: [0]}, version
        )
        assert codes == {(TOPIC, 0): expected}
        assert end(broker, "tx", old.producer_id, old.producer_epoch, True, version) == expected
        answer = broker.call(
            ADD_OFFSETS,
            version,
            transactional_id="tx",
            producer_id=old.producer_id,
            producer_epoch=old.producer_epoch,
            group_id="g",
        )
        assert answer.error_code == expected


def test_an_unknown_partition_leaves_the_others_not_attempted(broker: SansIOBroker) -> None:
    started = init(broker, "tx")
    codes = add_partitions(broker, "tx", started.producer_id, 0, {TOPIC: [0, 1, 2], "missing": [0]})
    assert codes == {
        (TOPIC, 0): ErrorCode.operation_not_attempted,
        (TOPIC, 1): ErrorCode.operation_not_attempted,
        (TOPIC, 2): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert broker.cluster.transactions.transactions["tx"].partitions == set()


def test_empty_ids_are_invalid_requests(broker: SansIOBroker) -> None:
    assert init(broker, "").error_code == ErrorCode.invalid_request
    assert add_partitions(broker, "", 1, 0, {TOPIC: [0]}) == {(TOPIC, 0): ErrorCode.invalid_request}
    assert end(broker, "", 1, 0, True) == ErrorCode.invalid_request


def test_only_the_transaction_coordinator_answers() -> None:
    broker = SansIOBroker(nodes=3)
    broker.cluster.topics.create(TOPIC, 1)
    elsewhere = next(
        f"tx-{i}" for i in range(100) if broker.cluster.coordinator_for(f"tx-{i}", 1) != 0
    )
    assert init(broker, elsewhere).error_code == ErrorCode.not_coordinator
    assert end(broker, elsewhere, 1, 0, True) == ErrorCode.not_coordinator
    assert add_partitions(broker, elsewhere, 1, 0, {TOPIC: [0]}) == {
        (TOPIC, 0): ErrorCode.not_coordinator
    }
    assert described_without_transaction(broker, elsewhere) == (
        ErrorCode.not_coordinator,
        "",
        0,
    )
    here = next(f"tx-{i}" for i in range(100) if broker.cluster.coordinator_for(f"tx-{i}", 1) == 0)
    assert init(broker, here).error_code == ErrorCode.none


def test_batched_add_and_verify_only(broker: SansIOBroker) -> None:
    pid, epoch = begin(broker, "tx")

    def transaction(verify_only: bool, partitions: tuple[int, ...]) -> Any:
        topic = make(
            ADD_PARTITIONS, 5, "AddPartitionsToTxnTopic", name=TOPIC, partitions=partitions
        )
        return make(
            ADD_PARTITIONS,
            5,
            "AddPartitionsToTxnTransaction",
            transactional_id="tx",
            producer_id=pid,
            producer_epoch=epoch,
            verify_only=verify_only,
            topics=(topic,),
        )

    def codes(answer: Any) -> dict[int, ErrorCode]:
        [result] = answer.results_by_transaction
        assert result.transactional_id == "tx"
        return {
            p.partition_index: p.partition_error_code
            for topic in result.topic_results
            for p in topic.results_by_partition
        }

    # Kafka 4.4 answers TRANSACTION_ABORTABLE for a partition outside the transaction,
    # at v4 as at v5.
    for version in (4, 5):
        verified = broker.call(ADD_PARTITIONS, version, transactions=(transaction(True, (0, 1)),))
        assert verified.error_code == ErrorCode.none
        assert codes(verified) == {0: ErrorCode.none, 1: ErrorCode.transaction_abortable}
    added = broker.call(ADD_PARTITIONS, 4, transactions=(transaction(False, (1,)),))
    assert codes(added) == {1: ErrorCode.none}
    assert broker.cluster.transactions.transactions["tx"].partitions == {(TOPIC, 0), (TOPIC, 1)}


def test_produce_needs_the_partition_in_the_open_transaction(broker: SansIOBroker) -> None:
    pid, epoch = begin(broker, "tx")
    assert produce(broker, pid, epoch, 0, partition=1) == ErrorCode.invalid_txn_state
    assert produce(broker, pid, epoch, 0) == ErrorCode.none
    assert end(broker, "tx", pid, epoch, commit=True) == ErrorCode.none
    assert produce(broker, pid, epoch, 1) == ErrorCode.invalid_txn_state, "committed: closed"
    fenced = init(broker, "tx")
    assert produce(broker, pid, epoch, 1) == ErrorCode.invalid_producer_epoch
    assert fenced.producer_epoch == epoch + 1


def offset_fetch(broker: SansIOBroker, group: str, version: int = 7) -> tuple[ErrorCode, int]:
    wanted = make(
        OFFSET_FETCH, version, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,)
    )
    answer = broker.call(
        OFFSET_FETCH, version, group_id=group, topics=(wanted,), require_stable=True
    )
    [partition] = answer.topics[0].partitions
    return partition.error_code, partition.committed_offset


def txn_commit(broker: SansIOBroker, pid: int, epoch: int, group: str, **member: Any) -> ErrorCode:
    partition = make(
        TXN_COMMIT,
        3,
        "TxnOffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=7,
        committed_leader_epoch=-1,
        committed_metadata="m",
    )
    topic = make(TXN_COMMIT, 3, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(partition,))
    values = {"generation_id": -1, "member_id": "", "group_instance_id": None, **member}
    answer = broker.call(
        TXN_COMMIT,
        3,
        transactional_id="tx",
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        topics=(topic,),
        **values,
    )
    return answer.topics[0].partitions[0].error_code


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transactional_offsets_are_unstable_until_the_transaction_ends(
    broker: SansIOBroker, commit: bool
) -> None:
    pid, epoch = begin(broker, "tx")
    answer = broker.call(
        ADD_OFFSETS, 3, transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert answer.error_code == ErrorCode.none
    assert txn_commit(broker, pid, epoch, "g") == ErrorCode.none
    assert offset_fetch(broker, "g") == (ErrorCode.unstable_offset_commit, -1)
    assert offset_fetch(broker, "g", version=6) == (ErrorCode.none, -1), "no require_stable"
    assert end(broker, "tx", pid, epoch, commit) == ErrorCode.none
    assert offset_fetch(broker, "g") == (ErrorCode.none, 7 if commit else -1)


def test_transactional_offset_commits_check_the_member(broker: SansIOBroker) -> None:
    pid, epoch = begin(broker, "tx")
    assert txn_commit(broker, pid, epoch, "g", member_id="ghost") == ErrorCode.unknown_member_id
    assert txn_commit(broker, pid, epoch, "g", generation_id=3) == ErrorCode.illegal_generation
    assert txn_commit(broker, pid, epoch, "") == ErrorCode.invalid_group_id


def test_transactional_commit_from_an_older_generation_never_lands(broker: SansIOBroker) -> None:
    """A member of generation 1 commits transactionally after the group moved to 2: Kafka
    answers ILLEGAL_GENERATION, and the offset is not there after the commit either."""
    groups, now = broker.cluster.groups, broker.cluster.clock.monotonic()

    def join(member_id: str, metadata: bytes) -> Any:
        slot = groups.join(
            now, group_id="g", member_id=member_id, group_instance_id=None, client_id="c",
            client_host="h", session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
            protocol_type="consumer", protocols=[("range", metadata)],
            require_known_member_id=False,
        )  # fmt: skip
        assert slot.result is not None and slot.result.error == ErrorCode.none
        return slot.result

    first = join("", b"first")
    assert join(first.member_id, b"second").generation == first.generation + 1
    pid, epoch = begin(broker, "tx")
    broker.call(
        ADD_OFFSETS, 3, transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    stale = txn_commit(
        broker, pid, epoch, "g", generation_id=first.generation, member_id=first.member_id
    )
    assert stale == ErrorCode.illegal_generation
    assert end(broker, "tx", pid, epoch, True) == ErrorCode.none
    assert offset_fetch(broker, "g") == (ErrorCode.none, -1)


def described_without_transaction(broker: SansIOBroker, tid: str) -> tuple[ErrorCode, str, int]:
    """(error, state, start time) of one id with no open transaction, read from the bytes:
    Kafka's start time -1 is a timestamp kio refuses to decode."""
    reply = broker.send(DESCRIBE, 0, transactional_ids=(tid,))
    assert isinstance(reply, bytes)
    # size, correlation id, header tags, throttle time, array length (n + 1): 4+4+1+4+1
    body = io.BytesIO(reply[14:])
    code = int.from_bytes(body.read(2), "big", signed=True)
    assert body.read(int.from_bytes(body.read(1), "big") - 1).decode() == tid
    state = body.read(int.from_bytes(body.read(1), "big") - 1).decode()
    body.read(4)  # timeout
    start = int.from_bytes(body.read(8), "big", signed=True)
    return ErrorCode(code), state, start


def test_describe_and_list_transactions(broker: SansIOBroker) -> None:
    pid, epoch = begin(broker, "open-one")
    begin(broker, "other")
    broker.clock.advance(5)
    idle = init(broker, "idle")
    [open_state] = broker.call(DESCRIBE, 0, transactional_ids=("open-one",)).transaction_states
    assert (open_state.error_code, open_state.transaction_state) == (ErrorCode.none, "Ongoing")
    assert (open_state.producer_id, open_state.producer_epoch) == (pid, epoch)
    assert open_state.transaction_timeout == datetime.timedelta(seconds=60)
    assert open_state.transaction_start_time == datetime.datetime.fromtimestamp(
        1_700_000_000, tz=datetime.UTC
    )
    assert [(t.topic, t.partitions) for t in open_state.topics] == [(TOPIC, (0,))]
    assert described_without_transaction(broker, "idle") == (ErrorCode.none, "Empty", -1)
    assert described_without_transaction(broker, "never") == (
        ErrorCode.transactional_id_not_found,
        "",
        0,
    )

    def listed(**filters: Any) -> Any:
        values = {"state_filters": (), "producer_id_filters": (), "duration_filter": -1, **filters}
        return broker.call(LIST, 1, **values)

    assert {t.transactional_id for t in listed().transaction_states} == {
        "open-one",
        "other",
        "idle",
    }
    ongoing = listed(state_filters=("Ongoing", "Sleeping"))
    assert {t.transactional_id for t in ongoing.transaction_states} == {"open-one", "other"}
    assert ongoing.unknown_state_filters == ("Sleeping",)
    by_producer = listed(producer_id_filters=(idle.producer_id,)).transaction_states
    assert [(t.transactional_id, t.transaction_state) for t in by_producer] == [("idle", "Empty")]
    assert {t.transactional_id for t in listed(duration_filter=4_000).transaction_states} == {
        "open-one",
        "other",
    }
    assert listed(duration_filter=6_000).transaction_states == ()
