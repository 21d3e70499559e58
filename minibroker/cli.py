"""`minibroker` / `python -m minibroker`: run a broker until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from minibroker.broker import Broker
from minibroker.config import BrokerConfig
from minibroker.state.topics import TopicError

# Settings with a flag of their own above; every other BrokerConfig field becomes
# `--field-name VALUE`, generated from the dataclass so the two never disagree.
_OWN_FLAGS = {"host", "port", "num_partitions", "auto_create_topics"}


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an int within [low, high], refused with a clear message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not within {low}..{high}")
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """BrokerConfig fields given on the command line."""
    prefix = "setting_"
    return {
        name[len(prefix) :]: value
        for name, value in vars(args).items()
        if name.startswith(prefix) and value is not None
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minibroker", description="Run an in-memory Kafka-protocol broker."
    )
    parser.add_argument("command", nargs="?", default="serve", choices=["serve"])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=_int_in(0, 65535), default=9092, help="port (0 picks a free one)"
    )
    parser.add_argument(
        "--partitions",
        type=_int_in(1, 100_000),
        default=1,
        help="partitions of auto-created topics (num.partitions)",
    )
    parser.add_argument(
        "--no-auto-create", action="store_true", help="disable auto.create.topics.enable"
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create a topic at start (repeatable)",
    )
    for field in dataclasses.fields(BrokerConfig):
        if field.name in _OWN_FLAGS:
            continue
        flag = "--" + field.name.replace("_", "-")
        kind: Any = {"int": int, "float": float, "bool": _bool}.get(str(field.type), str)
        parser.add_argument(
            flag,
            dest=f"setting_{field.name}",
            type=kind,
            default=None,
            metavar=field.name.upper(),
            help=f"BrokerConfig.{field.name} (default: {field.default})",
        )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    )
    return parser


async def _serve(args: argparse.Namespace) -> int:
    broker = Broker(
        args.host,
        args.port,
        num_partitions=args.partitions,
        auto_create_topics=not args.no_auto_create,
        **_settings(args),
    )
    try:
        await broker.start()
    except (OSError, OverflowError) as exc:
        print(f"minibroker: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    for spec in args.topic:
        name, _, count = spec.partition(":")
        try:
            broker.create_topic(name, int(count or args.partitions))
        except (TopicError, ValueError) as exc:
            print(f"minibroker: cannot create topic {spec!r}: {exc}", file=sys.stderr)
            await broker.stop()
            return 2
    print(f"minibroker listening, bootstrap.servers={broker.bootstrap_servers}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await broker.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    raise SystemExit(main())
