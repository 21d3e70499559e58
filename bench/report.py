"""What the timeline report costs: drawing one for a test of 10,000 requests, and what a
passing test pays for the recording it is drawn from.

    python -m bench.report [--requests N] [--runs N] [--tests N]

1. Generation: a broker recording every request (as the pytest fixtures start it, 16 MiB
   per node) answers about N requests: a producer sending one record per Produce request
   to three partitions, then a consumer in a group reading them back and committing.
   Then the plugin's own steps are timed: the timeline dict (`Cluster.timeline()`), the
   HTML page (`render_report`) and the JSON beside it; their sizes are given.
2. A passing test: a file of trivial tests (`kafka_topic()`, one record produced and read
   back) run by pytest in a child process with `--kafka-report=failed` (the default:
   brokers record, nothing is drawn) and with `--kafka-report=off` (nothing recorded),
   the runs interleaved; a test's time is pytest's setup + call + teardown for it, as
   --junitxml gives it. Medians; printed side by side with the ratio and written to
   bench/REPORT_RESULTS.md.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.harness import ROOT, bench_parser, timed, write_results
from minibroker import Broker
from minibroker.testing.timeline_report import TEST_RECORDING_MAX_BYTES, timeline_of
from minibroker.timeline_html import render_report

RESULTS = ROOT / "bench" / "REPORT_RESULTS.md"

TRIVIAL_TEST = """
import pytest


@pytest.mark.parametrize("n", range({count}))
def test_trivial(n, kafka_topic, kafka_produce, kafka_consume):
    topic = kafka_topic()
    kafka_produce(topic, [b"one"])
    assert kafka_consume(topic, 1) is not None
"""


def busy_broker(requests: int) -> tuple[Broker, int]:
    """A started broker that recorded a little over `requests` requests; (broker, how many)."""
    broker = Broker(record_requests=True, record_requests_max_bytes=TEST_RECORDING_MAX_BYTES)
    broker.start_in_thread()
    broker.create_topic("orders", 3)
    records = max(requests, 1)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "shop",
            "linger.ms": 0,
            "batch.num.messages": 1,  # one record per request: the request count is the load
        }
    )
    for n in range(records):
        while True:
            try:
                producer.produce("orders", b"order %d" % n, partition=n % 3)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "billing",
            "client.id": "billing",
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 100,
        }
    )
    consumer.subscribe(["orders"])
    got = 0
    deadline = time.monotonic() + 60
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(1000, 0.1) if m.error() is None)
    consumer.close()
    return broker, len(broker.requests())


def generation(requests: int, runs: int) -> dict[str, Any]:
    broker, recorded = busy_broker(requests)
    try:
        build, render, dump = [], [], []
        html = text = ""
        for _ in range(runs):
            started = time.perf_counter()
            timeline = timeline_of(broker, "bench/report.py::test_ten_thousand_requests")
            built = time.perf_counter()
            if timeline is None:
                raise RuntimeError("the broker keeps no timeline")
            html = render_report(timeline)
            rendered = time.perf_counter()
            text = json.dumps(timeline, default=str, ensure_ascii=False, separators=(",", ":"))
            dumped = time.perf_counter()
            build.append(built - started)
            render.append(rendered - built)
            dump.append(dumped - rendered)
        return {
            "recorded": recorded,
            "build_s": statistics.median(build),
            "render_s": statistics.median(render),
            "json_s": statistics.median(dump),
            "html_bytes": len(html.encode()),
            "json_bytes": len(text.encode()),
        }
    finally:
        broker.stop_thread()


def per_test_seconds(junit: Path) -> list[float]:
    tree = ElementTree.parse(junit)
    return [float(case.get("time", "nan")) for case in tree.iter("testcase")]


def passing_cost(tests: int, runs: int) -> dict[str, list[float]]:
    """Per-test seconds of the trivial suite, by mode, the runs interleaved."""
    results: dict[str, list[float]] = {"failed": [], "off": []}
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "test_trivial.py").write_text(textwrap.dedent(TRIVIAL_TEST.format(count=tests)))
        for run in range(runs):
            for mode in results:
                junit = folder / f"{mode}-{run}.xml"
                command = [
                    sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:randomly", f"--kafka-report={mode}", f"--junitxml={junit}",
                    "test_trivial.py",
                ]  # fmt: skip
                done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
                if done.returncode != 0:
                    raise RuntimeError(f"{mode}: {done.stdout[-3000:]}{done.stderr[-3000:]}")
                results[mode].extend(per_test_seconds(junit))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser("report", __doc__, None)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tests", type=int, default=100)
    args = parser.parse_args(argv)
    run = timed(lambda: (generation(args.requests, args.runs), passing_cost(args.tests, args.runs)))
    made, passing = run.result
    total = made["build_s"] + made["render_s"]
    recorded = made["recorded"]
    generation_table = "\n".join(
        [
            "| step | seconds (median) | size |",
            "|---|---|---|",
            f"| timeline dict from {recorded:,} recorded requests (`Cluster.timeline()`) "
            f"| {made['build_s']:.3f} | |",
            f"| HTML page (`render_report`) | {made['render_s']:.3f} "
            f"| {made['html_bytes'] / 2**20:.1f} MiB |",
            f"| JSON beside it | {made['json_s']:.3f} | {made['json_bytes'] / 2**20:.1f} MiB |",
            f"| build + render | {total:.3f} | |",
        ]
    )
    on = statistics.median(passing["failed"]) * 1000
    off = statistics.median(passing["off"]) * 1000
    on_p90 = sorted(passing["failed"])[int(0.9 * len(passing["failed"]))] * 1000
    off_p90 = sorted(passing["off"])[int(0.9 * len(passing["off"]))] * 1000
    passing_table = "\n".join(
        [
            "| trivial passing test | median | p90 | ratio to off |",
            "|---|---|---|---|",
            f"| `--kafka-report=off` (nothing recorded) | {off:.1f} ms | {off_p90:.1f} ms | 1.00 |",
            f"| `--kafka-report=failed`, the default (recording on, no report drawn) "
            f"| {on:.1f} ms | {on_p90:.1f} ms | {on / off:.2f} |",
        ]
    )
    print(generation_table + "\n\n" + passing_table)
    command = (
        f"python -m bench.report --requests {args.requests} --runs {args.runs} --tests {args.tests}"
    )
    write_results(
        RESULTS,
        "# The timeline report: what it costs\n\n"
        f"`{command}` on {platform.machine()}, Python {platform.python_version()}.\n\n"
        "## Drawing the report of a test with many requests\n\n"
        f"A broker recording every request answered {recorded:,} of them (one record per "
        "Produce request to three partitions, then a consumer in a group reading them back "
        "and committing); the plugin's steps timed on that recording, medians of "
        f"{args.runs}.\n\n" + generation_table + "\n\n"
        "## What a passing test pays\n\n"
        f"{args.tests} trivial tests (a topic, one record produced and read back) run by "
        f"pytest in a child process, {args.runs} runs of each mode interleaved; a test's "
        "time is its setup + call + teardown from --junitxml.\n\n" + passing_table + "\n",
        run.elapsed,
    )


if __name__ == "__main__":
    main()
