"""The share coordinator's records (``__share_group_state``, Kafka's ShareSnapshot layout) and
its rules: the latest record of a key wins on replay, a tombstone deletes, a lower leader epoch
or state epoch is fenced, and a read by a new leader stores its epoch first."""

from __future__ import annotations

import struct
import uuid

import pytest

from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.broker.share_group.share_coordinator import ShareCoordinator
from floodmark.broker.share_group.state_records import (
    BadShareStateRecord,
    Snapshot,
    coordinator_key,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch

TOPIC = uuid.UUID("6a1f7c1e-0000-4000-8000-000000000001")
KEY = ("g", TOPIC, 3)
STATE = ShareState(10, 15, (StateBatch(10, 11, RecordState.ACKNOWLEDGED, 1),
                            StateBatch(12, 14, RecordState.AVAILABLE, 2)), 1)


def test_a_snapshot_round_trips_in_kafkas_layout() -> None:
    key = encode_key(KEY)
    assert key[:2] == b"\x00\x00" and decode_key(key) == KEY  # ShareSnapshot: type 0
    value = encode_value(Snapshot(STATE, 7, 3))
    assert struct.unpack_from(">hHiiq", value) == (0, 3, 1, 7, 10)
    assert decode_value(value) == Snapshot(STATE, 7, 3)
    empty = ShareState(42, 42, (), 0)
    assert decode_value(encode_value(Snapshot(empty, 0))).state == empty
    # InitializeShareGroupState's record: start offset -1 (not placed yet), no batches; a
    # coordinator that replays it after a failover reads it (it was refused before)
    initialized = Snapshot(ShareState(-1, -1, (), 3), -1)
    assert decode_value(encode_value(initialized)) == initialized
    assert coordinator_key(KEY) == f"g:{TOPIC}:3"


@pytest.mark.parametrize("value", [
    b"", b"\x00\x01" + bytes(30),  # a version floodmark does not read
    encode_value(Snapshot(STATE, 7))[:-5],  # torn
    encode_value(Snapshot(ShareState(10, 12, (StateBatch(11, 11, RecordState.AVAILABLE, 1),
                                              StateBatch(10, 10, RecordState.AVAILABLE, 1))),
                          0)),  # out of order
    encode_value(Snapshot(ShareState(-1, 1, (StateBatch(0, 0, RecordState.AVAILABLE, 1),)),
                          0)),  # batches without a start offset
])
def test_a_bad_value_is_one_clear_error(value: bytes) -> None:
    with pytest.raises(BadShareStateRecord):
        decode_value(value)


def test_a_share_update_record_is_refused_not_misread() -> None:
    with pytest.raises(BadShareStateRecord):
        decode_key(b"\x00\x01" + encode_key(KEY)[2:])


def _log(*records: tuple[tuple[str, uuid.UUID, int], Snapshot | None]) -> list[bytes]:
    return [build_batch([Record(i, 0, encode_key(k), None if s is None else encode_value(s))
                         for i, (k, s) in enumerate(records)])]


def test_replay_keeps_the_latest_record_of_each_key_and_skips_unreadable_ones() -> None:
    other = ("g2", TOPIC, 3)
    later = ShareState(15, 15, (), 1)
    batches = _log((KEY, Snapshot(STATE, 1)), (other, Snapshot(STATE, 1)),
                   (KEY, Snapshot(later, 2)), (other, None))
    batches += [build_batch([Record(4, 0, b"\x00\x09junk", b"x")])]
    core = ShareCoordinator()
    report = core.load(0, 5, 1, batches)
    assert report.snapshots == 1 and report.unreadable == 1
    assert core.snapshots == {KEY: Snapshot(later, 2)} and core.loaded == {0: 5}
    assert core.unload(0, 1) == 1 and not core.snapshots and not core.loaded


def test_fencing_by_leader_epoch_and_state_epoch() -> None:
    core = ShareCoordinator()
    assert core.read(KEY, 4).error is ErrorCode.NONE  # never written: nothing, no error
    d = core.write(KEY, STATE, 4)
    assert d.error is ErrorCode.NONE and d.store == Snapshot(STATE, 4, 0)
    core.written(KEY, d.store, 100)
    # the old leader (epoch 3) may neither write nor read
    assert core.write(KEY, STATE, 3).error is ErrorCode.FENCED_LEADER_EPOCH
    assert core.read(KEY, 3).error is ErrorCode.FENCED_LEADER_EPOCH
    # the same leader reads what it wrote; a new one (epoch 5) stores its epoch first
    assert core.read(KEY, 4).answer == Snapshot(STATE, 4, 0) and core.read(KEY, 4).store is None
    d = core.read(KEY, 5)
    assert d.store == Snapshot(STATE, 5, 1) and d.answer == d.store
    core.written(KEY, d.store, 101)
    assert core.write(KEY, STATE, 4).error is ErrorCode.FENCED_LEADER_EPOCH
    # a state epoch below the stored one (an older AlterShareGroupOffsets) is fenced
    core.written(KEY, Snapshot(ShareState(0, 0, (), 2), 5, 2), 102)
    assert core.write(KEY, STATE, 5).error is ErrorCode.FENCED_STATE_EPOCH


def test_a_record_replicated_out_of_order_does_not_win() -> None:
    core = ShareCoordinator()
    core.written(KEY, Snapshot(STATE, 2), 20)
    core.written(KEY, Snapshot(ShareState(0, 0, ()), 1), 19)
    assert core.snapshots[KEY] == Snapshot(STATE, 2)
