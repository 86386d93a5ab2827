"""KIP-848's online migration as pure rules: a classic group's conversion into a consumer group
(records in Kafka's order, epochs and assignments kept), classic protocol members under the
consumer group's reconciliation (REBALANCE_IN_PROGRESS when they must rejoin, no partition held
twice), the downgrade when the last consumer-protocol member goes, the policy, and the records
a new coordinator replays."""

from __future__ import annotations

import uuid

import pytest

from floodmark.client.group import encode_subscription
from floodmark.errors import ErrorCode
from floodmark.groups.consumer_group import classic_members
from floodmark.groups.consumer_group import records as rec
from floodmark.groups.consumer_group.core import (
    ConsumerGroupCoordinator,
    CoreConfig,
    Heartbeat,
)
from floodmark.groups.consumer_group.migration import (
    ClassicMember,
    ClassicSnapshot,
    MigrationPolicy,
    can_downgrade,
    can_upgrade,
)
from floodmark.groups.consumer_group.records import MemberState
from floodmark.wire.consumer_protocol import decode_assignment, encode_assignment

T = uuid.UUID(int=7)
TOPICS = {"t": rec.TopicMetadata(T, "t", 4)}


def parts(*ps: int) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((T, p) for p in ps)


def classic_group(generation: int = 5) -> ClassicSnapshot:
    """Two classic members (range), each with two partitions of ``t``."""
    sub = encode_subscription(["t"])
    return ClassicSnapshot("g", generation, "consumer", "range", "a", tuple(
        ClassicMember(m, None, m, "/127.0.0.1", 6000, 30_000, (("range", sub),),
                      encode_assignment({"t": ps}, 0))
        for m, ps in (("a", (0, 1)), ("b", (2, 3)))))


def coordinator(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
                ) -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=45_000,
                                               heartbeat_interval_ms=1_000,
                                               migration_policy=policy))


def join_consumer(c: ConsumerGroupCoordinator, member: str = "k"):  # type: ignore[no-untyped-def]
    return c.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=10_000,
                                 subscribed_topic_names=("t",), owned=frozenset()), TOPICS, 0)


def rejoin_classic(c: ConsumerGroupCoordinator, member: str,
                   owned: dict[str, list[int]] | None = None) -> classic_members.ClassicJoinAnswer:
    """A classic member's JoinGroup (v1 subscription: what it owns, empty for eager)."""
    import io
    import struct

    from kio.schema.consumer_protocol_subscription.v1 import data as v1
    from kio.serial import entity_writer

    out = io.BytesIO()
    out.write(struct.pack(">h", 1))
    entity_writer(v1.ConsumerProtocolSubscription)(out, v1.ConsumerProtocolSubscription(
        topics=("t",), user_data=None, owned_partitions=tuple(
            v1.TopicPartition(topic=t, partitions=tuple(ps))
            for t, ps in (owned or {}).items())))
    return classic_members.join(c, classic_members.ClassicJoin(
        "g", member, None, member, "/127.0.0.1", 6000, 30_000, "consumer",
        (("range", out.getvalue()),), True), TOPICS, 0)


def test_upgrade_keeps_generation_members_and_assignments_in_kafkas_record_order() -> None:
    c = coordinator()
    records = c.upgrade(classic_group(), TOPICS, 0)
    assert [type(r).__name__ for r in records] == [
        "MemberSubscription", "MemberSubscription", "GroupEpoch", "TargetMember",
        "TargetMember", "TargetEpoch", "MemberAssignment", "MemberAssignment",
        "PartitionMetadata"]
    g = c.groups["g"]
    assert (g.group_epoch, g.assignment_epoch) == (5, 5)
    assert {m: (x.member_epoch, x.current.assigned) for m, x in g.members.items()} == {
        "a": (5, parts(0, 1)), "b": (5, parts(2, 3))}
    assert g.target == {"a": parts(0, 1), "b": parts(2, 3)}
    classic = g.members["a"].subscription.classic
    assert classic is not None and classic.session_timeout_ms == 6000
    assert g.session_deadline_ms == {"a": 6000, "b": 6000}  # their own session timeouts
    # classic members heartbeat on at their generation: nothing changed yet
    assert classic_members.heartbeat(c, "g", "a", 5, None, 1) is ErrorCode.NONE
    assert classic_members.heartbeat(c, "g", "a", 4, None, 1) is ErrorCode.ILLEGAL_GENERATION


def test_the_policy_and_the_protocol_type_decide_the_upgrade() -> None:
    assert can_upgrade(MigrationPolicy.BIDIRECTIONAL, classic_group()) is None
    assert can_upgrade(MigrationPolicy.UPGRADE, classic_group()) is None
    assert "disabled" in (can_upgrade(MigrationPolicy.DOWNGRADE, classic_group()) or "")
    assert "disabled" in (can_upgrade(MigrationPolicy.DISABLED, classic_group()) or "")
    connect = ClassicSnapshot("g", 1, "connect", "default", None, ())
    assert "consumer embedded protocol" in (can_upgrade(MigrationPolicy.BIDIRECTIONAL,
                                                        connect) or "")
    assert MigrationPolicy.parse("UPGRADE") is MigrationPolicy.UPGRADE
    with pytest.raises(ValueError, match=r"group\.consumer\.migration\.policy"):
        MigrationPolicy.parse("sideways")


def test_a_consumer_member_joining_makes_classic_members_rejoin_and_no_partition_is_held_twice(
) -> None:
    c = coordinator()
    c.upgrade(classic_group(), TOPICS, 0)
    k = join_consumer(c)
    g = c.groups["g"]
    assert k.error is ErrorCode.NONE and g.group_epoch == 6
    assert k.assignment == frozenset()  # its target is still held by the classic members
    # the classic members must rejoin (the group epoch is ahead of theirs)
    assert classic_members.heartbeat(c, "g", "a", 5, None, 1) is \
        ErrorCode.REBALANCE_IN_PROGRESS
    err, _, _ = classic_members.sync(c, "g", "a", 5, None, "consumer", "range", 1)
    assert err is ErrorCode.REBALANCE_IN_PROGRESS
    assert g.target == {"a": parts(1), "b": parts(2, 3), "k": parts(0)}  # uniform, sticky
    # an eager member rejoins owning nothing: it moves to the new epoch at once
    ans = rejoin_classic(c, "b")
    assert ans.error is ErrorCode.NONE and ans.generation_id == 6
    err, assigned, version = classic_members.sync(c, "g", "b", 6, None, "consumer", "range", 1)
    assert err is ErrorCode.NONE and version == 1 and assigned == parts(2, 3)
    # a cooperative member rejoins owning its partitions: it revokes first (its generation
    # stays, SyncGroup answers what it keeps, its heartbeat asks it to rejoin)
    a = rejoin_classic(c, "a", {"t": [0, 1]})
    assert a.generation_id == 5
    assert g.members["a"].current.state == MemberState.UNREVOKED_PARTITIONS
    err, assigned, _ = classic_members.sync(c, "g", "a", 5, None, "consumer", "range", 1)
    assert err is ErrorCode.NONE and assigned == parts(1)
    assert classic_members.heartbeat(c, "g", "a", 5, None, 1) is \
        ErrorCode.REBALANCE_IN_PROGRESS
    assert c.heartbeat(Heartbeat("g", "k", k.member_epoch, owned=frozenset()), TOPICS,
                       2).assignment in (None, frozenset())  # 0 is not released yet
    held = [tp for m in g.members.values() for tp in m.holds]
    assert len(held) == len(set(held))
    a = rejoin_classic(c, "a", {"t": [1]})
    assert a.generation_id == 6
    k = c.heartbeat(Heartbeat("g", "k", k.member_epoch, owned=frozenset()), TOPICS, 2)
    assert k.assignment == parts(0)
    held = [tp for m in g.members.values() for tp in m.holds]
    assert sorted(held) == sorted(parts(0, 1, 2, 3))


def test_offsets_of_a_classic_member_are_checked_against_its_generation() -> None:
    c = coordinator()
    c.upgrade(classic_group(), TOPICS, 0)
    assert c.validate_commit("g", "a", 5, api_version=2) is ErrorCode.NONE
    assert c.validate_commit("g", "a", 4, api_version=2) is ErrorCode.ILLEGAL_GENERATION
    join_consumer(c)
    assert c.validate_commit("g", "k", 6, api_version=8) is ErrorCode.UNSUPPORTED_VERSION


def test_the_last_consumer_member_leaving_downgrades_to_a_stable_classic_group() -> None:
    c = coordinator()
    c.upgrade(classic_group(), TOPICS, 0)
    k = join_consumer(c)
    target = dict(c.groups["g"].target)
    left = c.heartbeat(Heartbeat("g", "k", -1), TOPICS, 1)
    assert left.error is ErrorCode.NONE
    assert "g" not in c.groups
    kinds = [(type(r).__name__, getattr(r, "member_id", "")) for r in left.records]
    assert kinds[-1] == ("GroupEpoch", "") and all(
        getattr(r, "value", getattr(r, "partitions", getattr(r, "epoch", None))) is None
        for r in left.records)  # every record a tombstone, the group epoch last
    classic = c.take_downgrade("g")
    assert classic is not None and c.take_downgrade("g") is None
    assert (classic.generation, classic.protocol_type, classic.protocol_name) == \
        (k.member_epoch, "consumer", "range")
    assert {m.member_id: decode_assignment(m.assignment) for m in classic.members} == {
        m: {"t": tuple(sorted(p for _, p in target[m]))} for m in ("a", "b")}
    assert {m.session_timeout_ms for m in classic.members} == {6000}


def test_no_downgrade_when_the_policy_forbids_it_or_consumer_members_remain() -> None:
    c = coordinator(MigrationPolicy.UPGRADE)
    c.upgrade(classic_group(), TOPICS, 0)
    join_consumer(c)
    c.heartbeat(Heartbeat("g", "k", -1), TOPICS, 1)
    assert c.take_downgrade("g") is None and set(c.groups["g"].members) == {"a", "b"}
    subs = {m: x.subscription for m, x in c.groups["g"].members.items()}
    plain = rec.Subscription(None, None, "", "", ("t",), None, 1, None)
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, {**subs, "k": plain, "j": plain},
                             "k")
    assert can_downgrade(MigrationPolicy.BIDIRECTIONAL, {**subs, "k": plain}, "k")
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, {"k": plain}, "k")  # empty after
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, {**subs, "k": plain}, "a")


def test_a_classic_members_session_timeout_is_its_own_and_expiry_downgrades() -> None:
    c = coordinator()
    c.upgrade(classic_group(), TOPICS, 0)
    join_consumer(c)
    assert c.next_deadline_ms() == 6000  # the classic members' 6 s, not the group's 45 s
    # the consumer member's session runs out while the classic members heartbeat
    for now_ms in range(3000, 48_000, 3000):
        for m in ("a", "b"):
            epoch = c.groups["g"].members[m].member_epoch
            if classic_members.heartbeat(c, "g", m, epoch, None,
                                         now_ms) is ErrorCode.REBALANCE_IN_PROGRESS:
                joined = rejoin_classic(c, m)  # then SyncGroup, as a client does
                classic_members.sync(c, "g", m, joined.generation_id, None, None, None,
                                     now_ms)
            c.groups["g"].session_deadline_ms[m] = now_ms + 6000
        if c.tick(TOPICS, now_ms):
            break
    assert "g" not in c.groups and c.take_downgrade("g") is not None


def test_a_new_coordinator_replays_classic_members_as_they_were() -> None:
    c = coordinator()
    records = list(c.upgrade(classic_group(), TOPICS, 0))
    records += join_consumer(c).records
    records += rejoin_classic(c, "a").records
    again = coordinator()
    for r in records:
        key, value = rec.encode(r)
        again.apply(rec.decode(key, value))
    again.loaded(["g"], 0)
    g, h = c.groups["g"], again.groups["g"]
    assert {m: (x.subscription, x.current) for m, x in g.members.items()} == \
        {m: (x.subscription, x.current) for m, x in h.members.items()}
    assert (h.group_epoch, h.assignment_epoch, h.target) == \
        (g.group_epoch, g.assignment_epoch, g.target)
    assert h.session_deadline_ms["a"] == 6000


def test_a_classic_join_refused_where_kafka_refuses_it() -> None:
    c = coordinator()
    c.upgrade(classic_group(), TOPICS, 0)
    join_consumer(c)
    other = classic_members.join(c, classic_members.ClassicJoin(
        "g", "", None, "x", "/h", 6000, 30_000, "consumer",
        (("roundrobin", encode_subscription(["t"])),), False), TOPICS, 0)
    assert other.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # a protocol a does not speak
    new = classic_members.join(c, classic_members.ClassicJoin(
        "g", "", None, "x", "/h", 6000, 30_000, "consumer",
        (("range", encode_subscription(["t"])),), True), TOPICS, 0)
    assert new.error is ErrorCode.MEMBER_ID_REQUIRED and new.member_id
    # the consumer-protocol member is not a classic one
    assert classic_members.heartbeat(c, "g", "k", 6, None, 0) is ErrorCode.UNKNOWN_MEMBER_ID
    garbled = classic_members.join(c, classic_members.ClassicJoin(
        "g", "z", None, "x", "/h", 6000, 30_000, "consumer", (("range", b"\xff"),), False),
        TOPICS, 0)
    assert garbled.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
