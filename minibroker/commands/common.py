"""What every command-line tool shares: the connection and security options, the client
settings they become, errors and their exit codes, and table or JSON output.

The tools talk to any Kafka-protocol broker through confluent-kafka (librdkafka); they
never import the broker's state.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NoReturn

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from minibroker.commands import EXIT_USAGE

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT = 10.0
EXIT_FAILED = 1  # the broker refused or could not be reached

# Reached, but refused: the credentials or the TLS handshake.
_SIGN_IN_FAILURES = (KafkaError._AUTHENTICATION, KafkaError._SSL)

# librdkafka spellings of the security options.
_SECURITY_PROPERTIES = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
}


class ToolError(Exception):
    """An expected failure: one line for stderr and the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


class UsageError(ToolError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The connection, output and security options every tool takes."""
    connection = parser.add_argument_group("connection")
    connection.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        default=None,
        help=f"the broker to talk to (default: $MINIBROKER_BOOTSTRAP, else {DEFAULT_BOOTSTRAP})",
    )
    connection.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the broker (default: {DEFAULT_TIMEOUT:g})",
    )
    connection.add_argument(
        "--output",
        choices=["table", "json"],
        default="table",
        help="aligned columns (default) or JSON",
    )
    connection.add_argument(
        "-X",
        dest="properties",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="any librdkafka client property (repeatable), e.g. -X debug=broker",
    )
    connection.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        help="a Java-style .properties file of client settings, as Kafka's tools take",
    )
    security = parser.add_argument_group("security")
    security.add_argument(
        "--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    )
    security.add_argument("--sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    security.add_argument("--sasl-username", metavar="NAME")
    security.add_argument(
        "--sasl-password",
        metavar="SECRET",
        help="(default: $MINIBROKER_SASL_PASSWORD, which keeps it off the command line)",
    )
    security.add_argument("--ssl-cafile", metavar="FILE", help="CA certificates (PEM)")
    security.add_argument("--ssl-certfile", metavar="FILE", help="client certificate (PEM)")
    security.add_argument("--ssl-keyfile", metavar="FILE", help="client private key (PEM)")


# --- parsing helpers ---


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not positive")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def int_at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value

    return parse


def key_value(text: str) -> tuple[str, str]:
    """KEY=VALUE (the value may be empty, the key may not)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date-time (local time without a zone,
    as Kafka's tools read it)."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither milliseconds since the epoch nor an ISO 8601 date-time "
            "(2024-05-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tools take it
    return int(moment.timestamp() * 1000)


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file: KEY=VALUE, KEY: VALUE or KEY VALUE lines, # and ! comments,
    lines continued by a trailing backslash, and the usual escapes."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--command-config {path}: {exc.strerror or exc}") from None
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    properties = {}
    for line in logical:
        key, value = _split_property(line)
        properties[_unescape(key)] = _unescape(value)
    return properties


def _split_property(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return key, rest


def _unescape(text: str) -> str:
    out = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, "")
        if escaped == "u":
            digits = "".join(next(chars, "") for _ in range(4))
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                out.append("u" + digits)
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(escaped, escaped))
    return "".join(out)


def _from_java(properties: Mapping[str, str]) -> dict[str, str]:
    """Java client settings librdkafka spells differently, translated: the JAAS line's
    username and password, a PEM truststore, an empty endpoint identification."""
    settings = dict(properties)
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None:
        for name in ("username", "password"):
            value = _jaas_option(jaas, name)
            if value is not None:
                settings.setdefault(f"sasl.{name}", value)
    if settings.get("ssl.truststore.type", "").upper() == "PEM":
        settings.pop("ssl.truststore.type")
        location = settings.pop("ssl.truststore.location", None)
        if location:
            settings.setdefault("ssl.ca.location", location)
    if settings.get("ssl.endpoint.identification.algorithm") == "":
        settings["ssl.endpoint.identification.algorithm"] = "none"
    return settings


def _jaas_option(jaas: str, name: str) -> str | None:
    found = re.search(rf'\b{name}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas)
    return None if found is None else found.group(1).replace('\\"', '"')


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka settings from the options: the --command-config file, then the named
    options, then -X properties (each overrides the ones before)."""
    settings = {"bootstrap.servers": os.environ.get("MINIBROKER_BOOTSTRAP") or DEFAULT_BOOTSTRAP}
    if args.command_config is not None:
        settings.update(_from_java(read_properties(args.command_config)))
    if args.bootstrap_server:
        settings["bootstrap.servers"] = args.bootstrap_server
    for option, prop in _SECURITY_PROPERTIES.items():
        value = getattr(args, option)
        if option == "sasl_password" and value is None:
            value = os.environ.get("MINIBROKER_SASL_PASSWORD") or None
        if value is not None:
            settings[prop] = value
    settings.update(dict(args.properties))
    if "debug" not in settings:  # failures are reported once, as one line, not logged
        settings.setdefault("log_level", "0")
    return settings


# --- talking to the broker ---


class Connection:
    """The client settings of one tool run, and the errors librdkafka reported."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.timeout: float = args.timeout
        self.settings = client_settings(args)
        self.bootstrap = self.settings["bootstrap.servers"]
        self.errors: list[KafkaError] = []
        self._admin: AdminClient | None = None
        self.metadata: Any = None  # the cluster's metadata, once the broker was reached

    def config(self, **extra: Any) -> dict[str, Any]:
        """Settings for a client of this run (extra ones do not override the user's)."""
        return {**extra, **self.settings, "error_cb": self.errors.append}

    def admin(self) -> AdminClient:
        """An AdminClient that has reached the broker (else ToolError, saying which
        address could not be reached and why)."""
        if self._admin is None:
            admin = make_client(AdminClient, self.config())
            try:
                self.metadata = admin.list_topics(timeout=self.timeout)
            except KafkaException as exc:
                admin.poll(0)
                raise self.unreachable(exc) from None
            self._admin = admin
        return self._admin

    def unreachable(self, exc: KafkaException | None = None) -> ToolError:
        reasons = [
            re.sub(r"^\S+/(bootstrap|\d+): ", "", e.str())
            for e in self.errors
            if e.code() != KafkaError._ALL_BROKERS_DOWN
        ]
        reason = reasons[-1] if reasons else (error_text(exc) if exc is not None else "")
        if any(e.code() in _SIGN_IN_FAILURES for e in self.errors):
            return ToolError(f"could not sign in to the broker at {self.bootstrap}: {reason}")
        return ToolError(
            f"cannot reach a broker at {self.bootstrap} within {self.timeout:g}s"
            + (f": {reason}" if reason else "")
        )

    def result(self, future: Future[Any]) -> Any:
        """What an admin request returned; a broker's refusal becomes a ToolError."""
        try:
            return future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            raise ToolError(error_text(exc)) from None
        except TimeoutError:
            raise ToolError(f"no answer from {self.bootstrap} within {self.timeout:g}s") from None


def make_client(kind: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> Any:
    """A client, or UsageError when librdkafka refuses the settings."""
    try:
        return kind(config)
    except (KafkaException, ValueError, TypeError) as exc:
        detail = error_text(exc) if isinstance(exc, KafkaException) else str(exc)
        raise UsageError(f"client settings refused: {detail}") from None


def error_text(exc: BaseException | KafkaError) -> str:
    """A KafkaError as text with its name: "Topic 'x' already exists. (TOPIC_ALREADY_EXISTS)"."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(error, KafkaError):
        text = error.str().removeprefix("Broker: ")
        return f"{text} ({error.name()})"
    return str(error)


# --- output ---


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Aligned columns under a header row; None shows as "-"."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(_cell(v) for v in value)
    return str(value)


def print_json(document: object) -> None:
    print(json.dumps(document, indent=2))


def fail(message: str) -> NoReturn:
    raise ToolError(message)


def say(message: str) -> None:
    """A note for the person at the terminal (stderr, so stdout stays the result)."""
    print(message, file=sys.stderr)


def command(
    subparsers: Any,
    name: str,
    *,
    summary: str,
    example: str,
    run: Callable[[argparse.Namespace], int],
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A tool's parser: its help, an example, the common options, and what runs it."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=summary,
        description=description or summary,
        epilog="Example:\n  " + example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run, prog=parser.prog)
    add_common_options(parser)
    return parser


def group_of_commands(subparsers: Any, name: str, *, summary: str, example: str) -> Any:
    """A command with actions of its own (`topics list`, `topics create` ...)."""
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=summary,
        epilog="Example:\n  " + example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)


def partitions_of(conn: Connection, topic: str) -> list[int]:
    """The topic's partition ids, or ToolError when it does not exist."""
    from confluent_kafka import TopicCollection

    futures = conn.admin().describe_topics(TopicCollection([topic]), request_timeout=conn.timeout)
    try:
        description = conn.result(futures[topic])
    except ToolError as exc:
        raise about("topic", topic, exc) from None
    return sorted(p.id for p in description.partitions)


def offsets_at(
    conn: Connection, partitions: Iterable[tuple[str, int]], spec: Any
) -> dict[tuple[str, int], int]:
    """ListOffsets for each (topic, partition): spec is an OffsetSpec (earliest, latest,
    for_timestamp); -1 where no record qualifies."""
    from confluent_kafka import TopicPartition

    asked = {TopicPartition(topic, partition): spec for topic, partition in partitions}
    if not asked:
        return {}
    futures = conn.admin().list_offsets(asked, request_timeout=conn.timeout)
    return {(tp.topic, tp.partition): conn.result(future).offset for tp, future in futures.items()}


def about(kind: str, name: str, exc: ToolError) -> ToolError:
    """The broker's complaint, prefixed with what it concerns unless it names it."""
    text = str(exc)
    return ToolError(text if name in text else f"{kind} {name!r}: {text}", exc.code)


def report_deletions(
    args: argparse.Namespace, conn: Connection, kind: str, names: list[str], futures: Any
) -> int:
    """Wait for each deletion and report it (JSON: deleted and failed); 1 if any failed."""
    deleted, failed = [], {}
    for name in names:
        try:
            conn.result(futures[name])
        except ToolError as exc:
            failed[name] = str(exc)
        else:
            deleted.append(name)
    if args.output == "json":
        print_json({"deleted": deleted, "failed": failed})
    else:
        for name in deleted:
            print(f"Deleted {kind} {name!r}.")
    for name, reason in failed.items():
        say(f"{args.prog}: {kind} {name!r}: {reason}")
    return 1 if failed else 0
