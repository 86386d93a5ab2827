"""The partition side of transactions in the sans-I/O core: the producer table's open
transactions, the LSO rule (``Partition.last_stable_offset``), markers on the leader
(``write_marker_as_leader``) and the same state on a follower that replicated the batches."""

from __future__ import annotations

import struct

from floodmark.errors import ErrorCode
from floodmark.records import (
    ControlType,
    EndTxnMarker,
    Record,
    build_batch,
    build_marker_batch,
    iter_batches,
    read_end_txn_marker,
    simple_batch,
)
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import (
    Effect,
    FetchResponse,
    FollowerFetch,
    Partition,
    PartitionConfig,
)
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.replication.producer_state import AbortedTxn, BatchMeta, ProducerStateTable
from floodmark.replication.purgatory import CompleteProduce
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log


def _data(pid: int, seq: int, *, txn: bool = True, epoch: int = 0, count: int = 1) -> BatchMeta:
    return BatchMeta(pid, epoch, seq, count, count - 1, txn)


def _marker(pid: int, committed: bool, *, epoch: int = 0, coordinator_epoch: int = 0
            ) -> BatchMeta:
    kind = ControlType.COMMIT if committed else ControlType.ABORT
    return BatchMeta(pid, epoch, -1, 1, 0, True, True, EndTxnMarker(kind, coordinator_epoch))


def test_marker_batch_round_trips() -> None:
    batch = build_marker_batch(7, 3, EndTxnMarker(ControlType.ABORT, 12), timestamp_ms=5)
    [(_pos, header)] = list(iter_batches(batch))
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert read_end_txn_marker(header) == EndTxnMarker(ControlType.ABORT, 12)


def test_first_unstable_offset_is_the_oldest_open_transaction() -> None:
    t = ProducerStateTable()
    assert t.first_unstable_offset(0) is None
    t.record(_data(1, 0, count=2), 10)
    t.record(_data(2, 0), 12)
    t.record(_data(1, 2), 13)  # a second batch does not move the first offset
    assert t.first_unstable_offset(0) == 10
    assert t.record(_marker(1, committed=True), 14) is None
    # Committed, but the marker is not below the HW yet: still unstable.
    assert t.first_unstable_offset(14) == 10
    assert t.first_unstable_offset(15) == 12
    aborted = t.record(_marker(2, committed=False), 15)
    assert aborted == AbortedTxn(2, 12, 15, 16)  # nothing else open: LSO after it is 16
    t.on_high_watermark(16)
    assert t.first_unstable_offset(16) is None


def test_marker_batch_is_the_generic_encoding_of_its_one_record() -> None:
    # The marker's record is encoded once per (type, coordinator epoch) and reused: the bytes
    # must stay exactly those of the generic encoder, whatever the ids, times and epochs.
    for kind in (ControlType.ABORT, ControlType.COMMIT):
        for coordinator_epoch in (0, 9, 2**31 - 1):
            key = struct.pack(">hh", 0, int(kind))
            value = struct.pack(">hi", 0, coordinator_epoch)
            for pid, epoch, ts, leader_epoch in ((7, 3, 5, -1), (2**40, 0, 1_700_000_000_000, 4)):
                assert build_marker_batch(
                    pid, epoch, EndTxnMarker(kind, coordinator_epoch), timestamp_ms=ts,
                    partition_leader_epoch=leader_epoch,
                ) == build_batch([Record(0, ts, key, value)], partition_leader_epoch=leader_epoch,
                                 producer_id=pid, producer_epoch=epoch, is_transactional=True,
                                 is_control=True)


def test_the_oldest_open_transaction_whatever_order_they_close_in() -> None:
    t = ProducerStateTable()
    for pid in range(1, 6):
        t.record(_data(pid, 0), pid * 10)
    t.record(_marker(3, committed=False), 60)
    t.record(_marker(1, committed=True), 61)
    assert t.first_unstable_offset(100) == 20
    t.record(_data(1, 1), 62)  # producer 1's next transaction is now the youngest
    assert t.record(_marker(2, committed=False), 63) == AbortedTxn(2, 20, 63, 40)
    t.record(_marker(4, committed=True), 64)
    t.record(_marker(5, committed=True), 65)
    assert t.first_unstable_offset(100) == 62
    assert t.open_transactions() == {1: 62}


def test_the_oldest_open_transaction_even_if_recorded_out_of_log_order() -> None:
    t = ProducerStateTable()
    t.record(_data(1, 0), 30)
    t.record(_data(2, 0), 10)
    t.record(_data(3, 0), 20)
    assert t.first_unstable_offset(100) == 10
    assert t.record(_marker(2, committed=False), 40) == AbortedTxn(2, 10, 40, 20)
    assert t.first_unstable_offset(40) == 10  # its marker is not below the HW yet
    t.on_high_watermark(41)
    assert t.first_unstable_offset(41) == 20


def test_an_abort_records_the_oldest_other_open_transaction_as_its_lso() -> None:
    t = ProducerStateTable()
    t.record(_data(1, 0), 0)
    t.record(_data(2, 0), 1)
    assert t.record(_marker(2, committed=False), 2) == AbortedTxn(2, 1, 2, 0)


def test_plain_batch_inside_a_transaction_is_invalid_txn_state() -> None:
    t = ProducerStateTable()
    t.record(_data(1, 0), 0)
    assert t.check(_data(1, 1, txn=False)).error is ErrorCode.INVALID_TXN_STATE
    assert t.check(_data(1, 1)).error is ErrorCode.NONE
    t.record(_marker(1, committed=True), 1)
    assert t.check(_data(1, 1, txn=False)).error is ErrorCode.NONE


def test_a_batch_of_an_aborted_transaction_is_never_a_duplicate_in_the_next_one() -> None:
    """The chaos run's lost commit (docs/chaos.md): a client purged an unacknowledged batch on
    abort and sent a new record with the same epoch and sequence in its next transaction.
    Kafka answers it as a duplicate of the aborted batch (success at the aborted offset), and
    the committed transaction lacks the record; floodmark refuses it as out of order, so the
    client aborts and bumps its epoch instead of being told a lie."""
    t = ProducerStateTable()
    t.record(_data(1, 0, count=3), 10)  # sequences 0-2, offsets 10-12
    t.record(_data(1, 3), 13)  # the batch whose acknowledgement never came
    retry = t.check(_data(1, 3))
    assert retry.error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER  # a retry inside the transaction
    assert retry.duplicate_of is not None and retry.duplicate_of.first_offset == 13
    t.record(_marker(1, committed=False), 14)
    assert t.check(_data(1, 3)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(_data(1, 0, count=3)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(_data(1, 4)).error is ErrorCode.NONE  # the next sequence is still the next
    # Batches written after the abort are duplicates again when retried.
    t.record(_data(1, 4), 15)
    assert t.check(_data(1, 4)).error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # A commit keeps Kafka's answer: a late retry of a committed batch is a duplicate.
    t.record(_marker(1, committed=True), 16)
    assert t.check(_data(1, 4)).error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_marker_fencing() -> None:
    t = ProducerStateTable()
    t.record(_data(1, 0, epoch=2), 0)
    assert t.check_marker(1, 1, 0) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check_marker(1, 2, 0) is ErrorCode.NONE
    t.record(_marker(1, committed=False, epoch=3, coordinator_epoch=5), 1)  # epoch bumped
    assert t.check_marker(1, 3, 4) is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert t.check(_data(1, 1, epoch=2)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    assert t.check(_data(1, 0, epoch=3)).error is ErrorCode.NONE  # sequences restart at 0


def test_an_abort_with_a_bumped_epoch_closes_the_older_epochs_transaction() -> None:
    t = ProducerStateTable()
    t.record(_data(1, 0, epoch=0), 5)
    assert t.record(_marker(1, committed=False, epoch=1), 6) == AbortedTxn(1, 5, 6, 7)
    assert t.open_transactions() == {}


def test_rebuild_finds_the_same_state_and_every_abort() -> None:
    t = ProducerStateTable()
    log_batches = [
        simple_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0,
                     is_transactional=True, base_offset=0),
        build_marker_batch(1, 0, EndTxnMarker(ControlType.ABORT, 0), timestamp_ms=0),
        simple_batch([b"b"], producer_id=2, producer_epoch=0, base_sequence=0,
                     is_transactional=True, base_offset=2),
    ]
    data = bytearray(b"".join(log_batches))
    from floodmark.records import set_base_offset
    positions = [p for p, _h in iter_batches(data)]
    set_base_offset(data, positions[1], 1)
    headers = [h for _p, h in iter_batches(bytes(data))]
    assert t.rebuild(headers) == [AbortedTxn(1, 0, 1, 2)]
    assert t.open_transactions() == {2: 2}
    assert t.first_unstable_offset(3) == 2


# -- the core on a real (in-memory) log, leader and follower -------------------------------------
class Replica:
    def __init__(self, broker_id: int, config: LogConfig | None = None) -> None:
        fs = self.fs = MemoryFileSystem()
        fs.mkdirs("/d/t-0")
        self.log = Log.open("/d/t-0", config, fs=fs, now_ms=0)
        self.core = Partition(PartitionConfig("t", 0, broker_id, min_insync_replicas=1))
        self.completed: list[CompleteProduce] = []
        self.driver = ReplicaDriver(self.core, self.log, self)
        self.next_id = 0

    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        self.driver.apply(effects)

    def complete_produce(self, done: CompleteProduce) -> None:
        self.completed.append(done)

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

    def produce(self, values: list[bytes], pid: int = -1, seq: int = -1,
                txn: bool = False) -> ErrorCode | None:
        self.next_id += 1
        batch = simple_batch(values, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=seq, is_transactional=txn)
        out = produce_as_leader(self.core, self.log, batch, acks=-1, produce_id=self.next_id,
                                now_ms=0, timeout_ms=1000)
        self.apply(out.effects)
        return out.answer

    def marker(self, pid: int, committed: bool) -> ErrorCode | None:
        self.next_id += 1
        out = write_marker_as_leader(self.core, self.log, pid, 0, committed, 0,
                                     produce_id=self.next_id, now_ms=0, timeout_ms=1000)
        self.apply(out.effects)
        return out.answer


def _pair() -> tuple[Replica, Replica]:
    leader, follower = Replica(1), Replica(2)
    reg = PartitionRegistration((1, 2), (1, 2), 1, 1, 0)
    leader.apply(leader.core.apply_metadata(leader.log, reg, 0))
    follower.apply(follower.core.apply_metadata(follower.log, reg, 0))
    return leader, follower


def _replicate(leader: Replica, follower: Replica) -> None:
    """One follower fetch round trip (the follower learns the leader's HW a fetch later)."""
    request = follower.core.next_fetch(follower.log)
    assert isinstance(request, FollowerFetch)
    decision = leader.core.handle_follower_fetch(leader.log, request, 0)
    leader.apply(decision.effects)
    records = leader.log.read(decision.read_from, 1 << 20).records if decision.has_data else b""
    follower.driver.on_fetch_response(
        FetchResponse(ErrorCode.NONE, request.current_leader_epoch, decision.high_watermark,
                      decision.log_start_offset, decision.log_end_offset,
                      has_records=bool(records), fetch_offset=request.fetch_offset),
        records, 0)


def test_lso_on_leader_and_follower_and_the_marker_waits_for_replication() -> None:
    leader, follower = _pair()
    assert leader.produce([b"plain"]) is None  # acks=all: parked until the follower fetches
    assert leader.produce([b"t0", b"t1"], pid=9, seq=0, txn=True) is None
    assert leader.core.last_stable_offset == 0
    _replicate(leader, follower)  # the follower appends [0, 3)
    _replicate(leader, follower)  # ... and says so: the leader's HW moves to 3
    assert leader.core.high_watermark == 3
    assert leader.core.last_stable_offset == 1  # the open transaction starts at 1
    assert follower.core.producers.open_transactions() == {9: 1}
    answer = leader.marker(9, committed=False)
    assert answer is None  # parked: the marker at 3 is not replicated yet
    assert leader.core.last_stable_offset == 1
    _replicate(leader, follower)  # the follower appends the marker
    assert leader.core.last_stable_offset == 1
    assert not any(c.base_offset == 3 for c in leader.completed)
    _replicate(leader, follower)  # the leader's HW moves to 4: the abort is stable
    assert leader.core.high_watermark == 4
    assert leader.core.last_stable_offset == 4
    assert any(c.error is ErrorCode.NONE and c.base_offset == 3 for c in leader.completed)
    _replicate(leader, follower)  # the follower learns HW 4
    assert follower.core.high_watermark == 4
    assert follower.core.last_stable_offset == leader.core.last_stable_offset == 4
    entry = AbortedTxn(9, 1, 3, 4)
    assert leader.log.collect_aborted_transactions(0, 4) == [entry]
    assert follower.log.collect_aborted_transactions(0, 4) == [entry]
    assert follower.core.producers.open_transactions() == {}


def test_follower_truncation_reopens_a_transaction_whose_marker_it_lost() -> None:
    leader, follower = _pair()
    leader.produce([b"t0"], pid=9, seq=0, txn=True)
    leader.marker(9, committed=False)
    _replicate(leader, follower)
    _replicate(leader, follower)
    assert follower.log.collect_aborted_transactions(0, 2) == [AbortedTxn(9, 0, 1, 2)]
    follower.driver.truncate_to(1, "test")
    assert follower.core.producers.open_transactions() == {9: 0}
    assert follower.log.collect_aborted_transactions(0, 2) == []
    assert follower.core.last_stable_offset == 0


def test_client_control_batches_and_pidless_transactional_batches_are_refused() -> None:
    leader, _follower = _pair()
    marker = build_marker_batch(9, 0, EndTxnMarker(ControlType.COMMIT, 0), timestamp_ms=0)
    out = produce_as_leader(leader.core, leader.log, marker, acks=1, produce_id=1, now_ms=0,
                            timeout_ms=1000)
    assert out.answer is ErrorCode.INVALID_RECORD
    assert leader.produce([b"x"], txn=True) is ErrorCode.INVALID_RECORD
    assert leader.log.log_end_offset == 0


def test_marker_on_a_follower_is_not_leader() -> None:
    _leader, follower = _pair()
    assert follower.marker(9, committed=True) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert follower.log.log_end_offset == 0


# -- the LSO and the log start offset (Kafka: logStartOffset <= LSO <= HW) -----------------------
def _settle(leader: Replica, follower: Replica) -> None:
    """Fetch round trips until both HWs are at the leader's LEO (a read may stop at a segment)."""
    for _ in range(20):
        if leader.core.high_watermark == follower.core.high_watermark == leader.log.log_end_offset:
            return
        _replicate(leader, follower)
    raise AssertionError("replication did not settle in 20 round trips")


def _open_txn_then_plain(leader: Replica, follower: Replica) -> None:
    """Offsets: 0 plain, 1-2 pid 9's open transaction, 3 plain; replicated, HW 4, LSO 1."""
    leader.produce([b"p0"])
    leader.produce([b"t1", b"t2"], pid=9, seq=0, txn=True)
    leader.produce([b"p3"])
    _settle(leader, follower)
    assert leader.core.high_watermark == follower.core.high_watermark == 4
    assert leader.core.last_stable_offset == follower.core.last_stable_offset == 1


def test_delete_records_past_an_open_transactions_start_raises_the_lso_to_the_log_start() -> None:
    """UnifiedLog.maybeIncrementLogStartOffset -> maybeIncrementFirstUnstableOffset: the first
    unstable offset becomes max(it, log start offset); the transaction stays open."""
    leader, follower = _pair()
    _open_txn_then_plain(leader, follower)
    assert leader.driver.maybe_increment_log_start_offset(3)  # DeleteRecords(3)
    assert leader.log.log_start_offset == 3
    assert leader.core.last_stable_offset == 3  # was 1: below the log start
    assert leader.core.producers.open_transactions() == {9: 1}  # its marker is still to come
    _replicate(leader, follower)  # the follower follows the leader's log start (to its HW)
    assert follower.log.log_start_offset == 3
    assert follower.core.last_stable_offset == 3
    # The marker closes it: stable up to the HW once replicated.
    leader.marker(9, committed=True)
    _settle(leader, follower)
    assert leader.core.high_watermark == follower.core.high_watermark == 5
    assert leader.core.last_stable_offset == follower.core.last_stable_offset == 5


def test_the_lso_stays_at_the_log_start_across_a_restart_and_a_full_truncation() -> None:
    leader, follower = _pair()
    _open_txn_then_plain(leader, follower)
    leader.driver.maybe_increment_log_start_offset(2)
    leader.log.close()
    # A restart: the log start offset comes back from its checkpoint, the table from the log.
    log = Log.open("/d/t-0", fs=leader.fs, now_ms=0, log_start_offset=2)
    core = Partition(PartitionConfig("t", 0, 1), high_watermark=4)
    ReplicaDriver(core, log, leader).load_producer_state()
    assert core.producers.open_transactions() == {9: 1}
    assert core.last_stable_offset == 2
    # A follower emptied to restart at the leader's log start: nothing below it counts.
    follower.driver.truncate_fully_and_start_at(4, "test")
    follower.core.producers.on_high_watermark(4)
    assert follower.core.producers.first_unstable_offset(4) is None


def test_retention_past_an_open_transactions_start_raises_the_lso() -> None:
    # One batch per segment (the smallest segments there are); retention.bytes keeps only the
    # active one.
    config = LogConfig(segment_bytes=61, retention_bytes=1, retention_ms=-1)
    leader, follower = Replica(1, config), Replica(2)
    reg = PartitionRegistration((1, 2), (1, 2), 1, 1, 0)
    leader.apply(leader.core.apply_metadata(leader.log, reg, 0))
    follower.apply(follower.core.apply_metadata(follower.log, reg, 0))
    _open_txn_then_plain(leader, follower)
    leader.produce([b"p4"])
    _settle(leader, follower)
    assert leader.core.high_watermark == 5 and leader.core.last_stable_offset == 1
    assert leader.driver.apply_retention(0) > 0
    start = leader.log.log_start_offset
    assert 1 < start <= 4, start  # the transaction's first batch went
    assert leader.core.last_stable_offset == start
