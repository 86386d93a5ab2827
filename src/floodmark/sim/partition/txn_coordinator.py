"""The simulator's transaction coordinator: the broker's core and driver
(``replication.transactions``) with the simulator's ports, as ``broker.txn_coordinator`` plugs
in the broker's.

The core decides and ``TxnDriver`` carries out every decision (markers grouped, retried and
timed out by the same rule as on the broker); this shell only adapts the ports:

* the log: the record the broker appends to ``__transaction_state`` is appended to this node's
  log in simulated storage, which survives a crash. A ``PrepareCommit``/``PrepareAbort`` in the
  log is the decision: the checker learns it then;
* the network: a ``WriteTxnMarker`` to the partition's leader (the broker's WriteTxnMarkers
  path, ``replication.produce.write_marker_as_leader``), answered with a ``ProduceReply``; an
  acknowledged marker is an acks=all write the checker holds the cluster to;
* the clock: a world event at ``TxnDriver.next_deadline_ms``;
* requests: a ``TxnReply`` to the client that asked, and to a leader's KIP-890 verification
  (``VerifyTxn``, the core's ``verify_partitions``).

``transaction_version`` is the version its clients' EndTxn carries (0: EndTxn v4 and older, the
protocol of KIP-98; 2: EndTxn v5, KIP-890 part 2, every transaction end bumps the epoch and the
markers carry the bumped one). The simulator's clients are all of one version.

A fault: with ``crash_after`` set to a state, the coordinator crashes right after that state's
record reaches its log (before it answers or sends a marker). :meth:`restart` is a new
coordinator (coordinator epoch + 1) that replays the log into a new core and driver and finishes
what was prepared.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any, Protocol

from floodmark.constants import ACKS_ALL
from floodmark.errors import ErrorCode
from floodmark.replication import (
    MarkerPolicy,
    PartitionRegistration,
    Reply,
    SendMarkers,
    TxnCoordinator,
    TxnDriver,
    TxnEffect,
    TxnMetadata,
    TxnPartition,
    TxnState,
)
from floodmark.replication import log as txn_log
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.clients import ProduceOutcome
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.world import World
from floodmark.spec import marker_label

NAME = m.TXN_COORDINATOR
TXN_PARTITION = 0  # the one ``__transaction_state`` partition of the simulated cluster
MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms (Kafka's default)


class _Registry(Protocol):
    @property
    def registration(self) -> PartitionRegistration: ...


class CoordinatorHost(Protocol):
    """What the coordinator sees of its cluster (``cluster.Cluster``)."""

    world: World
    net: Network
    config: SimConfig

    @property
    def controller(self) -> _Registry: ...
    def name_of(self, broker_id: int) -> str: ...
    def on_transaction_decided(self, producer_id: int, committed: bool) -> None: ...
    def on_acknowledged(self, outcome: ProduceOutcome) -> None: ...


class SimTxnCoordinator:
    def __init__(self, cluster: CoordinatorHost, *, first_producer_id: int,
                 request_timeout_ms: int, retry_backoff_ms: int = 20,
                 cleanup_interval_ms: int = 0, transaction_version: int = 0) -> None:
        self.cluster = cluster
        self.transaction_version = transaction_version
        self.name = NAME
        self.markers = MarkerPolicy(request_timeout_ms=request_timeout_ms,
                                    backoff_ms=retry_backoff_ms)
        self.cleanup_interval_ms = cleanup_interval_ms
        self.log: list[bytes] = []  # ``__transaction_state`` batches: simulated storage
        self.coordinator_epoch = 0
        self.alive = True
        self.crash_after: TxnState | None = None
        self.restart_after_ms: tuple[int, int] | None = None  # explorer: back after a crash
        self.crashes = 0
        self._producer_ids = itertools.count(first_producer_id)
        self.marker_status: dict[int, ErrorCode | None] = {}  # producer id -> last marker answer
        self.acknowledged: list[ProduceOutcome] = []  # markers a leader answered NONE
        self._sent_ms: dict[int, int] = {}  # marker attempt -> when it was sent
        self._wake_at: int | None = None
        self.driver: TxnDriver
        self._load()
        cluster.net.add_node(self.name, self.on_message)

    @property
    def core(self) -> TxnCoordinator:
        return self.driver.core

    @property
    def markers_in_flight(self) -> int:
        """Decided transactions whose markers are not all written (0 while crashed: the next
        coordinator resends them)."""
        return self.driver.markers_in_flight if self.alive else 0

    # -- life -------------------------------------------------------------------------------------
    def _load(self) -> None:
        now = self.cluster.world.now_ms
        core = TxnCoordinator(max_timeout_ms=MAX_TIMEOUT_MS,
                              allocate_producer_id=lambda: next(self._producer_ids))
        self.driver = TxnDriver(core, self, cleanup_interval_ms=self.cleanup_interval_ms,
                                markers=self.markers)
        self._wake_at = None
        replayed = txn_log.replay(self.log)
        self._record(f"loads {replayed.records} record(s) of __transaction_state, "
                     f"coordinator epoch {self.coordinator_epoch}")
        self.driver.start(now)
        self.driver.load(TXN_PARTITION, self.coordinator_epoch, replayed.transactions, now)
        self._reschedule()

    def crash(self) -> None:
        """The coordinator's broker dies: memory, requests and marker senders are gone; its
        log stays."""
        self._record("crashes")
        self.alive = False
        self.crashes += 1
        self.driver.stop()
        self.cluster.net.node_down(self.name)
        self._sent_ms.clear()
        if self.restart_after_ms is not None:
            world = self.cluster.world
            world.schedule(world.rng.randint(*self.restart_after_ms), self.restart)

    def restart(self) -> None:
        """A new coordinator (the next leader of ``__transaction_state``) takes over."""
        self.alive = True
        self.crash_after = None
        self.coordinator_epoch += 1
        self.cluster.net.node_up(self.name)
        self._load()

    def _reschedule(self) -> None:
        """A world event when the driver next has something to do."""
        if not self.alive:
            return
        deadline = self.driver.next_deadline_ms()
        if deadline is None:
            return
        now = self.cluster.world.now_ms
        when = max(now, deadline)
        if self._wake_at is not None and now <= self._wake_at <= when:
            return  # an earlier wake-up is pending; it reschedules
        self._wake_at = when
        self.cluster.world.schedule(when - now, self._wake, self.coordinator_epoch, when)

    def _wake(self, epoch: int, when: int) -> None:
        if not self.alive or epoch != self.coordinator_epoch or when != self._wake_at:
            return
        self._wake_at = None
        self.driver.tick(self.cluster.world.now_ms)
        self._reschedule()

    def _record(self, line: str) -> None:
        self.cluster.world.record(f"{self.name} {line}")

    # -- requests ---------------------------------------------------------------------------------
    def on_message(self, src: str, message: Any) -> None:
        if not self.alive:
            return
        now = self.cluster.world.now_ms
        if isinstance(message, m.ProduceReply):
            self._on_marker_reply(message)
        elif isinstance(message, m.VerifyTxn):  # a read of the core: answered at once
            answer = self.core.verify_partitions(
                TXN_PARTITION, message.transactional_id, message.producer_id,
                message.producer_epoch, [self._partition()])[self._partition()]
            self.cluster.net.send(self.name, src, m.TxnReply(message.request_id, answer))
        elif isinstance(message, m.InitProducerId | m.AddPartitionsToTxn | m.EndTxn):
            def reply_to(reply: Reply) -> None:
                self.cluster.net.send(self.name, src, m.TxnReply(
                    message.request_id, reply.error, reply.producer_id, reply.producer_epoch))
            self.driver.request(lambda request_id: self._decide(request_id, message, now),
                                reply_to, now)
        else:
            raise TypeError(f"{self.name}: unexpected {message!r}")
        self._reschedule()

    def _decide(self, request_id: int,
                message: m.InitProducerId | m.AddPartitionsToTxn | m.EndTxn,
                now_ms: int) -> list[TxnEffect]:
        core = self.core
        if isinstance(message, m.InitProducerId):
            return core.init_producer_id(request_id, TXN_PARTITION, message.transactional_id,
                                         message.txn_timeout_ms, now_ms)
        if isinstance(message, m.AddPartitionsToTxn):
            return core.add_partitions(request_id, TXN_PARTITION, message.transactional_id,
                                       message.producer_id, message.producer_epoch,
                                       [self._partition()], now_ms)
        return core.end_txn(request_id, TXN_PARTITION, message.transactional_id,
                            message.producer_id, message.producer_epoch, message.committed,
                            now_ms, transaction_version=self.transaction_version)

    def _partition(self) -> TxnPartition:
        return (self.cluster.config.topic, self.cluster.config.partition)

    # -- the driver's ports -------------------------------------------------------------------------
    def append(self, txn_partition: int, metadata: TxnMetadata, batch: bytes,
               now_ms: int) -> ErrorCode | None:
        self.log.append(batch)
        self._record(f"writes {metadata.state.kafka_name} of {metadata.transactional_id!r} "
                     f"p{metadata.producer_id} epoch {metadata.producer_epoch}")
        if metadata.state.is_prepare:  # in the log: decided, whatever happens to this node
            self.cluster.on_transaction_decided(metadata.producer_id,
                                                metadata.state is TxnState.PREPARE_COMMIT)
        if self.crash_after is metadata.state:
            self.crash()
            return None  # never answered: this coordinator is gone
        return ErrorCode.NONE

    def leader_of(self, partition: TxnPartition) -> int | None:
        return self.cluster.controller.registration.leader

    def send_markers(self, attempt: int, leader: int, markers: SendMarkers,
                     partitions: tuple[TxnPartition, ...]) -> bool:
        self._sent_ms[attempt] = self.cluster.world.now_ms
        self.marker_status[markers.producer_id] = None
        self._record(f"WriteTxnMarkers {'COMMIT' if markers.committed else 'ABORT'} "
                     f"p{markers.producer_id} to {self.cluster.name_of(leader)}")
        self.cluster.net.send(self.name, self.cluster.name_of(leader), m.WriteTxnMarker(
            attempt, markers.producer_id, markers.producer_epoch, markers.committed,
            self.markers.request_timeout_ms, markers.coordinator_epoch))
        return True

    def report(self, level: int, line: str) -> None:
        if level >= logging.INFO:
            self._record(line)

    def _on_marker_reply(self, reply: m.ProduceReply) -> None:
        attempt = reply.produce_id
        sent_ms = self._sent_ms.pop(attempt, None)
        markers = self.driver.markers_of(attempt)
        if sent_ms is None or markers is None:
            return  # given up on (timed out, or the coordinator moved on)
        self.marker_status[markers.producer_id] = reply.error
        if reply.error is ErrorCode.NONE:  # an acks=all write like any other: never lost
            outcome = ProduceOutcome(marker_label(markers.producer_id, markers.committed),
                                     ACKS_ALL, sent_ms, ErrorCode.NONE, reply.base_offset)
            self.acknowledged.append(outcome)
            self.cluster.on_acknowledged(outcome)
        self.driver.markers_answered(attempt, {self._partition(): reply.error},
                                     self.cluster.world.now_ms)
