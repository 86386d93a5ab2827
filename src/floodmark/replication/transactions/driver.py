"""The one interpreter of the transaction coordinator's effects, sans-I/O.

The broker (``floodmark.broker.txn_coordinator``) and the simulator
(``floodmark.sim.partition.txn_coordinator``) each hold a ``TxnDriver`` over the same ``TxnCoordinator``
core; they differ only in their ``TxnPorts`` (the leader produce path and sockets, or the
simulated disk and network) and in the clock that calls :meth:`TxnDriver.tick`. Every rule about
carrying out a decision is here, once:

* ``WriteTxnLog``: the state's record (``log.build_record_batch``) is appended to its
  ``__transaction_state`` partition through the port (acks=all); the outcome goes back to the
  core (:meth:`TxnDriver.log_written`), and only then does memory follow the log;
* ``SendMarkers``: WriteTxnMarkers to each partition's leader, the partitions grouped by leader,
  in rounds: a partition answered NONE has its marker; a retriable answer
  (``RETRIABLE_MARKER_ERRORS``), no leader, a lost request or one unanswered after
  ``MarkerPolicy.request_timeout_ms`` is asked again after a backoff that doubles per round; any
  other answer is reported and the partition left alone; a partition that no longer exists needs
  no marker. When every partition is done the core writes CompleteCommit/CompleteAbort. A
  coordinator that no longer serves the transaction's partition (at that coordinator epoch)
  stops sending: the new one resends;
* ``Reply``: the request's answer goes to the callback given with it;
* time: marker retries and request deadlines, and the core's periodic work every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (transactions past their
  timeout are aborted), come due at :meth:`TxnDriver.next_deadline_ms`; the shell then calls
  :meth:`TxnDriver.tick`.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from floodmark.constants import NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import (
    RETRIABLE_MARKER_ERRORS,
    Reply,
    SendMarkers,
    TxnCoordinator,
    TxnEffect,
    WriteTxnLog,
)
from floodmark.replication.transactions.state import TxnMetadata, TxnPartition, TxnState

WARN_EVERY_ROUNDS = 50  # a transaction still without all its markers is reported this often


class TxnPorts(Protocol):
    """What only the shell can do."""

    def append(self, txn_partition: int, metadata: TxnMetadata, batch: bytes,
               now_ms: int) -> ErrorCode | None:
        """Append ``batch`` (the one record of ``metadata``) to ``__transaction_state`` partition
        ``txn_partition`` with acks=all. Returns the outcome, or None while it is pending: the
        shell then reports it with :meth:`TxnDriver.log_written`."""

    def leader_of(self, partition: TxnPartition) -> int | None:
        """The partition's leader now (``NO_LEADER``: none), None if it no longer exists."""

    def send_markers(self, attempt: int, leader: int, markers: SendMarkers,
                     partitions: tuple[TxnPartition, ...]) -> bool:
        """Send one WriteTxnMarkers for ``partitions`` to ``leader``; the shell reports the
        answer with :meth:`TxnDriver.markers_answered` or :meth:`TxnDriver.markers_failed`.
        False: it could not be sent (asked again after the backoff)."""

    def report(self, level: int, line: str) -> None:
        """One line about what the driver did (a ``logging`` level)."""


@dataclass(frozen=True, slots=True)
class MarkerPolicy:
    """How WriteTxnMarkers are retried. A leader answers once its marker is below the HW (or
    after its own timeout): waiting less than that would send the marker again while the first
    is still on its way to the followers."""

    request_timeout_ms: int = 35_000
    backoff_ms: int = 20  # before the first retry
    backoff_max_ms: int = 1_000  # most between retries


@dataclass(slots=True)
class _MarkerJob:
    """The markers of one decided transaction, not yet all written."""

    markers: SendMarkers
    remaining: set[TxnPartition]
    backoff_ms: int
    next_round_ms: int | None = None  # None: a round is in flight
    rounds: int = 0
    in_flight: dict[int, tuple[frozenset[TxnPartition], int, int]] = field(default_factory=dict)
    # attempt -> (its partitions, when it is given up, the leader asked)


ReplyTo = Callable[[Reply], None]


class TxnDriver:
    """``start`` before effects other than replies are carried out (those decided earlier are
    held until then); ``stop`` forgets everything in flight (a crash or a shutdown)."""

    def __init__(self, core: TxnCoordinator, ports: TxnPorts, *, cleanup_interval_ms: int,
                 markers: MarkerPolicy | None = None) -> None:
        self.core = core
        self.ports = ports
        self.policy = markers or MarkerPolicy()
        self.cleanup_interval_ms = cleanup_interval_ms  # 0: no periodic work
        self.markers_sent = 0  # partitions that answered a marker (for tests and metrics)
        self._ids = itertools.count(1)
        self._waiting: dict[int, ReplyTo] = {}
        self._jobs: dict[str, _MarkerJob] = {}  # transactional id -> its markers
        self._attempts: dict[int, _MarkerJob] = {}
        self._deferred: list[TxnEffect] = []
        self._next_cleanup_ms: int | None = None
        self._started = False
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, now_ms: int) -> None:
        self._started = True
        if self.cleanup_interval_ms > 0:
            self._next_cleanup_ms = now_ms + self.cleanup_interval_ms
        deferred, self._deferred = self._deferred, []
        self._apply(deferred, now_ms)

    def stop(self) -> None:
        self._stopped = True
        self._waiting.clear()
        self._jobs.clear()
        self._attempts.clear()
        self._deferred.clear()
        self._next_cleanup_ms = None

    # -- inputs ---------------------------------------------------------------------------------
    def request(self, decide: Callable[[int], list[TxnEffect]], reply_to: ReplyTo,
                now_ms: int) -> None:
        """Hand the core one request (``decide(request_id)``); its answer goes to ``reply_to``,
        now or once the writes it waits for end. What ``decide`` raises is raised here, and
        nothing is applied."""
        request_id = next(self._ids)
        self._waiting[request_id] = reply_to
        try:
            effects = decide(request_id)
        except BaseException:
            del self._waiting[request_id]
            raise
        self._apply(effects, now_ms)

    def load(self, txn_partition: int, coordinator_epoch: int,
             transactions: Mapping[str, TxnMetadata], now_ms: int) -> None:
        """This coordinator now serves ``txn_partition`` at ``coordinator_epoch``, whose log
        holds ``transactions``: what was prepared is finished."""
        self._drop_jobs(txn_partition)
        self._apply(self.core.load(txn_partition, coordinator_epoch, transactions, now_ms),
                    now_ms)

    def unload(self, txn_partition: int, now_ms: int) -> None:
        self._drop_jobs(txn_partition)
        self._apply(self.core.unload(txn_partition), now_ms)

    def log_written(self, transactional_id: str, error: ErrorCode, now_ms: int) -> None:
        """A pending append of ``transactional_id``'s record ended with ``error``."""
        self._apply(self._written(transactional_id, error, now_ms), now_ms)

    def markers_of(self, attempt: int) -> SendMarkers | None:
        """The markers ``attempt`` carries, if the driver still waits for its answer."""
        job = self._attempts.get(attempt)
        if job is None or self._jobs.get(job.markers.transactional_id) is not job:
            return None
        return job.markers

    def markers_answered(self, attempt: int, answers: Mapping[TxnPartition, int],
                         now_ms: int) -> None:
        """The leader answered ``attempt``: an error code per partition (one missing is asked
        again)."""
        job = self._attempts.pop(attempt, None)
        if job is None or self._jobs.get(job.markers.transactional_id) is not job:
            return  # given up on, or the transaction's markers were sent again since
        partitions, _, leader = job.in_flight.pop(attempt)
        m = job.markers
        for tp in sorted(partitions):
            code = answers.get(tp)
            if code is None or code in RETRIABLE_MARKER_ERRORS:
                continue
            if code != ErrorCode.NONE:
                self.ports.report(logging.ERROR, (
                    f"transaction coordinator: {_what(m)} marker of {m.transactional_id!r} on "
                    f"{tp[0]}-{tp[1]} refused by broker {leader}: {_name(code)}; not retried"))
            job.remaining.discard(tp)
            self.markers_sent += 1
        self._apply(self._round_ended(job, now_ms), now_ms)

    def markers_failed(self, attempt: int, now_ms: int) -> None:
        """``attempt`` got no answer (the connection failed or timed out): asked again."""
        job = self._attempts.pop(attempt, None)
        if job is None or self._jobs.get(job.markers.transactional_id) is not job:
            return
        job.in_flight.pop(attempt, None)
        self._apply(self._round_ended(job, now_ms), now_ms)

    @property
    def markers_in_flight(self) -> int:
        """Decided transactions whose markers are not all written yet."""
        return len(self._jobs)

    # -- time -----------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do (None: nothing is scheduled)."""
        times = [] if self._next_cleanup_ms is None else [self._next_cleanup_ms]
        for job in self._jobs.values():
            if job.next_round_ms is not None:
                times.append(job.next_round_ms)
            times.extend(deadline for _, deadline, _ in job.in_flight.values())
        return min(times, default=None)

    def tick(self, now_ms: int) -> None:
        if self._stopped or not self._started:
            return
        effects: list[TxnEffect] = []
        for job in list(self._jobs.values()):
            expired = [a for a, (_, deadline, _) in job.in_flight.items() if deadline <= now_ms]
            for attempt in expired:
                del job.in_flight[attempt]
                self._attempts.pop(attempt, None)
            if expired:
                effects.extend(self._round_ended(job, now_ms))
            elif (not job.in_flight and job.next_round_ms is not None
                  and job.next_round_ms <= now_ms):
                effects.extend(self._round(job, now_ms))
        if self._next_cleanup_ms is not None and self._next_cleanup_ms <= now_ms:
            self._next_cleanup_ms = now_ms + self.cleanup_interval_ms
            for effect in (found := self.core.tick(now_ms)):
                if (isinstance(effect, WriteTxnLog)
                        and effect.metadata.state is TxnState.PREPARE_ABORT):
                    m = effect.metadata
                    self.ports.report(logging.INFO, (
                        f"transaction coordinator: transaction of {m.transactional_id!r} timed "
                        f"out after {m.txn_timeout_ms} ms: aborting (producer id "
                        f"{m.producer_id} fenced to epoch {m.producer_epoch})"))
            effects.extend(found)
        self._apply(effects, now_ms)

    # -- effects --------------------------------------------------------------------------------
    def _apply(self, effects: Iterable[TxnEffect], now_ms: int) -> None:
        queue = deque(effects)
        while queue and not self._stopped:
            effect = queue.popleft()
            if isinstance(effect, Reply):
                reply_to = self._waiting.pop(effect.request_id, None)
                if reply_to is not None:
                    reply_to(effect)
            elif not self._started:
                self._deferred.append(effect)
            elif isinstance(effect, WriteTxnLog):
                queue.extend(self._write(effect, now_ms))
            elif isinstance(effect, SendMarkers):
                self._drop_job(effect.transactional_id)
                job = _MarkerJob(effect, set(effect.partitions), self.policy.backoff_ms)
                self._jobs[effect.transactional_id] = job
                queue.extend(self._round(job, now_ms))
            else:  # pragma: no cover - the effect union is closed
                raise TypeError(f"unknown transaction coordinator effect {effect!r}")

    def _write(self, effect: WriteTxnLog, now_ms: int) -> list[TxnEffect]:
        m = effect.metadata
        error = self.ports.append(effect.txn_partition, m, txn_log.build_record_batch(m, now_ms),
                                  now_ms)
        if error is None or self._stopped:
            return []  # pending (``log_written``), or the shell stopped while writing
        return self._written(m.transactional_id, error, now_ms)

    def _written(self, transactional_id: str, error: ErrorCode, now_ms: int) -> list[TxnEffect]:
        if error is not ErrorCode.NONE:
            self.ports.report(logging.WARNING, (
                f"transaction coordinator: the record of {transactional_id!r} was not written: "
                f"{error.name}"))
        return self.core.on_log_written(transactional_id, error, now_ms)

    # -- markers --------------------------------------------------------------------------------
    def _round(self, job: _MarkerJob, now_ms: int) -> list[TxnEffect]:
        """Send the markers still missing, one request per leader."""
        m = job.markers
        if self.core.loaded().get(m.txn_partition) != m.coordinator_epoch:
            self._drop_job(m.transactional_id)  # no longer the coordinator: the new one sends
            return []
        job.next_round_ms = None
        by_leader: dict[int, list[TxnPartition]] = {}
        for tp in sorted(job.remaining):
            leader = self.ports.leader_of(tp)
            if leader is None:
                self.ports.report(logging.INFO, (
                    f"transaction coordinator: {_what(m)} marker of {m.transactional_id!r}: "
                    f"{tp[0]}-{tp[1]} no longer exists"))
                job.remaining.discard(tp)
            elif leader != NO_LEADER:
                by_leader.setdefault(leader, []).append(tp)
        for leader, partitions in by_leader.items():
            attempt = next(self._ids)
            job.in_flight[attempt] = (frozenset(partitions),
                                      now_ms + self.policy.request_timeout_ms, leader)
            self._attempts[attempt] = job
            if not self.ports.send_markers(attempt, leader, m, tuple(partitions)):
                del job.in_flight[attempt]
                del self._attempts[attempt]
        return self._round_ended(job, now_ms)

    def _round_ended(self, job: _MarkerJob, now_ms: int) -> list[TxnEffect]:
        """After an answer: finish the transaction once every marker is written, or ask again
        for the rest after the backoff once the round has no request left in flight."""
        if job.in_flight or job.next_round_ms is not None:
            return []
        m = job.markers
        if not job.remaining:
            del self._jobs[m.transactional_id]
            return self.core.on_markers_written(m.transactional_id, m.producer_epoch, now_ms)
        job.rounds += 1
        if job.rounds % WARN_EVERY_ROUNDS == 0:
            self.ports.report(logging.WARNING, (
                f"transaction coordinator: {_what(m)} markers of {m.transactional_id!r}: "
                f"{len(job.remaining)} partition(s) still without a marker after {job.rounds} "
                f"attempts: {sorted(job.remaining)}"))
        job.next_round_ms = now_ms + job.backoff_ms
        job.backoff_ms = min(job.backoff_ms * 2, self.policy.backoff_max_ms)
        return []

    def _drop_job(self, transactional_id: str) -> None:
        job = self._jobs.pop(transactional_id, None)
        if job is not None:
            for attempt in job.in_flight:
                self._attempts.pop(attempt, None)

    def _drop_jobs(self, txn_partition: int) -> None:
        for txn_id, job in list(self._jobs.items()):
            if job.markers.txn_partition == txn_partition:
                self._drop_job(txn_id)


def _what(markers: SendMarkers) -> str:
    return "COMMIT" if markers.committed else "ABORT"


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
