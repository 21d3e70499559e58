"""`minibroker produce` (lines from stdin) and `minibroker consume` (records to stdout)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections import Counter
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from minibroker.commands import quiet_stdout
from minibroker.commands.common import (
    Connection,
    ToolError,
    UsageError,
    command,
    error_text,
    int_at_least,
    key_value,
    make_client,
    non_negative_float,
    print_json,
    print_table,
    say,
    timestamp_ms,
)

DEFAULT_IDLE_TIMEOUT = 5.0


def register(commands: Any) -> None:
    produce = command(
        commands,
        "produce",
        summary="send each line of stdin as a record",
        description="Send each line of stdin as one record (without its line end), then "
        "say how many were delivered. Exits 1 if any was not.",
        example="printf 'k1:hello\\nk2:world\\n' | minibroker produce orders "
        "--key-separator : --header source=cli",
        run=produce_lines,
    )
    produce.add_argument("topic", metavar="TOPIC")
    produce.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value (a line without it is not sent)",
    )
    produce.add_argument(
        "--header",
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    produce.add_argument(
        "--partition", type=int_at_least(0), metavar="N", help="(default: by key, or spread)"
    )

    consume = command(
        commands,
        "consume",
        summary="print a topic's records",
        description="Print a topic's records, one per line, until --max-messages were "
        "printed or none came for --idle-timeout seconds. Without --group it joins no "
        "group and commits nothing; with one, it commits what it printed.",
        example="minibroker consume orders --from-beginning --print-key --max-messages 10",
        run=consume_records,
    )
    consume.add_argument("topic", metavar="TOPIC")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest record")
    start.add_argument(
        "--offset",
        metavar="N|earliest|latest",
        help="start at this offset of --partition",
    )
    start.add_argument(
        "--from-timestamp",
        type=timestamp_ms,
        metavar="ISO8601|MS",
        help="start at the first record at or after this time",
    )
    consume.add_argument(
        "--partition", type=int_at_least(0), metavar="N", help="read only this partition"
    )
    consume.add_argument(
        "--max-messages", type=int_at_least(1), metavar="N", help="stop after N records"
    )
    consume.add_argument(
        "--idle-timeout",
        type=non_negative_float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="stop when no record came for this long; 0 waits for ever "
        f"(default: {DEFAULT_IDLE_TIMEOUT:g})",
    )
    consume.add_argument(
        "--group", metavar="GROUP", help="consume as a member of GROUP and commit offsets"
    )
    consume.add_argument("--print-key", action="store_true", help="key, a tab, then the value")
    consume.add_argument(
        "--print-headers", action="store_true", help="headers (k:v,k:v), a tab, then the rest"
    )
    consume.add_argument(
        "--json",
        action="store_true",
        help="pretty-print values that parse as JSON (with --output json: put them in as "
        "JSON rather than as a string)",
    )


# --- produce ---


class _Tally:
    def __init__(self) -> None:
        self.delivered = 0
        self.failed: Counter[str] = Counter()
        self.codes: Counter[int] = Counter()

    def __call__(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed[error_text(error)] += 1
            self.codes[error.code()] += 1


def _checked_topic(args: argparse.Namespace, conn: Connection, client: Any) -> Any:
    """The topic's metadata as `client` reads it; ToolError unless it exists and has the
    partition asked for."""
    try:
        metadata = client.list_topics(args.topic, timeout=conn.timeout)
    except KafkaException as exc:
        client.poll(0)
        raise conn.unreachable(exc) from None
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None:
        reason = "it does not exist" if topic is None else error_text(topic.error)
        raise ToolError(f"topic {args.topic!r}: {reason}")
    if args.partition is not None and args.partition not in topic.partitions:
        raise ToolError(
            f"topic {args.topic!r} has partitions 0..{len(topic.partitions) - 1}, "
            f"not {args.partition}"
        )
    return topic


def produce_lines(args: argparse.Namespace) -> int:
    conn = Connection(args)
    producer = make_client(
        Producer, conn.config(**{"message.timeout.ms": int(conn.timeout * 1000)})
    )
    _checked_topic(args, conn, producer)
    headers: list[tuple[str, str | bytes | None]] = [
        (key, value.encode()) for key, value in args.header
    ]
    separator = None if args.key_separator is None else args.key_separator.encode()
    extra: dict[str, Any] = {} if args.partition is None else {"partition": args.partition}
    tally = _Tally()
    for number, raw in enumerate(sys.stdin.buffer, 1):
        line = raw.removesuffix(b"\n").removesuffix(b"\r")
        key = None
        if separator is not None:
            key, found, value = line.partition(separator)
            if not found:
                say(f"{args.prog}: line {number} has no key separator {args.key_separator!r}")
                tally.failed["no key separator"] += 1
                continue
            line = value
        _send(producer, args.topic, key, line, headers, extra, tally)
    producer.flush()
    failed = sum(tally.failed.values())
    if not tally.delivered and KafkaError._MSG_TIMED_OUT in tally.codes:
        producer.poll(0)
        if conn.errors:
            raise conn.unreachable()
    for reason, count in tally.failed.items():
        say(f"{args.prog}: {count} record(s) not delivered: {reason}")
    if args.output == "json":
        print_json({"topic": args.topic, "delivered": tally.delivered, "failed": failed})
    else:
        print_table(["TOPIC", "DELIVERED", "FAILED"], [(args.topic, tally.delivered, failed)])
    return 1 if failed else 0


def _send(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: list[tuple[str, str | bytes | None]],
    extra: dict[str, Any],
    tally: _Tally,
) -> None:
    while True:
        try:
            producer.produce(topic, value, key, headers=headers, on_delivery=tally, **extra)
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)
            continue
        except KafkaException as exc:
            tally.failed[error_text(exc)] += 1
        producer.poll(0)
        return


# --- consume ---


def _check_consume_options(args: argparse.Namespace) -> None:
    if args.offset is not None:
        if args.partition is None:
            raise UsageError("--offset needs --partition")
        if args.offset not in ("earliest", "latest"):
            try:
                if int(args.offset) < 0:
                    raise ValueError
            except ValueError:
                raise UsageError(
                    f"--offset {args.offset!r}: a non-negative number, earliest or latest"
                ) from None
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise UsageError("--group takes the group's partitions: leave out --partition and --offset")


def _start_offset(args: argparse.Namespace) -> int:
    if args.offset == "earliest" or args.from_beginning:
        return OFFSET_BEGINNING
    if args.offset is None or args.offset == "latest":
        return OFFSET_END
    return int(args.offset)


def _at_timestamp(
    consumer: Consumer, partitions: list[TopicPartition], ms: int, timeout: float
) -> list[TopicPartition]:
    """Each partition at its first record at or after `ms` (its end when none is)."""
    asked = [TopicPartition(tp.topic, tp.partition, ms) for tp in partitions]
    found = consumer.offsets_for_times(asked, timeout=timeout)
    return [
        TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
        for tp in found
    ]


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _as_json(text: str | None) -> Any:
    """The value parsed when it is JSON (an object, array, number ...), else the text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Printer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def __call__(self, message: Message) -> None:
        args = self.args
        key, value = _text(message.key()), _text(message.value())
        raw_headers: list[tuple[str, bytes | None]] = cast(Any, message.headers()) or []
        headers = [(k, _text(v)) for k, v in raw_headers]
        if args.output == "json":
            record = {
                "topic": message.topic(),
                "partition": message.partition(),
                "offset": message.offset(),
                "timestamp": message.timestamp()[1],
                "key": key,
                "value": _as_json(value) if args.json else value,
                "headers": [[k, v] for k, v in headers],
            }
            line = json.dumps(record, ensure_ascii=False)
        else:
            if args.json and value is not None:
                parsed = _as_json(value)
                if parsed is not value:
                    value = json.dumps(parsed, indent=2, ensure_ascii=False)
            parts = []
            if args.print_headers:
                parts.append(",".join(f"{k}:{v}" for k, v in headers) or "NO_HEADERS")
            if args.print_key:
                parts.append("null" if key is None else key)
            parts.append("null" if value is None else value)
            line = "\t".join(parts)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def consume_records(args: argparse.Namespace) -> int:
    _check_consume_options(args)
    conn = Connection(args)
    settings = conn.config(
        **{
            # librdkafka needs a group id even to assign; without --group it never joins
            # or commits, so the name is never used.
            "group.id": args.group or f"minibroker-consume-{uuid.uuid4().hex}",
            "enable.auto.commit": args.group is not None,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        }
    )
    consumer = make_client(Consumer, settings)
    try:
        return _consume(args, conn, consumer)
    finally:
        consumer.close()  # with --group: commits what was printed


def _consume(args: argparse.Namespace, conn: Connection, consumer: Consumer) -> int:
    topic = _checked_topic(args, conn, consumer)
    # Idle time counts from the start, or with --group from the first assignment (a
    # join can take seconds: Kafka waits group.initial.rebalance.delay.ms for members).
    idle_since = [time.monotonic()]
    assigned_yet = [args.group is None]
    if args.group is None:
        chosen = [args.partition] if args.partition is not None else sorted(topic.partitions)
        start = _start_offset(args)
        partitions = [TopicPartition(args.topic, p, start) for p in chosen]
        if args.from_timestamp is not None:
            partitions = _at_timestamp(consumer, partitions, args.from_timestamp, conn.timeout)
        consumer.assign(partitions)
    else:

        def assigned(client: Consumer, partitions: list[TopicPartition]) -> None:
            idle_since[0] = time.monotonic()
            assigned_yet[0] = True
            if args.from_timestamp is not None:
                client.assign(_at_timestamp(client, partitions, args.from_timestamp, conn.timeout))

        consumer.subscribe([args.topic], on_assign=assigned)
    printer = _Printer(args)
    count = 0
    try:
        while args.max_messages is None or count < args.max_messages:
            message = consumer.poll(0.1)
            if message is None:
                idle = time.monotonic() - idle_since[0]
                if not assigned_yet[0]:
                    if idle >= conn.timeout:
                        raise ToolError(
                            f"group {args.group!r}: no assignment within {conn.timeout:g}s"
                        )
                elif args.idle_timeout and idle >= args.idle_timeout:
                    break
                continue
            error = message.error()
            if error is not None:
                if error.fatal() or error.code() in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    KafkaError.GROUP_AUTHORIZATION_FAILED,
                ):
                    raise ToolError(error_text(error))
                say(f"{args.prog}: {error_text(error)}")
                continue
            printer(message)
            count += 1
            idle_since[0] = time.monotonic()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        quiet_stdout()
    say(f"Consumed {count} record(s).")
    return 0
