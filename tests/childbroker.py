"""A broker in a child process, for tests of input that could kill or starve it.

An abort (SIGABRT from a native allocation, say) or a runaway allocation then fails the
test that caused it instead of taking the whole test run down.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

_READY = re.compile(r"listening, bootstrap\.servers=(\S+)")
_LISTENER = re.compile(r"minibroker listener (\S+) \(\S+\) bootstrap\.servers=(\S+)")


class ChildBroker:
    """`python -m minibroker` on a free loopback port, with BrokerConfig settings as flags.

    Its stdout and stderr are pipes: a test that makes the child log much must read them
    (as tests/hardening does), or a full pipe blocks the child's event loop.
    """

    def __init__(self, **settings: Any) -> None:
        args = [sys.executable, "-m", "minibroker", "--port", "0", "--log-level", "WARNING"]
        for name, value in settings.items():
            if name == "topics":
                for topic in value:
                    args += ["--topic", topic]
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args += ["--" + name.replace("_", "-"), text]
        self.args = args
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.listeners: dict[str, str] = {}  # listener name -> its bootstrap servers

    def start(self, timeout: float = 20.0) -> ChildBroker:
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            listener = _LISTENER.search(line)
            if listener:
                self.listeners[listener.group(1)] = listener.group(2)
            found = _READY.search(line)
            if found:
                self.bootstrap = found.group(1)
                return self
        self.stop()
        raise RuntimeError(f"child broker did not start: {self.stderr_text()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def rss_bytes(self) -> int:
        """Resident memory now (VmRSS)."""
        return _status_kib(self.pid, "VmRSS") * 1024

    def peak_rss_bytes(self) -> int:
        """Highest resident memory since start (VmHWM)."""
        return _status_kib(self.pid, "VmHWM") * 1024

    def stderr_text(self) -> str:
        if self.process is None or self.process.stderr is None or self.alive():
            return ""
        with contextlib.suppress(Exception):
            return self.process.stderr.read()
        return ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self) -> ChildBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise LookupError(key)


@contextlib.contextmanager
def child_broker(**settings: Any) -> Iterator[ChildBroker]:
    with ChildBroker(**settings) as broker:
        yield broker
