"""`minibroker groups list|describe|reset-offsets|delete`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from minibroker.commands.common import (
    Connection,
    ToolError,
    UsageError,
    about,
    command,
    group_of_commands,
    int_at_least,
    offsets_at,
    partitions_of,
    print_json,
    print_table,
    report_deletions,
    say,
    timestamp_ms,
)
from minibroker.commands.share_groups import ShareGroups

EARLIEST: Any = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
LATEST: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]

# Kafka's spelling of the group states (what its tools and DescribeGroups say).
_STATES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}


def register(commands: Any) -> None:
    actions = group_of_commands(
        commands,
        "groups",
        summary="list, describe, reset the offsets of and delete consumer and share groups",
        example="minibroker groups describe billing",
    )
    command(
        actions,
        "list",
        summary="every group with its state and protocol type",
        example="minibroker groups list --output json",
        run=list_groups,
    )
    describe = command(
        actions,
        "describe",
        summary="state, type, members and their assignments (for Kafka 4's consumer "
        "protocol also the target the broker moves them to), and per partition the "
        "committed offset, log end offset and lag (a share group's: where its share "
        "partitions start, their lag and the members reading each)",
        example="minibroker groups describe billing shipping",
        run=describe_groups,
    )
    describe.add_argument("groups", nargs="+", metavar="GROUP")

    reset = command(
        actions,
        "reset-offsets",
        summary="move an inactive group's committed offsets (prints the plan only, "
        "unless --execute)",
        description="Move an inactive group's committed offsets. Without --execute the new "
        "offsets are printed and nothing changes. A group with active members is refused: "
        "stop its consumers first.",
        example="minibroker groups reset-offsets billing --topic orders --to-earliest --execute",
        run=reset_offsets,
    )
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P...]",
        help="the topic, or some of its partitions (repeatable)",
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the first offset kept")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int_at_least(0), metavar="N", help="offset N")
    to.add_argument(
        "--to-datetime",
        type=timestamp_ms,
        metavar="ISO8601",
        help="the first record at or after this time (local time without a zone)",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets")

    delete = command(
        actions,
        "delete",
        summary="delete groups without active members, and their committed offsets",
        example="minibroker groups delete billing",
        run=delete_groups,
    )
    delete.add_argument("groups", nargs="+", metavar="GROUP")


def _state(value: Any) -> str:
    return _STATES.get(value, str(getattr(value, "name", value)))


def list_groups(args: argparse.Namespace) -> int:
    conn = Connection(args)
    listed = conn.result(conn.admin().list_consumer_groups(request_timeout=conn.timeout))
    for error in listed.errors:
        say(f"{args.prog}: {error}")
    shared = {row["group"]: row for row in ShareGroups(args).listed()}
    rows = [
        {
            "group": g.group_id,
            "state": _state(g.state),
            "type": str(getattr(g.type, "name", "UNKNOWN")).lower(),
            # librdkafka says only whether the protocol type is empty ("simple" groups,
            # which commit offsets without joining) or not.
            "protocol_type": "" if g.is_simple_consumer_group else "consumer",
        }
        for g in listed.valid
        if g.group_id not in shared
    ]
    rows += [{**row, "protocol_type": "share"} for row in shared.values()]
    rows.sort(key=lambda r: r["group"])
    if args.output == "json":
        print_json({"groups": rows})
    else:
        print_table(
            ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"],
            [(r["group"], r["state"], r["type"], r["protocol_type"] or None) for r in rows],
        )
    return 1 if listed.errors else 0


def _committed(conn: Connection, group: str) -> dict[tuple[str, int], int]:
    futures = conn.admin().list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=conn.timeout
    )
    try:
        result = conn.result(futures[group])
    except ToolError as exc:
        raise about("group", group, exc) from None
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _description(conn: Connection, group: str) -> Any:
    futures = conn.admin().describe_consumer_groups([group], request_timeout=conn.timeout)
    try:
        return conn.result(futures[group])
    except ToolError as exc:
        raise about("group", group, exc) from None


def _describe(conn: Connection, group: str) -> dict[str, Any]:
    description = _description(conn, group)
    committed = _committed(conn, group)
    if description.state == ConsumerGroupState.DEAD and not description.members and not committed:
        raise ToolError(f"group {group!r} does not exist")
    owners = {}
    members = []
    for member in sorted(description.members, key=lambda m: m.member_id):
        assigned = sorted(
            (tp.topic, tp.partition) for tp in member.assignment.topic_partitions or []
        )
        owners.update(dict.fromkeys(assigned, member))
        # Kafka 4's consumer protocol: what the broker is moving the member towards.
        target = getattr(member, "target_assignment", None)
        targeted = (
            sorted((tp.topic, tp.partition) for tp in target.topic_partitions or [])
            if (target is not None)
            else None
        )
        members.append(
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "host": member.host,
                "assignment": [{"topic": t, "partition": p} for t, p in assigned],
                "target_assignment": None
                if targeted is None
                else [{"topic": t, "partition": p} for t, p in targeted],
            }
        )
    partitions = sorted(set(committed) | set(owners))
    ends = offsets_at(conn, partitions, LATEST)
    offsets = []
    for topic, partition in partitions:
        current = committed.get((topic, partition))
        end = ends.get((topic, partition))
        owner = owners.get((topic, partition))
        offsets.append(
            {
                "topic": topic,
                "partition": partition,
                "committed_offset": current,
                "log_end_offset": end,
                "lag": None if current is None or end is None else max(end - current, 0),
                "member_id": None if owner is None else owner.member_id,
                "client_id": None if owner is None else owner.client_id,
            }
        )
    coordinator = description.coordinator
    return {
        "group": group,
        "state": _state(description.state),
        "type": str(getattr(getattr(description, "type", None), "name", "UNKNOWN")).lower(),
        "protocol_type": "" if description.is_simple_consumer_group else "consumer",
        "assignor": description.partition_assignor or None,
        "coordinator": None if coordinator is None else coordinator.id,
        "members": members,
        "offsets": offsets,
    }


def describe_groups(args: argparse.Namespace) -> int:
    conn = Connection(args)
    shares = ShareGroups(args)
    described = []
    shared = []
    for group in dict.fromkeys(args.groups):
        share = shares.describe(group)
        if share is not None:
            shared.append(share)
        else:
            described.append(_describe(conn, group))
    if args.output == "json":
        print_json({"groups": described + shared})
        return 0
    if shared:
        _print_share_groups(shared)
        if not described:
            return 0
        print()
    print_table(
        ["GROUP", "STATE", "TYPE", "ASSIGNOR", "MEMBERS", "COORDINATOR"],
        [
            (g["group"], g["state"], g["type"], g["assignor"], len(g["members"]), g["coordinator"])
            for g in described
        ],
    )
    print()
    print_table(
        ["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT", "TARGET"],
        [
            (
                g["group"],
                m["member_id"],
                m["client_id"],
                m["host"],
                [f"{a['topic']}-{a['partition']}" for a in m["assignment"]] or None,
                None
                if m["target_assignment"] is None
                else [f"{a['topic']}-{a['partition']}" for a in m["target_assignment"]] or None,
            )
            for g in described
            for m in g["members"]
        ],
    )
    print()
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CLIENT-ID"],
        [
            (
                g["group"],
                o["topic"],
                o["partition"],
                o["committed_offset"],
                o["log_end_offset"],
                o["lag"],
                o["client_id"],
            )
            for g in described
            for o in g["offsets"]
        ],
    )
    return 0


def _print_share_groups(described: list[dict[str, Any]]) -> None:
    print_table(
        ["GROUP", "STATE", "TYPE", "ASSIGNOR", "MEMBERS", "COORDINATOR", "EPOCH"],
        [
            (
                g["group"],
                g["state"],
                "share",
                g["assignor"],
                len(g["members"]),
                g["coordinator"],
                g["group_epoch"],
            )
            for g in described
        ],
    )
    print()
    print_table(
        ["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"],
        [
            (
                g["group"],
                m["member_id"],
                m["client_id"],
                m["host"],
                m["member_epoch"],
                [f"{a['topic']}-{a['partition']}" for a in m["assignment"]] or None,
            )
            for g in described
            for m in g["members"]
        ],
    )
    print()
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG", "MEMBERS"],
        [
            (
                g["group"],
                p["topic"],
                p["partition"],
                p["start_offset"],
                p["lag"],
                len(p["members"]),
            )
            for g in described
            for p in g["partitions"]
        ],
    )


def _chosen_partitions(conn: Connection, specs: list[str]) -> list[tuple[str, int]]:
    """TOPIC (every partition) or TOPIC:0,2 (those)."""
    chosen: list[tuple[str, int]] = []
    for spec in specs:
        topic, sep, listed = spec.partition(":")
        existing = partitions_of(conn, topic)
        if not sep:
            chosen += [(topic, p) for p in existing]
            continue
        try:
            wanted = [int(p) for p in listed.split(",") if p.strip()]
        except ValueError:
            raise UsageError(
                f"--topic {spec!r}: partitions are numbers, as in orders:0,1"
            ) from None
        missing = sorted(set(wanted) - set(existing))
        if missing or not wanted:
            raise ToolError(
                f"topic {topic!r} has partitions 0..{len(existing) - 1}, not {missing or listed!r}"
            )
        chosen += [(topic, p) for p in wanted]
    return sorted(set(chosen))


def _targets(
    conn: Connection,
    args: argparse.Namespace,
    partitions: list[tuple[str, int]],
    committed: dict[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    earliest = offsets_at(conn, partitions, EARLIEST)
    latest = offsets_at(conn, partitions, LATEST)

    def clamp(tp: tuple[str, int], offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.to_datetime is not None:
        at: Any = OffsetSpec.for_timestamp(args.to_datetime)  # type: ignore[no-untyped-call]
        found = offsets_at(conn, partitions, at)
        return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in partitions}
    unknown = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
    if unknown:
        raise ToolError(f"no committed offset to shift from on {', '.join(unknown)}")
    return {tp: clamp(tp, committed[tp] + args.shift_by) for tp in partitions}


def reset_offsets(args: argparse.Namespace) -> int:
    conn = Connection(args)
    description = _description(conn, args.group)
    if description.members:
        raise ToolError(
            f"group {args.group!r} has {len(description.members)} active member(s) (state "
            f"{_state(description.state)}); offsets can only be reset while it has none"
        )
    partitions = _chosen_partitions(conn, args.topic)
    committed = _committed(conn, args.group)
    targets = _targets(conn, args, partitions, committed)
    plan = [
        {
            "topic": topic,
            "partition": partition,
            "current_offset": committed.get((topic, partition)),
            "new_offset": targets[(topic, partition)],
        }
        for topic, partition in partitions
    ]
    if args.execute:
        request = ConsumerGroupTopicPartitions(
            args.group,
            [TopicPartition(t, p, targets[(t, p)]) for t, p in partitions],
        )
        futures = conn.admin().alter_consumer_group_offsets([request], request_timeout=conn.timeout)
        try:
            answer = conn.result(futures[args.group])
        except ToolError as exc:
            raise about("group", args.group, exc) from None
        refused = [tp for tp in answer.topic_partitions if tp.error is not None]
        if refused:
            raise ToolError(
                f"group {args.group!r}: "
                + "; ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in refused)
            )
    if args.output == "json":
        print_json({"group": args.group, "executed": args.execute, "offsets": plan})
    else:
        if args.execute:
            say(f"Offsets of group {args.group!r} reset and committed:")
        else:
            say(f"Offsets group {args.group!r} would get (a dry run):")
        sys.stdout.flush()
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [
                (args.group, p["topic"], p["partition"], p["current_offset"], p["new_offset"])
                for p in plan
            ],
        )
    if not args.execute:
        sys.stdout.flush()
        say("Nothing changed (a dry run); add --execute to commit these offsets.")
    return 0


def delete_groups(args: argparse.Namespace) -> int:
    conn = Connection(args)
    groups = list(dict.fromkeys(args.groups))
    futures = conn.admin().delete_consumer_groups(groups, request_timeout=conn.timeout)
    return report_deletions(args, conn, "group", groups, futures)
