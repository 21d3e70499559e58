"""`minibroker configs describe|alter` for a topic or a broker."""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from minibroker.commands.common import (
    Connection,
    ToolError,
    UsageError,
    command,
    group_of_commands,
    key_value,
    print_json,
    print_table,
)


def register(commands: Any) -> None:
    actions = group_of_commands(
        commands,
        "configs",
        summary="describe and change topic and broker configs",
        example="minibroker configs describe --topic orders",
    )
    describe = command(
        actions,
        "describe",
        summary="a topic's or a broker's configs: those that are not defaults, or --all",
        example="minibroker configs describe --broker 0 --all",
        run=describe_configs,
    )
    _resource_options(describe)
    describe.add_argument(
        "--all", action="store_true", help="defaults too (each with where it comes from)"
    )
    alter = command(
        actions,
        "alter",
        summary="set configs or return them to their defaults (IncrementalAlterConfigs)",
        example="minibroker configs alter --topic orders --set retention.ms=3600000 "
        "--delete cleanup.policy",
        run=alter_configs,
    )
    _resource_options(alter)
    alter.add_argument(
        "--set",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="set KEY (repeatable)",
    )
    alter.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="KEY",
        help="return KEY to its default (repeatable)",
    )


def _resource_options(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="TOPIC")
    which.add_argument("--broker", metavar="ID", help="a broker's node id")


def _resource(args: argparse.Namespace, **extra: Any) -> ConfigResource:
    if args.topic is not None:
        return ConfigResource(ResourceType.TOPIC, args.topic, **extra)
    if not args.broker.isdigit():
        raise UsageError(f"--broker {args.broker!r}: a node id is a number")
    return ConfigResource(ResourceType.BROKER, args.broker, **extra)


def _check_broker(conn: Connection, args: argparse.Namespace) -> None:
    """A broker id the cluster does not have is refused at once (librdkafka would wait
    for that broker until the timeout)."""
    if args.broker is None:
        return
    conn.admin()
    known = sorted(conn.metadata.brokers)
    if int(args.broker) not in known:
        raise ToolError(f"no broker {args.broker} in the cluster (its brokers: {known})")


def _what(args: argparse.Namespace) -> str:
    return f"topic {args.topic!r}" if args.topic is not None else f"broker {args.broker}"


def _identity(args: argparse.Namespace) -> dict[str, str]:
    if args.topic is not None:
        return {"resource_type": "topic", "name": args.topic}
    return {"resource_type": "broker", "name": args.broker}


def _source(entry: ConfigEntry) -> str:
    """DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG ... (librdkafka hands over the number)."""
    try:
        return str(ConfigSource(entry.source).name)
    except ValueError:
        return str(entry.source)


def describe_configs(args: argparse.Namespace) -> int:
    resource = _resource(args)
    conn = Connection(args)
    _check_broker(conn, args)
    futures = conn.admin().describe_configs([resource], request_timeout=conn.timeout)
    try:
        (entries,) = [conn.result(future) for future in futures.values()]
    except ToolError as exc:
        raise ToolError(f"{_what(args)}: {exc}") from None
    rows = [
        {
            "name": name,
            "value": entry.value,
            "source": _source(entry),
            "read_only": bool(entry.is_read_only),
            "sensitive": bool(entry.is_sensitive),
        }
        for name, entry in sorted(entries.items())
        if args.all or entry.source != ConfigSource.DEFAULT_CONFIG.value
    ]
    if args.output == "json":
        print_json({**_identity(args), "configs": rows})
    else:
        print_table(
            ["NAME", "VALUE", "SOURCE"],
            [
                (r["name"], "(sensitive)" if r["sensitive"] else r["value"], r["source"])
                for r in rows
            ],
        )
    return 0


def alter_configs(args: argparse.Namespace) -> int:
    if not args.set and not args.delete:
        raise UsageError("say what to change: --set KEY=VALUE or --delete KEY")
    changes = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in args.set
    ] + [
        ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        for key in args.delete
    ]
    resource = _resource(args, incremental_configs=changes)
    conn = Connection(args)
    _check_broker(conn, args)
    futures = conn.admin().incremental_alter_configs([resource], request_timeout=conn.timeout)
    for future in futures.values():
        try:
            conn.result(future)
        except ToolError as exc:
            raise ToolError(f"{_what(args)}: {exc}") from None
    if args.output == "json":
        print_json({**_identity(args), "set": dict(args.set), "deleted": args.delete})
    else:
        for key, value in args.set:
            print(f"Set {key}={value} on {_what(args)}.")
        for key in args.delete:
            print(f"Returned {key} to its default on {_what(args)}.")
    return 0
