"""A producer over its client quota: how closely its rate follows producer_byte_rate.

Each broker (minibroker and Apache Kafka 4.4.0, each in a child process, bench/runner.py)
gets a producer_byte_rate quota for one client id; a confluent-kafka producer with that
client id sends 1,000-byte values as fast as it may for the run's length. Reported: the
acknowledged payload bytes per second over the whole run and after its first
STEADY_AFTER_S seconds (the rate window of 11 one-second samples is full by then, and
the first window's allowance spent), each as a ratio of the quota, the throttle events
librdkafka reported (`throttle_cb`) and the largest throttle time. Kafka counts whole
request bytes, so the payload rate sits a little under the quota on both.

    python -m bench.quotas            # 45 s per broker
    python -m bench.quotas --quick    # 30 s per broker
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Producer

from bench.harness import (
    QUIET,
    ROOT,
    bench_parser,
    client_version,
    load_average,
    log,
    run_heading,
    server,
    timed,
    write_results,
)
from harness.raw_client import RawClient, make

QUOTA = 256 * 1024  # producer_byte_rate, bytes per second
VALUE = b"q" * 1000
KINDS = {"minibroker": "minibroker", "kafka": "Apache Kafka 4.4.0"}
RESULTS = ROOT / "bench" / "QUOTAS_RESULTS.md"
STEADY_AFTER_S = 15.0
# Requests of at most 64 KB (a quarter second of the quota each), and no more than 2 MB
# waiting in the producer, so the run's end does not wait for a long queue.
PRODUCER = {"linger.ms": 5, "batch.size": 64 * 1024, "queue.buffering.max.kbytes": 2048}


@dataclass
class Run:
    whole_rate: float  # payload bytes/s acknowledged over the run
    steady_rate: float  # the same after STEADY_AFTER_S
    throttle_events: int
    max_throttle_ms: float
    failed: int  # records the broker refused or the producer gave up on


def set_quota(bootstrap: str, client_id: str, rate: float) -> None:
    """Set producer_byte_rate for `client_id` and wait until the broker describes it."""
    with RawClient(bootstrap) as client:
        entity = (make(49, 1, "EntityData", entity_type="client-id", entity_name=client_id),)
        op = make(49, 1, "OpData", key="producer_byte_rate", value=rate, remove=False)
        entry = make(49, 1, "EntryData", entity=entity, ops=(op,))
        client.call(49, 1, entries=(entry,), validate_only=False)
        component = make(
            48, 1, "ComponentData", entity_type="client-id", match_type=0, match=client_id
        )
        deadline = time.monotonic() + 30
        while not client.call(48, 1, components=(component,), strict=True).entries:
            if time.monotonic() > deadline:
                raise RuntimeError("the quota never showed")
            time.sleep(0.1)


def throttled_run(bootstrap: str, topic: str, seconds: float) -> Run:
    client_id = f"bench-quota-{uuid.uuid4().hex[:8]}"
    set_quota(bootstrap, client_id, QUOTA)
    acked: list[float] = []  # when each record was acknowledged
    failed = 0
    throttles: list[float] = []

    def delivered(err: object, _msg: object) -> None:
        nonlocal failed
        if err is None:
            acked.append(time.perf_counter())
        else:
            failed += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            **PRODUCER,
            "throttle_cb": lambda event: throttles.append(event.throttle_time * 1000),
            **QUIET,
        }
    )
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    # Only what was acknowledged within the run counts; what is still queued is dropped.
    ended = started + seconds
    in_run = [at for at in acked if at <= ended]
    steady = [at for at in in_run if at > started + STEADY_AFTER_S]
    refused = failed
    producer.purge()
    producer.flush(30)
    return Run(
        whole_rate=len(in_run) * len(VALUE) / seconds,
        steady_rate=len(steady) * len(VALUE) / (seconds - STEADY_AFTER_S),
        throttle_events=len(throttles),
        max_throttle_ms=max(throttles, default=0.0),
        failed=refused,
    )


def measure(kind: str, seconds: float) -> Run:
    with server(kind) as broker:
        topic = f"quotas-{uuid.uuid4().hex[:6]}"
        broker.create_topic(topic, 1)
        return throttled_run(broker.bootstrap, topic, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("quotas", __doc__ or "", "30 s per broker instead of 45")
    parser.add_argument("--no-kafka", action="store_true", help="leave out Apache Kafka")
    options = parser.parse_args(argv)
    seconds = 30.0 if options.quick else 45.0
    kinds = ["minibroker"] if options.no_kafka else list(KINDS)
    runs = {}
    for kind in kinds:
        log(f"{KINDS[kind]}: producing over a {QUOTA} B/s quota for {seconds:g} s")
        runs[kind] = timed(lambda kind=kind: measure(kind, seconds))  # type: ignore[misc]
    command = "python -m bench.quotas" + (" --quick" if options.quick else "")
    lines = [
        "# A producer over its client quota",
        "",
        f"{run_heading(command, 'quick run' if options.quick else 'full run')}; "
        f"producer_byte_rate {QUOTA} B/s for one client id, 1,000-byte values, "
        f"{client_version()}, load {load_average()}.",
        "",
        f"| broker | payload B/s (run) | / quota | payload B/s (after {STEADY_AFTER_S:g} s) "
        "| / quota | throttle events | max throttle ms | refused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, result in runs.items():
        run = result.result
        lines.append(
            f"| {KINDS[kind]} | {run.whole_rate:,.0f} | {run.whole_rate / QUOTA:.2f} "
            f"| {run.steady_rate:,.0f} | {run.steady_rate / QUOTA:.2f} | {run.throttle_events} "
            f"| {run.max_throttle_ms:,.0f} | {run.failed} |"
        )
    if "kafka" in runs:
        ours, kafka = runs["minibroker"].result, runs["kafka"].result
        lines += [
            "",
            f"minibroker / Kafka: {ours.whole_rate / kafka.whole_rate:.2f} over the run, "
            f"{ours.steady_rate / kafka.steady_rate:.2f} after {STEADY_AFTER_S:g} s.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(RESULTS, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
