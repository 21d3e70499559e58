"""The admin scenario catalogue's drivers: one program per client that runs named steps
against a broker (tests/admin/jvm/AdminScenarios.java for Kafka's Java Admin 4.x,
tests/admin/go for franz-go's kadm), built once per session the way tests/interop
builds its drivers.

Steps, as each driver's header lists them: `set:NODE:NAME:VALUE` and
`describe:NODE:NAME` (per-broker configs), `ops:TOPIC:GROUP` (Java) and `topic:`,
`group:`, `consumer:`, `share:` (kadm) for authorized operations, `quotas:USER:CLIENT`
and `replicas:TOPIC`. Every step but `quotas` prints one JSON line.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.interop.test_client_matrix import Built, Driver

JAVA, FRANZ_GO = "java", "franz-go"
DRIVERS = {
    JAVA: Driver("admin-java", "java", "../admin/jvm", "AdminScenarios", java_line="4"),
    FRANZ_GO: Driver("admin-franz-go", "go", "../admin/go", "admin"),
}
RUN_TIMEOUT = 120  # seconds for one run of a driver


class AdminDrivers:
    """Each client's driver, built on first use."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._built = Built(factory)

    def run_steps(self, client: str, bootstrap: str, *steps: str) -> str:
        """Run `steps` in order with `client`'s driver; what it printed."""
        done = subprocess.run(
            [*self._built.command(DRIVERS[client]), bootstrap, *steps],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return done.stdout

    def json_steps(self, client: str, bootstrap: str, *steps: str) -> list[dict[str, Any]]:
        """Run `steps` that each print one JSON line; their lines, none failed."""
        printed = self.run_steps(client, bootstrap, *steps)
        lines = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
        assert [line["step"] for line in lines] == list(steps), printed[-3000:]
        for line in lines:
            assert "error" not in line, line["error"]
        return lines

    def report(self, client: str, bootstrap: str, step: str) -> dict[str, Any]:
        """Run one step that prints a JSON report; the report."""
        printed = self.run_steps(client, bootstrap, step)
        report: dict[str, Any] = json.loads(printed.strip().splitlines()[-1])
        return report
