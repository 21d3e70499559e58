"""JoinGroup answers sans-IO: the protocol type and name a member reads (null from v7
where the version allows it, "" before), and the long poll a join waits in: not
answered before the join phase ends, answered when the coordinator completes it, and
answered REBALANCE_IN_PROGRESS if it is still unfilled at its deadline (the rebalance
timeout plus a safety margin). The coordinator's timers are driven by hand on a FakeClock.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from harness.raw_client import make
from minibroker.dispatch import PendingReply
from tests.sansio import SansIOBroker, decode

JOIN_GROUP = 11
NONE = 0
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
REBALANCE_SECONDS = 20
SAFETY_MARGIN_SECONDS = 5


def join(broker: SansIOBroker, version: int, member_id: str) -> bytes | PendingReply | None:
    protocol = make(JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range", metadata=b"m")
    return broker.send(
        JOIN_GROUP,
        version,
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=REBALANCE_SECONDS),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
        reason=None,
    )


def answer(reply: bytes | PendingReply | None, version: int) -> Any:
    assert isinstance(reply, bytes), f"expected an answer, got {reply!r}"
    return decode(reply, JOIN_GROUP, version)


@pytest.mark.parametrize("version", [4, 6, 7, 9])
def test_member_id_required_has_no_protocol(version: int) -> None:
    body = answer(join(SansIOBroker(), version, ""), version)
    assert body.error_code.value == MEMBER_ID_REQUIRED
    assert body.member_id
    if version >= 7:
        assert (body.protocol_type, body.protocol_name) == (None, None)
    else:
        assert body.protocol_name == ""


def _joined(broker: SansIOBroker, version: int) -> tuple[str, Any]:
    """A member that gets an id and joins; its answer."""
    member_id = answer(join(broker, version, ""), version).member_id
    return member_id, join(broker, version, member_id)


def _pending_join(broker: SansIOBroker, version: int) -> tuple[str, PendingReply]:
    """A second member's join, which waits for the first member to rejoin."""
    _, first = _joined(broker, version)
    assert answer(first, version).error_code.value == NONE
    member_id, pending = _joined(broker, version)
    assert isinstance(pending, PendingReply)
    return member_id, pending


@pytest.mark.parametrize("version", [5, 7])
def test_a_completed_join_names_the_protocol(version: int) -> None:
    member_id, reply = _joined(SansIOBroker(), version)
    body = answer(reply, version)
    assert body.error_code.value == NONE
    assert (body.leader, body.member_id) == (member_id, member_id)
    assert body.protocol_name == "range"
    if version >= 7:
        assert body.protocol_type == "consumer"


@pytest.mark.parametrize("version", [5, 7])
def test_an_unfilled_join_gives_up_at_its_deadline(version: int) -> None:
    broker = SansIOBroker()
    member_id, pending = _pending_join(broker, version)
    assert pending.deadline == broker.clock.monotonic() + REBALANCE_SECONDS + SAFETY_MARGIN_SECONDS
    assert pending.finish(False) is None
    body = answer(pending.finish(True), version)
    assert body.error_code.value == REBALANCE_IN_PROGRESS
    assert body.member_id == member_id
    assert body.protocol_name == ("" if version < 7 else None)


LEAVE_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 13, 15, 16


def test_a_group_that_empties_keeps_its_protocol_type() -> None:
    """Kafka keeps "consumer" on a group whose members all left, and the Java Admin
    client decides from it whether a group is a consumer group."""
    broker = SansIOBroker()
    member_id, reply = _joined(broker, 5)
    assert answer(reply, 5).error_code.value == NONE
    leaving = make(LEAVE_GROUP, 3, "MemberIdentity", member_id=member_id, group_instance_id=None)
    left = broker.call(LEAVE_GROUP, 3, group_id="g", members=(leaving,))
    assert left.error_code.value == NONE
    described = broker.call(DESCRIBE_GROUPS, 3, groups=("g",), include_authorized_operations=False)
    (group,) = described.groups
    assert (group.group_state, group.protocol_type, group.members) == ("Empty", "consumer", ())
    listed = broker.call(LIST_GROUPS, 4, states_filter=())
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("g", "consumer", "Empty")
    ]
