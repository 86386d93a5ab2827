"""KIP-932's share-group records in ``__consumer_offsets``: what a heartbeat changed becomes
Kafka's records (types 10 to 15), they round-trip, and a new coordinator that replays them
has the same members with the same epochs and assignments: their next heartbeats go on without
a new epoch."""

from __future__ import annotations

import struct
import uuid

import pytest

from floodmark.broker.share_group.coordinator import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareHeartbeat,
    TopicInfo,
)
from floodmark.errors import ErrorCode
from floodmark.groups import share_records as sg

T = uuid.UUID(int=7)
TOPICS = {"t": TopicInfo(T, "t", 2)}


def beat(c: ShareGroupCoordinator, member: str, epoch: int) -> tuple[ErrorCode, int]:
    a = c.heartbeat(ShareHeartbeat("g", member, epoch, client_id=f"id-{member}",
                                   client_host="/127.0.0.1", rack_id="r1",
                                   subscribed_topic_names=("t",) if epoch == 0 else None),
                    TOPICS, 0)
    return a.error, a.member_epoch


def stored(c: ShareGroupCoordinator, log: list[tuple[bytes, bytes | None]],
           change: object) -> list[sg.ShareGroupRecord]:
    """Run a change (already made: ``change`` is its before-view) and append its records."""
    assert isinstance(change, sg.GroupView) or change is None
    recs = sg.changes("g", change, c.view("g"))
    log.extend(p for r in recs for p in sg.encode(r))
    return recs


def replayed(log: list[tuple[bytes, bytes | None]]) -> dict[str, sg.GroupView]:
    views: dict[str, sg.GroupView] = {}
    for key, value in log:
        sg.replay(views, sg.decode(key, value))
    return views


def test_a_replayed_group_keeps_its_members_and_epochs() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig())
    log: list[tuple[bytes, bytes | None]] = []
    before = c.view("g")
    assert beat(c, "a", 0) == (ErrorCode.NONE, 1)
    recs = stored(c, log, before)
    assert [type(r) for r in recs] == [sg.MemberMetadata, sg.TargetMember,
                                       sg.MemberAssignment, sg.TargetEpoch, sg.GroupEpoch]
    assert [struct.unpack_from(">h", k)[0] for k, _v in log] == [10, 13, 14, 12, 11]
    before = c.view("g")
    assert beat(c, "b", 0) == (ErrorCode.NONE, 2)
    # b's join moved a to epoch 2 as well: a's assignment record is part of it
    assert [(type(r), getattr(r, "member_id", "")) for r in stored(c, log, before)] == [
        (sg.TargetMember, "a"), (sg.MemberAssignment, "a"), (sg.MemberMetadata, "b"),
        (sg.TargetMember, "b"), (sg.MemberAssignment, "b"), (sg.TargetEpoch, ""),
        (sg.GroupEpoch, "")]
    before = c.view("g")
    assert beat(c, "a", 1) == (ErrorCode.NONE, 2)  # a learns epoch 2: nothing new to store
    assert stored(c, log, before) == []
    assert replayed(log) == {"g": c.view("g")}
    # a new coordinator replays the log: both members go on with epoch 2, nothing moves
    fresh = ShareGroupCoordinator(ShareGroupConfig())
    fresh.restore("g", replayed(log)["g"], TOPICS, 100)
    assert fresh.next_deadline_ms() == 100 + ShareGroupConfig().session_timeout_ms
    assert beat(fresh, "a", 2) == (ErrorCode.NONE, 2)
    assert beat(fresh, "b", 2) == (ErrorCode.NONE, 2)
    assert fresh.view("g") == c.view("g")


def test_leaving_and_deleting_are_tombstones() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig())
    log: list[tuple[bytes, bytes | None]] = []
    for member in ("a", "b"):
        before = c.view("g")
        beat(c, member, 0)
        stored(c, log, before)
    before = c.view("g")
    assert beat(c, "b", -1) == (ErrorCode.NONE, -1)
    recs = stored(c, log, before)
    assert sg.MemberGone("g", "b") in recs
    assert set(replayed(log)["g"].members) == {"a"}
    before = c.view("g")
    beat(c, "a", -1)
    stored(c, log, before)
    before = c.view("g")
    assert c.delete("g") is ErrorCode.NONE
    assert stored(c, log, before) == [sg.TargetEpoch("g", None),
                                      sg.StatePartitionMetadata("g", None),
                                      sg.GroupEpoch("g", None)]
    assert replayed(log) == {}


@pytest.mark.parametrize("key, value", [
    (struct.pack(">hh", 11, 1) + b"g", b"\x00\x01" + bytes(13)),  # unknown value version
    (struct.pack(">hh", 14, 1) + b"g" + struct.pack(">h", 1) + b"m", b"\x00\x00\x00"),  # torn
    (struct.pack(">hh", 10, 5) + b"g", None),  # key shorter than it says
])
def test_a_bad_record_is_one_clear_error(key: bytes, value: bytes | None) -> None:
    with pytest.raises(sg.BadShareGroupRecord):
        sg.decode(key, value)


def test_target_assignment_and_state_partition_records_in_kafkas_layout() -> None:
    epoch = sg.encode(sg.TargetEpoch("g", 7))
    assert epoch == [(struct.pack(">hh", 12, 1) + b"g", struct.pack(">hi", 0, 7) + b"\x00")]
    member = sg.encode(sg.TargetMember("g", "m", frozenset({(T, 1), (T, 0)})))
    assert member == [(struct.pack(">hh", 13, 1) + b"g" + struct.pack(">h", 1) + b"m",
                       struct.pack(">h", 0) + b"\x02" + T.bytes + b"\x03"
                       + struct.pack(">ii", 0, 1) + b"\x00\x00")]
    state = sg.StatePartitions(
        initializing={T: sg.TopicState("t", frozenset({1}), 99)},
        initialized={uuid.UUID(int=8): sg.TopicState("u", frozenset({0, 2}))},
        deleting={uuid.UUID(int=9): "v"})
    (key, value), = sg.encode(sg.StatePartitionMetadata("g", state))
    assert key == struct.pack(">hh", 15, 1) + b"g"
    assert value is not None and value[:2] == b"\x00\x00"
    # InitializingTopics: one TopicPartitionsInfo (id, name, partitions, create timestamp)
    assert value[2:3] == b"\x02" and value[3:19] == T.bytes and value[19:21] == b"\x02t"
    assert value[21:26] == b"\x02" + struct.pack(">i", 1)
    assert value[26:34] == struct.pack(">q", 99) and value[34:35] == b"\x00"
    for rec in (sg.TargetEpoch("g", 7), sg.TargetMember("g", "m", frozenset({(T, 0)})),
                sg.StatePartitionMetadata("g", state), sg.StatePartitionMetadata("g", None),
                sg.TargetEpoch("g", None)):
        (k, v), = sg.encode(rec)
        assert sg.decode(k, v) == rec
    gone = sg.encode(sg.MemberGone("g", "m"))
    assert [(struct.unpack_from(">h", k)[0], v) for k, v in gone] == [
        (10, None), (13, None), (14, None)]


def test_a_member_whose_target_is_ahead_moves_to_it_on_replay() -> None:
    """A log whose target assignment (12, 13) is ahead of a member's current assignment (14),
    as Kafka's coordinator leaves one between a rebalance and the member's next heartbeat:
    the replayed member is moved to its target, and its heartbeat with its old epoch is
    answered with the new assignment at the assignment epoch, no new rebalance."""
    log: list[tuple[bytes, bytes | None]] = []
    for rec in (sg.MemberMetadata("g", "a", None, "c", "/h", ("t",)),
                sg.MemberAssignment("g", "a", 1, 0, frozenset({(T, 0), (T, 1)})),
                sg.GroupEpoch("g", 2), sg.TargetMember("g", "a", frozenset({(T, 0)})),
                sg.TargetEpoch("g", 2)):
        log += sg.encode(rec)
    c = ShareGroupCoordinator(ShareGroupConfig())
    c.restore("g", replayed(log)["g"], TOPICS, 0)
    a = c.heartbeat(ShareHeartbeat("g", "a", 1), TOPICS, 1)
    assert (a.error, a.member_epoch, a.assignment) == (ErrorCode.NONE, 2, frozenset({(T, 0)}))
    assert c.groups["g"].group_epoch == 2, "no new rebalance"


def test_newly_subscribed_partitions_are_initialized_once() -> None:
    c = ShareGroupCoordinator(ShareGroupConfig())
    log: list[tuple[bytes, bytes | None]] = []
    before = c.view("g")
    beat(c, "a", 0)
    assert c.to_initialize("g", TOPICS, 10) == [(T, 0), (T, 1)]
    recs = stored(c, log, before)
    assert isinstance(recs[-1], sg.StatePartitionMetadata)
    assert c.to_initialize("g", TOPICS, 11) == [], "initializing: not asked twice"
    before = c.view("g")
    c.state_initialized("g", [(T, 0)], [(T, 1)])
    stored(c, log, before)
    state = replayed(log)["g"].state
    assert state.initialized == {T: sg.TopicState("t", frozenset({0}))}
    assert state.initializing == {}
    assert c.to_initialize("g", TOPICS, 12) == [(T, 1)], "the failed one is tried again"
    assert c.to_initialize("g", TOPICS, 12 + 30_000) == [(T, 1)], "and again, much later"
    fresh = ShareGroupCoordinator(ShareGroupConfig())
    fresh.restore("g", replayed(log)["g"], TOPICS, 0)
    assert fresh.view("g") == replayed(log)["g"]
