"""The client matrix's scenario with kcat: SCENARIOS.md's steps, each action a run of the
kcat binary.

    python kcat_driver.py -bootstrap HOST:PORT -topic T -group G -messages N [-kcat PATH]

kcat cannot create topics, so T must already exist with 3 partitions.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from scenario import (
    LATE_INTERVAL,
    LATE_MESSAGES,
    PARTITIONS,
    Scenario,
    StepFailed,
    covers_all,
    fail,
    watchdog,
)

CLIENT = "kcat"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
UNWIND = 3.0  # seconds before the run limit: the kcat processes are stopped, not orphaned
RUN_TIMEOUT = 20  # seconds for one kcat process
REBALANCE_TIMEOUT = 25  # seconds for a group to settle
SETTLE = 0.5  # seconds an assignment must hold before it counts
SKIPPED = {
    "create_topic": "kcat has no command to create topics",
    "describe_configs": "kcat has no command to read topic configs",
    "timestamps": "kcat's producer has no option to set a message's create time",
    "committed": "kcat has no command to read a group's committed offsets",
    "list_groups": "kcat has no command to list groups",
    "describe_group": "kcat has no command to describe a group",
    "rebalance_consumer_protocol": "the driver's kcat group members (-G) use the classic protocol",
    "transactions": "kcat's producer has no transactional mode",
    "transaction_offsets": "kcat's producer has no transactional mode",
    "fencing": "kcat's producer has no transactional mode",
    "delete_topic": "kcat has no command to delete topics",
}
DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
# librdkafka's msg debug names the codec each batch went out with; it sends a batch
# uncompressed when compressing does not shrink it (one small message never shrinks).
SENT = re.compile(r"Produce MessageSet with \d+ message\(s\) \(.*, (\w+)\)$", re.MULTILINE)
QUERIED = re.compile(r"^(.*) \[(\d+)\] offset (-?\d+)$")
REBALANCED = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")


def main() -> int:
    # kcat processes stop when the main thread unwinds, which os._exit would skip.
    watchdog(CLIENT, unwind=UNWIND)
    run = Scenario(CLIENT, "unknown", extra=("kcat",))
    binary = run.flags.extra["kcat"] or shutil.which("kcat") or "/usr/bin/kcat"
    kcat = Kcat(binary, run.flags.bootstrap)
    run.report["version"] = kcat.version()
    try:
        scenario(run, kcat)
    except StepFailed as failed:
        return fail(CLIENT, failed)
    run.finish()
    return 0


def scenario(run: Scenario, kcat: Kcat) -> None:
    flags, report = run.flags, run.report
    topic, group = flags.topic, flags.group
    for name, reason in SKIPPED.items():
        run.skip(name, reason)

    # kcat's -H applies to every message of a run, so each message is its own run.
    with run.step("produce"):
        produced, codecs = {}, set()
        for index, key in enumerate(run.keys):
            codec = CODECS[index % len(CODECS)]
            header = f"origin=header-{key}"
            produced[key], sent = kcat.produce_one(
                topic, key, f"value-{key}", "-z", codec, "-H", header
            )
            codecs |= sent
        report["produced"] = produced
        report["codecs"] = sorted(codecs)  # what went over the wire, not what -z asked for
        report["partitioner"] = "crc32"  # librdkafka's default, consistent_random
    run.done("headers", "keyed")

    with run.step("consume_group"):
        # -G joins the group; auto commit commits what was read when the consumer closes at -e.
        messages = kcat.read(
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "enable.auto.commit=true",
            topic,
        )
        consumed = report.setdefault("consumed", {})
        for message in messages:
            keep(run, message)
        if len(messages) != flags.messages or len(consumed) != flags.messages:
            raise RuntimeError(f"read {len(messages)} messages, expected {flags.messages}")

    with run.step("list_offsets"):
        report["oldest"] = kcat.query(topic, -2)
        report["newest"] = kcat.query(topic, -1)

    with run.step("offsets_for_time"):
        # Without create times of its own, the median of the ones the broker gave.
        timestamps = sorted(record["timestamp"] for record in consumed.values())
        target = timestamps[len(timestamps) // 2]
        report["time_target"] = target
        report["offsets_for_time"] = kcat.query(topic, target)

    with run.step("from_timestamp"):
        after = kcat.read("-C", "-t", topic, "-o", f"s@{target}")
        report["from_timestamp"] = [message["key"] for message in after]

    with run.step("from_latest"):
        report["from_latest"] = from_latest(kcat, topic)

    with run.step("rebalance"):
        report["group_of_two"], report["group_of_three"] = rebalance(kcat, f"{group}-trio", topic)


def keep(run: Scenario, message: dict[str, Any]) -> None:
    flat = message.get("headers") or []
    pairs = zip(flat[::2], flat[1::2], strict=True)
    payload = message["payload"]
    run.record(
        message["key"],
        None if payload is None else payload.encode(),
        message["partition"],
        message["offset"],
        message["ts"],
        [(name, (value or "").encode()) for name, value in pairs],
    )


class Kcat:
    def __init__(self, binary: str, bootstrap: str) -> None:
        self.binary = binary
        self.bootstrap = bootstrap

    def command(self, *args: str) -> list[str]:
        return [self.binary, "-b", self.bootstrap, "-m", "10", *args]

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                self.command(*args),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
        except subprocess.TimeoutExpired as timeout:
            raise TimeoutError(f"kcat {' '.join(args)} timed out: {timeout.stderr!r}") from None
        if done.returncode != 0:
            raise RuntimeError(
                f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}"
            )
        return done

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def version(self) -> str:
        done = subprocess.run([self.binary, "-V"], capture_output=True, text=True, timeout=10)
        found = re.search(r"Version (\S+) .*librdkafka (\S+)", done.stdout + done.stderr)
        return f"{found[1]} (librdkafka {found[2]})" if found else "unknown"

    def produce_one(self, topic: str, key: str, value: str, *args: str) -> tuple[int, set[str]]:
        """Produces one keyed message: the partition its delivery report names, the codecs
        its batches went out with."""
        # -v -v prints each delivery report, -d msg each batch; -K : splits the key off.
        done = self.run(
            "-P",
            "-t",
            topic,
            "-K",
            ":",
            "-X",
            "acks=all",
            "-v",
            "-v",
            "-d",
            "msg",
            *args,
            stdin=f"{key}:{value}\n",
        )
        reports = DELIVERED.findall(done.stderr)
        if len(reports) != 1:
            raise RuntimeError(f"{key}: no delivery report in {done.stderr!r}")
        sent = {"none" if codec == "uncompressed" else codec for codec in SENT.findall(done.stderr)}
        return int(reports[0][0]), sent

    def query(self, topic: str, timestamp: int) -> dict[int, int]:
        """-Q: each partition's offset for a time (-2 oldest, -1 newest)."""
        args = ["-Q"]
        for partition in range(PARTITIONS):
            args += ["-t", f"{topic}:{partition}:{timestamp}"]
        done = self.run(*args)
        found = {}
        for line in done.stdout.splitlines():
            matched = QUERIED.match(line.strip())
            if matched and matched[1] == topic:
                found[int(matched[2])] = int(matched[3])
        if sorted(found) != list(range(PARTITIONS)):
            raise RuntimeError(f"partitions missing from {done.stdout!r}")
        return found

    def read(self, *args: str) -> list[dict[str, Any]]:
        """Consumes with a JSON envelope per message until every partition's end (-e)."""
        done = self.run(*args, "-e", "-J")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


class Member:
    """One kcat -G process; follows its assignment from what kcat prints on stderr."""

    def __init__(self, kcat: Kcat, group: str, topic: str) -> None:
        self.process = kcat.start(
            "-G",
            group,
            "-X",
            "heartbeat.interval.ms=500",
            "-X",
            "session.timeout.ms=10000",
            "-X",
            "auto.offset.reset=latest",
            topic,
        )
        self.assigned: list[int] = []
        self.log: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._follow, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _follow(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self.lock:
                self.log.append(line)
                found = REBALANCED.search(line)
                if found is None:
                    continue
                partitions = [int(p) for p in re.findall(r"\[(\d+)\]", found[2])]
                if found[1] == "assigned":
                    self.assigned = sorted(partitions)
                else:
                    self.assigned = []

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for _ in self.process.stdout:
            pass

    def assignment(self) -> list[int]:
        with self.lock:
            return list(self.assigned)

    def stop(self) -> None:
        if self.process.poll() is None:
            # kcat closes its consumer on SIGTERM, which leaves the group.
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError("a kcat -G member did not leave on SIGTERM") from None


def settled(members: list[Member], expected: Callable[[list[list[int]]], bool]) -> list[list[int]]:
    """Waits until `expected(assignments)` holds for SETTLE seconds running."""
    deadline = time.monotonic() + REBALANCE_TIMEOUT
    since = None
    while time.monotonic() < deadline:
        for member in members:
            if member.process.poll() is not None:
                raise RuntimeError(f"a member exited: {''.join(member.log)[-2000:]}")
        assignments = [member.assignment() for member in members]
        if expected(assignments):
            since = since or time.monotonic()
            if time.monotonic() - since >= SETTLE:
                return assignments
        else:
            since = None
        time.sleep(0.05)
    seen = [member.assignment() for member in members]
    raise TimeoutError(f"assignments did not settle, last {seen}")


def rebalance(kcat: Kcat, group: str, topic: str) -> tuple[list[list[int]], list[list[int]]]:
    members = [Member(kcat, group, topic), Member(kcat, group, topic)]
    try:
        two = settled(members, covers_all)
        members.append(Member(kcat, group, topic))
        three = settled(members, lambda got: covers_all(got) and all(len(a) == 1 for a in got))
    finally:
        for member in members:
            member.stop()
    return two, three


def from_latest(kcat: Kcat, topic: str) -> list[str]:
    """A consumer at the end (-o end); late messages every LATE_INTERVAL until it reads one."""
    reader = kcat.start("-C", "-t", topic, "-o", "end", "-J", "-u", "-q")
    lines: queue.Queue[str] = queue.Queue()

    def collect() -> None:
        assert reader.stdout is not None
        for line in reader.stdout:
            if line.strip():
                lines.put(line)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    read: list[str] = []
    start = time.monotonic()
    try:
        for i in range(LATE_MESSAGES):
            key = f"late-{i:03d}"
            kcat.produce_one(topic, key, f"value-{key}")
            wait = start + LATE_INTERVAL * (i + 1) - time.monotonic()
            try:
                read.append(json.loads(lines.get(timeout=max(wait, 0.01)))["key"])
                break
            except queue.Empty:
                continue
    finally:
        reader.send_signal(signal.SIGTERM)
        try:
            reader.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reader.kill()
            reader.wait()
    collector.join(timeout=5)
    while not lines.empty():
        read.append(json.loads(lines.get())["key"])
    if not read:
        raise RuntimeError("the consumer at the end read nothing")
    return read


if __name__ == "__main__":
    raise SystemExit(main())
