"""KIP-932's share-group records in ``__consumer_offsets``: what a heartbeat changed becomes
Kafka's records (types 10, 11, 14), they round-trip, and a new coordinator that replays them
has the same members with the same epochs: their next heartbeats go on without a new epoch."""

from __future__ import annotations

import struct
import uuid

import pytest

from floodmark.broker.share_group import records as sg
from floodmark.broker.share_group.coordinator import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareHeartbeat,
    TopicInfo,
)
from floodmark.errors import ErrorCode

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
    assert [type(r) for r in recs] == [sg.MemberMetadata, sg.MemberAssignment, sg.GroupEpoch]
    assert [struct.unpack_from(">h", k)[0] for k, _v in log] == [10, 14, 11]
    before = c.view("g")
    assert beat(c, "b", 0) == (ErrorCode.NONE, 2)
    # b's join moved a to epoch 2 as well: a's assignment record is part of it
    assert [(type(r), getattr(r, "member_id", "")) for r in stored(c, log, before)] == [
        (sg.MemberAssignment, "a"), (sg.MemberMetadata, "b"), (sg.MemberAssignment, "b"),
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
    assert stored(c, log, before) == [sg.GroupEpoch("g", None)]
    assert replayed(log) == {}


@pytest.mark.parametrize("key, value", [
    (struct.pack(">hh", 11, 1) + b"g", b"\x00\x01" + bytes(13)),  # unknown value version
    (struct.pack(">hh", 14, 1) + b"g" + struct.pack(">h", 1) + b"m", b"\x00\x00\x00"),  # torn
    (struct.pack(">hh", 10, 5) + b"g", None),  # key shorter than it says
])
def test_a_bad_record_is_one_clear_error(key: bytes, value: bytes | None) -> None:
    with pytest.raises(sg.BadShareGroupRecord):
        sg.decode(key, value)
