"""`minibroker topics list|create|describe|alter|delete`."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from minibroker.commands.common import (
    Connection,
    ToolError,
    UsageError,
    about,
    command,
    group_of_commands,
    int_at_least,
    key_value,
    print_json,
    print_table,
    report_deletions,
)


def register(commands: Any) -> None:
    actions = group_of_commands(
        commands,
        "topics",
        summary="list, create, describe, alter and delete topics",
        example="minibroker topics create orders --partitions 3 --config retention.ms=86400000",
    )
    listing = command(
        actions,
        "list",
        summary="the topics' names and partition counts",
        example="minibroker topics list --internal",
        run=list_topics,
    )
    listing.add_argument("--internal", action="store_true", help="include internal topics")

    create = command(
        actions,
        "create",
        summary="create a topic",
        example="minibroker topics create orders --partitions 3 --config cleanup.policy=compact",
        run=create_topic,
    )
    create.add_argument("name", metavar="NAME")
    create.add_argument(
        "--partitions", type=int_at_least(1), help="(default: the broker's num.partitions)"
    )
    create.add_argument(
        "--replication-factor",
        type=int_at_least(1),
        help="(default: the broker's default.replication.factor)",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a topic config (repeatable)",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed when the topic exists already"
    )

    delete = command(
        actions,
        "delete",
        summary="delete topics",
        example="minibroker topics delete orders payments",
        run=delete_topics,
    )
    delete.add_argument("names", nargs="+", metavar="NAME")

    describe = command(
        actions,
        "describe",
        summary="partitions (leader, replicas, in-sync replicas) and non-default configs",
        example="minibroker topics describe orders",
        run=describe_topics,
    )
    describe.add_argument(
        "names", nargs="*", metavar="NAME", help="(default: every topic but internal ones)"
    )

    alter = command(
        actions,
        "alter",
        summary="add partitions (CreatePartitions) or change configs (IncrementalAlterConfigs)",
        example="minibroker topics alter orders --partitions 6 --config retention.ms=3600000",
        run=alter_topic,
    )
    alter.add_argument("name", metavar="NAME")
    alter.add_argument(
        "--partitions", type=int_at_least(1), metavar="N", help="the new partition count"
    )
    alter.add_argument(
        "--config",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="set a topic config (repeatable)",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="return a topic config to its default (repeatable)",
    )


def _descriptions(conn: Connection, names: list[str]) -> list[Any]:
    admin = conn.admin()
    futures = admin.describe_topics(TopicCollection(names), request_timeout=conn.timeout)
    described = []
    for name in names:
        try:
            described.append(conn.result(futures[name]))
        except ToolError as exc:
            raise about("topic", name, exc) from None
    return described


def list_topics(args: argparse.Namespace) -> int:
    conn = Connection(args)
    names = sorted(conn.admin().list_topics(timeout=conn.timeout).topics)
    described = _descriptions(conn, names) if names else []
    rows = [
        {"name": d.name, "partitions": len(d.partitions), "internal": d.is_internal}
        for d in described
        if args.internal or not d.is_internal
    ]
    if args.output == "json":
        print_json({"topics": rows})
    else:
        print_table(["TOPIC", "PARTITIONS"], [(r["name"], r["partitions"]) for r in rows])
    return 0


def create_topic(args: argparse.Namespace) -> int:
    conn = Connection(args)
    topic = NewTopic(
        args.name,
        num_partitions=args.partitions or -1,
        replication_factor=args.replication_factor or -1,
        config=dict(args.config),
    )
    futures = conn.admin().create_topics(
        [topic], request_timeout=conn.timeout, operation_timeout=conn.timeout
    )
    created = True
    try:
        conn.result(futures[args.name])
    except ToolError as exc:
        if not (args.if_not_exists and "TOPIC_ALREADY_EXISTS" in str(exc)):
            raise about("topic", args.name, exc) from None
        created = False
    if args.output == "json":
        print_json({"topic": args.name, "created": created})
    else:
        print(f"Created topic {args.name!r}." if created else f"Topic {args.name!r} exists.")
    return 0


def delete_topics(args: argparse.Namespace) -> int:
    conn = Connection(args)
    names = list(dict.fromkeys(args.names))
    futures = conn.admin().delete_topics(
        names, request_timeout=conn.timeout, operation_timeout=conn.timeout
    )
    return report_deletions(args, conn, "topic", names, futures)


def _non_default_configs(conn: Connection, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Each topic's configs that do not come from the defaults (as Kafka's tool shows)."""
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = conn.admin().describe_configs(resources, request_timeout=conn.timeout)
    configs = {}
    for resource, future in futures.items():
        entries = conn.result(future)
        configs[resource.name] = {
            key: entry.value
            for key, entry in sorted(entries.items())
            if entry.source != ConfigSource.DEFAULT_CONFIG.value
        }
    return configs


def describe_topics(args: argparse.Namespace) -> int:
    conn = Connection(args)
    names = list(dict.fromkeys(args.names))
    if not names:
        every = sorted(conn.admin().list_topics(timeout=conn.timeout).topics)
        names = [d.name for d in _descriptions(conn, every) if not d.is_internal] if every else []
    described = _descriptions(conn, names) if names else []
    configs = _non_default_configs(conn, names) if names else {}
    topics = []
    for d in described:
        partitions = sorted(d.partitions, key=lambda p: p.id)
        topics.append(
            {
                "name": d.name,
                "topic_id": str(d.topic_id).replace("+", "-").replace("/", "_").rstrip("="),
                "internal": d.is_internal,
                "partition_count": len(partitions),
                "replication_factor": len(partitions[0].replicas) if partitions else 0,
                "configs": configs.get(d.name, {}),
                "partitions": [
                    {
                        "partition": p.id,
                        "leader": None if p.leader is None else p.leader.id,
                        "replicas": [node.id for node in p.replicas],
                        "isr": [node.id for node in p.isr],
                    }
                    for p in partitions
                ],
            }
        )
    if args.output == "json":
        print_json({"topics": topics})
        return 0
    print_table(
        ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"],
        [
            (
                t["name"],
                t["partition_count"],
                t["replication_factor"],
                ",".join(f"{k}={v}" for k, v in t["configs"].items()),
            )
            for t in topics
        ],
    )
    print()
    print_table(
        ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
        [
            (t["name"], p["partition"], p["leader"], p["replicas"], p["isr"])
            for t in topics
            for p in t["partitions"]
        ],
    )
    return 0


def alter_topic(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError(
            "say what to change: --partitions N, --config KEY=VALUE or --delete-config KEY"
        )
    conn = Connection(args)
    admin = conn.admin()
    done: dict[str, Any] = {"topic": args.name}
    if args.partitions is not None:
        futures = admin.create_partitions(
            [NewPartitions(args.name, args.partitions)],
            request_timeout=conn.timeout,
            operation_timeout=conn.timeout,
        )
        try:
            conn.result(futures[args.name])
        except ToolError as exc:
            raise about("topic", args.name, exc) from None
        done["partitions"] = args.partitions
    if args.config or args.delete_config:
        changes = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in args.config
        ] + [
            ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
            for key in args.delete_config
        ]
        resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=changes)
        altered = admin.incremental_alter_configs([resource], request_timeout=conn.timeout)
        for future in altered.values():
            try:
                conn.result(future)
            except ToolError as exc:
                raise about("topic", args.name, exc) from None
        done["set"] = dict(args.config)
        done["deleted"] = list(args.delete_config)
    if args.output == "json":
        print_json(done)
        return 0
    if "partitions" in done:
        print(f"Topic {args.name!r} has {args.partitions} partitions.")
    if args.config:
        print(f"Set on topic {args.name!r}: " + ", ".join(f"{k}={v}" for k, v in args.config))
    if args.delete_config:
        print(f"Returned to the default on topic {args.name!r}: " + ", ".join(args.delete_config))
    return 0
