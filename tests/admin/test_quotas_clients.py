"""Client quotas through the Java Admin client (4.x): alterClientQuotas and
describeClientQuotas as an application calls them, with Kafka's answers. Runs against
Apache Kafka too (`parity`)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from minibroker.testing import jvm
from minibroker.testing.real_kafka import java_executable

PROGRAM = Path(__file__).parent / "quotas" / "QuotaAdmin.java"


@pytest.mark.parity
def test_java_admin_sets_describes_and_removes_client_quotas(kafka_bootstrap: str) -> None:
    java = java_executable()
    jars = jvm.kafka_clients("4").jars()
    if java is None or jars is None:
        pytest.skip("needs java and the Kafka 4 client jars (python -m minibroker jars kafka)")
    user, client_id = f"java-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [
            java,
            "-cp",
            os.pathsep.join(map(str, jars)),
            str(PROGRAM),
            kafka_bootstrap,
            user,
            client_id,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.split(" ")[0] in STEPS]
    assert lines == [
        "set 2",
        f"set {{client-id={client_id}, user={user}}} {{producer_byte_rate=1048576.0}}",
        f"set {{user={user}}} {{consumer_byte_rate=2097152.0, request_percentage=150.5}}",
        "validated 1",
        f"validated {{user={user}}} {{consumer_byte_rate=2097152.0, request_percentage=150.5}}",
        "refused no_such_quota InvalidRequestException",
        "refused producer_byte_rate InvalidRequestException",
        "removed 0",
    ]


STEPS = {"set", "validated", "refused", "removed"}
