"""The share-partition state store: what is saved loads back the same (with the leader epoch it
was written at), a file that does not parse is one log line and counts as absent, and
``stored`` names every saved (group, topic id, partition)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.broker.share_group.state_store import ShareStateStore, decode, encode
from floodmark.storage.fs import RealFileSystem

T = uuid.UUID(int=5)
STATE = ShareState(10, 14, (StateBatch(10, 11, RecordState.AVAILABLE, 2),
                            StateBatch(12, 12, RecordState.ACKNOWLEDGED, 1),
                            StateBatch(13, 13, RecordState.ARCHIVED, 5)), state_epoch=3)


def test_round_trip(tmp_path: Path) -> None:
    store = ShareStateStore(RealFileSystem(), tmp_path)
    assert store.load("g", T, 0) is None
    store.save("g", T, 0, STATE, 7)
    stored = store.load("g", T, 0)
    assert stored is not None and stored.state == STATE and stored.leader_epoch == 7
    store.save("ü/..", T, 1, ShareState(0, 0), 0)  # any group id is a safe file name
    assert sorted(store.stored()) == [("g", T, 0), ("ü/..", T, 1)]
    store.delete("g", T, 0)
    assert store.load("g", T, 0) is None


def test_an_unreadable_file_is_one_line_and_absent(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = ShareStateStore(RealFileSystem(), tmp_path)
    store.save("g", T, 0, STATE, 1)
    path = next(p for p in (tmp_path / "share-group-state").rglob("*") if p.is_file())
    path.write_text("0\n1 10 14 1\n3\n10 99 0 1\n")
    with caplog.at_level(logging.ERROR):
        assert store.load("g", T, 0) is None
    assert len(caplog.records) == 1 and "Traceback" not in caplog.text
    with pytest.raises(ValueError):
        decode("1\n")
    assert decode(encode(STATE, 4)).state == STATE
