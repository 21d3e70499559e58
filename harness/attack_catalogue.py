"""The catalogue of attacks on a Kafka-protocol broker, grouped by what they abuse.

Each is a `Scenario` that harness/attacks.py runs against a child broker beside an honest
client: tests/hardening/test_attacks.py (one regression test per attack) and
bench/hostile.py (the same attacks, measured and tabulated) share it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import functools
import os
import resource
import select
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.attacks import (
    CREATE_TOPICS,
    DATA_BATCH_VALUE,
    DATA_BATCHES,
    DATA_TOPIC,
    FETCH,
    FRESH_DATA_DIR,
    INVALID_PARTITIONS,
    KEEP_TOPIC,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    POLICY_VIOLATION,
    PRODUCE,
    QUIET_TOPIC,
    TOPICS,
    MiB,
    Rate,
    Run,
    Scenario,
    close_all,
    closed_by_peer,
    connect,
    first_served,
    frame,
    open_connections,
    produce_values,
    read_frame,
    read_frame_size,
    with_correlation_id,
)
from harness.raw_client import (
    RawClient,
    create_topics_request,
    delete_records_request,
    encode,
    fetch_request,
    list_offsets_request,
    make,
    make_request,
    metadata_request,
    parse_host_port,
    produce_codes,
    produce_request,
)
from minibroker.protocol import messages, records

# --- 1. declared lengths ----------------------------------------------------------------

_HUGE_UVARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1: a compact array of 2**32 - 2 items


def _header(api_key: int, version: int, flexible: bool) -> bytes:
    head = struct.pack(">hhi", api_key, version, 1) + struct.pack(">h", 1) + b"x"
    return head + (b"\x00" if flexible else b"")  # header v2 ends with its tagged fields


HUGE_LENGTH_FRAMES: dict[str, bytes] = {
    # Metadata v12: header v2 (client id "x", no tags), then topics with a compact length
    # of 2**32-1: 18 bytes after the size prefix.
    "metadata-v12-compact-array": frame(_header(METADATA, 12, True) + _HUGE_UVARINT + b"\x01"),
    # The legacy form: Metadata v1, an int32 topic count of 2**31-1.
    "metadata-v1-int32-array": frame(_header(METADATA, 1, False) + struct.pack(">i", 2**31 - 1)),
    # Produce v9: transactional id null, acks, timeout, topic_data of 2**32-2 entries.
    "produce-v9-compact-array": frame(
        _header(PRODUCE, 9, True) + b"\x00" + struct.pack(">hi", 1, 1000) + _HUGE_UVARINT
    ),
}


def huge_length(variant: str) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        with run.during_action(1.0), RawClient(run.bootstrap, timeout=10) as client:
            client.send_bytes(HUGE_LENGTH_FRAMES[variant])
            if not client.is_closed_by_peer(5):
                run.problem("the broker kept the connection of a broken frame open")
        run.fact(f"{len(HUGE_LENGTH_FRAMES[variant]) - 4}-byte frame sent")

    return attack


# --- 2. size prefixes -------------------------------------------------------------------


def huge_prefixes(connections: int = 30, declared: int = 100 * MiB) -> Callable[[Run], None]:
    """Each connection declares a `declared`-byte frame and sends 10 bytes of it."""

    def attack(run: Run) -> None:
        socks = open_connections(
            run.bootstrap, connections, struct.pack(">i", declared) + bytes(10)
        )
        try:
            run.during(1.0)
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and not all(closed_by_peer(s) for s in socks):
                time.sleep(0.1)
            still_open = sum(not closed_by_peer(s) for s in socks)
            if still_open:
                run.problem(
                    f"{still_open} of {len(socks)} stuck partial frames still open 4 s into "
                    "the attack (partial_request_timeout_ms=1000)"
                )
        finally:
            close_all(socks)

    return attack


def budget_flood(connections: int = 30, each: int = 20 * MiB) -> Callable[[Run], None]:
    """Each connection declares a 100 MiB frame and really sends `each` bytes of it, as fast
    as the broker reads: the bytes held must stay within queued_max_request_bytes."""

    def attack(run: Run) -> None:
        prefix = struct.pack(">i", 100 * MiB)
        socks = open_connections(run.bootstrap, connections, prefix)
        sent = [0] * len(socks)
        closed = [False] * len(socks)
        for sock in socks:
            sock.setblocking(False)
        chunk = bytes(256 * 1024)
        started = stalled_since = time.monotonic()
        # Push until every connection sent its share or was closed, or nothing moved for
        # 1.5 s (the broker stopped reading).
        while time.monotonic() - stalled_since < 1.5 and time.monotonic() - started < 20:
            moved = False
            for index, sock in enumerate(socks):
                if sent[index] >= each or closed[index]:
                    continue
                try:
                    sent[index] += sock.send(chunk[: each - sent[index]])
                    moved = True
                except BlockingIOError:
                    pass
                except OSError:
                    closed[index] = True
            if moved:
                stalled_since = time.monotonic()
            elif all(done >= each or gone for done, gone in zip(sent, closed, strict=True)):
                break
            else:
                time.sleep(0.01)
        run.fact(
            f"{sum(sent) / MiB:,.0f} MiB sent by {len(socks)} connections in "
            f"{time.monotonic() - started:.1f} s, {sum(closed)} of them closed by the broker"
        )
        served = first_served(run.bootstrap, 6.0)
        if served is None:
            run.problem("a new client was not served within 6 s of the flood ending")
        else:
            run.fact(f"new client served {served:.1f} s after the flood ended")
        close_all(socks)

    return attack


# --- 3. long polls ----------------------------------------------------------------------


def long_polls(connections: int = 100, repeats: int = 1000) -> Callable[[Run], None]:
    """Fetches waiting an hour for 2**31-1 bytes of a quiet partition listed 1,000 times."""

    def attack(run: Run) -> None:
        request = fetch_request(
            QUIET_TOPIC,
            (0,) * repeats,
            max_wait=datetime.timedelta(hours=1),
            min_bytes=2**31 - 1,
            max_bytes=2**31 - 1,
        )
        encoded = encode(FETCH, 11, request, 1, "poller")
        socks = open_connections(run.bootstrap, connections, encoded)
        try:
            # Measure once the broker has read every poll, not after a guessed delay.
            run.caught_up(socks, "the long polls")
            run.during(1.0)
        finally:
            close_all(socks)  # the attackers go away; their polls must go with them

    return attack


# --- 4. decompression bombs -------------------------------------------------------------

BOMB_EXPANSION = 1 << 30  # every bomb expands to 1 GiB of zeros
CODECS = {"snappy": 2, "lz4": 3, "zstd": 4}


@functools.cache
def bomb_payload(codec: str) -> bytes:
    chunk = bytes(16 * MiB)
    chunks = BOMB_EXPANSION // len(chunk)
    if codec == "zstd":
        import zstandard

        compressor = zstandard.ZstdCompressor(level=1).compressobj()
        return b"".join([compressor.compress(chunk) for _ in range(chunks)] + [compressor.flush()])
    if codec == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        lz4_compressor = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=0
        )
        parts = [lz4_compressor.begin()]
        parts += [lz4_compressor.compress(chunk) for _ in range(chunks)]
        return b"".join([*parts, lz4_compressor.flush()])
    if codec == "snappy":
        import cramjam

        # xerial framing (what Java clients send): a header, then sized raw blocks.
        block = bytes(cramjam.snappy.compress_raw(chunk))
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        return header + (struct.pack(">i", len(block)) + block) * chunks
    raise ValueError(codec)


def compressed_batch(codec: int, payload: bytes, record_count: int = 1) -> bytes:
    """A magic-2 batch whose records are `payload`, said to be compressed with `codec`."""
    after_crc = (
        struct.pack(">hiqqqhii", codec, record_count - 1, 1000, 1000, -1, -1, -1, record_count)
        + payload
    )
    crc = records.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def bomb(codec: str, repeats: int = 10) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        topic = f"bomb-{codec}"
        batch = compressed_batch(CODECS[codec], bomb_payload(codec))
        with RawClient(run.bootstrap, timeout=60) as client:
            # Any client may raise a topic's max.message.bytes; 64 MiB lets every codec's
            # batch in (the snappy one is the largest, ~50 MB).
            created = client.request(
                CREATE_TOPICS,
                7,
                create_topics_request(
                    [(topic, 1, {"max.message.bytes": str(64 * MiB)})], timeout_ms=60_000
                ),
            )
            if created.topics[0].error_code.value != 0:
                raise RuntimeError(f"cannot create {topic}: {created.topics[0]}")
            codes = produce_codes(
                client.request(PRODUCE, 9, produce_request(topic, batch, acks=1, timeout_ms=30_000))
            )
            if codes == [0]:
                run.add_stored(len(batch))
                run.fact(f"{len(batch):,}-byte {codec} batch stored")
            else:
                run.fact(f"{len(batch):,}-byte {codec} batch refused at produce: {codes}")
            began = time.monotonic()
            with run.during_action(2.0):
                try:
                    client.request(
                        LIST_OFFSETS, 7, list_offsets_request(topic, timestamp=0, repeats=repeats)
                    )
                    run.fact(f"ListOffsets x{repeats} answered in {time.monotonic() - began:.2f} s")
                except (OSError, ConnectionError) as exc:
                    run.problem(f"ListOffsets by timestamp got no answer: {exc!r}")

    return attack


# --- 5. groups --------------------------------------------------------------------------


def _commit_frame(group_id: str) -> bytes:
    version = 8
    partition = make(
        OFFSET_COMMIT,
        version,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=1,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    topic = make(
        OFFSET_COMMIT, version, "OffsetCommitRequestTopic", name=KEEP_TOPIC, partitions=(partition,)
    )
    request = make_request(
        OFFSET_COMMIT,
        version,
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    return encode(OFFSET_COMMIT, version, request, 1, "anon")


def anonymous_commits(bootstrap: str, groups: int, window: int = 200) -> int:
    """OffsetCommits (generation -1, member id "") for `groups` new groups `anon-NNNNNN`,
    pipelined `window` at a time; return how many were accepted."""
    template = _commit_frame("anon-000000")
    accepted = 0
    with connect(bootstrap, timeout=30) as sock:
        for start in range(0, groups, window):
            batch = [
                with_correlation_id(template.replace(b"anon-000000", b"anon-%06d" % i), i)
                for i in range(start, min(groups, start + window))
            ]
            sock.sendall(b"".join(batch))
            for _ in batch:
                _, response = messages.decode_response(read_frame(sock), OFFSET_COMMIT, 8)
                codes = [p.error_code.value for t in response.topics for p in t.partitions]
                accepted += codes == [0]
    return accepted


def anonymous_groups(bootstrap: str) -> int:
    with RawClient(bootstrap, timeout=30) as client:
        response = client.call(LIST_GROUPS, 4, states_filter=())
    return sum(group.group_id.startswith("anon-") for group in response.groups)


def group_flood(groups: int = 20_000, expect_expiry: bool = False) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        began = time.monotonic()
        accepted = anonymous_commits(run.bootstrap, groups)
        run.fact(f"{accepted:,} anonymous commits accepted in {time.monotonic() - began:.1f} s")
        # The attack is over; the groups it made stay (or expire). Produce must not pay
        # for them.
        run.after()
        if expect_expiry:
            deadline = time.monotonic() + 5.0
            left = anonymous_groups(run.bootstrap)
            while left and time.monotonic() < deadline:
                time.sleep(0.2)
                left = anonymous_groups(run.bootstrap)
            if left:
                run.problem(
                    f"{left:,} empty groups still listed 5 s after their retention "
                    "(offsets_retention_minutes=0.01) ran out"
                )

    return attack


# --- 6. connection slots and idle connections ---------------------------------------------

# The first 9 bytes of a 15-byte Metadata v1 frame (size prefix, api key, version, half
# of the correlation id).
HALF_FRAME = frame(struct.pack(">hhih", METADATA, 1, 1, -1) + struct.pack(">i", -1))[:9]


def lockout(
    connections: int, first_bytes: bytes, served_within: float, label: str
) -> Callable[[Run], None]:
    """`connections` connections that send `first_bytes` and stop; a client that connects
    while they are open must be served within `served_within` seconds."""

    def attack(run: Run) -> None:
        began = time.monotonic()
        socks = open_connections(run.bootstrap, connections, first_bytes)
        try:
            opened = time.monotonic() - began
            run.fact(f"{len(socks)} {label} connections opened in {opened:.1f} s")
            run.during(1.0)
            served = first_served(run.bootstrap, served_within)
            if served is None:
                run.problem(
                    f"a client connecting while the {label} connections are open was not "
                    f"served within {served_within:.0f} s"
                )
            else:
                run.fact(f"a new client was served after {served:.1f} s")
        finally:
            close_all(socks)

    return attack


def idle_memory(connections: int = 1000) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        before = run.target.rss()
        socks = open_connections(run.bootstrap, connections)
        try:
            run.caught_up(socks, "the idle connections")  # every one accepted
            grown = run.target.rss() - before
            run.fact(
                f"{len(socks)} idle connections: RSS +{grown / MiB:,.0f} MiB "
                f"({grown / max(len(socks), 1) / 1024:,.0f} KiB each)"
            )
            run.during(1.0)
        finally:
            close_all(socks)

    return attack


# --- 7. amplification and pipelining ----------------------------------------------------


def _store_data(run: Run) -> None:
    values = [bytes([65 + i]) * DATA_BATCH_VALUE for i in range(DATA_BATCHES)]
    run.add_stored(produce_values(run.bootstrap, DATA_TOPIC, values))


def amplified_fetch(
    repeats: int = 5000, fetch_max_bytes: int = 57_671_680
) -> Callable[[Run], None]:
    """One Fetch naming the data partition `repeats` times."""

    def attack(run: Run) -> None:
        encoded = encode(
            FETCH,
            11,
            fetch_request(DATA_TOPIC, (0,) * repeats, max_bytes=2**31 - 1),
            7,
            "amplifier",
        )
        _store_data(run)
        run.fact(f"{len(encoded) / 1024:,.0f} KiB Fetch request")
        with run.during_action(2.0), connect(run.bootstrap, timeout=60) as sock:
            sock.sendall(encoded)
            try:
                size = read_frame_size(sock)
                run.fact(f"response {size / MiB:,.1f} MiB")
                if size > fetch_max_bytes + MiB:
                    run.problem(
                        f"a {size / MiB:,.0f} MiB response, over fetch_max_bytes "
                        f"({fetch_max_bytes / MiB:,.0f} MiB)"
                    )
            except (OSError, ConnectionError, struct.error) as exc:
                run.problem(f"no Fetch response: {exc!r}")

    return attack


def pipelined_fetches(count: int = 10_000) -> Callable[[Run], None]:
    """`count` Fetches of the data partition sent back to back; no response is read."""

    def attack(run: Run) -> None:
        template = encode(FETCH, 11, fetch_request(DATA_TOPIC, max_bytes=2**31 - 1), 1, "pipeliner")
        _store_data(run)
        payload = b"".join(with_correlation_id(template, i) for i in range(1, count + 1))
        sock = connect(run.bootstrap)
        try:
            sock.setblocking(False)
            sent = 0
            stalled_since = time.monotonic()
            while sent < len(payload) and time.monotonic() - stalled_since < 1.0:
                try:
                    sent += sock.send(payload[sent : sent + 65536])
                    stalled_since = time.monotonic()
                except BlockingIOError:
                    time.sleep(0.01)
            run.fact(f"{sent // len(template):,} of {count:,} Fetches sent, none read")
            run.during(1.5)
        finally:
            sock.close()

    return attack


@functools.cache
def _create_frame(topics: int, partitions: int) -> bytes:
    no_configs: dict[str, str] = {}
    specs = [(f"bulk-{i:06d}", partitions, no_configs) for i in range(topics)]
    return encode(CREATE_TOPICS, 7, create_topics_request(specs, timeout_ms=60_000), 3, "creator")


def bulk_partitions(bootstrap: str) -> tuple[int, int]:
    """(topics, partitions) named bulk-* in the cluster's metadata."""
    with RawClient(bootstrap, timeout=60) as client:
        response = client.call(METADATA, 1, topics=None)
    bulk = [t for t in response.topics if t.name.startswith("bulk-")]
    return len(bulk), sum(len(t.partitions) for t in bulk)


def mass_create(
    topics: int, partitions: int, per_request: int = 10_000, per_broker: int = 100_000
) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        encoded = _create_frame(topics, partitions)
        # The window is the broker's work: sending the request and receiving the answer.
        # Decoding 100,000 topic results is this client's own work, done after it, so
        # that on a loaded machine it does not take CPU from the honest producer inside
        # the window.
        with run.during_action(2.0), connect(run.bootstrap, timeout=120) as sock:
            began = time.monotonic()
            sock.sendall(encoded)
            try:
                answer = read_frame(sock)
            except (OSError, ConnectionError, struct.error) as exc:
                run.problem(f"no CreateTopics response: {exc!r}")
                return
            run.fact(f"CreateTopics answered in {time.monotonic() - began:.1f} s")
        _, response = messages.decode_response(answer, CREATE_TOPICS, 7)
        codes: dict[int, int] = {}
        for result in response.topics:
            codes[result.error_code.value] = codes.get(result.error_code.value, 0) + 1
        run.fact(f"error codes: {codes}")
        if len(response.topics) != topics:
            run.problem(f"{len(response.topics):,} topic results for {topics:,} topics")
        unexpected = set(codes) - {0, POLICY_VIOLATION, INVALID_PARTITIONS}
        if unexpected:
            run.problem(f"unexpected error codes {sorted(unexpected)}")
        made_topics, made_partitions = bulk_partitions(run.bootstrap)
        run.fact(f"{made_topics:,} topics / {made_partitions:,} partitions created")
        if made_partitions > per_request:
            run.problem(
                f"one request created {made_partitions:,} partitions "
                f"(max_partitions_per_request {per_request:,})"
            )
        if made_partitions > per_broker:
            run.problem(
                f"{made_partitions:,} partitions (max_partitions_per_broker {per_broker:,})"
            )

    return attack


# --- 9. descriptors ---------------------------------------------------------------------

WIDE_TOPIC = "wide"
WIDE_PARTITIONS = 1500
OPEN_FILES = 1024  # the child's limit of open descriptors, below WIDE_PARTITIONS


def _wide_value(index: int) -> bytes:
    return b"wide-%04d" % index


def _read_wide(bootstrap: str, partitions: int, per_request: int = 500) -> dict[int, list[bytes]]:
    """Every value of every partition of WIDE_TOPIC, by partition."""
    found: dict[int, list[bytes]] = {}
    with RawClient(bootstrap, timeout=30) as client:
        for first in range(0, partitions, per_request):
            wanted = range(first, min(first + per_request, partitions))
            request = fetch_request(
                WIDE_TOPIC, wanted, max_bytes=64 * MiB, partition_max_bytes=64 * 1024
            )
            for topic in client.request(FETCH, 11, request).responses:
                for partition in topic.partitions:
                    data = bytes(partition.records or b"")
                    found[partition.partition_index] = [
                        record.value or b""
                        for _, batch in records.split_batches(data)
                        for record in records.iter_records(batch)
                    ]
    return found


def one_record_per_partition(
    partitions: int = WIDE_PARTITIONS, check_every: int = 250, per_second: float = 200.0
) -> Callable[[Run], None]:
    """With a data directory and an open-files limit below the partition count: one
    record produced to each partition, a new client checked every `check_every` produces,
    then every record read back. The produces are paced (`per_second`): the attack is on
    descriptors, and one client producing flat out would take half the broker by itself."""

    def attack(run: Run) -> None:
        refused: dict[int, int] = {}
        unanswered = 0
        with run.during_action(2.0), RawClient(run.bootstrap, timeout=30) as client:
            started = time.monotonic()
            for index in range(partitions):
                time.sleep(max(0.0, started + index / per_second - time.monotonic()))
                batch = records.build_batch([(None, _wide_value(index))], timestamp_ms=1000)
                request = produce_request(WIDE_TOPIC, batch, partition=index, acks=1)
                codes = produce_codes(client.request(PRODUCE, 9, request))
                if codes != [0]:
                    refused[codes[0]] = refused.get(codes[0], 0) + 1
                if (
                    index % check_every == check_every - 1
                    and first_served(run.bootstrap, 5.0) is None
                ):
                    unanswered += 1
        run.fact(f"{partitions - sum(refused.values()):,} of {partitions:,} produces acknowledged")
        if refused:
            run.problem(f"produces refused, by error code: {refused}")
        if unanswered:
            run.problem(f"{unanswered} new client(s) not answered within 5 s during the produces")
        stored = _read_wide(run.bootstrap, partitions)
        wrong = [i for i in range(partitions) if stored.get(i) != [_wide_value(i)]]
        run.fact(f"{partitions - len(wrong):,} of {partitions:,} records read back")
        if wrong:
            run.problem(f"{len(wrong):,} partitions do not hold their record (first {wrong[0]})")
        if first_served(run.bootstrap, 5.0) is None:
            run.problem("a new client was not answered within 5 s after the produces")

    return attack


# --- 8. nulls ---------------------------------------------------------------------------


def _minimal(cls: type[Any]) -> Any:
    """The smallest well-formed instance of a kio entity: every array holds one element."""
    from kio.serial._introspect import (
        EntityField,
        EntityTupleField,
        PrimitiveField,
        classify_field,
        get_field_tag,
        get_schema_field_type,
    )

    primitives: dict[str, Any] = {
        "string": "x",
        "bytes": b"",
        "records": None,
        "uuid": None,
        "bool": False,
        "float64": 0.0,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    }
    values: dict[str, Any] = {}
    for entity_field in dataclasses.fields(cls):
        if entity_field.default is not dataclasses.MISSING and get_field_tag(entity_field):
            continue  # a tagged field with a default: leave it out
        kind = classify_field(entity_field)
        if isinstance(kind, PrimitiveField):
            value = primitives.get(get_schema_field_type(entity_field), 0)
            with contextlib.suppress(Exception):
                value = kind.type_(value)
        elif isinstance(kind, EntityField):
            value = _minimal(kind.type_)
        elif isinstance(kind, EntityTupleField):
            value = (_minimal(kind.type_),)
        else:
            value = ()
        values[entity_field.name] = value
    return cls(**values)


def _array_paths(cls: type[Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    from kio.serial._introspect import (
        EntityField,
        EntityTupleField,
        PrimitiveTupleField,
        classify_field,
        get_field_tag,
    )

    for entity_field in dataclasses.fields(cls):
        if get_field_tag(entity_field) is not None:
            continue
        kind = classify_field(entity_field)
        path = (*prefix, entity_field.name)
        if isinstance(kind, PrimitiveTupleField | EntityTupleField):
            yield path
        if isinstance(kind, EntityTupleField | EntityField):
            yield from _array_paths(kind.type_, path)


def _with_null(entity: Any, path: tuple[str, ...]) -> Any:
    name, rest = path[0], path[1:]
    if not rest:
        return dataclasses.replace(entity, **{name: None})
    value = getattr(entity, name)
    if isinstance(value, tuple):
        return dataclasses.replace(entity, **{name: (_with_null(value[0], rest),)})
    return dataclasses.replace(entity, **{name: _with_null(value, rest)})


@dataclass(frozen=True)
class NullCase:
    api_key: int
    version: int
    path: str
    frame: bytes


def null_array_cases() -> list[NullCase]:
    """Every array of every request version the broker serves, sent as null (length -1)."""
    from minibroker.handlers import HANDLERS

    cases = []
    for api_key, handler in sorted(HANDLERS.items()):
        for version in range(handler.min_version, handler.max_version + 1):
            cls = messages.request_class(api_key, version)
            if cls is None:
                continue
            base = _minimal(cls)
            for path in _array_paths(cls):
                request = _with_null(base, path)
                encoded = encode(api_key, version, request, 5, "nulls")
                cases.append(NullCase(api_key, version, ".".join(path), encoded))
    return cases


def nulls(run: Run) -> None:
    cases = null_array_cases()
    outcomes = {"answered": 0, "closed": 0, "undecodable": 0}
    client: RawClient | None = None
    for case in cases:
        if client is None:
            client = RawClient(run.bootstrap, timeout=10)
        try:
            client.send_bytes(case.frame)
            reply = client.recv_frame()
        except OSError:
            reply = None
        if reply is None:
            outcomes["closed"] += 1
            client.close()
            client = None
            continue
        try:
            got, _ = messages.decode_response(reply, case.api_key, case.version)
            outcomes["answered" if got == 5 else "undecodable"] += 1
        except Exception:
            outcomes["undecodable"] += 1
    if client is not None:
        client.close()
    run.fact(f"{len(cases)} null arrays: {outcomes}")
    if outcomes["undecodable"]:
        run.problem(f"{outcomes['undecodable']} answers to null arrays could not be decoded")
    run.after()
    run.sync_log()  # every line logged for the null arrays is read by now
    log = run.target.log_text()
    tracebacks = log.count("Traceback")
    errors = sum(" ERROR " in line for line in log.splitlines())
    if tracebacks or errors:
        failed = sorted(
            {
                line.split(" failed")[0].split(": ")[-1]
                for line in log.splitlines()
                if " ERROR " in line and " failed" in line
            }
        )
        run.problem(
            f"{errors} ERROR lines and {tracebacks} tracebacks logged for null arrays "
            f"({', '.join(failed[:6])}{' ...' if len(failed) > 6 else ''})"
        )


# --- 10. the request recording --------------------------------------------------------

RECORD_FILE = Path(tempfile.gettempdir()) / f"minibroker-attack-{os.getpid()}.jsonl"


RECORDED_TOPIC = "recorded"
DELETE_RECORDS = 21


def recorded_produces(
    count: int = 200, size: int = 900 * 1024, per_second: float = 150.0
) -> Callable[[Run], None]:
    """`count` honest produces of one `size`-byte record each, `per_second`, to a broker
    recording every request. Each record is deleted (DeleteRecords) once stored, so what
    the broker holds beyond its baseline is the recording's: it must not grow with the
    bytes recorded."""

    def attack(run: Run) -> None:
        request = produce_request(
            RECORDED_TOPIC,
            records.build_batch([(None, bytes(size))], timestamp_ms=1000),
            acks=1,
            timeout_ms=30_000,
        )
        with run.during_action(1.0), RawClient(run.bootstrap, timeout=30) as client:
            client.request(CREATE_TOPICS, 7, create_topics_request([(RECORDED_TOPIC, 1, {})]))
            started = time.monotonic()
            for index in range(count):
                time.sleep(max(0.0, started + index / per_second - time.monotonic()))
                response = client.request(PRODUCE, 9, request)
                if produce_codes(response) != [0]:
                    run.problem(f"a produce of {size:,} bytes got {produce_codes(response)}")
                    break
                stored = response.responses[0].partition_responses[0].base_offset
                client.request(
                    DELETE_RECORDS, 2, delete_records_request(RECORDED_TOPIC, {0: stored + 1})
                )
        run.add_stored(size)  # the last record, until the next one is produced
        run.fact(f"{count} x {size // 1024:,} KB produced ({count * size / MiB:,.0f} MiB)")
        if RECORD_FILE.exists():
            run.fact(f"record file {RECORD_FILE.stat().st_size / MiB:,.1f} MiB so far")
            RECORD_FILE.unlink()  # the broker writes on into the unlinked file until it stops

    return attack


# --- 11. connection churn ---------------------------------------------------------------

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SASL_LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
# The storm comes from another loopback address than the honest client's (Linux routes
# all of 127/8 to loopback): a misbehaving client on another host.
STORM_SOURCE = "127.0.0.2"


def _sign_in(mechanism: str, token: bytes) -> bytes:
    return encode(
        SASL_HANDSHAKE, 1, make_request(SASL_HANDSHAKE, 1, mechanism=mechanism), 1, "storm"
    ) + encode(
        SASL_AUTHENTICATE, 2, make_request(SASL_AUTHENTICATE, 2, auth_bytes=token), 2, "storm"
    )


# What each new connection of a storm sends at once, and whether it goes to the SASL
# listener.
STORM_PAYLOADS: dict[str, tuple[bytes, bool]] = {
    "connect + ApiVersions": (
        encode(
            API_VERSIONS,
            3,
            make_request(
                API_VERSIONS, 3, client_software_name="storm", client_software_version="1"
            ),
            1,
            "storm",
        ),
        False,
    ),
    "SASL PLAIN, wrong password": (_sign_in("PLAIN", b"\0admin\0wrong-password"), True),
    "SCRAM first messages": (
        _sign_in("SCRAM-SHA-256", b"n,,n=admin,r=" + b"x" * 24),
        True,
    ),
}


def connection_storm(
    kind: str, per_second: int = 2000, seconds: float = 3.0, open_at_once: int = 50
) -> Callable[[Run], None]:
    """New connections from one address, `per_second` for `seconds` from one thread, each
    sending the `kind` payload as soon as it is connected and reset `open_at_once`
    connections later, answered or not. Connects do not wait: one the broker's listen
    queue has no room for yet is tried again by the kernel meanwhile."""
    payload, over_sasl = STORM_PAYLOADS[kind]

    def attack(run: Run) -> None:
        bootstrap = run.target.broker.listeners["SASL_PLAINTEXT"] if over_sasl else run.bootstrap
        address = parse_host_port(bootstrap)
        total = int(per_second * seconds)
        opened: collections.deque[socket.socket] = collections.deque()
        waiting: set[socket.socket] = set()  # connecting: the payload is still to send
        sent = refused = 0
        newcomer: float | None = None
        with run.during_action(seconds):
            started = time.monotonic()
            for index in range(total):
                if index == total // 2:
                    # A new client from another address, in the middle of the storm.
                    newcomer = first_served(run.bootstrap, timeout=5.0)
                time.sleep(max(0.0, started + index / per_second - time.monotonic()))
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.setblocking(False)
                sock.bind((STORM_SOURCE, 0))
                sock.connect_ex(address)
                opened.append(sock)
                waiting.add(sock)
                if waiting and index % 10 == 0:
                    _, ready, _ = select.select([], list(waiting), [], 0)
                    for connected in ready:
                        waiting.discard(connected)
                        try:
                            connected.send(payload)
                            sent += 1
                        except OSError:
                            refused += 1
                while len(opened) > open_at_once:
                    old = opened.popleft()
                    waiting.discard(old)
                    old.close()
            elapsed = time.monotonic() - started
        close_all(opened)
        run.fact(
            f"{total:,} connections opened in {elapsed:.1f} s ({total / elapsed:,.0f}/s), "
            f"{sent:,} sent their request, {refused:,} were closed first"
        )
        if newcomer is None:
            run.problem("a new client from another address was not served within 5 s")
        else:
            run.fact(f"a new client from another address served in {newcomer * 1000:,.0f} ms")

    return attack


# --- 12. ACLs at scale -------------------------------------------------------------------

DESCRIBE_ACLS, CREATE_ACLS, API_VERSIONS = 29, 30, 18
ACL_TOPICS = [f"acl-{i:03d}" for i in range(200)]  # Metadata for all of them
ACL_SETTINGS: dict[str, Any] = {
    "acls_enabled": True,
    # No ACL on the cluster: this client (User:ANONYMOUS, no sign-in) may create ACLs.
    "allow_everyone_if_no_acl_found": True,
    "topics": [*TOPICS, *(f"{name}:1" for name in ACL_TOPICS)],
}
KAFKA_ACL_SETTINGS = {  # the same on Apache Kafka (bench.hostile --against kafka-jvm)
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
ACL_COUNT = 100_000
ACLS_PER_REQUEST = 1_000  # max_acls_per_request's default
ANONYMOUS = "User:ANONYMOUS"


def _acl_creation(index: int) -> tuple[int, str, int, str, str, int, int]:
    """ACL number `index`: a third LITERAL on a topic of its own, a third PREFIXED (with
    prefixes of 2 to 51 letters), a third DENYs on every topic (`*`) to a principal of
    its own: (type, name, pattern, principal, host, operation, permission)."""
    principal = f"User:u{index}"
    kind = index % 3
    if kind == 0:
        return 2, f"t-{index}", 3, principal, "*", 4, 3  # TOPIC LITERAL, WRITE ALLOW
    if kind == 1:
        return 2, "p" * (index % 50) + f"-{index}-", 4, principal, "*", 3, 3  # PREFIXED READ
    return 2, "*", 3, principal, f"10.{index % 250}.0.1", 8, 2  # every topic, DESCRIBE DENY


def _encoded_creation(index: int) -> bytes:
    """ACL number `index` as an AclCreation of CreateAcls v3 (flexible), written field by
    field: kio would take seconds for 100,000 of them."""
    kind, name, pattern, principal, host, operation, permission = _acl_creation(index)
    return b"".join(
        (
            bytes((kind,)),
            messages.string_field(name, True),
            bytes((pattern,)),
            messages.string_field(principal, True),
            messages.string_field(host, True),
            bytes((operation, permission)),
            b"\x00",  # no tagged fields
        )
    )


@functools.cache
def _create_acls_frames(first: int, count: int, per_request: int) -> list[bytes]:
    """CreateAcls v3 frames creating ACLs first .. first+count-1, `per_request` each."""
    empty = encode(CREATE_ACLS, 3, make_request(CREATE_ACLS, 3, creations=()), 1, "acls")
    # The empty request ends with its creations (compact length 0, as 1) and no tags.
    assert empty.endswith(b"\x01\x00")
    frames = []
    for start in range(first, first + count, per_request):
        items = [
            _encoded_creation(index)
            for index in range(start, min(start + per_request, first + count))
        ]
        body = b"".join([empty[4:-2], messages.array_length(len(items), True), *items, b"\x00"])
        frames.append(struct.pack(">i", len(body)) + body)
    return frames


def _create_acls(run: Run, frames: list[bytes]) -> dict[int, int]:
    """Send the CreateAcls frames one after another; the error codes of their results."""
    codes: dict[int, int] = {}
    with RawClient(run.bootstrap, timeout=120) as client:
        for encoded in frames:
            client.send_bytes(encoded)
            _, response = client.receive(CREATE_ACLS, 3)
            for result in response.results:
                code = result.error_code.value
                codes[code] = codes.get(code, 0) + 1
    return codes


def _fill_acls(run: Run) -> None:
    """ACL_COUNT ACLs: ten requests of ACL_COUNT / 10 (the broker takes the first
    ACLS_PER_REQUEST of each), then as many requests of ACLS_PER_REQUEST as it takes.
    Before them, an ALLOW of everything on every topic to this client (User:ANONYMOUS):
    with ACLs on `*`, no topic is one no ACL names."""
    everyone = make(
        CREATE_ACLS,
        3,
        "AclCreation",
        resource_type=2,
        resource_name="*",
        resource_pattern_type=3,
        principal=ANONYMOUS,
        host="*",
        operation=2,  # ALL
        permission_type=3,
    )
    began = time.monotonic()
    with RawClient(run.bootstrap, timeout=30) as client:
        client.call(CREATE_ACLS, 3, creations=(everyone,))
    tenth = ACL_COUNT // 10
    first_ten = _create_acls(run, _create_acls_frames(0, ACL_COUNT, tenth))
    run.fact(f"ten CreateAcls of {tenth:,}: error codes {first_ten}")
    if first_ten.get(0, 0) > 10 * ACLS_PER_REQUEST:
        run.problem(f"{first_ten[0]:,} ACLs created by ten requests (max_acls_per_request)")
    rest: dict[int, int] = {}
    for offset in range(ACLS_PER_REQUEST, tenth, ACLS_PER_REQUEST):
        for start in range(offset, ACL_COUNT, tenth):
            codes = _create_acls(
                run, _create_acls_frames(start, ACLS_PER_REQUEST, ACLS_PER_REQUEST)
            )
            for code, count in codes.items():
                rest[code] = rest.get(code, 0) + count
    created = first_ten.get(0, 0) + rest.get(0, 0)
    run.fact(f"{created:,} ACLs created in {time.monotonic() - began:.1f} s")
    if created != ACL_COUNT:
        run.problem(f"{created:,} of {ACL_COUNT:,} ACLs created (codes {rest})")


@contextlib.contextmanager
def _longest_wait(run: Run) -> Iterator[None]:
    """Measure, beside the honest producer, the longest wait for an ApiVersions answer
    on another connection (a broker busy in one turn of its loop keeps every client
    waiting), and state it."""
    stop = threading.Event()
    waits: list[float] = []

    def ping() -> None:
        try:
            with RawClient(run.bootstrap, timeout=30) as client:
                while not stop.is_set():
                    began = time.monotonic()
                    client.call(
                        API_VERSIONS, 3, client_software_name="p", client_software_version="1"
                    )
                    waits.append(time.monotonic() - began)
                    time.sleep(0.005)
        except (OSError, ConnectionError) as exc:
            run.problem(f"ApiVersions beside the attack failed: {exc!r}")

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        yield
    finally:
        stop.set()
        pinger.join(35)
        if waits:
            run.fact(f"longest ApiVersions wait meanwhile {max(waits):.2f} s")


def acls_then_produce(run: Run) -> None:
    """100,000 ACLs created, then the honest rate after (with ACLs scanned one by one,
    every Produce paid for all of them). Creating them keeps the broker busy, sharing it
    with the producer a piece at a time: its rate meanwhile is a fact, not a target."""
    start = run.mark()
    _fill_acls(run)
    ratios = Rate.between(start, run.mark()).ratio(run.m.baseline)
    run.fact(f"honest rate while creating {ratios[0]:.2f}x ({ratios[1]:.2f}x per CPU)")


def acls_then_describe_all(run: Run) -> None:
    """With 100,000 ACLs stored, one DescribeAcls of every ACL (the window: 2 s at
    least). The answer is decoded after the window: that is this client's work."""
    _fill_acls(run)
    everything = make_request(
        DESCRIBE_ACLS,
        3,
        resource_type_filter=1,  # ANY
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    with run.during_action(2.0), _longest_wait(run), RawClient(run.bootstrap, timeout=60) as c:
        asked = time.monotonic()
        c.send(DESCRIBE_ACLS, 3, everything)
        answer = c.recv_frame()
        took = time.monotonic() - asked
    if answer is None:
        run.problem("DescribeAcls got no answer")
        return
    _, response = messages.decode_response(answer, DESCRIBE_ACLS, 3)
    described = sum(len(resource.acls) for resource in response.resources)
    run.fact(f"DescribeAcls of {described:,} ACLs answered in {took:.2f} s")
    if described != ACL_COUNT + 1:
        run.problem(f"DescribeAcls listed {described:,} of {ACL_COUNT + 1:,} ACLs")


METADATA_EVERY = 0.02  # seconds: a client asking for every topic 50 times a second


def acls_then_metadata(run: Run) -> None:
    """With 100,000 ACLs stored, Metadata of every topic (204) 50 times a second for 3 s
    (the window): each names 204 topics the broker checks ACLs for."""
    _fill_acls(run)
    answers = []
    with run.during_action(3.0), _longest_wait(run), RawClient(run.bootstrap, timeout=60) as c:
        began = time.monotonic()
        while time.monotonic() - began < 3.0:
            asked = time.monotonic()
            response = c.request(METADATA, 12, metadata_request(12))
            answers.append(time.monotonic() - asked)
            time.sleep(max(0.0, asked + METADATA_EVERY - time.monotonic()))
    named = {topic.name for topic in response.topics}
    run.fact(
        f"{len(answers)} Metadata of {len(named)} topics, each in "
        f"{min(answers) * 1000:.0f}-{max(answers) * 1000:.0f} ms"
    )
    if not set(ACL_TOPICS) <= named:
        run.problem(f"Metadata listed {len(set(ACL_TOPICS) & named)} of {len(ACL_TOPICS)} topics")


# --- the catalogue ----------------------------------------------------------------------

SMALL_TIMEOUTS = {
    "partial_request_timeout_ms": 1000,
    "connections_max_idle_ms": 2000,
    "max_connections": 50,
}

SCENARIOS: list[Scenario] = [
    *(
        Scenario(f"1 {variant}", 1, huge_length(variant), summary="declared array length")
        for variant in HUGE_LENGTH_FRAMES
    ),
    Scenario(
        "2 30 x 100 MiB size prefixes",
        2,
        huge_prefixes(),
        {"partial_request_timeout_ms": 1000},
        summary="a size prefix reserves memory",
    ),
    Scenario(
        "2 30 x 20 MiB really sent (budget 64 MiB)",
        2,
        budget_flood(),
        {"partial_request_timeout_ms": 1000, "queued_max_request_bytes": 64 * MiB},
        allowance=2 * 64 * MiB + 64 * MiB,
        summary="bytes held within queued_max_request_bytes",
    ),
    Scenario("3 100 long polls x 1,000 partitions", 3, long_polls(), summary="long polls"),
    *(
        Scenario(f"4 {codec} bomb, ListOffsets x10", 4, bomb(codec), summary="decompression")
        for codec in ("zstd", "lz4", "snappy")
    ),
    Scenario("5 20,000 anonymous groups", 5, group_flood(), summary="groups"),
    Scenario(
        "5 20,000 anonymous groups expire",
        5,
        group_flood(expect_expiry=True),
        {"offsets_retention_minutes": 0.01},
        summary="groups expire",
    ),
    Scenario(
        "6 60 half frames, max_connections 50",
        6,
        lockout(60, HALF_FRAME, served_within=1.0 + 3.0, label="half-frame"),
        SMALL_TIMEOUTS,
        summary="slots held by half frames",
    ),
    Scenario(
        "6 60 idle connections, max_connections 50",
        6,
        lockout(60, b"", served_within=2.0 + 3.0, label="idle"),
        SMALL_TIMEOUTS,
        summary="slots held by idle connections",
    ),
    Scenario(
        "6 1,000 idle connections: memory",
        6,
        idle_memory(),
        # Holding connections, not opening them: all 1,000 are let in at once.
        {"max_connection_creation_rate": 0},
        allowance=64 * MiB,
        summary="memory of idle connections",
    ),
    Scenario(
        "6 1,100 half frames, default settings",
        6,
        lockout(1100, HALF_FRAME, served_within=45.0, label="half-frame"),
        slow=True,
        summary="default settings recover within 45 s",
    ),
    Scenario("7 Fetch naming a partition 5,000 times", 7, amplified_fetch(), summary="amplify"),
    Scenario("7 10,000 pipelined Fetches, unread", 7, pipelined_fetches(), summary="pipelining"),
    Scenario("7 CreateTopics 100,000 topics", 7, mass_create(100_000, 1), summary="creation"),
    Scenario(
        "7 CreateTopics 3 x 100,000 partitions", 7, mass_create(3, 100_000), summary="creation"
    ),
    Scenario("8 null arrays, every API and version", 8, nulls, summary="nulls"),
    Scenario(
        "9 one record to each of 1,500 partitions, open files 1,024",
        9,
        one_record_per_partition(),
        {
            "data_dir": FRESH_DATA_DIR,
            "topics": [*TOPICS, f"{WIDE_TOPIC}:{WIDE_PARTITIONS}"],
            "rlimits": {resource.RLIMIT_NOFILE: OPEN_FILES},
        },
        summary="segment files within the descriptor limit",
        kafka_settings=None,  # the limit is set on the child process
    ),
    Scenario(
        "10 200 x 900 KB produces, --record-file",
        10,
        recorded_produces(),
        {"record_file": str(RECORD_FILE)},
        allowance=64 * MiB,
        summary="the record file keeps nothing in memory",
        kafka_settings=None,
    ),
    Scenario(
        "10 200 x 900 KB produces, recorded in memory (16 MiB)",
        10,
        recorded_produces(),
        {"record_requests": True, "record_requests_max_bytes": 16 * MiB},
        allowance=64 * MiB,
        summary="the recording within record_requests_max_bytes",
        kafka_settings=None,
    ),
    *(
        Scenario(
            f"11 2,000 new connections/s: {kind}",
            11,
            connection_storm(kind),
            SASL_LISTENERS if STORM_PAYLOADS[kind][1] else {},
            summary="connection churn from one address",
            kafka_settings=None if STORM_PAYLOADS[kind][1] else {},
        )
        for kind in STORM_PAYLOADS
    ),
    Scenario(
        "12 100,000 ACLs created, then produce",
        12,
        acls_then_produce,
        ACL_SETTINGS,
        summary="ACL decisions at scale",
        kafka_settings=KAFKA_ACL_SETTINGS,
    ),
    Scenario(
        "12 100,000 ACLs, one DescribeAcls of all",
        12,
        acls_then_describe_all,
        ACL_SETTINGS,
        summary="describing every ACL",
        kafka_settings=KAFKA_ACL_SETTINGS,
    ),
    Scenario(
        "12 100,000 ACLs, Metadata of 204 topics 50/s",
        12,
        acls_then_metadata,
        ACL_SETTINGS,
        summary="topic ACL checks per Metadata",
        kafka_settings=KAFKA_ACL_SETTINGS,
    ),
]


def scenario(name: str) -> Scenario:
    for candidate in SCENARIOS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)
