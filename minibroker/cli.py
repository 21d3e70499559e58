"""`minibroker` / `python -m minibroker`: run a broker until interrupted.

Every `BrokerConfig` setting is a flag, generated from the dataclass (with its help
text), so the command line and the Python API never disagree; `--config FILE` reads the
same settings from TOML (minibroker/config_file.py). `minibroker proxy` records a
Kafka's traffic; `minibroker topics|groups|produce|consume|configs` are the tools for
any Kafka (minibroker/commands/).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import resource
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minibroker import __version__, config_file
from minibroker.commands import COMMANDS as TOOLS
from minibroker.commands import Parser
from minibroker.config import LEAST_VALUES, BrokerConfig
from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import validate_topic_name

DEFAULT_PORT = 9092
MAX_PARTITIONS = 100_000
MAX_BROKERS = 64
# Settings spelled differently on the command line (short forms kept from Kafka's tools).
_SPELLING = {"num_partitions": "--partitions"}
# The options `minibroker --help` shows; `minibroker serve --help` (or --help-all) shows all.
COMMON_OPTIONS = frozenset(
    {"-h", "--help-all", "--version", "--config", "--topic", "--no-auto-create", "--log-level"}
    | {"--host", "--port", "--partitions", "--data-dir", "--brokers"}
)
WIDE_OPEN_WARNING = (
    "minibroker: listening on every interface: anyone who can reach this machine can "
    "read, write and delete topics (there is no authentication)"
)


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _int_from(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer of at least `low` (and at most `high`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            within = f"{low}..{high}" if high is not None else f"{low} or more"
            raise argparse.ArgumentTypeError(f"{value} is not within {within}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _topic(spec: str) -> tuple[str, int | None]:
    """NAME or NAME:PARTITIONS, checked before the broker starts."""
    name, _, count = spec.rpartition(":") if ":" in spec else (spec, "", "")
    try:
        validate_topic_name(name)
    except TopicError as exc:
        raise argparse.ArgumentTypeError(f"topic {spec!r}: {exc.message}") from None
    if not count:
        return name, None
    try:
        partitions = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"topic {spec!r}: partitions {count!r} is not an integer"
        ) from None
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"topic {spec!r}: partitions must be within 1..{MAX_PARTITIONS}"
        )
    return name, partitions


def _kind(field: dataclasses.Field[Any]) -> Any:
    if field.name == "port":
        return _int_from(0, 65535)
    if str(field.type) == "int":
        return _int_from(int(LEAST_VALUES.get(field.name, 0)))
    return {"float": _positive_float, "bool": _bool}.get(str(field.type), str)


def _metavar(field: dataclasses.Field[Any]) -> str:
    if field.name.endswith("_ms"):
        return "MS"
    if field.name.endswith("_bytes"):
        return "BYTES"
    if field.name.endswith("host"):
        return "HOST"
    return {"int": "N", "float": "N", "bool": "BOOL"}.get(str(field.type), "VALUE")


EXAMPLES = (
    "Example: minibroker --port 9092 --topic orders:3 --no-auto-create\n"
    "         minibroker serve --config broker.toml --port 9093\n"
    "         minibroker topics list --bootstrap-server localhost:9092"
)


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minibroker",
        description="Run an in-memory Kafka-protocol broker until interrupted (Ctrl-C).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=["serve", "proxy", "schema-registry", *TOOLS],
        help="what to do: serve (the default) runs the broker; proxy records a Kafka's "
        f"traffic; {', '.join(TOOLS)} talk to any Kafka (minibroker COMMAND --help)",
    )
    parser.add_argument(
        "--help-all",
        action="help",
        help="show every option and exit (the same as minibroker serve --help)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="broker settings from a TOML file: BrokerConfig names as keys, [[topic]] "
        "tables (name, partitions, configs) created at start; flags override it",
    )
    parser.add_argument("--version", action="version", version=f"minibroker {__version__}")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        type=_topic,
        metavar="NAME[:PARTITIONS]",
        help="create a topic at start (repeatable; partitions default to --partitions)",
    )
    parser.add_argument(
        "--no-auto-create",
        dest="setting_auto_create_topics",
        action="store_false",
        default=None,
        help="same as --auto-create-topics false",
    )
    parser.add_argument(
        "--brokers",
        type=_int_from(1, MAX_BROKERS),
        default=None,
        metavar="N",
        help="serve a cluster of N broker nodes, ids 0..N-1, on ports PORT..PORT+N-1 "
        "(each a free one with --port 0), leaders spread over them (default: 1)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="logging level (default: INFO)",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_fault,
        metavar="API:KEY=VALUE,...",
        help="a fault rule (repeatable), e.g. Produce:error=NOT_LEADER_OR_FOLLOWER,times=3 "
        "or Fetch:delay=0.5 or Metadata:close,after=2 (docs/faults.md)",
    )
    parser.add_argument(
        "--record-file",
        metavar="FILE",
        help="write every request and its answer, decoded, to FILE as JSON lines as they "
        "are answered (bytes fields over 1 KiB as their size)",
    )
    settings = parser.add_argument_group("broker settings (BrokerConfig)")
    for field in dataclasses.fields(BrokerConfig):
        if not field.metadata.get("flag", True):
            continue  # Python API only (a mapping)
        flag = _SPELLING.get(field.name, "--" + field.name.replace("_", "-"))
        default = DEFAULT_PORT if field.name == "port" else field.default
        settings.add_argument(
            flag,
            dest=f"setting_{field.name}",
            type=_kind(field),
            default=None,
            metavar=_metavar(field),
            help=field.metadata.get("help", "")
            + ("" if default is None else f" (default: {default})"),
        )
    return parser


def _commands() -> list[tuple[str, str]]:
    """Each command of `minibroker` with its one-line summary."""
    from minibroker.commands import parser as tools_parser

    listed = [
        ("serve", "run the broker until interrupted (the default)"),
        ("proxy", "forward to a Kafka and write its traffic, decoded, as JSON lines"),
        ("schema-registry", "serve a Schema Registry on any Kafka's _schemas topic"),
    ]
    for action in tools_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed += [(choice.dest, choice.help or "") for choice in action._choices_actions]
    return listed


def brief_help() -> str:
    """`minibroker --help`: the commands, each in a line, and the broker's common options;
    the full list of settings is behind `minibroker serve --help`."""
    parser = _parser()
    parser.usage = "minibroker [serve] [OPTIONS]\n       minibroker COMMAND [--help] ..."
    parser.epilog = (
        "Every broker setting is a flag too: minibroker serve --help (or --help-all) lists\n"
        "them all; minibroker COMMAND --help shows a command's options.\n\n" + EXAMPLES
    )
    width = max(len(name) for name, _ in _commands()) + 2
    parser.description = (
        "Run an in-memory Kafka-protocol broker until interrupted (Ctrl-C), or one of the\n"
        "tools that talk to any Kafka.\n\ncommands:\n"
        + "\n".join(f"  {name:<{width}}{summary}" for name, summary in _commands())
    )
    for action in parser._actions:
        if not COMMON_OPTIONS & set(action.option_strings):
            action.help = argparse.SUPPRESS
    for group in parser._action_groups:
        if group.title == "broker settings (BrokerConfig)":
            group.title = "common broker settings"
    return parser.format_help()


def _fault(spec: str) -> dict[str, Any]:
    from minibroker.faults import Faults, parse_fault

    try:
        arguments = parse_fault(spec)
        Faults().add(**arguments)  # refused here, before the broker starts
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"{spec!r}: {exc}") from None
    return arguments


def _settings(args: argparse.Namespace, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """BrokerConfig fields given on the command line, over those of `base` (a file's)."""
    prefix = "setting_"
    chosen = dict(base or {})
    chosen.update(
        (name[len(prefix) :], value)
        for name, value in vars(args).items()
        if name.startswith(prefix) and value is not None
    )
    chosen.setdefault("port", DEFAULT_PORT)
    return chosen


def _listens_everywhere(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host == ""


def _stop_on_signals() -> asyncio.Event:
    """An event Ctrl-C or SIGTERM sets. Taken before the broker starts, so a signal that
    comes as soon as it says it is listening still stops it cleanly (a data directory
    is synced and checkpointed)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return stop


def _node_ports(port: int, brokers: int) -> list[int]:
    """Node i listens on PORT+i (as a fixed listener port moves up by the node id); port
    0 gives each node a free port."""
    return [port + node_id if port else 0 for node_id in range(brokers)]


async def _serve(args: argparse.Namespace, settings: dict[str, Any], brokers: int = 1) -> int:
    from minibroker.broker import Broker
    from minibroker.cluster import Cluster, host_port
    from minibroker.storage.data_dir import DataDirError

    host = settings.pop("host", "127.0.0.1")
    port = settings.pop("port")
    broker: Cluster
    try:
        if brokers == 1:
            broker = Broker(host, port, **settings)
        else:
            broker = Cluster(brokers, host, _node_ports(port, brokers), port=port, **settings)
    except ValueError as exc:  # a users file that cannot be read, say
        print(f"minibroker: {exc}", file=sys.stderr)
        return 2
    stop = _stop_on_signals()
    try:
        await broker.start()
    except (DataDirError, RuntimeError, ValueError) as exc:  # e.g. a missing extra
        print(f"minibroker: {exc}", file=sys.stderr)
        return 2
    except (OSError, OverflowError) as exc:
        print(f"minibroker: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 2
    restored = set(broker.topics()) if broker.config.data_dir else set()
    for name, partitions, configs in args.topic:
        if name in restored:
            continue  # made by an earlier run and kept in the data directory
        try:
            broker.create_topic(name, partitions or broker.config.num_partitions, configs or None)
        except (TopicError, ValueError) as exc:
            print(f"minibroker: cannot create topic {name!r}: {exc}", file=sys.stderr)
            await broker.stop()
            return 2
    for arguments in args.fault:
        broker.faults.add(**arguments)
    if args.record_file:
        try:
            broker.record_requests(to=args.record_file)
        except OSError as exc:
            print(f"minibroker: cannot write {args.record_file}: {exc}", file=sys.stderr)
            await broker.stop()
            return 2
    if broker.config.listeners is not None:
        for listener in broker.nodes[0].listeners:
            address = broker.bootstrap_servers_for(listener.name)
            print(
                f"minibroker listener {listener.name} ({listener.security_protocol}) "
                f"bootstrap.servers={address}",
                flush=True,
            )
    if broker.config.data_dir:
        kept = [name for name in restored if not name.startswith("__")]
        print(
            f"minibroker data directory {broker.config.data_dir}: {len(kept)} topics kept, "
            f"flush policy {broker.config.log_flush}",
            flush=True,
        )
    if brokers > 1:
        for node in broker.nodes:
            print(
                f"minibroker node {node.node_id} listening on "
                f"{host_port(node.advertised_host, node.port)}",
                flush=True,
            )
    if broker.config.serves_schema_registry:
        print(
            f"minibroker schema registry, schema.registry.url={broker.schema_registry_url}",
            flush=True,
        )
    if broker.config.console_port >= 0:
        print(f"minibroker console, console.url={broker.console_url}", flush=True)
    print(f"minibroker listening, bootstrap.servers={broker.bootstrap_servers}", flush=True)
    await stop.wait()
    await broker.stop()
    if args.record_file:
        written = broker.recorded_lines()
        print(f"minibroker: {written} requests written to {args.record_file}", file=sys.stderr)
    return 0


def _proxy_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minibroker proxy",
        description="Listen as a Kafka broker, forward every request to UPSTREAM and write "
        "each request and its response, decoded, as one JSON line.",
        epilog="Example: minibroker proxy --upstream localhost:9092 --port 9093 "
        "--output traffic.jsonl  (then point the client at localhost:9093)",
    )
    parser.add_argument("--upstream", required=True, metavar="HOST:PORT", help="the Kafka")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=_int_from(0, 65535), default=0, help="port (default: a free one)"
    )
    parser.add_argument(
        "--output", default="-", metavar="FILE", help="JSON lines file (default: - for stdout)"
    )
    parser.add_argument("--log-level", default="WARNING", type=str.upper)
    return parser


async def _proxy(args: argparse.Namespace) -> int:
    from minibroker.proxy import RecordingProxy, json_line

    out = sys.stdout if args.output == "-" else open(args.output, "a", encoding="utf-8")  # noqa: SIM115
    try:

        def write(exchange: Any) -> None:
            out.write(json_line(exchange) + "\n")
            out.flush()

        # Written as they happen, kept nowhere else.
        proxy = RecordingProxy(args.upstream, host=args.host, port=args.port, record=write, keep=0)
        stop = _stop_on_signals()
        try:
            await proxy.start()
        except OSError as exc:
            print(
                f"minibroker proxy: cannot listen on {args.host}:{args.port}: {exc}",
                file=sys.stderr,
            )
            return 2
        print(
            f"minibroker proxy listening, bootstrap.servers={proxy.bootstrap_servers}, "
            f"forwarding to {args.upstream}",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
        await proxy.stop()
        return 0
    finally:
        if out is not sys.stdout:
            out.close()


def proxy_main(argv: list[str]) -> int:
    parser = _proxy_parser()
    args = parser.parse_args(argv)
    try:
        from minibroker.proxy import parse_address

        parse_address(args.upstream)
    except ValueError as exc:
        parser.error(f"--upstream: {exc}")
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return asyncio.run(_proxy(args))


def _schema_registry_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minibroker schema-registry",
        description="Serve a Confluent-compatible Schema Registry whose schemas live in the "
        "_schemas topic of the Kafka at --bootstrap-server (minibroker or any Kafka). Two "
        "registries on one topic serve the same schemas and ids.",
        epilog="Example: minibroker schema-registry --bootstrap-server localhost:9092 --port 8081",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=_int_from(0, 65535), default=0, help="port (default: a free one)"
    )
    parser.add_argument("--topic", default="_schemas", help="the topic schemas are kept in")
    parser.add_argument("--log-level", default="WARNING", type=str.upper)
    return parser


async def _schema_registry(args: argparse.Namespace) -> int:
    from minibroker.schema_registry.service import SchemaRegistry

    registry = SchemaRegistry(args.bootstrap_server, args.host, args.port, topic=args.topic)
    stop = _stop_on_signals()
    try:
        await registry.start()
    except Exception as exc:  # no Kafka there, or the port is taken
        await registry.stop()
        print(f"minibroker schema-registry: {exc}", file=sys.stderr)
        return 2
    print(f"minibroker schema registry, schema.registry.url={registry.url}", flush=True)
    await stop.wait()
    await registry.stop()
    return 0


def schema_registry_main(argv: list[str]) -> int:
    args = _schema_registry_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return asyncio.run(_schema_registry(args))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["proxy"]:
        return proxy_main(argv[1:])
    if argv[:1] == ["schema-registry"]:
        return schema_registry_main(argv[1:])
    if argv[:1] and argv[0] in TOOLS:
        from minibroker.commands import main as tool_main

        return tool_main(argv)
    if {"-h", "--help"} & set(argv) and "--help-all" not in argv and argv[:1] != ["serve"]:
        print(brief_help(), end="")
        return 0
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.error(f"put {args.command} first: minibroker {args.command} ...")
    from_file: dict[str, Any] = {}
    topics: list[config_file.StartTopic] = []
    brokers_in_file = None
    if args.config is not None:
        checks = {field.name: _kind(field) for field in dataclasses.fields(BrokerConfig)}
        checks["brokers"] = _int_from(1, MAX_BROKERS)
        try:
            from_file, topics, brokers_in_file = config_file.load(args.config, checks)
        except ValueError as exc:
            parser.error(f"--config {args.config}: {exc}")
    brokers = args.brokers or brokers_in_file or 1
    args.topic = topics + [(name, partitions, {}) for name, partitions in args.topic]
    settings = _settings(args, from_file)
    try:
        BrokerConfig(**settings)
    except ValueError as exc:
        name = str(exc).split("=", 1)[0]
        where = f"--config {args.config} / " if name in from_file else ""
        parser.error(f"{where}--{name.replace('_', '-')}: {exc}")
    config = BrokerConfig(**settings)
    if config.port and config.port + brokers - 1 > 65535:
        parser.error(
            f"--brokers {brokers}: ports {config.port}..{config.port + brokers - 1} go past 65535"
        )
    advertised = config.advertised_addresses()
    wide_open = [x for x in config.listener_list() if _listens_everywhere(x.host)]
    for listener in wide_open:
        if not (config.advertised_host or listener.name in advertised):
            where = "--host" if config.listeners is None else f"listener {listener.name}"
            parser.error(
                f"{where} {listener.host} listens on every interface; say which address "
                "clients should connect to with --advertised-host HOST or "
                "--advertised-listeners NAME://HOST:PORT"
            )
    if any(x.security_protocol == "PLAINTEXT" for x in wide_open):
        print(WIDE_OPEN_WARNING, file=sys.stderr)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    raise_open_files_limit()
    return asyncio.run(_serve(args, settings, brokers))


def raise_open_files_limit() -> None:
    """The server's soft limit of open files goes up to the hard limit, as the JVM does
    for a Kafka broker: segment files and connections share it, and a soft limit of
    1,024 is common. An embedded broker leaves its process's limits alone."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


if __name__ == "__main__":
    raise SystemExit(main())
