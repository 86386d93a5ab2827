"""ACLs as Kafka writes them: a binding is a resource pattern (type, name, LITERAL or PREFIXED)
and an entry (principal, host, operation, ALLOW or DENY). Filters (DescribeAcls, DeleteAcls)
match bindings with ANY, MATCH and nulls. Kafka's numbers for every enum (they are on the wire).

Pure values and rules; who may do what given a set of bindings is ``authorizer.py``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from floodmark.errors import FloodmarkError
from floodmark.security.principal import parse_principal

CLUSTER_NAME = "kafka-cluster"
"""The one name of the Cluster resource."""
WILDCARD = "*"
"""A LITERAL resource name, principal name or host matching every one."""
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
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


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = frozenset({
    ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN, ResourceType.USER})

# The operations each resource type has (Kafka's AclEntry.supportedOperations): what
# kafka-acls accepts, and the bits KIP-430's authorized operations may set.
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    # (DescribeConfigs / AlterConfigs on a group: its group configs, KIP-848 / KIP-932)
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


class AclError(FloodmarkError, ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST on the wire); one line, no secret."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    """``Type:name`` (``User:alice``, ``User:*``)."""
    host: str
    """A client address, or ``*``."""
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        e = self.entry
        return (f"{e.permission.name} {e.principal} from {e.host} {e.operation.name} "
                f"on {self.pattern}")


_E = TypeVar("_E", bound=enum.IntEnum)


def _enum(cls: type[_E], value: int, what: str) -> _E:
    try:
        return cls(value)
    except ValueError:
        raise AclError(f"unknown {what} {value}") from None


def new_binding(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                host: str | None, operation: int, permission: int) -> AclBinding:
    """A binding CreateAcls may store, as Kafka's controller validates one (AclError why not):
    concrete types (no ANY, MATCH or UNKNOWN), a non-empty name (``kafka-cluster`` for the
    Cluster), a ``Type:name`` principal, a host."""
    rtype = _enum(ResourceType, resource_type, "resource type")
    if rtype not in CONCRETE_RESOURCE_TYPES:
        raise AclError(f"Invalid resourceType {rtype.name}")
    ptype = _enum(PatternType, pattern_type, "pattern type")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {ptype.name}")
    op = _enum(AclOperation, operation, "operation")
    if op in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclError(f"Invalid operation {op.name}")
    perm = _enum(AclPermissionType, permission, "permission type")
    if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"Invalid permissionType {perm.name}")
    if not name:
        raise AclError("Resource name should not be empty")
    if rtype is ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if principal is None:
        raise AclError("Principal should not be null")
    try:
        parse_principal(principal)
    except ValueError:
        raise AclError(f"Could not parse principal from {principal!r}") from None
    if not host:
        raise AclError("Host should not be empty")
    return AclBinding(ResourcePattern(rtype, name, ptype),
                      AccessControlEntry(principal, host, op, perm))


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: ANY / None match everything in their place;
    MATCH selects the bindings that would apply to the named resource (LITERAL of the name,
    the ``*`` LITERAL, PREFIXED of any prefix of the name)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def fields(self) -> tuple[int, str | None, int, str | None, str | None, int, int]:
        """``new_filter``'s arguments (what an RPC carries)."""
        return (int(self.resource_type), self.name, int(self.pattern_type), self.principal,
                self.host, int(self.operation), int(self.permission))

    def matches(self, b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        if self.resource_type is not ResourceType.ANY and p.resource_type is not \
                self.resource_type:
            return False
        if not self._pattern_matches(p):
            return False
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation is AclOperation.ANY or self.operation is e.operation)
                and (self.permission is AclPermissionType.ANY or self.permission is e.permission))

    def _pattern_matches(self, p: ResourcePattern) -> bool:
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if p.pattern_type is PatternType.LITERAL:
                return p.name in (self.name, WILDCARD)
            return self.name.startswith(p.name)
        if self.pattern_type is not PatternType.ANY and self.pattern_type is not p.pattern_type:
            return False
        return self.name is None or self.name == p.name


def new_filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
               host: str | None, operation: int, permission: int) -> AclBindingFilter:
    """A filter as DescribeAcls / DeleteAcls send it; AclError when an element is UNKNOWN (or
    not a number Kafka has), as Kafka answers INVALID_REQUEST for those."""
    out = AclBindingFilter(
        _enum(ResourceType, resource_type, "resource type"), name,
        _enum(PatternType, pattern_type, "pattern type"), principal, host,
        _enum(AclOperation, operation, "operation"),
        _enum(AclPermissionType, permission, "permission type"))
    if out.resource_type is ResourceType.UNKNOWN or out.pattern_type is PatternType.UNKNOWN \
            or out.operation is AclOperation.UNKNOWN \
            or out.permission is AclPermissionType.UNKNOWN:
        raise AclError("Filter contains UNKNOWN elements")
    return out


class AclStore:
    """The ACLs in force, by id (what the metadata records say), and the index the authorizer
    looks them up with, rebuilt lazily after a change. ``generation`` moves on every change."""

    def __init__(self) -> None:
        self._by_id: dict[str, AclBinding] = {}
        self._ids: dict[AclBinding, str] = {}
        self.generation = 0
        self._index: AclIndex | None = None

    def __len__(self) -> int:
        return len(self._by_id)

    def items(self) -> Iterator[tuple[str, AclBinding]]:
        return iter(list(self._by_id.items()))

    def id_of(self, binding: AclBinding) -> str | None:
        return self._ids.get(binding)

    def add(self, acl_id: str, binding: AclBinding) -> None:
        old = self._by_id.get(acl_id)
        if old is not None:
            self._ids.pop(old, None)
        self._by_id[acl_id] = binding
        self._ids[binding] = acl_id
        self._changed()

    def remove(self, acl_id: str) -> AclBinding | None:
        binding = self._by_id.pop(acl_id, None)
        if binding is not None:
            self._ids.pop(binding, None)
            self._changed()
        return binding

    def matching(self, flt: AclBindingFilter) -> list[tuple[str, AclBinding]]:
        return [(i, b) for i, b in self._by_id.items() if flt.matches(b)]

    def _changed(self) -> None:
        self.generation += 1
        self._index = None

    @property
    def index(self) -> AclIndex:
        if self._index is None:
            self._index = AclIndex(self._by_id.values())
        return self._index


class AclIndex:
    """Bindings by resource type, then LITERAL name or PREFIXED prefix: the entries that apply
    to one resource are found with one lookup per prefix length of its name."""

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self.literal: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        self.prefixed: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in bindings:
            table = self.literal if b.pattern.pattern_type is PatternType.LITERAL \
                else self.prefixed
            table.setdefault(b.pattern.resource_type, {}).setdefault(
                b.pattern.name, []).append(b.entry)
            self.by_type.setdefault(b.pattern.resource_type, []).append(b)
        self.max_prefix = {t: max(map(len, names)) for t, names in self.prefixed.items()}

    def entries_for(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry whose pattern applies to ``name``: its LITERAL, the ``*`` LITERAL and
        each PREFIXED pattern that ``name`` starts with."""
        out: list[AccessControlEntry] = []
        literal = self.literal.get(resource_type)
        if literal:
            out.extend(literal.get(name, ()))
            if name != WILDCARD:
                out.extend(literal.get(WILDCARD, ()))
        prefixed = self.prefixed.get(resource_type)
        if prefixed:
            for i in range(1, min(len(name), self.max_prefix[resource_type]) + 1):
                out.extend(prefixed.get(name[:i], ()))
        return out
