"""Hypothesis drives ``TxnDriver``'s markers through leaders that move, vanish and come back,
partitions deleted, answers in any order (NONE, retriable, refused), requests lost or timed out,
and ticks at any time. Invariants, after every step:

* the transaction completes (CompleteCommit written) at most once, and only once every one of
  its partitions has its marker, refused it for good, or no longer exists;
* a partition that has its marker is never asked again;
* while it is not complete, the driver is waiting for something: a request in flight or a
  retry at ``next_deadline_ms`` (it never forgets a decided transaction);
* and at the end, with every leader back and every answer NONE, it completes.
"""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from floodmark.constants import NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import Reply, SendMarkers, TxnCoordinator
from floodmark.replication.transactions.driver import MarkerPolicy, TxnDriver
from floodmark.replication.transactions.state import TxnMetadata, TxnPartition, TxnState

P = 0
PARTITIONS: list[TxnPartition] = [("t", 0), ("t", 1), ("u", 0)]
LEADERS = [1, 2, 3, NO_LEADER]
ANSWERS = [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
           ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.FENCED_LEADER_EPOCH,
           ErrorCode.INVALID_PRODUCER_EPOCH]
POLICY = MarkerPolicy(request_timeout_ms=300, backoff_ms=10, backoff_max_ms=80)


class Ports:
    def __init__(self) -> None:
        self.leaders: dict[TxnPartition, int | None] = dict.fromkeys(PARTITIONS, 1)
        self.log: list[bytes] = []
        self.sent: dict[int, tuple[TxnPartition, ...]] = {}

    def append(self, txn_partition: int, metadata: TxnMetadata, batch: bytes,
               now_ms: int) -> ErrorCode | None:
        self.log.append(batch)
        return ErrorCode.NONE

    def leader_of(self, partition: TxnPartition) -> int | None:
        return self.leaders[partition]

    def send_markers(self, attempt: int, leader: int, markers: SendMarkers,
                     partitions: tuple[TxnPartition, ...]) -> bool:
        assert leader != NO_LEADER
        assert all(self.leaders[tp] == leader for tp in partitions)
        self.sent[attempt] = partitions
        return True

    def report(self, level: int, line: str) -> None:
        pass

    def completes(self) -> int:
        return sum(1 for batch in self.log
                   for m in txn_log.replay([batch]).transactions.values()
                   if m.state is TxnState.COMPLETE_COMMIT)


class MarkerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ports = Ports()
        pids = itertools.count(100)
        core = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: next(pids))
        self.driver = TxnDriver(core, self.ports, cleanup_interval_ms=0, markers=POLICY)
        self.now_ms = 0
        self.driver.start(0)
        self.driver.load(P, 1, {}, 0)
        self.done: set[TxnPartition] = set()  # marker written, refused, or the partition gone
        self.written: set[TxnPartition] = set()
        replies: list[Reply] = []
        self.driver.request(lambda r: core.init_producer_id(r, P, "tx", 60_000, 0),
                            replies.append, 0)
        pid, epoch = replies[-1].producer_id, replies[-1].producer_epoch
        self.driver.request(lambda r: core.add_partitions(r, P, "tx", pid, epoch, PARTITIONS,
                                                          0), replies.append, 0)
        self.driver.request(lambda r: core.end_txn(r, P, "tx", pid, epoch, True, 0),
                            replies.append, 0)
        assert [r.error for r in replies] == [ErrorCode.NONE] * 3

    def _in_flight(self) -> list[int]:
        return sorted(a for a in self.ports.sent if self.driver.markers_of(a) is not None)

    @rule(data=st.data())
    @precondition(lambda self: bool(self._in_flight()))
    def answer(self, data: st.DataObject) -> None:
        attempt = data.draw(st.sampled_from(self._in_flight()))
        # A partition left out of the answer is asked again, as a retriable error.
        answers = {tp: data.draw(st.sampled_from(ANSWERS)) for tp in self.ports.sent[attempt]
                   if data.draw(st.integers(0, 4))}
        for tp, code in answers.items():
            if code is ErrorCode.NONE:
                self.written.add(tp)
                self.done.add(tp)
            elif code is ErrorCode.INVALID_PRODUCER_EPOCH:
                self.done.add(tp)
        self.driver.markers_answered(attempt, answers, self.now_ms)

    @rule(data=st.data())
    @precondition(lambda self: bool(self._in_flight()))
    def lose(self, data: st.DataObject) -> None:
        self.driver.markers_failed(data.draw(st.sampled_from(self._in_flight())), self.now_ms)

    @rule(tp=st.sampled_from(PARTITIONS), leader=st.sampled_from(LEADERS))
    def move_leader(self, tp: TxnPartition, leader: int) -> None:
        if self.ports.leaders[tp] is not None:
            self.ports.leaders[tp] = leader

    @rule(tp=st.sampled_from(PARTITIONS))
    def delete(self, tp: TxnPartition) -> None:
        self.ports.leaders[tp] = None
        self.done.add(tp)  # from the next round on it needs no marker

    @rule(step_ms=st.integers(0, 400))
    def tick(self, step_ms: int) -> None:
        self.now_ms += step_ms
        self.driver.tick(self.now_ms)

    @rule()
    def tick_at_deadline(self) -> None:
        due = self.driver.next_deadline_ms()
        if due is not None:
            self.now_ms = max(self.now_ms, due)
            self.driver.tick(self.now_ms)

    @invariant()
    def completes_once_and_only_when_every_partition_is_done(self) -> None:
        completes = self.ports.completes()
        assert completes <= 1
        if completes:
            assert self.done >= set(PARTITIONS)
            assert self.driver.markers_in_flight == 0

    @invariant()
    def a_written_marker_is_never_asked_again(self) -> None:
        for attempt in self._in_flight():
            assert not set(self.ports.sent[attempt]) & self.written

    @invariant()
    def never_forgets_a_decided_transaction(self) -> None:
        if self.ports.completes() == 0:
            assert self.driver.markers_in_flight == 1
            assert self.driver.next_deadline_ms() is not None

    def teardown(self) -> None:
        for tp, leader in self.ports.leaders.items():
            if leader is not None:
                self.ports.leaders[tp] = 1
        for _ in range(50):
            if self.ports.completes():
                break
            for attempt in self._in_flight():
                self.driver.markers_answered(
                    attempt, dict.fromkeys(self.ports.sent[attempt], ErrorCode.NONE), self.now_ms)
            due = self.driver.next_deadline_ms()
            if due is not None:
                self.now_ms = max(self.now_ms, due)
                self.driver.tick(self.now_ms)
        assert self.ports.completes() == 1


MarkerMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30,
                                           deadline=None)
TestMarkers = MarkerMachine.TestCase
