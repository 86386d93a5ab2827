"""Log compaction with transactions (issue 15): a committed record must never be cleaned away
because of a later record of the same key that belongs to an aborted transaction, or to a
transaction still open (which may yet abort). Kafka builds its offset map without aborted
records and cleans only below the last stable offset; without that, a transactional offset
commit that aborts on a compacted ``__consumer_offsets`` would erase the group's committed
offset."""

from __future__ import annotations

from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch, decode_records
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Effect, Partition, PartitionConfig
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.cleaner import clean_log, plan_cleaning

NOW = 10_000_000
PID = 9


class Compacted:
    """A lone leader of a compacted partition, written through the produce path."""

    def __init__(self) -> None:
        fs = MemoryFileSystem()
        config = LogConfig.from_kafka({"segment.bytes": 250, "cleanup.policy": "compact",
                                       "min.cleanable.dirty.ratio": "0.01"})
        self.log = Log.open("/d/t-0", config, fs=fs, now_ms=NOW)
        self.core = Partition(PartitionConfig("t", 0, 1))
        self.driver = ReplicaDriver(self.core, self.log, self)
        self.apply(self.core.apply_metadata(
            self.log, PartitionRegistration((1,), (1,), 1, 1, 0), NOW))
        self.ids = 0
        self.seq = 0

    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        self.driver.apply(effects)

    def complete_produce(self, done: object) -> None: ...
    def high_watermark_changed(self, old: int, new: int) -> None: ...
    def propose_isr(self, request: object) -> None: ...
    def wake_follower_fetches(self) -> None: ...
    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None: ...
    def follower_appended(self, records: bytes | bytearray | memoryview) -> None: ...

    def put(self, key: bytes, value: bytes, *, txn: bool = False) -> None:
        self.ids += 1
        batch = build_batch([Record(0, NOW, key, value)], producer_id=PID if txn else -1,
                            producer_epoch=0 if txn else -1,
                            base_sequence=self.seq if txn else -1, is_transactional=txn)
        if txn:
            self.seq += 1
        out = produce_as_leader(self.core, self.log, batch, acks=1, produce_id=self.ids,
                                now_ms=NOW, timeout_ms=1000)
        assert out.answer is ErrorCode.NONE
        self.apply(out.effects)

    def end(self, committed: bool) -> None:
        self.ids += 1
        out = write_marker_as_leader(self.core, self.log, PID, 0, committed, 0,
                                     produce_id=self.ids, now_ms=NOW, timeout_ms=1000)
        assert out.answer is ErrorCode.NONE
        self.apply(out.effects)

    def fill(self, count: int = 12) -> None:
        for i in range(count):
            self.put(b"filler-%d" % i, b"x" * 40)

    def clean(self) -> None:
        # The bound the broker passes: the last stable offset (the HW without transactions).
        plan = plan_cleaning(self.log, 0, self.core.last_stable_offset, NOW)
        clean_log(self.log, plan, NOW)

    def values_of(self, key: bytes) -> list[bytes | None]:
        return [r.value for r in decode_records(self.log.read_all()) if r.key == key]


def test_an_aborted_record_does_not_supersede_a_committed_one() -> None:
    p = Compacted()
    p.put(b"group-offset", b"committed-1")
    p.put(b"group-offset", b"aborted-2", txn=True)
    p.end(committed=False)
    p.fill()
    p.clean()
    assert b"committed-1" in p.values_of(b"group-offset")


def test_an_open_transaction_is_not_cleaned_over() -> None:
    p = Compacted()
    p.put(b"group-offset", b"committed-1")
    p.put(b"group-offset", b"pending-2", txn=True)  # open: may still abort
    p.fill()
    assert p.core.last_stable_offset == 1
    p.clean()
    p.end(committed=False)
    assert b"committed-1" in p.values_of(b"group-offset")


def test_a_committed_transactional_record_supersedes_as_usual() -> None:
    p = Compacted()
    p.put(b"group-offset", b"committed-1")
    p.put(b"group-offset", b"committed-2", txn=True)
    p.end(committed=True)
    p.fill()
    p.clean()
    assert p.values_of(b"group-offset") == [b"committed-2"]
