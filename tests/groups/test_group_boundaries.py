"""Consumer-group boundaries over a real socket: the exact Kafka error code a client acts
on at each edge of the group protocol, and that a refused request leaves the group (its
state, members, generation and committed offsets) as it was.

Every test speaks raw requests (harness.raw_client) to a fresh broker. The expected answers
are those of Kafka's group coordinator (the classic protocol of Kafka 3.x and 4.x);
where minibroker answers differently, the test states Kafka's answer and is marked
xfail(strict=True), so a fix shows up as an unexpected pass.

JoinGroup is a long poll, answered when the join phase ends. A test with several
members sends a join on one connection and reads its answer only after the request that
ends the phase, so events are ordered by the protocol itself, never by sleeping.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest

from harness.raw_client import RawClient, make, make_request
from minibroker import Broker

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47

# Kafka's error codes (Errors.java).
NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86

TIMEOUT = timedelta(seconds=30)  # session and rebalance: nothing expires during a test
CLIENT_TIMEOUT = 5.0  # seconds a raw client waits for an answer before the test fails
TOPIC = "t"
Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in preference order
RANGE: Protocols = (("range", b""),)
Partition = tuple[str, int]

# Offsets are committed only for partitions that exist.
pytestmark = pytest.mark.usefixtures("topic")


@pytest.fixture
def topic(broker: Broker) -> str:
    broker.create_topic(TOPIC, 2)
    return TOPIC


@pytest.fixture
def client(broker: Broker) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers, timeout=CLIENT_TIMEOUT) as raw:
        yield raw


@pytest.fixture
def other(broker: Broker) -> Iterator[RawClient]:
    """A second connection, for a second member whose JoinGroup waits on the first."""
    with RawClient(broker.bootstrap_servers, timeout=CLIENT_TIMEOUT) as raw:
        yield raw


# --- requests -------------------------------------------------------------------------


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: what a consumer joins with."""
    data = struct.pack(">hi", 0, len(topics))
    for name in topics:
        encoded = name.encode()
        data += struct.pack(">h", len(encoded)) + encoded
    return data + struct.pack(">i", -1)  # no user data


def join_request(
    version: int,
    group: str,
    member_id: str = "",
    *,
    instance: str | None = None,
    protocol_type: str = "consumer",
    protocols: Iterable[tuple[str, bytes]] = RANGE,
    session: timedelta = TIMEOUT,
    rebalance: timedelta = TIMEOUT,
) -> Any:
    return make_request(
        JOIN_GROUP,
        version,
        group_id=group,
        session_timeout=session,
        rebalance_timeout=rebalance,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=tuple(
            make(JOIN_GROUP, version, "JoinGroupRequestProtocol", name=name, metadata=metadata)
            for name, metadata in protocols
        ),
    )


def join(client: RawClient, version: int, group: str, member_id: str = "", **options: Any) -> Any:
    return client.request(JOIN_GROUP, version, join_request(version, group, member_id, **options))


def send_join(
    client: RawClient, version: int, group: str, member_id: str = "", **options: Any
) -> None:
    """Start a JoinGroup whose answer (read with `receive_join`) waits for the join phase."""
    client.send(JOIN_GROUP, version, join_request(version, group, member_id, **options))


def receive_join(client: RawClient, version: int) -> Any:
    _, response = client.receive(JOIN_GROUP, version)
    return response


def member_id_for(client: RawClient, group: str, version: int = 5, **options: Any) -> str:
    """The id a v4+ dynamic member is handed with MEMBER_ID_REQUIRED (not yet a member)."""
    asked = join(client, version, group, **options)
    assert asked.error_code == MEMBER_ID_REQUIRED
    return str(asked.member_id)


def join_new(client: RawClient, group: str, version: int = 5, **options: Any) -> Any:
    """A join as a real client does it (a v4+ dynamic member first fetches its id),
    answered at once: the group has no other member to wait for."""
    member_id = ""
    if version >= 4 and options.get("instance") is None:
        member_id = member_id_for(client, group, version, **options)
    joined = join(client, version, group, member_id, **options)
    assert joined.error_code == NONE
    return joined


def sync(
    client: RawClient,
    group: str,
    generation: int,
    member_id: str,
    *,
    version: int = 3,
    instance: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignments: Mapping[str, bytes] | None = None,
) -> Any:
    return client.call(
        SYNC_GROUP,
        version,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=tuple(
            make(SYNC_GROUP, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ),
    )


def heartbeat(
    client: RawClient, group: str, generation: int, member_id: str, instance: str | None = None
) -> int:
    return int(
        client.call(
            HEARTBEAT,
            3,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        ).error_code
    )


def commit(
    client: RawClient,
    group: str,
    generation: int,
    member_id: str,
    offsets: Mapping[Partition, int],
    *,
    instance: str | None = None,
    version: int = 7,
) -> dict[Partition, int]:
    """OffsetCommit; the error code of each partition."""
    topics = tuple(
        make(
            OFFSET_COMMIT,
            version,
            "OffsetCommitRequestTopic",
            name=name,
            partitions=tuple(
                make(
                    OFFSET_COMMIT,
                    version,
                    "OffsetCommitRequestPartition",
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                )
                for (topic, partition), offset in offsets.items()
                if topic == name
            ),
        )
        for name in dict.fromkeys(topic for topic, _ in offsets)
    )
    response = client.call(
        OFFSET_COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance,
        retention_time=timedelta(milliseconds=-1),
        topics=topics,
    )
    return {
        (t.name, p.partition_index): int(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def committed(
    client: RawClient, group: str, partitions: Iterable[Partition]
) -> dict[Partition, int]:
    """OffsetFetch v5: the committed offset of each partition (-1: none)."""
    wanted = list(partitions)
    topics = tuple(
        make(
            OFFSET_FETCH,
            5,
            "OffsetFetchRequestTopic",
            name=name,
            partition_indexes=tuple(p for t, p in wanted if t == name),
        )
        for name in dict.fromkeys(t for t, _ in wanted)
    )
    response = client.call(OFFSET_FETCH, 5, group_id=group, topics=topics)
    assert response.error_code == NONE
    return {
        (t.name, p.partition_index): int(p.committed_offset)
        for t in response.topics
        for p in t.partitions
    }


def describe(client: RawClient, group: str, version: int = 5) -> Any:
    response = client.call(
        DESCRIBE_GROUPS, version, groups=(group,), include_authorized_operations=False
    )
    [described] = response.groups
    return described


def members(described: Any) -> dict[str, str | None]:
    """Member id -> group instance id."""
    return {m.member_id: m.group_instance_id for m in described.members}


def listed(client: RawClient, version: int = 4, states: Iterable[str] = ()) -> dict[str, str]:
    """ListGroups: group id -> state (v4+) or protocol type (v3-)."""
    response = client.call(LIST_GROUPS, version, states_filter=tuple(states))
    assert response.error_code == NONE
    return {g.group_id: g.group_state if version >= 4 else g.protocol_type for g in response.groups}


def delete_groups(client: RawClient, *groups: str) -> dict[str, int]:
    response = client.call(DELETE_GROUPS, 2, groups_names=groups)
    return {r.group_id: int(r.error_code) for r in response.results}


def delete_offsets(client: RawClient, group: str, partitions: Iterable[Partition]) -> Any:
    wanted = list(partitions)
    topics = tuple(
        make(
            OFFSET_DELETE,
            0,
            "OffsetDeleteRequestTopic",
            name=name,
            partitions=tuple(
                make(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=p)
                for t, p in wanted
                if t == name
            ),
        )
        for name in dict.fromkeys(t for t, _ in wanted)
    )
    return client.call(OFFSET_DELETE, 0, group_id=group, topics=topics)


def leave(client: RawClient, group: str, *who: tuple[str, str | None], version: int = 3) -> Any:
    """LeaveGroup v3+: (member id, group instance id) pairs."""
    return client.call(
        LEAVE_GROUP,
        version,
        group_id=group,
        members=tuple(
            make(LEAVE_GROUP, version, "MemberIdentity", member_id=m, group_instance_id=i)
            for m, i in who
        ),
    )


# --- groups in a known state ------------------------------------------------------------


def stable(client: RawClient, group: str, version: int = 5, **options: Any) -> tuple[str, int]:
    """A one-member group, Stable: (member id, generation)."""
    joined = join_new(client, group, version, **options)
    assert joined.leader == joined.member_id
    synced = sync(
        client,
        group,
        joined.generation_id,
        joined.member_id,
        instance=options.get("instance"),
        assignments={joined.member_id: b"assignment"},
    )
    assert synced.error_code == NONE
    return joined.member_id, joined.generation_id


def at_generation_two(client: RawClient, group: str) -> str:
    """A one-member group whose leader rejoined once: now CompletingRebalance at
    generation 2, so that generation - 1 is a real older generation."""
    member_id, generation = stable(client, group)
    assert generation == 1
    rejoined = join(client, 5, group, member_id)
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, 2)
    return member_id


def stable_pair(client: RawClient, other: RawClient, group: str) -> tuple[str, str, int]:
    """Two dynamic members, Stable: (leader id, follower id, generation).

    The follower's id is handed out first (MEMBER_ID_REQUIRED); an id still outstanding
    holds the join phase open, so the leader's rejoin waits until the follower joins
    with it, whichever connection the broker serves first."""
    leader, _ = stable(client, group)
    follower = member_id_for(other, group)
    send_join(client, 5, group, leader)
    joined = join(other, 5, group, follower)
    rejoined = receive_join(client, 5)
    assert (rejoined.error_code, joined.error_code) == (NONE, NONE)
    assert rejoined.leader == leader
    assert {m.member_id for m in rejoined.members} == {leader, follower}
    generation = rejoined.generation_id
    assignments = {leader: b"leader's", follower: b"follower's"}
    assert sync(client, group, generation, leader, assignments=assignments).error_code == NONE
    assert sync(other, group, generation, follower).assignment == b"follower's"
    assert describe(client, group).group_state == "Stable"
    return leader, follower, generation


def rejoin_when_told(
    client: RawClient, group: str, generation: int, member_id: str, instance: str | None = None
) -> Any:
    """Heartbeat until the coordinator answers REBALANCE_IN_PROGRESS, then rejoin, as a
    consumer does: ordered by the broker's answers, however long it takes to see the
    other connection's join."""
    for _ in range(10_000):
        code = heartbeat(client, group, generation, member_id, instance)
        if code == REBALANCE_IN_PROGRESS:
            return join(client, 5, group, member_id, instance=instance)
        assert code == NONE
    raise AssertionError("the coordinator never started the rebalance")


GENERATION_OFF_BY_ONE = pytest.mark.parametrize("off", [-1, 1], ids=["older", "newer"])


# --- wrong generation -------------------------------------------------------------------


@GENERATION_OFF_BY_ONE
def test_sync_group_from_another_generation_is_illegal(client: RawClient, off: int) -> None:
    """A SyncGroup from any generation but the current one (older: a member that missed a
    rebalance; newer: a confused one) is ILLEGAL_GENERATION, and a leader's such sync
    does not hand out its assignment."""
    member_id = at_generation_two(client, "g")
    refused = sync(client, "g", 2 + off, member_id, assignments={member_id: b"stale"})
    assert refused.error_code == ILLEGAL_GENERATION
    described = describe(client, "g")
    assert described.group_state == "CompletingRebalance"
    assert [m.member_assignment for m in described.members] == [b""]

    synced = sync(client, "g", 2, member_id, assignments={member_id: b"current"})
    assert (synced.error_code, synced.assignment) == (NONE, b"current")
    # Stable now: the same boundary holds, and the assignment stays.
    assert sync(client, "g", 2 + off, member_id).error_code == ILLEGAL_GENERATION
    assert sync(client, "g", 2, member_id).assignment == b"current"


@GENERATION_OFF_BY_ONE
def test_heartbeat_from_another_generation_is_illegal(client: RawClient, off: int) -> None:
    """A heartbeat from another generation is ILLEGAL_GENERATION (the member must rejoin),
    in CompletingRebalance and in Stable, whereas the current generation's is fine."""
    member_id = at_generation_two(client, "g")
    assert heartbeat(client, "g", 2 + off, member_id) == ILLEGAL_GENERATION
    assert heartbeat(client, "g", 2, member_id) == NONE
    assert sync(client, "g", 2, member_id, assignments={member_id: b"a"}).error_code == NONE
    assert heartbeat(client, "g", 2 + off, member_id) == ILLEGAL_GENERATION
    assert heartbeat(client, "g", 2, member_id) == NONE
    described = describe(client, "g")
    assert (described.group_state, members(described)) == ("Stable", {member_id: None})


@GENERATION_OFF_BY_ONE
def test_offset_commit_from_another_generation_is_illegal(client: RawClient, off: int) -> None:
    """An OffsetCommit from another generation is ILLEGAL_GENERATION on every partition and
    stores nothing: a zombie member cannot overwrite the current owner's progress."""
    member_id = at_generation_two(client, "g")
    assert sync(client, "g", 2, member_id, assignments={member_id: b"a"}).error_code == NONE
    offsets = {(TOPIC, 0): 5, (TOPIC, 1): 7}
    assert commit(client, "g", 2 + off, member_id, offsets) == dict.fromkeys(
        offsets, ILLEGAL_GENERATION
    )
    assert committed(client, "g", offsets) == dict.fromkeys(offsets, -1)
    assert commit(client, "g", 2, member_id, offsets) == dict.fromkeys(offsets, NONE)
    assert committed(client, "g", offsets) == offsets


# --- while a rebalance is under way -----------------------------------------------------


def test_commit_during_completing_rebalance_is_told_rebalance_in_progress(
    client: RawClient,
) -> None:
    """Between JoinGroup and SyncGroup (CompletingRebalance) a member's commit, current
    generation and all, gets REBALANCE_IN_PROGRESS and stores nothing; after the sync it
    commits. A commit from another generation is ILLEGAL_GENERATION first."""
    member_id = at_generation_two(client, "g")
    offsets = {(TOPIC, 0): 3}
    for version in (2, 7, 8, 9):
        assert commit(client, "g", 2, member_id, offsets, version=version) == {
            (TOPIC, 0): REBALANCE_IN_PROGRESS
        }, version
    assert commit(client, "g", 3, member_id, offsets) == {(TOPIC, 0): ILLEGAL_GENERATION}
    assert committed(client, "g", offsets) == {(TOPIC, 0): -1}
    assert describe(client, "g").group_state == "CompletingRebalance"

    assert sync(client, "g", 2, member_id, assignments={member_id: b"a"}).error_code == NONE
    assert commit(client, "g", 2, member_id, offsets) == {(TOPIC, 0): NONE}
    assert committed(client, "g", offsets) == offsets


def test_preparing_rebalance_keeps_commits_but_asks_for_a_rejoin(
    client: RawClient, other: RawClient
) -> None:
    """While the group prepares a rebalance, a member of the current generation still
    commits (its last offsets before giving up partitions), while its heartbeat and
    SyncGroup say REBALANCE_IN_PROGRESS; its rejoin completes the join phase."""
    leader, follower, generation = stable_pair(client, other, "g")
    left = leave(other, "g", (follower, None))
    assert (left.error_code, [m.error_code for m in left.members]) == (NONE, [NONE])
    assert describe(client, "g").group_state == "PreparingRebalance"

    assert heartbeat(client, "g", generation, leader) == REBALANCE_IN_PROGRESS
    assert sync(client, "g", generation, leader).error_code == REBALANCE_IN_PROGRESS
    offsets = {(TOPIC, 0): 11}
    assert commit(client, "g", generation + 1, leader, offsets) == {(TOPIC, 0): ILLEGAL_GENERATION}
    assert commit(client, "g", generation, leader, offsets) == {(TOPIC, 0): NONE}
    assert committed(client, "g", offsets) == offsets

    rejoined = join(client, 5, "g", leader)
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, generation + 1)
    assert [m.member_id for m in rejoined.members] == [leader]


@GENERATION_OFF_BY_ONE
def test_heartbeat_from_another_generation_while_preparing_rebalance_is_illegal(
    client: RawClient, other: RawClient, off: int
) -> None:
    """Kafka's Heartbeat checks the generation before the group state, so a member of
    another generation learns it must rejoin with a fresh one even mid-rebalance."""
    leader, follower, generation = stable_pair(client, other, "g")
    assert leave(other, "g", (follower, None)).members[0].error_code == NONE
    assert describe(client, "g").group_state == "PreparingRebalance"
    assert heartbeat(client, "g", generation + off, leader) == ILLEGAL_GENERATION


# --- empty group id ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 4, 5, 9])
def test_join_group_with_an_empty_group_id_is_invalid(client: RawClient, version: int) -> None:
    """JoinGroup needs a group id: "" is INVALID_GROUP_ID, and no group is created."""
    refused = join(client, version, "")
    assert (refused.error_code, refused.member_id) == (INVALID_GROUP_ID, "")
    assert listed(client) == {}


def _heartbeat_empty(client: RawClient) -> int:
    return heartbeat(client, "", 1, "member")


def _sync_empty(client: RawClient) -> int:
    return int(sync(client, "", 1, "member").error_code)


def _leave_empty(client: RawClient) -> int:
    return int(leave(client, "", ("member", None)).error_code)


def _leave_v1_empty(client: RawClient) -> int:
    return int(client.call(LEAVE_GROUP, 1, group_id="", member_id="member").error_code)


def _offset_delete_empty(client: RawClient) -> int:
    return int(delete_offsets(client, "", [(TOPIC, 0)]).error_code)


@pytest.mark.parametrize(
    "request_with_empty_group",
    [
        pytest.param(_heartbeat_empty, id="Heartbeat"),
        pytest.param(_sync_empty, id="SyncGroup"),
        pytest.param(_leave_empty, id="LeaveGroup"),
        pytest.param(_leave_v1_empty, id="LeaveGroup-v1"),
        pytest.param(_offset_delete_empty, id="OffsetDelete"),
    ],
)
def test_membership_requests_with_an_empty_group_id_are_invalid(
    client: RawClient, request_with_empty_group: Callable[[RawClient], int]
) -> None:
    """Heartbeat, SyncGroup, LeaveGroup and OffsetDelete for group "" are INVALID_GROUP_ID
    in Kafka (top-level, before any member lookup)."""
    assert request_with_empty_group(client) == INVALID_GROUP_ID


def test_offsets_can_be_committed_and_fetched_for_the_empty_group_id(client: RawClient) -> None:
    """Kafka keeps OffsetCommit/OffsetFetch working for group "" (old simple consumers):
    a generation -1 commit is stored and fetched back."""
    offsets = {(TOPIC, 0): 42}
    assert commit(client, "", -1, "", offsets) == {(TOPIC, 0): NONE}
    assert committed(client, "", offsets) == offsets


def test_offset_fetch_for_the_empty_group_id_is_answered(client: RawClient) -> None:
    """OffsetFetch for group "" is not refused: no error, no offset."""
    assert committed(client, "", [(TOPIC, 0)]) == {(TOPIC, 0): -1}


# --- JoinGroup and member ids -----------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_join_without_member_id_before_v4_is_given_an_id_and_joins(
    client: RawClient, version: int
) -> None:
    """Before v4 the coordinator assigns the member id and the join goes ahead: the lone
    member is leader of generation 1."""
    joined = join(client, version, "g")
    assert joined.error_code == NONE
    assert joined.member_id
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (
        1,
        joined.member_id,
        "range",
    )
    assert [m.member_id for m in joined.members] == [joined.member_id]
    described = describe(client, "g")
    assert (described.group_state, members(described)) == (
        "CompletingRebalance",
        {joined.member_id: None},
    )


@pytest.mark.parametrize("version", [4, 5, 6, 7, 8, 9])
def test_join_without_member_id_from_v4_must_come_back_with_the_given_id(
    client: RawClient, version: int
) -> None:
    """From v4 a dynamic member without an id gets MEMBER_ID_REQUIRED with its id and is
    not a member yet; joining again with that id makes it the leader of generation 1,
    while an id the coordinator never gave out is UNKNOWN_MEMBER_ID."""
    asked = join(client, version, "g")
    assert asked.error_code == MEMBER_ID_REQUIRED
    assert asked.member_id and asked.generation_id == -1
    described = describe(client, "g")
    assert (described.group_state, members(described)) == ("Empty", {})

    made_up = join(client, version, "g", asked.member_id + "-other")
    assert made_up.error_code == UNKNOWN_MEMBER_ID

    joined = join(client, version, "g", asked.member_id)
    assert (joined.error_code, joined.member_id) == (NONE, asked.member_id)
    assert (joined.generation_id, joined.leader) == (1, asked.member_id)
    assert members(describe(client, "g")) == {asked.member_id: None}


# --- protocol consistency ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [
        pytest.param("connect", RANGE, id="another-protocol-type"),
        pytest.param("consumer", (("roundrobin", b""),), id="no-protocol-in-common"),
    ],
)
def test_join_incompatible_with_the_group_is_inconsistent_group_protocol(
    client: RawClient, other: RawClient, protocol_type: str, protocols: Protocols
) -> None:
    """A member whose protocol type differs from the group's, or who shares none of its
    protocols, is refused with INCONSISTENT_GROUP_PROTOCOL (before any member id is
    handed out) and the group carries on untouched."""
    member_id, generation = stable(client, "g")
    for version in (3, 5):
        refused = join(other, version, "g", protocol_type=protocol_type, protocols=protocols)
        assert refused.error_code == INCONSISTENT_GROUP_PROTOCOL, version
    described = describe(client, "g")
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert members(described) == {member_id: None}
    assert heartbeat(client, "g", generation, member_id) == NONE


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [
        pytest.param("", RANGE, id="no-protocol-type"),
        pytest.param("consumer", (), id="no-protocols"),
    ],
)
def test_first_join_needs_a_protocol_type_and_a_protocol(
    client: RawClient, protocol_type: str, protocols: Protocols
) -> None:
    """Even an empty group refuses a member without a protocol type or without protocols."""
    refused = join(client, 3, "g", protocol_type=protocol_type, protocols=protocols)
    assert refused.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert members(describe(client, "g")) == {}


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name"),
    [
        pytest.param("connect", "range", id="another-protocol-type"),
        pytest.param("consumer", "roundrobin", id="another-protocol-name"),
    ],
)
def test_sync_group_v5_with_another_protocol_is_inconsistent(
    client: RawClient, protocol_type: str, protocol_name: str
) -> None:
    """SyncGroup v5 names the protocol type and name the member thinks were chosen; if
    they are not the group's, INCONSISTENT_GROUP_PROTOCOL and the leader's assignment is
    not taken. Null (not known) is accepted."""
    joined = join_new(client, "g")
    member_id, generation = joined.member_id, joined.generation_id
    refused = sync(
        client,
        "g",
        generation,
        member_id,
        version=5,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments={member_id: b"a"},
    )
    assert refused.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert describe(client, "g").group_state == "CompletingRebalance"

    synced = sync(
        client,
        "g",
        generation,
        member_id,
        version=5,
        protocol_type="consumer",
        protocol_name="range",
        assignments={member_id: b"a"},
    )
    assert (synced.error_code, synced.protocol_type, synced.protocol_name) == (
        NONE,
        "consumer",
        "range",
    )
    assert synced.assignment == b"a"
    refused_stable = sync(
        client,
        "g",
        generation,
        member_id,
        version=5,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
    )
    assert refused_stable.error_code == INCONSISTENT_GROUP_PROTOCOL
    unknown = sync(client, "g", generation, member_id, version=5)
    assert (unknown.error_code, unknown.assignment) == (NONE, b"a")


# --- static membership ------------------------------------------------------------------


def test_a_new_static_instance_fences_the_member_id_it_replaces(
    client: RawClient, other: RawClient
) -> None:
    """A join with a known group.instance.id and no member id replaces the old member:
    the old member id, still naming that instance, is FENCED_INSTANCE_ID on Heartbeat,
    SyncGroup, OffsetCommit and JoinGroup (so the duplicate shuts down), and
    UNKNOWN_MEMBER_ID without it; the new one is the member."""
    old_id, generation = stable(client, "g", instance="i1")
    replaced = join(other, 9, "g", instance="i1")
    assert (replaced.error_code, replaced.generation_id) == (NONE, generation)
    new_id = replaced.member_id
    assert new_id != old_id

    offsets = {(TOPIC, 0): 9}
    assert heartbeat(client, "g", generation, old_id, "i1") == FENCED_INSTANCE_ID
    assert sync(client, "g", generation, old_id, instance="i1").error_code == FENCED_INSTANCE_ID
    assert commit(client, "g", generation, old_id, offsets, instance="i1") == {
        (TOPIC, 0): FENCED_INSTANCE_ID
    }
    assert join(client, 5, "g", old_id, instance="i1").error_code == FENCED_INSTANCE_ID
    assert heartbeat(client, "g", generation, old_id) == UNKNOWN_MEMBER_ID
    assert committed(client, "g", offsets) == {(TOPIC, 0): -1}

    described = describe(client, "g")
    assert (described.group_state, members(described)) == ("Stable", {new_id: "i1"})
    assert heartbeat(other, "g", generation, new_id, "i1") == NONE
    assert commit(other, "g", generation, new_id, offsets, instance="i1") == {(TOPIC, 0): NONE}


def test_a_static_leader_replaced_with_join_group_v9_skips_the_assignment(
    client: RawClient, other: RawClient
) -> None:
    """A static leader restarting (JoinGroup v9) within its session causes no rebalance:
    it is told it leads, with the member list, but to skip the assignment; the group
    stays Stable at its generation and the new instance syncs the old assignment."""
    _, generation = stable(client, "g", instance="i1")
    replaced = join(other, 9, "g", instance="i1")
    new_id = replaced.member_id
    assert (replaced.error_code, replaced.generation_id) == (NONE, generation)
    assert (replaced.leader, replaced.skip_assignment) == (new_id, True)
    assert [m.member_id for m in replaced.members] == [new_id]
    assert describe(client, "g").group_state == "Stable"
    synced = sync(other, "g", generation, new_id, instance="i1")
    assert (synced.error_code, synced.assignment) == (NONE, b"assignment")


def test_a_static_leader_replaced_before_join_group_v9_keeps_the_generation(
    client: RawClient, other: RawClient
) -> None:
    """Below v9 Kafka does not rebalance for a restarted static leader either: it names
    the replaced member id as leader, so the new instance does not run an assignment a
    Stable group would never hand out, and keeps the generation."""
    old_id, generation = stable(client, "g", instance="i1")
    replaced = join(other, 5, "g", instance="i1")
    assert replaced.error_code == NONE
    assert replaced.generation_id == generation
    assert (replaced.leader, list(replaced.members)) == (old_id, [])
    assert describe(client, "g").group_state == "Stable"
    # So it syncs as a follower and gets the old instance's assignment.
    synced = sync(other, "g", generation, replaced.member_id, instance="i1")
    assert (synced.error_code, synced.assignment) == (NONE, b"assignment")


@pytest.mark.parametrize("version", [5, 9])
def test_a_restarted_static_member_with_new_metadata_causes_no_rebalance(
    client: RawClient, other: RawClient, version: int
) -> None:
    """A restarted Java consumer sends the same protocol with other bytes (its
    subscription names its last generation): Kafka keeps the group Stable at its
    generation, and the new metadata is what the next rebalance hands the leader."""
    _, generation = stable(client, "g", instance="i1")
    replaced = join(other, version, "g", instance="i1", protocols=[("range", b"restarted")])
    assert (replaced.error_code, replaced.generation_id) == (NONE, generation)
    described = describe(client, "g")
    assert described.group_state == "Stable"
    assert [bytes(m.member_metadata) for m in described.members] == [b"restarted"]


def test_a_restarted_static_member_that_changes_the_protocol_rebalances(
    client: RawClient, other: RawClient
) -> None:
    """If the protocol the group would select changes, the group rebalances."""
    _, generation = stable(client, "g", instance="i1", protocols=[("range", b"m")])
    send_join(other, 5, "g", instance="i1", protocols=[("sticky", b"s"), ("range", b"m")])
    rejoined = receive_join(other, 5)
    assert rejoined.error_code == NONE
    assert (rejoined.generation_id, rejoined.protocol_name) == (generation + 1, "sticky")


def test_a_static_member_replaced_while_awaiting_its_assignment_is_fenced(
    broker: Broker, client: RawClient, other: RawClient
) -> None:
    """A follower waiting in SyncGroup when a new instance with its group.instance.id
    joins is answered FENCED_INSTANCE_ID; the group rebalances with the new member."""
    leader, generation = stable(client, "g", instance="i1")
    send_join(other, 5, "g", instance="i2")  # a new member: waits for the leader
    rejoined = rejoin_when_told(client, "g", generation, leader, "i1")
    first = receive_join(other, 5)
    assert (rejoined.error_code, first.error_code) == (NONE, NONE)
    generation = rejoined.generation_id
    old_id = first.member_id
    other.send(
        SYNC_GROUP,
        3,
        make_request(
            SYNC_GROUP,
            3,
            group_id="g",
            generation_id=generation,
            member_id=old_id,
            group_instance_id="i2",
            assignments=(),
        ),
    )  # waits for the leader's assignment
    with RawClient(broker.bootstrap_servers, timeout=CLIENT_TIMEOUT) as third:
        send_join(third, 5, "g", instance="i2")  # the replacement: waits for the leader
        _, fenced = other.receive(SYNC_GROUP, 3)
        assert fenced.error_code == FENCED_INSTANCE_ID
        # The replacement is in (the old member was fenced by it): the leader rejoins.
        again = join(client, 5, "g", leader, instance="i1")
        replacement = receive_join(third, 5)
    assert (again.error_code, replacement.error_code) == (NONE, NONE)
    assert replacement.member_id not in (old_id, leader)
    assert replacement.generation_id == again.generation_id == generation + 1
    assert {m.member_id: m.group_instance_id for m in again.members} == {
        leader: "i1",
        replacement.member_id: "i2",
    }


def test_leave_group_by_instance_id_removes_the_static_member(client: RawClient) -> None:
    """LeaveGroup v3+ may name members by group.instance.id alone (an operator removing a
    static member): it goes, an unknown instance is UNKNOWN_MEMBER_ID for that entry
    only, and a member id that is not the instance's is FENCED_INSTANCE_ID."""
    member_id, generation = stable(client, "g", instance="i1")
    wrong = leave(client, "g", ("someone-else", "i1"))
    assert (wrong.error_code, [m.error_code for m in wrong.members]) == (
        NONE,
        [FENCED_INSTANCE_ID],
    )
    assert members(describe(client, "g")) == {member_id: "i1"}

    for version in (3, 4, 5):
        ghost = leave(client, "g", ("", "ghost"), version=version)
        assert (ghost.error_code, [m.error_code for m in ghost.members]) == (
            NONE,
            [UNKNOWN_MEMBER_ID],
        )
    assert heartbeat(client, "g", generation, member_id, "i1") == NONE

    left = leave(client, "g", ("", "i1"), ("", "ghost"))
    assert left.error_code == NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] == [
        ("", "i1", NONE),
        ("", "ghost", UNKNOWN_MEMBER_ID),
    ]
    described = describe(client, "g")
    assert (described.group_state, members(described)) == ("Empty", {})
    assert heartbeat(client, "g", generation, member_id, "i1") == UNKNOWN_MEMBER_ID


def test_leave_group_v3_for_an_unknown_group_fails_per_member(client: RawClient) -> None:
    """Kafka reports an unknown group's LeaveGroup v3+ per member, not as a group error."""
    left = leave(client, "nowhere", ("m", None), ("", "i1"))
    assert [m.error_code for m in left.members] == [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]
    assert left.error_code == NONE


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_before_v3_for_an_unknown_group_is_unknown_member_id(
    client: RawClient, version: int
) -> None:
    """v0-v2 have no member list: Kafka puts the one member's error at top level."""
    left = client.call(LEAVE_GROUP, version, group_id="nowhere", member_id="m")
    assert left.error_code == UNKNOWN_MEMBER_ID


def test_member_commit_to_an_unknown_group_is_illegal_generation(client: RawClient) -> None:
    """A commit carrying a generation for a group the coordinator does not have comes from
    an older generation (Kafka: ILLEGAL_GENERATION before OffsetCommit v9) and creates
    no group."""
    assert commit(client, "nowhere", 1, "m", {(TOPIC, 0): 1}, version=8) == {
        (TOPIC, 0): ILLEGAL_GENERATION
    }


# --- deleted groups ---------------------------------------------------------------------


def test_a_deleted_group_is_dead_and_forgotten(client: RawClient) -> None:
    """DeleteGroups on an Empty group takes it to Dead and drops it with its offsets: it is
    described as Dead (v6: GROUP_ID_NOT_FOUND), not listed, not deletable again, its old
    member ids are unknown, and a new join starts a new group at generation 1."""
    member_id, generation = stable(client, "g")
    offsets = {(TOPIC, 0): 4, (TOPIC, 1): 8}
    assert commit(client, "g", generation, member_id, offsets) == dict.fromkeys(offsets, NONE)
    assert leave(client, "g", (member_id, None)).members[0].error_code == NONE
    assert describe(client, "g").group_state == "Empty"

    assert delete_groups(client, "g") == {"g": NONE}
    dead = describe(client, "g")
    assert (dead.error_code, dead.group_state, members(dead)) == (NONE, "Dead", {})
    assert (dead.protocol_type, dead.protocol_data) == ("", "")
    dead_v6 = describe(client, "g", version=6)
    assert (dead_v6.error_code, dead_v6.group_state) == (GROUP_ID_NOT_FOUND, "Dead")
    assert listed(client) == {}
    assert committed(client, "g", offsets) == dict.fromkeys(offsets, -1)
    assert delete_groups(client, "g") == {"g": GROUP_ID_NOT_FOUND}
    assert heartbeat(client, "g", generation, member_id) == UNKNOWN_MEMBER_ID
    assert join(client, 5, "g", member_id).error_code == UNKNOWN_MEMBER_ID
    assert listed(client) == {}

    reborn = join_new(client, "g")
    assert (reborn.generation_id, reborn.leader) == (1, reborn.member_id)


# --- ListGroups and DeleteGroups --------------------------------------------------------


def test_list_groups_filters_by_state_from_v4(client: RawClient, other: RawClient) -> None:
    """ListGroups lists every group the coordinator has (v3: with its protocol type); from
    v4 it gives each group's state and keeps only the states asked for (none: all)."""
    assert commit(client, "empty", -1, "", {(TOPIC, 0): 1}) == {(TOPIC, 0): NONE}
    stable(client, "stable")
    join_new(other, "completing")
    everything = {"empty": "Empty", "stable": "Stable", "completing": "CompletingRebalance"}
    assert listed(client, version=3) == {
        "empty": "",
        "stable": "consumer",
        "completing": "consumer",
    }
    assert listed(client, version=4) == everything
    assert listed(client, version=5) == everything
    assert listed(client, states=["Stable"]) == {"stable": "Stable"}
    assert listed(client, states=["Empty", "CompletingRebalance"]) == {
        "empty": "Empty",
        "completing": "CompletingRebalance",
    }
    assert listed(client, states=["PreparingRebalance"]) == {}


def test_delete_groups_deletes_only_empty_groups(client: RawClient) -> None:
    """DeleteGroups answers per group: NON_EMPTY_GROUP for one with members (which keeps
    them), GROUP_ID_NOT_FOUND for an unknown one, success for an Empty one, which then is
    no longer listed and has lost its offsets."""
    offsets = {(TOPIC, 0): 3}
    assert commit(client, "empty", -1, "", offsets) == {(TOPIC, 0): NONE}
    member_id, generation = stable(client, "busy")
    assert delete_groups(client, "busy", "nowhere", "empty") == {
        "busy": NON_EMPTY_GROUP,
        "nowhere": GROUP_ID_NOT_FOUND,
        "empty": NONE,
    }
    assert listed(client) == {"busy": "Stable"}
    assert committed(client, "empty", offsets) == {(TOPIC, 0): -1}
    assert members(describe(client, "busy")) == {member_id: None}
    assert heartbeat(client, "busy", generation, member_id) == NONE


def test_a_member_is_described_with_its_host_as_kafka_writes_it(client: RawClient) -> None:
    """DescribeGroups gives each member's address as Java's InetAddress prints it, with a
    leading slash; tools show it as it comes."""
    stable(client, "hosted")
    [member] = describe(client, "hosted").members
    assert member.client_host == "/127.0.0.1"
