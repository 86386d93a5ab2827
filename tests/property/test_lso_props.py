"""Hypothesis: the LSO rule against a model recomputed from scratch, and what a read_committed
reader is shown against the transactions' outcomes.

Model: the log is a list of entries (plain, transactional of producer p, marker of p). A
transaction of p spans from its first batch to its marker. LSO = min(HW, first offset of every
transaction that is open, or whose marker is at or above the HW). A read_committed reader of
[0, LSO) sees the plain records and the records of committed transactions, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.client.fetch import FetchedPartition, visible_records
from floodmark.constants import READ_COMMITTED
from floodmark.errors import ErrorCode
from floodmark.records import ControlType, EndTxnMarker, simple_batch
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Effect, Partition, PartitionConfig
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.replication.producer_state import BatchMeta, ProducerStateTable
from floodmark.storage import LogConfig, MemoryFileSystem
from floodmark.storage.log import Log

PIDS = (1, 2, 3)

# (kind, pid, flag): ("plain",), ("txn", pid), ("end", pid, committed), ("hw", fraction),
# ("start", fraction): the log start offset moves up to that fraction of the HW (DeleteRecords)
op = st.one_of(
    st.just(("plain", 0, False)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.just(False)),
    st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("hw"), st.integers(0, 100), st.just(False)),
    st.tuples(st.just("start"), st.integers(0, 100), st.just(False)),
)


@dataclass
class Model:
    entries: list[tuple[str, int, bool]] = field(default_factory=list)  # (kind, pid, committed)
    open: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    done: list[tuple[int, int, int, bool]] = field(default_factory=list)  # pid, first, marker, commit

    def lso(self, hw: int, log_start: int = 0) -> int:
        """Kafka: min(HW, max(first unstable offset, log start offset))."""
        firsts = list(self.open.values()) + [f for _p, f, m, _c in self.done if m >= hw]
        return min(hw, max(min(firsts), log_start)) if firsts else hw


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=40))
def test_first_unstable_offset_matches_the_model(ops: list[tuple[str, int, object]]) -> None:
    table = ProducerStateTable()
    model = Model()
    hw = log_start = 0
    seq = dict.fromkeys(PIDS, 0)
    for kind, pid, flag in ops:
        offset = len(model.entries)
        if kind == "plain":
            model.entries.append(("plain", -1, False))
        elif kind == "txn":
            table.record(BatchMeta(pid, 0, seq[pid], 1, 0, True), offset)
            seq[pid] += 1
            model.open.setdefault(pid, offset)
            model.entries.append(("txn", pid, False))
        elif kind == "end":
            committed = bool(flag)
            marker = EndTxnMarker(ControlType.COMMIT if committed else ControlType.ABORT, 0)
            aborted = table.record(BatchMeta(pid, 0, -1, 1, 0, True, True, marker), offset)
            first = model.open.pop(pid, offset)
            model.done.append((pid, first, offset, committed))
            model.entries.append(("end", pid, committed))
            assert (aborted is None) == committed
            if aborted is not None:
                assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (
                    pid, first, offset)
                assert aborted.last_stable_offset == min([*model.open.values(), offset + 1])
        elif kind == "hw":  # the HW moves forward, up to the log end
            hw = max(hw, len(model.entries) * int(pid) // 100)
            table.on_high_watermark(hw)
        elif kind == "start":  # never past the HW (storage refuses)
            log_start = max(log_start, hw * int(pid) // 100)
            table.on_log_start_offset(log_start)
        first = table.first_unstable_offset(hw)
        lso = hw if first is None else min(hw, first)
        assert log_start <= lso == model.lso(hw, log_start) <= hw
        assert table.open_transactions() == model.open


class _Ports:
    def high_watermark_changed(self, old: int, new: int) -> None: ...
    def complete_produce(self, done: object) -> None: ...
    def propose_isr(self, request: object) -> None: ...
    def wake_follower_fetches(self) -> None: ...
    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None: ...
    def follower_appended(self, records: bytes | bytearray | memoryview) -> None: ...


@settings(max_examples=100, deadline=None)
@given(st.lists(op, max_size=30))
def test_read_committed_shows_exactly_the_committed_records(
        ops: list[tuple[str, int, object]]) -> None:
    """A single replica (its HW follows its LEO) over real storage: the Fetch of [0, LSO) with
    the aborted list from the segments' index, filtered by the client's rule, is exactly the
    plain records and those of committed transactions; a rebuild from the log agrees."""
    fs = MemoryFileSystem()
    fs.mkdirs("/d/t-0")
    log = Log.open("/d/t-0", LogConfig(segment_bytes=400), fs=fs, now_ms=0)
    core = Partition(PartitionConfig("t", 0, 1))
    driver = ReplicaDriver(core, log, _Ports())

    def apply(effects: list[Effect]) -> None:
        driver.apply(effects)

    apply(core.apply_metadata(log, PartitionRegistration((1,), (1,), 1, 1, 0), 0))
    seq = dict.fromkeys(PIDS, 0)
    values: dict[int, tuple[str, int]] = {}  # offset -> (value, pid or -1)
    outcome: dict[tuple[int, int], bool] = {}  # (pid, first offset) -> committed
    open_first: dict[int, int] = {}
    for i, (kind, pid, flag) in enumerate(ops):
        offset = log.log_end_offset
        if kind in ("plain", "txn"):
            txn = kind == "txn"
            batch = simple_batch([f"v{i}".encode()], producer_id=pid if txn else -1,
                                 producer_epoch=0 if txn else -1,
                                 base_sequence=seq[pid] if txn else -1, is_transactional=txn)
            out = produce_as_leader(core, log, batch, acks=1, produce_id=i, now_ms=0,
                                    timeout_ms=1000)
            assert out.answer is ErrorCode.NONE
            apply(out.effects)
            if txn:
                seq[pid] += 1
                open_first.setdefault(pid, offset)
            values[offset] = (f"v{i}", pid if txn else -1)
        elif kind == "end":
            out = write_marker_as_leader(core, log, pid, 0, bool(flag), 0, produce_id=i,
                                         now_ms=0, timeout_ms=1000)
            apply(out.effects)
            assert out.answer is ErrorCode.NONE  # acks=all, a single replica: at once
            outcome[(pid, open_first.pop(pid, offset))] = bool(flag)
    lso = core.last_stable_offset
    assert lso == min([core.high_watermark, *open_first.values()])
    # Read [0, LSO) a batch at a time, as a consumer would.
    shown: list[str] = []
    position = 0
    while position < lso:
        data = log.read(position, 1, lso)
        aborted = tuple((a.producer_id, a.first_offset)
                        for a in log.collect_aborted_transactions(position, data.next_offset))
        fetched = FetchedPartition(0, core.high_watermark, lso, 0, aborted, bytes(data.records))
        shown += [(r.value or b"").decode() for r in visible_records(fetched, position,
                                                                     READ_COMMITTED)]
        position = data.next_offset

    def committed(offset: int, pid: int) -> bool:
        firsts = [f for (p, f) in outcome if p == pid and f <= offset]
        return bool(firsts) and outcome[(pid, max(firsts))]

    expected = [v for o, (v, pid) in sorted(values.items())
                if o < lso and (pid < 0 or committed(o, pid))]
    assert shown == expected
    # A restart rebuilds the same open transactions and the same aborts.
    again = ProducerStateTable()
    rebuilt = again.rebuild(log.iter_whole_batches(), core.high_watermark)
    assert again.open_transactions() == core.producers.open_transactions()
    assert rebuilt == log.collect_aborted_transactions(0, log.log_end_offset + 1)
