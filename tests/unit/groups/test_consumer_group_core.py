"""KIP-848's coordinator core: joins, revocation before reassignment, fencing, leaving, session
timeouts, the assignors, and the records a failover replays (pure: no broker, no clock)."""

from __future__ import annotations

import uuid

import pytest

from floodmark.errors import ErrorCode
from floodmark.groups.consumer_group import records as rec
from floodmark.groups.consumer_group.assignors import (
    AssignmentSpec,
    range_assignor,
    uniform_assignor,
)
from floodmark.groups.consumer_group.core import (
    ConsumerGroupCoordinator,
    CoreConfig,
    GroupState,
    Heartbeat,
)
from floodmark.groups.consumer_group.records import MemberState

T = uuid.UUID(int=7)
TOPICS = {"t": rec.TopicMetadata(T, "t", 4)}
NOTHING: frozenset[tuple[uuid.UUID, int]] = frozenset()


def parts(*ps: int) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((T, p) for p in ps)


def join(c: ConsumerGroupCoordinator, member: str, now_ms: int = 0, **kw: object):
    return c.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=10_000,
                                 subscribed_topic_names=("t",), owned=NOTHING, **kw),  # type: ignore[arg-type]
                       TOPICS, now_ms)


def beat(c: ConsumerGroupCoordinator, member: str, epoch: int, owned, now_ms: int = 0):
    return c.heartbeat(Heartbeat("g", member, epoch, owned=owned), TOPICS, now_ms)


def coordinator() -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=45_000,
                                               heartbeat_interval_ms=1_000))


def test_first_member_gets_every_partition_at_the_group_epoch() -> None:
    c = coordinator()
    a = join(c, "a")
    assert a.error is ErrorCode.NONE
    assert a.member_epoch == 1 and a.assignment == parts(0, 1, 2, 3)
    assert a.heartbeat_interval_ms == 1_000
    kinds = [type(r).__name__ for r in a.records]
    assert kinds == ["MemberSubscription", "PartitionMetadata", "GroupEpoch", "TargetMember",
                     "TargetEpoch", "MemberAssignment"]
    assert c.groups["g"].state is GroupState.STABLE


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    c = coordinator()
    join(c, "a")
    b = join(c, "b")
    # b's target is half the partitions, but a still holds them all: nothing yet.
    assert b.member_epoch == 2 and b.assignment == NOTHING
    assert c.groups["g"].members["b"].current.state == MemberState.UNRELEASED_PARTITIONS
    a = beat(c, "a", 1, parts(0, 1, 2, 3))
    # a must revoke two partitions; its epoch stays until it has.
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment) == 2
    revoked = parts(0, 1, 2, 3) - a.assignment
    assert c.groups["g"].members["a"].current.pending_revocation == revoked
    b = beat(c, "b", 2, NOTHING)
    assert b.assignment is None and b.member_epoch == 2  # still held by a
    a = beat(c, "a", 1, a.assignment)  # a revoked them
    assert a.member_epoch == 2
    b = beat(c, "b", 2, NOTHING)
    assert b.assignment == revoked
    assert c.groups["g"].state is GroupState.STABLE


def test_fencing_and_unknown_members() -> None:
    c = coordinator()
    join(c, "a")
    assert beat(c, "a", 5, None).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(c, "zz", 1, None).error is ErrorCode.UNKNOWN_MEMBER_ID
    join(c, "b")
    a = beat(c, "a", 1, parts(0, 1, 2, 3))
    a = beat(c, "a", 1, a.assignment)
    assert a.member_epoch == 2
    # a lost answer: the previous epoch is accepted while it owns no more than assigned
    assert beat(c, "a", 1, a.assignment).error is ErrorCode.NONE
    assert beat(c, "a", 1, parts(0, 1, 2, 3)).error is ErrorCode.FENCED_MEMBER_EPOCH


def test_leave_frees_partitions_for_the_others() -> None:
    c = coordinator()
    join(c, "a")
    join(c, "b")
    a = beat(c, "a", 1, parts(0, 1, 2, 3))
    a = beat(c, "a", 1, a.assignment)
    b = beat(c, "b", 2, NOTHING)
    left = beat(c, "b", -1, b.assignment)
    assert left.error is ErrorCode.NONE and left.member_epoch == -1
    a = beat(c, "a", a.member_epoch, a.assignment)
    assert a.assignment == parts(0, 1, 2, 3) and a.member_epoch == 3


def test_session_timeout_removes_a_silent_member() -> None:
    c = coordinator()
    join(c, "a", now_ms=0)
    join(c, "b", now_ms=0)
    beat(c, "a", 1, parts(0, 1, 2, 3), now_ms=40_000)
    assert c.next_deadline_ms() == 45_000
    removed = c.tick(TOPICS, 45_000)
    assert [why for _, why, _ in removed] == ["member b session timed out"]
    assert set(c.groups["g"].members) == {"a"}


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_removed() -> None:
    c = coordinator()
    join(c, "a", now_ms=0)
    join(c, "b", now_ms=0)
    beat(c, "a", 1, parts(0, 1, 2, 3), now_ms=100)  # told to revoke, by 10_100
    beat(c, "b", 2, NOTHING, now_ms=5_000)
    removed = c.tick(TOPICS, 10_100)
    assert [why for _, why, _ in removed] == [
        "member a did not revoke its partitions in its rebalance timeout"]
    b = beat(c, "b", 2, NOTHING, now_ms=10_200)
    assert b.assignment == parts(0, 1, 2, 3)


def test_invalid_requests_answer_kafkas_messages() -> None:
    c = coordinator()
    hb = c.heartbeat(Heartbeat("g", "a", 0, rebalance_timeout_ms=1, owned=NOTHING), TOPICS, 0)
    assert (hb.error, hb.message) == (ErrorCode.INVALID_REQUEST,
                                      "SubscribedTopicNames or SubscribedTopicRegex must be set in "
                                      "first request.")
    hb = join(c, "a", server_assignor="sticky")
    assert hb.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert beat(c, "a", 3, None).error is ErrorCode.GROUP_ID_NOT_FOUND


def test_commit_checks_the_member_epoch() -> None:
    c = coordinator()
    join(c, "a")
    assert c.validate_commit("g", "a", 1, 9) is ErrorCode.NONE
    assert c.validate_commit("g", "a", 0, 9) is ErrorCode.STALE_MEMBER_EPOCH
    assert c.validate_commit("g", "x", 1, 9) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.validate_commit("g", "a", 1, 8) is ErrorCode.UNSUPPORTED_VERSION
    assert c.validate_commit("g", "", -1, 9) is ErrorCode.UNKNOWN_MEMBER_ID


def test_records_round_trip_and_replay_rebuilds_the_group() -> None:
    c = coordinator()
    log = list(join(c, "a").records) + list(join(c, "b").records)
    log += beat(c, "a", 1, parts(0, 1, 2, 3)).records
    encoded = [rec.encode(r) for r in log]
    decoded = [rec.decode(k, v) for k, v in encoded]
    assert decoded == log
    fresh = coordinator()
    for r in decoded:
        fresh.apply(r)
    fresh.loaded(["g"], 0)
    old, new = c.groups["g"], fresh.groups["g"]
    assert (new.group_epoch, new.assignment_epoch, new.target, new.topics) == (
        old.group_epoch, old.assignment_epoch, old.target, old.topics)
    assert {m: x.current for m, x in new.members.items()} == {
        m: x.current for m, x in old.members.items()}
    # the members go on with their epochs at the new coordinator
    assert beat(fresh, "a", 1, c.groups["g"].members["a"].current.assigned).error \
        is ErrorCode.NONE


def test_record_keys_are_kafkas_types() -> None:
    key, value = rec.encode(rec.GroupEpoch("g", 3))
    assert key == b"\x00\x03\x00\x01g" and value == b"\x00\x00\x00\x00\x00\x03\x00"
    key, value = rec.encode(rec.MemberAssignment("g", "m", None))
    assert key == b"\x00\x08\x00\x01g\x00\x01m" and value is None
    with pytest.raises(rec.BadConsumerGroupRecord):
        rec.decode(b"\x00\x08\x00\x01g\x00\x01m", b"\x00\x00\x00")


def test_assignors() -> None:
    u = uuid.UUID(int=9)
    spec = AssignmentSpec({"a": frozenset({T, u}), "b": frozenset({T})},
                          {T: 4, u: 2}, {})
    r = range_assignor(spec)
    assert r["a"] == parts(0, 1) | {(u, 0), (u, 1)} and r["b"] == parts(2, 3)
    uni = uniform_assignor(spec)
    assert {len(v) for v in uni.values()} == {3}
    assert uni["a"] | uni["b"] == parts(0, 1, 2, 3) | {(u, 0), (u, 1)}
    # sticky: a third member takes partitions without moving the others between a and b
    spec3 = AssignmentSpec({"a": frozenset({T}), "b": frozenset({T}), "c": frozenset({T})},
                           {T: 6}, {"a": parts(0, 1, 2), "b": parts(3, 4, 5)})
    uni3 = uniform_assignor(spec3)
    assert uni3["a"] <= parts(0, 1, 2) and uni3["b"] <= parts(3, 4, 5)
    assert [len(uni3[m]) for m in "abc"] == [2, 2, 2]


def test_a_static_member_that_leaves_keeps_its_place_for_its_next_instance() -> None:
    c = coordinator()
    join(c, "a", instance_id="i-a")
    join(c, "b")
    a = beat(c, "a", 1, parts(0, 1, 2, 3))
    beat(c, "a", 1, a.assignment)
    b = beat(c, "b", 2, NOTHING)
    epoch = c.groups["g"].group_epoch
    kept = a.assignment
    # the instance is still there: a second one is refused
    again = join(c, "a2", instance_id="i-a")
    assert again.error is ErrorCode.UNRELEASED_INSTANCE_ID
    left = c.heartbeat(Heartbeat("g", "a", -2, instance_id="i-a"), TOPICS, 1_000)
    assert left.error is ErrorCode.NONE and left.member_epoch == -2
    assert c.groups["g"].members["a"].current.assigned == kept  # not given away
    assert beat(c, "b", 2, b.assignment).assignment is None
    back = join(c, "a2", now_ms=2_000, instance_id="i-a")
    assert back.error is ErrorCode.NONE and back.assignment == kept
    assert back.member_epoch == epoch == c.groups["g"].group_epoch  # no new group epoch
    assert set(c.groups["g"].members) == {"a2", "b"}
    # the old member id is fenced by the new instance
    old = c.heartbeat(Heartbeat("g", "a", 2, instance_id="i-a"), TOPICS, 2_000)
    assert old.error is ErrorCode.FENCED_INSTANCE_ID


def test_a_static_member_that_does_not_come_back_times_out() -> None:
    c = coordinator()
    join(c, "a", instance_id="i-a")
    join(c, "b")
    c.heartbeat(Heartbeat("g", "a", -2, instance_id="i-a"), TOPICS, 1_000)
    beat(c, "b", 2, NOTHING, now_ms=44_000)
    removed = c.tick(TOPICS, 46_000)
    assert [why for _, why, _ in removed] == ["member a session timed out"]
    assert beat(c, "b", 2, NOTHING, now_ms=46_000).assignment == parts(0, 1, 2, 3)


def test_a_regular_expression_subscription_follows_new_topics() -> None:
    c = coordinator()
    t2 = uuid.UUID(int=8)
    topics = {**TOPICS, "other": rec.TopicMetadata(uuid.UUID(int=9), "other", 2),
              "__consumer_offsets": rec.TopicMetadata(uuid.UUID(int=10), "__consumer_offsets", 1)}
    hb = c.heartbeat(Heartbeat("g", "a", 0, rebalance_timeout_ms=1_000,
                               subscribed_topic_names=(), subscribed_topic_regex="t.*",
                               owned=NOTHING), topics, 0)
    assert hb.error is ErrorCode.NONE and hb.assignment == parts(0, 1, 2, 3)
    topics["t2"] = rec.TopicMetadata(t2, "t2", 1)
    hb = c.heartbeat(Heartbeat("g", "a", 1, owned=parts(0, 1, 2, 3)), topics, 100)
    assert hb.member_epoch == 2 and hb.assignment == parts(0, 1, 2, 3) | {(t2, 0)}
    bad = c.heartbeat(Heartbeat("g", "b", 0, rebalance_timeout_ms=1_000,
                                subscribed_topic_regex="t(", owned=NOTHING), topics, 0)
    assert bad.error is ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_regular_expression_matches_internal_topics_as_in_kafka() -> None:
    """Kafka resolves a KIP-848 regex against every topic, the internal ones included
    (franz-go's Test848RegexBrokerResolves adopts ``__consumer_offsets`` that way)."""
    offsets = rec.TopicMetadata(uuid.UUID(int=10), "__consumer_offsets", 1)
    topics = {**TOPICS, "__consumer_offsets": offsets}
    c = coordinator()
    hb = c.heartbeat(Heartbeat("g", "a", 0, rebalance_timeout_ms=1_000,
                               subscribed_topic_names=(), subscribed_topic_regex="__consumer.*",
                               owned=NOTHING), topics, 0)
    assert hb.error is ErrorCode.NONE and hb.assignment == {(offsets.topic_id, 0)}


def test_restore_undoes_a_change_that_could_not_be_stored() -> None:
    c = coordinator()
    join(c, "a")
    before = c.snapshot("g")
    b = join(c, "b")
    assert b.records and set(c.groups["g"].members) == {"a", "b"}
    c.restore("g", before)
    assert set(c.groups["g"].members) == {"a"} and c.groups["g"].group_epoch == 1
    fresh = coordinator()
    none = fresh.snapshot("g")
    join(fresh, "a")
    fresh.restore("g", none)
    assert fresh.groups == {}


def test_a_groups_own_configs_win_over_the_brokers() -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms set for the group (group
    configs): its next heartbeat is answered with them; other groups keep the broker's."""
    c = coordinator()
    c.group_configs["g"] = CoreConfig(session_timeout_ms=50_000, heartbeat_interval_ms=6_000)
    assert join(c, "a", now_ms=0).heartbeat_interval_ms == 6_000
    assert c.next_deadline_ms() == 50_000
    other = c.heartbeat(Heartbeat("h", "x", 0, rebalance_timeout_ms=10_000,
                                  subscribed_topic_names=("t",), owned=NOTHING), TOPICS, 0)
    assert other.heartbeat_interval_ms == 1_000
