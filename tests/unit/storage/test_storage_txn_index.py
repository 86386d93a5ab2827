"""The aborted transactions index (``.txnindex``): written on abort in the marker's segment,
34-byte entries in Kafka's layout, deleted with its segment, cut with the log, and made to agree
with the log when a partition opens (a torn tail, an index write lost in a crash)."""

from __future__ import annotations

import struct

import pytest

from floodmark.errors import ErrorCode
from floodmark.records import ATTRIBUTES_POS, CRC_POS, CorruptRecordError, crc32c_of, simple_batch
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Effect, Partition, PartitionConfig
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.replication.producer_state import AbortedTxn
from floodmark.replication.purgatory import CompleteProduce
from floodmark.storage import LogConfig, MemoryFileSystem
from floodmark.storage.log import Log
from floodmark.storage.txn_index import ENTRY_BYTES, TxnIndex, decode_entries, encode_entries

PATH = "/d/t-0"


class Leader:
    """A lone replica leading t-0 over a log on ``fs`` (opened as the broker opens it)."""

    def __init__(self, fs: MemoryFileSystem, config: LogConfig, recovery_point: int = 0) -> None:
        self.fs = fs
        self.log = Log.open(PATH, config, fs=fs, now_ms=0, recovery_point=recovery_point)
        self.core = Partition(PartitionConfig("t", 0, 1))
        self.core.high_watermark = self.log.log_end_offset
        self.driver = ReplicaDriver(self.core, self.log, self)
        self.driver.load_producer_state()
        self.apply(self.core.apply_metadata(self.log, PartitionRegistration((1,), (1,), 1, 1, 0),
                                            0))
        self.ids = 0

    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        self.driver.apply(effects)

    def complete_produce(self, done: CompleteProduce) -> None:
        pass

    def high_watermark_changed(self, old: int, new: int) -> None:
        pass

    def propose_isr(self, request: object) -> None:
        pass

    def wake_follower_fetches(self) -> None:
        pass

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        pass

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        pass

    def txn(self, pid: int, seq: int, value: bytes = b"v" * 40) -> None:
        self.ids += 1
        batch = simple_batch([value], producer_id=pid, producer_epoch=0, base_sequence=seq,
                             is_transactional=True)
        out = produce_as_leader(self.core, self.log, batch, acks=-1, produce_id=self.ids,
                                now_ms=0, timeout_ms=1000)
        assert out.answer is ErrorCode.NONE
        self.apply(out.effects)

    def plain(self, value: bytes = b"p" * 40) -> None:
        self.ids += 1
        out = produce_as_leader(self.core, self.log, simple_batch([value]), acks=-1,
                                produce_id=self.ids, now_ms=0, timeout_ms=1000)
        assert out.answer is ErrorCode.NONE
        self.apply(out.effects)

    def end(self, pid: int, committed: bool) -> None:
        self.ids += 1
        out = write_marker_as_leader(self.core, self.log, pid, 0, committed, 0,
                                     produce_id=self.ids, now_ms=0, timeout_ms=1000)
        assert out.answer is ErrorCode.NONE
        self.apply(out.effects)


def _files(fs: MemoryFileSystem) -> dict[str, list[AbortedTxn]]:
    return {name: decode_entries(fs.read_file(f"{PATH}/{name}"))
            for name in sorted(fs.listdir(PATH)) if name.endswith(".txnindex")}


def test_entry_layout_is_kafkas() -> None:
    data = encode_entries([AbortedTxn(7, 10, 20, 21)])
    assert len(data) == ENTRY_BYTES == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 10, 20, 21)
    assert decode_entries(data + data[:20]) == [AbortedTxn(7, 10, 20, 21)]  # torn tail ignored


def test_abort_is_indexed_in_the_markers_segment_and_goes_with_it() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=300, retention_bytes=0)
    leader = Leader(fs, config)
    leader.txn(1, 0)          # offset 0, segment 0
    leader.plain()            # 1
    leader.plain()            # 2
    leader.txn(1, 1)          # 3 (rolled)
    leader.end(1, committed=False)  # 4: the abort of [0, 4]
    leader.txn(2, 0)          # 5
    leader.end(2, committed=True)   # 6: commits are not indexed
    bases = leader.log.segment_base_offsets()
    assert len(bases) >= 2
    marker_segment = [b for b in bases if b <= 4][-1]
    assert _files(fs) == {f"{marker_segment:020d}.txnindex": [AbortedTxn(1, 0, 4, 5)]}
    assert leader.log.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 0, 4, 5)]
    assert leader.log.collect_aborted_transactions(5, 7) == []
    # Retention takes the segment with its index.
    for _ in range(6):
        leader.plain()
    leader.log.apply_retention(0, leader.core.high_watermark)
    assert leader.log.log_start_offset > 4
    assert _files(fs) == {}


def test_a_lost_marker_reopens_the_transaction_and_its_entry_goes() -> None:
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)
    leader.plain()
    leader.log.flush()
    leader.end(1, committed=False)  # written, not fsynced: lost with the power
    fs.crash(lose_unsynced=True)
    again = Leader(fs, LogConfig(), recovery_point=2)
    assert again.log.log_end_offset == 2
    assert again.core.producers.open_transactions() == {1: 0}
    assert again.core.last_stable_offset == 0
    assert again.log.collect_aborted_transactions(0, 2) == []
    assert _files(fs) in ({}, {f"{0:020d}.txnindex": []})


def test_an_index_write_lost_in_a_crash_is_restored_from_the_log() -> None:
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)
    leader.end(1, committed=False)
    leader.txn(2, 0)
    leader.end(2, committed=False)
    leader.log.flush()
    leader.log.close()
    name = f"{PATH}/{0:020d}.txnindex"
    fs.remove(name)  # as if the index had not reached the disk while the log had
    again = Leader(fs, LogConfig(), recovery_point=4)
    expected = [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 2, 3, 4)]
    assert again.log.collect_aborted_transactions(0, 4) == expected
    assert decode_entries(fs.read_file(name)) == expected
    # A torn entry at the end of the file is cut and the entry restored too.
    again.log.close()
    handle = fs.open(name)
    handle.truncate(ENTRY_BYTES + 10)
    handle.close()
    third = Leader(fs, LogConfig(), recovery_point=4)
    assert third.log.collect_aborted_transactions(0, 4) == expected
    assert decode_entries(fs.read_file(name)) == expected


def test_truncation_cuts_the_entries_of_markers_it_removes() -> None:
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)
    leader.end(1, committed=False)  # 1
    leader.txn(2, 0)                 # 2
    leader.end(2, committed=False)  # 3
    leader.driver.truncate_to(3, "test")
    assert leader.log.collect_aborted_transactions(0, 3) == [AbortedTxn(1, 0, 1, 2)]
    assert _files(fs) == {f"{0:020d}.txnindex": [AbortedTxn(1, 0, 1, 2)]}
    assert leader.core.producers.open_transactions() == {2: 2}


def test_collect_stops_at_an_entry_whose_lso_reaches_the_bound() -> None:
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig(segment_bytes=200))
    for pid in range(1, 5):
        leader.txn(pid, 0)
        leader.end(pid, committed=False)
    everything = leader.log.collect_aborted_transactions(0, 8)
    assert [a.producer_id for a in everything] == [1, 2, 3, 4]
    assert [a.producer_id for a in leader.log.collect_aborted_transactions(3, 5)] == [2, 3]


def test_append_says_when_it_created_the_file() -> None:
    # The log fsyncs the directory after an append that created the file; asked of the file
    # system once, not once per abort.
    fs = MemoryFileSystem()
    fs.mkdirs(PATH)
    index = TxnIndex(fs, f"{PATH}/00000000000000000000.txnindex")
    assert index.append([AbortedTxn(1, 0, 1, 2)]) is True
    assert index.append([AbortedTxn(1, 2, 3, 4)]) is False
    index.release()
    again = TxnIndex(fs, index.path)
    assert again.append([AbortedTxn(1, 4, 5, 6)]) is False
    assert decode_entries(fs.read_file(index.path)) == [
        AbortedTxn(1, 0, 1, 2), AbortedTxn(1, 2, 3, 4), AbortedTxn(1, 4, 5, 6)]


def test_the_index_file_an_abort_creates_survives_a_power_loss_after_the_flush() -> None:
    # Its directory entry is fsynced with the flush that follows the abort that created it (the
    # creation is known from the index itself, not asked of the file system per abort).
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.plain()
    leader.log.flush()
    leader.txn(1, 0)
    leader.end(1, committed=False)
    leader.txn(1, 1)
    leader.end(1, committed=False)
    leader.log.flush()
    fs.crash(lose_unsynced=True)
    assert _files(fs) == {f"{0:020d}.txnindex": [AbortedTxn(1, 1, 2, 3), AbortedTxn(1, 3, 4, 5)]}


def _reopen_log(fs: MemoryFileSystem) -> Log:
    return Log.open(PATH, LogConfig(), fs=fs, now_ms=0, recovery_point=2**62)


def test_a_rebuild_the_log_refutes_never_replaces_a_right_index() -> None:
    """Issue 28: a rebuild that misread a marker offered (a) an abort reaching back over an
    earlier committed transaction of the same producer and (b) no entry for a real abort. The
    log refutes (a) and bears out the file's entries: the index keeps them, and the file as it
    was is kept as evidence."""
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)                 # 0
    leader.end(1, committed=True)    # 1: committed
    leader.txn(1, 1)                 # 2
    leader.end(1, committed=False)   # 3: aborted [2, 3]
    leader.txn(2, 0)                 # 4
    leader.end(2, committed=False)   # 5: aborted [4, 5]
    right = [AbortedTxn(1, 2, 3, 4), AbortedTxn(2, 4, 5, 6)]
    assert leader.log.collect_aborted_transactions(0, 6) == right
    leader.log.flush()
    leader.log.close()
    log = _reopen_log(fs)
    wrong = [AbortedTxn(1, 0, 3, 4)]  # reaches back over offset 1's commit; lacks pid 2's
    log.restore_aborted_transactions(wrong)
    assert log.segments[0].txn_index.entries == right
    name = f"{PATH}/{0:020d}.txnindex"
    assert decode_entries(fs.read_file(name)) == right
    assert decode_entries(fs.read_file(name + ".before-rebuild")) == right


def test_a_rebuild_drops_entries_the_log_refutes_and_adds_those_it_bears_out() -> None:
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)                 # 0
    leader.end(1, committed=False)   # 1: aborted [0, 1]
    leader.txn(2, 0)                 # 2
    leader.end(2, committed=True)    # 3: committed
    leader.log.flush()
    leader.log.close()
    name = f"{PATH}/{0:020d}.txnindex"
    bogus = [AbortedTxn(2, 2, 3, 4)]  # a commit written down as an abort
    handle = fs.open(name)
    handle.truncate(0)
    handle.write(encode_entries(bogus))
    handle.close()
    log = _reopen_log(fs)
    log.restore_aborted_transactions([AbortedTxn(1, 0, 1, 2)])
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 1, 2)]
    assert decode_entries(fs.read_file(name + ".before-rebuild")) == bogus
    # The evidence goes with its segment.
    log.segments[0].delete(fs)
    assert not fs.exists(name + ".before-rebuild")


def test_an_unreadable_marker_is_corruption_named_by_its_offset() -> None:
    """A marker whose record cannot be decoded (its CRC is made right again, as a bug writing
    a bad marker would) stops the rebuild with its offset, instead of being taken for "not a
    marker" and leaving its transaction open."""
    fs = MemoryFileSystem()
    leader = Leader(fs, LogConfig())
    leader.txn(1, 0)                 # 0
    leader.end(1, committed=False)   # 1
    leader.log.flush()
    leader.log.close()
    segment = f"{PATH}/{0:020d}.log"
    data = bytearray(fs.read_file(segment))
    marker_at = len(data) - 78
    data[-4:] = b"\xff\xff\xff\xff"  # the marker's value: garbage lengths
    struct.pack_into(">I", data, marker_at + CRC_POS, crc32c_of(data[marker_at + ATTRIBUTES_POS:]))
    handle = fs.open(segment)
    handle.truncate(0)
    handle.write(bytes(data))
    handle.close()
    with pytest.raises(CorruptRecordError, match="marker at offset 1"):
        Leader(fs, LogConfig(), recovery_point=2)
