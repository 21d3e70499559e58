"""Run a test command several times on a deliberately loaded machine.

    python tools/loadtest.py                       # the README's full test command, 3 runs
    python tools/loadtest.py --runs 2 -- pytest -q -p no:cacheprovider tests/spark

Starts N CPU-bound busy processes (default 2: one per core on the 2-core machines the
suite runs on), runs the command R times beside them, stops them, and prints each run's
exit code and duration, then "N passed, N failed". Exits non-zero when any run failed.

Why: timeouts that only bite on a busy machine (Spark waits a fixed 10 s for a fresh
Python process to connect back) pass on an idle laptop and fail in CI. A change meant to
remove such a failure is shown here, not argued.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The README's "run the whole suite" command.
FULL_SUITE = 'python3 -m pip install -q --upgrade "tox>=4.11" && python3 -m tox'
# Spins until stopped, or until its parent is gone (so a killed run leaves nothing behind).
BUSY_LOOP = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


def start_busy(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that each keep one CPU busy until stopped."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_busy(busy: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in busy:
        if process.poll() is None:
            process.terminate()
    for process in busy:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_once(command: Sequence[str] | str) -> int:
    shell = isinstance(command, str)
    return subprocess.run(command, shell=shell, cwd=ROOT, check=False).returncode


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        usage="%(prog)s [--busy N] [--runs R] [-- COMMAND ...]",
    )
    parser.add_argument(
        "--busy", type=int, default=2, metavar="N", help="CPU-bound processes (default 2)"
    )
    parser.add_argument(
        "--runs", type=int, default=3, metavar="R", help="times to run the command (default 3)"
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help=f"command to run (after --); default: {FULL_SUITE}",
    )
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if args.busy < 0 or args.runs < 1:
        parser.error("--busy must be >= 0 and --runs >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the busy processes
    command: Sequence[str] | str = args.command or FULL_SUITE
    shown = command if isinstance(command, str) else shlex.join(command)
    print(f"loadtest: {args.busy} busy process(es), {args.runs} run(s) of: {shown}", flush=True)
    results: list[tuple[int, float]] = []
    busy = start_busy(args.busy)
    began = time.monotonic()
    try:
        for run in range(1, args.runs + 1):
            print(f"loadtest: run {run}/{args.runs} starting", flush=True)
            start = time.monotonic()
            code = run_once(command)
            results.append((code, time.monotonic() - start))
            print(
                f"loadtest: run {run}/{args.runs} exit {code} in {results[-1][1]:.1f}s", flush=True
            )
        gone = [p.pid for p in busy if p.poll() is not None]
        used = sum(cpu_seconds(p.pid) or 0.0 for p in busy)
    finally:
        stop_busy(busy)
    wall = time.monotonic() - began
    print("loadtest: results", flush=False)
    for run, (code, seconds) in enumerate(results, 1):
        print(f"  run {run}: exit {code}, {seconds:.1f}s")
    if busy:
        note = f"; {len(gone)} of them ended early" if gone else ""
        print(
            f"  busy processes: {len(busy)}, used {used:.1f} CPU-s over {wall:.1f}s "
            f"({used / wall if wall else 0.0:.2f} CPUs){note}"
        )
    failed = sum(1 for code, _ in results if code != 0)
    print(f"{len(results) - failed} passed, {failed} failed", flush=True)
    return 1 if failed or (busy and gone) else 0


if __name__ == "__main__":
    raise SystemExit(main())
