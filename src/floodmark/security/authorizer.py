"""Who may do what: Kafka's StandardAuthorizer rules over an ``acl.AclStore``.

For one action (principal, client host, operation, resource):

1. a principal of ``super.users`` is allowed, whatever the ACLs say;
2. the entries that apply are those of the resource's LITERAL name, of the ``*`` LITERAL and of
   every PREFIXED pattern the name starts with; when there are none at all, the answer is
   ``allow.everyone.if.no.acl.found`` (false by default);
3. of those, an entry counts when its principal is the caller's or ``User:*`` and its host is
   the caller's address or ``*``;
4. a DENY entry for the operation (or ALL) denies: DENY wins over any ALLOW;
5. an ALLOW entry for the operation, for ALL, or for an operation that implies it allows:
   Describe is implied by Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs.
   (An implication never runs the other way, and a DENY is never implied: DENY Read does not
   deny Describe.)

``authorize_any`` is Kafka's ``authorizeByResourceType`` (KIP-679): may the caller do the
operation on at least one resource of a type (InitProducerId of an idempotent producer asks
this for Write on topics). ``authorized_operations`` is KIP-430's bit field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
)
from floodmark.security.principal import KafkaPrincipal, parse_principal

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""``authorizer.class.name`` values that turn authorization on (Kafka's KRaft authorizer; the
ZooKeeper-era class name is taken too, as the same rules)."""
AUTHORIZER_CLASS_NAMES = frozenset({STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"})

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""KIP-430: the field's value when the request did not ask for authorized operations."""

_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}


def allowing_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The ALLOW operations that grant ``operation``: itself, ALL, and those implying it."""
    return _IMPLIED.get(operation, frozenset({operation})) | {AclOperation.ALL}


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's format). ValueError, one line."""
    out = set()
    for part in text.split(";"):
        part = part.strip()
        if part:
            out.add(str(parse_principal(part)))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorizer_settings(class_name: str, super_users: str, allow_everyone_if_no_acl_found: bool
                        ) -> AuthorizerSettings | None:
    """The broker settings (``authorizer.class.name``, ``super.users``,
    ``allow.everyone.if.no.acl.found``) checked; None when no authorizer is configured.
    ValueError, one line, for a class floodmark does not have or a bad principal."""
    class_name = class_name.strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name={class_name}: floodmark has only "
                         f"{STANDARD_AUTHORIZER}")
    try:
        supers = parse_super_users(super_users)
    except ValueError as exc:
        raise ValueError(f"super.users: {exc}") from None
    return AuthorizerSettings(supers, allow_everyone_if_no_acl_found)


class Authorizer:
    def __init__(self, acls: AclStore, settings: AuthorizerSettings) -> None:
        self.acls = acls
        self.settings = settings

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.settings.super_users

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if self.is_super_user(principal):
            return True
        entries = self.acls.index.entries_for(resource_type, name)
        if not entries:
            return self.settings.allow_everyone_if_no_acl_found
        who = str(principal)
        allowing = allowing_operations(operation)
        allowed = False
        for e in entries:
            if e.principal != who and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.host != host and e.host != WILDCARD:
                continue
            if e.permission is AclPermissionType.DENY:
                if e.operation is operation or e.operation is AclOperation.ALL:
                    return False
            elif e.operation in allowing:
                allowed = True
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Allowed ``operation`` on at least one resource of ``resource_type`` that no DENY
        covers (Kafka's authorizeByResourceType: only entries for the operation itself or ALL
        count, no implied ones)."""
        # As Kafka: a name no ACL can be about, so super users (and allow.everyone.if.no.acl.
        # found where no wildcard or prefix covers it) pass whatever the DENY entries say.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        who = str(principal)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for b in self.acls.index.by_type.get(resource_type, ()):
            e = b.entry
            if e.host != host and e.host != WILDCARD:
                continue
            if e.principal != who and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.operation is not operation and e.operation is not AclOperation.ALL:
                continue
            literal = b.pattern.pattern_type is PatternType.LITERAL
            if e.permission is AclPermissionType.DENY:
                if literal and b.pattern.name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(b.pattern.name)
            elif literal and b.pattern.name == WILDCARD:
                return True
            else:
                allow.append((b.pattern.pattern_type, b.pattern.name))
        for pattern_type, name in allow:
            if pattern_type is PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """KIP-430: bit ``1 << op`` set for each operation of the resource type allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits


def operations_of(bits: int) -> Iterable[AclOperation]:
    """The operations of a KIP-430 bit field."""
    return [op for op in AclOperation if bits >= 0 and bits & (1 << int(op))]
