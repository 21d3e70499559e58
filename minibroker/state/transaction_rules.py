"""Transactions' states and the rules between them (Kafka's TransactionCoordinator), for
both transaction protocols Kafka 4 serves: version 1, which clients use when the broker
finalizes no transaction.version feature (Kafka 3.x, or `kafka_version` 3.x here), and
version 2 (KIP-890 part 2), which a client uses when ApiVersions finalizes
transaction.version 2, as Kafka 4.x does for a new cluster and this broker does whenever
it serves Produce v12, EndTxn v5 and TxnOffsetCommit v5 (handlers/api_versions.py).

States (Kafka's TransactionState):
    Empty              a transactional id with a producer id and epoch and nothing open.
    Ongoing            partitions or a group's offsets were added: a transaction is open
                       since its first addition, and runs until EndTxn or its timeout.
    PrepareCommit      EndTxn(commit) accepted; the commit markers are being written.
    PrepareAbort       EndTxn(abort), a timeout or a fence; the abort markers are being
                       written.
    CompleteCommit     every marker written: the records are visible to read_committed
                       readers and the offsets committed.
    CompleteAbort      every marker written: the records are skipped by read_committed
                       readers and the offsets dropped.
    PrepareEpochFence  an open transaction is being fenced (a new InitProducerId for its
                       id, or its timeout): the epoch is bumped, then it aborts.
    Dead               the id expired (transactional.id.expiration.ms idle, not open):
                       it is forgotten.
Markers are written at once here, so the Prepare states pass within one request (Kafka
answers EndTxn first and writes the markers after; a client cannot tell the difference,
except that it never sees CONCURRENT_TRANSACTIONS while they are written).

Transitions (Kafka's TransactionState.validPreviousStates, turned around):
    Empty          -> Empty (InitProducerId: next epoch), Ongoing, PrepareAbort (v2), Dead
    Ongoing        -> Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence
    PrepareCommit  -> CompleteCommit
    PrepareAbort   -> CompleteAbort
    CompleteCommit -> Empty (InitProducerId), Ongoing, PrepareAbort (v2), Dead
    CompleteAbort  -> Empty (InitProducerId), Ongoing, PrepareAbort (v2), Dead
    PrepareEpochFence -> PrepareAbort
(v2: an abort with nothing open, which version 2 allows.)

Request rules (each checks in this order; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
the version that introduced it: InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn v2; TRANSACTION_ABORTABLE is INVALID_TXN_STATE before Produce v11):
    InitProducerId  timeout <= 0 or above transaction.max.timeout.ms:
                    INVALID_TRANSACTION_TIMEOUT. An unknown id gets a new producer id at
                    epoch 0. A producer id and epoch in the request (v3+, KIP-360) that are
                    not the id's current ones: PRODUCER_FENCED. Ongoing: the transaction is
                    fenced and aborted (epoch + 1) and the answer is CONCURRENT_TRANSACTIONS
                    (the client retries and gets epoch + 2). Prepare states:
                    CONCURRENT_TRANSACTIONS. Otherwise the epoch goes up by one (a new
                    producer id at epoch 0 once the epoch reaches 32766), Empty.
    AddPartitionsToTxn, AddOffsetsToTxn
                    unknown id, or another producer id: INVALID_PRODUCER_ID_MAPPING;
                    another epoch: PRODUCER_FENCED; a Prepare state:
                    CONCURRENT_TRANSACTIONS; otherwise added, Ongoing (the transaction's
                    start time is the first addition's). AddPartitionsToTxn checks the
                    partitions first: an unknown one is UNKNOWN_TOPIC_OR_PARTITION and the
                    others OPERATION_NOT_ATTEMPTED. v4+ (brokers' batched form) with
                    verify_only adds nothing: a partition not in the open transaction is
                    TRANSACTION_ABORTABLE (at v4 too, as Kafka 4.4 answers).
    EndTxn v0-4     (version 1) unknown id or producer id: INVALID_PRODUCER_ID_MAPPING;
                    another epoch: PRODUCER_FENCED; Ongoing: markers written at the
                    producer's epoch, Complete*. A retry of the outcome already reached
                    (CompleteCommit and commit, CompleteAbort and abort) is NONE; the other
                    outcome, and Empty, INVALID_TXN_STATE.
    EndTxn v5+      (version 2: the epoch goes up at every end, and the answer carries the
                    producer id and epoch to go on with; errors carry -1 and -1)
                    A retry is a request one epoch behind the id's (or, after a new
                    producer id, the old id at epoch 32766 while the new one is at 0).
                    Unknown id, or another producer id that is not such a retry:
                    INVALID_PRODUCER_ID_MAPPING. The epoch must be the id's (Ongoing,
                    Empty) or the id's or a retry's (Complete*): PRODUCER_FENCED otherwise.
                    Then, by state and outcome:
                      Ongoing           commit or abort: markers written, epoch + 1.
                      Empty             abort: epoch + 1 (nothing to mark); commit:
                                        INVALID_TXN_STATE.
                      CompleteCommit    commit: a retry is NONE, else INVALID_TXN_STATE;
                                        abort: a retry is INVALID_TXN_STATE, else epoch + 1.
                      CompleteAbort     abort: a retry is NONE, else epoch + 1; commit:
                                        INVALID_TXN_STATE.
                    The markers carry the new epoch, so the partitions refuse the old one
                    from then on. An id at epoch 32766 ends with markers at 32767 and goes
                    on with a new producer id at epoch 0 (Kafka's epoch overflow). An abort
                    with nothing open starts and ends its transaction at that moment (its
                    start time, for DescribeTransactions).
    Produce v3-11   (Kafka 3.6+ verifies each transactional batch with the coordinator)
                    no transactional id in the request: TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
                    an id that is unknown or has another producer id:
                    INVALID_PRODUCER_ID_MAPPING; another epoch: INVALID_PRODUCER_EPOCH; a
                    partition not in the id's open transaction: TRANSACTION_ABORTABLE.
    Produce v12+    (version 2) a batch at an epoch older than the one the partition holds
                    for its producer id: INVALID_PRODUCER_EPOCH, before the coordinator is
                    asked; then the coordinator adds the partition as AddPartitionsToTxn
                    does, opening a transaction if none is (PRODUCER_FENCED read as
                    INVALID_PRODUCER_EPOCH, as Kafka's brokers pass it to Produce).
    TxnOffsetCommit offsets wait in the group as pending for the producer id; the commit
                    marker makes them the group's committed offsets, the abort marker drops
                    them. v5+ (version 2) first add the group to the transaction as
                    AddOffsetsToTxn does (PRODUCER_FENCED read as INVALID_PRODUCER_EPOCH).
                    Member checks as Kafka's: a member id the group does not have
                    UNKNOWN_MEMBER_ID, a generation that is not the group's
                    ILLEGAL_GENERATION (v3+).
    Timeout         an Ongoing transaction older than its transaction.timeout.ms is fenced
                    and aborted by the coordinator (PrepareEpochFence -> PrepareAbort ->
                    CompleteAbort); the producer's next request is fenced. Time is the
                    broker clock's, so a test moving it sees the abort at once.
"""

from __future__ import annotations

import enum


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


ALLOWED_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}
    ),
    TxnState.ONGOING: frozenset(
        {
            TxnState.ONGOING,
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
            TxnState.PREPARE_EPOCH_FENCE,
        }
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}
    ),
    TxnState.COMPLETE_ABORT: frozenset(
        {TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}
    ),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset(),
}

PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETE = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    pass


# Error codes of the transaction protocol (Kafka's Errors.java).
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_COORDINATOR = 16
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

# The largest epoch a producer id is bumped to before it is replaced (Short.MAX_VALUE - 1);
# only the markers of a transaction ended there (version 2) carry the one above it.
MAX_EPOCH = 32766
