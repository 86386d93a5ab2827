"""Group metadata records in ``__consumer_offsets`` (Kafka's GroupMetadataKey v2 and
GroupMetadataValue v0-v4), the store's load/unload of one partition, and a coordinator that
takes a group over from its record (issue 22)."""

from __future__ import annotations

import asyncio
import struct

import pytest

from floodmark.broker.groups import GroupCoordinator, GroupState
from floodmark.errors import ErrorCode
from floodmark.groups.offsets import (
    BadGroupRecord,
    CommittedOffset,
    GroupRecord,
    MemberRecord,
    OffsetStore,
    decode_group_value,
    encode_group_key,
    encode_group_value,
    partition_for,
)

MEMBERS = (
    MemberRecord("m-1", None, "client-a", "/127.0.0.1", 60000, 10000, b"sub-1", b"assign-1"),
    MemberRecord("m-2", "static-2", "client-b", "/127.0.0.2", 30000, 6000, b"sub-2", b""),
)
RECORD = GroupRecord("consumer", 7, "range", "m-1", 1_700_000_000_000, MEMBERS)


def _s(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(value)) + value.encode()


def _b(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def _compact(value: str | bytes | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode() if isinstance(value, str) else value
    assert len(raw) + 1 < 128
    return bytes([len(raw) + 1]) + raw


def test_version_3_round_trips() -> None:
    assert decode_group_value(encode_group_value(RECORD)) == RECORD
    empty = GroupRecord("consumer", 8, None, None, 5, ())
    assert decode_group_value(encode_group_value(empty)) == empty
    assert encode_group_key("g") == b"\x00\x02\x00\x01g"


def test_version_1_as_kafka_2_0_wrote_it() -> None:
    value = (struct.pack(">h", 1) + _s("consumer") + struct.pack(">i", 3) + _s("range")
             + _s("m-1") + struct.pack(">i", 1) + _s("m-1") + _s("client-a") + _s("/h")
             + struct.pack(">ii", 60000, 10000) + _b(b"sub") + _b(b"asg"))
    rec = decode_group_value(value)
    assert rec.generation == 3 and rec.current_state_timestamp_ms == -1
    assert rec.members == (MemberRecord("m-1", None, "client-a", "/h", 60000, 10000, b"sub",
                                        b"asg"),)


def test_version_4_flexible_with_tagged_fields() -> None:
    member = (_compact("m-1") + _compact("inst") + _compact("client-a") + _compact("/h")
              + struct.pack(">ii", 60000, 10000) + _compact(b"sub") + _compact(b"asg")
              + b"\x01\x05\x02zz")  # one tagged field (tag 5, 2 bytes) to skip
    value = (struct.pack(">h", 4) + _compact("consumer") + struct.pack(">i", 9)
             + _compact("range") + _compact("m-1") + struct.pack(">q", 42) + b"\x02" + member
             + b"\x00")
    rec = decode_group_value(value)
    assert rec == GroupRecord("consumer", 9, "range", "m-1", 42, (
        MemberRecord("m-1", "inst", "client-a", "/h", 60000, 10000, b"sub", b"asg"),))


@pytest.mark.parametrize("value", [b"\x00\x09", b"\x00\x03\x00", encode_group_value(RECORD)[:-3]])
def test_unreadable_values_are_refused(value: bytes) -> None:
    with pytest.raises(BadGroupRecord):
        decode_group_value(value)


def test_load_and_unload_one_partition() -> None:
    n = 4
    groups = [f"g{i}" for i in range(40)]
    mine = [g for g in groups if partition_for(g, n) == 1][:2]
    other = next(g for g in groups if partition_for(g, n) != 1)
    store = OffsetStore()
    batches = [store.build_commit_batch(g, [("t", 0, CommittedOffset(5, -1, None, 1))], 1)
               for g in (*mine, other)]
    batches += [store.build_group_batch(mine[0], RECORD, 1),
                store.build_group_batch(mine[1], RECORD, 1),
                store.build_group_batch(mine[1], None, 2)]  # deleted: a tombstone
    loaded = store.load_partition(1, n, lambda: batches)
    assert loaded.groups == {mine[0]: RECORD} and loaded.unreadable == 0
    assert store.fetch(mine[0], "t", 0) == CommittedOffset(5, -1, None, 1)
    assert store.unload_partition(1, n) and store.fetch(mine[0], "t", 0) is None
    assert store.fetch(other, "t", 0) is not None  # another partition's group stays


def test_commits_replicated_out_of_order_apply_in_log_order() -> None:
    store = OffsetStore()
    store.apply_replicated("g", [("t", 0, CommittedOffset(20, -1, None, 2))], log_offset=8)
    store.apply_replicated("g", [("t", 0, CommittedOffset(10, -1, None, 1))], log_offset=7)
    assert store.fetch("g", "t", 0) == CommittedOffset(20, -1, None, 2)


def test_a_loaded_group_goes_on_without_a_rebalance() -> None:
    async def run() -> None:
        coordinator = GroupCoordinator(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                                       max_session_timeout_ms=60000)
        g = coordinator.load("g", RECORD)
        assert g.state is GroupState.STABLE and g.generation_id == 7 and g.leader_id == "m-1"
        assert g.static_members == {"static-2": "m-2"}
        assert coordinator.heartbeat("g", "m-1", 7) is ErrorCode.NONE
        assert coordinator.heartbeat("g", "m-2", 6) is ErrorCode.ILLEGAL_GENERATION
        assert coordinator.validate_commit("g", "m-2", 7, "static-2") is ErrorCode.NONE
        err, assignment, _ = await coordinator.sync(group_id="g", member_id="m-1",
                                                    generation_id=7, assignments=[])
        assert (err, assignment) == (ErrorCode.NONE, b"assign-1")
        assert coordinator.record_of(g).members == MEMBERS
        coordinator.unload(["g"])
        assert coordinator.heartbeat("g", "m-1", 7) is ErrorCode.UNKNOWN_MEMBER_ID

    asyncio.run(run())
