"""The share-group coordinator core (KIP-932's ShareGroupHeartbeat): joins, the simple
assignor's spread, epochs and fencing, a lost answer, leaving and session expiry."""

from __future__ import annotations

import uuid

from floodmark.broker.share_group.coordinator import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareHeartbeat,
    TopicInfo,
    simple_assignment,
)
from floodmark.errors import ErrorCode

T = uuid.UUID(int=7)
ONE = {"t": TopicInfo(T, "t", 1)}
FOUR = {"t": TopicInfo(T, "t", 4)}


def join(c: ShareGroupCoordinator, member: str, topics: dict[str, TopicInfo], now_ms: int = 0
         ) -> tuple[ErrorCode, int, frozenset[tuple[uuid.UUID, int]] | None]:
    a = c.heartbeat(ShareHeartbeat("g", member, 0, subscribed_topic_names=("t",)), topics,
                    now_ms)
    return a.error, a.member_epoch, a.assignment


def test_two_members_share_one_partition() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig())
    assert join(c, "a", ONE) == (ErrorCode.NONE, 1, frozenset({(T, 0)}))
    assert join(c, "b", ONE) == (ErrorCode.NONE, 2, frozenset({(T, 0)}))
    # a learns its new epoch (same partition) on its next beat
    a = c.heartbeat(ShareHeartbeat("g", "a", 1), ONE, 1)
    assert (a.error, a.member_epoch, a.assignment) == (ErrorCode.NONE, 2, frozenset({(T, 0)}))
    assert c.heartbeat(ShareHeartbeat("g", "a", 2), ONE, 2).assignment is None


def test_partitions_spread_over_members() -> None:
    got = simple_assignment(["b", "a"], [(T, p) for p in range(4)])
    assert got == {"a": frozenset({(T, 0), (T, 2)}), "b": frozenset({(T, 1), (T, 3)})}
    assert simple_assignment(["a", "b", "c"], [(T, 0)]) == {
        m: frozenset({(T, 0)}) for m in "abc"}


def test_fencing_lost_answer_and_unknown_member() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig())
    join(c, "a", FOUR)
    join(c, "b", FOUR)  # group epoch 2; a still at 1
    assert c.heartbeat(ShareHeartbeat("g", "a", 1), FOUR, 1).member_epoch == 2
    # the answer was lost: a sends 1 again, is answered its assignment again
    again = c.heartbeat(ShareHeartbeat("g", "a", 1), FOUR, 2)
    assert again.error is ErrorCode.NONE and again.assignment is not None
    assert c.heartbeat(ShareHeartbeat("g", "a", 7), FOUR, 3).error is \
        ErrorCode.FENCED_MEMBER_EPOCH
    assert c.heartbeat(ShareHeartbeat("g", "zz", 3), FOUR, 3).error is \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_and_expiry_reassign() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig(session_timeout_ms=100))
    join(c, "a", FOUR, 0)
    join(c, "b", FOUR, 50)
    assert c.heartbeat(ShareHeartbeat("g", "b", -1), FOUR, 60).member_epoch == -1
    assert c.groups["g"].members["a"].assignment == frozenset((T, p) for p in range(4))
    assert c.next_deadline_ms() == 100
    assert c.expire(FOUR, 100) == [("g", "a")]
    assert c.delete("g") is ErrorCode.NONE


def test_a_groups_own_session_and_heartbeat_win() -> None:
    """share.session.timeout.ms / share.heartbeat.interval.ms set for the group."""
    c = ShareGroupCoordinator(ShareGroupConfig(session_timeout_ms=100, heartbeat_interval_ms=10))
    c.group_configs["g"] = ShareGroupConfig(session_timeout_ms=300, heartbeat_interval_ms=30)
    answer = c.heartbeat(ShareHeartbeat("g", "a", 0, subscribed_topic_names=("t",)), FOUR, 0)
    assert answer.heartbeat_interval_ms == 30
    assert c.next_deadline_ms() == 300
    assert c.expire(FOUR, 100) == []


def test_a_topic_created_again_under_its_name_is_assigned_anew() -> None:
    """Deleted and created again (confluent-kafka-python's
    test_topic_recreate_resumes_with_fresh_delivery): same name and partition count, a new
    topic id; the member is assigned the new topic's partition at its next heartbeat."""
    c = ShareGroupCoordinator(ShareGroupConfig())
    _err, epoch, assigned = join(c, "a", ONE)
    assert assigned == frozenset({(T, 0)})
    new_id = uuid.UUID(int=8)
    again = {"t": TopicInfo(new_id, "t", 1)}
    answer = c.heartbeat(ShareHeartbeat("g", "a", epoch), again, 10)
    assert answer.assignment == frozenset({(new_id, 0)})


def test_group_share_max_size_turns_away_new_members_only() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig(), max_size=2)
    assert join(c, "a", FOUR)[0] is ErrorCode.NONE
    assert join(c, "b", FOUR)[0] is ErrorCode.NONE
    full = c.heartbeat(ShareHeartbeat("g", "c", 0, subscribed_topic_names=("t",)), FOUR, 0)
    assert full.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full.message == "The share group has reached its maximum capacity of 2 members."
    assert set(c.groups["g"].members) == {"a", "b"}
    # a member already in goes on (a rejoin with its id too); once one leaves, c gets in
    assert join(c, "a", FOUR)[0] is ErrorCode.NONE
    c.heartbeat(ShareHeartbeat("g", "b", -1), FOUR, 1)
    assert join(c, "c", FOUR, 2)[0] is ErrorCode.NONE
