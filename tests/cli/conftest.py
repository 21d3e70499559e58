"""Helpers for the command-line tool tests: the real `minibroker` command in a child
process, pointed at the session's broker (one broker shared by every module here; tests
keep apart through unique topic and group names)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from minibroker.testing.backends import KafkaService


@dataclass(frozen=True)
class Ran:
    """A finished command: its exit code and output."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.lines()]


def run_minibroker(*args: str, stdin: str | None = None, timeout: float = 60) -> Ran:
    """`python -m minibroker ARGS...`, waited for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_SASL")}
    env.pop("MINIBROKER_BOOTSTRAP", None)
    command = [sys.executable, "-m", "minibroker", *args]
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=timeout, env=env
    )
    return Ran(command, done.returncode, done.stdout, done.stderr)


Cli = Callable[..., Ran]


@pytest.fixture
def cli(kafka_broker_session: KafkaService, kafka_bootstrap: str) -> Cli:
    """`cli("topics", "list", ...)`: the command against the session's broker; fails the
    test, showing stderr, when the exit code is not `expect` (0 unless given)."""

    def run(*args: str, stdin: str | None = None, expect: int | None = 0) -> Ran:
        ran = run_minibroker(*args, "--bootstrap-server", kafka_bootstrap, stdin=stdin)
        if expect is not None:
            assert ran.returncode == expect, (
                f"{' '.join(args)} exited {ran.returncode}, not {expect}\n"
                f"stdout: {ran.stdout}\nstderr: {ran.stderr}"
            )
        if ran.returncode in (1, 2):
            assert "Traceback" not in ran.stderr, ran.stderr
            assert ran.stderr.strip(), "a failure says why"
        return ran

    return run


def unique(prefix: str) -> str:
    return f"cli-{prefix}-{uuid.uuid4().hex[:10]}"
