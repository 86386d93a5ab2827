"""KIP-890 part 1 in the sans-I/O core: the verification guard the producer state hands out
while the leader asks the coordinator (``ProducerStateTable.start_verification``), the append
that needs it (``produce_as_leader(verify_transactions=True)``), the race it closes (a marker
written while the question is out), and what a refusal is answered
(``txn_verification.produce_refusal``); and the request-level rule before all of it, Kafka's:
transactional records need a transactional id (``txn_verification.lacks_transactional_id``)."""

from __future__ import annotations

from tests.unit.replication.test_transactions_core import Replica

from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.replication.producer_state import (
    MAX_VERIFICATIONS,
    BatchMeta,
    ProducerStateTable,
    VerificationGuard,
)
from floodmark.replication.txn_verification import (
    NOT_ADDED_MESSAGE,
    NOT_VERIFIED_MESSAGE,
    begin,
    lacks_transactional_id,
    needs_verification,
    produce_refusal,
    refuse,
)

PID = 9


def _leader() -> Replica:
    r = Replica(1)
    r.apply(r.core.apply_metadata(r.log, PartitionRegistration((1,), (1,), 1, 1, 0), 0))
    return r


def _txn_produce(r: Replica, seq: int, guard: VerificationGuard | None, epoch: int = 0
                 ) -> tuple[ErrorCode | None, str | None]:
    r.next_id += 1
    batch = simple_batch([b"v"], producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                         is_transactional=True)
    out = produce_as_leader(r.core, r.log, batch, acks=1, produce_id=r.next_id, now_ms=0,
                            timeout_ms=1000, verify_transactions=True,
                            verification_guard=guard)
    r.apply(out.effects)
    return out.answer, out.error_message


def test_a_verified_batch_opens_the_transaction_and_the_next_needs_no_question() -> None:
    r = _leader()
    table = r.core.producers
    guard = table.start_verification(PID, 0)
    assert guard is not None
    assert table.start_verification(PID, 0) == guard  # a retry while it is out shares it
    assert _txn_produce(r, 0, guard) == (ErrorCode.NONE, None)
    assert table.start_verification(PID, 0) is None  # open here now
    assert _txn_produce(r, 1, None) == (ErrorCode.NONE, None)
    assert r.core.producers.open_transactions() == {PID: 0}


def test_without_the_guard_a_batch_that_would_open_a_transaction_is_refused() -> None:
    r = _leader()
    assert _txn_produce(r, 0, None) == (ErrorCode.INVALID_TXN_STATE, NOT_VERIFIED_MESSAGE)
    assert r.log.log_end_offset == 0 and r.core.producers.open_transactions() == {}
    other = VerificationGuard(PID, 0, 12345)  # not one this table handed out
    assert _txn_produce(r, 0, other)[0] is ErrorCode.INVALID_TXN_STATE


def test_a_marker_written_while_the_question_is_out_voids_the_answer() -> None:
    """The hanging-transaction race: the coordinator said yes, but the transaction ended (its
    abort marker reached this partition) before the batch's append. The append is refused,
    nothing opens, the LSO is not held."""
    r = _leader()
    guard = r.core.producers.start_verification(PID, 0)
    r.next_id += 1
    marker = write_marker_as_leader(r.core, r.log, PID, 0, False, 0, produce_id=r.next_id,
                                    now_ms=0, timeout_ms=1000)
    r.apply(marker.effects)
    assert marker.appended
    assert _txn_produce(r, 0, guard) == (ErrorCode.INVALID_TXN_STATE, NOT_VERIFIED_MESSAGE)
    assert r.core.producers.open_transactions() == {}
    assert r.core.last_stable_offset == r.core.high_watermark


def test_a_version_2_guard_outlives_the_previous_transactions_marker_at_its_epoch() -> None:
    """Transaction version 2 (Produce v12+): the commit of epoch 0's transaction writes its
    marker at epoch 1, the next transaction's epoch. A Produce of that next transaction,
    verified while the marker lands, keeps its guard and is appended (Kafka 4.1's
    ``UnifiedLog.updateProducers``); before, it was refused INVALID_TXN_STATE and Kafka's Java
    producer aborted the transaction (librdkafka's 0098 test 0). A marker at another epoch
    still voids it, and a guard asked without version 2 is voided by any marker, as before."""
    r = _leader()
    opened = r.core.producers.start_verification(PID, 0, supports_epoch_bump=True)
    assert _txn_produce(r, 0, opened)[0] is ErrorCode.NONE  # epoch 0's transaction
    guard = r.core.producers.start_verification(PID, 1, supports_epoch_bump=True)
    assert guard is not None and guard.supports_epoch_bump
    r.next_id += 1
    marker = write_marker_as_leader(r.core, r.log, PID, 1, True, 0, produce_id=r.next_id,
                                    now_ms=0, timeout_ms=1000)  # the commit, at epoch 1
    r.apply(marker.effects)
    assert marker.appended and r.core.producers.open_transactions() == {}
    assert _txn_produce(r, 0, guard, epoch=1) == (ErrorCode.NONE, None)
    assert r.core.producers.open_transactions() == {PID: r.log.log_end_offset - 1}

    # a marker of a later epoch (a timed-out transaction fenced) voids a version 2 guard
    late = _leader()
    guard = late.core.producers.start_verification(PID, 1, supports_epoch_bump=True)
    late.next_id += 1
    late.apply(write_marker_as_leader(late.core, late.log, PID, 2, False, 0,
                                      produce_id=late.next_id, now_ms=0,
                                      timeout_ms=1000).effects)
    assert not late.core.producers.verified(BatchMeta(PID, 1, 0, 1, 0, True), guard)
    assert _txn_produce(late, 0, guard, epoch=1)[0] is ErrorCode.INVALID_PRODUCER_EPOCH

    # without version 2, a marker at the guard's epoch voids it (the race of the test above)
    v1 = _leader()
    guard = v1.core.producers.start_verification(PID, 1)
    v1.next_id += 1
    v1.apply(write_marker_as_leader(v1.core, v1.log, PID, 1, True, 0, produce_id=v1.next_id,
                                    now_ms=0, timeout_ms=1000).effects)
    assert _txn_produce(v1, 0, guard, epoch=1)[0] is ErrorCode.INVALID_TXN_STATE


def test_a_new_epoch_is_verified_again_and_its_guard_replaces_the_old() -> None:
    r = _leader()
    table = r.core.producers
    first = table.start_verification(PID, 0)
    assert _txn_produce(r, 0, first)[0] is ErrorCode.NONE
    second = table.start_verification(PID, 1)  # its transaction is open at epoch 0 only
    assert second is not None and second != first
    stale = table.start_verification(PID, 2)
    assert stale is not None
    assert not table.verified(BatchMeta(PID, 1, 0, 1, 0, True), second)


def test_end_verification_forgets_only_its_own_guard() -> None:
    t = ProducerStateTable()
    a = t.start_verification(1, 0)
    assert a is not None
    t.end_verification(VerificationGuard(1, 0, a.token + 1))
    assert t.verified(BatchMeta(1, 0, 0, 1, 0, True), a)
    t.end_verification(a)
    assert not t.verified(BatchMeta(1, 0, 0, 1, 0, True), a)


def test_open_verifications_are_bounded() -> None:
    t = ProducerStateTable()
    first = t.start_verification(0, 0)
    for pid in range(1, MAX_VERIFICATIONS + 1):
        t.start_verification(pid, 0)
    assert first is not None and not t.verified(BatchMeta(0, 0, 0, 1, 0, True), first)
    assert len(t._verifying) == MAX_VERIFICATIONS


def test_needs_verification_only_for_transactional_batches() -> None:
    assert needs_verification(None) is None
    assert needs_verification([BatchMeta(-1, -1, -1, 1, 0, False)]) is None
    assert needs_verification([BatchMeta(4, 0, 0, 1, 0, False)]) is None
    assert needs_verification([BatchMeta(4, 2, 0, 1, 0, True)]) == (4, 2)


def test_refusals_are_answered_as_kafka_answers_them() -> None:
    assert produce_refusal(ErrorCode.INVALID_TXN_STATE) == (ErrorCode.INVALID_TXN_STATE,
                                                            NOT_ADDED_MESSAGE)
    for busy in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR,
                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 ErrorCode.NETWORK_EXCEPTION):
        error, message = produce_refusal(busy)
        assert error is ErrorCode.NOT_ENOUGH_REPLICAS
        assert message is not None and message.endswith(f"Underlying error: {busy.name}")
    assert produce_refusal(ErrorCode.PRODUCER_FENCED) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    assert produce_refusal(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) == (
        ErrorCode.INVALID_TXN_STATE, None)
    assert produce_refusal(ErrorCode.INVALID_PRODUCER_ID_MAPPING) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING, None)


def test_transactional_records_need_a_transactional_id() -> None:
    txn = simple_batch([b"v"], producer_id=PID, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    plain = simple_batch([b"v"])
    idempotent = simple_batch([b"v"], producer_id=PID, producer_epoch=0, base_sequence=0)
    assert lacks_transactional_id(None, [plain, txn])
    assert lacks_transactional_id(None, [memoryview(txn)])
    assert not lacks_transactional_id("t", [txn])  # named: verified or appended as usual
    assert not lacks_transactional_id(None, [plain, idempotent, None])
    # Only the first batch of each partition is looked at (Kafka's hasTransactionalRecords).
    assert not lacks_transactional_id(None, [plain + txn])
    assert lacks_transactional_id(None, [txn + plain])
    # A record set too short or of another magic is not transactional here (the append
    # refuses it as malformed).
    assert not lacks_transactional_id(None, [txn[:20], b""])
    old_magic = bytearray(txn)
    old_magic[16] = 1
    assert not lacks_transactional_id(None, [bytes(old_magic)])


def _txn_batch(seq: int = 0, epoch: int = 0, transactional: bool = True) -> bytes:
    return simple_batch([b"v"], producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=transactional)


def test_begin_asks_only_a_leader_about_transactional_records_not_open_here() -> None:
    """``txn_verification.begin``, the first step of the broker's and the simulator's
    verification: a guard for a transactional batch at its leader, none otherwise."""
    follower = Replica(1)
    follower.apply(follower.core.apply_metadata(
        follower.log, PartitionRegistration((1, 2), (1, 2), 2, 1, 0), 0))
    assert begin(follower.core, _txn_batch()) is None  # not the leader: no question
    r = _leader()
    assert begin(r.core, None) is None
    assert begin(r.core, _txn_batch(transactional=False)) is None
    guard = begin(r.core, _txn_batch())
    assert guard is not None and (guard.producer_id, guard.producer_epoch) == (PID, 0)
    assert _txn_produce(r, 0, guard) == (ErrorCode.NONE, None)
    assert begin(r.core, _txn_batch(1)) is None  # its transaction is open here now


def test_refuse_gives_the_guard_up_and_answers_as_kafka() -> None:
    r = _leader()
    guard = begin(r.core, _txn_batch())
    assert guard is not None
    assert refuse(r.core, guard, ErrorCode.INVALID_TXN_STATE) == (ErrorCode.INVALID_TXN_STATE,
                                                                  NOT_ADDED_MESSAGE)
    # the guard is gone: a batch appended with it would open the transaction unverified
    answer, message = _txn_produce(r, 0, guard)
    assert answer is not ErrorCode.NONE and message == NOT_VERIFIED_MESSAGE
