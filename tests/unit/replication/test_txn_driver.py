"""``replication.transactions.driver``: the one interpreter of the transaction coordinator's
effects, driven with in-memory ports (the broker and the simulator plug in theirs): writes go
through the log port and memory follows the log, markers are grouped by leader, retried with a
doubling backoff, timed out, dropped when the coordinator moves; timers come due at
``next_deadline_ms``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from floodmark.constants import NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import Reply, SendMarkers, TxnCoordinator
from floodmark.replication.transactions.driver import MarkerPolicy, TxnDriver
from floodmark.replication.transactions.state import TxnMetadata, TxnPartition, TxnState

P = 0
T0 = ("orders", 0)
T1 = ("orders", 1)
T2 = ("audit", 0)


@dataclass
class Ports:
    """The log and the network in memory: appends succeed at once unless ``pending``."""

    leaders: dict[TxnPartition, int | None] = field(default_factory=dict)
    log: list[bytes] = field(default_factory=list)
    pending: bool = False
    sent: list[tuple[int, int, tuple[TxnPartition, ...]]] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)

    def append(self, txn_partition: int, metadata: TxnMetadata, batch: bytes,
               now_ms: int) -> ErrorCode | None:
        self.log.append(batch)
        return None if self.pending else ErrorCode.NONE

    def leader_of(self, partition: TxnPartition) -> int | None:
        return self.leaders.get(partition, 1)

    def send_markers(self, attempt: int, leader: int, markers: SendMarkers,
                     partitions: tuple[TxnPartition, ...]) -> bool:
        self.sent.append((attempt, leader, partitions))
        return True

    def report(self, level: int, line: str) -> None:
        self.reports.append(line)

    def states(self) -> list[TxnState]:
        return [m.state for batch in self.log
                for m in txn_log.replay([batch]).transactions.values()]


def _driver(ports: Ports, *, cleanup_interval_ms: int = 0) -> TxnDriver:
    pids = itertools.count(1000)
    core = TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: next(pids))
    driver = TxnDriver(core, ports, cleanup_interval_ms=cleanup_interval_ms,
                       markers=MarkerPolicy(request_timeout_ms=500, backoff_ms=20,
                                            backoff_max_ms=80))
    driver.start(0)
    driver.load(P, 3, {}, 0)
    return driver


def _ask(driver: TxnDriver, decide: object, now_ms: int = 0) -> list[Reply]:
    replies: list[Reply] = []
    driver.request(decide, replies.append, now_ms)  # type: ignore[arg-type]
    return replies


def _open(driver: TxnDriver, *parts: TxnPartition, timeout_ms: int = 60_000) -> tuple[int, int]:
    core = driver.core
    (init,) = _ask(driver, lambda r: core.init_producer_id(r, P, "tx", timeout_ms, 0))
    assert init.error is ErrorCode.NONE
    (add,) = _ask(driver, lambda r: core.add_partitions(r, P, "tx", init.producer_id,
                                                        init.producer_epoch, parts, 0))
    assert add.error is ErrorCode.NONE
    return init.producer_id, init.producer_epoch


def _commit(driver: TxnDriver, pid: int, epoch: int, now_ms: int = 0) -> Reply:
    core = driver.core
    (reply,) = _ask(driver, lambda r: core.end_txn(r, P, "tx", pid, epoch, True, now_ms),
                    now_ms)
    return reply


def test_a_commit_writes_prepare_sends_markers_by_leader_then_completes() -> None:
    ports = Ports(leaders={T0: 1, T1: 1, T2: 2})
    driver = _driver(ports)
    pid, epoch = _open(driver, T0, T1, T2)
    assert _commit(driver, pid, epoch).error is ErrorCode.NONE
    assert ports.states() == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT]
    # One WriteTxnMarkers per leader, its partitions together.
    assert sorted((leader, parts) for _, leader, parts in ports.sent) == [
        (1, (T0, T1)), (2, (T2,))]
    first, second = ports.sent
    driver.markers_answered(first[0], dict.fromkeys(first[2], ErrorCode.NONE), 5)
    assert ports.states()[-1] is TxnState.PREPARE_COMMIT  # one leader still to answer
    driver.markers_answered(second[0], dict.fromkeys(second[2], ErrorCode.NONE), 6)
    assert ports.states()[-1] is TxnState.COMPLETE_COMMIT
    assert driver.markers_sent == 3
    assert driver.next_deadline_ms() is None  # nothing left to do


def test_retriable_answers_are_asked_again_after_a_doubling_backoff() -> None:
    ports = Ports()
    driver = _driver(ports)
    pid, epoch = _open(driver, T0, T1)
    _commit(driver, pid, epoch)
    backoffs = []
    now = 0
    for _ in range(4):
        attempt, _leader, parts = ports.sent[-1]
        assert parts == (T0, T1)
        driver.markers_answered(attempt, {T0: ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                          T1: ErrorCode.REQUEST_TIMED_OUT}, now)
        due = driver.next_deadline_ms()
        assert due is not None
        backoffs.append(due - now)
        driver.tick(due - 1)  # not yet
        assert ports.sent[-1][0] == attempt
        now = due
        driver.tick(now)
        assert ports.sent[-1][0] != attempt
    assert backoffs == [20, 40, 80, 80]
    # T0 done, T1 refused for good (reported, left alone): the transaction completes.
    attempt = ports.sent[-1][0]
    driver.markers_answered(attempt, {T0: ErrorCode.NONE,
                                      T1: ErrorCode.TRANSACTION_COORDINATOR_FENCED}, now)
    assert ports.states()[-1] is TxnState.COMPLETE_COMMIT
    assert any("refused by broker 1: TRANSACTION_COORDINATOR_FENCED" in r for r in ports.reports)


def test_an_unanswered_request_times_out_and_its_late_answer_is_ignored() -> None:
    ports = Ports()
    driver = _driver(ports)
    pid, epoch = _open(driver, T0)
    _commit(driver, pid, epoch, now_ms=100)
    attempt = ports.sent[-1][0]
    assert driver.next_deadline_ms() == 600  # the request's deadline
    driver.tick(600)
    assert driver.markers_of(attempt) is None
    assert driver.next_deadline_ms() == 620  # then the backoff
    driver.markers_answered(attempt, {T0: ErrorCode.NONE}, 610)  # too late: ignored
    assert ports.states()[-1] is TxnState.PREPARE_COMMIT
    driver.tick(620)
    retry = ports.sent[-1][0]
    assert retry != attempt
    driver.markers_answered(retry, {T0: ErrorCode.NONE}, 630)
    assert ports.states()[-1] is TxnState.COMPLETE_COMMIT


def test_no_leader_waits_a_deleted_partition_needs_no_marker() -> None:
    ports = Ports(leaders={T0: NO_LEADER, T1: None})
    driver = _driver(ports)
    pid, epoch = _open(driver, T0, T1)
    _commit(driver, pid, epoch)
    assert ports.sent == []  # T0 has no leader now, T1 is gone
    assert any("orders-1 no longer exists" in r for r in ports.reports)
    ports.leaders[T0] = 2
    driver.tick(20)
    assert ports.sent[-1][1:] == (2, (T0,))
    driver.markers_answered(ports.sent[-1][0], {T0: ErrorCode.NONE}, 21)
    assert ports.states()[-1] is TxnState.COMPLETE_COMMIT


def test_a_pending_write_completes_when_the_shell_reports_it() -> None:
    ports = Ports()
    driver = _driver(ports)
    core = driver.core
    ports.pending = True
    replies = _ask(driver, lambda r: core.init_producer_id(r, P, "tx", 60_000, 0))
    assert replies == []  # the answer waits for the log
    driver.log_written("tx", ErrorCode.NONE, 3)
    assert [r.error for r in replies] == [ErrorCode.NONE]
    again = _ask(driver, lambda r: core.init_producer_id(r, P, "tx", 60_000, 4))
    driver.log_written("tx", ErrorCode.NOT_LEADER_OR_FOLLOWER, 5)
    assert [r.error for r in again] == [ErrorCode.NOT_COORDINATOR]


def test_unloading_stops_the_markers_and_answers_waiting_requests() -> None:
    ports = Ports()
    driver = _driver(ports)
    pid, epoch = _open(driver, T0)
    _commit(driver, pid, epoch)
    attempt = ports.sent[-1][0]
    driver.unload(P, 10)
    assert driver.markers_of(attempt) is None
    assert driver.next_deadline_ms() is None
    driver.markers_answered(attempt, {T0: ErrorCode.NONE}, 11)
    assert ports.states()[-1] is TxnState.PREPARE_COMMIT  # the new coordinator completes it


def test_a_new_coordinator_finishes_a_prepared_commit_from_the_log() -> None:
    ports = Ports()
    driver = _driver(ports)
    pid, epoch = _open(driver, T0)
    _commit(driver, pid, epoch)
    driver.stop()  # a crash: nothing in flight survives
    replayed = txn_log.replay(ports.log).transactions
    fresh = Ports(log=list(ports.log))
    new = TxnDriver(TxnCoordinator(max_timeout_ms=900_000, allocate_producer_id=lambda: 1),
                    fresh, cleanup_interval_ms=0)
    new.load(P, 4, replayed, 50)  # before start: held
    assert fresh.sent == []
    new.start(50)
    attempt = fresh.sent[-1][0]
    markers = new.markers_of(attempt)
    assert markers is not None and markers.coordinator_epoch == 4 and markers.committed
    new.markers_answered(attempt, {T0: ErrorCode.NONE}, 60)
    assert fresh.states()[-1] is TxnState.COMPLETE_COMMIT


def test_the_periodic_check_aborts_a_timed_out_transaction() -> None:
    ports = Ports()
    driver = _driver(ports, cleanup_interval_ms=100)
    _open(driver, T0, timeout_ms=150)
    assert driver.next_deadline_ms() == 100
    driver.tick(100)
    assert ports.states()[-1] is TxnState.ONGOING  # 100 ms in: not yet
    driver.tick(200)
    assert ports.states()[-1] is TxnState.PREPARE_ABORT
    assert any("timed out after 150 ms" in r for r in ports.reports)
    attempt, _, _ = ports.sent[-1]
    markers = driver.markers_of(attempt)
    assert markers is not None and not markers.committed
    driver.markers_answered(attempt, {T0: ErrorCode.NONE}, 201)
    assert ports.states()[-1] is TxnState.COMPLETE_ABORT
    assert driver.next_deadline_ms() == 300
