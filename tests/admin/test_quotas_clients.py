"""Client quotas through the admin clients that have them: the Java Admin client (4.x)
and franz-go's kadm set, describe, validate and remove quotas and get Kafka's refusals.
Both print the same lines (tests/admin/quotas/). Runs against Apache Kafka too (`parity`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from minibroker.testing import jvm
from minibroker.testing.real_kafka import java_executable

HERE = Path(__file__).parent / "quotas"
STEPS = {"set", "validated", "refused", "removed"}


def _java(work: Path) -> list[str]:
    java = java_executable()
    jars = jvm.kafka_clients("4").jars()
    if java is None or jars is None:
        pytest.skip("needs java and the Kafka 4 client jars (python -m minibroker jars kafka)")
    return [java, "-cp", os.pathsep.join(map(str, jars)), str(HERE / "QuotaAdmin.java")]


def _franz_go(work: Path) -> list[str]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (go on PATH)")
    for source in (HERE / "go").iterdir():
        shutil.copy(source, work / source.name)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    for step in ([go, "mod", "tidy"], [go, "build", "-o", "quotas", "."]):
        done = subprocess.run(step, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(f"franz-go could not be fetched or built: {done.stderr[-600:]}")
    return [str(work / "quotas")]


@pytest.mark.parity
@pytest.mark.parametrize("client", ["java", "franz-go"])
def test_admin_client_sets_describes_and_removes_client_quotas(
    kafka_bootstrap: str, client: str, tmp_path: Path
) -> None:
    command = _java(tmp_path) if client == "java" else _franz_go(tmp_path)
    user, client_id = f"{client}-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [*command, kafka_bootstrap, user, client_id],
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
