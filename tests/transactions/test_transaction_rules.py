"""The transaction coordinator and the partition log's transaction index, sans-IO
(the rules: minibroker/state/transaction_rules.py)."""

from __future__ import annotations

import pytest

from minibroker.config import BrokerConfig
from minibroker.protocol import records
from minibroker.protocol.records import build_batch, read_header
from minibroker.state import transaction_rules as rules
from minibroker.state.clock import FakeClock
from minibroker.state.cluster import ClusterState
from minibroker.state.log import AbortedTransaction, MemoryLog
from minibroker.state.producers import ProducerIdAllocator
from minibroker.state.transaction_rules import TxnState
from minibroker.state.transactions import TransactionCoordinator

TIMEOUT_MS = 60_000


class Markers:
    """Records what the coordinator asks to be written."""

    def __init__(self) -> None:
        self.written: list[tuple[list[tuple[str, int]], list[str], int, int, bool]] = []

    def __call__(
        self,
        partitions: object,
        groups: object,
        producer_id: int,
        epoch: int,
        commit: bool,
    ) -> None:
        self.written.append((list(partitions), list(groups), producer_id, epoch, commit))  # type: ignore[call-overload]


def coordinator(**settings: int) -> tuple[TransactionCoordinator, Markers]:
    markers = Markers()
    return (
        TransactionCoordinator(BrokerConfig(**settings), ProducerIdAllocator(), markers, lambda: 0),
        markers,
    )


def test_an_id_keeps_its_producer_id_and_each_init_bumps_the_epoch() -> None:
    txns, _ = coordinator()
    first = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    second = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    other = txns.init_producer_id(0, "other", TIMEOUT_MS)
    assert (first.error, first.epoch) == (rules.NONE, 0)
    assert (second.producer_id, second.epoch) == (first.producer_id, 1)
    assert other.producer_id != first.producer_id


def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id() -> None:
    txns, _ = coordinator()
    start = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.transactions["tx"].epoch = rules.MAX_EPOCH
    moved = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    assert moved.producer_id != start.producer_id and moved.epoch == 0
    again = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    assert (again.producer_id, again.epoch) == (moved.producer_id, 1), "the new id is kept"
    assert txns.check_produce("tx", start.producer_id, rules.MAX_EPOCH, ("t", 0)) == (
        rules.INVALID_PRODUCER_ID_MAPPING
    )


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_timeout_outside_the_limit_is_refused(timeout_ms: int) -> None:
    txns, _ = coordinator()
    assert txns.init_producer_id(0, "tx", timeout_ms).error == rules.INVALID_TRANSACTION_TIMEOUT
    assert "tx" not in txns.transactions


def test_init_with_a_stale_producer_id_and_epoch_is_fenced() -> None:
    txns, _ = coordinator()
    first = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.init_producer_id(0, "tx", TIMEOUT_MS)
    stale = txns.init_producer_id(0, "tx", TIMEOUT_MS, first.producer_id, first.epoch)
    assert stale.error == rules.PRODUCER_FENCED
    current = txns.transactions["tx"]
    bumped = txns.init_producer_id(0, "tx", TIMEOUT_MS, current.producer_id, current.epoch)
    assert (bumped.error, bumped.epoch) == (rules.NONE, 2)


def test_commit_writes_markers_to_every_partition_and_group_then_completes() -> None:
    txns, markers = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    pid, epoch = init.producer_id, init.epoch
    assert txns.add_partitions(1, "tx", pid, epoch, [("a", 1), ("a", 0)]) == rules.NONE
    assert txns.add_offsets(2, "tx", pid, epoch, "g") == rules.NONE
    assert txns.transactions["tx"].state is TxnState.ONGOING
    assert txns.check_produce("tx", pid, epoch, ("a", 0)) == rules.NONE
    assert txns.check_produce("tx", pid, epoch, ("a", 2)) == rules.TRANSACTION_ABORTABLE
    assert txns.end(3, "tx", pid, epoch, commit=True) == rules.NONE
    assert markers.written == [([("a", 0), ("a", 1)], ["g"], pid, epoch, True)]
    txn = txns.transactions["tx"]
    assert (txn.state, txn.partitions, txn.groups) == (TxnState.COMPLETE_COMMIT, set(), set())
    assert txns.check_produce("tx", pid, epoch, ("a", 0)) == rules.TRANSACTION_ABORTABLE


def test_end_retries_and_wrong_outcomes() -> None:
    txns, markers = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    pid, epoch = init.producer_id, init.epoch
    assert txns.end(0, "tx", pid, epoch, commit=True) == rules.INVALID_TXN_STATE, "Empty"
    txns.add_partitions(0, "tx", pid, epoch, [("a", 0)])
    assert txns.end(0, "tx", pid, epoch, commit=False) == rules.NONE
    assert txns.end(0, "tx", pid, epoch, commit=False) == rules.NONE, "a retry"
    assert txns.end(0, "tx", pid, epoch, commit=True) == rules.INVALID_TXN_STATE
    assert len(markers.written) == 1, "a retry writes no second marker"
    assert txns.end(0, "tx", pid + 1, epoch, commit=True) == rules.INVALID_PRODUCER_ID_MAPPING
    assert txns.end(0, "nope", pid, epoch, commit=True) == rules.INVALID_PRODUCER_ID_MAPPING
    assert txns.end(0, "tx", pid, epoch - 1, commit=False) == rules.PRODUCER_FENCED


def test_adding_needs_the_current_producer_id_and_epoch() -> None:
    txns, _ = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    pid, epoch = init.producer_id, init.epoch
    assert txns.add_partitions(0, "nope", pid, epoch, [("a", 0)]) == (
        rules.INVALID_PRODUCER_ID_MAPPING
    )
    assert txns.add_partitions(0, "tx", pid + 1, epoch, [("a", 0)]) == (
        rules.INVALID_PRODUCER_ID_MAPPING
    )
    assert txns.add_offsets(0, "tx", pid, epoch + 1, "g") == rules.PRODUCER_FENCED
    assert txns.transactions["tx"].state is TxnState.EMPTY, "nothing was added"


def test_a_new_init_fences_an_open_transaction_and_aborts_it() -> None:
    txns, markers = coordinator()
    old = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.add_partitions(0, "tx", old.producer_id, old.epoch, [("a", 0)])
    retry = txns.init_producer_id(1, "tx", TIMEOUT_MS)
    assert retry.error == rules.CONCURRENT_TRANSACTIONS
    assert markers.written == [([("a", 0)], [], old.producer_id, old.epoch + 1, False)]
    assert txns.transactions["tx"].state is TxnState.COMPLETE_ABORT
    new = txns.init_producer_id(2, "tx", TIMEOUT_MS)
    assert (new.error, new.producer_id, new.epoch) == (rules.NONE, old.producer_id, old.epoch + 2)
    assert txns.check_produce("tx", old.producer_id, old.epoch, ("a", 0)) == (
        rules.INVALID_PRODUCER_EPOCH
    )
    assert txns.end(2, "tx", old.producer_id, old.epoch, commit=True) == rules.PRODUCER_FENCED


def test_the_timeout_aborts_an_open_transaction_and_fences_its_producer() -> None:
    txns, markers = coordinator()
    init = txns.init_producer_id(0, "tx", 10_000)
    txns.add_partitions(5, "tx", init.producer_id, init.epoch, [("a", 0)])
    txns.add_partitions(8, "tx", init.producer_id, init.epoch, [("a", 1)])
    assert txns.next_deadline() == 15.0, "counted from the first addition"
    txns.tick(14.999)
    assert txns.transactions["tx"].state is TxnState.ONGOING
    txns.tick(15.0)
    assert markers.written == [([("a", 0), ("a", 1)], [], init.producer_id, init.epoch + 1, False)]
    assert txns.transactions["tx"].state is TxnState.COMPLETE_ABORT
    assert txns.end(16, "tx", init.producer_id, init.epoch, commit=True) == rules.PRODUCER_FENCED


def test_an_idle_id_expires_but_an_open_one_does_not() -> None:
    txns, _ = coordinator(transactional_id_expiration_ms=1_000, transaction_max_timeout_ms=5_000)
    idle = txns.init_producer_id(0, "idle", 5_000)
    busy = txns.init_producer_id(0, "busy", 5_000)
    txns.add_partitions(0.5, "busy", busy.producer_id, busy.epoch, [("a", 0)])
    assert txns.next_deadline() == 1.0
    txns.tick(1.0)
    assert "idle" not in txns.transactions and "busy" in txns.transactions
    again = txns.init_producer_id(1.0, "idle", 5_000)
    assert again.producer_id != idle.producer_id and again.epoch == 0


def test_verify_only_reports_partitions_not_in_the_open_transaction() -> None:
    txns, _ = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.add_partitions(0, "tx", init.producer_id, init.epoch, [("a", 0)])
    assert txns.verify_partitions("tx", init.producer_id, init.epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): rules.NONE,
        ("a", 1): rules.TRANSACTION_ABORTABLE,
    }
    assert txns.transactions["tx"].partitions == {("a", 0)}, "verifying adds nothing"


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (TxnState.EMPTY, TxnState.PREPARE_COMMIT),
        (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT),
        (TxnState.PREPARE_EPOCH_FENCE, TxnState.COMPLETE_ABORT),
        (TxnState.DEAD, TxnState.EMPTY),
    ],
)
def test_transitions_outside_the_rules_are_refused(source: TxnState, target: TxnState) -> None:
    txns, _ = coordinator()
    txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txn = txns.transactions["tx"]
    txn.state = source
    with pytest.raises(rules.IllegalTransition, match=f"{source.value} -> {target.value}"):
        txn.transition(target)


# --- the log's transaction index ---


def txn_batch(producer_id: int, count: int = 1, base_sequence: int = 0) -> bytes:
    return build_batch(
        [(None, b"v")] * count,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=base_sequence,
        attributes=records.TRANSACTIONAL_FLAG,
    )


def append(log: MemoryLog, batch: bytes) -> int:
    return log.append(read_header(batch), batch).base_offset


def test_the_last_stable_offset_is_the_oldest_open_transactions_first_offset() -> None:
    log = MemoryLog()
    append(log, build_batch([(None, b"plain")]))
    assert log.last_stable_offset == 1
    append(log, txn_batch(7, count=2))  # offsets 1-2
    append(log, txn_batch(8))  # offset 3
    append(log, txn_batch(7, base_sequence=2))  # offset 4: 7's transaction stays at 1
    assert (log.last_stable_offset, log.high_watermark) == (1, 5)
    assert log.open_transaction_start(7) == 1
    assert log.append_marker(7, 0, commit=True, coordinator_epoch=0, now_ms=5) == 5
    assert log.last_stable_offset == 3
    assert log.append_marker(8, 0, commit=False, coordinator_epoch=0, now_ms=5) == 6
    assert log.last_stable_offset == log.high_watermark == 7
    assert log.aborted == [AbortedTransaction(8, 3, 6)]


def test_markers_are_control_batches_as_kafka_writes_them() -> None:
    log = MemoryLog()
    append(log, txn_batch(7))
    log.append_marker(7, 3, commit=False, coordinator_epoch=0, now_ms=1234)
    marker = log.batches()[1]
    header = read_header(marker)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert (header.base_offset, header.record_count, header.max_timestamp) == (1, 1, 1234)
    [record] = list(records.iter_records(marker))
    assert record.key == b"\x00\x00\x00\x00", "version 0, type 0: abort"
    assert record.value == b"\x00\x00\x00\x00\x00\x00", "version 0, coordinator epoch 0"
    assert records.crc32c(marker[21:]) == int.from_bytes(marker[17:21], "big")


def test_read_committed_reads_stop_before_the_last_stable_offset() -> None:
    log = MemoryLog()
    append(log, build_batch([(None, b"a")]))
    open_batch = txn_batch(7)
    append(log, open_batch)
    append(log, build_batch([(None, b"b")]))
    size = len(log.batches()[0])
    _, total = log.read_pieces(0, 10_000, end_offset=log.last_stable_offset)
    assert total == size and log.bytes_from(0, log.last_stable_offset) == size
    assert log.offset_after_read(0, total) == 1
    assert log.read_pieces(1, 10_000, end_offset=log.last_stable_offset) == ([], 0)
    _, everything = log.read_pieces(0, 10_000)
    assert everything == log.bytes_from(0) == log.size_bytes
    assert log.offset_after_read(0, everything) == 3


def test_aborted_transactions_a_read_touches() -> None:
    log = MemoryLog()
    append(log, txn_batch(7))  # 0
    log.append_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=0)  # 1
    append(log, txn_batch(8))  # 2
    append(log, build_batch([(None, b"x")]))  # 3
    log.append_marker(8, 0, commit=False, coordinator_epoch=0, now_ms=0)  # 4
    assert log.aborted_between(0, 5) == [AbortedTransaction(7, 0, 1), AbortedTransaction(8, 2, 4)]
    assert log.aborted_between(2, 5) == [AbortedTransaction(8, 2, 4)], "7's marker is before"
    assert log.aborted_between(0, 2) == [AbortedTransaction(7, 0, 1)], "8's begins at the bound"
    log.delete_before(2)
    assert log.aborted == [AbortedTransaction(8, 2, 4)], "deleted with the records"


def test_a_marker_fences_older_epochs_in_the_partition() -> None:
    cluster = ClusterState(clock=FakeClock())
    cluster.topics.create("a", 1)
    init = cluster.transactions.init_producer_id(0, "tx", TIMEOUT_MS)
    pid = init.producer_id
    cluster.transactions.add_partitions(0, "tx", pid, init.epoch, [("a", 0)])
    assert cluster.transactions.init_producer_id(0, "tx", TIMEOUT_MS).error == (
        rules.CONCURRENT_TRANSACTIONS
    )
    partition = cluster.topics.get("a").partitions[0]  # type: ignore[union-attr]
    [state] = partition.producers.active()
    assert (state.producer_id, state.epoch) == (pid, init.epoch + 1)
    assert read_header(partition.log.batches()[0]).is_control


def test_timers_of_many_ids_fire_in_order_and_skip_what_moved_on() -> None:
    txns, markers = coordinator(transactional_id_expiration_ms=100_000)
    opened = []
    for index in range(50):
        init = txns.init_producer_id(0, f"tx-{index}", 1_000 + index)
        txns.add_partitions(0, f"tx-{index}", init.producer_id, init.epoch, [("a", index)])
        opened.append(init)
    for index in range(0, 50, 2):  # every other one ends before its timeout
        init = opened[index]
        txns.end(0.5, f"tx-{index}", init.producer_id, init.epoch, commit=True)
    assert txns.next_deadline() == 1.001, "tx-0's timeout is gone: tx-1 comes first"
    txns.tick(1.0095)
    aborted = [written[0] for written in markers.written if not written[4]]
    assert aborted == [[("a", 1)], [("a", 3)], [("a", 5)], [("a", 7)], [("a", 9)]]
    txns.tick(2.0)
    assert sum(not written[4] for written in markers.written) == 25
    assert txns.next_deadline() == 100.5, "then the committed ids' expiry"


def test_deleting_records_below_an_open_transaction_moves_its_stable_offset_up() -> None:
    log = MemoryLog()
    append(log, txn_batch(7, count=3))  # 0-2, open
    append(log, build_batch([(None, b"x")]))  # 3
    assert log.last_stable_offset == 0
    log.delete_before(2)
    assert log.last_stable_offset == 2


@pytest.mark.parametrize(
    "state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE]
)
def test_a_transaction_being_ended_answers_concurrent_transactions(state: TxnState) -> None:
    """Markers are written within one request here, so the Prepare states pass unseen;
    should one remain (a marker write that failed), every request waits for it as on
    Kafka."""
    txns, markers = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    pid, epoch = init.producer_id, init.epoch
    txns.add_partitions(0, "tx", pid, epoch, [("a", 0)])
    txns.transactions["tx"].state = state
    assert txns.init_producer_id(1, "tx", TIMEOUT_MS).error == rules.CONCURRENT_TRANSACTIONS
    assert txns.add_partitions(1, "tx", pid, epoch, [("a", 1)]) == rules.CONCURRENT_TRANSACTIONS
    assert txns.add_offsets(1, "tx", pid, epoch, "g") == rules.CONCURRENT_TRANSACTIONS
    assert txns.end(1, "tx", pid, epoch, commit=True) == rules.CONCURRENT_TRANSACTIONS
    assert txns.check_produce("tx", pid, epoch, ("a", 0)) == rules.CONCURRENT_TRANSACTIONS
    assert markers.written == [], "nothing was written meanwhile"


def test_the_shortest_timeout_is_one_millisecond() -> None:
    txns, _ = coordinator()
    assert txns.init_producer_id(0, "tx", 1).error == rules.NONE
    assert txns.transactions["tx"].timeout_ms == 1


def test_a_transaction_begun_by_adding_offsets_times_out_too() -> None:
    txns, markers = coordinator()
    init = txns.init_producer_id(0, "tx", 10_000)
    assert txns.add_offsets(3, "tx", init.producer_id, init.epoch, "g") == rules.NONE
    assert txns.next_deadline() == 13.0
    txns.tick(13.0)
    assert markers.written == [([], ["g"], init.producer_id, init.epoch + 1, False)]


def test_expiry_counts_from_the_last_init_or_end() -> None:
    txns, _ = coordinator(transactional_id_expiration_ms=10_000)
    init = txns.init_producer_id(5, "tx", TIMEOUT_MS)
    assert txns.next_deadline() == 15.0, "from its creation"
    txns.add_partitions(6, "tx", init.producer_id, init.epoch, [("a", 0)])
    txns.end(8, "tx", init.producer_id, init.epoch, commit=True)
    txns.tick(15.0)
    assert "tx" in txns.transactions, "ended at 8: it expires at 18"
    txns.tick(18.0)
    assert "tx" not in txns.transactions


def test_an_expired_id_leaves_no_timer_that_fails_later() -> None:
    """An id whose transaction ended before its timeout can expire before that timeout
    would have come; the timeout's old timer finds nothing and is dropped."""
    txns, _ = coordinator(transactional_id_expiration_ms=1_000, transaction_max_timeout_ms=5_000)
    init = txns.init_producer_id(0, "tx", 5_000)
    txns.add_partitions(0, "tx", init.producer_id, init.epoch, [("a", 0)])
    txns.end(0.5, "tx", init.producer_id, init.epoch, commit=False)
    txns.tick(1.5)
    assert "tx" not in txns.transactions
    txns.tick(5.0)
    assert txns.next_deadline() is None


def test_verify_only_with_a_stale_epoch_is_fenced_for_every_partition() -> None:
    txns, _ = coordinator()
    init = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.add_partitions(0, "tx", init.producer_id, init.epoch, [("a", 0)])
    assert txns.verify_partitions("tx", init.producer_id, init.epoch - 1, [("a", 0), ("a", 1)]) == {
        ("a", 0): rules.PRODUCER_FENCED,
        ("a", 1): rules.PRODUCER_FENCED,
    }


def test_a_new_producer_id_after_an_exhausted_epoch_writes_its_transactions() -> None:
    txns, _ = coordinator()
    txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.transactions["tx"].epoch = rules.MAX_EPOCH
    moved = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    assert txns.add_partitions(0, "tx", moved.producer_id, 0, [("a", 0)]) == rules.NONE
    assert txns.check_produce("tx", moved.producer_id, 0, ("a", 0)) == rules.NONE


def test_an_end_past_the_last_epoch_is_retried_across_a_restart() -> None:
    """EndTxn v5 at epoch 32766 moves the id to a new producer id; the replaced one is
    kept with the state, so the client's retry is still answered after a restart."""
    txns, markers = coordinator()
    old = txns.init_producer_id(0, "tx", TIMEOUT_MS)
    txns.transactions["tx"].epoch = rules.MAX_EPOCH
    txns.add_partitions(0, "tx", old.producer_id, rules.MAX_EPOCH, [("a", 0)])
    ended = txns.end_bumping_epoch(1, "tx", old.producer_id, rules.MAX_EPOCH, commit=True)
    assert ended.error == rules.NONE and ended.epoch == 0 and ended.producer_id != old.producer_id
    assert markers.written == [([("a", 0)], [], old.producer_id, rules.MAX_EPOCH + 1, True)]
    restarted, _ = coordinator()
    restarted.restore(2, txns.state())
    retried = restarted.end_bumping_epoch(3, "tx", old.producer_id, rules.MAX_EPOCH, commit=True)
    assert retried == ended
    # what an older broker saved: six fields, no replaced producer id
    restarted.restore(4, [row[:6] for row in txns.state()])
    assert restarted.transactions["tx"].producer_id == ended.producer_id
    assert restarted.end_bumping_epoch(5, "tx", old.producer_id, rules.MAX_EPOCH, True).error == (
        rules.INVALID_PRODUCER_ID_MAPPING
    )
