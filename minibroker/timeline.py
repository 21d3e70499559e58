"""What happened in a test, as one JSON-able dict: the timeline the failure report and the
console draw. Sans-IO: built from a broker's recording (`minibroker/inspection.py`, the
requests it answered and their answers) and a snapshot of the cluster at the end.

The dict (version 1) and where each part comes from:
- `requests`: one row per recorded request, oldest first (at most `MAX_ROWS`, the newest;
  `requests_omitted` says how many older rows were left out). `errors` names every
  non-zero `error_code` anywhere in the answer (Kafka's names, from kio's ErrorCode), once
  each, in the order met. `detail` is the decoded request and answer
  (`protocol.recording.plain`) for a bounded number of rows: the first
  `max_details // 4` errored requests, then the newest others, `max_details` in all; a
  detail whose JSON is longer than `MAX_DETAIL_BYTES` has its arrays cut to their first
  items (a string says how many were left out), or is replaced by its size. `details`
  states the bound. So 10,000 requests give about 2 MiB of rows and at most
  `max_details` * `MAX_DETAIL_BYTES` of details (4 MiB by default).
- `clients`: by client id, from the requests: first and last time seen, requests, errors.
- `groups`: classic groups from JoinGroup answers (generation, protocol, members and
  their client ids) and SyncGroup (the leader's request carries every member's
  assignment, each follower's answer its own; read with
  `consumer_protocol.parse_assignment`); KIP-848 consumer groups and share groups from
  ConsumerGroupHeartbeat / ShareGroupHeartbeat: an answer with an assignment sets the
  member's partitions, a request with member epoch -1 or -2 is the member leaving. A
  generation of a consumer or share group is the highest member epoch seen: each time it
  rises a new entry is made, holding every member's partitions as known then, and the
  entry is updated while that epoch is the newest. `idle_members`: the members of the
  last generation holding no partition. `state` is the group's state from the snapshot
  ("Unknown" if the snapshot does not name it).
- `partitions`: every partition seen. `end_offsets`: the log end offset known at each
  time it changed: a Produce answer's base offset plus the records of the request's
  batches (the sum of each batch's last offset delta + 1; a batch cut by the recording's
  payload limit is not counted), a Fetch answer's high watermark, and the snapshot's
  end offset at `ended_ms`. `committed`: per group, each successful OffsetCommit, and
  each TxnOffsetCommit once its transaction commits (EndTxn committed=true), and the
  snapshot's committed offset at `ended_ms`. `lag`: per group, end offset minus committed
  offset at each time either changed, from the group's first commit of the partition
  on (a partition a group never committed has no lag: Kafka shows none either). Series
  longer than `MAX_POINTS` are thinned to evenly spaced points, the last one kept.
- `stalled` (per partition, the groups it stalled for): the test's last part is its last
  third, [ended_ms - (ended_ms - started_ms) / 3, ended_ms]. A partition P is stalled
  for group G when G had committed P by the start of the last part, and G's lag on P
  at the end is above 0 and above its lag at the start of the last part (the lag in
  force then: its last point at or before that time), while at least one other
  partition of G drained: its lag at the end is 0 or below its lag at the start of the
  last part (0 there if G committed it only later). A partition first committed in the
  last part is not judged: its lag has no earlier value to have grown from.
- `transactions`: by transactional id, from InitProducerId (init), AddPartitionsToTxn
  (add_partitions, v3- and v4+ shapes), AddOffsetsToTxn (add_offsets), EndTxn (commit
  or abort), those answered without error; `state` from the snapshot when it names it.
- `faults`: the fault rules that acted (`Faults.acted`, noted by the rules themselves:
  a closed or dropped request is not in the recording).
- `share`: per share group and partition, each record a ShareFetch answer acquired
  (offset, delivery count, the member from the request); an acknowledgement
  (ShareFetch's or ShareAcknowledge's batches) sets the outcome of that record's latest
  delivery: accept, release or reject. At most `MAX_DELIVERIES` per partition, newest.

`problems`: requests whose part in groups, offsets or transactions could not be read (a
shape this build does not expect); their rows are shown all the same.

What is not known: `complete` is false when the recording dropped its oldest requests (its
byte or count bound) or `dropped` says so; then groups, offsets and transactions start
from what was still kept, and the snapshot's values at the end are still exact. Topic
ids (KIP-848 assignments, Fetch v13+, share APIs) are named from the snapshot's topics and
Metadata answers; a topic id neither names is shown as its id.

`connections` (and each client's `connections` and `address`, its latest connection's):
the connections opened while recording (`Recording.connections`, the newest
`CONNECTIONS_KEPT` per node): node, the client's host:port, the client id of its first
request, opened_ms and closed_ms (null while open). A connection opened before recording
began is not known.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import struct
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.protocol.consumer_protocol import parse_assignment
from minibroker.protocol.recording import kafka_api_name, plain

VERSION = 1
MAX_DETAILS = 1000
MAX_DETAIL_BYTES = 4096
MAX_ROWS = 100_000
MAX_POINTS = 500
MAX_DELIVERIES = 2000
MAX_FAULTS = 1000
MAX_CONNECTIONS = 10_000
MAX_PROBLEMS = 100

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, JOIN_GROUP, SYNC_GROUP = 0, 1, 3, 8, 11, 14
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, CREATE_TOPICS = 28, 19
CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 68, 76
SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
# ShareAcknowledge's acknowledge types (KIP-932).
ACK_OUTCOMES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}
LEAVING_EPOCHS = (-1, -2)

PartitionKey = tuple[str, int]


def error_names(response: Any) -> list[str]:
    """Kafka's names of every non-zero error code in a decoded answer, once each."""
    found: list[str] = []
    _collect_errors(response, found)
    return found


# Per kio class: its error code fields and the fields that may hold entities.
_PLANS: dict[type[Any], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _plan(cls: type[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    plan = _PLANS.get(cls)
    if plan is None:
        errors, nested = [], []
        for spec in dataclasses.fields(cls):
            kind = spec.metadata.get("kafka_type")
            if kind == "error_code" or spec.name.endswith("error_code"):
                errors.append(spec.name)
            elif kind is None:  # an entity, an array of them, or a field kio leaves untyped
                nested.append(spec.name)
        plan = _PLANS[cls] = (tuple(errors), tuple(nested))
    return plan


def _collect_errors(value: Any, found: list[str]) -> None:
    errors, nested = _plan(type(value))
    for name in errors:
        code = getattr(value, name)
        number = int(code.value if isinstance(code, enum.Enum) else code or 0)
        if number:
            text = _error_name(number)
            if text not in found:
                found.append(text)
    for name in nested:
        item = getattr(value, name)
        if isinstance(item, tuple):
            for entry in item:
                if hasattr(entry, "__dataclass_fields__"):
                    _collect_errors(entry, found)
        elif hasattr(item, "__dataclass_fields__") and not isinstance(item, type):
            _collect_errors(item, found)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def batch_record_count(records: Any) -> int:
    """Records in a Produce request's record batches (v2 format): each batch's last
    offset delta + 1; a batch cut short is not counted."""
    if not isinstance(records, bytes | bytearray | memoryview):
        return 0
    data = bytes(records)
    count, position = 0, 0
    while position + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        if length <= 0 or position + 12 + length > len(data):
            break
        magic = data[position + 16]
        if magic < 2:
            break  # old message sets: not counted
        (delta,) = struct.unpack_from(">i", data, position + 23)
        count += delta + 1
        position += 12 + length
    return count


def _ms(at: float) -> int:
    return int(at * 1000)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _topic_of(entry: Any, names: Mapping[uuid.UUID, str]) -> str | None:
    for attribute in ("name", "topic"):
        value = getattr(entry, attribute, None)
        if isinstance(value, str) and value:
            return value
    topic_id = getattr(entry, "topic_id", None)
    if isinstance(topic_id, uuid.UUID) and topic_id.int != 0:
        return names.get(topic_id, str(topic_id))
    return None


def _index_of(entry: Any) -> int | None:
    for attribute in ("partition_index", "index", "partition"):
        value = getattr(entry, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    return None


def _code(value: Any) -> int:
    code = getattr(value, "error_code", 0)
    return int(code.value) if isinstance(code, enum.Enum) else int(code or 0)


def _thin(points: list[list[int]], limit: int = MAX_POINTS) -> list[list[int]]:
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit - 1)] + [points[-1]]


def _shrunk(value: Any, items: int) -> Any:
    if isinstance(value, list):
        kept = [_shrunk(item, items) for item in value[:items]]
        if len(value) > items:
            kept.append(f"... {len(value) - items} more")
        return kept
    if isinstance(value, dict):
        return {key: _shrunk(item, items) for key, item in value.items()}
    return value


def bounded_detail(detail: dict[str, Any], limit: int = MAX_DETAIL_BYTES) -> dict[str, Any]:
    """`detail` within `limit` bytes of JSON: arrays cut to their first items, or its size."""
    size = len(json.dumps(detail, separators=(",", ":"), default=str))
    if size <= limit:
        return detail
    for items in (20, 5, 1):
        cut = _shrunk(detail, items)
        if len(json.dumps(cut, separators=(",", ":"), default=str)) <= limit:
            cut["cut"] = f"arrays cut to {items} items (whole: {size} bytes)"
            return dict(cut)
    return {"request": None, "response": None, "cut": f"{size} bytes, too long to show"}


@dataclass
class _Generation:
    at_ms: int
    generation: int
    protocol: str | None
    members: dict[str, str | None]  # member id -> client id
    partitions: dict[str, list[PartitionKey]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"at_ms": self.at_ms, "generation": self.generation}
        if self.protocol is not None:
            entry["protocol"] = self.protocol
        entry["members"] = [
            {
                "member_id": member,
                "client_id": client,
                "partitions": [list(p) for p in sorted(self.partitions.get(member, []))],
            }
            for member, client in self.members.items()
        ]
        return entry


@dataclass
class _Group:
    group_id: str
    kind: str
    generations: list[_Generation] = field(default_factory=list)
    # consumer / share groups: what each member holds now, and its client id
    held: dict[str, list[PartitionKey]] = field(default_factory=dict)
    clients: dict[str, str | None] = field(default_factory=dict)

    def generation(self, number: int) -> _Generation | None:
        for generation in reversed(self.generations):
            if generation.generation == number:
                return generation
        return None


@dataclass
class _PartitionSeries:
    end: list[list[int]] = field(default_factory=list)
    committed: dict[str, list[list[int]]] = field(default_factory=dict)


def _add_point(points: list[list[int]], at_ms: int, value: int) -> None:
    if points and points[-1][1] == value:
        return
    if points and points[-1][0] == at_ms:
        points[-1][1] = value
        return
    points.append([at_ms, value])


class _Builder:
    def __init__(self, topic_ids: Mapping[uuid.UUID, str]) -> None:
        self.names: dict[uuid.UUID, str] = dict(topic_ids)
        self.groups: dict[str, _Group] = {}
        self.partitions: dict[PartitionKey, _PartitionSeries] = {}
        self.transactions: dict[str, dict[str, Any]] = {}
        self.producer_txn: dict[int, str] = {}  # producer id -> transactional id
        self.pending_offsets: dict[str, list[tuple[str, PartitionKey, int]]] = {}
        self.share: dict[tuple[str, str, int], list[dict[str, Any]]] = {}

    # --- helpers ---
    def series(self, key: PartitionKey) -> _PartitionSeries:
        found = self.partitions.get(key)
        if found is None:
            found = self.partitions[key] = _PartitionSeries()
        return found

    def group(self, group_id: str, kind: str) -> _Group:
        found = self.groups.get(group_id)
        if found is None:
            found = self.groups[group_id] = _Group(group_id, kind)
        return found

    def end_offset(self, key: PartitionKey, at_ms: int, offset: int) -> None:
        points = self.series(key).end
        # offsets only grow (a truncation after leader changes aside): an older
        # answer that arrives later does not move the line back
        if points and offset < points[-1][1] and at_ms - points[-1][0] < 1000:
            return
        _add_point(points, at_ms, offset)

    def commit(self, group_id: str, key: PartitionKey, at_ms: int, offset: int) -> None:
        points = self.series(key).committed.setdefault(group_id, [])
        _add_point(points, at_ms, offset)

    def transaction(self, transactional_id: str) -> dict[str, Any]:
        found = self.transactions.get(transactional_id)
        if found is None:
            found = self.transactions[transactional_id] = {
                "transactional_id": transactional_id,
                "producer_id": None,
                "events": [],
            }
        return found

    def txn_event(self, transactional_id: str, at_ms: int, event: str, detail: Any = None) -> None:
        entry: dict[str, Any] = {"at_ms": at_ms, "event": event}
        if detail is not None:
            entry["detail"] = detail
        self.transaction(transactional_id)["events"].append(entry)

    # --- the APIs ---
    def take(self, recorded: Any, response: Any) -> None:
        api, at_ms, request = recorded.api_key, _ms(recorded.at), recorded.request
        handler = self.HANDLERS.get(api)
        if handler is not None and response is not None:
            handler(self, recorded, at_ms, request, response)

    def _metadata(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        for topic in getattr(response, "topics", ()) or ():
            topic_id, name = getattr(topic, "topic_id", None), getattr(topic, "name", None)
            if isinstance(topic_id, uuid.UUID) and topic_id.int and isinstance(name, str):
                self.names[topic_id] = name

    def _produce(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        counts: dict[PartitionKey, int] = {}
        for topic in getattr(request, "topic_data", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partition_data", ()) or ():
                index = _index_of(part)
                if name is not None and index is not None:
                    counts[(name, index)] = batch_record_count(getattr(part, "records", None))
        for topic in getattr(response, "responses", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partition_responses", ()) or ():
                index = _index_of(part)
                base = getattr(part, "base_offset", -1)
                if name is None or index is None or _code(part) != 0 or base < 0:
                    continue
                count = counts.get((name, index), 0)
                if count:
                    self.end_offset((name, index), at_ms, int(base) + count)

    def _fetch(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        for topic in getattr(response, "responses", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partitions", ()) or ():
                index = _index_of(part)
                high = getattr(part, "high_watermark", -1)
                if name is not None and index is not None and _code(part) == 0 and high >= 0:
                    self.end_offset((name, index), at_ms, int(high))

    def _offset_commit(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        failed: set[PartitionKey] = set()
        for topic in getattr(response, "topics", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partitions", ()) or ():
                index = _index_of(part)
                if name is not None and index is not None and _code(part) != 0:
                    failed.add((name, index))
        group_id = _text(getattr(request, "group_id", ""))
        offsets = list(self._offsets_in(request))
        if recorded.api_key == TXN_OFFSET_COMMIT:
            transactional_id = _text(getattr(request, "transactional_id", ""))
            kept = [(group_id, key, offset) for key, offset in offsets if key not in failed]
            self.pending_offsets.setdefault(transactional_id, []).extend(kept)
            return
        for key, offset in offsets:
            if key not in failed:
                self.commit(group_id, key, at_ms, offset)

    def _offsets_in(self, request: Any) -> Iterable[tuple[PartitionKey, int]]:
        for topic in getattr(request, "topics", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partitions", ()) or ():
                index = _index_of(part)
                offset = getattr(part, "committed_offset", None)
                if name is not None and index is not None and isinstance(offset, int):
                    yield (name, index), int(offset)

    def _join_group(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        if _code(response) != 0:
            return
        group = self.group(_text(request.group_id), "classic")
        number = int(response.generation_id)
        generation = group.generation(number)
        if generation is None:
            generation = _Generation(at_ms, number, response.protocol_name, {})
            group.generations.append(generation)
        member_id = _text(response.member_id)
        group.clients[member_id] = recorded.client_id
        generation.members[member_id] = recorded.client_id
        for member in getattr(response, "members", ()) or ():  # the leader's answer
            other = _text(member.member_id)
            generation.members.setdefault(other, group.clients.get(other))

    def _sync_group(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        if _code(response) != 0:
            return
        group = self.group(_text(request.group_id), "classic")
        generation = group.generation(int(request.generation_id))
        if generation is None:
            generation = _Generation(at_ms, int(request.generation_id), None, {})
            group.generations.append(generation)
        member_id = _text(request.member_id)
        generation.members.setdefault(member_id, recorded.client_id)
        for given in getattr(request, "assignments", ()) or ():  # the leader's request
            other = _text(given.member_id)
            generation.members.setdefault(other, group.clients.get(other))
            generation.partitions[other] = self._assigned(given.assignment)
        assignment = getattr(response, "assignment", b"")
        if assignment or member_id not in generation.partitions:
            generation.partitions[member_id] = self._assigned(assignment)

    @staticmethod
    def _assigned(data: Any) -> list[PartitionKey]:
        if not isinstance(data, bytes | bytearray | memoryview) or not data:
            return []
        assigned = parse_assignment(bytes(data))
        return sorted((topic, p) for topic, parts in assigned.items() for p in parts)

    def _heartbeat(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        kind = "consumer" if recorded.api_key == CONSUMER_GROUP_HEARTBEAT else "share"
        group = self.group(_text(request.group_id), kind)
        member_id = _text(getattr(response, "member_id", None)) or _text(request.member_id)
        if int(getattr(request, "member_epoch", 0)) in LEAVING_EPOCHS:
            group.held.pop(member_id, None)
            group.clients.pop(member_id, None)
            self._epoch(group, at_ms, None)
            return
        if _code(response) != 0:
            return
        group.clients[member_id] = recorded.client_id
        changed = member_id not in group.held
        assignment = getattr(response, "assignment", None)
        if assignment is not None:
            held: list[PartitionKey] = []
            for topic in getattr(assignment, "topic_partitions", ()) or ():
                name = _topic_of(topic, self.names)
                if name is not None:
                    held.extend((name, int(p)) for p in topic.partitions)
            changed = changed or sorted(held) != group.held.get(member_id)
            group.held[member_id] = sorted(held)
        else:
            group.held.setdefault(member_id, [])
        epoch = int(response.member_epoch)
        if changed or not group.generations or epoch > group.generations[-1].generation:
            self._epoch(group, at_ms, epoch)

    @staticmethod
    def _epoch(group: _Group, at_ms: int, epoch: int | None) -> None:
        last = group.generations[-1] if group.generations else None
        number = epoch if epoch is not None else (last.generation if last else 0)
        members = dict(group.clients)
        partitions = {member: list(held) for member, held in group.held.items()}
        if last is not None and number <= last.generation:
            last.members, last.partitions = members, partitions
            return
        group.generations.append(_Generation(at_ms, number, None, members, partitions))

    def _init_producer_id(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        transactional_id = getattr(request, "transactional_id", None)
        if not isinstance(transactional_id, str) or _code(response) != 0:
            return
        producer_id = int(response.producer_id)
        self.transaction(transactional_id)["producer_id"] = producer_id
        self.producer_txn[producer_id] = transactional_id
        self.txn_event(
            transactional_id,
            at_ms,
            "init",
            {"producer_id": producer_id, "producer_epoch": int(response.producer_epoch)},
        )

    def _add_partitions(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        if _code(response) != 0 and not getattr(response, "results_by_transaction", None):
            return
        if error_names(response):
            return
        batches = getattr(request, "transactions", None)
        if batches:
            entries = [(t.transactional_id, t.topics) for t in batches]
        else:
            entries = [
                (
                    getattr(request, "v3_and_below_transactional_id", ""),
                    getattr(request, "v3_and_below_topics", ()),
                )
            ]
        for transactional_id, topics in entries:
            if not isinstance(transactional_id, str) or not transactional_id:
                continue
            named = [[topic.name, int(p)] for topic in topics or () for p in topic.partitions]
            self.txn_event(transactional_id, at_ms, "add_partitions", {"partitions": named})

    def _add_offsets(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        if _code(response) == 0:
            self.txn_event(
                _text(request.transactional_id),
                at_ms,
                "add_offsets",
                {"group_id": _text(request.group_id)},
            )

    def _end_txn(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        if _code(response) != 0:
            return
        transactional_id = _text(request.transactional_id)
        committed = bool(request.committed)
        self.txn_event(transactional_id, at_ms, "commit" if committed else "abort")
        for group_id, key, offset in self.pending_offsets.pop(transactional_id, []):
            if committed:
                self.commit(group_id, key, at_ms, offset)

    def _share_fetch(self, recorded: Any, at_ms: int, request: Any, response: Any) -> None:
        group_id, member_id = _text(request.group_id), _text(request.member_id)
        self._acknowledged(group_id, request)
        if _code(response) != 0:
            return
        if recorded.api_key == SHARE_ACKNOWLEDGE:
            return
        for topic in getattr(response, "responses", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partitions", ()) or ():
                index = _index_of(part)
                if name is None or index is None or _code(part) != 0:
                    continue
                deliveries = self.share.setdefault((group_id, name, index), [])
                for acquired in getattr(part, "acquired_records", ()) or ():
                    count = int(acquired.delivery_count)
                    for offset in range(int(acquired.first_offset), int(acquired.last_offset) + 1):
                        deliveries.append(
                            {
                                "at_ms": at_ms,
                                "offset": offset,
                                "delivery_count": count,
                                "member_id": member_id,
                            }
                        )
                if len(deliveries) > 2 * MAX_DELIVERIES:
                    del deliveries[:-MAX_DELIVERIES]

    def _acknowledged(self, group_id: str, request: Any) -> None:
        for topic in getattr(request, "topics", ()) or ():
            name = _topic_of(topic, self.names)
            for part in getattr(topic, "partitions", ()) or ():
                index = _index_of(part)
                deliveries = self.share.get((group_id, name or "", index or 0))
                if name is None or index is None or not deliveries:
                    continue
                for batch in getattr(part, "acknowledgement_batches", ()) or ():
                    types = list(batch.acknowledge_types) or [1]
                    first, last = int(batch.first_offset), int(batch.last_offset)
                    outcomes = {
                        offset: ACK_OUTCOMES.get(
                            int(types[min(offset - first, len(types) - 1)]), "?"
                        )
                        for offset in range(first, last + 1)
                    }
                    for delivery in reversed(deliveries):
                        outcome = outcomes.pop(delivery["offset"], None)
                        if outcome is not None and "outcome" not in delivery:
                            delivery["outcome"] = outcome
                        if not outcomes:
                            break

    HANDLERS: dict[int, Any] = {
        METADATA: _metadata,
        PRODUCE: _produce,
        FETCH: _fetch,
        OFFSET_COMMIT: _offset_commit,
        TXN_OFFSET_COMMIT: _offset_commit,
        JOIN_GROUP: _join_group,
        SYNC_GROUP: _sync_group,
        CONSUMER_GROUP_HEARTBEAT: _heartbeat,
        SHARE_GROUP_HEARTBEAT: _heartbeat,
        INIT_PRODUCER_ID: _init_producer_id,
        ADD_PARTITIONS_TO_TXN: _add_partitions,
        ADD_OFFSETS_TO_TXN: _add_offsets,
        END_TXN: _end_txn,
        SHARE_FETCH: _share_fetch,
        SHARE_ACKNOWLEDGE: _share_fetch,
    }


def _lag_series(end: list[list[int]], committed: list[list[int]]) -> list[list[int]]:
    """End minus committed at each time either changed, from the first commit on."""
    events = sorted([(at, 0, value) for at, value in end] + [(at, 1, v) for at, v in committed])
    lag: list[list[int]] = []
    end_now: int | None = None
    committed_now: int | None = None
    for at, kind, value in events:
        if kind == 0:
            end_now = value
        else:
            committed_now = value
        if committed_now is not None and end_now is not None:
            _add_point(lag, at, max(end_now - committed_now, 0))
    return lag


def _value_at(points: list[list[int]], at_ms: float) -> int:
    value = 0
    for when, point in points:
        if when > at_ms:
            break
        value = point
    return value


def stalled_groups(
    lags: Mapping[PartitionKey, Mapping[str, list[list[int]]]],
    started_ms: int,
    ended_ms: int,
) -> dict[PartitionKey, list[str]]:
    """Per partition, the groups it stalled for (the rule in the module docstring)."""
    last_part = ended_ms - (ended_ms - started_ms) / 3
    by_group: dict[str, dict[PartitionKey, tuple[int, int, bool]]] = {}
    for key, groups in lags.items():
        for group_id, points in groups.items():
            if points:
                before, after = _value_at(points, last_part), points[-1][1]
                judged = points[0][0] <= last_part
                by_group.setdefault(group_id, {})[key] = (before, after, judged)
    stalled: dict[PartitionKey, list[str]] = {}
    for group_id, partitions in by_group.items():
        for key, (before, after, judged) in partitions.items():
            if not judged or after <= 0 or after <= before:
                continue
            drained = any(
                other != key and (end == 0 or end < start)
                for other, (start, end, _) in partitions.items()
            )
            if drained:
                stalled.setdefault(key, []).append(group_id)
    return stalled


def _snapshot_topic_ids(snapshot: Mapping[str, Any]) -> dict[uuid.UUID, str]:
    names: dict[uuid.UUID, str] = {}
    for name, topic in (snapshot.get("topics") or {}).items():
        topic_id = topic.get("topic_id") if isinstance(topic, Mapping) else None
        if topic_id:
            names[uuid.UUID(str(topic_id))] = name
    return names


def build_timeline(
    recorded: Iterable[Any],
    *,
    snapshot: Mapping[str, Any] | None = None,
    title: str = "minibroker",
    started_ms: int | None = None,
    ended_ms: int | None = None,
    max_details: int = MAX_DETAILS,
    dropped: int = 0,
    faults: Iterable[Mapping[str, Any]] = (),
    connections: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The timeline dict (see the module docstring) of `recorded` (inspection.Recorded
    entries, any order), with `snapshot` the cluster at the end: {"topics": {name:
    {"topic_id", "partitions"}}, "end_offsets": {topic: {partition: offset}},
    "committed": {group: [[topic, partition, offset], ...]}, "groups": {group: {"type",
    "state"}}, "transactions": {transactional id: state}}, every part optional."""
    snapshot = snapshot or {}
    entries = sorted(recorded, key=lambda r: r.at)
    started = started_ms if started_ms is not None else (_ms(entries[0].at) if entries else 0)
    ended = (
        ended_ms if ended_ms is not None else (_ms(entries[-1].at) if entries else _ms(time.time()))
    )
    builder = _Builder(_snapshot_topic_ids(snapshot))
    rows: list[dict[str, Any]] = []
    clients: dict[str, dict[str, Any]] = {}
    # the answers that may be shown decoded (the first errored ones, the newest):
    # kept while the rest are read, the others let go
    errored_first = max(max_details // 4, 0)
    newest_from = len(entries) - max_details
    kept: dict[int, Any] = {}
    errored: list[int] = []
    problems: list[str] = []
    for i, entry in enumerate(entries):
        try:
            response = entry.answer() if hasattr(entry, "answer") else entry.response
            errors = error_names(response)
        except Exception as exc:  # an answer this build cannot decode: shown, not read
            response, errors = None, [f"UNDECODED: {type(exc).__name__}"]
        if errors and len(errored) < errored_first:
            errored.append(i)
            kept[i] = response
        elif i >= newest_from:
            kept[i] = response
        at_ms = _ms(entry.at)
        try:
            builder.take(entry, response)
        except Exception as exc:  # a shape this build did not expect: the row still shows
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"request {i} ({entry.api}): {type(exc).__name__}: {exc}")
        rows.append(
            {
                "i": i,
                "at_ms": at_ms,
                "node": entry.node_id,
                "client_id": entry.client_id,
                "api": kafka_api_name(entry.api_key),
                "version": entry.version,
                "correlation_id": entry.correlation_id,
                "errors": errors,
                "detail": None,
            }
        )
        client = clients.get(entry.client_id or "")
        if client is None:
            client = clients[entry.client_id or ""] = {
                "client_id": entry.client_id,
                "first_ms": at_ms,
                "last_ms": at_ms,
                "requests": 0,
                "errors": 0,
            }
        client["last_ms"] = at_ms
        client["requests"] += 1
        client["errors"] += bool(errors)

    # decoded details, bounded: the first errored ones, then the newest others
    chosen = set(errored)
    for i in range(len(rows) - 1, -1, -1):
        if len(chosen) >= max_details:
            break
        chosen.add(i)
    for i in chosen:
        rows[i]["detail"] = bounded_detail(
            {"request": plain(entries[i].request), "response": plain(kept.get(i))}
        )
    omitted = max(len(rows) - MAX_ROWS, 0)

    # the end: the snapshot's exact values
    for topic, offsets in (snapshot.get("end_offsets") or {}).items():
        for partition, offset in offsets.items():
            key = (topic, int(partition))
            if key in builder.partitions or offset:
                _add_point(builder.series(key).end, ended, int(offset))
    for group_id, committed in (snapshot.get("committed") or {}).items():
        for topic, partition, offset in committed:
            key = (topic, int(partition))
            points = builder.series(key).committed.setdefault(group_id, [])
            _add_point(points, max(ended, points[-1][0] if points else ended), int(offset))

    lags: dict[PartitionKey, dict[str, list[list[int]]]] = {}
    for key, series in builder.partitions.items():
        lags[key] = {
            group_id: _lag_series(series.end, committed)
            for group_id, committed in series.committed.items()
        }
    stalled = stalled_groups(lags, started, ended)
    partitions = [
        {
            "topic": key[0],
            "partition": key[1],
            "end_offsets": _thin(series.end),
            "committed": {g: _thin(points) for g, points in series.committed.items()},
            "lag": {g: _thin(points) for g, points in lags[key].items()},
            "stalled": sorted(stalled.get(key, [])),
        }
        for key, series in sorted(builder.partitions.items())
    ]

    group_facts = snapshot.get("groups") or {}
    groups = []
    for group_id in sorted(set(builder.groups) | set(group_facts)):
        facts = group_facts.get(group_id) or {}
        group = builder.groups.get(group_id) or _Group(group_id, facts.get("type", "classic"))
        generations = [generation.as_dict() for generation in group.generations]
        last = generations[-1] if generations else None
        idle = [m["member_id"] for m in last["members"] if not m["partitions"]] if last else []
        groups.append(
            {
                "group_id": group_id,
                "type": facts.get("type", group.kind),
                "state": facts.get("state", "Unknown"),
                "generations": generations,
                "idle_members": idle,
            }
        )

    txn_states = snapshot.get("transactions") or {}
    transactions = []
    for transactional_id in sorted(set(builder.transactions) | set(txn_states)):
        entry = dict(builder.transaction(transactional_id))
        if transactional_id in txn_states:
            entry["state"] = txn_states[transactional_id]
        transactions.append(entry)

    share = [
        {"group_id": g, "topic": t, "partition": p, "deliveries": deliveries[-MAX_DELIVERIES:]}
        for (g, t, p), deliveries in sorted(builder.share.items())
    ]
    fault_rows = [dict(f) for f in faults][-MAX_FAULTS:]
    connection_rows = sorted((dict(c) for c in connections), key=lambda c: c["opened_ms"])
    for connection in connection_rows:
        client = clients.get(connection.get("client_id") or "")
        if client is None:
            continue  # a connection that sent no request the recording kept
        client["address"] = connection["address"]
        client.setdefault("connections", []).append(
            {k: connection[k] for k in ("node", "address", "opened_ms", "closed_ms")}
        )

    return {
        "version": VERSION,
        "title": title,
        "started_ms": started,
        "ended_ms": ended,
        "complete": dropped == 0,
        "dropped": dropped,
        "clients": sorted(clients.values(), key=lambda c: (c["first_ms"], c["client_id"] or "")),
        "requests": rows[omitted:],
        "requests_omitted": omitted,
        "details": {
            "max_details": max_details,
            "max_detail_bytes": MAX_DETAIL_BYTES,
            "errored_first": errored_first,
            "shown": len(chosen),
        },
        "groups": groups,
        "partitions": partitions,
        "transactions": transactions,
        "faults": fault_rows,
        "share": share,
        "connections": connection_rows[-MAX_CONNECTIONS:],
        "problems": problems,
    }
