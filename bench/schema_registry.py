"""The embedded Schema Registry beside the broker's produce path: does either stall the other?

One `python -m minibroker --schema-registry-port 0` in a child process; the loads run in
processes of their own (this module's `load` command), so neither client shares a GIL
with the other or with the broker:
- register: REGISTRY_THREADS threads, each on its own keep-alive HTTP/1.1 connection,
  each request registering a new Avro schema under a new subject (a write to the
  `_schemas` topic, answered once the registry has read it back);
- fetch: the same threads reading what is registered, alternating
  `GET /schemas/ids/{id}` and `GET /subjects/{subject}/versions/latest`;
- produce: one confluent-kafka producer offering PRODUCE_RATE 100-byte values per
  second (acks=all), paced, each acknowledgement timed.
Each phase runs alone, then each registry load together with the producer, all in one
run and against the same broker, so the ratios compare like with like on a shared
machine. Reported: requests/s and p50/p99 latency of the registry, acknowledged
messages/s and ack latency of the producer, the slowest request and the longest gap
between acks (a stall), the broker's CPU, and the ratios together / alone.

    python -m bench.schema_registry            # 3 interleaved rounds of 8 s phases (2 min)
    python -m bench.schema_registry --quick    # one round of 4 s phases
"""

from __future__ import annotations

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bench.harness import (
    QUIET,
    ROOT,
    bench_parser,
    client_version,
    load_average,
    log,
    percentile,
    run_heading,
    timed,
    write_results,
)
from harness.child_broker import ChildBroker

RESULTS = ROOT / "bench" / "SCHEMA_REGISTRY_RESULTS.md"
REGISTRY_THREADS = 4
FETCH_SCHEMAS = 50  # registered before the fetch phases, read round-robin
VALUE = b"v" * 100
PRODUCE_RATE = 20_000  # messages offered per second
_URL = re.compile(r"schema\.registry\.url=(\S+)")
_BOOTSTRAP = re.compile(r"bootstrap\.servers=(\S+)")


@dataclass
class LoadResult:
    """What one load process measured over its run."""

    kind: str
    count: int  # requests answered 2xx, or messages acknowledged
    errors: int
    seconds: float
    latencies_ms: list[float]
    longest_wait_ms: float = 0.0  # the slowest request, or the longest gap between acks

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def p(self, fraction: float) -> float | None:
        return percentile(self.latencies_ms, fraction) if self.latencies_ms else None


# --- the load processes ---------------------------------------------------------------


def _schema(n: int, tag: str) -> str:
    return json.dumps(
        {"type": "record", "name": f"Bench{tag}{n}", "fields": [{"name": "f", "type": "long"}]}
    )


def _registry_worker(
    url: str, kind: str, index: int, until: float, out: list[float], errors: list[int]
) -> None:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    tag = f"{uuid.uuid4().hex[:8]}t{index}"
    n = 0
    while time.perf_counter() < until:
        if kind == "register":
            # A subject of its own: no compatibility check, whatever the schema's rules.
            path = f"/subjects/bench-{tag}-{n}/versions"
            body: bytes | None = json.dumps({"schema": _schema(n, tag)}).encode()
            method = "POST"
        else:
            # ids 1..FETCH_SCHEMAS were registered before the run, one per subject.
            slot = n % FETCH_SCHEMAS
            path = (
                f"/schemas/ids/{slot + 1}" if n % 2 else f"/subjects/fetch-{slot}/versions/latest"
            )
            body, method = None, "GET"
        started = time.perf_counter()
        try:
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            answer.read()
            ok = answer.status == 200
        except (OSError, http.client.HTTPException):
            connection.close()
            ok = False
        if ok:
            out.append((time.perf_counter() - started) * 1000)
        else:
            errors.append(1)
        n += 1
    connection.close()


def _registry_load(url: str, kind: str, seconds: float) -> LoadResult:
    latencies: list[float] = []
    errors: list[int] = []
    started = time.perf_counter()
    until = started + seconds
    threads = [
        threading.Thread(target=_registry_worker, args=(url, kind, i, until, latencies, errors))
        for i in range(REGISTRY_THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadResult(
        kind,
        len(latencies),
        len(errors),
        time.perf_counter() - started,
        latencies,
        max(latencies, default=0.0),
    )


def _produce_load(bootstrap: str, seconds: float) -> LoadResult:
    """Offer PRODUCE_RATE messages per second, paced, and time each one's acknowledgement:
    an offered rate the broker keeps up with stays put, so a stall shows as a lower
    acknowledged rate, longer ack latencies and a long gap between acks, while the
    client's own CPU stays small (this machine has two cores for everything)."""
    from confluent_kafka import Producer

    acked: list[float] = []
    latencies: list[float] = []
    failed = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is None:
            acked.append(time.perf_counter())
            latencies.append(msg.latency() * 1000)
        else:
            failed += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    topic = "bench-produce"
    started = time.perf_counter()
    ended = started + seconds
    sent = 0
    while (now := time.perf_counter()) < ended:
        due = int((now - started) * PRODUCE_RATE) - sent
        for _ in range(due):
            producer.produce(topic, VALUE, on_delivery=delivered)
        sent += max(due, 0)
        producer.poll(0.002)
    producer.flush(30)
    in_run = [at for at in acked if at <= ended]
    gaps = [later - earlier for earlier, later in zip([started, *in_run], in_run, strict=False)]
    return LoadResult(
        "produce", len(in_run), failed, seconds, latencies, max(gaps, default=0.0) * 1000
    )


def _load_main(kind: str, address: str, seconds: float) -> None:
    """The `load` command: run one load and print its result as JSON."""
    if kind == "produce":
        result = _produce_load(address, seconds)
    else:
        result = _registry_load(address, kind, seconds)
    print(json.dumps(result.__dict__), flush=True)


def _spawn_load(kind: str, address: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.schema_registry", "load", kind, address, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _collect(process: subprocess.Popen[str]) -> LoadResult:
    out, _ = process.communicate(timeout=120)
    return LoadResult(**json.loads(out.strip().splitlines()[-1]))


# --- the broker and the phases --------------------------------------------------------


@dataclass
class Target:
    bootstrap: str
    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """User and system CPU time of the broker's process so far."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def registry_broker() -> Iterator[Target]:
    child = ChildBroker(schema_registry_port=0, stderr="inherit").launch()
    process = child.process
    assert process is not None and process.stdout is not None
    url = bootstrap = ""
    try:
        deadline = time.monotonic() + 30
        while not (url and bootstrap) and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            if found := _URL.search(line):
                url = found.group(1)
            elif found := _BOOTSTRAP.search(line):
                bootstrap = found.group(1)
        if not (url and bootstrap):
            raise RuntimeError("the broker did not print both of its addresses")
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield Target(bootstrap, url, child.pid)
    finally:
        child.stop()


def _prepare_fetch(url: str) -> None:
    """Register FETCH_SCHEMAS schemas under subjects fetch-0.. so their ids are 1.. ."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    for slot in range(FETCH_SCHEMAS):
        body = json.dumps({"schema": _schema(slot, "Fetch")}).encode()
        connection.request(
            "POST",
            f"/subjects/fetch-{slot}/versions",
            body=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        answer = connection.getresponse()
        payload = json.loads(answer.read())
        if answer.status != 200 or payload["id"] != slot + 1:
            raise RuntimeError(f"preparing the fetch phase: {answer.status} {payload}")
    connection.close()


@dataclass
class Summary:
    """One phase's load over the rounds: medians of the rates and percentiles, the
    slowest wait of any round, the errors of all."""

    rate: float
    p50: float | None
    p99: float | None
    slowest: float
    errors: int

    @classmethod
    def of(cls, results: list[LoadResult]) -> Summary:
        def median(values: list[float | None]) -> float | None:
            present = [value for value in values if value is not None]
            return statistics.median(present) if present else None

        return cls(
            statistics.median(result.rate for result in results),
            median([result.p(0.5) for result in results]),
            median([result.p(0.99) for result in results]),
            max(result.longest_wait_ms for result in results),
            sum(result.errors for result in results),
        )


PHASES = ("register", "fetch", "produce", "register+produce", "fetch+produce")


@dataclass
class Run:
    loads: dict[str, list[LoadResult]]  # "register", "produce", "register+produce:produce", ...
    broker_cpu: dict[str, list[float]]  # phase -> the broker's CPU seconds per wall second

    def summary(self, key: str) -> Summary:
        return Summary.of(self.loads[key])


def measure(seconds: float, rounds: int) -> Run:
    loads: dict[str, list[LoadResult]] = {}
    cpu: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with registry_broker() as target:
        _prepare_fetch(target.url)
        addresses = {"register": target.url, "fetch": target.url, "produce": target.bootstrap}
        # A short produce first: the topic exists and the client paths are warm.
        _collect(_spawn_load("produce", target.bootstrap, 1.0))
        # The phases interleaved, round after round: a burst of other work on the machine
        # lands on one phase of one round, not on every run of one phase.
        for round_number in range(1, rounds + 1):
            for phase in PHASES:
                log(f"round {round_number}/{rounds}: {phase} for {seconds:g} s")
                kinds = phase.split("+")
                before, started = target.cpu_seconds(), time.perf_counter()
                running = [_spawn_load(kind, addresses[kind], seconds) for kind in kinds]
                for kind, process in zip(kinds, running, strict=True):
                    key = kind if len(kinds) == 1 else f"{phase}:{kind}"
                    loads.setdefault(key, []).append(_collect(process))
                cpu[phase].append((target.cpu_seconds() - before) / (time.perf_counter() - started))
    return Run(loads, cpu)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _ratio(new: float | None, old: float | None) -> str:
    return "n/a" if not new or not old else f"{new / old:.2f}x"


def report(run: Run, heading: str, seconds: float, rounds: int) -> str:
    lines = [
        "# Schema Registry beside the produce path",
        "",
        f"{heading}, 2 cores; {rounds} rounds of {seconds:g} s per phase, the phases "
        "interleaved; medians over the rounds (slowest: the slowest of any round). "
        f"Registry: {REGISTRY_THREADS} threads on keep-alive HTTP/1.1 connections in one "
        "process, each request registering a new Avro schema under a new subject "
        f"(register) or reading one of {FETCH_SCHEMAS} (fetch: by id and latest version, "
        "alternating). Produce: one confluent-kafka producer offering "
        f"{PRODUCE_RATE:,} msg/s of 100-byte values, acks=all, {client_version()}. "
        "Each load in a process of its own, the broker in another; load "
        f"{load_average()}. Ratios: together / alone.",
        "",
        "| registry load | req/s alone | req/s with produce | ratio | p50 ms alone "
        "| p50 ms with produce | p99 ms alone | p99 ms with produce | ratio p99 "
        "| slowest ms alone | slowest ms with produce | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("register", "fetch"):
        alone, together = run.summary(name), run.summary(f"{name}+produce:{name}")
        lines.append(
            f"| {name} | {alone.rate:,.0f} | {together.rate:,.0f} "
            f"| {_ratio(together.rate, alone.rate)} | {_ms(alone.p50)} "
            f"| {_ms(together.p50)} | {_ms(alone.p99)} | {_ms(together.p99)} "
            f"| {_ratio(together.p99, alone.p99)} | {alone.slowest:,.0f} "
            f"| {together.slowest:,.0f} | {alone.errors + together.errors} |"
        )
    produce = run.summary("produce")
    lines += [
        "",
        "| produce | acked msg/s | ratio to alone | ack p50 ms | ack p99 ms | ratio p99 "
        "| longest gap between acks, ms | failed |",
        "|---|---|---|---|---|---|---|---|",
        f"| alone | {produce.rate:,.0f} | 1.00x | {_ms(produce.p50)} | {_ms(produce.p99)} "
        f"| 1.00x | {produce.slowest:,.0f} | {produce.errors} |",
    ]
    for name in ("register", "fetch"):
        beside = run.summary(f"{name}+produce:produce")
        lines.append(
            f"| with {name} load | {beside.rate:,.0f} | {_ratio(beside.rate, produce.rate)} "
            f"| {_ms(beside.p50)} | {_ms(beside.p99)} | {_ratio(beside.p99, produce.p99)} "
            f"| {beside.slowest:,.0f} | {beside.errors} |"
        )
    lines += [
        "",
        "| phase | " + " | ".join(PHASES) + " |",
        "|---|" + "---|" * len(PHASES),
        "| broker CPU s per s | "
        + " | ".join(f"{statistics.median(run.broker_cpu[phase]):.2f}" for phase in PHASES)
        + " |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["load"]:
        _load_main(args[1], args[2], float(args[3]))
        return 0
    parser = bench_parser(
        "schema_registry", __doc__ or "", "one round of 4 s phases", "rounds (default 3)"
    )
    options = parser.parse_args(args)
    seconds = 4.0 if options.quick else 8.0
    rounds = options.runs or (1 if options.quick else 3)
    result = timed(lambda: measure(seconds, rounds))
    command = "python -m bench.schema_registry" + (" --quick" if options.quick else "")
    if options.runs:
        command += f" --runs {options.runs}"
    heading = run_heading(command, "quick run" if options.quick else "full run", result.elapsed)
    text = report(result.result, heading, seconds, rounds)
    print(text)
    write_results(RESULTS, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
