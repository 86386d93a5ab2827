"""Classic protocol members of a consumer group, with time passed in: Kafka's join timeout (told
to rejoin, a member that sends no JoinGroup within its rebalance timeout is removed), its sync
timeout (answered, a member that sends no SyncGroup within it is removed), static members
(a new member id under the same group.instance.id takes the old one's place without a new
group epoch; the old one is FENCED_INSTANCE_ID), and ``group.consumer.max.size``."""

from __future__ import annotations

import uuid

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
    can_downgrade,
    can_upgrade,
)
from floodmark.wire.consumer_protocol import encode_assignment

T = uuid.UUID(int=7)
TOPICS = {"t": rec.TopicMetadata(T, "t", 4)}
SESSION_MS = 6_000
REBALANCE_MS = 10_000


def coordinator(max_size: int = 2**31 - 1, classic_max_size: int = 2**31 - 1
                ) -> ConsumerGroupCoordinator:
    c = ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=45_000,
                                            heartbeat_interval_ms=1_000, max_size=max_size,
                                            classic_max_size=classic_max_size))
    # a classic group of two (a: partitions 0 1, b: 2 3, a static under "ia") upgraded
    sub = encode_subscription(["t"])
    c.upgrade(ClassicSnapshot("g", 5, "consumer", "range", "a", tuple(
        ClassicMember(m, i, m, "/127.0.0.1", SESSION_MS, REBALANCE_MS, (("range", sub),),
                      encode_assignment({"t": ps}, 0))
        for m, i, ps in (("a", "ia", (0, 1)), ("b", None, (2, 3))))), TOPICS, 0)
    return c


def join(c: ConsumerGroupCoordinator, member_id: str, now_ms: int,
         instance_id: str | None = None) -> classic_members.ClassicJoinAnswer:
    """An eager classic member's JoinGroup (it owns nothing when it rejoins)."""
    return classic_members.join(c, classic_members.ClassicJoin(
        "g", member_id, instance_id, member_id or "new", "/127.0.0.1", SESSION_MS, REBALANCE_MS,
        "consumer", (("range", encode_subscription(["t"])),), True), TOPICS, now_ms)


def sync(c: ConsumerGroupCoordinator, member_id: str, generation: int, now_ms: int,
         instance_id: str | None = None) -> ErrorCode:
    return classic_members.sync(c, "g", member_id, generation, instance_id, None, None,
                                now_ms)[0]


def heartbeat(c: ConsumerGroupCoordinator, member_id: str, now_ms: int) -> ErrorCode:
    g = c.groups["g"]
    return classic_members.heartbeat(c, "g", member_id, g.members[member_id].member_epoch,
                                     None, now_ms)


def consumer_joins(c: ConsumerGroupCoordinator, now_ms: int) -> None:
    ans = c.heartbeat(Heartbeat("g", "k", 0, rebalance_timeout_ms=REBALANCE_MS,
                                subscribed_topic_names=("t",), owned=frozenset()),
                      TOPICS, now_ms)
    assert ans.error is ErrorCode.NONE


def keep_alive(c: ConsumerGroupCoordinator, now_ms: int, *members: str) -> None:
    """Sessions renewed (the timers under test are not the sessions)."""
    for m in members:
        c.groups["g"].session_deadline_ms[m] = now_ms + SESSION_MS


def test_a_member_told_to_rejoin_that_never_joins_is_removed_after_its_rebalance_timeout(
) -> None:
    c = coordinator()
    consumer_joins(c, 1_000)  # a new member: the group epoch moves, a and b must rejoin
    assert heartbeat(c, "a", 2_000) is ErrorCode.REBALANCE_IN_PROGRESS
    # told again later: the deadline counts from the first time (Kafka's IfAbsent)
    assert heartbeat(c, "a", 5_000) is ErrorCode.REBALANCE_IN_PROGRESS
    assert c.groups["g"].join_deadline_ms["a"] == 2_000 + REBALANCE_MS
    # b rejoins and syncs in time; a never sends JoinGroup
    b = join(c, "b", 3_000)
    assert b.error is ErrorCode.NONE and "b" not in c.groups["g"].join_deadline_ms
    assert sync(c, "b", b.generation_id, 3_500) is ErrorCode.NONE
    keep_alive(c, 11_000, "a", "b", "k")
    assert c.tick(TOPICS, 11_999) == []
    removed = c.tick(TOPICS, 12_000)
    assert [(g, why) for g, why, _ in removed] == [
        ("g", "member a (a classic member) did not rejoin in its rebalance timeout")]
    assert set(c.groups["g"].members) == {"b", "k"}


def test_a_member_that_joined_but_never_syncs_is_removed_after_its_rebalance_timeout(
) -> None:
    c = coordinator()
    consumer_joins(c, 0)
    heartbeat(c, "a", 1_000)
    heartbeat(c, "b", 1_000)
    a = join(c, "a", 2_000)
    b = join(c, "b", 2_000)
    assert a.error is b.error is ErrorCode.NONE
    g = c.groups["g"]
    assert g.sync_deadline_ms == {"a": 2_000 + REBALANCE_MS, "b": 2_000 + REBALANCE_MS}
    assert "a" not in g.join_deadline_ms  # the join timeout is done once it joined
    assert sync(c, "a", a.generation_id, 4_000) is ErrorCode.NONE
    assert "a" not in g.sync_deadline_ms
    keep_alive(c, 11_000, "a", "b", "k")
    assert c.next_deadline_ms() == 12_000
    removed = c.tick(TOPICS, 12_000)
    assert [why for _, why, _ in removed] == [
        "member b (a classic member) did not sync in its rebalance timeout"]
    assert set(c.groups["g"].members) == {"a", "k"}


def test_a_timer_that_is_no_longer_due_removes_nobody() -> None:
    c = coordinator()
    consumer_joins(c, 0)
    assert heartbeat(c, "a", 1_000) is ErrorCode.REBALANCE_IN_PROGRESS
    a = join(c, "a", 10_000)  # just in time
    keep_alive(c, 11_000, "a", "b", "k")
    # the sync timeout now runs from the join (10 s + 10 s), nothing is due at 11 s
    assert [m for _, m, _ in c.expired(11_000) if m == "a"] == []
    assert sync(c, "a", a.generation_id, 19_000) is ErrorCode.NONE
    keep_alive(c, 25_000, "a", "b", "k")
    assert all(m != "a" for _, m, _ in c.expired(25_000))


def test_a_static_classic_member_is_replaced_by_its_new_instance_without_a_rebalance() -> None:
    c = coordinator()
    g = c.groups["g"]
    epoch_before, target_before = g.group_epoch, dict(g.target)
    new = join(c, "", 1_000, instance_id="ia")  # a restart: no member id, same instance
    assert new.error is ErrorCode.NONE and new.member_id not in ("", "a")
    assert "a" not in g.members and new.member_id in g.members
    assert g.group_epoch == epoch_before  # nobody else rebalances
    assert g.target[new.member_id] == target_before["a"]
    assert g.target["b"] == target_before["b"]
    assert g.members["b"].member_epoch == epoch_before  # b untouched
    assert sync(c, new.member_id, new.generation_id, 1_500,
                instance_id="ia") is ErrorCode.NONE
    assert g.members[new.member_id].current.assigned == target_before["a"]
    # the old incarnation is fenced by its instance id, and by its member id
    assert sync(c, "a", 5, 2_000, instance_id="ia") is ErrorCode.FENCED_INSTANCE_ID
    assert classic_members.heartbeat(c, "g", "a", 5, "ia",
                                     2_000) is ErrorCode.FENCED_INSTANCE_ID
    assert join(c, "a", 2_000, instance_id="ia").error is ErrorCode.FENCED_INSTANCE_ID
    assert c.validate_commit("g", "a", 5, 8) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.validate_commit("g", new.member_id, new.generation_id, 8) is ErrorCode.NONE
    # an instance id nobody holds, with a member id, is unknown
    assert join(c, "zz", 2_000, instance_id="nobody").error is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_consumer_protocol_instance_replaces_a_classic_one_at_once() -> None:
    c = coordinator()
    ans = c.heartbeat(Heartbeat("g", "k", 0, instance_id="ia", rebalance_timeout_ms=REBALANCE_MS,
                                subscribed_topic_names=("t",), owned=frozenset()), TOPICS, 0)
    # the classic protocol has no static leave: its holder is replaced, not UNRELEASED
    assert ans.error is ErrorCode.NONE
    g = c.groups["g"]
    assert "a" not in g.members and g.members["k"].subscription.classic is None


def test_group_consumer_max_size_turns_away_new_members_of_either_protocol() -> None:
    c = coordinator(max_size=2)
    refused = join(c, "", 0)
    assert refused.error is ErrorCode.GROUP_MAX_SIZE_REACHED and refused.member_id == ""
    assert "maximum capacity of 2 members" in (refused.message or "")
    ans = c.heartbeat(Heartbeat("g", "k", 0, rebalance_timeout_ms=REBALANCE_MS,
                                subscribed_topic_names=("t",), owned=frozenset()), TOPICS, 0)
    assert ans.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert set(c.groups["g"].members) == {"a", "b"}
    # members already in go on
    assert join(c, "b", 0).error is ErrorCode.NONE
    assert heartbeat(c, "a", 0) in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)


def test_the_sizes_bound_the_upgrade_and_the_downgrade() -> None:
    from floodmark.groups.consumer_group.migration import MigrationPolicy

    c = coordinator()
    snapshot = ClassicSnapshot("g", 1, "consumer", "range", "a", tuple(
        ClassicMember(m, None, m, "/h", SESSION_MS, REBALANCE_MS, (), b"") for m in "abc"))
    assert can_upgrade(MigrationPolicy.BIDIRECTIONAL, snapshot, max_size=3) is None
    assert "group.consumer.max.size" in (
        can_upgrade(MigrationPolicy.BIDIRECTIONAL, snapshot, max_size=2) or "")
    subs = {m: x.subscription for m, x in c.groups["g"].members.items()}
    plain = rec.Subscription(None, None, "", "", ("t",), None, 1, None)
    both = {**subs, "k": plain}
    assert can_downgrade(MigrationPolicy.BIDIRECTIONAL, both, "k", classic_max_size=2)
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, both, "k", classic_max_size=1)


def test_a_snapshot_restores_members_and_timers_as_they_were() -> None:
    import copy

    c = coordinator()
    consumer_joins(c, 0)
    heartbeat(c, "a", 1_000)  # a join timer
    expected = copy.deepcopy(c.groups["g"])
    before = c.snapshot("g")
    a = join(c, "a", 2_000)  # a's assignment, subscription and timers change
    assert a.error is ErrorCode.NONE and c.groups["g"] != expected
    c.restore("g", before)
    assert c.groups["g"] == expected


def test_a_classic_instance_replacing_the_last_consumer_member_downgrades_at_once() -> None:
    c = coordinator()
    ans = c.heartbeat(Heartbeat("g", "k", 0, instance_id="ik",
                                rebalance_timeout_ms=REBALANCE_MS,
                                subscribed_topic_names=("t",), owned=frozenset()), TOPICS, 0)
    assert ans.error is ErrorCode.NONE
    epoch = c.groups["g"].group_epoch
    # k's process restarts as a classic consumer under the same instance id
    new = join(c, "", 1_000, instance_id="ik")
    assert new.error is ErrorCode.NONE and new.generation_id == epoch
    assert "g" not in c.groups  # tombstones written
    classic = c.take_downgrade("g")
    assert classic is not None and not classic.rebalance  # no rebalance: it syncs from here
    assert classic.generation == epoch
    assert {m.member_id for m in classic.members} == {"a", "b", new.member_id}
    kinds = [type(r).__name__ for r in new.records]
    assert kinds[-1] == "GroupEpoch" and new.records[-1].epoch is None  # type: ignore[union-attr]


def test_no_downgrade_at_a_replacement_while_consumer_members_remain() -> None:
    c = coordinator()
    for member, instance in (("k", "ik"), ("j", None)):
        assert c.heartbeat(Heartbeat("g", member, 0, instance_id=instance,
                                     rebalance_timeout_ms=REBALANCE_MS,
                                     subscribed_topic_names=("t",), owned=frozenset()),
                           TOPICS, 0).error is ErrorCode.NONE
    new = join(c, "", 1_000, instance_id="ik")
    assert new.error is ErrorCode.NONE and "g" in c.groups
    assert c.take_downgrade("g") is None
