"""Produce (key 0), versions 3-12.

Each partition's records must be exactly one magic-2 batch. The batch is checked (framing,
CRC32C, size against the topic's max.message.bytes, idempotent sequence) and stored as
raw bytes with its base offset rewritten. A CreateTime topic that sets
message.timestamp.before.max.ms or .after.max.ms (or the deprecated
.difference.max.ms) has each record's timestamp checked against the cluster's clock:
INVALID_TIMESTAMP, with the offending records in record_errors (v8+). A record without
a key on a compacted topic (cleanup.policy has compact) is refused the same way, with
INVALID_RECORD. acks 0 gets no response at all; acks 1 and all are the same here (there
are no followers).
A transactional batch must belong to its producer's open transaction holding the
partition (state/transaction_rules.py: Produce): v3-11 verify that the partition was
added (AddPartitionsToTxn); v12 (transaction version 2) adds it, opening the transaction
if none is. Control batches come from the transaction coordinator only (a client's is
INVALID_RECORD). Not done: v13 (topic ids).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._transactions import add_implicitly
from minibroker.handlers.registry import RequestContext, api
from minibroker.protocol import records
from minibroker.protocol.messages import SplicedResponse, build, response_class
from minibroker.protocol.produce_response import (
    ProducePartitionAnswer,
    RecordError,
    suffix_size,
    write_topic,
)
from minibroker.state import transaction_rules as txn_rules
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.producers import SequenceError
from minibroker.state.topic_errors import quoted
from minibroker.state.topics import Topic

VALID_ACKS = (0, 1, -1)
NO_TIMESTAMP = -1  # a record without a timestamp (RecordBatch.NO_TIMESTAMP)
TRANSACTION_ABORTABLE_VERSION = 11
IMPLICIT_ADD_VERSION = 12  # transaction version 2: the batch adds its partition


# The smallest record is 7 bytes (length, attributes, timestamp delta, offset delta, key
# and value lengths, header count: one varint byte each). Compressed payloads are bounded
# by a generous expansion ratio. This keeps a lying header from moving the log end offset
# by billions without decoding records on the hot path.
MIN_RECORD_BYTES = 7
MAX_COMPRESSION_RATIO = 2048


def _max_records(compression: int, batch_bytes: int) -> int:
    payload = max(batch_bytes - records.HEADER_SIZE, 0)
    if compression == 0:
        return payload // MIN_RECORD_BYTES
    return payload * MAX_COMPRESSION_RATIO // MIN_RECORD_BYTES


class _Rejected(Exception):
    def __init__(
        self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # (index of the record in its batch, what is wrong with it): Produce v8+'s
        # record_errors.
        self.record_errors = record_errors or []


def _record_error(
    record: records.Record, where: str, limits: tuple[int, int] | None
) -> tuple[ErrorCode, str] | None:
    """What is wrong with one record, as Kafka's LogValidator checks it: a compacted
    topic's record needs a key (`where` names the partition), then its CreateTime must be
    within `limits` (earliest, latest; records without a timestamp, -1, pass)."""
    if where and record.key is None:
        return (
            ErrorCode.invalid_record,
            f"Compacted topic cannot accept message without key in topic partition {where}",
        )
    if limits is not None and record.timestamp != NO_TIMESTAMP:
        earliest, latest = limits
        if not earliest <= record.timestamp <= latest:
            return (
                ErrorCode.invalid_timestamp,
                f"Timestamp {record.timestamp} of message with offset {record.offset} "
                f"is out of range. The timestamp should be within [{earliest}, {latest}]",
            )
    return None


def _check_records(
    ctx: RequestContext,
    batch: bytes | memoryview,
    compacted_partition: str,
    bounds: tuple[int, int] | None,
) -> None:
    """Refuse the batch if a record of a compacted topic has no key (INVALID_RECORD, as
    Kafka does: no later record could ever replace it) or, where the topic limits
    timestamps (`bounds`: how far behind and ahead of the broker's clock, Kafka 3.6+), a
    record's CreateTime is out of them (INVALID_TIMESTAMP, which wins when both occur).
    Every record is decoded: the header holds the batch's first and largest timestamps,
    not its smallest, and is the producer's word. Only compacted topics and topics that
    set a limit come here. `compacted_partition` is the partition's name on a compacted
    topic, else empty."""
    limits = None
    if bounds is not None:
        now = ctx.cluster.clock.wall_ms()
        limits = (now - bounds[0], now + bounds[1])
    errors: list[tuple[ErrorCode, int, str]] = []
    try:
        for index, record in enumerate(
            records.iter_records(
                batch, max_decompressed_bytes=ctx.cluster.config.max_decompressed_batch_bytes
            )
        ):
            found = _record_error(record, compacted_partition, limits)
            if found is not None:
                errors.append((found[0], index, found[1]))
    except records.CodecUnavailable as exc:
        raise _Rejected(ErrorCode.unsupported_compression_type, str(exc)) from exc
    except records.InvalidBatch as exc:
        raise _Rejected(ErrorCode.corrupt_message, str(exc)) from exc
    if not errors:
        return
    record_errors = [(index, text) for _, index, text in errors]
    if any(code == ErrorCode.invalid_timestamp for code, _, _ in errors):
        raise _Rejected(
            ErrorCode.invalid_timestamp,
            "One or more records have been rejected due to invalid timestamp",
            record_errors,
        )
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{text}')" for index, text in record_errors[:3]
    )
    raise _Rejected(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
        record_errors,
    )


def _check_transaction(
    ctx: RequestContext,
    transactional_id: str | None,
    header: records.BatchHeader,
    topic: Topic,
    index: int,
) -> None:
    """A transactional batch belongs to the open transaction of the request's
    transactional id at the transaction's producer id and epoch; before v12 the
    transaction must hold the partition already (AddPartitionsToTxn), from v12 the batch
    adds it (transaction_rules: Produce)."""
    if not transactional_id:
        raise _Rejected(
            error(txn_rules.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            "transactional records need the request's transactional id",
        )
    pid, epoch = header.producer_id, header.producer_epoch
    where = (topic.name, index)
    if ctx.version >= IMPLICIT_ADD_VERSION:
        # A fenced producer must not add the partition to the transaction of its successor.
        seen = topic.partitions[index].producers.epoch_of(pid)
        if seen is not None and epoch < seen:
            code = txn_rules.INVALID_PRODUCER_EPOCH
        else:
            code = add_implicitly(ctx, transactional_id, pid, epoch, partitions=(where,))
    else:
        code = ctx.cluster.transactions.check_produce(transactional_id, pid, epoch, where)
        if code == txn_rules.TRANSACTION_ABORTABLE and ctx.version < TRANSACTION_ABORTABLE_VERSION:
            code = txn_rules.INVALID_TXN_STATE
    if code == txn_rules.NONE:
        return
    reasons = {
        txn_rules.INVALID_PRODUCER_ID_MAPPING: (
            f"transactional id {transactional_id!r} has no producer {pid}"
        ),
        txn_rules.INVALID_PRODUCER_EPOCH: (
            f"producer {pid} epoch {epoch} is not the current epoch of {transactional_id!r}"
        ),
    }
    default = f"{topic.name}-{index} is not in an open transaction of producer {pid} epoch {epoch}"
    raise _Rejected(error(code), reasons.get(code, default))


def _append(
    ctx: RequestContext,
    topic: Topic,
    index: int,
    data: bytes | memoryview | None,
    transactional_id: str | None,
) -> tuple[int, int]:
    """Validate and append one partition's batch; return (base offset, log append time)."""
    if index < 0 or index >= len(topic.partitions):
        raise _Rejected(
            ErrorCode.unknown_topic_or_partition, f"{topic.name}-{index} does not exist"
        )
    if ctx.screened:
        if transactional_id is not None and not ctx.allows(
            Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            code = ErrorCode.transactional_id_authorization_failed
            raise _Rejected(code, "Authorization failed.")
        injected = ctx.injected_error(topic.name, index)
        if injected is not None:
            raise _Rejected(injected, f"{injected.name} for {topic.name}-{index}")
    partition = topic.partitions[index]
    if partition.leader != ctx.node_id:
        raise _Rejected(
            ErrorCode.not_leader_or_follower,
            f"broker {ctx.node_id} does not lead {topic.name}-{index} (leader {partition.leader})",
        )
    if not data:
        raise _Rejected(ErrorCode.invalid_record, "no record batch in the request")
    try:
        batches = records.split_batches(data)
    except records.CorruptBatch as exc:
        raise _Rejected(ErrorCode.corrupt_message, str(exc)) from exc
    except records.UnsupportedMagic as exc:
        raise _Rejected(ErrorCode.unsupported_for_message_format, str(exc)) from exc
    except records.InvalidBatch as exc:
        raise _Rejected(ErrorCode.corrupt_message, str(exc)) from exc
    if len(batches) != 1:
        raise _Rejected(ErrorCode.invalid_record, f"expected one record batch, got {len(batches)}")
    header, batch = batches[0]
    if header.record_count != header.last_offset_delta + 1 or header.record_count == 0:
        raise _Rejected(
            ErrorCode.invalid_record,
            f"record count {header.record_count} does not match offset delta "
            f"{header.last_offset_delta}",
        )
    if header.record_count > _max_records(header.compression, len(batch)):
        raise _Rejected(
            ErrorCode.invalid_record,
            f"{header.record_count} records cannot fit in a {len(batch)}-byte batch",
        )
    if len(batch) > topic.max_message_bytes:
        raise _Rejected(
            ErrorCode.message_too_large,
            f"batch of {len(batch)} bytes exceeds max.message.bytes {topic.max_message_bytes}",
        )
    if header.is_control:
        raise _Rejected(ErrorCode.invalid_record, "clients may not write control records")
    if header.is_transactional:
        _check_transaction(ctx, transactional_id, header, topic, index)
    bounds = topic.timestamp_bounds()
    if bounds is not None or topic.compacted:
        where = f"{topic.name}-{index}" if topic.compacted else ""
        _check_records(ctx, batch, where, bounds)
    try:
        duplicate_of = partition.producers.check(header)
    except SequenceError as exc:
        raise _Rejected(error(exc.error_code), str(exc)) from exc
    if duplicate_of is not None:
        return duplicate_of, -1
    append_time = ctx.cluster.clock.wall_ms() if topic.log_append_time else None
    try:
        result = partition.log.append(header, batch, log_append_time_ms=append_time)
    except OSError as exc:  # the data directory's disk refused the write
        if ctx.cluster.storage is not None:
            ctx.cluster.storage.storage_error(f"writing to {topic.name}-{index}", exc)
        raise _Rejected(ErrorCode.kafka_storage_error, f"cannot write the batch: {exc}") from exc
    partition.producers.record(header, result.base_offset)
    return result.base_offset, result.log_append_time


def _partition_response(
    index: int,
    code: ErrorCode,
    base_offset: int = -1,
    append_time: int = -1,
    log_start: int = -1,
    message: str | None = None,
    record_errors: list[tuple[int, str]] | None = None,
) -> ProducePartitionAnswer:
    return ProducePartitionAnswer(
        index,
        code,
        base_offset,
        append_time,
        log_start,
        tuple(RecordError(batch_index, text) for batch_index, text in record_errors or ()),
        message,
    )


API_KEY = 0


# Listed from v0 (see api_versions); a v0-2 request still closes the connection.
@api(API_KEY, "Produce", 3, 12, advertised_min_version=0)
def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    acks = request.acks
    appended: list[Any] = []
    pieces: list[bytes] = []
    for topic_data in request.topic_data:
        topic = cluster.topics.get(topic_data.name)
        partitions = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if acks not in VALID_ACKS:
                partitions.append(
                    _partition_response(
                        index,
                        ErrorCode.invalid_required_acks,
                        message=f"acks must be 0, 1 or -1, got {acks}",
                    )
                )
                continue
            if topic is None:
                partitions.append(
                    _partition_response(
                        index,
                        ErrorCode.unknown_topic_or_partition,
                        message=f"topic {quoted(topic_data.name)} does not exist",
                    )
                )
                continue
            try:
                base_offset, append_time = _append(
                    ctx, topic, index, partition_data.records, request.transactional_id
                )
            except _Rejected as rejected:
                partitions.append(
                    _partition_response(
                        index,
                        rejected.code,
                        message=rejected.message,
                        record_errors=rejected.record_errors,
                    )
                )
                continue
            appended.append(topic.partitions[index].log)
            partitions.append(
                _partition_response(
                    index,
                    ErrorCode.none,
                    base_offset,
                    append_time,
                    topic.partitions[index].log.log_start_offset,
                )
            )
        write_topic(ctx.version, topic_data.name, partitions, pieces)
    for log in appended:
        cluster.announce(log)
    if acks == 0:
        return None
    return SplicedResponse(
        _envelope(ctx.version), pieces, suffix_size(ctx.version), len(request.topic_data)
    )


@cache
def _envelope(version: int) -> Any:
    """The response without its topics, the same for every answer of a version."""
    return build(response_class(API_KEY, version), responses=(), throttle_time=NO_THROTTLE)
