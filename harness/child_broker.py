"""A broker in a child process: the one way tests, benchmarks and tools start one.

An abort (SIGABRT from a native allocation, say) or a runaway allocation then fails the
test that caused it instead of taking the whole test run down, and a benchmark's clients
do not share a GIL with the broker they measure.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

_READY = re.compile(r"listening, bootstrap\.servers=(\S+)")
_LISTENER = re.compile(r"minibroker listener (\S+) \(\S+\) bootstrap\.servers=(\S+)")
_PR_SET_PDEATHSIG = 1


def broker_args(**settings: Any) -> list[str]:
    """`python -m minibroker` flags for BrokerConfig settings (`topics` repeats --topic)."""
    settings = {"port": 0, "log_level": "WARNING", **settings}
    args: list[str] = []
    for name, value in settings.items():
        if name == "topics":
            for topic in value:
                args += ["--topic", topic]
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += ["--" + name.replace("_", "-"), text]
    return args


def die_with_parent() -> None:
    """Have the kernel kill this process if the process that started it dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ChildBroker:
    """`python -m minibroker` on a free loopback port, with BrokerConfig settings as flags.

    Its stdout is a pipe, and so is its stderr unless `stderr` names a log file or
    "inherit": a test that makes the child log much must read them (as tests/hardening
    does), or a full pipe blocks the child's event loop.

    `rlimits` sets the child's resource limits, soft and hard (e.g. {RLIMIT_NOFILE: 1024}, or
    a (soft, hard) pair).

    `own_session` puts the child in a session of its own (Ctrl-C then reaches only this
    program, which stops it) and has the kernel kill it when this process dies.
    """

    def __init__(
        self,
        *,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stderr: Literal["pipe", "inherit"] | Path = "pipe",
        own_session: bool = False,
        rlimits: Mapping[int, int | tuple[int, int]] | None = None,
        **settings: Any,
    ) -> None:
        self.args = [sys.executable, "-m", "minibroker", *broker_args(**settings), *extra_args]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.cwd = cwd
        self.stderr = stderr
        self.own_session = own_session
        self.rlimits = dict(rlimits or {})
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.listeners: dict[str, str] = {}  # listener name -> its bootstrap servers
        self._log: IO[bytes] | None = None

    def launch(self) -> ChildBroker:
        """Start the process without waiting for it to listen."""
        stderr: int | IO[bytes] | None = subprocess.PIPE
        if isinstance(self.stderr, Path):
            self._log = open(self.stderr, "wb")  # noqa: SIM115 - closed in stop()
            stderr = self._log
        elif self.stderr == "inherit":
            stderr = None
        self.process = subprocess.Popen(
            self.args,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL if self.own_session else None,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=self.env,
            start_new_session=self.own_session,
            preexec_fn=self._prepare_child if self.own_session or self.rlimits else None,
        )
        return self

    def _prepare_child(self) -> None:
        """Run in the child before it starts Python (preexec_fn)."""
        for limit, value in self.rlimits.items():
            resource.setrlimit(limit, value if isinstance(value, tuple) else (value, value))
        if self.own_session:
            die_with_parent()

    def wait_ready(self, timeout: float = 20.0) -> ChildBroker:
        """Read the child's stdout until it says where it listens; stop it after `timeout`."""
        assert self.process is not None and self.process.stdout is not None
        # A child that hangs silently would block readline() forever: past the deadline
        # it is killed, so the read ends.
        watchdog = threading.Timer(timeout, self._kill_quietly)
        watchdog.daemon = True
        watchdog.start()
        try:
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
        finally:
            watchdog.cancel()
        self.stop()
        raise RuntimeError(
            f"child broker did not start (exit code {self.returncode()}): "
            f"{self.stderr_text() or self.log_tail()}"
        )

    def start(self, timeout: float = 20.0) -> ChildBroker:
        return self.launch().wait_ready(timeout)

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
        return status_kib(self.pid, "VmRSS") * 1024

    def peak_rss_bytes(self) -> int:
        """Highest resident memory since start (VmHWM)."""
        return status_kib(self.pid, "VmHWM") * 1024

    def stderr_text(self) -> str:
        if self.process is None or self.process.stderr is None or self.alive():
            return ""
        with contextlib.suppress(Exception):
            return self.process.stderr.read()
        return ""

    def log_lines(self) -> list[str]:
        """The log file's lines, when stderr goes to one."""
        if isinstance(self.stderr, Path):
            with contextlib.suppress(OSError):
                return self.stderr.read_text(errors="replace").splitlines()
        return []

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_lines()[-lines:])

    def _kill_quietly(self) -> None:
        with contextlib.suppress(OSError):
            self.kill()

    def kill(self) -> None:
        """SIGKILL, no clean shutdown (a crash, as far as the broker can tell)."""
        if self.alive():
            assert self.process is not None
            self.process.kill()

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM (the broker stops cleanly), SIGKILL after `grace` seconds; the exit code."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self._log is not None:
            self._log.close()
        return code

    def __enter__(self) -> ChildBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def status_kib(pid: int, key: str) -> int:
    """A /proc/PID/status figure in KiB (VmRSS, VmHWM ...)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise LookupError(key)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def child_broker(**settings: Any) -> Iterator[ChildBroker]:
    with ChildBroker(**settings) as broker:
        yield broker
