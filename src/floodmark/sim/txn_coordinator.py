"""The simulator's transaction coordinator: the broker's core (``replication.transactions``)
driven over the simulated network, as ``broker.txn_coordinator`` drives it over sockets.

The core decides every request and every step of a commit or an abort; this node carries out
its effects:

* ``WriteTxnLog``: the record the broker appends to ``__transaction_state``
  (``txn_log.build_record_batch``) is appended to this node's log in simulated storage, which
  survives a crash; then the outcome goes back to the core. A ``PrepareCommit``/``PrepareAbort``
  in the log is the decision: the checker learns it then.
* ``SendMarkers``: a ``WriteTxnMarker`` to the partition's leader (the broker's WriteTxnMarkers
  path, ``replication.produce.write_marker_as_leader``), retried after a timeout or a retriable
  error (``RETRIABLE_MARKER_ERRORS``, the broker driver's list) until answered; then the core
  writes CompleteCommit/CompleteAbort.
* ``Reply``: a ``TxnReply`` to the client that asked.

A fault: with ``crash_after`` set to a state, the coordinator crashes right after that state's
record reaches its log (before it answers or sends a marker). :meth:`restart` is a new
coordinator (coordinator epoch + 1) that replays the log into a new core (``TxnCoordinator.load``)
and finishes what was prepared.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

from floodmark.errors import ErrorCode
from floodmark.replication.election import NO_LEADER, PartitionRegistration
from floodmark.replication.partition import ACKS_ALL
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import (
    RETRIABLE_MARKER_ERRORS,
    Effect,
    Reply,
    SendMarkers,
    TxnCoordinator,
    WriteTxnLog,
)
from floodmark.replication.transactions.state import Partition, TxnState
from floodmark.sim import messages as m
from floodmark.sim.clients import ProduceOutcome
from floodmark.sim.config import SimConfig
from floodmark.sim.network import Network
from floodmark.sim.replica_view import marker_label
from floodmark.sim.world import World

NAME = "txn-coordinator"
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
                 cleanup_interval_ms: int = 0) -> None:
        self.cluster = cluster
        self.name = NAME
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.cleanup_interval_ms = cleanup_interval_ms
        self.log: list[bytes] = []  # ``__transaction_state`` batches: simulated storage
        self.coordinator_epoch = 0
        self.alive = True
        self.crash_after: TxnState | None = None
        self.restart_after_ms: tuple[int, int] | None = None  # explorer: back after a crash
        self.crashes = 0
        self._producer_ids = itertools.count(first_producer_id)
        self._ids = itertools.count(1)
        self._routes: dict[int, tuple[str, int]] = {}  # core request id -> (client, its id)
        self._attempts: dict[int, tuple[SendMarkers, Partition]] = {}
        self._remaining: dict[str, tuple[SendMarkers, set[Partition]]] = {}
        self.marker_status: dict[int, ErrorCode | None] = {}  # producer id -> last marker answer
        self.acknowledged: list[ProduceOutcome] = []  # markers a leader answered NONE
        self._sent_ms: dict[int, int] = {}  # marker attempt -> when it was sent
        self.core: TxnCoordinator
        self._load()
        cluster.net.add_node(self.name, self.on_message)
        if cleanup_interval_ms > 0:
            cluster.world.schedule(cleanup_interval_ms, self._tick, self.coordinator_epoch)

    # -- life -------------------------------------------------------------------------------------
    def _load(self) -> None:
        core = TxnCoordinator(max_timeout_ms=MAX_TIMEOUT_MS,
                              allocate_producer_id=lambda: next(self._producer_ids))
        replayed = txn_log.replay(self.log)
        self._record(f"loads {replayed.records} record(s) of __transaction_state, "
                     f"coordinator epoch {self.coordinator_epoch}")
        self.core = core
        self._apply(core.load(TXN_PARTITION, self.coordinator_epoch, replayed.transactions,
                              self.cluster.world.now_ms))

    def crash(self) -> None:
        """The coordinator's broker dies: memory, requests and marker senders are gone; its
        log stays."""
        self._record("crashes")
        self.alive = False
        self.crashes += 1
        self.cluster.net.node_down(self.name)
        self._routes.clear()
        self._attempts.clear()
        self._sent_ms.clear()
        self._remaining.clear()
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
        if self.cleanup_interval_ms > 0:
            self.cluster.world.schedule(self.cleanup_interval_ms, self._tick,
                                        self.coordinator_epoch)

    def _tick(self, epoch: int) -> None:
        if not self.alive or epoch != self.coordinator_epoch:
            return
        self._apply(self.core.tick(self.cluster.world.now_ms))
        self.cluster.world.schedule(self.cleanup_interval_ms, self._tick, epoch)

    def _record(self, line: str) -> None:
        self.cluster.world.record(f"{self.name} {line}")

    # -- requests ---------------------------------------------------------------------------------
    def on_message(self, src: str, message: Any) -> None:
        if not self.alive:
            return
        if isinstance(message, m.ProduceReply):
            self._on_marker_reply(message)
            return
        now = self.cluster.world.now_ms
        request_id = next(self._ids)
        self._routes[request_id] = (src, message.request_id)
        core = self.core
        if isinstance(message, m.InitProducerId):
            effects = core.init_producer_id(request_id, TXN_PARTITION, message.transactional_id,
                                            message.txn_timeout_ms, now)
        elif isinstance(message, m.AddPartitionsToTxn):
            effects = core.add_partitions(request_id, TXN_PARTITION, message.transactional_id,
                                          message.producer_id, message.producer_epoch,
                                          [self._partition()], now)
        elif isinstance(message, m.EndTxn):
            effects = core.end_txn(request_id, TXN_PARTITION, message.transactional_id,
                                   message.producer_id, message.producer_epoch,
                                   message.committed, now)
        else:
            raise TypeError(f"{self.name}: unexpected {message!r}")
        self._apply(effects)

    def _partition(self) -> Partition:
        return (self.cluster.config.topic, self.cluster.config.partition)

    # -- effects ----------------------------------------------------------------------------------
    def _apply(self, effects: list[Effect]) -> None:
        queue = list(effects)
        while queue and self.alive:
            effect = queue.pop(0)
            if isinstance(effect, Reply):
                route = self._routes.pop(effect.request_id, None)
                if route is not None:
                    self.cluster.net.send(self.name, route[0], m.TxnReply(
                        route[1], effect.error, effect.producer_id, effect.producer_epoch))
            elif isinstance(effect, WriteTxnLog):
                queue.extend(self._write(effect))
            elif isinstance(effect, SendMarkers):
                self._remaining[effect.transactional_id] = (effect, set(effect.partitions))
                for tp in sorted(effect.partitions):
                    self._send_marker(effect, tp)

    def _write(self, effect: WriteTxnLog) -> list[Effect]:
        meta = effect.metadata
        now = self.cluster.world.now_ms
        self.log.append(txn_log.build_record_batch(meta, now))
        self._record(f"writes {meta.state.kafka_name} of {meta.transactional_id!r} "
                     f"p{meta.producer_id} epoch {meta.producer_epoch}")
        if meta.state.is_prepare:  # in the log: decided, whatever happens to this coordinator
            self.cluster.on_transaction_decided(meta.producer_id,
                                                meta.state is TxnState.PREPARE_COMMIT)
        if self.crash_after is meta.state:
            self.crash()
            return []
        return self.core.on_log_written(meta.transactional_id, ErrorCode.NONE, now)

    # -- markers ----------------------------------------------------------------------------------
    def _send_marker(self, effect: SendMarkers, tp: Partition) -> None:
        if not self.alive or effect.coordinator_epoch != self.coordinator_epoch:
            return
        held = self._remaining.get(effect.transactional_id)
        if held is None or held[0] is not effect or tp not in held[1]:
            return
        world = self.cluster.world
        leader = self.cluster.controller.registration.leader
        if leader == NO_LEADER:
            world.schedule(self.retry_backoff_ms, self._send_marker, effect, tp)
            return
        attempt = next(self._ids)
        self._attempts[attempt] = (effect, tp)
        self._sent_ms[attempt] = world.now_ms
        self.marker_status[effect.producer_id] = None
        self._record(f"WriteTxnMarkers {'COMMIT' if effect.committed else 'ABORT'} "
                     f"p{effect.producer_id} to {self.cluster.name_of(leader)}")
        self.cluster.net.send(self.name, self.cluster.name_of(leader), m.WriteTxnMarker(
            attempt, effect.producer_id, effect.producer_epoch, effect.committed,
            self.request_timeout_ms, effect.coordinator_epoch))
        world.schedule(self.request_timeout_ms, self._marker_timeout, attempt)

    def _marker_timeout(self, attempt: int) -> None:
        held = self._attempts.pop(attempt, None)
        self._sent_ms.pop(attempt, None)
        if held is not None:
            self._send_marker(*held)

    def _on_marker_reply(self, reply: m.ProduceReply) -> None:
        held = self._attempts.pop(reply.produce_id, None)
        if held is None:
            return
        effect, tp = held
        sent_ms = self._sent_ms.pop(reply.produce_id)
        self.marker_status[effect.producer_id] = reply.error
        if reply.error is ErrorCode.NONE:  # an acks=all write like any other: never lost
            outcome = ProduceOutcome(marker_label(effect.producer_id, effect.committed),
                                     ACKS_ALL, sent_ms, ErrorCode.NONE, reply.base_offset)
            self.acknowledged.append(outcome)
            self.cluster.on_acknowledged(outcome)
        if reply.error in RETRIABLE_MARKER_ERRORS:
            self.cluster.world.schedule(self.retry_backoff_ms, self._send_marker, effect, tp)
            return
        if reply.error is not ErrorCode.NONE:
            self._record(f"marker of p{effect.producer_id} refused: {reply.error.name}; "
                         "not retried")
        entry = self._remaining.get(effect.transactional_id)
        if entry is None or entry[0] is not effect:
            return
        entry[1].discard(tp)
        if not entry[1]:
            del self._remaining[effect.transactional_id]
            self._apply(self.core.on_markers_written(effect.transactional_id,
                                                     effect.producer_epoch,
                                                     self.cluster.world.now_ms))
