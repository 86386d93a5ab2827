"""Hypothesis drives the transaction coordinator's core through random producers, clients
fenced by newer ones, failed log writes, timeouts, markers delivered in any order and coordinator
failovers (a new core loaded from the log). Invariants, after every step:

* memory follows the log: what the coordinator holds for an id is its last record;
* the log of each id walks the state table (``VALID_PREVIOUS``) and its epochs never go back;
* a PrepareCommit is followed only by its CompleteCommit (a prepared commit is never aborted),
  a PrepareAbort only by its CompleteAbort;
* markers carry the outcome, epoch and partitions of the transaction's last record (a
  PrepareCommit or PrepareAbort);
* a producer is never told NONE with an epoch older than the coordinator's;
* transaction version 2 (EndTxn v5, KIP-890 part 2): an EndTxn told NONE names the producer's
  id and epoch after the bump, never the epoch it came with; the markers carry the bumped one.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from floodmark.errors import ErrorCode
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import (
    Reply,
    SendMarkers,
    TxnCoordinator,
    TxnEffect,
    WriteTxnLog,
)
from floodmark.replication.transactions.state import VALID_PREVIOUS, TxnMetadata, TxnState

P = 0
IDS = ("a", "b")
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
WRITE_FAILURES = [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                  ErrorCode.NOT_LEADER_OR_FOLLOWER]


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pids = itertools.count(100)
        self.now_ms = 0
        self.epoch = 1
        self.core = self._new_core({})
        self.log: list[TxnMetadata] = []
        self.markers: list[SendMarkers] = []
        self.clients: dict[str, tuple[int, int]] = {}  # what each producer last got
        self.requests = itertools.count(1)
        self.fail_next: ErrorCode | None = None

    def _new_core(self, transactions: dict[str, TxnMetadata]) -> TxnCoordinator:
        core = TxnCoordinator(max_timeout_ms=10_000, allocate_producer_id=lambda: next(self.pids),
                              expiration_ms=30_000)
        self.markers = []
        self._settle(core, core.load(P, self.epoch, transactions, self.now_ms))
        return core

    def _settle(self, core: TxnCoordinator, effects: list[TxnEffect]) -> list[Reply]:
        replies = []
        queue = list(effects)
        while queue:
            e = queue.pop(0)
            if isinstance(e, Reply):
                replies.append(e)
            elif isinstance(e, WriteTxnLog):
                fail, self.fail_next = self.fail_next, None
                if fail is None:
                    self.log.append(e.metadata)
                queue.extend(core.on_log_written(e.metadata.transactional_id,
                                                 fail or ErrorCode.NONE, self.now_ms))
            else:
                assert isinstance(e, SendMarkers)
                # Markers carry exactly what the log last says of the transaction.
                last = [m for m in self.log if m.transactional_id == e.transactional_id][-1]
                prepared = (TxnState.PREPARE_COMMIT if e.committed else TxnState.PREPARE_ABORT)
                assert (last.state, last.producer_id, last.producer_epoch, last.partitions) == (
                    prepared, e.producer_id, e.producer_epoch, e.partitions), (last, e)
                self.markers.append(e)
        return replies

    def _run(self, effects: list[TxnEffect]) -> Reply:
        (reply,) = self._settle(self.core, effects)
        return reply

    def _current(self, txn_id: str) -> TxnMetadata | None:
        _, m = self.core.describe(P, txn_id)
        return m

    def _check_not_stale(self, reply: Reply, txn_id: str, epoch: int) -> None:
        if reply.error is ErrorCode.NONE:
            m = self._current(txn_id)
            assert m is not None and m.producer_epoch == epoch, (reply, m)

    @rule(fail=st.sampled_from([None, None, None, *WRITE_FAILURES]))
    def next_write_fails(self, fail: ErrorCode | None) -> None:
        self.fail_next = fail

    @rule(txn_id=st.sampled_from(IDS), timeout_ms=st.sampled_from([1_000, 5_000, 20_000]),
          known=st.booleans())
    def init(self, txn_id: str, timeout_ms: int, known: bool) -> None:
        pid, epoch = self.clients.get(txn_id, (-1, -1)) if known else (-1, -1)
        reply = self._run(self.core.init_producer_id(
            next(self.requests), P, txn_id, timeout_ms, self.now_ms, expected_producer_id=pid,
            expected_epoch=epoch))
        if timeout_ms > 10_000:
            assert reply.error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
        if reply.error is ErrorCode.NONE:
            self.clients[txn_id] = (reply.producer_id, reply.producer_epoch)
            self._check_not_stale(reply, txn_id, reply.producer_epoch)

    @rule(txn_id=st.sampled_from(IDS), parts=st.sets(st.sampled_from(PARTITIONS), min_size=1),
          stale=st.sampled_from([False, False, False, True]))
    def add(self, txn_id: str, parts: set[tuple[str, int]], stale: bool) -> None:
        if txn_id not in self.clients:
            return
        pid, epoch = self.clients[txn_id]
        epoch -= int(stale)
        reply = self._run(self.core.add_partitions(next(self.requests), P, txn_id, pid, epoch,
                                                   sorted(parts), self.now_ms))
        self._check_not_stale(reply, txn_id, epoch)

    @rule(txn_id=st.sampled_from(IDS), commit=st.booleans(),
          stale=st.sampled_from([False, False, False, True]),
          version=st.sampled_from([0, 2, 2]))
    def end(self, txn_id: str, commit: bool, stale: bool, version: int) -> None:
        if txn_id not in self.clients:
            return
        pid, epoch = self.clients[txn_id]
        epoch -= int(stale)
        before = self._current(txn_id)
        reply = self._run(self.core.end_txn(next(self.requests), P, txn_id, pid, epoch, commit,
                                            self.now_ms, transaction_version=version))
        if version < 2:
            # Kafka's transaction version 1 way (``endTransactionWithTV1``), whatever version
            # wrote the transaction: answered only at the current epoch. The retry of a version
            # 2 bump at the epoch before it is EndTxn v5's alone; below v5 it is fenced (Kafka
            # 4.1.1 answers so: differential scenario end_txn_v0_retries_a_v2_bump).
            if reply.error is ErrorCode.NONE:
                assert before is not None and before.producer_epoch == epoch, (before, reply)
            self._check_not_stale(reply, txn_id, epoch)
            return
        if reply.error is ErrorCode.NONE:
            # KIP-890 part 2: the answer names the producer's new id and epoch, which is the
            # coordinator's (or, epoch exhausted, the id that takes over at epoch 0)
            now = self._current(txn_id)
            assert now is not None and (reply.producer_id, reply.producer_epoch) == (
                now.client_producer()), (reply, now)
            assert before is not None and (reply.producer_id != before.producer_id
                                           or reply.producer_epoch > epoch), (before, reply)
            self.clients[txn_id] = (reply.producer_id, reply.producer_epoch)

    @rule(ms=st.sampled_from([10, 1_000, 6_000, 40_000]))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms
        self._settle(self.core, self.core.tick(self.now_ms))

    @rule(which=st.integers(min_value=0, max_value=3))
    def markers_written(self, which: int) -> None:
        if self.markers:
            m = self.markers.pop(which % len(self.markers))
            self._settle(self.core, self.core.on_markers_written(
                m.transactional_id, m.producer_epoch, self.now_ms))

    @rule()
    def failover(self) -> None:
        """The coordinator dies; another broker leads the partition and replays the log."""
        self.epoch += 1
        batches = [txn_log.build_record_batch(m, 0) for m in self.log]
        self.core = self._new_core(txn_log.replay(batches).transactions)

    @invariant()
    def memory_follows_the_log(self) -> None:
        last: dict[str, TxnMetadata] = {}
        for m in self.log:
            last[m.transactional_id] = m
        for txn_id in IDS:
            mem = self._current(txn_id)
            if txn_id not in last or last[txn_id].state is TxnState.DEAD:
                assert mem is None  # never written, or expired (a tombstone)
                continue
            assert mem is not None
            expect = last[txn_id]
            assert (mem.producer_id, mem.producer_epoch, mem.state, mem.partitions,
                    mem.txn_timeout_ms, mem.txn_start_timestamp_ms) == (
                expect.producer_id, expect.producer_epoch, expect.state, expect.partitions,
                expect.txn_timeout_ms, expect.txn_start_timestamp_ms)

    @invariant()
    def the_log_walks_the_state_table(self) -> None:
        previous: dict[str, TxnMetadata] = {}
        for m in self.log:
            before = previous.get(m.transactional_id)
            if before is not None and before.state is not TxnState.DEAD:  # Dead: a new id
                assert before.state in VALID_PREVIOUS[m.state], (before, m)
                if before.producer_id == m.producer_id:
                    assert m.producer_epoch >= before.producer_epoch, (before, m)
                if before.state is TxnState.PREPARE_COMMIT:
                    assert m.state is TxnState.COMPLETE_COMMIT
                    # the same epoch, or the producer id put aside takes over (KIP-890 part 2)
                    assert (m.producer_id, m.producer_epoch) == (
                        (before.producer_id, before.producer_epoch)
                        if before.next_producer_id < 0 else (before.next_producer_id, 0))
                if before.state is TxnState.PREPARE_ABORT:
                    assert m.state is TxnState.COMPLETE_ABORT
            previous[m.transactional_id] = m


CoordinatorMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50,
                                                deadline=None)
TestCoordinator = CoordinatorMachine.TestCase


_states_with_partitions = st.sampled_from([TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                           TxnState.PREPARE_ABORT])
_states_without = st.sampled_from([TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                   TxnState.COMPLETE_ABORT, TxnState.DEAD])


@st.composite
def _metadata(draw: st.DrawFn) -> TxnMetadata:
    with_partitions = draw(st.booleans())
    state = draw(_states_with_partitions if with_partitions else _states_without)
    parts = draw(st.frozensets(st.tuples(st.text(min_size=1, max_size=20),
                                         st.integers(0, 2**31 - 1)), max_size=8)
                 ) if with_partitions else frozenset()
    return TxnMetadata(draw(st.text(min_size=1, max_size=40)), draw(st.integers(0, 2**63 - 1)),
                       draw(st.integers(0, 32767)), draw(st.integers(1, 2**31 - 1)), state,
                       parts, draw(st.integers(-1, 2**62)), draw(st.integers(-1, 2**62)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_metadata(), min_size=1, max_size=10))
def test_transaction_log_records_round_trip(records: list[TxnMetadata]) -> None:
    """Every state the coordinator can write reads back the same; replay keeps the last one."""
    for m in records:
        assert txn_log.decode_value(m.transactional_id, txn_log.encode_value(m)) == m
        assert txn_log.decode_key(txn_log.encode_key(m.transactional_id)) == m.transactional_id
    replayed = txn_log.replay([txn_log.build_record_batch(m, 0) for m in records])
    last = {m.transactional_id: m for m in records}
    alive = {k: m for k, m in last.items() if m.state is not TxnState.DEAD}  # Dead: tombstone
    assert replayed.transactions == alive and replayed.unreadable == 0
