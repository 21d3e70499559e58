"""Long fuzz run against a child broker: `python tools/fuzz.py --mutations 1000000 --seed 7`.

Captures a corpus from real clients (or loads one saved with --save-corpus), then sends
mutated frames to `python -m minibroker` in a child process (with a data directory and
ACLs on: harness/fuzz/run.py, attacked_broker_settings) and prints progress and a
summary line. Exit status 1 if the broker died, hung or lost data, 2 if it only logged
ERRORs (each reported with a frame that reproduces it).
The engine is harness/fuzz/; the CI test runs the same with fewer mutations.

To show a failure on code without a fix, point the child at another copy of the package:
    git archive HEAD minibroker | tar -x -C /tmp/head
    python tools/fuzz.py --broker-source /tmp/head --mutations 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.fuzz.campaign import BROKER_SOURCE_ENV, CampaignResult  # noqa: E402
from harness.fuzz.corpus import Corpus, capture_corpus  # noqa: E402
from harness.fuzz.run import fuzz  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="first mutation index")
    parser.add_argument("--concurrency", type=int, default=24, help="connections at once")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before a hang")
    parser.add_argument(
        "--long-poll-cap", type=float, default=30.0, help="seconds a long poll may wait"
    )
    parser.add_argument("--corpus", type=Path, help="load frames saved with --save-corpus")
    parser.add_argument("--save-corpus", type=Path, help="write the captured frames here")
    parser.add_argument("--progress", type=float, default=10.0, help="seconds between lines")
    parser.add_argument("--no-replay", action="store_true", help="skip naming the culprits")
    parser.add_argument(
        "--artifacts", type=Path, help="write the report and every named frame (hex) here"
    )
    parser.add_argument(
        "--broker-source", type=Path, help="directory holding the minibroker package to run"
    )
    return parser


def _progress(result: CampaignResult) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {result.line()}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.broker_source is not None:
        os.environ[BROKER_SOURCE_ENV] = str(args.broker_source.resolve())
    started = time.monotonic()
    if args.corpus is not None:
        corpus = Corpus.load(args.corpus)
    else:
        corpus = capture_corpus()
        print(f"captured in {time.monotonic() - started:.1f} s", flush=True)
    if args.save_corpus is not None:
        corpus.dump(args.save_corpus)
    print(f"corpus: {corpus.describe()}", flush=True)
    for error in corpus.errors:
        print(f"capture step failed: {error}", flush=True)
    report = asyncio.run(
        fuzz(
            corpus,
            args.seed,
            args.mutations,
            concurrency=args.concurrency,
            timeout=args.timeout,
            long_poll_cap=args.long_poll_cap,
            start=args.start,
            replay=not args.no_replay,
            progress=_progress,
            progress_every=args.progress,
        )
    )
    for line in report.problems():
        print(line, flush=True)
    for kind, count in report.campaign.anomalies.items():
        print(f"anomaly {kind} x{count}: {report.campaign.anomaly_examples[kind]}")
    if report.stderr_tail:
        print(f"broker stderr tail:\n{report.stderr_tail}")
    if args.artifacts is not None:
        print(f"report, frames and corpus: {report.save(args.artifacts, corpus)}")
    print(f"summary: {report.campaign.line()}", flush=True)
    if report.fatal():
        return 1
    return 2 if report.errors() else 0


if __name__ == "__main__":
    raise SystemExit(main())
