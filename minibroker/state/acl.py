"""Access control lists and the decision they make, as Kafka's StandardAuthorizer makes it.

Rules:
- An ACL binds a resource pattern (resource type, name, LITERAL or PREFIXED) to an entry:
  principal (`User:alice`, or `User:*` for everyone), host (an IP address, or `*`),
  operation and permission (ALLOW or DENY).
- A request is allowed when the principal is a super user; otherwise the ACLs matching
  the resource decide. A LITERAL pattern matches its own name and, named `*`, every name;
  a PREFIXED pattern every name starting with it. An entry matches the principal itself
  or `User:*`, the client's host itself or `*`.
- DENY wins: a matching DENY for the operation (or ALL) refuses it.
- Otherwise a matching ALLOW for the operation (or ALL) allows it. DESCRIBE is implied by
  an ALLOW of READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
- A resource no ACL matches at all is refused, unless allow_everyone_if_no_acl_found
  (Kafka's allow.everyone.if.no.acl.found).
- With ACLs off (the default, as with no authorizer on Kafka) everything is allowed and
  the ACL APIs answer SECURITY_DISABLED.
- ACLs are indexed by resource type, pattern type and name, so a decision costs the same
  with 100 or 1,000,000 ACLs: it reads the LITERAL patterns named like the resource and
  `*`, and the PREFIXED patterns the name starts with, found by looking the name's
  prefixes up at each length some PREFIXED pattern of the type has. On a pattern with
  many ACLs, only the entries of the principal (or `User:*`) and host (or `*`) are read.
  Up to DECISIONS_KEPT decisions are remembered, until an ACL is added or removed.
- A filter (DescribeAcls, DeleteAcls) that names a resource reads only the patterns it
  names (MATCH: those that apply to the resource); one that names none reads every ACL.
  Either way the selection comes in pieces of a bounded number of ACLs read, in the
  order the ACLs were added.
- At most max_acls ACLs are stored (unbounded when None); adding one more raises
  AclLimitReached.
- Authorized operations (Metadata, DescribeCluster, the group describes, when asked):
  the operations Kafka supports on the resource type (SUPPORTED_OPERATIONS) that the
  principal is allowed on the named resource, as a bit set (bit n: operation code n).
  With ACLs off every supported operation is in it, as Kafka answers without an
  authorizer (topic 8 operations, group 5, cluster 7).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"
EVERYONE = "User:*"

_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


# Kafka's AclEntry.supportedOperations: what authorized operations are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
}
# The authorized operations field's value when the request did not ask for them.
OPERATIONS_NOT_REQUESTED = -(2**31)


def operation_bits(operations: Iterable[Operation]) -> int:
    """Kafka's bit set of operations (Utils.to32BitField): bit n for operation code n."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation
    return bits


# Every supported operation's bit: the answer with ACLs off or for a super user.
_EVERY_OPERATION = {kind: operation_bits(ops) for kind, ops in SUPPORTED_OPERATIONS.items()}


class InvalidAcl(ValueError):
    """An ACL that cannot be stored (Kafka answers INVALID_REQUEST); the message says why."""


_STORABLE_TYPES = frozenset(ResourceType) - {ResourceType.ANY, ResourceType.UNKNOWN}
_STORABLE_PATTERNS = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_STORABLE_OPERATIONS = frozenset(Operation) - {Operation.ANY, Operation.UNKNOWN}
_STORABLE_PERMISSIONS = frozenset({Permission.ALLOW, Permission.DENY})


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission
    # Worked out once: the store's indexes look a binding up several times.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission,
        )
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    def check(self) -> AclBinding:
        """The binding, if it can be stored; InvalidAcl otherwise."""
        if self.resource_type not in _STORABLE_TYPES:
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in _STORABLE_PATTERNS:
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation not in _STORABLE_OPERATIONS:
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in _STORABLE_PERMISSIONS:
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("Resource name should not be empty")
        kind, colon, name = self.principal.partition(":")
        if not colon or not kind or not name:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}`")
        if not self.host:
            raise InvalidAcl("Invalid host: it should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        return self

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None (or ANY) matches everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def check(self) -> AclFilter:
        for kind in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if kind.name == "UNKNOWN":
                raise InvalidAcl(f"Invalid filter: {type(kind).__name__} UNKNOWN")
        return self

    def matches(self, binding: AclBinding) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != binding.resource_type
        ):
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not Operation.ANY and self.operation != binding.operation:
            return False
        return self.permission is Permission.ANY or self.permission == binding.permission

    def _matches_pattern(self, binding: AclBinding) -> bool:
        pattern = self.pattern_type
        if pattern is PatternType.MATCH:
            # Every pattern that applies to the named resource (Kafka's MATCH filter).
            name = self.resource_name
            return name is None or binding.matches_resource(binding.resource_type, name)
        if pattern is not PatternType.ANY and pattern != binding.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name


class AclLimitReached(Exception):
    """The store holds max_acls ACLs already (Kafka has no such bound: POLICY_VIOLATION)."""


# A resource pattern's ACLs, in the order they were added, each with its sequence number.
_Bucket = dict[AclBinding, int]
# What the index holds for a pattern: its one ACL itself (most patterns have one, and a
# dict each would double the objects the garbage collector traces), or a bucket.
_Held = AclBinding | _Bucket
# A resource pattern: (type, pattern type, name).
_Pattern = tuple[ResourceType, PatternType, str]
# (principal, host) of an entry, and the entries a request matches.
_Entry = tuple[str, str]
# Past this many ACLs on one resource pattern, they are indexed by entry too.
ENTRY_INDEX_FROM = 16
# Decisions remembered until the ACLs change (a Metadata of every topic asks one per topic).
DECISIONS_KEPT = 10_000
# Candidate ACLs a filter examines per piece of a DescribeAcls or DeleteAcls.
ACLS_PER_PIECE = 2_000
_CONCRETE_TYPES = tuple(
    t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)


_EVERYTHING = AclFilter()


class Acls:
    """The cluster's ACLs and the decisions they make (the rules above).

    Indexed as Kafka's authorizer indexes them: by resource type, pattern type and name.
    A decision reads the LITERAL patterns named like the resource and `*`, and the
    PREFIXED ones at each prefix length some PREFIXED pattern of the type has: its cost
    does not grow with the number of ACLs. Selections by filter (DescribeAcls,
    DeleteAcls) read only the patterns a filter names, and come in pieces.
    """

    def __init__(
        self,
        *,
        enabled: bool = False,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
        max_acls: int | None = None,
    ) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.max_acls = max_acls
        self._bindings: dict[AclBinding, int] = {}  # insertion order kept, sequence numbers
        self._next_sequence = 0
        # (type, pattern type) -> name -> the pattern's ACLs.
        self._buckets: dict[tuple[ResourceType, PatternType], dict[str, _Held]] = {}
        # The ACLs of large buckets by entry: (type, pattern type, name) -> entry -> ACLs.
        self._by_entry: dict[_Pattern, dict[_Entry, _Bucket]] = {}
        # Per type, how many PREFIXED patterns have each length; the lengths, sorted.
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        self._sorted_lengths: dict[ResourceType, list[int]] = {}
        # ALLOW ACLs by (type, principal, host, operation), for allows_some.
        # Keyed by plain ints and strings: the collector stops tracing such tuples.
        self._allow_counts: dict[tuple[int, str, str, int], int] = {}
        # Decisions of `allows` since the ACLs last changed, at most DECISIONS_KEPT.
        self._decisions: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}

    def __len__(self) -> int:
        return len(self._bindings)

    def add(self, binding: AclBinding) -> None:
        """Store the ACL (once); InvalidAcl if it cannot be stored, AclLimitReached when
        the store is full."""
        binding.check()
        if binding in self._bindings:
            return
        if self.max_acls is not None and len(self._bindings) >= self.max_acls:
            raise AclLimitReached(f"the broker holds {self.max_acls:,} ACLs, its max_acls")
        if self._decisions:
            self._decisions.clear()
        sequence = self._next_sequence
        self._next_sequence = sequence + 1
        self._bindings[binding] = sequence
        kind, pattern, name = binding.resource_type, binding.pattern_type, binding.resource_name
        names = self._buckets.setdefault((kind, pattern), {})
        held = names.get(name)
        if held is None:
            names[name] = binding
            if pattern is PatternType.PREFIXED:
                lengths = self._prefix_lengths.setdefault(kind, {})
                lengths[len(name)] = lengths.get(len(name), 0) + 1
                self._sorted_lengths.pop(kind, None)
        else:
            if isinstance(held, AclBinding):
                held = names[name] = {held: self._bindings[held]}
            held[binding] = sequence
            key = (kind, pattern, name)
            by_entry = self._by_entry.get(key)
            if by_entry is not None:
                by_entry.setdefault((binding.principal, binding.host), {})[binding] = sequence
            elif len(held) > ENTRY_INDEX_FROM:
                by_entry = self._by_entry[key] = {}
                for stored, stored_sequence in held.items():
                    entry = (stored.principal, stored.host)
                    by_entry.setdefault(entry, {})[stored] = stored_sequence
        if binding.permission is Permission.ALLOW:
            counted = (int(kind), binding.principal, binding.host, int(binding.operation))
            self._allow_counts[counted] = self._allow_counts.get(counted, 0) + 1

    def remove(self, binding: AclBinding) -> bool:
        """Drop the ACL; whether it was stored."""
        if self._bindings.pop(binding, None) is None:
            return False
        if self._decisions:
            self._decisions.clear()
        kind, pattern, name = binding.resource_type, binding.pattern_type, binding.resource_name
        names = self._buckets[kind, pattern]
        held = names[name]
        if isinstance(held, dict):
            del held[binding]
            key = (kind, pattern, name)
            by_entry = self._by_entry.get(key)
            if by_entry is not None:
                entry = (binding.principal, binding.host)
                del by_entry[entry][binding]
                if not by_entry[entry]:
                    del by_entry[entry]
            if len(held) == 1:  # one ACL left: held alone
                self._by_entry.pop(key, None)
                names[name] = next(iter(held))
        else:  # the pattern's last ACL
            del names[name]
            if pattern is PatternType.PREFIXED:
                lengths = self._prefix_lengths[kind]
                lengths[len(name)] -= 1
                if not lengths[len(name)]:
                    del lengths[len(name)]
                    self._sorted_lengths.pop(kind, None)
        if binding.permission is Permission.ALLOW:
            counted = (int(kind), binding.principal, binding.host, int(binding.operation))
            self._allow_counts[counted] -= 1
            if not self._allow_counts[counted]:
                del self._allow_counts[counted]
        return True

    def describe(self, selection: AclFilter) -> list[AclBinding]:
        """Every ACL the filter selects, in the order they were added."""
        return [binding for piece in self.select(selection) for binding in piece]

    def delete(self, selection: AclFilter) -> list[AclBinding]:
        return [binding for piece in self.delete_in_pieces(selection) for binding in piece]

    def select(
        self, selection: AclFilter, piece_size: int = ACLS_PER_PIECE
    ) -> Iterator[list[AclBinding]]:
        """The ACLs the filter selects, in the order they were added, as pieces: each
        from at most `piece_size` candidates (the ACLs stored when the first piece is
        taken, of the patterns the filter names, or all of them)."""
        candidates = self._candidates(selection)
        everything = selection == _EVERYTHING
        while piece := list(itertools.islice(candidates, piece_size)):
            yield piece if everything else [b for b in piece if selection.matches(b)]

    def delete_in_pieces(
        self, selection: AclFilter, piece_size: int = ACLS_PER_PIECE
    ) -> Iterator[list[AclBinding]]:
        """Delete what the filter selects, a piece at a time; each piece lists the ACLs
        it deleted."""
        for piece in self.select(selection, piece_size):
            yield [binding for binding in piece if self.remove(binding)]

    def _candidates(self, selection: AclFilter) -> Iterator[AclBinding]:
        name = selection.resource_name
        if name is None:
            yield from tuple(self._bindings)
            return
        kinds = (
            _CONCRETE_TYPES
            if selection.resource_type is ResourceType.ANY
            else (selection.resource_type,)
        )
        helds: list[_Held] = []
        for kind in kinds:
            if selection.pattern_type is PatternType.MATCH:
                helds += [held for _, held in self._applying(kind, name)]
                continue
            for pattern in (PatternType.LITERAL, PatternType.PREFIXED):
                if selection.pattern_type in (PatternType.ANY, pattern):
                    held = self._buckets.get((kind, pattern), {}).get(name)
                    if held is not None:
                        helds.append(held)
        if len(helds) == 1:
            yield from (helds[0],) if isinstance(helds[0], AclBinding) else tuple(helds[0])
            return
        # Snapshots taken at C speed ((sequence, ACL) pairs), merged in the order added.
        in_order = heapq.merge(
            *(
                ((self._bindings[held], held),)
                if isinstance(held, AclBinding)
                else tuple(zip(held.values(), held, strict=True))
                for held in helds
            )
        )
        yield from (binding for _, binding in in_order)

    def _applying(self, kind: ResourceType, name: str) -> list[tuple[_Pattern, _Held]]:
        """The patterns that apply to the resource, with their ACLs: LITERAL ones named
        like it or `*`, PREFIXED ones its name starts with."""
        found = []
        literal = self._buckets.get((kind, PatternType.LITERAL))
        if literal:
            for literal_name in (name, WILDCARD) if name != WILDCARD else (name,):
                held = literal.get(literal_name)
                if held is not None:
                    found.append(((kind, PatternType.LITERAL, literal_name), held))
        prefixed = self._buckets.get((kind, PatternType.PREFIXED))
        if prefixed:
            for length in self._lengths(kind):
                if length > len(name):
                    break
                prefix = name[:length]
                held = prefixed.get(prefix)
                if held is not None:
                    found.append(((kind, PatternType.PREFIXED, prefix), held))
        return found

    def _lengths(self, kind: ResourceType) -> list[int]:
        lengths = self._sorted_lengths.get(kind)
        if lengths is None:
            lengths = self._sorted_lengths[kind] = sorted(self._prefix_lengths.get(kind, ()))
        return lengths

    def _entry_acls(
        self, pattern: _Pattern, held: _Held, entries: tuple[_Entry, ...]
    ) -> Iterator[AclBinding]:
        """The pattern's ACLs for the entries: through the entry index of a large bucket,
        by reading a small one."""
        if isinstance(held, AclBinding):
            if (held.principal, held.host) in entries:
                yield held
            return
        by_entry = self._by_entry.get(pattern)
        if by_entry is None:
            yield from (b for b in held if (b.principal, b.host) in entries)
            return
        for entry in entries:
            yield from by_entry.get(entry, ())

    @staticmethod
    def _entries(principal: str, host: str) -> tuple[_Entry, ...]:
        """The (principal, host) entries that apply to a client."""
        return tuple(
            dict.fromkeys(
                (principal_, host_)
                for principal_ in (principal, EVERYONE)
                for host_ in (host, WILDCARD)
            )
        )

    def allows_some(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type is open to `operation` for the principal:
        an ALLOW for it (or ALL) naming the principal or everyone, on any pattern, that no
        DENY on every name (`*`) cancels (Kafka's authorizeByResourceType)."""
        if not self.enabled or principal in self.super_users:
            return True
        entries = self._entries(principal, host)
        operations = (operation, Operation.ALL)
        everything = self._buckets.get((resource_type, PatternType.LITERAL), {}).get(WILDCARD)
        if everything is not None and any(
            b.permission is Permission.DENY and b.operation in operations
            for b in self._entry_acls(
                (resource_type, PatternType.LITERAL, WILDCARD), everything, entries
            )
        ):
            return False
        counts = self._allow_counts
        return any(
            counts.get((resource_type, entry_principal, entry_host, op))
            for entry_principal, entry_host in entries
            for op in operations
        )

    def allows(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        decided = self._decisions.get(key)
        if decided is None:
            decided = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= DECISIONS_KEPT:
                self._decisions.clear()
            self._decisions[key] = decided
        return decided

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set of the operations Kafka supports on the resource type that the
        principal may do on resource `name` (all of them with ACLs off): each decided as
        `allows` decides it, from one read of the ACLs that apply."""
        if not self.enabled or principal in self.super_users:
            return _EVERY_OPERATION[resource_type]
        supported = SUPPORTED_OPERATIONS[resource_type]
        found = False
        allowed: set[Operation] = set()
        denied: set[Operation] = set()
        entries = self._entries(principal, host)
        for pattern, held in self._applying(resource_type, name):
            found = True
            for binding in self._entry_acls(pattern, held, entries):
                if binding.permission is Permission.DENY:
                    denied.add(binding.operation)
                else:
                    allowed.add(binding.operation)
        if Operation.ALL in denied:
            return 0
        if not found:
            return _EVERY_OPERATION[resource_type] if self.allow_if_no_acl else 0
        everything = Operation.ALL in allowed
        return operation_bits(
            operation
            for operation in supported
            if operation not in denied
            and (
                everything
                or operation in allowed
                or not allowed.isdisjoint(_IMPLIED_BY.get(operation, ()))
            )
        )

    def _decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        found = False
        allowed = False
        granting = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
        entries = self._entries(principal, host)
        for pattern, held in self._applying(resource_type, name):
            found = True
            for binding in self._entry_acls(pattern, held, entries):
                if binding.permission is Permission.DENY:
                    if binding.operation in (operation, Operation.ALL):
                        return False
                elif binding.operation in granting:
                    allowed = True
        return allowed or (not found and self.allow_if_no_acl)
