"""Client quotas through each admin client's driver that has them (tests/admin/drivers.py):
Kafka's Java Admin (4.x) and franz-go's kadm set, describe, validate and remove quotas and
get Kafka's refusals, printing the same lines. Runs against Apache Kafka too (`parity`)."""

from __future__ import annotations

import uuid

import pytest

from tests.admin.drivers import FRANZ_GO, JAVA, AdminDrivers

STEPS = {"set", "validated", "refused", "removed"}


@pytest.mark.parity
@pytest.mark.parametrize("client", [JAVA, FRANZ_GO])
def test_admin_client_sets_describes_and_removes_client_quotas(
    kafka_bootstrap: str, admin_drivers: AdminDrivers, client: str
) -> None:
    user, client_id = f"{client}-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:6]}"
    printed = admin_drivers.run_steps(client, kafka_bootstrap, f"quotas:{user}:{client_id}")
    lines = [line for line in printed.splitlines() if line.split(" ")[0] in STEPS]
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
