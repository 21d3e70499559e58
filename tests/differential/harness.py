"""The differential comparison: the same scenario through a recording proxy in front of
minibroker and in front of Apache Kafka, the exchanges normalised and compared field by
field.

Exchanges are matched by what was asked, not by when: a client's timing differs between
brokers (one more metadata refresh, one more empty fetch), so the requests of each run
are normalised and every request both runs sent is compared by its first answer on each
side. What legitimately differs between two brokers (ids, times, addresses, throttle
times, text of error messages, ordering Kafka does not promise) is normalised away here;
every other difference is a divergence, fixed in minibroker or listed with its reason in
KNOWN (and docs/compatibility.md).

Raw-request scenarios (raw_scenarios.py) are compared step by step instead: see
"Scripted exchanges" below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from minibroker.protocol.recording import Exchange

SAME = "<same>"
ABSENT = "<absent>"

# Fields whose values are the broker's own choice: ids, clocks, addresses, text.
VOLATILE = frozenset(
    {
        "throttle_time",
        "cluster_id",
        "controller_id",
        "node_id",
        "leader_id",
        "broker_id",
        "host",
        "port",
        "rack",
        "member_id",
        "leader",
        "producer_id",
        "v3_and_below_producer_id",
        "topic_id",
        "log_append_time",
        "error_message",
        "session_id",
        "timestamp",
        "max_timestamp",
        "client_host",
        "client_id",
        "records",
        "metadata",
        "assignment",
        "authorized_operations",
        "topic_authorized_operations",
        "cluster_authorized_operations",
        "replica_nodes",
        "isr_nodes",
        "offline_replicas",
        "eligible_leader_replicas",
        "last_known_elr",
        "preferred_read_replica",
    }
)

# APIs whose answers describe the broker itself rather than the client's data.
NOT_COMPARED = {
    "ApiVersions": "the versions each broker serves are listed in the API table of docs/apis.md",
}


@dataclass(frozen=True)
class Divergence:
    api: str
    version: int
    path: str
    kafka: Any
    minibroker: Any

    def __str__(self) -> str:
        return (
            f"{self.api} v{self.version} {self.path}: Kafka {self.kafka!r}, "
            f"minibroker {self.minibroker!r}"
        )


# Fields that name an entity in a list: such a list becomes a mapping by that name, so
# order (which Kafka does not promise) does not count and a difference names its entity.
IDENTITIES = ("name", "partition_index", "partition", "index", "topic", "group_id", "key")


def normalise(
    value: Any,
    volatile: frozenset[str] = VOLATILE,
    identities: tuple[str, ...] = IDENTITIES,
) -> Any:
    """Volatile fields blanked; lists of named entities keyed by name, other lists of
    entities sorted (Kafka promises no order)."""
    if isinstance(value, dict):
        return {
            k: (SAME if k in volatile else normalise(v, volatile, identities))
            for k, v in value.items()
        }
    if isinstance(value, list):
        # Kafka's internal topics (__consumer_offsets): minibroker keeps offsets in no topic.
        items = [
            normalise(v, volatile, identities)
            for v in value
            if not (isinstance(v, dict) and v.get("is_internal"))
        ]
        if not items or not all(isinstance(v, dict) for v in items):
            return items
        for identity in identities:
            names = [str(v.get(identity)) for v in items if identity in v]
            if len(names) == len(items) and len(set(names)) == len(names):
                return {f"[{n}]": v for n, v in zip(names, items, strict=True)}
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return value


# Retriable errors a broker answers while it settles (a new topic's leader, the group or
# transaction coordinator loading, a transaction's markers still being written:
# CONCURRENT_TRANSACTIONS): Kafka does, minibroker (ready at once, markers written before
# EndTxn is answered) does not. The client asks again, and the answer it settles on is the
# one compared.
SETTLING = frozenset({5, 6, 14, 15, 16, 51})
# A topic Kafka created a moment ago is unknown to its metadata until it propagates; the
# same Metadata request asked again then finds it. Only a later answer replaces it.
REPLACEABLE = {"Metadata": SETTLING | {3}}


def error_codes(value: Any) -> set[int]:
    if isinstance(value, dict):
        codes = {
            v
            for k, v in value.items()
            # AddPartitionsToTxn names its partition_error_code
            if (k == "error_code" or k.endswith("_error_code")) and isinstance(v, int)
        }
        return codes.union(*(error_codes(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(error_codes(v) for v in value))
    return set()


# A fenced producer's request (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED) can be the same,
# once ids are set aside, as one its predecessor sent before the fence (the same
# transactional id and epoch, the same partition): answers to the fenced one are paired
# with each other, not with the earlier one, which the clients batch differently on
# each broker. (A broker fencing a producer it should not would fail that client's run.)
FENCING = frozenset({47, 90})


def _topic_names(exchanges: Iterable[Exchange]) -> dict[str, str]:
    """Topic id -> name, from the answers that name both (Metadata, CreateTopics)."""
    names: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("name"), str) and value.get("topic_id") is not None:
                names[str(value["topic_id"])] = value["name"]
            for inner in value.values():
                visit(inner)
        elif isinstance(value, list):
            for inner in value:
                visit(inner)

    for exchange in exchanges:
        visit(exchange.response)
    return names


def _named(value: Any, names: dict[str, str]) -> Any:
    """`value` with each known topic id's name beside it: ids differ between brokers and
    are set aside, but requests for different topics (Fetch v13+ names topics by id only)
    must not look the same."""
    if isinstance(value, dict):
        named = {k: _named(v, names) for k, v in value.items()}
        if str(value.get("topic_id")) in names:
            named["topic_named"] = names[str(value["topic_id"])]
        return named
    if isinstance(value, list):
        return [_named(v, names) for v in value]
    return value


def first_answers(exchanges: Iterable[Exchange]) -> dict[tuple[str, int, str], Any]:
    """Each distinct (api, version, normalised request) with the first answer to it that
    is not a settling error (or the first answer, when every one is)."""
    exchanges = list(exchanges)
    names = _topic_names(exchanges)
    found: dict[tuple[str, int, str], Any] = {}
    for exchange in exchanges:
        if exchange.response is None or exchange.api in NOT_COMPARED:
            continue
        answer = normalise(_named(exchange.response, names))
        request = json.dumps(
            normalise(_named(exchange.request, names)), sort_keys=True, default=str
        )
        if error_codes(answer) & FENCING:
            request += " (fenced)"
        key = (exchange.api, exchange.version, request)
        passing = REPLACEABLE.get(exchange.api, SETTLING)
        if key not in found or (
            error_codes(found[key]) & passing and not error_codes(answer) & passing
        ):
            found[key] = answer
    return found


def differences(kafka: Any, minibroker: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(kafka, dict) and isinstance(minibroker, dict):
        out = []
        for key in sorted(set(kafka) | set(minibroker)):
            step = key if key.startswith("[") else f".{key}"
            if key not in kafka or key not in minibroker:
                out.append((path + step, kafka.get(key, ABSENT), minibroker.get(key, ABSENT)))
                continue
            out += differences(kafka[key], minibroker[key], path + step)
        return out
    if isinstance(kafka, list) and isinstance(minibroker, list) and len(kafka) == len(minibroker):
        out = []
        for index, (k, m) in enumerate(zip(kafka, minibroker, strict=True)):
            out += differences(k, m, f"{path}[{index}]")
        return out
    return [] if kafka == minibroker else [(path or ".", kafka, minibroker)]


@dataclass
class Comparison:
    compared: dict[tuple[str, int], int]  # (api, version) -> requests compared
    divergences: list[Divergence]
    settling: int = 0  # requests Kafka only ever answered with a settling error


def compare(kafka: Iterable[Exchange], minibroker: Iterable[Exchange]) -> Comparison:
    on_kafka, on_minibroker = first_answers(kafka), first_answers(minibroker)
    compared: dict[tuple[str, int], int] = {}
    found: list[Divergence] = []
    settling = 0
    for key in sorted(set(on_kafka) & set(on_minibroker)):
        api, version, _ = key
        if error_codes(on_kafka[key]) & SETTLING and not error_codes(on_minibroker[key]) & SETTLING:
            settling += 1  # the client moved on with another request (a new coordinator)
            continue
        compared[api, version] = compared.get((api, version), 0) + 1
        for path, k, m in differences(on_kafka[key], on_minibroker[key]):
            found.append(Divergence(api, version, path, k, m))
    return Comparison(compared, found, settling)


# --- Scripted exchanges: raw requests a scenario sends one after another ---
#
# A raw-request scenario (raw_scenarios.py) sends the same requests in the same order on
# one connection, so its exchanges are compared in order, each under the label of its
# step, requests and answers alike. Less is set aside than for clients' exchanges:
# - ids the broker makes (member ids of v0 joins and of JoinGroup) and ids a scenario
#   names are replaced by "<member N>", numbered by first appearance in the run, so an
#   answer naming the wrong member still differs; topic ids by "<topic NAME>";
# - the text of error messages: only whether there is one is compared;
# - heartbeat_interval when it is the broker's configured interval (each broker's own
#   setting; any other value, such as 0, is compared);
# - throttle times.
# Answers with a settling error (SETTLING) are dropped: the scenario asks again.

SCRIPTED_VOLATILE = frozenset({"throttle_time"})
SCRIPTED_IDENTITIES = (*IDENTITIES, "member_id", "topic_id")
MEMBER_ID_FIELDS = frozenset({"member_id", "leader"})
NO_TOPIC_ID = "00000000-0000-0000-0000-000000000000"
A_MESSAGE = "<message>"
THE_INTERVAL = "<configured heartbeat interval>"


@dataclass(frozen=True)
class Step:
    """One scripted exchange, normalised."""

    label: str
    api: str
    version: int
    request: Any
    response: Any


def scripted(
    exchanges: Iterable[Exchange], client_id: str, heartbeat_interval_ms: int
) -> list[Step]:
    """The exchanges of the scripted client (its client id), in order, normalised; the
    labels are filled in by compare_scripted."""
    exchanges = list(exchanges)
    names = _topic_names(exchanges)
    members: dict[str, str] = {}
    topics: dict[str, str] = {}

    def renamed(value: Any) -> Any:
        if isinstance(value, list):
            return [renamed(v) for v in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if key == "error_message":
                out[key] = None if item is None else A_MESSAGE
            elif key in MEMBER_ID_FIELDS and isinstance(item, str) and item:
                out[key] = members.setdefault(item, f"<member {len(members) + 1}>")
            elif key == "topic_id" and item is not None and str(item) != NO_TOPIC_ID:
                name = names.get(str(item))
                out[key] = (
                    f"<topic {name}>"
                    if name is not None
                    else topics.setdefault(str(item), f"<topic {len(topics) + 1}>")
                )
            elif key == "heartbeat_interval" and item == heartbeat_interval_ms:
                out[key] = THE_INTERVAL
            else:
                out[key] = renamed(item)
        return out

    steps = []
    for exchange in exchanges:
        if exchange.client_id != client_id or exchange.response is None:
            continue
        request, response = renamed(exchange.request), renamed(exchange.response)
        if error_codes(response) & SETTLING:
            continue  # asked again
        steps.append(
            Step(
                "",
                exchange.api,
                exchange.version,
                normalise(request, SCRIPTED_VOLATILE, SCRIPTED_IDENTITIES),
                normalise(response, SCRIPTED_VOLATILE, SCRIPTED_IDENTITIES),
            )
        )
    return steps


def compare_scripted(kafka: list[Step], minibroker: list[Step], labels: list[str]) -> Comparison:
    """Each step's request and answer on Kafka against minibroker's. A divergence's path
    starts with the step's label in angle brackets; a request that differs (a scenario
    asks what an earlier answer told it) is under "request"."""
    assert len(kafka) == len(minibroker) == len(labels), (
        f"{len(labels)} steps sent; Kafka answered {len(kafka)}, minibroker {len(minibroker)}"
    )
    compared: dict[tuple[str, int], int] = {}
    found: list[Divergence] = []
    for label, k, m in zip(labels, kafka, minibroker, strict=True):
        assert (k.api, k.version) == (m.api, m.version), f"{label}: {k.api} v{k.version}, {m.api}"
        compared[k.api, k.version] = compared.get((k.api, k.version), 0) + 1
        for part, on_kafka, on_minibroker in (
            ("request", k.request, m.request),
            ("", k.response, m.response),
        ):
            for path, a, b in differences(on_kafka, on_minibroker, part):
                found.append(Divergence(k.api, k.version, f"<{label}> {path}", a, b))
    return Comparison(compared, found)


def unexplained(
    divergences: Iterable[Divergence], known: Mapping[tuple[str, str], str]
) -> list[Divergence]:
    """Divergences no KNOWN entry explains: (api, path) patterns where "*" matches
    anything and brackets are literal."""
    return [
        d
        for d in divergences
        if not any(
            fnmatchcase(d.api, _glob(api)) and fnmatchcase(d.path, _glob(path))
            for api, path in known
        )
    ]


def _glob(pattern: str) -> str:
    return pattern.replace("[", "\0").replace("]", "[]]").replace("\0", "[[]")
