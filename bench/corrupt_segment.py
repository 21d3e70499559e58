"""One flipped byte in an old segment after kill -9: how many acknowledged records a
restarted broker serves.

    python -m bench.corrupt_segment [--segments 50] [--damaged 2] [--records-per-segment 40]
        [--stop kill|clean] [--damage flip|length] [--no-recovery-point]

A broker in a child process (flush policy `write`) takes one-record batches until the
partition has --segments segments, is killed with SIGKILL (or stopped cleanly), a batch
in the middle of segment --damaged (1 = the first) is damaged (one byte under its CRC
flipped, or its length field made 1000 bytes longer), and a broker started again on the
directory is read from its start to its end, twice. Printed: records acknowledged,
records served, the log end before and after, and the broker's log lines about it.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.child_broker import ChildBroker
from minibroker.protocol.records import split_batches

TOPIC = "scenario"
TIMEOUT = 30.0
VALUE = b"x" * 100


def _fill(broker: ChildBroker, segments: int, per_segment: int) -> dict[int, bytes]:
    batch_bytes = 61 + 8 + len(VALUE) + 10  # header, record framing, value
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"segment.bytes": str(batch_bytes * per_segment), "retention.ms": "-1"}
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)]).values():
        future.result(TIMEOUT)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1}
    )
    acknowledged: dict[int, bytes] = {}

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is None:
            acknowledged[message.offset()] = message.value()

    for number in range(segments * per_segment):
        producer.produce(TOPIC, b"%08d" % number + VALUE, on_delivery=delivered)
        if number % 50 == 49:
            producer.flush(TIMEOUT)
    producer.flush(TIMEOUT)
    return acknowledged


def _served(bootstrap: str) -> tuple[int, int, list[str]]:
    """Records read from the start to the end (past an error, an application skips the
    record it names, as batches here hold one); the log end; the errors met."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), TIMEOUT)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        served, last, errors = 0, -1, []
        idle_until = time.monotonic() + 5
        while last + 1 < high and time.monotonic() < idle_until and len(errors) < 10:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(str(message.error()))
                last += 1  # the record it failed at: skipped
                consumer.seek(TopicPartition(TOPIC, 0, last + 1))
                continue
            served, last = served + 1, message.offset()
            idle_until = time.monotonic() + 5
        if last + 1 < high:
            errors.append(f"stalled at offset {last + 1}")
        return served, high, errors
    finally:
        consumer.close()


def _restart(scratch: str) -> tuple[int, int, list[str], list[str]]:
    log_file = Path(tempfile.mkdtemp()) / "broker.log"
    restarted = ChildBroker(data_dir=scratch, log_level="INFO", stderr=log_file).start()
    try:
        served, log_end, errors = _served(restarted.bootstrap)
    finally:
        restarted.stop()
    wanted = ("corrupt", "unfinished", "recovery point", "batch by batch")
    lines = [line for line in restarted.log_lines() if any(w in line for w in wanted)]
    return served, log_end, errors, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=50)
    parser.add_argument("--damaged", type=int, default=2)
    parser.add_argument("--records-per-segment", type=int, default=40)
    parser.add_argument("--stop", choices=["kill", "clean"], default="kill")
    parser.add_argument("--damage", choices=["flip", "length"], default="flip")
    parser.add_argument("--no-recovery-point", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        broker = ChildBroker(data_dir=scratch, log_flush="write").start()
        try:
            acknowledged = _fill(broker, args.segments, args.records_per_segment)
            if args.stop == "kill":
                os.kill(broker.pid, signal.SIGKILL)
                assert broker.process is not None
                broker.process.wait(10)
            else:
                broker.stop()
        finally:
            broker.kill()
        [directory] = Path(scratch, "logs").glob("*/0")
        files = sorted(directory.glob("*.log"))
        segment = files[args.damaged - 1]
        data = bytearray(segment.read_bytes())
        batches = split_batches(bytes(data))
        position = sum(len(batch) for _h, batch in batches[: len(batches) // 2])
        if args.damage == "flip":
            data[position + 40] ^= 0x01  # under the CRC
        else:
            length = int.from_bytes(data[position + 8 : position + 12], "big")
            data[position + 8 : position + 12] = (length + 1000).to_bytes(4, "big")
        if args.no_recovery_point:
            for name in ("recovery-point", "checkpoint"):
                (directory / name).unlink(missing_ok=True)
        segment.write_bytes(bytes(data))
        damaged_offset = batches[len(batches) // 2][0].base_offset
        print(f"segments {len(files)}, {args.damage} in segment {args.damaged}", end="")
        print(f" (offset {damaged_offset})")
        print(f"acknowledged {len(acknowledged)}, log end before {max(acknowledged) + 1}")
        for attempt in ("first restart", "second restart"):
            served, log_end, errors, lines = _restart(scratch)
            print(f"{attempt}: served {served}, log end {log_end}, errors {errors or 'none'}")
            for line in lines:
                print("  " + line.strip())


if __name__ == "__main__":
    main()
