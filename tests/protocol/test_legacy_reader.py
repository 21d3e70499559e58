"""The legacy-version reader (protocol/legacy.py) on bad input and on the fields an old
version lacks: every cut of every old request is refused naming the field it broke in,
nulls only where Kafka allows them, declared counts checked against the bytes left, and
the fields only newer versions have take Kafka's defaults."""

from __future__ import annotations

import dataclasses
import datetime
import re
import struct
from typing import Any

import pytest

from minibroker.protocol import legacy, messages
from minibroker.protocol.bounds import InvalidRequest
from minibroker.protocol.legacy_schemas import SCHEMAS
from tests.protocol.test_known_answers import (
    Sampler,
    _definition,
    _in_versions,
    _legacy_pairs,
    _pair_id,
    legacy_snake,
    needs_schemas,
    reference_request,
    reference_response,
)

SHORT = re.compile(
    r"(?P<where>\w+\.\w+): (?P<declared>-?\d+) (bytes|items) declared, (?P<left>\d+)( bytes)? left"
)
CLIENT_ID = "reader"


def sampled_frame(api_key: int, version: int, **replaced: Any) -> bytes:
    """A valid request of this old version (without its size prefix), some top-level
    fields (by Kafka's name) replaced."""
    spec = _definition("request", api_key)
    body = Sampler(spec, version).struct(spec["fields"])
    body.update(replaced)
    return reference_request(api_key, version, 7, CLIENT_ID, body)[4:]


def header_size(frame: bytes) -> int:
    (client_id_size,) = struct.unpack_from(">h", frame, 8)
    return 10 + max(client_id_size, 0)


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_every_cut_of_an_old_request_is_refused_naming_its_field(pair: tuple[int, int]) -> None:
    api_key, version = pair
    frame = sampled_frame(api_key, version)
    body_starts = header_size(frame)
    layout_names = _names(SCHEMAS[api_key, version][0])
    proxy_classes = _classes(api_key)
    for cut in range(body_starts, len(frame)):
        with pytest.raises(InvalidRequest) as refused:
            messages.decode_request(frame[:cut])
        found = SHORT.search(str(refused.value))
        assert found is not None, str(refused.value)
        cls, _, field = found["where"].partition(".")
        assert cls in proxy_classes and field in layout_names, found["where"]
        declared, left = int(found["declared"]), int(found["left"])
        # A length is more than what is left; a count of items, each at least 1 byte,
        # is more than fits in it at its items' smallest size (checked in the reader).
        assert declared > left >= 0 if found[3] == "bytes" else declared > 0 and left >= 0
        # The dict reader (tests, tools) names the same field, under "legacy".
        with pytest.raises(InvalidRequest, match=rf"^legacy\.{field}: "):
            legacy.read_request(frame[:cut])
    assert legacy.read_request(frame)["client_id"] == CLIENT_ID


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_null_is_refused_where_kafka_does_not_allow_it(pair: tuple[int, int]) -> None:
    """Each top-level string or array sent as null (written by the legacy writer, which
    writes what it is given): accepted only where the definition allows null."""
    api_key, version = pair
    spec = _definition("request", api_key)
    _, request = messages.decode_request(sampled_frame(api_key, version))
    for field in spec["fields"]:
        kind = field["type"]
        if not _in_versions(field["versions"], version) or not (
            kind == "string" or kind.startswith("[]")
        ):
            continue
        name = legacy_snake(field["name"])
        kio_name = name if hasattr(request, name) else name.removesuffix("_ms")
        nulled = dataclasses.replace(request, **{kio_name: None})
        frame = legacy.encode_request(api_key, version, 7, CLIENT_ID, nulled)[4:]
        if _in_versions(field.get("nullableVersions"), version):
            # Written as Kafka lays a null out (length -1), and read back as null.
            assert frame == sampled_frame(api_key, version, **{field["name"]: None})
            assert legacy.read_request(frame)[name] is None
            assert getattr(messages.decode_request(frame)[1], kio_name) is None
            continue
        what = "a string" if kind == "string" else "an array"
        with pytest.raises(InvalidRequest, match=rf"\.{name}: null where {what} is required$"):
            messages.decode_request(frame)
        with pytest.raises(InvalidRequest, match=rf"^legacy\.{name}: null where {what}"):
            legacy.read_request(frame)


def test_a_declared_count_is_checked_against_the_bytes_left() -> None:
    """DeleteTopics v0 opens with its topic names: a million declared, none sent."""
    header = struct.pack(">hhih", 20, 0, 1, 1) + b"c"
    frame = header + struct.pack(">i", 1_000_000)
    with pytest.raises(
        InvalidRequest, match=r"\.topic_names: 1000000 items declared, 0 bytes left"
    ):
        messages.decode_request(frame)
    with pytest.raises(InvalidRequest, match=r"^legacy\.topic_names: 1000000 items declared"):
        legacy.read_request(frame)
    # Two names of two bytes each (2 + 2 bytes apiece) fit in 8 bytes; five cannot (each
    # takes at least its 2-byte length), and three pass the count check and fail at the
    # third name.
    names = struct.pack(">h", 2) + b"ab" + struct.pack(">h", 2) + b"cd"
    timeout = struct.pack(">i", 500)
    assert legacy.read_request(header + struct.pack(">i", 2) + names + timeout)["topic_names"] == (
        "ab",
        "cd",
    )
    with pytest.raises(InvalidRequest, match="5 items declared, 8 bytes left"):
        legacy.read_request(header + struct.pack(">i", 5) + names)
    with pytest.raises(InvalidRequest, match="topic_names: 2 bytes declared, 0 left"):
        legacy.read_request(header + struct.pack(">i", 3) + names)


def test_a_null_item_of_a_string_array_is_refused() -> None:
    """Kafka allows no null inside a []string, not even in an array that may be null."""
    header = struct.pack(">hhih", 20, 0, 1, 1) + b"c"
    names = struct.pack(">ih", 2, 1) + b"a" + struct.pack(">h", -1)  # ["a", null]
    frame = header + names + struct.pack(">i", 500)
    with pytest.raises(InvalidRequest, match=r"\.topic_names: null where a string is required$"):
        messages.decode_request(frame)
    with pytest.raises(InvalidRequest, match=r"^legacy\.topic_names: null where a string is"):
        legacy.read_request(frame)
    # DescribeConfigs v0: one topic resource, its configuration keys [null].
    header = struct.pack(">hhih", 32, 0, 1, 1) + b"c"
    resource = struct.pack(">ibh", 1, 2, 1) + b"t" + struct.pack(">ih", 1, -1)
    with pytest.raises(InvalidRequest, match=r"\.configuration_keys: null where a string is"):
        messages.decode_request(header + resource)
    # The array itself may be null (all of the resource's configs).
    resource = struct.pack(">ibh", 1, 2, 1) + b"t" + struct.pack(">i", -1)
    (read,) = messages.decode_request(header + resource)[1].resources
    assert (read.resource_name, read.configuration_keys) == ("t", None)


def test_a_null_client_id_is_read_as_none() -> None:
    """A client id of length -1 is allowed by Kafka, in every header version."""
    frame = struct.pack(">hhih", 20, 0, 3, -1) + struct.pack(">ih", 1, 1) + b"a"
    frame += struct.pack(">i", 500)
    read = legacy.read_request(frame)
    assert (read["correlation_id"], read["client_id"], read["topic_names"]) == (3, None, ("a",))
    header, _ = messages.decode_request(frame)
    assert header.client_id is None


def test_strings_must_be_utf8() -> None:
    frame = struct.pack(">hhih", 20, 0, 1, 2) + b"\xff\xfe" + struct.pack(">ii", 0, 500)
    with pytest.raises(InvalidRequest, match=r"^client id: 'utf-8' codec can't decode byte 0xff"):
        legacy.read_request(frame)
    body = struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xc3\x28" + struct.pack(">i", 500)
    ok_header = struct.pack(">hhih", 20, 0, 1, 1) + b"c"
    with pytest.raises(InvalidRequest, match=r"\.topic_names: 'utf-8' codec can't decode"):
        messages.decode_request(ok_header + body)


def test_a_response_with_bytes_after_it_is_refused() -> None:
    response = messages.build(
        messages.response_class(20, legacy.proxy_version(20)),
        throttle_time=datetime.timedelta(0),
        responses=(),
    )
    frame = legacy.encode_response(9, response, 20, 0)[4:]
    assert legacy.read_response(frame, 20, 0) == {"correlation_id": 9, "responses": ()}
    with pytest.raises(InvalidRequest, match=r"^1 bytes after the response$"):
        legacy.read_response(frame + b"\x00", 20, 0)


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_fields_an_old_version_lacks_take_kafkas_defaults(pair: tuple[int, int]) -> None:
    """What the handlers see of an old request: the proxy version's own fields, those the
    old version does not send at Kafka's default for them."""
    api_key, version = pair
    spec = _definition("request", api_key)
    proxy = legacy.proxy_version(api_key)
    _, request = messages.decode_request(sampled_frame(api_key, version))
    checked = 0
    for field in spec["fields"]:
        if _in_versions(field["versions"], version) or not _in_versions(field["versions"], proxy):
            continue
        name = legacy_snake(field["name"])
        value = getattr(request, name, None)
        if value is None and name.endswith("_ms"):
            value = getattr(request, name[:-3])
        assert _wire(value) == _kafka_default(field), (field["name"], value)
        checked += 1
    assert checked or not _fields_added(spec, version, proxy)


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_an_old_version_reads_into_a_valid_entity_of_the_proxy_class(
    pair: tuple[int, int],
) -> None:
    """What is read from an old request or response is an entity kio itself can write at
    the proxy version (durations as timedeltas, missing arrays empty), and an old
    response's fields that only newer versions have are at Kafka's defaults."""
    api_key, version = pair
    proxy = legacy.proxy_version(api_key)
    _, request = messages.decode_request(sampled_frame(api_key, version))
    header = messages.RequestHeader(api_key, proxy, 7, CLIENT_ID)
    assert messages.decode_request(messages.encode_request(header, request)[4:]) == (
        header,
        request,
    )

    spec = _definition("response", api_key)
    body = Sampler(spec, version).struct(spec["fields"])
    frame = reference_response(api_key, version, 9, body)[4:]
    _, response = messages.decode_response(frame, api_key, version)
    written = messages.encode_response(9, response)  # kio's writer, at the proxy version
    assert messages.decode_response(written[4:], api_key, proxy) == (9, response)
    checked = 0
    for field in spec["fields"]:
        if _in_versions(field["versions"], version) or not _in_versions(field["versions"], proxy):
            continue
        name = legacy_snake(field["name"])
        value = getattr(response, name, None)
        if value is None and name.endswith("_ms"):
            value = getattr(response, name[:-3])
        assert _wire(value) == _kafka_default(field), (field["name"], value)
        checked += 1
    assert checked or not _fields_added(spec, version, proxy)


def test_old_versions_read_durations_as_timedeltas_and_lacking_fields_as_defaults() -> None:
    """DeleteTopics v0's timeout_ms, DescribeConfigs v0's throttle_time_ms; CreateTopics
    v0 answers without a throttle time, which is then none at all."""
    frame = struct.pack(">hhih", 20, 0, 1, 1) + b"c" + struct.pack(">ih", 1, 1) + b"a"
    _, request = messages.decode_request(frame + struct.pack(">i", 500))
    assert request.timeout == datetime.timedelta(milliseconds=500)

    config = struct.pack(">h", 2) + b"nm" + struct.pack(">h", 1) + b"v" + bytes(3)
    result = struct.pack(">hhbh", 0, -1, 2, 1) + b"t" + struct.pack(">i", 1) + config
    frame = struct.pack(">iii", 9, 7, 1) + result
    _, described = messages.decode_response(frame, 32, 0)
    assert described.throttle_time == datetime.timedelta(milliseconds=7)
    (config_read,) = described.results[0].configs
    assert (config_read.name, config_read.value, config_read.synonyms) == ("nm", "v", ())

    frame = struct.pack(">ii", 9, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">h", 0)
    _, created = messages.decode_response(frame, 19, 0)
    assert created.throttle_time == datetime.timedelta(0)
    assert created.topics[0].name == "t"


def _fields_added(spec: dict[str, Any], version: int, proxy: int) -> list[str]:
    return [
        f["name"]
        for f in spec["fields"]
        if _in_versions(f["versions"], proxy) and not _in_versions(f["versions"], version)
    ]


def _wire(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return value


def _kafka_default(field: dict[str, Any]) -> Any:
    kind, default = field["type"], field.get("default")
    if kind.startswith("[]"):
        return []
    if default == "null":
        return None
    if kind == "bool":
        return default == "true"
    if kind == "string":
        return default or ""
    return int(default or "0", 0)


def _names(layout: tuple[Any, ...]) -> set[str]:
    names: set[str] = set()
    for name, _kind, _nullable, _default, children in layout:
        names.add(name)
        # kio's spelling too (durations lose their `_ms`)
        names.add(name.removesuffix("_ms"))
        names |= _names(children)
    return names


def _classes(api_key: int) -> set[str]:
    module = messages.request_module(api_key, legacy.proxy_version(api_key))
    return {name for name, value in vars(module).items() if isinstance(value, type)}
