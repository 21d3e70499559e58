"""A thin driver per client for the share group scenarios (test_share_scenarios.py): how
each client joins a share group, polls a batch, acknowledges records (accept, release,
reject; explicitly, or implicitly on the next poll), commits its acknowledgements and
closes, and the delivery count of a record where the client exposes it.

confluent-kafka's ShareConsumer runs in-process. Kafka's Java KafkaShareConsumer
(tests/interop/jvm/share/ShareDriver.java) and franz-go's share consumer
(tests/interop/go/share) run as child processes speaking one line protocol on stdin and
stdout (a command per line, a JSON answer per line), so a test can also kill them.
The share group offset calls (list, alter, delete) go through the Java Admin, as
confluent-kafka 2.16.1's AdminClient has none.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from harness.raw_client import RawClient
from tests.interop.test_client_matrix import Built, Driver

AckKind = Literal["accept", "release", "reject"]
INTEROP = Path(__file__).resolve().parents[1] / "interop"
# Records a consumer takes in one poll: small, so that several consumers on one partition
# each get a share of a few hundred records.
MAX_POLL_RECORDS = 20
ANSWER_TIMEOUT = 60.0  # seconds for a driver process to answer one command

JAVA_DRIVER = Driver("java-share", "java", "jvm/share", "ShareDriver", java_line="4")
GO_DRIVER = Driver("franz-go-share", "go", "go/share", "share")


@dataclass(frozen=True)
class Delivery:
    partition: int
    offset: int
    value: str
    delivery_count: int | None  # None where the client does not expose it


class ShareMember(Protocol):
    def poll(self, timeout: float) -> list[Delivery]:
        """One poll: the records acquired for this member (in implicit mode, the previous
        poll's records are accepted by it)."""
        ...

    def acknowledge(self, delivery: Delivery, kind: AckKind) -> None:
        """Explicit mode: how the broker is to treat the record, sent on commit or poll."""
        ...

    def commit(self) -> dict[int, str]:
        """Send the pending acknowledgements and wait: partition -> error, for failures."""
        ...

    def close(self) -> None:
        """Leave the group cleanly (pending acknowledgements are sent)."""
        ...

    def kill(self) -> None:
        """Leave without acknowledging anything more: the process is killed where the
        client runs in one; in-process, closed with the batch unacknowledged."""
        ...


class ShareClient(Protocol):
    name: ClassVar[str]

    def member(self, bootstrap: str, topic: str, group: str, *, explicit: bool) -> ShareMember: ...


# --- confluent-kafka (librdkafka), in-process ---


class ConfluentShareMember:
    def __init__(self, bootstrap: str, topic: str, group: str, explicit: bool) -> None:
        from confluent_kafka import ShareConsumer

        self.topic = topic
        self.consumer = ShareConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": "explicit" if explicit else "implicit",
                "max.poll.records": MAX_POLL_RECORDS,
                "log_level": 3,
            }
        )
        self.consumer.subscribe([topic])
        self.closed = False

    def poll(self, timeout: float) -> list[Delivery]:
        got: list[Delivery] = []
        for message in self.consumer.poll(timeout):
            assert message.error() is None, message.error()
            value = message.value()
            got.append(
                Delivery(
                    message.partition(),
                    message.offset(),
                    value.decode() if value is not None else "",
                    message.delivery_count(),
                )
            )
        return got

    def acknowledge(self, delivery: Delivery, kind: AckKind) -> None:
        from confluent_kafka import AcknowledgeType

        ack_type = {
            "accept": AcknowledgeType.ACCEPT,
            "release": AcknowledgeType.RELEASE,
            "reject": AcknowledgeType.REJECT,
        }[kind]
        self.consumer.acknowledge_offset(self.topic, delivery.partition, delivery.offset, ack_type)

    def commit(self) -> dict[int, str]:
        results = self.consumer.commit_sync(30.0)
        return {tp.partition: str(error) for tp, error in results.items() if error is not None}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()

    def kill(self) -> None:
        self.close()


class ConfluentShare:
    name = "confluent-kafka"

    def member(
        self, bootstrap: str, topic: str, group: str, *, explicit: bool
    ) -> ConfluentShareMember:
        return ConfluentShareMember(bootstrap, topic, group, explicit)


# --- the Java client and franz-go: child processes on the line protocol ---


class LineDriverProcess:
    """A driver program answering one JSON line per command line."""

    def __init__(self, command: Sequence[str]) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.answers: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read_answers, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.answers.put(line)
        self.answers.put(None)

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)
            del self.errors[:-40]

    def send(self, *words: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            line = self.answers.get(timeout=ANSWER_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None:
            raise AssertionError(f"the driver did not answer: {''.join(self.errors)[-3000:]}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"the driver failed: {answer['error']}")
        return answer

    def ask(self, *words: object) -> dict[str, Any]:
        self.send(*words)
        return self.answer()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.ask("close")
                self.process.wait(30)
            finally:
                self.kill()


class ProcessShareMember:
    def __init__(self, command: Sequence[str], topic: str) -> None:
        self.driver = LineDriverProcess(command)
        self.driver.ask("subscribe", topic)

    def poll(self, timeout: float) -> list[Delivery]:
        return self.collect(self.start_poll(timeout))

    def start_poll(self, timeout: float) -> float:
        """Send a poll without waiting for it, so that several processes poll at once."""
        self.driver.send("poll", int(timeout * 1000))
        return timeout

    def collect(self, _timeout: float) -> list[Delivery]:
        answer = self.driver.answer()
        return [Delivery(p, o, v, count) for p, o, v, count in answer["records"]]

    def acknowledge(self, delivery: Delivery, kind: AckKind) -> None:
        self.driver.ask("ack", delivery.partition, delivery.offset, kind)

    def commit(self) -> dict[int, str]:
        errors = self.driver.ask("commit")["errors"]
        return {int(p): str(e) for p, e in errors.items()}

    def close(self) -> None:
        self.driver.close()

    def kill(self) -> None:
        self.driver.kill()


class ProcessShareClient:
    name: ClassVar[str]
    driver: ClassVar[Driver]

    def __init__(self, built: Built) -> None:
        self.command = built.command(self.driver)

    def member(
        self, bootstrap: str, topic: str, group: str, *, explicit: bool
    ) -> ProcessShareMember:
        mode = "explicit" if explicit else "implicit"
        return ProcessShareMember(
            [*self.command, "-bootstrap", bootstrap, "-group", group, "-mode", mode], topic
        )


class JavaShare(ProcessShareClient):
    name = "java"
    driver = JAVA_DRIVER


class FranzGoShare(ProcessShareClient):
    name = "franz-go"
    driver = GO_DRIVER


SHARE_CLIENTS = ("confluent-kafka", "java", "franz-go")


def share_client(name: str, built: Built) -> ShareClient:
    if name == "confluent-kafka":
        return ConfluentShare()
    if name == "java":
        return JavaShare(built)
    if name == "franz-go":
        return FranzGoShare(built)
    raise ValueError(name)


# --- share group offsets through the Java Admin ---


class ShareGroupAdmin:
    """Admin.listShareGroupOffsets / alterShareGroupOffsets / deleteShareGroupOffsets."""

    def __init__(self, built: Built, bootstrap: str, group: str) -> None:
        command = built.command(JAVA_DRIVER)
        self.driver = LineDriverProcess([*command, "-bootstrap", bootstrap, "-group", group])

    def start_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int | None]:
        found = self.driver.ask("list-offsets", topic, *partitions)["offsets"]
        return {int(p): offset for p, offset in found.items()}

    def alter(self, topic: str, offsets: dict[int, int]) -> None:
        self.driver.ask("alter-offsets", topic, *(f"{p}={o}" for p, o in offsets.items()))

    def delete(self, topic: str) -> None:
        self.driver.ask("delete-offsets", topic)

    def close(self) -> None:
        self.driver.close()


# --- a group made ready ---

SHARE_GROUP_HEARTBEAT, FIND_COORDINATOR = 76, 10
READY_TIMEOUT = 20.0
SETTLING = frozenset({14, 15, 16})  # the coordinator loading, not available, not this broker


def share_group_ready(bootstrap: str, group: str, topic: str) -> None:
    """A member of `group` heartbeats (raw ShareGroupHeartbeat requests, a few a second)
    until it is assigned `topic`, then leaves: the broker has initialised the group's
    share-partition state. Kafka does that a moment after a new group's first member
    joins, assigning nothing until then, and its clients hear of the assignment at their
    next heartbeat (5 s at the least): a group made ready first spares each scenario
    that wait."""
    deadline = time.monotonic() + READY_TIMEOUT
    member = uuid.uuid4().hex[:22]
    with RawClient(bootstrap, timeout=READY_TIMEOUT, client_id="share-ready") as setup:
        # Kafka creates __consumer_offsets at the first FindCoordinator and loads it a
        # moment later; until then its group coordinator answers NOT_COORDINATOR.
        while any(
            found.error_code
            for found in setup.call(
                FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,)
            ).coordinators
        ):
            assert time.monotonic() < deadline, f"no coordinator for {group}"
            time.sleep(0.1)
        epoch = 0
        while True:
            answer = setup.call(
                SHARE_GROUP_HEARTBEAT,
                1,
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                rack_id=None,
                subscribed_topic_names=(topic,) if epoch == 0 else None,
            )
            code = int(answer.error_code)
            assert code in SETTLING or code == 0, f"the probe member was refused: {code}"
            if code == 0:
                epoch = answer.member_epoch
                if answer.assignment is not None and answer.assignment.topic_partitions:
                    break
            assert time.monotonic() < deadline, f"{group} was never assigned {topic}"
            time.sleep(0.2)
        setup.call(
            SHARE_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=member,
            member_epoch=-1,
            rack_id=None,
            subscribed_topic_names=None,
        )
