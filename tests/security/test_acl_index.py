"""The ACL index (state/acl.py) decides exactly as reading every ACL would, and the ACL
APIs answer large selections in pieces that decode as one answer, at every version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.state import acl as acl_module
from minibroker.state.acl import (
    _IMPLIED_BY,
    EVERYONE,
    WILDCARD,
    AclBinding,
    AclFilter,
    Acls,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

TYPES = (ResourceType.TOPIC, ResourceType.GROUP)
NAMES = ("", "o", "or", "ord", "orders", "*", "pay")
PRINCIPALS = ("User:alice", "User:bob", EVERYONE)
HOSTS = ("10.0.0.1", "10.0.0.2", WILDCARD)
OPERATIONS = (Operation.ALL, Operation.READ, Operation.WRITE, Operation.DESCRIBE)

bindings = st.builds(
    AclBinding,
    st.sampled_from(TYPES),
    st.sampled_from(NAMES[1:]),
    st.sampled_from((PatternType.LITERAL, PatternType.PREFIXED)),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPERATIONS),
    st.sampled_from((Permission.ALLOW, Permission.DENY)),
)
filters = st.builds(
    AclFilter,
    st.sampled_from((ResourceType.ANY, *TYPES)),
    st.sampled_from((None, *NAMES[1:])),
    st.sampled_from(tuple(PatternType)[1:]),
    st.sampled_from((None, *PRINCIPALS)),
    st.sampled_from((None, *HOSTS)),
    st.sampled_from((Operation.ANY, *OPERATIONS)),
    st.sampled_from((Permission.ANY, Permission.ALLOW, Permission.DENY)),
)


def reference_allows(
    stored: list[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    kind: ResourceType,
    name: str,
    allow_if_no_acl: bool,
) -> bool:
    """The rules at the top of state/acl.py, read over every ACL."""
    found = allowed = False
    granting = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
    for b in stored:
        if not b.matches_resource(kind, name):
            continue
        found = True
        if b.principal not in (principal, EVERYONE) or b.host not in (host, WILDCARD):
            continue
        if b.permission is Permission.DENY and b.operation in (operation, Operation.ALL):
            return False
        if b.permission is Permission.ALLOW and b.operation in granting:
            allowed = True
    return allowed or (not found and allow_if_no_acl)


def reference_allows_some(
    stored: list[AclBinding], principal: str, host: str, operation: Operation, kind: ResourceType
) -> bool:
    entries = [
        b
        for b in stored
        if b.resource_type is kind
        and b.principal in (principal, EVERYONE)
        and b.host in (host, WILDCARD)
        and b.operation in (operation, Operation.ALL)
    ]
    if any(
        b.permission is Permission.DENY
        and b.pattern_type is PatternType.LITERAL
        and b.resource_name == WILDCARD
        for b in entries
    ):
        return False
    return any(b.permission is Permission.ALLOW for b in entries)


def assert_decides_as_reading(acls: Acls, stored: list[AclBinding], allow_if_no_acl: bool) -> None:
    for kind in TYPES:
        for name in NAMES[1:]:
            for principal in PRINCIPALS[:2]:
                for host in HOSTS[:2]:
                    for operation in OPERATIONS[1:]:
                        assert acls.allows(principal, host, operation, kind, name) == (
                            reference_allows(
                                stored, principal, host, operation, kind, name, allow_if_no_acl
                            )
                        ), (principal, host, operation, kind, name)
                    assert acls.allows_some(principal, host, Operation.WRITE, kind) == (
                        reference_allows_some(stored, principal, host, Operation.WRITE, kind)
                    )


@pytest.fixture(params=[16, 0], ids=["small-patterns", "entry-index"])
def entry_index_from(request: pytest.FixtureRequest) -> Iterator[None]:
    """Patterns read whole, or through their entry index (every pattern indexed)."""
    saved = acl_module.ENTRY_INDEX_FROM
    acl_module.ENTRY_INDEX_FROM = request.param
    yield
    acl_module.ENTRY_INDEX_FROM = saved


# The fixture holds for every example of a run, as meant.
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    added=st.lists(bindings, max_size=40),
    removed=st.lists(bindings, max_size=10),
    selection=filters,
    allow_if_no_acl=st.booleans(),
)
def test_the_index_decides_and_selects_as_reading_every_acl(
    entry_index_from: None,
    added: list[AclBinding],
    removed: list[AclBinding],
    selection: AclFilter,
    allow_if_no_acl: bool,
) -> None:
    acls = Acls(enabled=True, allow_if_no_acl=allow_if_no_acl)
    for binding in added:
        acls.add(binding)
    # Decided once before the removals (decisions are remembered until ACLs change).
    assert_decides_as_reading(acls, list(dict.fromkeys(added)), allow_if_no_acl)
    for binding in removed:
        acls.remove(binding)
    stored = [b for b in dict.fromkeys(added) if b not in removed]
    assert len(acls) == len(stored)
    assert_decides_as_reading(acls, stored, allow_if_no_acl)
    assert acls.describe(selection) == [b for b in stored if selection.matches(b)]
    assert acls.delete(selection) == [b for b in stored if selection.matches(b)]
    assert acls.describe(AclFilter()) == [b for b in stored if not selection.matches(b)]


def test_the_store_holds_at_most_max_acls() -> None:
    acls = Acls(enabled=True, max_acls=2)
    first, second, third = (
        AclBinding(
            ResourceType.TOPIC,
            f"t{i}",
            PatternType.LITERAL,
            "User:a",
            "*",
            Operation.READ,
            Permission.ALLOW,
        )
        for i in range(3)
    )
    acls.add(first)
    acls.add(second)
    acls.add(second)  # stored already: not one more
    with pytest.raises(acl_module.AclLimitReached, match="max_acls"):
        acls.add(third)
    acls.remove(first)
    acls.add(third)
    assert acls.describe(AclFilter()) == [second, third]


# --- the ACL APIs on the wire, at every version ------------------------------------------

CREATE, DESCRIBE, DELETE = 30, 29, 31
MANY = 1_234  # more than a piece (handlers/_acls.py) of ACLs read, encoded, deleted


def creation(version: int, index: int) -> Any:
    return make(
        CREATE,
        version,
        "AclCreation",
        resource_type=ResourceType.TOPIC,
        resource_name="*" if index % 2 else f"topic-{index}",
        resource_pattern_type=PatternType.LITERAL,
        principal=f"User:u{index}",
        host="*",
        operation=Operation.READ,
        permission_type=Permission.ALLOW,
    )


def everything(version: int, **fields: Any) -> dict[str, Any]:
    return {
        "resource_type_filter": ResourceType.ANY,
        "resource_name_filter": None,
        "pattern_type_filter": PatternType.LITERAL if version == 0 else PatternType.ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": Operation.ANY,
        "permission_type": Permission.ANY,
        **fields,
    }


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acl_apis_answer_large_selections_whole_and_bound_creations(version: int) -> None:
    with (
        Broker(
            acls_enabled=True,
            super_users="User:ANONYMOUS",
            max_acls_per_request=1_000,
            max_acls=MANY + 5,
        ) as broker,
        RawClient(broker.bootstrap_servers) as client,
    ):
        created = client.call(
            CREATE, version, creations=[creation(version, i) for i in range(1_200)]
        )
        codes = [r.error_code for r in created.results]
        assert codes == [ErrorCode.none] * 1_000 + [ErrorCode.policy_violation] * 200
        assert "max_acls_per_request" in str(created.results[-1].error_message)
        rest = client.call(
            CREATE, version, creations=[creation(version, i) for i in range(1_000, MANY + 10)]
        )
        codes = [r.error_code for r in rest.results]
        assert codes == [ErrorCode.none] * (MANY + 5 - 1_000) + [ErrorCode.policy_violation] * 5
        assert "max_acls" in str(rest.results[-1].error_message)

        described = client.call(DESCRIBE, version, **everything(version))
        assert described.error_code == ErrorCode.none
        listed = {(r.resource_name, a.principal) for r in described.resources for a in r.acls}
        assert listed == {("*" if i % 2 else f"topic-{i}", f"User:u{i}") for i in range(MANY + 5)}
        assert len(described.resources) == 1 + (MANY + 5) // 2 + (MANY + 5) % 2

        deleted = client.call(
            DELETE,
            version,
            filters=[
                make(DELETE, version, "DeleteAclsFilter", **fields)
                for fields in (
                    everything(
                        version, resource_type_filter=ResourceType.TOPIC, resource_name_filter="*"
                    ),
                    everything(version, principal_filter="User:u0"),
                    everything(version, resource_name_filter="no-such-topic"),
                )
            ],
        )
        matched = [
            sorted(m.principal for m in result.matching_acls) for result in deleted.filter_results
        ]
        assert matched == [
            sorted(f"User:u{i}" for i in range(1, MANY + 5, 2)),
            ["User:u0"],
            [],
        ]
        left = client.call(DESCRIBE, version, **everything(version))
        assert sum(len(r.acls) for r in left.resources) == (MANY + 5) // 2 + (MANY + 5) % 2 - 1
