"""What the Python drivers of the client matrix share: flags, the report, steps, the run.

tests/interop/SCENARIOS.md is the catalogue each driver follows; this module keeps the
bookkeeping (which steps were done, which skipped and why) the same for every driver.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

PARTITIONS = 3
RETENTION_MS = "3600000"
RUN_LIMIT = 60.0  # seconds: a driver that has not finished by then fails its run
LATE_INTERVAL = 0.2  # seconds between the late messages of the from_latest step
LATE_MESSAGES = 100
CONFIG_RETRIES = 100  # a real Kafka describes a new topic a moment after creating it
TXN_KEYS = 5  # records each transaction of the transactions step sends
TXN_OFFSET = 1  # the offset of T's partition 0 the committed transaction sends


@dataclass(frozen=True)
class Flags:
    bootstrap: str
    topic: str
    group: str
    messages: int
    extra: Mapping[str, str | None] = field(default_factory=dict)  # a driver's own flags


class StepFailed(Exception):
    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"{step}: {type(cause).__name__}: {cause}")


class Scenario:
    """The report one run fills in, step by step."""

    def __init__(
        self,
        client: str,
        version: str,
        argv: list[str] | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.flags = parse_flags(sys.argv[1:] if argv is None else argv, extra)
        count = self.flags.messages
        self.keys = [f"key-{i:03d}" for i in range(count)]
        # A second-rounded wall clock a little in the past: within any retention.
        self.base_timestamp = (int(time.time()) - count - 60) * 1000
        self.report: dict[str, Any] = {
            "client": client,
            "version": version,
            "steps": [],
            "skipped": {},
            "base_timestamp": self.base_timestamp,
        }

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        try:
            yield
        except StepFailed:
            raise
        except Exception as exc:
            raise StepFailed(name, exc) from exc
        self.report["steps"].append(name)

    def done(self, *names: str) -> None:
        """Steps carried out as part of another (headers and timestamps with produce)."""
        self.report["steps"].extend(names)

    def skip(self, name: str, reason: str) -> None:
        self.report["skipped"][name] = reason
        if name == "timestamps":
            # The messages do not carry the create times base_timestamp stands for.
            self.report.pop("base_timestamp", None)

    def timestamp(self, index: int) -> int:
        return self.base_timestamp + 1000 * index

    def time_target(self) -> int:
        return self.timestamp(self.flags.messages // 2)

    def record(
        self,
        key: str,
        value: bytes | None,
        partition: int,
        offset: int,
        timestamp: int,
        headers: list[tuple[str, bytes]] | None,
    ) -> None:
        self.report.setdefault("consumed", {})[key] = {
            "value": (value or b"").decode(),
            "partition": partition,
            "offset": offset,
            "timestamp": timestamp,
            "headers": {name: data.decode() for name, data in headers or []},
        }

    def finish(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)  # no unwind (watchdog) once the run is done
        sys.stdout.write(json.dumps(self.report, sort_keys=True) + "\n")
        sys.stdout.flush()


def parse_flags(argv: list[str], extra: tuple[str, ...] = ()) -> Flags:
    """Go-style flags, as every driver of the matrix takes them; `extra` names a driver's
    own optional ones."""
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "group"):
        parser.add_argument(f"-{name}", f"--{name}", required=True)
    parser.add_argument("-messages", "--messages", type=int, default=30)
    for name in extra:
        parser.add_argument(f"-{name}", f"--{name}", dest=name)
    parsed = parser.parse_args(argv)
    own = {name: getattr(parsed, name) for name in extra}
    return Flags(parsed.bootstrap, parsed.topic, parsed.group, parsed.messages, own)


def watchdog(client: str, unwind: float = 0.0) -> None:
    """End the process if the run outlives RUN_LIMIT: a hung client fails, never hangs.

    With `unwind`, that many seconds earlier the main thread gets a TimeoutError (from
    SIGALRM), so that its `finally` clauses stop the processes it started.
    """
    if unwind:

        def interrupt(signum: int, frame: Any) -> None:
            raise TimeoutError(f"not finished within {RUN_LIMIT - unwind:g} s")

        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, RUN_LIMIT - unwind)

    def expire() -> None:
        sys.stderr.write(f"{client}-scenarios: timeout: not finished within {RUN_LIMIT} s\n")
        sys.stderr.flush()
        os._exit(2)

    timer = threading.Timer(RUN_LIMIT, expire)
    timer.daemon = True
    timer.start()


def fail(client: str, error: BaseException) -> int:
    sys.stderr.write(f"{client}-scenarios: {error}\n")
    return 1


def covers_all(assignments: Sequence[Collection[int]]) -> bool:
    """Each member holds something and together they hold every partition exactly once."""
    flat = [partition for held in assignments for partition in held]
    return all(assignments) and sorted(flat) == list(range(PARTITIONS))


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s")
        time.sleep(interval)


def drive(client: str, version: str, body: Callable[[Scenario], None]) -> int:
    """A driver's whole run: the watchdog, the steps, the report or the failed step."""
    watchdog(client)
    run = Scenario(client, version)
    try:
        body(run)
    except StepFailed as failed:
        return fail(client, failed)
    run.finish()
    return 0


class Member(Protocol):
    """A group member that keeps its current assignment up to date on its own."""

    held: set[int]

    def stop(self) -> None: ...


def rebalance(join: Callable[[], Member]) -> tuple[list[list[int]], list[list[int]]]:
    """The rebalance step: two members, then a third; each group's settled assignments."""
    members = [join(), join()]
    try:
        wait_until(lambda: covers_all([m.held for m in members]), 30, "two members assigned")
        two = [sorted(m.held) for m in members]
        members.append(join())
        wait_until(lambda: covers_all([m.held for m in members]), 30, "three members assigned")
        three = [sorted(m.held) for m in members]
    finally:
        for member in members:
            member.stop()
    return two, three


def read_late(send: Callable[[str], None], poll: Callable[[], list[str]]) -> list[str]:
    """The from_latest step once its consumer is up: `send` a late message every
    LATE_INTERVAL until `poll` (a short read) returns keys."""
    keys: list[str] = []
    sent, next_send = 0, time.monotonic()
    while not keys:
        if time.monotonic() >= next_send:
            if sent == LATE_MESSAGES:
                raise TimeoutError(f"none of {sent} late messages was read")
            send(f"late-{sent:03d}")
            sent, next_send = sent + 1, time.monotonic() + LATE_INTERVAL
        keys = poll()
    return keys


def txn_keys(kind: str) -> list[str]:
    """The keys one transaction of the transactions step sends: `txn-<kind>-000`, ..."""
    return [f"txn-{kind}-{i:03d}" for i in range(TXN_KEYS)]
