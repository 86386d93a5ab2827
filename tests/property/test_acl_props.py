"""Invariants of the authorizer's rules, over random ACL sets (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
    new_binding,
)
from floodmark.security.authorizer import Authorizer, AuthorizerSettings, allowing_operations
from floodmark.security.principal import KafkaPrincipal

TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID]
NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
OPS = [op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN)]

bindings = st.builds(
    lambda rt, name, pt, principal, host, op, perm: new_binding(
        rt, name, pt, principal, host, op, perm),
    st.sampled_from(TYPES), st.sampled_from(NAMES),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(OPS),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]))
actions = st.tuples(st.sampled_from(["alice", "bob", "carol"]),
                    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
                    st.sampled_from(OPS), st.sampled_from(TYPES),
                    st.sampled_from(["a", "ab", "abc", "abd", "b", "c"]))


def make(acls: list[AclBinding], *, supers: frozenset[str] = frozenset(),
         everyone: bool = False) -> Authorizer:
    s = AclStore()
    for i, b in enumerate(acls):
        s.add(str(i), b)
    return Authorizer(s, AuthorizerSettings(supers, everyone))


def brute_force(acls: list[AclBinding], principal: str, host: str, op: AclOperation,
                rt: ResourceType, name: str, everyone: bool) -> bool:
    """The rules written as plainly as possible, without the index."""
    def applies(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type is not rt:
            return False
        if p.pattern_type is PatternType.LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    on_resource = [b for b in acls if applies(b)]
    if not on_resource:
        return everyone
    mine = [b.entry for b in on_resource if b.entry.principal in (principal, "User:*")
            and b.entry.host in (host, "*")]
    if any(e.permission is AclPermissionType.DENY and e.operation in (op, AclOperation.ALL)
           for e in mine):
        return False
    return any(e.permission is AclPermissionType.ALLOW and e.operation in allowing_operations(op)
               for e in mine)


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings, max_size=12), actions, st.booleans())
def test_index_agrees_with_the_plain_rules(acls, action, everyone):
    user, host, op, rt, name = action
    a = make(acls, everyone=everyone)
    assert a.authorize(KafkaPrincipal.user(user), host, op, rt, name) == brute_force(
        acls, f"User:{user}", host, op, rt, name, everyone)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=12), actions, st.booleans())
def test_deny_wins(acls, action, everyone):
    user, host, op, rt, name = action
    deny = new_binding(rt, name, PatternType.LITERAL, f"User:{user}", "*", op,
                       AclPermissionType.DENY)
    assert not make([*acls, deny], everyone=everyone).authorize(
        KafkaPrincipal.user(user), host, op, rt, name)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=12), actions, st.booleans())
def test_super_user_always_allowed(acls, action, everyone):
    user, host, op, rt, name = action
    a = make(acls, supers=frozenset({f"User:{user}"}), everyone=everyone)
    assert a.authorize(KafkaPrincipal.user(user), host, op, rt, name)
    assert a.authorize_any(KafkaPrincipal.user(user), host, op, rt)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=12), actions)
def test_implied_never_grants_more_than_its_parent(acls, action):
    """Describe is allowed only where Read, Write, Delete, Alter or Describe itself would be
    (nothing grants Describe that grants none of them); the same for DescribeConfigs."""
    user, host, _op, rt, name = action
    a = make(acls)
    me = KafkaPrincipal.user(user)
    for implied, parents in ((AclOperation.DESCRIBE, allowing_operations(AclOperation.DESCRIBE)),
                             (AclOperation.DESCRIBE_CONFIGS,
                              allowing_operations(AclOperation.DESCRIBE_CONFIGS))):
        if a.authorize(me, host, implied, rt, name):
            assert any(a.authorize(me, host, p, rt, name) for p in parents
                       if p is not AclOperation.ALL) or any(
                b.entry.operation is AclOperation.ALL for b in acls)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, max_size=12), actions)
def test_authorize_any_when_some_resource_is_allowed(acls, action):
    """Allowed on one concrete resource by an entry for the operation itself (or ALL) implies
    allowed by resource type."""
    user, host, op, rt, name = action
    a = make(acls)
    me = KafkaPrincipal.user(user)
    direct = [b for b in acls if b.entry.operation in (op, AclOperation.ALL)]
    if make(direct).authorize(me, host, op, rt, name) and a.authorize(me, host, op, rt, name):
        assert a.authorize_any(me, host, op, rt)


@settings(max_examples=100, deadline=None)
@given(st.lists(bindings, max_size=12), actions)
def test_authorized_operations_agree_with_authorize(acls, action):
    user, host, _op, rt, name = action
    a = make(acls)
    me = KafkaPrincipal.user(user)
    bits = a.authorized_operations(me, host, rt, name)
    for op in SUPPORTED_OPERATIONS[rt]:
        assert bool(bits & (1 << op)) == a.authorize(me, host, op, rt, name)
