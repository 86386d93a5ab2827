"""The transaction coordinator's core (``replication.transactions``), driven by hand: requests in,
effects out, the outcome of each effect reported back as the broker's driver does."""

from __future__ import annotations

import itertools
import re

import pytest

from floodmark.errors import ErrorCode
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import (
    ListFilter,
    Reply,
    SendMarkers,
    TxnCoordinator,
    TxnEffect,
    WriteTxnLog,
)
from floodmark.replication.transactions.state import (
    IllegalTransition,
    TxnMetadata,
    TxnState,
)

P = 0  # the __transaction_state partition every id here lives in
T0 = ("orders", 0)
T1 = ("orders", 1)


class Harness:
    """A coordinator whose log writes succeed at once (unless told otherwise) and whose log is
    kept, so a new coordinator can be loaded from it."""

    def __init__(self, max_timeout_ms: int = 900_000) -> None:
        pids = itertools.count(1000)
        self.core = TxnCoordinator(max_timeout_ms=max_timeout_ms,
                                   allocate_producer_id=lambda: next(pids))
        self.core.load(P, 5, {}, 0)
        self.log: list[TxnMetadata] = []
        self.markers: list[SendMarkers] = []
        self.ids = itertools.count(1)
        self.now_ms = 1_000

    def settle(self, effects: list[TxnEffect], fail: ErrorCode | None = None) -> list[Reply]:
        """Carry out effects: writes succeed (or fail with ``fail``), markers are kept."""
        replies: list[Reply] = []
        queue = list(effects)
        while queue:
            e = queue.pop(0)
            if isinstance(e, Reply):
                replies.append(e)
            elif isinstance(e, WriteTxnLog):
                if fail is None:
                    self.log.append(e.metadata)
                queue.extend(self.core.on_log_written(e.metadata.transactional_id,
                                                      fail or ErrorCode.NONE, self.now_ms))
            else:
                self.markers.append(e)
        return replies

    def one(self, effects: list[TxnEffect], fail: ErrorCode | None = None) -> Reply:
        replies = self.settle(effects, fail)
        assert len(replies) == 1, replies
        return replies[0]

    def init(self, txn_id: str = "tx", timeout_ms: int = 60_000, **kw: int) -> Reply:
        return self.one(self.core.init_producer_id(next(self.ids), P, txn_id, timeout_ms,
                                                   self.now_ms, **kw))

    def add(self, pid: int, epoch: int, *parts: tuple[str, int], txn_id: str = "tx") -> Reply:
        return self.one(self.core.add_partitions(next(self.ids), P, txn_id, pid, epoch, parts,
                                                 self.now_ms))

    def end(self, pid: int, epoch: int, commit: bool, txn_id: str = "tx") -> Reply:
        return self.one(self.core.end_txn(next(self.ids), P, txn_id, pid, epoch, commit,
                                          self.now_ms))

    def deliver_markers(self) -> None:
        """Every marker sender finishes."""
        while self.markers:
            m = self.markers.pop(0)
            self.settle(self.core.on_markers_written(m.transactional_id, m.producer_epoch,
                                                     self.now_ms))

    def state(self, txn_id: str = "tx") -> TxnMetadata:
        err, m = self.core.describe(P, txn_id)
        assert err is ErrorCode.NONE and m is not None
        return m


def test_init_gives_a_producer_id_and_bumps_the_epoch_on_each_init() -> None:
    h = Harness()
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    r2 = h.init()
    assert (r2.producer_id, r2.producer_epoch) == (1000, 1)
    assert [m.state for m in h.log] == [TxnState.EMPTY, TxnState.EMPTY]
    assert h.init(txn_id="other").producer_id == 1001


def test_init_refusals() -> None:
    h = Harness(max_timeout_ms=10_000)
    assert h.init(timeout_ms=10_001).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout_ms=0).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(txn_id="").error is ErrorCode.INVALID_REQUEST
    h.settle(h.core.unload(P))
    assert h.init(timeout_ms=1_000).error is ErrorCode.NOT_COORDINATOR
    assert h.log == []


def test_commit_two_phases_through_the_log() -> None:
    h = Harness()
    r = h.init()
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.add(pid, epoch, T0).error is ErrorCode.NONE
    assert h.add(pid, epoch, T0).error is ErrorCode.NONE  # already in: no write
    assert h.add(pid, epoch, T1).error is ErrorCode.NONE
    assert h.state().partitions == {T0, T1}
    assert h.end(pid, epoch, True).error is ErrorCode.NONE
    assert h.state().state is TxnState.PREPARE_COMMIT
    (m,) = h.markers
    assert (m.committed, m.producer_epoch, m.partitions, m.coordinator_epoch) == \
        (True, epoch, frozenset({T0, T1}), 5)
    # While the markers are out, the producer's next steps wait.
    assert h.add(pid, epoch, T0).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.init().error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end(pid, epoch, True).error is ErrorCode.CONCURRENT_TRANSACTIONS
    # the opposite outcome too: Kafka's pending CompleteCommit transition answers every EndTxn
    assert h.end(pid, epoch, False).error is ErrorCode.CONCURRENT_TRANSACTIONS
    h.deliver_markers()
    assert h.state().state is TxnState.COMPLETE_COMMIT and not h.state().partitions
    assert [m.state for m in h.log] == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING,
                                        TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert h.end(pid, epoch, True).error is ErrorCode.NONE  # a retry of a finished commit
    assert h.add(pid, epoch, T1).error is ErrorCode.NONE  # the next transaction
    assert h.state().txn_start_timestamp_ms == h.now_ms


def test_abort_and_end_without_transaction() -> None:
    h = Harness()
    r = h.init()
    assert h.end(r.producer_id, r.producer_epoch, False).error is ErrorCode.INVALID_TXN_STATE
    h.add(r.producer_id, r.producer_epoch, T0)
    assert h.end(r.producer_id, r.producer_epoch, False).error is ErrorCode.NONE
    assert h.markers[0].committed is False
    h.deliver_markers()
    assert h.state().state is TxnState.COMPLETE_ABORT


def test_a_newer_producer_fences_the_zombie_and_aborts_its_transaction() -> None:
    h = Harness()
    old = h.init()
    pid, epoch = old.producer_id, old.producer_epoch
    h.add(pid, epoch, T0)
    # The new instance of the same transactional.id: the old transaction is aborted first, with
    # the bumped epoch on its markers; the new one retries meanwhile.
    assert h.init().error is ErrorCode.CONCURRENT_TRANSACTIONS
    (m,) = h.markers
    assert (m.committed, m.producer_epoch) == (False, epoch + 1)
    assert h.log[-1].state is TxnState.PREPARE_ABORT and h.log[-1].producer_epoch == epoch + 1
    assert h.end(pid, epoch, True).error is ErrorCode.PRODUCER_FENCED
    assert h.add(pid, epoch, T1).error is ErrorCode.PRODUCER_FENCED
    h.deliver_markers()
    new = h.init()
    assert (new.error, new.producer_id, new.producer_epoch) == (ErrorCode.NONE, pid, epoch + 2)
    assert h.end(pid, epoch, False).error is ErrorCode.PRODUCER_FENCED
    assert h.end(pid + 7, epoch + 2, False).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_kip_360_init_with_a_known_producer_id() -> None:
    h = Harness()
    r = h.init()
    again = h.init(expected_producer_id=r.producer_id, expected_epoch=r.producer_epoch)
    assert again.producer_epoch == r.producer_epoch + 1
    # The same request again (its answer lost): the same answer, no second bump.
    retry = h.init(expected_producer_id=r.producer_id, expected_epoch=r.producer_epoch)
    assert retry.producer_epoch == again.producer_epoch
    stale = h.init(expected_producer_id=r.producer_id, expected_epoch=r.producer_epoch + 7)
    assert stale.error is ErrorCode.PRODUCER_FENCED


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    h = Harness()
    r = h.init(timeout_ms=5_000)
    h.add(r.producer_id, r.producer_epoch, T0)
    h.now_ms += 4_999
    assert h.settle(h.core.tick(h.now_ms)) == [] and not h.markers
    h.now_ms += 1
    h.settle(h.core.tick(h.now_ms))
    (m,) = h.markers
    assert (m.committed, m.producer_epoch) == (False, r.producer_epoch + 1)
    h.deliver_markers()
    assert h.state().state is TxnState.COMPLETE_ABORT
    assert h.end(r.producer_id, r.producer_epoch, True).error is ErrorCode.PRODUCER_FENCED


def test_a_failed_write_changes_nothing_and_tells_the_client_to_find_the_coordinator() -> None:
    h = Harness()
    r = h.init()
    reply = h.one(h.core.add_partitions(99, P, "tx", r.producer_id, r.producer_epoch, [T0],
                                        h.now_ms), fail=ErrorCode.NOT_ENOUGH_REPLICAS)
    assert reply.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.state().state is TxnState.EMPTY
    reply = h.one(h.core.add_partitions(100, P, "tx", r.producer_id, r.producer_epoch, [T0],
                                        h.now_ms), fail=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert reply.error is ErrorCode.NOT_COORDINATOR


def test_complete_record_that_failed_is_written_again_by_tick() -> None:
    h = Harness()
    r = h.init()
    h.add(r.producer_id, r.producer_epoch, T0)
    h.end(r.producer_id, r.producer_epoch, True)
    m = h.markers.pop()
    h.settle(h.core.on_markers_written("tx", m.producer_epoch, h.now_ms),
             fail=ErrorCode.REQUEST_TIMED_OUT)
    assert h.state().state is TxnState.PREPARE_COMMIT
    h.settle(h.core.tick(h.now_ms))
    assert h.state().state is TxnState.COMPLETE_COMMIT


def test_a_new_coordinator_completes_a_prepared_commit_and_never_aborts_it() -> None:
    h = Harness()
    r = h.init()
    h.add(r.producer_id, r.producer_epoch, T0, T1)
    h.end(r.producer_id, r.producer_epoch, True)
    h.markers.clear()  # the old coordinator dies before any marker
    replayed = txn_log.replay([txn_log.build_record_batch(m, 1) for m in h.log])
    new = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: 5000)
    effects = new.load(P, 6, replayed.transactions, h.now_ms)
    (m,) = effects
    assert isinstance(m, SendMarkers)
    assert (m.committed, m.partitions, m.coordinator_epoch) == (True, frozenset({T0, T1}), 6)
    # Even past the timeout, a prepared commit stays a commit.
    assert new.tick(h.now_ms + 10**9) == []
    (write,) = new.on_markers_written("tx", r.producer_epoch, h.now_ms)
    assert isinstance(write, WriteTxnLog) and write.metadata.state is TxnState.COMPLETE_COMMIT


def test_a_new_coordinator_aborts_an_ongoing_transaction_at_its_timeout() -> None:
    h = Harness()
    r = h.init(timeout_ms=1_000)
    h.add(r.producer_id, r.producer_epoch, T0)
    replayed = txn_log.replay([txn_log.build_record_batch(m, 1) for m in h.log])
    new = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: 5000)
    assert new.load(P, 6, replayed.transactions, h.now_ms) == []
    (write,) = new.tick(h.now_ms + 1_000)
    assert isinstance(write, WriteTxnLog)
    assert write.metadata.state is TxnState.PREPARE_ABORT
    assert write.metadata.producer_epoch == r.producer_epoch + 1


def test_unload_answers_waiting_requests_not_coordinator() -> None:
    h = Harness()
    r = h.init()
    effects = h.core.add_partitions(42, P, "tx", r.producer_id, r.producer_epoch, [T0], h.now_ms)
    assert isinstance(effects[0], WriteTxnLog)
    assert h.core.unload(P) == [Reply(42, ErrorCode.NOT_COORDINATOR)]
    assert h.core.on_log_written("tx", ErrorCode.NONE, h.now_ms) == []


def test_verify_only_kip_890() -> None:
    h = Harness()
    r = h.init()
    h.add(r.producer_id, r.producer_epoch, T0)
    assert h.core.verify_partitions(P, "tx", r.producer_id, r.producer_epoch, [T0, T1]) == {
        T0: ErrorCode.NONE, T1: ErrorCode.INVALID_TXN_STATE}
    assert h.core.verify_partitions(P, "tx", r.producer_id, r.producer_epoch - 1, [T0]) == {
        T0: ErrorCode.PRODUCER_FENCED}


def test_the_state_table_refuses_skipped_states() -> None:
    m = TxnMetadata("tx", 1, 0, 1000, TxnState.EMPTY)
    with pytest.raises(IllegalTransition):
        m.transit(TxnState.PREPARE_COMMIT, 1)
    with pytest.raises(IllegalTransition):
        m.transit(TxnState.COMPLETE_ABORT, 1)
    ongoing = m.transit(TxnState.ONGOING, 1, partitions=frozenset({T0}))
    with pytest.raises(IllegalTransition):
        ongoing.transit(TxnState.COMPLETE_COMMIT, 2)


def test_log_record_round_trip_and_tombstone() -> None:
    m = TxnMetadata("tx-é", 7, 3, 60_000, TxnState.PREPARE_COMMIT, frozenset({T0, T1, ("b", 2)}),
                    123, 456)
    assert txn_log.decode_value("tx-é", txn_log.encode_value(m)) == m
    assert txn_log.decode_key(txn_log.encode_key("tx-é")) == "tx-é"
    tomb = txn_log.build_record_batch(m, 1)
    from floodmark.records import Record, build_batch
    gone = build_batch([Record(0, 2, txn_log.encode_key("tx-é"), None)])
    assert txn_log.replay([tomb, gone]).transactions == {}
    bad = build_batch([Record(0, 2, txn_log.encode_key("x"), b"\x00\x07junk")])
    replayed = txn_log.replay([tomb, bad])
    assert replayed.unreadable == 1 and replayed.transactions == {"tx-é": m}


def test_an_idle_transactional_id_expires_as_a_tombstone() -> None:
    pids = itertools.count(7000)
    core = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: next(pids),
                          expiration_ms=10_000)
    core.load(P, 1, {}, 0)
    h = Harness()
    h.core = core
    r = h.init()
    h.now_ms += 9_999
    assert h.settle(core.tick(h.now_ms)) == []
    h.now_ms += 1
    h.settle(core.tick(h.now_ms))
    assert h.log[-1].state is TxnState.DEAD
    assert core.describe(P, "tx")[0] is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert txn_log.replay([txn_log.build_record_batch(m, 1) for m in h.log]).transactions == {}
    # Used again: a new producer id.
    again = h.init()
    assert again.producer_id != r.producer_id and again.producer_epoch == 0
    # An ongoing transaction does not expire (its timeout aborts it first).
    h.add(again.producer_id, 0, T0)
    h.now_ms += 10_000
    h.settle(core.tick(h.now_ms))
    assert h.state().state is not TxnState.DEAD


def test_list_filter_pattern_matches_the_whole_transactional_id() -> None:
    """ListTransactions v2 (KIP-1152): as Java's ``Matcher.matches``, never a prefix or a
    substring (the differential test saw Kafka 4.1.1 answer so)."""
    def meta(tid: str) -> TxnMetadata:
        return TxnMetadata(tid, 7, 0, 60_000, TxnState.EMPTY)
    flt = ListFilter(transactional_id_pattern=re.compile("orders-.*"))
    assert flt.matches(meta("orders-1"), 0)
    assert not flt.matches(meta("old-orders-1"), 0)
    assert not ListFilter(transactional_id_pattern=re.compile("orders")).matches(
        meta("orders-1"), 0)
    assert ListFilter().matches(meta("anything"), 0)
