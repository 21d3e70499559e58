"""The bounds pass that runs before kio's native reader: frames whose declared lengths do
not fit are refused with InvalidRequest before kio can reserve memory for them.

Regression: one 18-byte Metadata v12 frame (topics count `ff ff ff ff 0f`) made kio
reserve 34 GB and aborted the whole broker with SIGABRT.
"""

from __future__ import annotations

import datetime
import json
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

from harness.child_broker import child_broker
from harness.raw_client import RawClient, encode, make, make_request
from minibroker.protocol import bounds, messages, records
from minibroker.protocol.messages import InvalidRequest, RequestHeader
from tests.protocol.kio_strategies import SERVED

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
DESCRIBE_TOPIC_PARTITIONS = 75
REPO = Path(__file__).resolve().parents[2]


# Metadata v12: header v2 (key 3, version 12, correlation id 7, client id "x", no tags),
# then the topics compact array with the varint length 2**32 - 1, then one more byte.
METADATA_V12_HUGE_COMPACT_COUNT = bytes.fromhex("0003000c 00000007 0001 78 00 ffffffff0f 01")
# Metadata v1: header v1, then the topics int32 array count 2**31 - 1.
METADATA_V1_HUGE_COUNT = bytes.fromhex("00030001 00000007 0001 78 7fffffff")


def _cls(api_key: int, version: int) -> type[Any]:
    cls = messages.request_class(api_key, version)
    assert cls is not None
    return cls


def _body(frame: bytes) -> bytes:
    """An encoded request without its size prefix (what decode_request takes)."""
    return frame[4:]


def _check(frame: bytes) -> int:
    api_key, version, _ = messages.peek_header_prefix(frame)
    return bounds.check_request(frame, _cls(api_key, version))


def _id(pair: tuple[int, int]) -> str:
    return f"{messages.api_name(pair[0])}-v{pair[1]}"


# --- the bug ------------------------------------------------------------------------------


def test_metadata_v12_compact_count_of_2_to_the_32_is_refused() -> None:
    frame = METADATA_V12_HUGE_COMPACT_COUNT
    assert len(frame) == 18
    with pytest.raises(InvalidRequest, match="topics"):
        _check(frame)
    with pytest.raises(InvalidRequest, match="topics"):
        messages.decode_request(frame)


def test_metadata_v1_int32_count_of_2_to_the_31_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="topics"):
        messages.decode_request(METADATA_V1_HUGE_COUNT)


def test_broker_in_a_child_process_survives_the_frames() -> None:
    with child_broker() as broker:
        for frame in (METADATA_V12_HUGE_COMPACT_COUNT, METADATA_V1_HUGE_COUNT):
            with RawClient(broker.bootstrap) as client:
                client.send_bytes(struct.pack(">i", len(frame)) + frame)
                assert client.is_closed_by_peer()
            assert broker.alive(), broker.stderr_text()
        with RawClient(broker.bootstrap) as client:
            body = client.call(
                METADATA,
                12,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            assert body.brokers
        assert broker.alive()


def test_the_exception_is_the_one_the_dispatcher_catches() -> None:
    assert bounds.InvalidRequest is messages.InvalidRequest


# --- every kind of length -----------------------------------------------------------------


def _header(api_key: int, version: int, flexible: bool, client_id: bytes = b"x") -> bytes:
    head = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    return head + (b"\x00" if flexible else b"")


HUGE_VARINT = bytes.fromhex("ffffffff0f")  # 2**32 - 1


@pytest.mark.parametrize(
    "frame",
    [
        # Produce v9: transactional_id compact nullable string of 2**32 - 2 bytes.
        _header(PRODUCE, 9, True) + HUGE_VARINT + b"\x00" * 16,
        # Produce v3: transactional_id int16 string of 32767 bytes.
        _header(PRODUCE, 3, False) + b"\x7f\xff" + b"\x00" * 16,
        # Produce v3: null transactional id, acks, timeout, one topic "t", one partition,
        # records as int32 bytes of 2**31 - 1.
        _header(PRODUCE, 3, False)
        + b"\xff\xff\x00\x01\x00\x00\x13\x88"
        + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff",
        # Produce v9: the same with a compact records length.
        _header(PRODUCE, 9, True) + b"\x00\x00\x01\x00\x00\x13\x88\x02\x02t\x02\x00\x00\x00\x00"
        b"\xff\xff\xff\xff\x0f",
        # Metadata v4 (non-flexible): int32 count 2**31 - 1 of int16 strings.
        _header(METADATA, 4, False) + b"\x7f\xff\xff\xff\x00",
        # Metadata v12: one topic with a compact name length 2**32 - 2.
        _header(METADATA, 12, True) + b"\x02" + b"\x00" * 16 + HUGE_VARINT,
        # Header: client id of 32767 bytes.
        _header(METADATA, 4, False, b"")[:8] + b"\x7f\xff" + b"abc",
        # Header v2: tag count 2**32 - 1.
        _header(METADATA, 12, False) + HUGE_VARINT + b"\x01\x00\x00\x00",
        # Header v2: one tag (id 0) claiming 2**32 - 1 bytes.
        _header(METADATA, 12, False) + b"\x01\x00" + HUGE_VARINT,
        # Body tags: Metadata v12 with a null topics array, then a tag claiming 100 bytes.
        _header(METADATA, 12, True) + b"\x00\x00\x00\x01\x05\x64" + b"\x00" * 10,
        # A varint of six bytes, and one over 32 bits.
        _header(METADATA, 12, True) + b"\xff\xff\xff\xff\xff\x01",
        _header(METADATA, 12, True) + b"\x80\x80\x80\x80\x10",
        # Fetch v12: 2**32 - 2 forgotten topics after an empty topics array.
        _header(FETCH, 12, True) + b"\x00" * 25 + b"\x01" + HUGE_VARINT,
        # Negative lengths other than -1: int16 string, int32 array.
        _header(PRODUCE, 3, False) + b"\xff\xfe" + b"\x00" * 16,
        _header(METADATA, 4, False) + b"\xff\xff\xff\xfe\x00",
        # Null where the schema does not allow it: Metadata v0 topics, Produce v9 topics.
        _header(METADATA, 0, False) + b"\xff\xff\xff\xff",
        _header(PRODUCE, 9, True) + b"\x00\x00\x01\x00\x00\x13\x88\x00\x00",
    ],
    ids=lambda frame: frame.hex(),
)
def test_lengths_past_the_frame_are_refused(frame: bytes) -> None:
    with pytest.raises(InvalidRequest):
        _check(frame)
    with pytest.raises(InvalidRequest):
        messages.decode_request(frame)


def test_header_decode_checks_its_bounds() -> None:
    frame = _header(METADATA, 12, False) + b"\x01\x00" + HUGE_VARINT
    with pytest.raises(InvalidRequest):
        messages.decode_request_header(frame, flexible=True)
    short = struct.pack(">hhih", 18, 3, 1, 40) + b"only-this"
    for flexible in (False, True):
        with pytest.raises(InvalidRequest):
            messages.decode_request_header(short, flexible)
    with pytest.raises(InvalidRequest):  # not UTF-8, as kio's reader refused it too
        messages.decode_request_header(struct.pack(">hhih", 18, 2, 1, 2) + b"\xc3\x28", False)


def test_unknown_header_tags_are_skipped_by_size() -> None:
    frame = _header(API_VERSIONS, 3, False) + b"\x01\x05\x02ab" + b"\x02t\x021\x00"
    header, body = messages.decode_request(frame)
    assert header == RequestHeader(API_VERSIONS, 3, 7, "x")
    assert body.client_software_name == "t"


# --- tagged fields ------------------------------------------------------------------------


def _fetch(version: int, partitions: int, **top: Any) -> Any:
    parts = tuple(
        make(
            FETCH,
            version,
            "FetchPartition",
            partition=i,
            current_leader_epoch=-1,
            fetch_offset=1000 + i,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
            replica_directory_id=uuid.UUID(int=i + 1) if i % 3 == 0 else None,
        )
        for i in range(partitions)
    )
    topic = make(
        FETCH,
        version,
        "FetchTopic",
        topic="topic-a",
        topic_id=uuid.UUID(int=99),
        partitions=parts,
    )
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait": datetime.timedelta(milliseconds=500),
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (topic,),
        "forgotten_topics_data": (),
        "rack_id": "",
        **top,
    }
    return make_request(FETCH, version, **fields)


def _produce(version: int, topics: int = 2, partitions: int = 2, size: int = 300) -> Any:
    batch = records.build_batch([(b"k", b"v" * size)], timestamp_ms=1000)
    topic_data = tuple(
        make(
            PRODUCE,
            version,
            "TopicProduceData",
            name=f"topic-{t}",
            partition_data=tuple(
                make(PRODUCE, version, "PartitionProduceData", index=p, records=batch)
                for p in range(partitions)
            ),
        )
        for t in range(topics)
    )
    return make_request(
        PRODUCE,
        version,
        transactional_id="txn",
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=topic_data,
    )


def _replica_state_frame() -> tuple[bytes, Any]:
    state = make(FETCH, 15, "ReplicaState", replica_id=3, replica_epoch=5)
    request = _fetch(15, 2, replica_state=state, cluster_id="cluster")
    return _body(encode(FETCH, 15, request, 1)), request


def test_a_known_tagged_struct_is_walked() -> None:
    frame, request = _replica_state_frame()
    # The body's tag section closes the frame: 2 tags; 0 = cluster_id (1 + 1 + 8 bytes),
    # 1 = replica_state (int32, int64, no tags: 13 bytes).
    assert frame.endswith(b"\x01\x0d" + struct.pack(">iqb", 3, 5, 0))
    assert messages.decode_request(frame)[1] == request
    # A declared size the field's contents do not fill exactly.
    for size in (0x0C, 0x0E):
        bad = frame[:-14] + bytes([size]) + frame[-13:] + b"\x00"
        with pytest.raises(InvalidRequest, match="does not fill"):
            _check(bad)


def test_arrays_of_fixed_items_with_tags_take_the_slow_path_when_a_tag_is_set() -> None:
    # Fetch v17 partitions: fixed fields and a tag section, with a tagged uuid on every
    # third partition; the one-step skip does not apply and each item is walked.
    for version in (12, 17):  # v12 partitions have no tags: skipped in one step
        request = _fetch(version, 300)
        frame = _body(encode(FETCH, version, request, 1))
        assert messages.decode_request(frame)[1] == request
        assert messages.decode_request(memoryview(frame).toreadonly())[1] == request


def test_unknown_body_tags_pass_the_bounds_then_kio_refuses_them() -> None:
    # Kafka skips unknown tags; the bounds pass does too (by size). kio's reader raises
    # on them, which decode_request turns into InvalidRequest.
    frame = _header(METADATA, 12, True) + b"\x00\x00\x00" + b"\x01\x07\x02ab"
    assert _check(frame) == 12
    with pytest.raises(InvalidRequest):
        messages.decode_request(frame)


# --- whole frames: round trips, every prefix, trailing data -------------------------------


_strategies: dict[type[Any], st.SearchStrategy[Any]] = {}


def _strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    if cls not in _strategies:
        _strategies[cls] = st.from_type(cls)
    return _strategies[cls]


def _assert_every_prefix_is_refused(frame: bytes, cls: type[Any]) -> None:
    for cut in range(len(frame)):
        with pytest.raises(InvalidRequest):
            bounds.check_request(frame[:cut], cls)
        with pytest.raises(InvalidRequest):
            messages.decode_request(frame[:cut])


def _assert_accepted(frame: bytes, header: RequestHeader, request: Any) -> None:
    cls = type(request)
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    offset = bounds.check_request(frame, cls)
    assert offset == entity_reader(header_cls)(frame, 0)[1]
    assert messages.decode_request(frame) == (header, request)
    assert messages.decode_request(memoryview(frame).toreadonly()) == (header, request)
    # Bytes after the body are ignored, as Kafka does.
    for extra in (b"\x00", b"\xff" * 7, HUGE_VARINT):
        assert bounds.check_request(frame + extra, cls) == offset
        assert messages.decode_request(frame + extra) == (header, request)


@pytest.mark.parametrize("pair", SERVED, ids=_id)
@given(data=st.data())
@settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_encoded_requests_pass_and_their_prefixes_do_not(
    pair: tuple[int, int], data: st.DataObject
) -> None:
    api_key, version = pair
    cls = _cls(api_key, version)
    request = data.draw(_strategy(cls))
    header = RequestHeader(
        api_key,
        version,
        data.draw(st.integers(-(2**31), 2**31 - 1)),
        data.draw(st.none() | st.text(max_size=20)),
    )
    frame = _body(messages.encode_request(header, request))
    _assert_accepted(frame, header, request)
    _assert_every_prefix_is_refused(frame, cls)


@pytest.mark.parametrize(
    ("api_key", "version", "request_"),
    [
        (PRODUCE, 9, _produce(9)),
        (PRODUCE, 3, _produce(3)),
        (FETCH, 12, _fetch(12, 20)),
        (FETCH, 17, _fetch(17, 20)),
        (FETCH, 15, _replica_state_frame()[1]),
        # A tagged partition whose item stride, carried on past the partitions, meets
        # exactly one zero byte (in the rack id): the one-step skip must not apply.
        (FETCH, 17, _fetch(17, 1, rack_id="rrrrrrrrrrr\x00rrrrrrrr")),
        # A nullable struct (the cursor) closing the body: its partition index's first
        # byte (0x7F) must not be taken for the body's tag count.
        (
            DESCRIBE_TOPIC_PARTITIONS,
            0,
            make_request(
                DESCRIBE_TOPIC_PARTITIONS,
                0,
                topics=(make(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name="t"),),
                response_partition_limit=100,
                cursor=make(
                    DESCRIBE_TOPIC_PARTITIONS,
                    0,
                    "Cursor",
                    topic_name="t",
                    partition_index=0x7F000000,
                ),
            ),
        ),
    ],
    ids=[
        "produce-v9",
        "produce-v3",
        "fetch-v12",
        "fetch-v17",
        "fetch-v15-tags",
        "fetch-v17-stride",
        "describe-topic-partitions-v0-cursor",
    ],
)
def test_realistic_frames_one_byte_at_a_time(api_key: int, version: int, request_: Any) -> None:
    header = RequestHeader(api_key, version, 42, "client-1")
    frame = _body(messages.encode_request(header, request_))
    _assert_accepted(frame, header, request_)
    _assert_every_prefix_is_refused(frame, type(request_))


def test_every_kio_request_class_compiles_and_is_cached() -> None:
    from kio.schema.index import api_key_map

    compiled = 0
    for api_key in api_key_map:
        for version in range(64):
            cls = messages.request_class(api_key, version)
            if cls is not None:
                assert bounds.request_checker(cls) is bounds.request_checker(cls)
                compiled += 1
    assert compiled > 200
    assert "def check(buf):" in bounds.checker_source(_cls(PRODUCE, 9))
    assert bounds.header_checker(True) is bounds.header_checker(True)


def test_checker_source_is_the_code_the_checker_runs() -> None:
    """checker_source shows the generated bounds pass: the header's, compiled, accepts
    and refuses exactly what the cached checker does."""
    for flexible in (False, True):
        source = bounds.checker_source(None, flexible)
        assert "request header: truncated" in source
        namespace = dict(bounds._RUNTIME)
        exec(compile(source, "<test>", "exec"), namespace)
        frame = _header(METADATA, 12 if flexible else 1, flexible)
        assert namespace["check"](frame) == bounds.header_checker(flexible)(frame)
        with pytest.raises(InvalidRequest, match="request header: truncated"):
            namespace["check"](frame[:7])
    assert bounds.checker_source(None, False) != bounds.checker_source(None, True)
    assert bounds.checker_source(None) == bounds.checker_source(None, False)  # header v1
    # A body's code names the tables it was compiled with (known tags), so it is shown,
    # not run: its header part, its truncation message and its tag walk are there.
    cls = _cls(FETCH, 15)
    source = bounds.checker_source(cls)
    assert f"{cls.__qualname__}: truncated" in source
    assert "_tags(buf" in source
    # Its header part is the header's own code, of the version its flexibility calls for
    # (v2 for Fetch v15, with the header's tag section; v1 for Produce v3).
    for body_cls, flexible in ((cls, True), (_cls(PRODUCE, 3), False)):
        header = bounds.checker_source(None, flexible).splitlines()
        body_at = next(i for i, line in enumerate(header) if line.strip().startswith("body = "))
        lines = bounds.checker_source(body_cls).splitlines()
        assert lines[: body_at + 1] == header[: body_at + 1]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        # 3 tags claimed in 5 bytes: a tag takes at least 2 (its id and its size).
        (b"\x03" + b"\x00" * 5, r"3 tagged fields in 5 bytes$"),
        # One tag (id 7) of 9 bytes with 4 left.
        (b"\x01\x07\x09" + b"\x00" * 4, r"tag 7 of 9 bytes, 4 left$"),
    ],
)
def test_a_tag_section_that_cannot_fit_is_refused_saying_why(tags: bytes, message: str) -> None:
    frame = _header(METADATA, 12, True) + b"\x00\x00\x00" + tags
    with pytest.raises(InvalidRequest, match=message):
        _check(frame)
    # The same section with room for it passes the bounds (the tags are unknown: skipped).
    fitting = b"\x02\x07\x01a\x08\x00"
    assert _check(_header(METADATA, 12, True) + b"\x00\x00\x00" + fitting) == 12


# --- mass mutation, in a child process -----------------------------------------------------

# For each frame and each position, overwrite the bytes there with a huge varint or a
# huge int32, and decode (bounds pass, then kio's reader only if the bounds pass accepted).
# A length the bounds pass misses makes kio abort the process: that is why this runs in a
# child, where an abort is a return code (-6) and not the end of the test run.
_MUTATE = """
import json, sys
from minibroker.protocol import messages
frames = [bytes.fromhex(f) for f in json.load(sys.stdin)]
patterns = [bytes.fromhex("ffffffff0f"), bytes.fromhex("7fffffff")]
accepted = refused = 0
for frame in frames:
    for position in range(len(frame)):
        for pattern in patterns:
            mutant = frame[:position] + pattern + frame[position + len(pattern):]
            try:
                messages.decode_request(mutant)
            except (messages.InvalidRequest, LookupError):
                refused += 1
            else:
                accepted += 1
print(json.dumps({"accepted": accepted, "refused": refused}))
"""


@given(data=st.data())
@settings(
    max_examples=1,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_mass_mutation_never_aborts(data: st.DataObject) -> None:
    frames = [
        _body(encode(PRODUCE, 9, _produce(9, 2, 2, 40), 1)),
        _body(encode(PRODUCE, 3, _produce(3, 2, 2, 40), 1)),
        _body(encode(FETCH, 12, _fetch(12, 4), 1)),
        _body(encode(FETCH, 17, _fetch(17, 4), 1)),
        _replica_state_frame()[0],
        METADATA_V12_HUGE_COMPACT_COUNT,
        METADATA_V1_HUGE_COUNT,
    ]
    for api_key, version in SERVED:
        request = data.draw(_strategy(_cls(api_key, version)))
        frames.append(_body(encode(api_key, version, request, 1))[:1500])
    result = subprocess.run(
        [sys.executable, "-c", _MUTATE],
        input=json.dumps([f.hex() for f in frames]),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    counts = json.loads(result.stdout)
    assert counts["refused"] > 0 and counts["accepted"] > 0, counts
