"""Client quotas set and listed over the protocol (AlterClientQuotas, DescribeClientQuotas)
with raw requests, as the Java Admin client sends them. The `parity` tests run against
Apache Kafka too and get the same answers (Kafka applies an alteration a moment later:
describes are retried until it shows)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.raw_client import RawClient, make

ALTER, DESCRIBE = 49, 48
VERSION = 1
EXACT, DEFAULT, ANY = 0, 1, 2
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
Entity = dict[str, str | None]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _alter(
    client: RawClient,
    changes: list[tuple[Entity, dict[str, float | None]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    """entity -> {key: value, or None to remove}; each entry's (error code, message)."""
    entries = tuple(
        make(
            ALTER,
            VERSION,
            "EntryData",
            entity=tuple(
                make(ALTER, VERSION, "EntityData", entity_type=t, entity_name=n)
                for t, n in entity.items()
            ),
            ops=tuple(
                make(ALTER, VERSION, "OpData", key=k, value=v or 0.0, remove=v is None)
                for k, v in ops.items()
            ),
        )
        for entity, ops in changes
    )
    response = client.call(ALTER, VERSION, entries=entries, validate_only=validate_only)
    return [(int(e.error_code), e.error_message) for e in response.entries]


def _describe(
    client: RawClient, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    return client.call(
        DESCRIBE,
        VERSION,
        components=tuple(
            make(DESCRIBE, VERSION, "ComponentData", entity_type=t, match_type=m, match=n)
            for t, m, n in components
        ),
        strict=strict,
    )


def _found(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert int(response.error_code) == 0, response.error_message
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the change never showed"
        time.sleep(0.1)


@pytest.fixture
def client(kafka_bootstrap: str) -> Iterator[RawClient]:
    with RawClient(kafka_bootstrap) as raw:
        yield raw


@pytest.mark.parity
def test_quotas_are_set_described_by_filter_and_removed(client: RawClient) -> None:
    user, client_id = _name("user"), _name("client")
    alone: Entity = {"user": user}
    pair: Entity = {"user": user, "client-id": client_id}
    user_default_client: Entity = {"user": user, "client-id": None}
    rates = {"producer_byte_rate": 1e9, "consumer_byte_rate": 2e9, "request_percentage": 250.0}
    assert (
        _alter(
            client,
            [
                (alone, rates),
                (pair, {"producer_byte_rate": 3e9}),
                (user_default_client, {"request_percentage": 99.5}),
            ],
        )
        == [(0, None)] * 3
    )
    exact = [("user", EXACT, user)]
    _eventually(lambda: len(_found(_describe(client, exact))) == 3)
    assert _found(_describe(client, exact)) == {
        (("user", user),): rates,
        (("client-id", client_id), ("user", user)): {"producer_byte_rate": 3e9},
        (("client-id", None), ("user", user)): {"request_percentage": 99.5},
    }
    # strict: only entities with no other types than the filter's
    assert list(_found(_describe(client, exact, strict=True))) == [(("user", user),)]
    # a client-id of any name (the default included) with this user
    assert set(_found(_describe(client, [*exact, ("client-id", ANY, None)]))) == {
        (("client-id", client_id), ("user", user)),
        (("client-id", None), ("user", user)),
    }
    # the default client-id alone with this user
    assert list(_found(_describe(client, [*exact, ("client-id", DEFAULT, None)]))) == [
        (("client-id", None), ("user", user))
    ]
    assert list(_found(_describe(client, [("client-id", EXACT, client_id)]))) == [
        (("client-id", client_id), ("user", user))
    ]

    # Removing keys: an entity left without any is gone.
    assert (
        _alter(
            client,
            [
                (alone, {"consumer_byte_rate": None, "request_percentage": None}),
                (pair, {"producer_byte_rate": None}),
                (user_default_client, {"request_percentage": None}),
            ],
        )
        == [(0, None)] * 3
    )
    _eventually(lambda: len(_found(_describe(client, exact))) == 1)
    assert _found(_describe(client, exact)) == {(("user", user),): {"producer_byte_rate": 1e9}}
    assert _alter(client, [(alone, {"producer_byte_rate": None})]) == [(0, None)]
    _eventually(lambda: not _found(_describe(client, exact)))


@pytest.mark.parity
def test_default_user_quota_is_described_by_default_match(client: RawClient) -> None:
    default_user: Entity = {"user": None}
    try:
        assert _alter(client, [(default_user, {"request_percentage": 1e6})]) == [(0, None)]
        strict_default = [("user", DEFAULT, None)]
        _eventually(lambda: bool(_found(_describe(client, strict_default, strict=True))))
        assert _found(_describe(client, strict_default, strict=True)) == {
            (("user", None),): {"request_percentage": 1e6}
        }
    finally:
        _alter(client, [(default_user, {"request_percentage": None})])
    _eventually(lambda: not _found(_describe(client, [("user", DEFAULT, None)], strict=True)))


@pytest.mark.parity
def test_validate_only_changes_nothing(client: RawClient) -> None:
    user = _name("user")
    assert _alter(client, [({"user": user}, {"producer_byte_rate": 1e6})], validate_only=True) == [
        (0, None)
    ]
    time.sleep(0.5)  # as long as an alteration takes to show on Kafka
    assert not _found(_describe(client, [("user", EXACT, user)]))


@pytest.mark.parity
def test_bad_alterations_are_refused_entry_by_entry(client: RawClient) -> None:
    users = [_name("user") for _ in range(7)]
    refused = [
        ({"user": users[0]}, {"no_such_quota": 1.0}),
        ({"user": users[1]}, {"connection_creation_rate": 5.0}),  # an ip entity's key
        ({"user": users[2]}, {"producer_byte_rate": 0.0}),
        ({"user": users[3]}, {"consumer_byte_rate": -5.0}),
        ({"user": users[4]}, {"producer_byte_rate": 10.5}),  # not a whole number
        ({"group": "g"}, {"producer_byte_rate": 10.0}),
        ({}, {"producer_byte_rate": 10.0}),
        ({"user": ""}, {"producer_byte_rate": 10.0}),
        ({"user": users[5], "ip": "127.0.0.1"}, {"producer_byte_rate": 10.0}),
    ]
    good: Entity = {"user": users[6]}
    outcomes = _alter(client, [*refused, (good, {"request_percentage": 12.5})])
    assert sorted(code for code, _ in outcomes) == [0] + [INVALID_REQUEST] * len(refused)
    assert all(message for code, message in outcomes if code)
    exact = [("user", EXACT, users[6])]
    _eventually(lambda: bool(_found(_describe(client, exact))))
    assert _found(_describe(client, exact)) == {(("user", users[6]),): {"request_percentage": 12.5}}
    for user in users[:5]:
        assert not _found(_describe(client, [("user", EXACT, user)]))
    _alter(client, [(good, {"request_percentage": None})])


@pytest.mark.parity
def test_an_entity_named_twice_keeps_its_first_alteration(client: RawClient) -> None:
    user = _name("user")
    entity: Entity = {"user": user}
    outcomes = _alter(
        client, [(entity, {"producer_byte_rate": 1e6}), (entity, {"consumer_byte_rate": 1e6})]
    )
    assert outcomes == [
        (INVALID_REQUEST, f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={user}}})")
    ]
    exact = [("user", EXACT, user)]
    _eventually(lambda: bool(_found(_describe(client, exact))))
    assert _found(_describe(client, exact)) == {(("user", user),): {"producer_byte_rate": 1e6}}
    _alter(client, [(entity, {"producer_byte_rate": None})])


@pytest.mark.parity
@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([("group", EXACT, "g")], UNSUPPORTED_VERSION),
        ([("user", EXACT, "a"), ("user", ANY, None)], INVALID_REQUEST),
        ([("user", EXACT, None)], INVALID_REQUEST),
        ([("user", DEFAULT, "a")], INVALID_REQUEST),
        ([("user", ANY, "a")], INVALID_REQUEST),
        ([("ip", ANY, None), ("user", ANY, None)], INVALID_REQUEST),
    ],
    ids=["unknown-type", "type-twice", "exact-null", "default-named", "any-named", "ip-and-user"],
)
def test_bad_filters_fail_the_describe(
    client: RawClient, components: list[tuple[str, int, str | None]], code: int
) -> None:
    response = _describe(client, components)
    assert (int(response.error_code), response.entries) == (code, None)
    assert response.error_message
