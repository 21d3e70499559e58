"""Raw-request scenarios for the differential run: Kafka 4's consumer group protocol
(KIP-848), ConsumerGroupHeartbeat (key 68, v0-1) and ConsumerGroupDescribe (key 69,
v0-1), sent request by request on one connection (harness/raw_client.py), so each broker
gets the same requests in the same order. Only what a step asks depends on an earlier
answer (the member epoch, the partitions a member owns), as a client's would.

Each scenario sets up through the same proxy on other connections (a topic, then
waiting until the group coordinator is loaded and knows the topic: `ready`), then runs
its steps; it returns the steps' labels. harness.scripted and harness.compare_scripted
compare the steps in order; what they set aside is stated there and in each scenario's
docstring:

- member ids: "<member N>" by first appearance (v1 members are named by the scenario,
  v0 members and classic members by the broker); topic ids: "<topic NAME>";
- heartbeat_interval: each broker's configured group.consumer.heartbeat.interval.ms
  (Kafka's default 5000 ms; minibroker's default 500 ms) is the same placeholder; any
  other value (0 in refusals and leave answers) is compared;
- error messages: whether there is one, not its text (Kafka's texts name its own
  classes and its regex engine's wording).

The Kafka these run against computes a group's target assignment in the heartbeat that
changes the group, as minibroker does (group.consumer.assignment.interval.ms=0,
group.consumer.assignor.offload.enable=false; test_differential.py): Kafka 4.4's
defaults (1000 ms, offloaded) leave a group Assigning for up to a second after a
change, so what a member hears depends on timing.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from harness.raw_client import RawClient, make
from minibroker.protocol.recording import plain
from tests.differential.harness import SETTLING, error_codes
from tests.differential.scenarios import TIMEOUT, create

SCRIPTED_CLIENT = "diff-raw"  # the client id of the scripted connection
SETUP_CLIENT = "diff-raw-setup"
PROBE_GROUP = "diff-cg-probe"  # the group `ready` joins to see the coordinator knows a topic

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 10, 11, 14
REBALANCE_TIMEOUT = datetime.timedelta(seconds=30)
NOT_GIVEN = datetime.timedelta(milliseconds=-1)  # rebalance timeout: unchanged
SESSION_TIMEOUT = datetime.timedelta(seconds=30)


class Script:
    """The scripted connection: each request sent under a label, asked again while the
    answer is a settling error (a coordinator still loading)."""

    def __init__(self, bootstrap: str) -> None:
        self.client = RawClient(bootstrap, timeout=TIMEOUT, client_id=SCRIPTED_CLIENT)
        self.labels: list[str] = []

    def __enter__(self) -> Script:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.client.close()

    def send(self, label: str, api_key: int, version: int, **fields: Any) -> Any:
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self.client.call(api_key, version, **fields)
            if not error_codes(plain(answer)) & SETTLING or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.labels.append(label)
        return answer

    def heartbeat(self, label: str, version: int, **fields: Any) -> Any:
        """ConsumerGroupHeartbeat: a heartbeat that leaves a field out sends it as
        unchanged (null, or -1 for the rebalance timeout)."""
        request = {
            "member_id": "",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": NOT_GIVEN,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None,
        }
        request.update(fields)
        return self.send(label, CONSUMER_GROUP_HEARTBEAT, version, **request)

    def describe(self, label: str, version: int, *group_ids: str) -> Any:
        return self.send(
            label,
            CONSUMER_GROUP_DESCRIBE,
            version,
            group_ids=group_ids,
            include_authorized_operations=False,
        )


def joining(topics: tuple[str, ...]) -> dict[str, Any]:
    """The fields of a join (epoch 0): rebalance timeout, subscription, nothing owned."""
    return {
        "member_epoch": 0,
        "rebalance_timeout": REBALANCE_TIMEOUT,
        "subscribed_topic_names": topics,
        "topic_partitions": (),
    }


def assigned(answer: Any) -> dict[Any, tuple[int, ...]]:
    """What a heartbeat answer assigns (topic id -> partitions); {} when it says nothing."""
    if answer.assignment is None:
        return {}
    return {tp.topic_id: tuple(tp.partitions) for tp in answer.assignment.topic_partitions}


def owned(version: int, partitions: dict[Any, tuple[int, ...]]) -> tuple[Any, ...]:
    """A heartbeat's topic_partitions: what the member holds."""
    return tuple(
        make(CONSUMER_GROUP_HEARTBEAT, version, "TopicPartitions", topic_id=t, partitions=p)
        for t, p in partitions.items()
    )


def ready(bootstrap: str, groups: Iterable[str], topic: str, partitions: int) -> None:
    """Wait, on a connection of its own, until each group's coordinator answers and knows
    the topic. Kafka creates __consumer_offsets at the first FindCoordinator and loads it
    a moment later; its group coordinator learns of a new topic from the metadata log a
    moment after the broker lists it (a member joining before then is assigned nothing).
    A member of a group of its own joins until it is assigned the topic's partitions,
    then leaves."""
    deadline = time.monotonic() + TIMEOUT
    with RawClient(bootstrap, timeout=TIMEOUT, client_id=SETUP_CLIENT) as setup:

        def settled(api_key: int, version: int, **fields: Any) -> Any:
            while True:
                answer = setup.call(api_key, version, **fields)
                codes = error_codes(plain(answer))
                if not codes & SETTLING:
                    return answer
                assert time.monotonic() < deadline, f"{fields}: still {codes}"
                time.sleep(0.1)

        for group in [*groups, PROBE_GROUP]:
            settled(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
            settled(
                CONSUMER_GROUP_DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False
            )
        probe = {"group_id": PROBE_GROUP, "member_id": f"probe-{topic}"}
        while True:
            joined = settled(
                CONSUMER_GROUP_HEARTBEAT,
                1,
                **probe,
                instance_id=None,
                rack_id=None,
                server_assignor=None,
                subscribed_topic_regex=None,
                **joining((topic,)),
            )
            settled(
                CONSUMER_GROUP_HEARTBEAT,
                1,
                **probe,
                member_epoch=-1,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=NOT_GIVEN,
                subscribed_topic_names=None,
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=None,
            )
            if sum(len(p) for p in assigned(joined).values()) == partitions:
                return
            assert time.monotonic() < deadline, f"the group coordinator does not know {topic}"
            time.sleep(0.1)


GROUP, TOPIC = "diff-cg", "diff-cg-topic"


def consumer_group_v1(bootstrap: str) -> list[str]:
    """Two members (v1, named by the scenario) on a topic of 4 partitions.

    A joins a fresh group: its epoch and all 4 partitions, by topic id. B joins: B's
    answer (its epoch, nothing yet: what it gets is still A's), then A's next heartbeat
    (what it keeps; it stays in its epoch until it has revoked the rest), B waiting, A
    acknowledging by listing what it kept, B handed the rest. Then A's heartbeats with a
    greater epoch and an older one (FENCED_MEMBER_EPOCH), with its previous epoch and a
    subset of its partitions (accepted: the answer that moved it on may have been lost),
    an unknown member (UNKNOWN_MEMBER_ID), B leaving (epoch -1; its answer's heartbeat
    interval is 0), A after B left, A leaving. ConsumerGroupDescribe at each stage (v1;
    v0 once, without member_type): state, epochs, assignor, members' assignments and
    target assignments; and of the group before anyone joined (GROUP_ID_NOT_FOUND).

    Set aside (harness.scripted): member and topic ids, the configured heartbeat interval
    (Kafka 5000 ms, minibroker 500 ms), the text of error messages.
    """
    create(bootstrap, TOPIC, 4)
    ready(bootstrap, [GROUP], TOPIC, 4)
    v = 1
    with Script(bootstrap) as s:
        s.describe("a group nobody joined", 1, GROUP)
        a = s.heartbeat("A joins", v, group_id=GROUP, member_id="member-a", **joining((TOPIC,)))
        a_epoch, a_has = a.member_epoch, assigned(a)
        s.describe("one member", 1, GROUP)
        s.heartbeat(
            "A sends its full state",
            v,
            group_id=GROUP,
            member_id="member-a",
            member_epoch=a_epoch,
            rebalance_timeout=REBALANCE_TIMEOUT,
            subscribed_topic_names=(TOPIC,),
            topic_partitions=owned(v, a_has),
        )
        b = s.heartbeat("B joins", v, group_id=GROUP, member_id="member-b", **joining((TOPIC,)))
        b_epoch = b.member_epoch
        told = s.heartbeat(
            "A hears of B", v, group_id=GROUP, member_id="member-a", member_epoch=a_epoch
        )
        kept = assigned(told) if told.assignment is not None else a_has
        s.describe("A revoking, B waiting", 1, GROUP)
        s.heartbeat(
            "B waits",
            v,
            group_id=GROUP,
            member_id="member-b",
            member_epoch=b_epoch,
            topic_partitions=(),
        )
        revoked = s.heartbeat(
            "A has revoked",
            v,
            group_id=GROUP,
            member_id="member-a",
            member_epoch=a_epoch,
            topic_partitions=owned(v, kept),
        )
        previous_epoch, a_epoch = a_epoch, revoked.member_epoch
        handed = s.heartbeat(
            "B is handed the rest",
            v,
            group_id=GROUP,
            member_id="member-b",
            member_epoch=b_epoch,
            topic_partitions=(),
        )
        b_epoch = handed.member_epoch
        s.describe("stable (v0)", 0, GROUP)
        s.describe("stable", 1, GROUP)
        a_beat = {"group_id": GROUP, "member_id": "member-a", "topic_partitions": owned(v, kept)}
        s.heartbeat("A with a greater epoch", v, **a_beat, member_epoch=a_epoch + 1)
        s.heartbeat("A with an older epoch", v, **a_beat, member_epoch=previous_epoch - 1)
        s.heartbeat(
            "A with its previous epoch, owning a subset", v, **a_beat, member_epoch=previous_epoch
        )
        s.heartbeat(
            "an unknown member", v, group_id=GROUP, member_id="member-z", member_epoch=a_epoch
        )
        s.heartbeat("B leaves", v, group_id=GROUP, member_id="member-b", member_epoch=-1)
        s.describe("B left", 1, GROUP)
        alone = s.heartbeat("A after B left", v, **a_beat, member_epoch=a_epoch)
        s.heartbeat(
            "A owns all",
            v,
            group_id=GROUP,
            member_id="member-a",
            member_epoch=alone.member_epoch,
            topic_partitions=owned(v, assigned(alone) or kept),
        )
        s.describe("A alone", 1, GROUP)
        s.heartbeat("A leaves", v, group_id=GROUP, member_id="member-a", member_epoch=-1)
        s.describe("nobody left", 1, GROUP)
        return s.labels


GROUP_V0, TOPIC_V0 = "diff-cg-v0", "diff-cg-v0-topic"


def consumer_group_v0(bootstrap: str) -> list[str]:
    """Version 0, where the coordinator names a member joining without an id: two members
    on a topic of 2 partitions, a heartbeat naming no member (INVALID_REQUEST), both
    leaving; ConsumerGroupDescribe v0 of the group before, with two members, and empty.

    Set aside (harness.scripted): member ids (the brokers make them: "<member N>" by
    first appearance) and topic ids, the configured heartbeat interval (Kafka 5000 ms,
    minibroker 500 ms), the text of error messages.
    """
    create(bootstrap, TOPIC_V0, 2)
    ready(bootstrap, [GROUP_V0], TOPIC_V0, 2)
    v = 0
    with Script(bootstrap) as s:
        s.describe("a group nobody joined", 0, GROUP_V0)
        a = s.heartbeat("A joins without an id", v, group_id=GROUP_V0, **joining((TOPIC_V0,)))
        a_id, a_epoch = a.member_id or "", a.member_epoch
        s.heartbeat("A heartbeats", v, group_id=GROUP_V0, member_id=a_id, member_epoch=a_epoch)
        s.heartbeat("a heartbeat naming no member", v, group_id=GROUP_V0, member_epoch=a_epoch)
        b = s.heartbeat("B joins without an id", v, group_id=GROUP_V0, **joining((TOPIC_V0,)))
        b_id = b.member_id or ""
        s.heartbeat("A hears of B", v, group_id=GROUP_V0, member_id=a_id, member_epoch=a_epoch)
        s.describe("two members", 0, GROUP_V0)
        s.heartbeat("A leaves", v, group_id=GROUP_V0, member_id=a_id, member_epoch=-1)
        s.heartbeat("B leaves", v, group_id=GROUP_V0, member_id=b_id, member_epoch=-1)
        s.describe("nobody left", 0, GROUP_V0)
        return s.labels


GROUP_REFUSED, TOPIC_REFUSED = "diff-cg-refused", "diff-cg-refused-topic"
CLASSIC_GROUP = "diff-cg-classic"


def consumer_group_refusals(bootstrap: str) -> list[str]:
    """What the coordinator refuses, none of which creates the group:
    INVALID_REQUEST for an empty group id, a join without a rebalance timeout, without a
    subscription or without its (empty) owned partitions, a v1 request with an empty
    member id, a v0 heartbeat (epoch above 0) with none, an empty instance id or rack id,
    an epoch below -2, epoch -2 without an instance id; UNSUPPORTED_ASSIGNOR for a server
    assignor the broker lacks; INVALID_REGULAR_EXPRESSION (v1) for a regex that does not
    compile and one RE2 (Kafka's engine) refuses; GROUP_ID_NOT_FOUND for a heartbeat and
    a leave to a group that is not there, then ConsumerGroupDescribe of it. And a classic
    group with a member (JoinGroup, SyncGroup; protocol type "connect", which a consumer
    group cannot take over): a join and a heartbeat of the consumer protocol to it, and
    ConsumerGroupDescribe v0 and v1 of it (GROUP_ID_NOT_FOUND).

    Set aside (harness.scripted): member ids (JoinGroup's are the broker's), topic ids,
    the text of error messages.
    """
    create(bootstrap, TOPIC_REFUSED, 1)
    ready(bootstrap, [GROUP_REFUSED, CLASSIC_GROUP], TOPIC_REFUSED, 1)
    join = {"group_id": GROUP_REFUSED, "member_id": "member-r", **joining((TOPIC_REFUSED,))}
    with Script(bootstrap) as s:
        s.heartbeat("an empty group id", 1, **{**join, "group_id": ""})
        s.heartbeat(
            "a join without a rebalance timeout", 1, **{**join, "rebalance_timeout": NOT_GIVEN}
        )
        s.heartbeat("a join without a subscription", 1, **{**join, "subscribed_topic_names": None})
        s.heartbeat("a join without owned partitions", 1, **{**join, "topic_partitions": None})
        s.heartbeat("v1 without a member id", 1, **{**join, "member_id": ""})
        s.heartbeat("a v0 heartbeat without a member id", 0, group_id=GROUP_REFUSED, member_epoch=1)
        s.heartbeat("an empty instance id", 1, **{**join, "instance_id": ""})
        s.heartbeat("an empty rack id", 1, **{**join, "rack_id": ""})
        s.heartbeat("an epoch below -2", 1, **{**join, "member_epoch": -3})
        s.heartbeat("epoch -2 without an instance id", 1, **{**join, "member_epoch": -2})
        s.heartbeat(
            "an unsupported server assignor", 1, **{**join, "server_assignor": "cooperative-sticky"}
        )
        by_regex = {**join, "subscribed_topic_names": None}
        s.heartbeat("a regex that does not compile", 1, **by_regex, subscribed_topic_regex="a(b")
        s.heartbeat("a regex RE2 refuses", 1, **by_regex, subscribed_topic_regex="(?=a)b")
        s.heartbeat(
            "a heartbeat to a group that is not there",
            1,
            group_id=GROUP_REFUSED,
            member_id="member-r",
            member_epoch=5,
        )
        s.heartbeat(
            "a leave from a group that is not there",
            1,
            group_id=GROUP_REFUSED,
            member_id="member-r",
            member_epoch=-1,
        )
        s.describe("the refused group", 1, GROUP_REFUSED)

        protocols = (make(JOIN_GROUP, 5, "JoinGroupRequestProtocol", name="p", metadata=b"x"),)
        classic = {
            "group_id": CLASSIC_GROUP,
            "session_timeout": SESSION_TIMEOUT,
            "rebalance_timeout": REBALANCE_TIMEOUT,
            "group_instance_id": None,
            "protocol_type": "connect",
            "protocols": protocols,
        }
        asked = s.send("a classic member asks for an id", JOIN_GROUP, 5, **classic, member_id="")
        joined = s.send(
            "the classic member joins", JOIN_GROUP, 5, **classic, member_id=asked.member_id
        )
        assignment = make(
            SYNC_GROUP, 3, "SyncGroupRequestAssignment", member_id=joined.member_id, assignment=b""
        )
        s.send(
            "the classic member syncs",
            SYNC_GROUP,
            3,
            group_id=CLASSIC_GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            assignments=(assignment,),
        )
        s.heartbeat(
            "a consumer-protocol join to the classic group",
            1,
            **{**join, "group_id": CLASSIC_GROUP},
        )
        s.heartbeat(
            "a consumer-protocol heartbeat to the classic group",
            1,
            group_id=CLASSIC_GROUP,
            member_id="member-r",
            member_epoch=1,
        )
        s.describe("the classic group (v0)", 0, CLASSIC_GROUP)
        s.describe("the classic group", 1, CLASSIC_GROUP)
        return s.labels


RAW_SCENARIOS: dict[str, Callable[[str], list[str]]] = {
    "consumer_group_v1": consumer_group_v1,
    "consumer_group_v0": consumer_group_v0,
    "consumer_group_refusals": consumer_group_refusals,
}
