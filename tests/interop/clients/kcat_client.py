"""kcat, the librdkafka command line tool: each operation runs kcat; a reader is one
consuming kcat process, started again at each seek."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from tests.interop.clients.base import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    PRODUCE_DEFAULTS,
    READ_DEFAULTS,
    Capability,
    Client,
    Delivery,
    Metadata,
    OffsetAndTime,
    ProduceOptions,
    Producer,
    ProduceRejected,
    Reader,
    ReadOptions,
    Received,
    Record,
    Refusal,
    TopicMetadata,
    one_partition,
)
from tests.interop.clients.confluent_kafka_client import (
    librdkafka_fetch_limits,
    librdkafka_producer_settings,
    wait_for_end_lookup,
)
from tests.interop.conftest import answer_times, unique_client_id

KCAT = shutil.which("kcat")
RUN_TIMEOUT = 20  # seconds for one kcat run

# Splits key from value on an input line: a byte in no scenario's keys or values.
KEY_DELIMITER = "\x1e"
TIMESTAMP_TYPES = {"create": CREATE_TIME, "logappend": LOG_APPEND_TIME}
# librdkafka's error strings, as kcat prints them.
REFUSALS = {
    "Message size too large": Refusal.MESSAGE_TOO_LARGE,
    "Unknown topic": Refusal.UNKNOWN_TOPIC,
    "Message timed out": Refusal.TIMED_OUT,
}
METADATA_ERRORS = {"Broker: Unknown topic or partition": ErrorCode.unknown_topic_or_partition}


def settings_args(settings: dict[str, Any]) -> list[str]:
    args = []
    for name, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += ["-X", f"{name}={text}"]
    return args


def received(line: bytes) -> Received:
    """One -J line. kcat writes keys, values and headers as raw bytes inside JSON strings,
    so surrogateescape carries any bytes through."""
    record = json.loads(line.decode("utf-8", "surrogateescape"))
    flat = record.get("headers", [])
    return Received(
        _bytes(record["key"]),
        _bytes(record["payload"]),
        [(name, _bytes(value)) for name, value in zip(flat[::2], flat[1::2], strict=True)],
        record["ts"],
        TIMESTAMP_TYPES[record["tstype"]],
        record["offset"],
        record["partition"],
    )


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


class KcatClient(Client):
    name = "kcat"
    lacks = {
        Capability.RECORD_TIMESTAMPS: "kcat cannot set a record's timestamp",
        Capability.RECORD_HEADERS: "-H headers go on every record of a run",
        Capability.NULL_AND_EMPTY: "-Z turns every empty key and value of a run into null",
        Capability.RECORD_PARTITION: "-p names one partition for a whole run",
        Capability.DELIVERY_REPORTS: "kcat prints nothing about what it produced",
        Capability.DELIVERY_TIMESTAMP_TYPE: "kcat prints nothing about what it produced",
        Capability.READER_POSITION: "kcat has no position query",
        Capability.LOOKUP_TIMESTAMP: "-Q prints the offset alone",
        Capability.ADMIN: "kcat has no admin mode",
        Capability.ADMIN_LIST_OFFSETS: "kcat has no admin mode",
        Capability.MISSING_CONFIG_ERRORS: "kcat has no admin mode",
    }
    unknown_topic_refusal = Refusal.UNKNOWN_TOPIC

    @classmethod
    def unavailable(cls) -> str | None:
        return None if KCAT else "kcat is not installed"

    def command(self, *args: str) -> list[str]:
        assert KCAT is not None
        return [KCAT, "-b", self.broker.bootstrap_servers, "-m", "10", *args]

    def run(
        self, *args: str, stdin: bytes = b"", check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        command = self.command(*args)
        done = subprocess.run(
            command, input=stdin, capture_output=True, timeout=RUN_TIMEOUT, check=False
        )
        if check:
            assert done.returncode == 0, (command, done.stderr)
        return done

    def query_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """-Q: the offset for a time (-1: the end, -2: the earliest); -1 if none."""
        done = self.run("-Q", "-t", f"{topic}:{partition}:{timestamp}")
        name, quoted_partition, word, offset = done.stdout.decode().split()
        assert (name, quoted_partition, word) == (topic, f"[{partition}]", "offset"), done
        return int(offset)

    def read_range(self, topic: str, *offset_args: str, partition: int = 0) -> list[Received]:
        """Partition `partition` from `offset_args` (-o ...) to the current end."""
        done = self.run("-C", "-t", topic, "-p", str(partition), "-e", "-J", "-q", *offset_args)
        return [received(line) for line in done.stdout.splitlines() if line]

    @contextmanager
    def producer(self, options: ProduceOptions = PRODUCE_DEFAULTS) -> Iterator[Producer]:
        yield _Producer(self, options)

    @contextmanager
    def reader(
        self, topic: str, partitions: int = 1, options: ReadOptions = READ_DEFAULTS
    ) -> Iterator[Reader]:
        reader = _Reader(self, topic, partitions, options)
        try:
            yield reader
        finally:
            reader.stop()

    def metadata(self, topics: Sequence[str] | None = None) -> Metadata:
        queries = [[]] if topics is None else [["-t", name] for name in topics]
        listed = [json.loads(self.run("-L", "-J", *query).stdout) for query in queries]
        found: dict[str, TopicMetadata] = {}
        for answer in listed:
            for topic in answer["topics"]:
                error = METADATA_ERRORS[topic["error"]] if topic.get("error") else 0
                partitions = [p["partition"] for p in topic["partitions"]]
                found[topic["topic"]] = TopicMetadata(error, partitions)
        brokers = []
        for broker in listed[0]["brokers"]:
            host, _, port = broker["name"].rpartition(":")
            brokers.append((broker["id"], host, int(port)))
        return Metadata(brokers, found)


class _Producer(Producer):
    """One kcat -P run per send: a line per record, or a value with a newline in it sent
    whole from a file named on the command line."""

    def __init__(self, driver: KcatClient, options: ProduceOptions) -> None:
        self._driver = driver
        settings = librdkafka_producer_settings(options, partitioner="murmur2")
        codec = settings.pop("compression.type", None)
        self._args = [*(["-z", codec] if codec else []), *settings_args(settings)]

    def send(self, topic: str, records: Sequence[Record]) -> list[Delivery]:
        assert all(r.timestamp is None for r in records), Capability.RECORD_TIMESTAMPS
        [headers] = {r.headers for r in records}
        partition = one_partition(records)
        args = ["-P", "-t", topic, *self._args]
        if partition is not None:
            args += ["-p", str(partition)]
        for name, value in headers:
            assert value is not None
            args += ["-H", f"{name}={value.decode()}"]
        with tempfile.TemporaryDirectory() as folder:
            whole = records[0] if len(records) == 1 else None
            if whole is not None and whole.value is not None and b"\n" in whole.value:
                message = Path(folder) / "message"
                message.write_bytes(whole.value)
                key = [] if whole.key is None else ["-k", whole.key.decode()]
                done = self._driver.run(*args, *key, str(message), check=False)
            else:
                line_args, lines = _lines(records)
                done = self._driver.run(*args, *line_args, stdin=lines, check=False)
        if done.returncode != 0:
            errors = done.stderr.decode(errors="replace")
            refusals = [refusal for text, refusal in REFUSALS.items() if text in errors]
            assert refusals, f"kcat failed: {errors}"
            raise ProduceRejected(refusals[0], errors)
        return []


def _lines(records: Sequence[Record]) -> tuple[list[str], bytes]:
    """-K lines of `key<delimiter>value`; with -Z, empty parts are null."""
    keyed = any(r.key is not None for r in records)
    nulls = any(r.value is None or (keyed and r.key is None) for r in records)
    parts = [p for r in records for p in (r.key, r.value) if p is not None]
    if nulls:
        assert b"" not in parts, Capability.NULL_AND_EMPTY
    delimiter = KEY_DELIMITER.encode()
    assert not any(b"\n" in p or delimiter in p for p in parts), "a record is not one line"
    lines = b"".join(
        ((r.key or b"") + delimiter if keyed else b"") + (r.value or b"") + b"\n" for r in records
    )
    return [*(["-Z"] if nulls else []), *(["-K", KEY_DELIMITER] if keyed else [])], lines


class _Reader(Reader):
    def __init__(
        self, driver: KcatClient, topic: str, partitions: int, options: ReadOptions
    ) -> None:
        self._driver = driver
        self._topic = topic
        self._client_id = options.client_id or unique_client_id("kcat-reader")
        settings: dict[str, Any] = {
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": options.max_wait_ms,
            "client.id": self._client_id,
        }
        if options.fetch_limit is not None:
            settings.update(librdkafka_fetch_limits(options.fetch_limit))
        # Without -p, kcat reads every partition of the topic.
        only_first = ["-p", "0"] if partitions == 1 else []
        self._args = ["-C", "-t", topic, *only_first, "-J", "-u", "-q", *settings_args(settings)]
        self._process: subprocess.Popen[bytes] | None = None
        self._pending = b""
        self._start("beginning")

    def _start(self, offset: str) -> None:
        self.stop()
        # -q keeps stderr to errors: far too little to fill the pipe.
        self._process = subprocess.Popen(
            self._driver.command(*self._args, "-o", offset),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        os.set_blocking(self._process.stdout.fileno(), False)
        self._pending = b""

    def stop(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.communicate(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.communicate()
            self._process = None

    def _stderr(self) -> str:
        assert self._process is not None and self._process.stderr is not None
        return self._process.stderr.read().decode(errors="replace")

    def _take(self, max_records: int | None) -> list[Received]:
        *lines, self._pending = self._pending.split(b"\n")
        if max_records is not None and len(lines) > max_records:
            self._pending = b"\n".join([*lines[max_records:], self._pending])
            lines = lines[:max_records]
        return [received(line) for line in lines if line]

    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Received]:
        assert self._process is not None and self._process.stdout is not None
        output = self._process.stdout.fileno()
        deadline = time.monotonic() + timeout_ms / 1000
        found = self._take(max_records)
        while not found and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([output], [], [], left)
            if ready:
                chunk = os.read(output, 1 << 20)
                assert chunk, f"kcat stopped: {self._stderr()}"
                self._pending += chunk
                found = self._take(max_records)
        return found

    def seek(self, offset: int) -> None:
        self._start(str(offset))

    def seek_to_beginning(self) -> None:
        self._start("beginning")

    def seek_to_end(self) -> None:
        before = len(answer_times(self._driver.broker, self._client_id, "ListOffsets"))
        self._start("end")
        wait_for_end_lookup(self._driver, self._client_id, before)

    def offset_for_time(self, timestamp: int, partition: int = 0) -> OffsetAndTime | None:
        offset = self._driver.query_offset(self._topic, partition, timestamp)
        return None if offset == -1 else OffsetAndTime(offset, None)

    def watermarks(self, partition: int = 0) -> tuple[int, int]:
        earliest = self._driver.query_offset(self._topic, partition, -2)
        end = self._driver.query_offset(self._topic, partition, -1)
        return earliest, end
