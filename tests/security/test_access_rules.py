"""Requests checked against ACLs before they are served, as odd as clients may send them."""

from __future__ import annotations

from minibroker.config import BrokerConfig
from tests.sansio import SansIOBroker

FIND_COORDINATOR = 10


def test_find_coordinator_naming_no_key_is_answered_with_acls_on() -> None:
    broker = SansIOBroker(BrokerConfig(acls_enabled=True, allow_everyone_if_no_acl_found=True))
    answer = broker.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=())
    assert answer.coordinators == ()
    named = broker.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",))
    assert [(c.key, c.error_code) for c in named.coordinators] == [("g", 0)]
