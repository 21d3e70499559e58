"""The console's JSON API as plain functions of the cluster state (sans-IO).

Each view reads (or, for the writes, changes) `ClusterState` directly: the server calls
them on the broker's event loop, so nothing here awaits or locks. A view answers a
`Reply` (status and a JSON-able body); bad input raises `Refused` with the HTTP status.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.faults import Faults, parse_fault
from minibroker.protocol import messages, records
from minibroker.protocol.consumer_protocol import parse_assignment
from minibroker.state.acl import AclFilter
from minibroker.state.cluster import ClusterState
from minibroker.state.share_groups import share_group_view
from minibroker.state.topic_errors import TopicError

MAX_MESSAGES = 500
DEFAULT_MESSAGES = 50
READ_BYTES = 4 * 1024 * 1024  # read from a partition at a time
MAX_READS = 4  # a browse reads at most MAX_READS * READ_BYTES (past control batches)
SHOWN_BYTES = 16 * 1024  # of a key, value or header as text
HEX_BYTES = 4 * 1024  # of a key, value or header as hex
SHOWN_TOTAL = 4 * 1024 * 1024  # a page of messages stops after about this much shown
CONFLUENT_MAGIC = 0

# Schema id -> (schema type, schema text), or None when the registry has no such id.
SchemaLookup = Callable[[int], "tuple[str, str] | None"]


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: Any


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def ok(body: Any) -> Reply:
    return Reply(200, body)


# --- topics ---


def topics(state: ClusterState) -> Reply:
    listed = []
    for name in sorted(state.topics.names()):
        topic = state.topics.get(name)
        if topic is None:
            continue
        listed.append(
            {
                "name": name,
                "internal": topic.internal,
                "partitions": [
                    {
                        "partition": p.index,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "log_start": p.log.log_start_offset,
                        "end": p.log.high_watermark,
                        "last_stable": p.log.last_stable_offset,
                    }
                    for p in topic.partitions
                ],
                "configs": {
                    key: {"value": value, "default": not set_by_topic}
                    for key, (value, set_by_topic) in sorted(topic.effective_configs().items())
                },
            }
        )
    return ok({"topics": listed})


def create_topic(state: ClusterState, body: Mapping[str, Any]) -> Reply:
    name = _text(body, "name")
    partitions = _int(body.get("partitions", 1), "partitions")
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
    ):
        raise Refused(400, "configs: an object of strings")
    try:
        state.topics.create(name, partitions, configs=configs)
    except TopicError as exc:
        raise Refused(400, f"{_error_name(exc.error_code)}: {exc.message}") from exc
    return Reply(201, {"created": name})


def delete_topic(state: ClusterState, name: str) -> Reply:
    try:
        state.topics.delete(name)
    except TopicError as exc:
        raise Refused(404, exc.message) from exc
    state.groups.remove_topic(name)
    return ok({"deleted": name})


# --- messages ---


def browse(
    state: ClusterState,
    query: Mapping[str, str],
    lookup_schema: SchemaLookup | None,
) -> Reply:
    topic_name = query.get("topic", "")
    partition = _partition(state, topic_name, _int(query.get("partition", "0"), "partition"))
    log = partition.log
    limit = min(max(_int(query.get("limit", str(DEFAULT_MESSAGES)), "limit"), 1), MAX_MESSAGES)
    if "time" in query:
        found = log.offset_for_timestamp(_int(query["time"], "time"))
        start = log.high_watermark if found is None else found[0]
    else:
        start = _int(query.get("offset", str(log.log_start_offset)), "offset")
        if start < 0:  # from the end: the last -start messages
            start = max(log.high_watermark + start, log.log_start_offset)
    start = max(start, log.log_start_offset)
    shown: list[dict[str, Any]] = []
    unreadable: list[dict[str, Any]] = []
    budget = SHOWN_TOTAL
    offset = start
    for _ in range(MAX_READS):
        if len(shown) >= limit or offset >= log.high_watermark:
            break
        data = log.read(offset, READ_BYTES)
        if not data:
            break
        next_offset = offset
        for header, batch in records.split_batches(data):
            next_offset = header.base_offset + header.last_offset_delta + 1
            if header.is_control:
                continue
            try:
                for record in records.iter_records(batch):
                    if offset <= record.offset < log.high_watermark and len(shown) < limit:
                        shown.append(_message(record, lookup_schema))
                        budget -= _shown_size(record)
            except records.InvalidBatch as exc:  # a codec not installed, or over the limit
                unreadable.append({"offset": header.base_offset, "error": str(exc)[:500]})
            if len(shown) >= limit or budget <= 0:
                break
        if next_offset <= offset or budget <= 0:
            break
        offset = next_offset
    return ok(
        {
            "topic": topic_name,
            "partition": partition.index,
            "from": start,
            "log_start": log.log_start_offset,
            "end": log.high_watermark,
            "messages": shown,
            "unreadable": unreadable,  # batches shown as their first offset only
        }
    )


def produce(state: ClusterState, body: Mapping[str, Any], now_ms: int) -> Reply:
    topic_name = _text(body, "topic")
    topic = state.topics.get(topic_name)
    if topic is None:
        raise Refused(404, f"no topic {topic_name!r}")
    partition = _partition(state, topic_name, _int(body.get("partition", 0), "partition"))
    headers = body.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise Refused(400, "headers: an object of strings")
    key = _bytes_of(body.get("key"), "key")
    value = _bytes_of(body.get("value"), "value")
    batch = records.build_batch(
        [(key, value)],
        timestamp_ms=now_ms,
        headers=[(name, text.encode()) for name, text in headers.items()],
    )
    if len(batch) > topic.max_message_bytes:
        raise Refused(413, f"over max.message.bytes ({topic.max_message_bytes})")
    ((header, stored),) = records.split_batches(batch)
    append_time = now_ms if topic.log_append_time else None
    try:
        result = partition.log.append(header, stored, log_append_time_ms=append_time)
    except OSError as exc:  # the data directory's disk refused the write
        if state.storage is not None:
            state.storage.storage_error(f"writing to {topic_name}-{partition.index}", exc)
        raise Refused(503, f"cannot write the message: {exc}") from exc
    state.announce(partition.log)  # fetches waiting for data answer now
    return Reply(
        201, {"topic": topic_name, "partition": partition.index, "offset": result.base_offset}
    )


def _shown_size(record: records.Record) -> int:
    parts = [record.key, record.value, *(value for _, value in record.headers)]
    return sum(min(len(part), SHOWN_BYTES) + 100 for part in parts if part is not None)


def _message(record: records.Record, lookup_schema: SchemaLookup | None) -> dict[str, Any]:
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _shown(record.key, None),
        "value": _shown(record.value, lookup_schema),
        "headers": [{"key": name, "value": _shown(value, None)} for name, value in record.headers],
    }


def _shown(data: bytes | None, lookup_schema: SchemaLookup | None) -> dict[str, Any] | None:
    """A key, value or header as text (cut at SHOWN_BYTES), JSON and hex (cut at HEX_BYTES)."""
    if data is None:
        return None
    shown: dict[str, Any] = {
        "size": len(data),
        "hex": data[:HEX_BYTES].hex(),
        "truncated": len(data) > SHOWN_BYTES,
    }
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        shown["text"] = text[:SHOWN_BYTES]
        if len(data) <= SHOWN_BYTES:
            with contextlib.suppress(ValueError, RecursionError):
                shown["json"] = json.loads(text)
    if lookup_schema is not None and len(data) > 5 and data[0] == CONFLUENT_MAGIC:
        decoded = _decode_framed(data, lookup_schema)
        if decoded is not None:
            shown["schema"] = decoded
    return shown


def _decode_framed(data: bytes, lookup_schema: SchemaLookup) -> dict[str, Any] | None:
    """A value in Confluent's framing (magic byte 0, 4-byte schema id) decoded through the
    registry: Avro and JSON Schema values in full, Protobuf values named only."""
    (schema_id,) = struct.unpack_from(">I", data, 1)
    found = lookup_schema(schema_id)
    if found is None:
        return None
    schema_type, text = found
    payload = data[5:]
    decoded: dict[str, Any] = {"id": schema_id, "type": schema_type}
    try:
        if schema_type == "AVRO":
            import fastavro  # the schema-registry extra, present when the registry runs

            parsed = fastavro.parse_schema(json.loads(text))
            decoded["value"] = _jsonable(fastavro.schemaless_reader(io.BytesIO(payload), parsed))
        elif schema_type == "JSON":
            decoded["value"] = json.loads(payload)
    except Exception as exc:  # a value its schema does not read: shown as undecoded
        decoded["error"] = f"{type(exc).__name__}: {exc}"[:500]
    return decoded


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# --- groups ---


def groups(state: ClusterState, timeline: Mapping[str, Any] | None) -> Reply:
    history = {g["group_id"]: g for g in (timeline or {}).get("groups", [])}
    stalled = {
        (group_id, p["topic"], p["partition"])
        for p in (timeline or {}).get("partitions", [])
        for group_id in p.get("stalled", [])
    }
    # A consumer-protocol or share group also has an entry among the classic groups
    # (where its offsets are kept): it is shown once, as its own type.
    others = set(state.consumer_groups.groups) | set(state.share_groups.groups)
    shown = [
        _classic(state, group_id)
        for group_id in sorted(state.groups.groups)
        if group_id not in others
    ]
    shown += [_consumer(state, group_id) for group_id in sorted(state.consumer_groups.groups)]
    shown += _share(state)
    for group in shown:
        group["timeline"] = history.get(group["group_id"])
        for partition in group["partitions"]:
            key = (group["group_id"], partition["topic"], partition["partition"])
            partition["stalled"] = key in stalled
    return ok({"groups": shown, "recording": timeline is not None})


def _classic(state: ClusterState, group_id: str) -> dict[str, Any]:
    group = state.groups.groups[group_id]
    members = []
    for member in group.members.values():
        held: list[list[Any]] = []
        if member.protocol_type == "consumer" and member.assignment:
            try:
                held = _pairs(parse_assignment(member.assignment))
            except Exception:  # an assignment another protocol wrote: shown as none
                held = []
        members.append(_member(member.member_id, member.client_id, member.client_host, held))
    return _group(state, group_id, "classic", group.state.value, group.generation, members)


def _consumer(state: ClusterState, group_id: str) -> dict[str, Any]:
    group = state.consumer_groups.groups[group_id]
    members = [
        _member(
            m.member_id,
            m.client_id,
            m.client_host,
            _pairs(state.consumer_groups.named(m.assigned)),
        )
        for m in group.members.values()
    ]
    return _group(state, group_id, "consumer", group.state.value, group.group_epoch, members)


def _share(state: ClusterState) -> list[dict[str, Any]]:
    def topic_name(topic_id: Any) -> str | None:
        topic = state.topics.by_id(topic_id)
        return None if topic is None else topic.name

    view = share_group_view(state.share_groups, state.share_partitions, topic_name)
    shown = []
    for group_id in sorted(state.share_groups.groups):
        group = view(group_id)
        if group is None:
            continue
        members = [
            _member(m.member_id, m.client_id, m.client_host, [list(p) for p in m.partitions])
            for m in group.members.values()
        ]
        described = _group(state, group_id, "share", group.state, group.group_epoch, members)
        described["partitions"] = [
            {
                "topic": topic,
                "partition": index,
                "committed": p.start_offset,
                "end": _end(state, topic, index),
                "lag": p.lag,
                "in_flight": p.in_flight,
            }
            for (topic, index), p in sorted(group.partitions.items())
        ]
        shown.append(described)
    return shown


def _member(member_id: str, client_id: str, host: str, held: list[list[Any]]) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "client_id": client_id,
        "host": host,
        "partitions": held,
        "idle": not held,
    }


def _group(
    state: ClusterState,
    group_id: str,
    kind: str,
    group_state: str,
    epoch: int,
    members: list[dict[str, Any]],
) -> dict[str, Any]:
    committed = {
        key: c.offset for key, c in state.groups.committed(group_id, None).items() if c is not None
    }
    keys = set(committed) | {(t, p) for m in members for t, p in m["partitions"]}
    partitions = []
    for topic, index in sorted(keys):
        end = _end(state, topic, index)
        done = committed.get((topic, index))
        partitions.append(
            {
                "topic": topic,
                "partition": index,
                "committed": done,
                "end": end,
                "lag": None if done is None or end is None else max(end - done, 0),
                "owner": next(
                    (m["member_id"] for m in members if [topic, index] in m["partitions"]), None
                ),
            }
        )
    return {
        "group_id": group_id,
        "type": kind,
        "state": group_state,
        "epoch": epoch,
        "members": sorted(members, key=lambda m: m["member_id"]),
        "partitions": partitions,
    }


def _pairs(named: Mapping[str, list[int]]) -> list[list[Any]]:
    return [[topic, index] for topic, indexes in sorted(named.items()) for index in sorted(indexes)]


def _end(state: ClusterState, topic_name: str, index: int) -> int | None:
    topic = state.topics.get(topic_name)
    if topic is None or not 0 <= index < len(topic.partitions):
        return None
    return topic.partitions[index].log.high_watermark


# --- transactions, security, faults ---


def transactions(state: ClusterState) -> Reply:
    listed = [
        {
            "transactional_id": tid,
            "producer_id": txn.producer_id,
            "epoch": txn.epoch,
            "state": txn.state.value,
            "timeout_ms": txn.timeout_ms,
            "partitions": sorted([list(tp) for tp in txn.partitions]),
            "groups": sorted(txn.groups),
        }
        for tid, txn in sorted(state.transactions.transactions.items())
    ]
    return ok({"transactions": listed})


def security(state: ClusterState, enabled: bool) -> Reply:
    if not enabled:
        return ok({"enabled": False, "users": [], "acls": []})
    acls = [
        {
            "resource_type": b.resource_type.name,
            "resource_name": b.resource_name,
            "pattern": b.pattern_type.name,
            "principal": b.principal,
            "host": b.host,
            "operation": b.operation.name,
            "permission": b.permission.name,
        }
        for b in state.acls.describe(AclFilter())
    ]
    return ok({"enabled": True, "users": sorted(state.credentials.users()), "acls": acls})


def faults(rules: Faults) -> Reply:
    return ok({"faults": [_fault(rule) for rule in rules]})


def add_fault(rules: Faults, body: Mapping[str, Any]) -> Reply:
    spec = _text(body, "rule")
    try:
        rule = rules.add(**parse_fault(spec))
    except (ValueError, TypeError) as exc:
        raise Refused(400, str(exc)) from exc
    return Reply(201, _fault(rule))


def remove_fault(rules: Faults, rule_id: str) -> Reply:
    for rule in rules:
        if str(id(rule)) == rule_id:
            rules.remove(rule)
            return ok({"removed": rule_id})
    raise Refused(404, f"no fault rule {rule_id}")


def _fault(rule: Any) -> dict[str, Any]:
    action = next(
        (name for name in ("drop", "close", "lose_response") if getattr(rule, name)),
        None,
    )
    if rule.error is not None:
        action = f"error={_error_name(rule.error)}"
    elif rule.delay:
        action = f"delay={rule.delay}"
    elif rule.respond is not None:
        action = "respond"
    return {
        "id": str(id(rule)),
        "api": None if rule.api is None else messages.api_name(rule.api),
        "client_id": rule.client_id,
        "group": rule.group,
        "topic": rule.topic,
        "partition": rule.partition,
        "broker": rule.broker,
        "action": action or "observe",
        "times": rule.times,
        "after": rule.after,
        "hits": rule.hits,
        "acted": rule.acted,
    }


# --- input ---


def _text(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise Refused(400, f"{name}: a non-empty string")
    return value


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise Refused(400, f"{name}: an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Refused(400, f"{name}: an integer") from None


def _bytes_of(value: Any, name: str) -> bytes | None:
    """None, text (UTF-8) or {"hex": "..."}."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and isinstance(value.get("hex"), str):
        try:
            return binascii.unhexlify(value["hex"])
        except (binascii.Error, ValueError):
            raise Refused(400, f"{name}: not hex") from None
    raise Refused(400, f'{name}: a string, null or {{"hex": ...}}')


def _partition(state: ClusterState, topic_name: str, index: int) -> Any:
    topic = state.topics.get(topic_name)
    if topic is None:
        raise Refused(404, f"no topic {topic_name!r}")
    if not 0 <= index < len(topic.partitions):
        raise Refused(404, f"{topic_name} has no partition {index}")
    return topic.partitions[index]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)
