"""The authorizer's rules (security/acl.py, security/authorizer.py) on hand-picked cases:
Kafka's StandardAuthorizer semantics, one behaviour per test."""

from __future__ import annotations

import itertools

import pytest

from floodmark.security.acl import (
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
    new_binding,
    new_filter,
)
from floodmark.security.authorizer import (
    Authorizer,
    AuthorizerSettings,
    operations_of,
    parse_super_users,
)
from floodmark.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
HOST = "10.0.0.1"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
_ids = itertools.count()


def store(*bindings: tuple[ResourceType, str, PatternType, str, str, Op, AclPermissionType]
          ) -> AclStore:
    s = AclStore()
    for rt, name, pt, principal, host, op, perm in bindings:
        s.add(str(next(_ids)), new_binding(rt, name, pt, principal, host, op, perm))
    return s


def authz(s: AclStore, *, supers: str = "", everyone: bool = False) -> Authorizer:
    return Authorizer(s, AuthorizerSettings(parse_super_users(supers), everyone))


def test_no_acl_denies_unless_allow_everyone():
    assert not authz(store()).authorize(ALICE, HOST, Op.READ, T, "t")
    assert authz(store(), everyone=True).authorize(ALICE, HOST, Op.READ, T, "t")


def test_allow_everyone_only_where_the_resource_has_no_acl():
    s = store((T, "t", LIT, "User:bob", "*", Op.READ, ALLOW))
    a = authz(s, everyone=True)
    assert not a.authorize(ALICE, HOST, Op.READ, T, "t")  # t has ACLs: none for alice
    assert a.authorize(ALICE, HOST, Op.READ, T, "other")


def test_literal_prefixed_and_wildcard_patterns():
    a = authz(store((T, "orders", LIT, "User:alice", "*", Op.READ, ALLOW),
                    (T, "log-", PRE, "User:alice", "*", Op.WRITE, ALLOW),
                    (G, "*", LIT, "User:alice", "*", Op.READ, ALLOW)))
    assert a.authorize(ALICE, HOST, Op.READ, T, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, T, "orders2")
    assert a.authorize(ALICE, HOST, Op.WRITE, T, "log-a")
    assert not a.authorize(ALICE, HOST, Op.WRITE, T, "log")
    assert a.authorize(ALICE, HOST, Op.READ, G, "any-group")
    assert not a.authorize(BOB, HOST, Op.READ, G, "any-group")


def test_deny_wins_and_is_not_implied():
    a = authz(store((T, "t", LIT, "User:*", "*", Op.ALL, ALLOW),
                    (T, "t", LIT, "User:alice", "*", Op.READ, DENY)))
    assert not a.authorize(ALICE, HOST, Op.READ, T, "t")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")  # DENY Read does not deny Describe
    assert a.authorize(BOB, HOST, Op.READ, T, "t")


def test_implied_operations():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        a = authz(store((T, "t", LIT, "User:alice", "*", op, ALLOW)))
        assert a.authorize(ALICE, HOST, Op.DESCRIBE, T, "t"), op
        assert not a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "t"), op
    a = authz(store((T, "t", LIT, "User:alice", "*", Op.ALTER_CONFIGS, ALLOW)))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "t")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, T, "t")
    a = authz(store((T, "t", LIT, "User:alice", "*", Op.DESCRIBE, ALLOW)))
    assert not a.authorize(ALICE, HOST, Op.READ, T, "t")


def test_host_matching():
    a = authz(store((T, "t", LIT, "User:alice", HOST, Op.READ, ALLOW)))
    assert a.authorize(ALICE, HOST, Op.READ, T, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, T, "t")


def test_super_users_pass_deny():
    a = authz(store((T, "t", LIT, "User:*", "*", Op.ALL, DENY)), supers="User:admin;User:bob")
    assert a.authorize(BOB, HOST, Op.WRITE, T, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, T, "t")


def test_authorize_any_by_resource_type():
    assert not authz(store()).authorize_any(ALICE, HOST, Op.WRITE, T)
    a = authz(store((T, "a-", PRE, "User:alice", "*", Op.WRITE, ALLOW)))
    assert a.authorize_any(ALICE, HOST, Op.WRITE, T)
    # a prefix DENY covering the ALLOW takes it away
    a = authz(store((T, "a-x", LIT, "User:alice", "*", Op.WRITE, ALLOW),
                    (T, "a-", PRE, "User:alice", "*", Op.WRITE, DENY)))
    assert not a.authorize_any(ALICE, HOST, Op.WRITE, T)
    a = authz(store((T, "*", LIT, "User:alice", "*", Op.WRITE, ALLOW)))
    assert a.authorize_any(ALICE, HOST, Op.WRITE, T)
    # only the operation itself or ALL count (Read does not imply Write)
    a = authz(store((T, "x", LIT, "User:alice", "*", Op.READ, ALLOW)))
    assert not a.authorize_any(ALICE, HOST, Op.WRITE, T)


def test_authorized_operations_bits():
    a = authz(store((T, "t", LIT, "User:alice", "*", Op.READ, ALLOW)))
    ops = set(operations_of(a.authorized_operations(ALICE, HOST, T, "t")))
    assert ops == {Op.READ, Op.DESCRIBE}
    a = authz(store(), supers="User:alice")
    # (a group's five, as Kafka 4's AclEntry has them: its configs are resources since KIP-848;
    # librdkafka's 0081 expects 5 from DescribeConsumerGroups for a super user)
    assert set(operations_of(a.authorized_operations(ALICE, HOST, G, "g"))) == {
        Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}


def test_filters():
    b_lit = new_binding(T, "orders", LIT, "User:alice", "*", Op.READ, ALLOW)
    b_pre = new_binding(T, "ord", PRE, "User:bob", "*", Op.WRITE, ALLOW)
    b_wild = new_binding(T, "*", LIT, "User:bob", "*", Op.READ, DENY)
    b_group = new_binding(G, "orders", LIT, "User:alice", "*", Op.READ, ALLOW)
    every = [b_lit, b_pre, b_wild, b_group]

    def sel(f: AclBindingFilter) -> set[str]:
        return {str(b) for b in every if f.matches(b)}

    assert sel(AclBindingFilter()) == {str(b) for b in every}
    assert sel(AclBindingFilter(T, "orders", PatternType.MATCH)) == {
        str(b_lit), str(b_pre), str(b_wild)}
    assert sel(AclBindingFilter(T, "orders", PatternType.ANY)) == {str(b_lit)}
    assert sel(AclBindingFilter(ResourceType.ANY, "orders", LIT)) == {str(b_lit), str(b_group)}
    assert sel(AclBindingFilter(T, None, PRE)) == {str(b_pre)}
    assert sel(AclBindingFilter(principal="User:bob", permission=DENY)) == {str(b_wild)}


@pytest.mark.parametrize("args,message", [
    ((ResourceType.ANY, "t", LIT, "User:a", "*", Op.READ, ALLOW), "Invalid resourceType"),
    ((ResourceType.UNKNOWN, "t", LIT, "User:a", "*", Op.READ, ALLOW), "Invalid resourceType"),
    ((99, "t", LIT, "User:a", "*", Op.READ, ALLOW), "unknown resource type 99"),
    ((T, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "Invalid patternType"),
    ((T, "t", LIT, "User:a", "*", Op.ANY, ALLOW), "Invalid operation"),
    ((T, "t", LIT, "User:a", "*", Op.READ, AclPermissionType.ANY), "Invalid permissionType"),
    ((T, "", LIT, "User:a", "*", Op.READ, ALLOW), "should not be empty"),
    ((C, "other", LIT, "User:a", "*", Op.ALTER, ALLOW), "kafka-cluster"),
    ((T, "t", LIT, "alice", "*", Op.READ, ALLOW), "Could not parse principal"),
])
def test_new_binding_refuses(args, message):
    with pytest.raises(AclError, match=message):
        new_binding(*args)


def test_new_filter_refuses_unknown():
    with pytest.raises(AclError, match="UNKNOWN"):
        new_filter(ResourceType.UNKNOWN, None, PatternType.ANY, None, None, Op.ANY,
                   AclPermissionType.ANY)
    assert new_filter(1, None, 1, None, None, 1, 1) == AclBindingFilter()


def test_store_generation_and_index_follow_changes():
    s = AclStore()
    a = authz(s)
    assert not a.authorize(ALICE, HOST, Op.READ, T, "t")
    s.add("x", new_binding(T, "t", LIT, "User:alice", "*", Op.READ, ALLOW))
    assert a.authorize(ALICE, HOST, Op.READ, T, "t")
    g = s.generation
    s.remove("x")
    assert s.generation > g
    assert not a.authorize(ALICE, HOST, Op.READ, T, "t")
