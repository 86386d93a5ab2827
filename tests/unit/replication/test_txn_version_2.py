"""Transaction version 2 (KIP-890 part 2) in the coordinator's core: every EndTxn v5 bumps the
producer epoch, the markers carry the bumped epoch, retries are recognised by their epoch one
behind, an exhausted epoch hands over to a new producer id, and the old epoch's late writes are
fenced at the partitions (the hanging transaction KIP-890 is about)."""

from __future__ import annotations

from tests.unit.replication.test_txn_coordinator import T0, T1, Harness, P

from floodmark.errors import ErrorCode
from floodmark.records import ControlType, EndTxnMarker
from floodmark.replication.producer_state import BatchMeta, ProducerStateTable
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import Reply, TxnCoordinator
from floodmark.replication.transactions.state import (
    MAX_PRODUCER_EPOCH,
    TV_2,
    TxnMetadata,
    TxnState,
)

_S = TxnState


def _end(h: Harness, pid: int, epoch: int, commit: bool, tv: int = TV_2) -> Reply:
    return h.one(h.core.end_txn(next(h.ids), P, "tx", pid, epoch, commit, h.now_ms,
                                transaction_version=tv))


def _started(h: Harness) -> tuple[int, int]:
    r = h.init()
    assert h.add(r.producer_id, r.producer_epoch, T0, T1).error is ErrorCode.NONE
    return r.producer_id, r.producer_epoch


def test_end_txn_v5_bumps_the_epoch_and_the_markers_carry_it() -> None:
    h = Harness()
    pid, epoch = _started(h)
    r = _end(h, pid, epoch, commit=True)
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    (markers,) = h.markers
    assert (markers.producer_id, markers.producer_epoch, markers.committed) == (
        pid, epoch + 1, True)
    assert markers.partitions == {T0, T1}
    h.deliver_markers()
    done = h.state()
    assert (done.state, done.producer_epoch, done.client_transaction_version) == (
        _S.COMPLETE_COMMIT, epoch + 1, TV_2)
    # the next transaction runs at the new epoch, and bumps again
    assert h.add(pid, epoch + 1, T0).error is ErrorCode.NONE
    r2 = _end(h, pid, epoch + 1, commit=False)
    assert (r2.error, r2.producer_epoch) == (ErrorCode.NONE, epoch + 2)
    assert h.markers[0].producer_epoch == epoch + 2 and not h.markers[0].committed


def test_end_txn_before_v5_keeps_the_epoch() -> None:
    h = Harness()
    pid, epoch = _started(h)
    r = _end(h, pid, epoch, commit=True, tv=0)
    assert (r.error, r.producer_epoch) == (ErrorCode.NONE, epoch)
    assert h.markers[0].producer_epoch == epoch
    h.deliver_markers()
    assert _end(h, pid, epoch, commit=True, tv=0).error is ErrorCode.NONE  # a KIP-98 retry


def test_a_retry_one_epoch_behind_gets_the_same_answer() -> None:
    h = Harness()
    pid, epoch = _started(h)
    _end(h, pid, epoch, commit=True)
    # markers not written yet: retry later, whatever is asked (Kafka 4.1.1: the next
    # transaction's abort at the bumped epoch too, librdkafka's 0098 test 2)
    assert _end(h, pid, epoch, commit=True).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert _end(h, pid, epoch + 1, commit=False).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert _end(h, pid, epoch + 1, commit=True).error is ErrorCode.CONCURRENT_TRANSACTIONS
    h.deliver_markers()
    r = _end(h, pid, epoch, commit=True)
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    # the retry of a commit is not an abort, and two epochs behind is a zombie
    assert _end(h, pid, epoch, commit=False).error is ErrorCode.INVALID_TXN_STATE
    assert _end(h, pid, epoch - 1, commit=True).error is ErrorCode.PRODUCER_FENCED
    # a commit at the current epoch with nothing open is no retry
    assert _end(h, pid, epoch + 1, commit=True).error is ErrorCode.INVALID_TXN_STATE
    assert len(h.log) == 4  # Empty, Ongoing, PrepareCommit, CompleteCommit: no more writes



def test_an_end_txn_before_v5_is_no_retry_of_a_bump() -> None:
    """Kafka's transaction version 1 way for an EndTxn below v5, whatever version wrote the
    transaction (Kafka 4.1.1, differential scenario end_txn_v0_retries_a_v2_bump): at the epoch
    before a v5 bump it is fenced; at the bumped epoch the outcome done is answered again."""
    h = Harness()
    pid, epoch = _started(h)
    _end(h, pid, epoch, commit=True)
    h.deliver_markers()
    assert _end(h, pid, epoch, commit=True, tv=0).error is ErrorCode.PRODUCER_FENCED
    assert _end(h, pid, epoch, commit=False, tv=0).error is ErrorCode.PRODUCER_FENCED
    again = _end(h, pid, epoch + 1, commit=True, tv=0)
    assert (again.error, again.producer_id, again.producer_epoch) == (
        ErrorCode.NONE, pid, epoch + 1)
    assert _end(h, pid, epoch + 1, commit=False, tv=0).error is ErrorCode.INVALID_TXN_STATE
    # an abort with nothing open (v5) bumps too: below v5, the old epoch is fenced
    h2 = Harness()
    r = h2.init()
    _end(h2, r.producer_id, r.producer_epoch, commit=False)
    h2.deliver_markers()
    assert _end(h2, r.producer_id, r.producer_epoch, commit=False,
                tv=0).error is ErrorCode.PRODUCER_FENCED

def test_an_abort_with_nothing_open_bumps_the_epoch_without_markers() -> None:
    h = Harness()
    r0 = h.init()
    pid, epoch = r0.producer_id, r0.producer_epoch
    r = _end(h, pid, epoch, commit=False)
    assert (r.error, r.producer_epoch) == (ErrorCode.NONE, epoch + 1)
    (markers,) = h.markers
    assert markers.partitions == frozenset()
    h.deliver_markers()
    assert (h.state().state, h.state().producer_epoch) == (_S.COMPLETE_ABORT, epoch + 1)
    assert [m.state for m in h.log] == [_S.EMPTY, _S.PREPARE_ABORT, _S.COMPLETE_ABORT]
    # before v5 the same request is refused, as Kafka refuses it
    h2 = Harness()
    r1 = h2.init()
    assert _end(h2, r1.producer_id, r1.producer_epoch, commit=False,
                tv=0).error is ErrorCode.INVALID_TXN_STATE


def test_a_late_add_from_the_old_epoch_is_fenced() -> None:
    """The implicit AddPartitionsToTxn a partition leader sends for a Produce v12 that was
    delayed past its transaction's end: the epoch is one behind, refused."""
    h = Harness()
    pid, epoch = _started(h)
    _end(h, pid, epoch, commit=True)
    h.deliver_markers()
    assert h.add(pid, epoch, ("late", 0)).error is ErrorCode.PRODUCER_FENCED
    assert h.state().partitions == frozenset()


def test_an_exhausted_epoch_hands_over_to_a_new_producer_id() -> None:
    h = Harness()
    pid = 77
    # a coordinator that takes over a producer at the last epoch a client may use
    h.settle(h.core.load(P, 6, {"tx": TxnMetadata(
        "tx", pid, MAX_PRODUCER_EPOCH - 1, 60_000, _S.ONGOING, frozenset({T0}), 1_000, 1_000)},
        h.now_ms))
    r = _end(h, pid, MAX_PRODUCER_EPOCH - 1, commit=True)
    new_pid = r.producer_id
    assert (r.error, r.producer_epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    assert (h.markers[0].producer_id, h.markers[0].producer_epoch) == (pid, MAX_PRODUCER_EPOCH)
    h.deliver_markers()
    done = h.state()
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (new_pid, 0, pid)
    retry = _end(h, pid, MAX_PRODUCER_EPOCH - 1, commit=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (ErrorCode.NONE, new_pid, 0)


def test_a_timed_out_transaction_fences_its_producer_for_good() -> None:
    """A transaction aborted by the coordinator (timeout) bumps the epoch too, but the fenced
    producer's EndTxn one epoch behind is not a retry of a bump: PRODUCER_FENCED."""
    h = Harness()
    r0 = h.init(timeout_ms=1_000)
    pid, epoch = r0.producer_id, r0.producer_epoch
    assert h.add(pid, epoch, T0).error is ErrorCode.NONE
    _end(h, pid, epoch, commit=True)  # transaction version 2 from now on
    h.deliver_markers()
    assert h.add(pid, epoch + 1, T0).error is ErrorCode.NONE
    h.now_ms += 5_000
    h.settle(h.core.tick(h.now_ms))
    h.deliver_markers()
    assert (h.state().state, h.state().producer_epoch) == (_S.COMPLETE_ABORT, epoch + 2)
    assert _end(h, pid, epoch + 1, commit=True).error is ErrorCode.PRODUCER_FENCED
    assert _end(h, pid, epoch + 1, commit=False).error is ErrorCode.PRODUCER_FENCED


def test_a_new_coordinator_recognises_a_retry_from_the_log() -> None:
    h = Harness()
    pid, epoch = _started(h)
    _end(h, pid, epoch, commit=True)
    h.deliver_markers()
    replayed = txn_log.replay([txn_log.build_record_batch(m, 0) for m in h.log])
    assert replayed.unreadable == 0
    core = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: 5000)
    h.core = core
    h.settle(core.load(P, 6, replayed.transactions, h.now_ms))
    r = _end(h, pid, epoch, commit=True)
    assert (r.error, r.producer_epoch) == (ErrorCode.NONE, epoch + 1)


def test_transaction_log_value_v1_round_trips_and_v0_stays_for_version_0_states() -> None:
    m = TxnMetadata("tx", 7, 3, 60_000, _S.PREPARE_COMMIT, frozenset({T0, ("x", 4)}), 10, 20,
                    client_transaction_version=TV_2, previous_producer_id=5,
                    next_producer_id=9)
    raw = txn_log.encode_value(m)
    assert raw[:2] == b"\x00\x01"
    assert txn_log.decode_value("tx", raw) == m
    old = TxnMetadata("tx", 7, 3, 60_000, _S.ONGOING, frozenset({T0}), 10, 20)
    assert txn_log.encode_value(old)[:2] == b"\x00\x00"
    assert txn_log.decode_value("tx", txn_log.encode_value(old)) == old


def _data(pid: int, epoch: int, seq: int) -> BatchMeta:
    return BatchMeta(pid, epoch, seq, 1, 0, True)


def _marker(pid: int, epoch: int, committed: bool) -> BatchMeta:
    kind = ControlType.COMMIT if committed else ControlType.ABORT
    return BatchMeta(pid, epoch, -1, 1, 0, True, True, EndTxnMarker(kind, 5))


def _hanging_after(tv: int) -> tuple[ErrorCode, dict[int, int]]:
    """A producer's Produce for T0 is delayed; the client gives up on it and commits; the
    coordinator writes the markers; then the delayed Produce reaches the leader. What the
    partition answers, and which transactions stay open there."""
    h = Harness()
    pid, epoch = _started(h)
    table = ProducerStateTable()
    table.record(_data(pid, epoch, 0), 0)  # an earlier batch of this transaction
    _end(h, pid, epoch, commit=True, tv=tv)
    (markers,) = h.markers
    assert table.check_marker(pid, markers.producer_epoch, 5) is ErrorCode.NONE
    table.record(_marker(pid, markers.producer_epoch, committed=True), 1)
    h.deliver_markers()
    late = _data(pid, epoch, 1)  # the delayed batch: old epoch, next sequence
    check = table.check(late)
    if check.error is ErrorCode.NONE:
        table.record(late, 2)
    return check.error, table.open_transactions()


def test_the_old_epochs_late_produce_is_fenced_no_hanging_transaction() -> None:
    assert _hanging_after(TV_2) == (ErrorCode.INVALID_PRODUCER_EPOCH, {})


def test_before_version_2_the_late_produce_opens_a_hanging_transaction() -> None:
    """Why KIP-890 exists: the same bytes under version 0 are appended and open a transaction
    no coordinator will ever end (the LSO stays behind it until the partition is cleaned up by
    hand). The leader's verification (part 1) is what refuses it there, not the epoch."""
    error, open_txns = _hanging_after(0)
    assert error is ErrorCode.NONE and list(open_txns.values()) == [2]
