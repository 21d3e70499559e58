"""`minibroker proxy` in a child process holds a large frame about once, not once per
copy made on its way through: fetches of 20 MiB answers through it raise its peak RSS
by well under four times that (about twice, for the frame and its decoded records;
the proxy that joined and buffered copies: 5.5 times)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from harness.attacks import MiB, connect, produce_values, read_frame_size
from harness.child_broker import ChildBroker
from harness.raw_client import encode, fetch_request

FETCH = 1
ANSWER_MIB = 20


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def test_large_fetches_through_the_proxy_hold_about_one_copy() -> None:
    with ChildBroker(topics=["big:1"]) as broker:
        produce_values(broker.bootstrap, "big", [bytes(1000 * 1024)] * ANSWER_MIB)
        proxy = subprocess.Popen(
            [sys.executable, "-m", "minibroker", "proxy", "--upstream", broker.bootstrap],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stderr is not None
            found = re.search(r"bootstrap\.servers=(\S+),", proxy.stderr.readline())
            assert found, "the proxy did not start"
            before = _status(proxy.pid, "VmRSS:")
            request = encode(
                FETCH,
                11,
                fetch_request("big", max_bytes=64 * MiB, partition_max_bytes=64 * MiB),
                1,
                "big",
            )
            with connect(found.group(1), timeout=60) as sock:
                for _ in range(5):
                    sock.sendall(request)
                    answer = read_frame_size(sock)
            grown = _status(proxy.pid, "VmHWM:") - before
            assert answer > (ANSWER_MIB - 1) * MiB
            print(f"peak RSS grew {grown / MiB:.0f} MiB for answers of {answer / MiB:.0f} MiB")
            assert grown < 4 * answer, f"peak RSS grew {grown / MiB:.0f} MiB"
        finally:
            proxy.terminate()
            proxy.wait(10)
