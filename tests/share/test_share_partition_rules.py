"""The share-partition rules (state/share_partitions.py), without sockets."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from minibroker.protocol import records
from minibroker.protocol.records import TRANSACTIONAL_FLAG, build_batch
from minibroker.state.log import MemoryLog, PartitionLog
from minibroker.state.share_partitions import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_REJECT,
    ACK_RELEASE,
    ACK_RENEW,
    Acquired,
    RecordState,
    SharePartition,
    SharePartitionStore,
    ShareSettings,
    duration_seconds,
)
from minibroker.state.share_sessions import MAX_EPOCH, ShareSessions

SETTINGS = ShareSettings(delivery_limit=3, max_locks=100, lock_seconds=30.0)


def append(
    log: PartitionLog,
    count: int,
    *,
    timestamp_ms: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
) -> None:
    batch = build_batch(
        [(None, b"v%d" % i) for i in range(count)],
        timestamp_ms=timestamp_ms,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
    )
    log.append(records.read_header(batch), batch)


def log_of(*batch_sizes: int) -> MemoryLog:
    log = MemoryLog()
    for size in batch_sizes:
        append(log, size)
    return log


def ack(
    partition: SharePartition,
    member: str,
    batches: list[tuple[int, int, tuple[int, ...]]],
    now: float,
    settings: ShareSettings,
    log_start: int,
) -> ErrorCode:
    """The error of an acknowledgement (its message aside)."""
    return partition.acknowledge(member, batches, now, settings, log_start)[0]


def states(partition: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [(r.first, r.last, r.state, r.delivery_count) for r in partition.runs]


def test_acquires_whole_batches_past_max_records_and_counts_a_delivery() -> None:
    log = log_of(3, 3, 3)
    partition = SharePartition(0)
    assert partition.acquire("m", 0.0, log, SETTINGS, 4) == [Acquired(0, 5, 1)]
    assert partition.acquire("m", 0.0, log, SETTINGS, 4) == [Acquired(6, 8, 1)]
    assert partition.acquire("m", 0.0, log, SETTINGS, 4) == []


def test_max_bytes_stops_before_a_batch_but_takes_the_first_whole() -> None:
    log = log_of(3, 3, 3)
    one_batch = len(log.read(0, 1 << 20)) // 3
    partition = SharePartition(0)
    assert partition.acquire("m", 0.0, log, SETTINGS, 100, max_bytes=1) == [Acquired(0, 2, 1)]
    got = partition.acquire("m", 0.0, log, SETTINGS, 100, max_bytes=2 * one_batch)
    assert got == [Acquired(3, 8, 1)]


def test_records_past_a_shorter_log_end_leave_flight() -> None:
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log_of(2, 2), SETTINGS, 10)
    shorter = log_of(2)  # what a machine crash left of the log
    assert partition.acquire("m", 100.0, shorter, SETTINGS, 10) == [Acquired(0, 1, 2)]
    assert partition.end_offset == 2


def test_share_session_rules() -> None:
    sessions = ShareSessions(max_sessions=1)
    topic = uuid.UUID(int=1)
    fetch = sessions.fetch
    assert fetch("g", "m", 1, [], [], has_acks=False).error == ErrorCode.share_session_not_found
    assert fetch("g", "m", 0, [], [], has_acks=True).error == ErrorCode.invalid_request
    opened = fetch("g", "m", 0, [(topic, 0)], [], has_acks=False)
    assert (opened.error, opened.full) == (ErrorCode.none, True)
    assert fetch("g", "x", 0, [], [], has_acks=False).error == (
        ErrorCode.share_session_limit_reached
    )
    assert fetch("g", "m", 2, [], [], has_acks=False).error == (
        ErrorCode.invalid_share_session_epoch
    )
    later = fetch("g", "m", 1, [(topic, 1)], [(topic, 0)], has_acks=False)
    assert later.session is not None and list(later.session.partitions) == [(topic, 1)]
    assert sessions.acknowledge("g", "m", 0).error == ErrorCode.invalid_share_session_epoch
    assert sessions.acknowledge("g", "m", 2).error == ErrorCode.none
    assert sessions.acknowledge("g", "m", -1).error == ErrorCode.none  # closed by the caller
    later.session.epoch = MAX_EPOCH
    assert fetch("g", "m", MAX_EPOCH, [], [], has_acks=False).session.epoch == 1  # type: ignore[union-attr]
    connection = object()
    fetch("g", "m", 0, [], [], has_acks=False, connection=connection)
    assert [x.member_id for x in sessions.connection_closed(connection)] == ["m"]
    assert sessions.get("g", "m") is None


def test_member_gone_releases_at_once_unless_a_session_holds_them() -> None:
    store = SharePartitionStore()
    log = log_of(1)
    store.log_of = lambda topic, index: log
    store.settings_of = lambda group: ShareSettings(auto_offset_reset="earliest")
    store.acquire("g", "t", 0, "m", 0.0, 10)
    store.sessions(0).fetch("g", "m", 0, [], [], has_acks=False)
    store.member_gone("g", "m", 1.0)
    partition = store.partition("g", "t", 0)
    assert partition is not None and partition.state_of(0) == (RecordState.ACQUIRED, 1)
    store.sessions(0).close("g", "m")
    store.member_gone("g", "m", 1.0)
    assert partition.state_of(0) == (RecordState.AVAILABLE, 1)


def test_strict_record_limit_splits_a_batch() -> None:
    log = log_of(5)
    partition = SharePartition(0)
    assert partition.acquire("m", 0.0, log, SETTINGS, 2, strict=True) == [Acquired(0, 1, 1)]
    assert partition.acquire("m", 0.0, log, SETTINGS, 2, strict=True) == [Acquired(2, 3, 1)]


def test_acknowledge_piecemeal_splits_runs_and_moves_the_start_offset() -> None:
    log = log_of(4)
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log, SETTINGS, 10)
    types = (ACK_ACCEPT, ACK_REJECT, ACK_RELEASE, ACK_GAP)
    assert ack(partition, "m", [(0, 3, types)], 1.0, SETTINGS, 0) == ErrorCode.none
    # 0 and 1 are done at the front: the start offset passes them, stops at the released 2.
    assert partition.start_offset == 2
    assert states(partition) == [
        (2, 2, RecordState.AVAILABLE, 1),
        (3, 3, RecordState.ARCHIVED, 1),
    ]
    assert partition.acquire("m2", 2.0, log, SETTINGS, 10) == [Acquired(2, 2, 2)]


def test_acknowledgement_by_another_member_or_of_unacquired_records_is_refused_whole() -> None:
    log = log_of(4)
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log, SETTINGS, 2, strict=True)
    assert ack(partition, "other", [(0, 1, (ACK_ACCEPT,))], 1.0, SETTINGS, 0) == (
        ErrorCode.invalid_record_state
    )
    # 2 was never taken in flight: the batch naming 0..2 changes nothing, not even 0 and 1.
    assert ack(partition, "m", [(0, 2, (ACK_ACCEPT,))], 1.0, SETTINGS, 0) == (
        ErrorCode.invalid_request
    )
    assert states(partition) == [(0, 1, RecordState.ACQUIRED, 1)]
    assert ack(partition, "m", [(0, 0, (ACK_ACCEPT,))], 1.0, SETTINGS, 0) == ErrorCode.none
    # 0 is done and behind the start offset: naming it again is skipped, as Kafka does.
    assert ack(partition, "m", [(0, 0, (ACK_ACCEPT,))], 1.0, SETTINGS, 0) == ErrorCode.none
    partition.acquire("m", 0.0, log, SETTINGS, 2, strict=True)  # 2 and 3
    assert ack(partition, "m", [(2, 2, (ACK_REJECT,))], 1.0, SETTINGS, 0) == ErrorCode.none
    # 2 is done but 1 still holds the start offset back: 2 is in flight, not Acquired.
    assert ack(partition, "m", [(2, 2, (ACK_ACCEPT,))], 1.0, SETTINGS, 0) == (
        ErrorCode.invalid_record_state
    )


def test_lock_expiry_releases_and_the_delivery_limit_archives() -> None:
    log = log_of(2)
    partition = SharePartition(0)
    for delivery in range(1, SETTINGS.delivery_limit + 1):
        now = delivery * 100.0
        assert partition.acquire("m", now, log, SETTINGS, 10) == [Acquired(0, 1, delivery)]
        assert partition.next_deadline() == now + SETTINGS.lock_seconds
        assert partition.expire(now + SETTINGS.lock_seconds, SETTINGS.delivery_limit)
    # Delivered the limit's number of times: archived, the start offset passes them.
    assert partition.runs == []
    assert partition.start_offset == 2
    assert partition.acquire("m", 1000.0, log, SETTINGS, 10) == []


def test_release_at_the_delivery_limit_archives() -> None:
    log = log_of(1)
    partition = SharePartition(0)
    limit = ShareSettings(delivery_limit=1)
    partition.acquire("m", 0.0, log, limit, 10)
    assert ack(partition, "m", [(0, 0, (ACK_RELEASE,))], 1.0, limit, 0) == ErrorCode.none
    assert partition.start_offset == 1


def test_renew_extends_the_lock() -> None:
    log = log_of(1)
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log, SETTINGS, 10)
    assert ack(partition, "m", [(0, 0, (ACK_RENEW,))], 20.0, SETTINGS, 0) == ErrorCode.none
    assert not partition.expire(35.0, SETTINGS.delivery_limit)
    assert partition.next_deadline() == 50.0


def test_member_gone_releases_its_records_only() -> None:
    log = log_of(1, 1)
    partition = SharePartition(0)
    partition.acquire("a", 0.0, log, SETTINGS, 1)
    partition.acquire("b", 0.0, log, SETTINGS, 1)
    assert partition.release_member("a", SETTINGS.delivery_limit)
    assert states(partition) == [
        (0, 0, RecordState.AVAILABLE, 1),
        (1, 1, RecordState.ACQUIRED, 1),
    ]


def test_in_flight_limit_stops_new_records_but_not_redeliveries() -> None:
    log = log_of(1, 1, 1)
    tight = ShareSettings(max_locks=2)
    partition = SharePartition(0)
    assert partition.acquire("m", 0.0, log, tight, 10) == [Acquired(0, 1, 1)]
    assert partition.acquire("m", 0.0, log, tight, 10) == []
    ack(partition, "m", [(1, 1, (ACK_RELEASE,))], 0.0, tight, 0)
    assert partition.acquire("m", 0.0, log, tight, 10) == [Acquired(1, 1, 2)]
    ack(partition, "m", [(0, 1, (ACK_ACCEPT,))], 0.0, tight, 0)
    assert partition.acquire("m", 0.0, log, tight, 10) == [Acquired(2, 2, 1)]


def test_read_committed_stops_at_the_open_transaction_and_archives_aborted_records() -> None:
    log = log_of(2)
    append(log, 2, attributes=TRANSACTIONAL_FLAG, producer_id=7)  # 2, 3
    log.append_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=0)  # 4
    append(log, 1)  # 5
    append(log, 1, attributes=TRANSACTIONAL_FLAG, producer_id=8)  # 6: open
    committed = ShareSettings(read_committed=True)
    partition = SharePartition(0)
    acquired = partition.acquire("m", 0.0, log, committed, 100)
    # The aborted records are archived, the marker acquired (consumers acknowledge it as a
    # gap), nothing at or after the open transaction's first offset.
    assert acquired == [Acquired(0, 1, 1), Acquired(4, 5, 1)]
    assert partition.end_offset == log.last_stable_offset == 6
    assert partition.state_of(2) == (RecordState.ARCHIVED, 0)


def test_compaction_gaps_are_acquired_with_their_batches_and_acknowledged_as_gaps() -> None:
    log = log_of(1, 1, 1)
    kept = [build_batch([(None, b"k")], base_offset=offset) for offset in (0, 2)]
    log.replace_before(3, kept)  # compaction removed offset 1
    partition = SharePartition(0)
    assert partition.acquire("m", 0.0, log, SETTINGS, 1) == [Acquired(0, 0, 1)]
    # The next fetch starts in the gap: it is acquired with the batch after it.
    assert partition.acquire("m", 0.0, log, SETTINGS, 1) == [Acquired(1, 2, 1)]
    types = (ACK_GAP, ACK_ACCEPT)
    assert ack(partition, "m", [(1, 2, types)], 0.0, SETTINGS, 0) == ErrorCode.none
    assert ack(partition, "m", [(0, 0, (ACK_ACCEPT,))], 0.0, SETTINGS, 0) == (ErrorCode.none)
    assert (partition.start_offset, partition.runs) == (3, [])


def test_records_deleted_while_in_flight_move_the_start_offset() -> None:
    log = log_of(2, 2, 2)
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log, SETTINGS, 3)
    log.delete_before(3)
    # Offsets before the log start are skipped, the rest must be held.
    assert ack(partition, "m", [(0, 3, (ACK_ACCEPT,))], 0.0, SETTINGS, 3) == ErrorCode.none
    assert partition.start_offset == 4
    assert partition.acquire("m", 0.0, log, SETTINGS, 10) == [Acquired(4, 5, 1)]


def test_first_fetch_starts_by_auto_offset_reset() -> None:
    store = SharePartitionStore()
    log = MemoryLog()
    append(log, 2, timestamp_ms=1_000)
    append(log, 2, timestamp_ms=5_000)
    store.log_of = lambda topic, index: log
    store.wall_ms = lambda: 6_000
    for reset, expected in [
        ("latest", []),
        ("earliest", [Acquired(0, 3, 1)]),
        ("by_duration:PT2S", [Acquired(2, 3, 1)]),
    ]:
        store.settings_of = lambda group, reset=reset: ShareSettings(auto_offset_reset=reset)
        assert store.acquire(reset, "t", 0, "m", 0.0, 10) == expected
    assert store.initialized("latest") == {("t", 0): 4}
    assert store.lag("earliest", "t", 0) == 4
    store.topic_deleted("t")
    assert store.initialized("earliest") == {}


def test_iso_durations() -> None:
    assert duration_seconds("PT1H30M") == 5400
    assert duration_seconds("P1DT2S") == 86402
    assert duration_seconds("P") is None
    assert duration_seconds("1H") is None


def test_snapshot_keeps_acknowledged_and_makes_acquired_available() -> None:
    log = log_of(2, 2)
    partition = SharePartition(0)
    partition.acquire("m", 0.0, log, SETTINGS, 10)
    ack(partition, "m", [(0, 0, (ACK_ACCEPT,)), (2, 2, (ACK_ACCEPT,))], 0.0, SETTINGS, 0)
    restored = SharePartition.from_snapshot(partition.snapshot())
    assert restored.start_offset == 1
    assert states(restored) == [
        (1, 1, RecordState.AVAILABLE, 1),
        (2, 2, RecordState.ACKNOWLEDGED, 1),
        (3, 3, RecordState.AVAILABLE, 1),
    ]


# --- the property: random fetches, acknowledgements, expiries and departures ---

MEMBERS = ("a", "b", "c")
step = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 6), st.booleans()),
    st.tuples(
        st.just("ack"),
        st.sampled_from(MEMBERS),
        st.integers(0, 30),
        st.integers(0, 4),
        st.sampled_from((ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW)),
    ),
    st.tuples(st.just("tick"), st.floats(0, 40)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("produce"), st.integers(1, 4)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.lists(step, max_size=40))
def test_no_record_is_redelivered_after_it_is_done(
    batch_sizes: Sequence[int], steps: Sequence[tuple[object, ...]]
) -> None:
    log = log_of(*batch_sizes)
    limit = ShareSettings(delivery_limit=3, max_locks=12, lock_seconds=10.0)
    partition = SharePartition(0)
    now = 0.0
    done: set[int] = set()  # accepted, rejected, gaps, or past the delivery limit
    deliveries: dict[int, int] = {}
    for action in steps:
        unfinished = {
            offset
            for run in partition.runs
            if not run.state.finished
            for offset in range(run.first, run.last + 1)
        }
        kind = action[0]
        if kind == "fetch":
            _, member, max_records, strict = action
            for item in partition.acquire(member, now, log, limit, max_records, strict=strict):
                for offset in range(item.first, item.last + 1):
                    assert offset not in done, f"offset {offset} redelivered after it was done"
                    deliveries[offset] = deliveries.get(offset, 0) + 1
                    assert item.delivery_count == deliveries[offset]
                    assert item.delivery_count <= limit.delivery_limit
        elif kind == "ack":
            _, member, first, length, ack_type = action
            last = first + length
            partition.expire(now, limit.delivery_limit)
            start, end = partition.start_offset, partition.end_offset
            in_flight = bool(partition.runs)
            held = {
                offset
                for run in partition.runs
                if run.state == RecordState.ACQUIRED and run.member == member
                for offset in range(run.first, run.last + 1)
            }
            code = ack(partition, member, [(first, last, (ack_type,))], now, limit, 0)
            # Accepted exactly when the member holds every record named in flight (those
            # before the start offset are skipped).
            named = set(range(max(first, start), last + 1))
            accepted = in_flight and last < end and named.issubset(held)
            assert (code == ErrorCode.none) == accepted
            if code == ErrorCode.none and ack_type in (ACK_ACCEPT, ACK_REJECT, ACK_GAP):
                done.update(range(first, last + 1))
        elif kind == "tick":
            now += float(action[1])  # type: ignore[arg-type]
            partition.expire(now, limit.delivery_limit)
        elif kind == "leave":
            partition.release_member(str(action[1]), limit.delivery_limit)
        else:
            append(log, int(action[1]))  # type: ignore[call-overload]
        for run in partition.runs:
            if run.state == RecordState.ARCHIVED:
                done.update(range(run.first, run.last + 1))
        # Every record done is Acknowledged or Archived, or behind the start offset.
        for offset in done:
            found = partition.state_of(offset)
            assert offset < partition.start_offset or (found and found[0].finished)
        # The start offset passed an unfinished record only when this step finished it
        # (acknowledged, or archived at the delivery limit).
        for offset in unfinished:
            if offset < partition.start_offset:
                assert offset in done or deliveries[offset] >= limit.delivery_limit
        if partition.runs:
            assert partition.runs[0].first == partition.start_offset
            assert not partition.runs[0].state.finished
            assert partition.runs[-1].last + 1 == partition.end_offset
