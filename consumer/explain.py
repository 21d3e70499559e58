"""Explain an assignment before it happens: who gets what, and what will go wrong.

    python -m minibroker.consumer.explain --topic my-topic:6 --hosts A,B,C --per-host 6
    python -m minibroker.consumer.explain --topic t0:1 --topic t1:2 --topic t2:3 \\
        --member C0=t0 --member C1=t0,t1 --member C2=t0,t1,t2 --strategy roundrobin
    python -m minibroker.consumer.explain --topic my-topic:6 --hosts A,B,C --per-host 6 \\
        --group-protocol consumer

With ``--group-protocol consumer`` (Kafka 4's protocol, KIP-848) the broker assigns,
with its ``uniform`` (default) or ``range`` assignor, as minibroker's coordinator does.

Members are ``id``, ``id@host`` or ``id@host=topic,topic`` (no ``=`` subscribes to
every topic given). ``--hosts A,B --per-host 3`` makes members ``A-0 .. B-2``.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from minibroker.consumer.assign import (
    STRATEGIES,
    Assignment,
    Partition,
    PreviousAssignment,
    assign,
    group_by_topic,
    member_order,
)
from minibroker.state.server_assignors import ASSIGNORS as SERVER_ASSIGNORS

GROUP_PROTOCOLS = ("classic", "consumer")
SERVER_SIDE = " (the broker's, group.protocol=consumer)"


@dataclass(frozen=True)
class Member:
    member_id: str
    host: str | None = None
    group_instance_id: str | None = None


@dataclass
class Explanation:
    strategy: str
    order: list[str]
    assignment: Assignment
    hosts: dict[str, str | None]
    warnings: list[str] = field(default_factory=list)

    @property
    def idle(self) -> list[str]:
        return [m for m in self.order if not self.assignment[m]]

    def counts(self) -> dict[str, int]:
        return {m: len(self.assignment[m]) for m in self.order}

    def render(self) -> str:
        lines = [f"strategy: {self.strategy}"]
        width = max((len(m) for m in self.order), default=0)
        for member in self.order:
            host = self.hosts.get(member)
            where = f" @{host}" if host else ""
            parts = group_by_topic(self.assignment[member])
            text = "; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in parts.items())
            count = len(self.assignment[member])
            lines.append(f"  {member:<{width}}{where}  [{count}]  {text or '-'}")
        if self.warnings:
            lines.append("warnings:")
            lines.extend(f"  - {w}" for w in self.warnings)
        else:
            lines.append("no warnings")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "strategy": self.strategy,
            "assignment": {
                m: {t: ps for t, ps in group_by_topic(self.assignment[m]).items()}
                for m in self.order
            },
            "hosts": {m: self.hosts.get(m) for m in self.order},
            "idle": self.idle,
            "warnings": self.warnings,
        }


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _share_group_hint(members: int) -> str:
    """Where a consumer group leaves members idle, a share group would not."""
    return (
        f"; where records need not be handled in partition order, a share group (Kafka "
        f"4.2+, KIP-932: confluent-kafka's ShareConsumer, Java's KafkaShareConsumer) puts "
        f"all {members} to work: its members read the same partitions together"
    )


def _hosts_phrase(members: Sequence[str], hosts: Mapping[str, str | None]) -> str | None:
    named = {hosts.get(m) for m in members}
    if len(named) == 1 and None not in named:
        return f"all on host {next(iter(named))}"
    return None


def explain_assignment(
    members: Iterable[Member | str],
    subscriptions: Mapping[str, Collection[str]] | Collection[str],
    partition_counts: Mapping[str, int],
    strategy: str | None = None,
    *,
    previous: Mapping[str, Collection[Partition]] | None = None,
    group_protocol: str = "classic",
) -> Explanation:
    """Compute the assignment `strategy` would produce and describe its problems.

    `subscriptions` maps member id to topics, or is one collection of topics that
    every member subscribes to. `previous` (for sticky and uniform) maps member id to
    what it owned before. `group_protocol="consumer"` (Kafka 4's protocol) explains the
    broker's assignment instead: `strategy` is then its assignor, `uniform` (the
    default) or `range`.
    """
    if group_protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}")
    server_side = group_protocol == "consumer"
    strategy = strategy or ("uniform" if server_side else "range")
    if server_side and strategy not in SERVER_ASSIGNORS:
        raise ValueError(
            f"unknown server-side assignor {strategy!r}; expected one of "
            f"{', '.join(SERVER_ASSIGNORS)}"
        )
    specs = [m if isinstance(m, Member) else Member(m) for m in members]
    if len({m.member_id for m in specs}) != len(specs):
        raise ValueError("member ids must be unique")
    if isinstance(subscriptions, Mapping):
        subs = {m.member_id: frozenset(subscriptions.get(m.member_id, ())) for m in specs}
    else:
        shared = frozenset(subscriptions)
        subs = {m.member_id: shared for m in specs}
    instance_ids = {m.member_id: m.group_instance_id for m in specs}
    hosts = {m.member_id: m.host for m in specs}
    if server_side:
        result = _server_side(strategy, subs, partition_counts, previous or {})
        order = sorted(subs)
        shown = f"{strategy}{SERVER_SIDE}"
    else:
        prior = {m: PreviousAssignment(tuple(ps), 0) for m, ps in (previous or {}).items()}
        result = assign(strategy, subs, partition_counts, previous=prior, instance_ids=instance_ids)
        order = member_order(subs, instance_ids)
        shown = strategy
    explanation = Explanation(shown, order, result, hosts)
    explanation.warnings.extend(_warnings(explanation, subs, partition_counts))
    return explanation


def _server_side(
    assignor: str,
    subs: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Collection[Partition]],
) -> Assignment:
    """The assignment minibroker's group coordinator computes with `assignor`."""
    ids = {t: uuid.uuid5(uuid.NAMESPACE_URL, t) for ts in subs.values() for t in ts}
    ids.update({t: uuid.uuid5(uuid.NAMESPACE_URL, t) for t in partition_counts})
    names = {topic_id: name for name, topic_id in ids.items()}
    current: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member, owned in previous.items():
        for topic, index in owned:
            current.setdefault(member, {}).setdefault(ids[topic], frozenset())
            current[member][ids[topic]] |= {index}
    target = SERVER_ASSIGNORS[assignor](
        {m: frozenset(ids[t] for t in ts if t in partition_counts) for m, ts in subs.items()},
        {ids[t]: count for t, count in partition_counts.items()},
        current,
    )
    return {
        member: sorted((names[t], p) for t, parts in target.get(member, {}).items() for p in parts)
        for member in subs
    }


def _warnings(
    ex: Explanation, subs: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int]
) -> list[str]:
    warnings: list[str] = []
    topics = sorted({t for ts in subs.values() for t in ts})
    for topic in topics:
        if topic not in partition_counts:
            warnings.append(f"topic {topic}: no partition count given; nobody will read it")
    owners_by_topic: dict[str, list[str]] = {}
    for member in ex.order:
        for topic, _ in ex.assignment[member]:
            owners_by_topic.setdefault(topic, [])
            if member not in owners_by_topic[topic]:
                owners_by_topic[topic].append(member)

    # Per topic: more subscribers than partitions (18 consumers on 6 partitions leave 12 idle).
    for topic in topics if len(topics) > 1 else ():
        count = partition_counts.get(topic, 0)
        subscribers = [m for m in ex.order if topic in subs[m]]
        if not count or len(subscribers) <= count:
            continue
        owners = owners_by_topic.get(topic, [])
        idle = len(subscribers) - len(owners)
        text = (
            f"topic {topic}: {_plural(len(subscribers), 'consumer')}, "
            f"{_plural(count, 'partition')}: {idle} "
            f"{'member' if idle == 1 else 'members'} will receive nothing from it"
        )
        if ex.strategy == "range" and owners == subscribers[: len(owners)]:
            text += f"; the first {len(owners)} in sort order"
            where = _hosts_phrase(owners, ex.hosts)
            text += f" are {where}" if where else " get one each"
        elif (where := _hosts_phrase(owners, ex.hosts)) is not None:
            text += f"; its owners are {where}"
        summary = _host_summary(owners, subscribers, ex.hosts)
        warnings.append(text + summary + _share_group_hint(len(subscribers)))

    idle_members = ex.idle
    if idle_members:
        total = sum(partition_counts.get(t, 0) for t in topics)
        scope = " in total" if len(topics) > 1 else ""
        text = (
            f"{_plural(len(ex.order), 'consumer')}, {_plural(total, 'partition')}{scope}: "
            f"{len(idle_members)} {'member' if len(idle_members) == 1 else 'members'} "
            "will receive nothing"
        )
        busy = [m for m in ex.order if ex.assignment[m]]
        if ex.strategy.endswith(SERVER_SIDE):
            text += (
                "; the broker assigns, and members name themselves with random ids, so "
                "which ones wait is a matter of chance and partly changes at every "
                "restart: add partitions or run fewer consumers"
            )
            warnings.append(text + _share_group_hint(len(ex.order)))
            return warnings
        if ex.strategy == "range" and busy == ex.order[: len(busy)]:
            where = _hosts_phrase(busy, ex.hosts)
            if where:
                text += f"; the first {len(busy)} in sort order are {where}"
        summary = _host_summary(busy, ex.order, ex.hosts)
        warnings.append(text + summary + _share_group_hint(len(ex.order)))

    if ex.strategy == "range":
        warnings.extend(_range_skew(ex, subs, partition_counts, topics))
    if ex.strategy == "roundrobin":
        warnings.extend(_uneven_subscriptions(ex, subs))
    return warnings


def _uneven_subscriptions(ex: Explanation, subs: Mapping[str, frozenset[str]]) -> list[str]:
    """Round robin skips members not subscribed to a topic, which can starve them."""
    counts = ex.counts()
    for member in sorted(ex.order, key=lambda m: -counts[m]):
        for topic, index in ex.assignment[member]:
            for other in ex.order:
                if topic in subs[other] and counts[other] + 2 <= counts[member]:
                    return [
                        f"subscriptions differ: {member} gets {counts[member]} partitions "
                        f"while {other} gets {counts[other]} though it could take "
                        f"{topic}-{index}; sticky would balance them"
                    ]
    return []


def _host_summary(
    owners: Sequence[str], everyone: Sequence[str], hosts: Mapping[str, str | None]
) -> str:
    all_hosts = sorted({h for m in everyone if (h := hosts.get(m)) is not None})
    if len(all_hosts) < 2:
        return ""
    used = {hosts.get(m) for m in owners}
    unused = [h for h in all_hosts if h not in used]
    if not unused:
        return ""
    return (
        f"; {'host' if len(unused) == 1 else 'hosts'} {', '.join(unused)} will sit idle "
        "(member ids sort by client id, so one host's members sort together: add "
        "partitions, run fewer consumers, or use roundrobin)"
    )


def _range_skew(
    ex: Explanation,
    subs: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    topics: Sequence[str],
) -> list[str]:
    uneven = [
        t
        for t in topics
        if partition_counts.get(t, 0) % max(1, sum(t in subs[m] for m in ex.order)) != 0
    ]
    counts = Counter(ex.counts())
    if len(uneven) < 2 or not counts:
        return []
    most = max(ex.order, key=lambda m: (counts[m], -ex.order.index(m)))
    least = min(ex.order, key=lambda m: (counts[m], ex.order.index(m)))
    spread = counts[most] - counts[least]
    if spread <= 1:
        return []
    balanced = assign("roundrobin", subs, partition_counts)
    rr = sorted(len(ps) for ps in balanced.values())
    return [
        f"range skew across {len(uneven)} topics whose partitions do not divide evenly: "
        f"{most} gets {counts[most]} partitions, {least} gets {counts[least]} "
        f"(difference {spread}), because every such topic gives its remainder to the first "
        f"members in sort order; roundrobin would give {rr[0]}-{rr[-1]} each"
    ]


def _parse_members(values: Sequence[str]) -> tuple[list[Member], dict[str, list[str]]]:
    members: list[Member] = []
    subs: dict[str, list[str]] = {}
    for value in values:
        spec, _, topics = value.partition("=")
        member_id, _, host = spec.partition("@")
        members.append(Member(member_id, host or None))
        if topics:
            subs[member_id] = [t for t in topics.split(",") if t]
    return members, subs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minibroker.consumer.explain",
        description="Show the partition assignment a group would get, with warnings.",
    )
    parser.add_argument(
        "--topic", action="append", required=True, metavar="NAME:PARTITIONS", default=[]
    )
    parser.add_argument("--member", action="append", default=[], metavar="ID[@HOST][=T1,T2]")
    parser.add_argument("--hosts", help="comma-separated hosts; use with --per-host")
    parser.add_argument("--per-host", type=int, default=1, help="members per host")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES + tuple(a for a in SERVER_ASSIGNORS if a not in STRATEGIES),
        help="the client's assignor (classic: range by default), or the broker's "
        "(consumer: uniform by default, or range)",
    )
    parser.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        default="classic",
        help="consumer: Kafka 4's protocol, where the broker assigns",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--fail-on-warning", action="store_true", help="exit with status 1 if anything is warned"
    )
    args = parser.parse_args(argv)

    counts: dict[str, int] = {}
    for spec in args.topic:
        name, sep, number = spec.rpartition(":")
        if not sep or not name or not number.isdigit():
            parser.error(f"--topic wants NAME:PARTITIONS, got {spec!r}")
        counts[name] = int(number)
    members, explicit = _parse_members(args.member)
    if args.hosts:
        for host in args.hosts.split(","):
            members.extend(Member(f"{host}-{i}", host) for i in range(args.per_host))
    if not members:
        parser.error("give --member or --hosts")
    subscriptions = {m.member_id: explicit.get(m.member_id, list(counts)) for m in members}
    try:
        result = explain_assignment(
            members, subscriptions, counts, args.strategy, group_protocol=args.group_protocol
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.render())
    return 1 if args.fail_on_warning and result.warnings else 0


if __name__ == "__main__":
    sys.exit(main())
