"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
transactions they open and end (the rules: transaction_rules.py).

Sans-IO: every call takes `now` (the broker clock's monotonic seconds). Ending a
transaction hands its partitions and groups to a MarkerWriter, which appends the commit or
abort markers to the partition logs and completes the groups' pending offsets before the
call returns. `next_deadline()` and `tick(now)` drive the timeouts, as for groups: each
transactional id's next deadline (its open transaction's timeout, or its expiry while
nothing is open) is pushed on a heap whenever it changes, and entries that no longer match
are dropped when they reach the top, so neither call scans every id.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from minibroker.config import BrokerConfig
from minibroker.state import transaction_rules as rules
from minibroker.state.producers import ProducerIdAllocator
from minibroker.state.transaction_rules import TxnState

NO_PRODUCER_ID = -1
NO_EPOCH = -1
NO_START = -1

TopicPartition = tuple[str, int]


class MarkerWriter(Protocol):
    def __call__(
        self,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        producer_id: int,
        epoch: int,
        commit: bool,
    ) -> None: ...


@dataclass(slots=True)
class Transaction:
    """One transactional id's state (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started_at: float = 0.0  # monotonic, when the open transaction began
    # The same as wall time (DescribeTransactions): kept once the transaction completes,
    # NO_START from the next InitProducerId, as Kafka reports it.
    start_wall_ms: int = -1
    # Monotonic: the last InitProducerId or end of a transaction; an id with nothing open
    # expires transactional.id.expiration.ms after it.
    updated_at: float = 0.0
    # The producer id this one replaced when an EndTxn v5 ran out of epochs: a retry of
    # that EndTxn still names it.
    previous_producer_id: int = NO_PRODUCER_ID

    def transition(self, target: TxnState) -> None:
        if target not in rules.ALLOWED_TRANSITIONS[self.state]:
            raise rules.IllegalTransition(
                f"transaction {self.transactional_id}: {self.state.value} -> {target.value}"
            )
        self.state = target

    @property
    def deadline(self) -> float | None:
        """When an open transaction times out, or None."""
        if self.state is not TxnState.ONGOING:
            return None
        return self.started_at + self.timeout_ms / 1000


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's and EndTxn v5's answer: the producer id and epoch to go on with."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        producer_ids: ProducerIdAllocator,
        write_markers: MarkerWriter,
        wall_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self._producer_ids = producer_ids
        self._write_markers = write_markers
        self._wall_ms = wall_ms
        self.transactions: dict[str, Transaction] = {}
        self._deadlines: list[tuple[float, str]] = []  # (deadline, transactional id)
        # Told when a transaction begins: its timeout is a new, possibly earliest, deadline.
        self.on_change: Callable[[], None] | None = None

    def _deadline_of(self, txn: Transaction) -> float | None:
        if txn.state is TxnState.ONGOING:
            return txn.deadline
        if txn.state is TxnState.EMPTY or txn.state in rules.COMPLETE:
            return txn.updated_at + self.config.transactional_id_expiration_ms / 1000
        return None

    def _schedule(self, txn: Transaction) -> None:
        deadline = self._deadline_of(txn)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, txn.transactional_id))

    # --- InitProducerId ---

    def init_producer_id(
        self,
        now: float,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        epoch: int = NO_EPOCH,
    ) -> InitResult:
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(rules.INVALID_TRANSACTION_TIMEOUT)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            new_id, new_epoch = self._producer_ids.allocate()
            txn = Transaction(transactional_id, new_id, new_epoch, timeout_ms, updated_at=now)
            self.transactions[transactional_id] = txn
            self._schedule(txn)
            return InitResult(rules.NONE, new_id, new_epoch)
        if producer_id != NO_PRODUCER_ID and (producer_id, epoch) != (txn.producer_id, txn.epoch):
            return InitResult(rules.PRODUCER_FENCED)
        if txn.state in rules.PREPARING or txn.state is TxnState.PREPARE_EPOCH_FENCE:
            return InitResult(rules.CONCURRENT_TRANSACTIONS)
        if txn.state is TxnState.ONGOING:
            # The open transaction is fenced and aborted; the client retries.
            self._fence_and_abort(now, txn)
            return InitResult(rules.CONCURRENT_TRANSACTIONS)
        self._bump_epoch(txn)
        txn.timeout_ms = timeout_ms
        txn.transition(TxnState.EMPTY)
        txn.partitions.clear()
        txn.groups.clear()
        txn.start_wall_ms = NO_START
        txn.updated_at = now
        self._schedule(txn)
        return InitResult(rules.NONE, txn.producer_id, txn.epoch)

    def _bump_epoch(self, txn: Transaction) -> None:
        if txn.epoch >= rules.MAX_EPOCH:
            txn.producer_id, txn.epoch = self._producer_ids.allocate()
        else:
            txn.epoch += 1

    def _fence_and_abort(self, now: float, txn: Transaction) -> None:
        txn.transition(TxnState.PREPARE_EPOCH_FENCE)
        # The markers carry the fenced epoch, so the partitions refuse the old one from now.
        self._bump_epoch(txn)
        txn.transition(TxnState.PREPARE_ABORT)
        self._complete(now, txn, commit=False)

    def _complete(self, now: float, txn: Transaction, *, commit: bool) -> None:
        """Write the markers at the id's producer id and epoch, then complete."""
        self._write_markers(
            sorted(txn.partitions), sorted(txn.groups), txn.producer_id, txn.epoch, commit
        )
        txn.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        txn.partitions.clear()
        txn.groups.clear()
        txn.updated_at = now
        self._schedule(txn)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> int:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return rules.INVALID_PRODUCER_ID_MAPPING
        if txn.epoch != epoch:
            return rules.PRODUCER_FENCED
        if txn.state in rules.PREPARING or txn.state is TxnState.PREPARE_EPOCH_FENCE:
            return rules.CONCURRENT_TRANSACTIONS
        return rules.NONE

    def _begin(self, now: float, txn: Transaction) -> None:
        if txn.state is not TxnState.ONGOING:
            txn.transition(TxnState.ONGOING)
            txn.started_at = now
            txn.start_wall_ms = self._wall_ms()
            self._schedule(txn)
            if self.on_change is not None:
                self.on_change()

    def add_partitions(
        self,
        now: float,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> int:
        return self._add(now, transactional_id, producer_id, epoch, partitions=partitions)

    def add_offsets(
        self, now: float, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> int:
        return self._add(now, transactional_id, producer_id, epoch, groups=(group_id,))

    def _add(
        self,
        now: float,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        *,
        partitions: Iterable[TopicPartition] = (),
        groups: Iterable[str] = (),
    ) -> int:
        """AddPartitionsToTxn and AddOffsetsToTxn: the transaction begins (or goes on)."""
        code = self._check_producer(transactional_id, producer_id, epoch)
        if code != rules.NONE:
            return code
        txn = self.transactions[transactional_id]
        self._begin(now, txn)
        txn.partitions.update(partitions)
        txn.groups.update(groups)
        return rules.NONE

    def add_implicitly(
        self,
        now: float,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        *,
        partitions: Iterable[TopicPartition] = (),
        groups: Iterable[str] = (),
    ) -> int:
        """Produce v12+ and TxnOffsetCommit v5+ (transaction version 2): the partition or
        group joins the transaction, which begins if none is open. A fenced epoch is
        INVALID_PRODUCER_EPOCH, the error those requests know for it."""
        code = self._add(
            now, transactional_id, producer_id, epoch, partitions=partitions, groups=groups
        )
        return rules.INVALID_PRODUCER_EPOCH if code == rules.PRODUCER_FENCED else code

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ verify_only: which partitions the open transaction holds."""
        code = self._check_producer(transactional_id, producer_id, epoch)
        if code != rules.NONE:
            return dict.fromkeys(partitions, code)
        txn = self.transactions[transactional_id]
        return {
            partition: rules.NONE
            if txn.state is TxnState.ONGOING and partition in txn.partitions
            else rules.TRANSACTION_ABORTABLE
            for partition in partitions
        }

    # --- EndTxn ---

    def end(
        self, now: float, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> int:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return rules.INVALID_PRODUCER_ID_MAPPING
        if txn.epoch != epoch:
            return rules.PRODUCER_FENCED
        if txn.state is TxnState.ONGOING:
            txn.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
            self._complete(now, txn, commit=commit)
            return rules.NONE
        if txn.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return rules.NONE  # a retry of the outcome already reached
        if txn.state in rules.PREPARING or txn.state is TxnState.PREPARE_EPOCH_FENCE:
            return rules.CONCURRENT_TRANSACTIONS
        return rules.INVALID_TXN_STATE

    def end_bumping_epoch(
        self, now: float, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> InitResult:
        """EndTxn v5+ (transaction version 2): every end moves the epoch on, and the answer
        carries the producer id and epoch the client goes on with."""
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return InitResult(rules.INVALID_PRODUCER_ID_MAPPING)
        # A retry of an end that ran out of epochs names the replaced producer id.
        retry_on_overflow = (
            producer_id == txn.previous_producer_id != txn.producer_id
            and epoch == rules.MAX_EPOCH
            and txn.epoch == 0
        )
        retry = retry_on_overflow or txn.epoch == epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            return InitResult(rules.INVALID_PRODUCER_ID_MAPPING)
        if txn.state in rules.COMPLETE:
            valid_epoch = retry or epoch == txn.epoch
        else:
            valid_epoch = epoch == txn.epoch
        if not valid_epoch:
            return InitResult(rules.PRODUCER_FENCED)
        if txn.state in rules.PREPARING or txn.state is TxnState.PREPARE_EPOCH_FENCE:
            return InitResult(rules.CONCURRENT_TRANSACTIONS)
        reached = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.state is TxnState.ONGOING or (
            not commit and not retry and txn.state in {TxnState.EMPTY, *rules.COMPLETE}
        ):
            self._end_at_next_epoch(now, txn, commit=commit)
            return InitResult(rules.NONE, txn.producer_id, txn.epoch)
        if retry and txn.state is reached:
            return InitResult(rules.NONE, txn.producer_id, txn.epoch)
        return InitResult(rules.INVALID_TXN_STATE)

    def _end_at_next_epoch(self, now: float, txn: Transaction, *, commit: bool) -> None:
        """End the open transaction (or, aborting, one with nothing in it) with markers at
        the next epoch; an id that was at the last epoch moves to a new producer id."""
        if txn.state is not TxnState.ONGOING:
            # Nothing was added: the transaction starts and ends now.
            txn.started_at = now
            txn.start_wall_ms = self._wall_ms()
        txn.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        exhausted = txn.epoch >= rules.MAX_EPOCH
        txn.epoch += 1
        self._complete(now, txn, commit=commit)
        if exhausted:
            txn.previous_producer_id = txn.producer_id
            txn.producer_id, txn.epoch = self._producer_ids.allocate()

    # --- the partitions' view (Produce) ---

    def check_produce(
        self, transactional_id: str, producer_id: int, epoch: int, partition: TopicPartition
    ) -> int:
        """Whether a transactional batch the request names `transactional_id` for may be
        appended to `partition` (Kafka's verification of the transaction)."""
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return rules.INVALID_PRODUCER_ID_MAPPING
        if epoch != txn.epoch:
            return rules.INVALID_PRODUCER_EPOCH
        if txn.state in rules.PREPARING or txn.state is TxnState.PREPARE_EPOCH_FENCE:
            return rules.CONCURRENT_TRANSACTIONS
        if txn.state is not TxnState.ONGOING or partition not in txn.partitions:
            return rules.TRANSACTION_ABORTABLE
        return rules.NONE

    # --- timeouts and expiry ---

    def next_deadline(self) -> float | None:
        """The earliest time `tick` has something to do, or None."""
        heap = self._deadlines
        while heap:
            deadline, transactional_id = heap[0]
            txn = self.transactions.get(transactional_id)
            if txn is not None and self._deadline_of(txn) == deadline:
                return deadline
            heapq.heappop(heap)  # stale: the id moved on or is gone
        return None

    def tick(self, now: float) -> None:
        """Abort the transactions past their timeout; forget ids idle past their expiry."""
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            deadline, transactional_id = heapq.heappop(heap)
            txn = self.transactions.get(transactional_id)
            if txn is None or self._deadline_of(txn) != deadline:
                continue
            if txn.state is TxnState.ONGOING:
                self._fence_and_abort(now, txn)
            else:
                txn.transition(TxnState.DEAD)
                del self.transactions[transactional_id]

    # --- kept across a clean restart (storage/data_dir.py) ---

    def state(self) -> list[list[Any]]:
        """Each transactional id's producer id, epoch, timeout, state, start and the
        producer id it replaced, as plain data. No state between two requests is a
        PREPARE one: markers are written before a request that ends a transaction is
        answered."""
        return [
            [
                txn.transactional_id,
                txn.producer_id,
                txn.epoch,
                txn.timeout_ms,
                txn.state.value,
                txn.start_wall_ms,
                txn.previous_producer_id,
            ]
            for txn in self.transactions.values()
        ]

    def restore(self, now: float, saved: Iterable[list[Any]]) -> None:
        """Take what `state()` gave after a restart. A transaction that was open has been
        aborted by then (its partitions' logs wrote the markers): its producer is fenced,
        as when a transaction times out, so it cannot go on with a transaction whose
        first records are gone."""
        restored: dict[str, Transaction] = {}
        for row in saved:
            transactional_id, producer_id, epoch, timeout_ms, state, start = row[:6]
            # (state saved before the previous producer id was kept has six fields)
            previous = row[6] if len(row) > 6 else NO_PRODUCER_ID
            txn = Transaction(
                str(transactional_id),
                int(producer_id),
                int(epoch),
                int(timeout_ms),
                TxnState(state),
                start_wall_ms=int(start),
                updated_at=now,
                previous_producer_id=int(previous),
            )
            if txn.state not in (TxnState.ONGOING, TxnState.EMPTY, *rules.COMPLETE):
                raise ValueError(f"transaction {transactional_id}: state {state}")
            self._producer_ids.seen(txn.producer_id)
            restored[txn.transactional_id] = txn
        self.transactions = restored
        for txn in restored.values():
            if txn.state is TxnState.ONGOING:
                # Its partitions are not kept (their markers are written): fencing and
                # aborting it only moves its state and epoch on, as a timeout would.
                self._fence_and_abort(now, txn)
            else:
                self._schedule(txn)

    # --- administration ---

    def describe(self, transactional_id: str) -> Transaction | None:
        return self.transactions.get(transactional_id)

    def ongoing_partitions(self) -> set[TopicPartition]:
        return {p for txn in self.transactions.values() for p in txn.partitions}
