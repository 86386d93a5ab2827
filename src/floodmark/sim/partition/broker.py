"""A simulated broker: the replication core plus real storage over a ``MemoryFileSystem``.

This is the "shell" around ``floodmark.replication.partition.Partition``: it owns the log, turns
messages into core calls and applies the effects the core returns (the same division of labour the
real asyncio broker uses). A crash throws away process state and, with ``lose_unsynced``, every
byte the storage layer did not fsync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

from floodmark.constants import ACKS_NONE, READ_COMMITTED
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication import (
    AlterPartitionRequest,
    CompleteProduce,
    ControllerSession,
    Effect,
    FetchIsolation,
    FollowerActionKind,
    Partition,
    PartitionConfig,
    PeriodicWork,
    ProduceOrder,
    ProduceSettings,
    ReplicaDriver,
    ReplicaSelection,
    VerificationGuard,
    lacks_transactional_id,
    lease,
    produce_as_leader,
    read_for_fetch,
    txn_verification,
    write_marker_as_leader,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition import replica_view
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.follower_side import FollowerSide
from floodmark.sim.partition.parked_fetches import ParkedFetches
from floodmark.sim.partition.replica_view import LogMirror, Served
from floodmark.sim.world import World
from floodmark.spec import Entry, ReplicaView, marker_label
from floodmark.storage import Log, LogConfig, MemoryFileSystem, OffsetCheckpointFile, TopicPartition


class BrokerHost(Protocol):
    """What a simulated broker sees of its cluster (``cluster.Cluster``)."""

    config: SimConfig
    world: World
    net: Network

    def name_of(self, broker_id: int) -> str: ...
    def after_broker_event(self, broker: SimBroker) -> None: ...
    def on_high_watermark(self, broker: SimBroker, old: int, new: int) -> None: ...
    def on_truncate(self, broker: SimBroker, new_leo: int, old_leo: int) -> None: ...
    def on_become_leader(self, broker: SimBroker, epoch: int) -> None: ...
    def on_leader_append(self, broker: SimBroker, epoch: int) -> None: ...
    def on_consumer_read(self, broker: SimBroker, records: tuple[tuple[int, int, str], ...],
                         hw: int, last_stable_offset: int, isolation_level: int,
                         read: tuple[int, int]) -> None: ...

    racks: dict[int, str]
    """broker.rack by broker id; empty: no replica.selector.class (leaders serve consumers)."""


logger = logging.getLogger("floodmark.sim")

DATA_DIR = "/data"
HW_CHECKPOINT = f"{DATA_DIR}/replication-offset-checkpoint"
RECOVERY_CHECKPOINT = f"{DATA_DIR}/recovery-point-offset-checkpoint"


class SimBroker:
    def __init__(self, cluster: BrokerHost, broker_id: int, name: str) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.net = cluster.net
        self.config = cluster.config
        self.broker_id = broker_id
        self.name = name
        self.fs = MemoryFileSystem()
        self.fs.mkdirs(self.partition_dir)
        self.fs.fsync_dir(DATA_DIR)
        self.fs.fsync_dir("/")
        self.tp = TopicPartition(self.config.topic, self.config.partition)
        self.alive = False
        self.paused = False
        self.incarnation = 0
        self.broker_epoch = -1
        self.log: Log | None = None
        self.partition: Partition | None = None
        self.driver: ReplicaDriver | None = None
        self.produce_settings = ProduceSettings(
            max_message_bytes=LogConfig().max_message_bytes,
            unsafe_ack_duplicates_before_commit=self.config.unsafe_ack_duplicates_before_commit,
            kafka_aborted_batch_duplicates=self.config.kafka_aborted_batch_duplicates,
        )
        self.mirror = LogMirror()  # the log as (epoch, value) entries: index = offset
        self.parked: ParkedFetches | None = None  # follower fetches parked here, routed
        self._tick_at: int | None = None  # when the node's timer fires next (``_arm_tick``)
        self.deferred: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.follower: FollowerSide | None = None  # the node's follower fetch loop, routed
        self.produce_routes: dict[int, tuple[str, int, int]] = {}  # id -> (client, client id, acks)
        # KIP-890 verifications out at the coordinator: request id -> (client, produce, guard,
        # its place in the produce order)
        self.verifications: dict[int, tuple[str, m.Produce, VerificationGuard, int]] = {}
        self.next_verification_id = 0
        # Transactional produces in their producer's order (``replication.produce_order``, the
        # broker's rule): place -> (client, produce) of those waiting for their turn.
        self.produce_order: ProduceOrder[int] = ProduceOrder()
        self.held_produces: dict[int, tuple[str, m.Produce]] = {}
        self.next_order_place = 0
        self.next_produce_id = 0
        self.last_metadata: m.Metadata | None = None
        self.lost_data_on_crash = False
        self.diverging_answers = 0
        # The broker's side of its controller session (autonomous worlds only: a scripted one
        # sends no heartbeats); ``replication.lease`` steps a leader down for clients on it.
        self.session = ControllerSession(session_timeout_ms=self.config.session_timeout_ms)
        self.stepped_down = False
        self.net.add_node(name, self.on_message)
        self.net.node_down(name)

    @property
    def partition_dir(self) -> str:
        return f"{DATA_DIR}/{self.config.topic}-{self.config.partition}"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Boot: recover the log, load the HW checkpoint (clamped), register with the controller."""
        assert not self.alive
        self.alive = True
        self.paused = False
        self.incarnation += 1
        self.net.node_up(self.name)
        now = self.world.now_ms
        recovery = OffsetCheckpointFile(self.fs, RECOVERY_CHECKPOINT).read().get(self.tp, 0)
        # The storage's own recovery and producer-state rebuild, reading the log in chunks of
        # ``scan_chunk_bytes`` (tiny in the simulator, so batches straddle chunk boundaries).
        self.log = Log.open(
            self.partition_dir, LogConfig(scan_chunk_bytes=self.config.scan_chunk_bytes),
            fs=self.fs, now_ms=now, recovery_point=recovery,
        )
        checkpointed = OffsetCheckpointFile(self.fs, HW_CHECKPOINT).read().get(self.tp, 0)
        cfg = self.config
        # The core's timers (ISR check, HW checkpoint, the OS writing its page cache back at a
        # random phase) run in autonomous worlds only (``_arm_tick``): a script steps by hand.
        self.driver = ReplicaDriver.open(
            PartitionConfig(
                topic=cfg.topic,
                partition=cfg.partition,
                broker_id=self.broker_id,
                min_insync_replicas=cfg.min_insync_replicas,
                replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
                truncation=cfg.truncation,
                flush_check_interval_ms=cfg.os_flush_interval_ms if cfg.autonomous else None,
                checkpoint_interval_ms=cfg.hw_checkpoint_interval_ms if cfg.autonomous else None,
            ),
            self.log, self, checkpointed_high_watermark=checkpointed, now_ms=now)
        self.partition = self.driver.partition
        self.mirror.load(self.log)
        self.parked = ParkedFetches(self.name, self.world, self.net, cfg, self.driver, self.log,
                                    self._timer)
        self.deferred = []
        self.follower = FollowerSide(self.name, self.world, self.net, self.cluster.name_of, cfg,
                                     self.driver, self.log, self.mirror, self._timer)
        self.produce_routes = {}
        self.verifications = {}
        self.produce_order = ProduceOrder()
        self.held_produces = {}
        self.last_metadata = None
        self.broker_epoch = -1  # until the controller answers this incarnation's registration
        self.session = ControllerSession(session_timeout_ms=cfg.session_timeout_ms)
        self.stepped_down = False
        self.world.record(
            f"{self.name} start LEO={self.log.log_end_offset} HW={self.partition.high_watermark} "
            f"epochs={self.log.epoch_cache.as_pairs()}"
        )
        self.net.send(
            self.name,
            "controller",
            m.Register(self.broker_id, self.incarnation, self.lost_data_on_crash,
                       self.world.now_ms),
        )
        self._tick_at = None
        if cfg.autonomous:
            self._timer(cfg.heartbeat_interval_ms, self._heartbeat_tick)
            self.partition.start_timers(now, {
                PeriodicWork.ISR_CHECK: now + cfg.replica_lag_time_max_ms // 2,
                PeriodicWork.CHECKPOINT: now + cfg.hw_checkpoint_interval_ms,
                PeriodicWork.FLUSH: now + self.world.rng.randint(1, cfg.os_flush_interval_ms),
            })
            self._arm_tick()

    def shutdown(self) -> None:
        """A clean shutdown: the log flushed and closed, the recovery point and the HW
        checkpointed, then the process exits. Nothing is left unsynced; the next ``start``
        still recovers the log and rebuilds the producer state and ``.txnindex`` from it."""
        if not self.alive:
            return
        self.flush()
        self.checkpoint_hw()
        if self.log is not None:
            self.log.close()
        self.world.record(f"{self.name} clean shutdown")
        self.crash(lose_unsynced=False)

    def crash(self, lose_unsynced: bool) -> None:
        """Kill the process; with ``lose_unsynced`` also lose the page cache (power loss)."""
        if not self.alive:
            return
        self.alive = False
        self.paused = False
        self.net.node_down(self.name)
        self.fs.crash(lose_unsynced, rng=None)
        # A power loss is reported as an unclean shutdown on re-registration (KIP-966 style):
        # the controller then removes this broker from the ISR. A process kill is not.
        self.lost_data_on_crash = lose_unsynced
        self.log = None
        self.partition = None
        self.driver = None
        self.parked = None  # the parked fetches die with the process
        self.world.record(f"{self.name} crash lose_unsynced={lose_unsynced}")

    def pause(self) -> None:
        if self.alive and not self.paused:
            self.paused = True
            self.net.pause(self.name)
            self.world.record(f"{self.name} pause")

    def resume(self) -> None:
        if self.alive and self.paused:
            self.paused = False
            self.world.record(f"{self.name} resume")
            deferred, self.deferred = self.deferred, []
            for fn, args in deferred:
                fn(*args)
            self._after_step()
            self.net.resume(self.name)

    def _timer(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.world.schedule(delay_ms, self._fire, self.incarnation, fn, args)

    def _fire(self, incarnation: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if not self.alive or incarnation != self.incarnation:
            return
        if self.paused:
            self.deferred.append((fn, args))
            return
        fn(*args)
        self._after_step()
        self.cluster.after_broker_event(self)

    def _after_step(self) -> None:
        """After every input: the parked fetches the core woke are asked again, and the node's
        timer is set for its next deadline."""
        if self.alive and self.parked is not None:
            self.parked.after_step()
        self._arm_tick()

    def _arm_tick(self) -> None:
        """Schedule the core's ``tick`` at ``next_deadline_ms`` (autonomous worlds; a scripted
        one runs each step by hand). An earlier pending wake-up stays: it re-arms."""
        if not self.config.autonomous or not self.alive or self.driver is None:
            return
        deadline = self.driver.next_deadline_ms()
        if deadline is None:
            return
        now = self.world.now_ms
        when = max(now, deadline)
        if self._tick_at is not None and now <= self._tick_at <= when:
            return
        self._tick_at = when
        self._timer(when - now, self._tick, when)

    def _tick(self, when: int) -> None:
        if when != self._tick_at or self.driver is None:
            return  # superseded by an earlier wake-up
        self._tick_at = None
        self.driver.tick(self.world.now_ms)

    # -- periodic work ------------------------------------------------------------------------
    def _heartbeat_tick(self) -> None:
        self._lease_check()
        if self.broker_epoch >= 0:
            self.net.send(self.name, "controller",
                          m.Heartbeat(self.broker_id, self.broker_epoch, self.world.now_ms))
        else:  # the registration (or its answer) was lost: register again
            self.net.send(
                self.name,
                "controller",
                m.Register(self.broker_id, self.incarnation, self.lost_data_on_crash,
                           self.world.now_ms),
            )
        self._timer(self.config.heartbeat_interval_ms, self._heartbeat_tick)

    def steps_down(self) -> bool:
        """``replication.lease``: this broker leads in its metadata but its controller session
        lapsed and no follower follows it: clients are answered NOT_LEADER_OR_FOLLOWER."""
        if self.partition is None or not self.config.step_down_on_lapse:
            return False
        now = self.world.now_ms
        return lease.steps_down(
            self.partition, now, in_doubt=self.session.leadership_in_doubt(now, 0),
            session_timeout_ms=self.session.session_timeout_ms)

    def _lease_check(self) -> None:
        """The lease check the broker runs too (``ReplicaDriver.check_lease``)."""
        if self.driver is None or not self.config.step_down_on_lapse:
            return
        now = self.world.now_ms
        down = self.driver.check_lease(now, in_doubt=self.session.leadership_in_doubt(now, 0),
                                       session_timeout_ms=self.session.session_timeout_ms)
        if down != self.stepped_down:
            self.stepped_down = down
            self.world.record(f"{self.name} steps down for clients (controller session lapsed)"
                              if down else f"{self.name} no longer steps down for clients")

    def checkpoint_hw(self) -> None:
        if self.partition is not None:
            OffsetCheckpointFile(self.fs, HW_CHECKPOINT).write(
                {self.tp: self.partition.high_watermark}
            )

    def flush(self) -> None:
        """fsync the log (what the OS does eventually) and record the recovery point."""
        if self.log is not None:
            self.log.flush(self.world.now_ms)
            OffsetCheckpointFile(self.fs, RECOVERY_CHECKPOINT).write(
                {self.tp: self.log.recovery_point}
            )

    # -- effects: the core's decisions go through the one driver; these are its ports ----------
    def apply(self, effects: Iterable[Effect]) -> None:
        assert self.driver is not None
        self.driver.apply(effects)

    def high_watermark_changed(self, old: int, new: int) -> None:
        self.cluster.on_high_watermark(self, old, new)
        if self.config.checkpoint_hw_on_change:
            self.checkpoint_hw()

    def complete_produce(self, done: CompleteProduce) -> None:
        route = self.produce_routes.pop(done.produce_id, None)
        if route is not None and route[2] != ACKS_NONE:
            client, client_id, _acks = route
            self.net.send(self.name, client, m.ProduceReply(client_id, done.error, done.base_offset))

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        self.world.record(f"{self.name} propose ISR {list(request.new_isr)}")
        self._send_alter_partition(request)

    def wake_follower_fetches(self) -> None:
        if self.parked is not None:
            self.parked.wake()

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        self.mirror.truncate(after, fully=fully)
        if fully:
            self.world.record(f"{self.name} truncate fully, start at {after}")
        else:
            self.world.record(f"{self.name} truncate to {after} (LEO {before}->{after}): {reason}")
        if after < before:
            self.cluster.on_truncate(self, after, before)

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        self.mirror.append_records(records)

    def flush_log(self) -> None:
        self.flush()

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        self.checkpoint_hw()

    def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        """Send an ISR proposal; resend it while it is still pending after a request timeout
        (the request or its answer may be lost; a duplicate is answered INVALID_UPDATE_VERSION and
        the metadata push then settles the state)."""
        self.net.send(self.name, "controller", m.AlterPartition(request))
        if self.config.autonomous:
            self._timer(self.config.request_timeout_ms, self._retry_alter_partition, request)

    def _retry_alter_partition(self, request: AlterPartitionRequest) -> None:
        if self.partition is not None and self.partition.is_proposal_pending(request):
            self.world.record(f"{self.name} resend AlterPartition {list(request.new_isr)}")
            self._send_alter_partition(request)

    # -- messages -----------------------------------------------------------------------------
    def on_message(self, src: str, message: Any) -> None:
        if not self.alive:
            return
        handler = self._handlers.get(type(message))
        if handler is None:
            raise TypeError(f"{self.name}: unexpected message {message!r}")
        handler(self, src, message)
        self._after_step()
        self.cluster.after_broker_event(self)

    def _on_register_reply(self, src: str, msg: m.RegisterReply) -> None:
        if msg.incarnation != self.incarnation:
            return
        self.broker_epoch = msg.broker_epoch
        assert self.partition is not None
        self.partition.local_broker_epoch = msg.broker_epoch
        if self.config.autonomous:
            self.session.registered(msg.sent_ms)
        self.lost_data_on_crash = False
        self.apply_metadata(msg.metadata)

    def _on_heartbeat_reply(self, src: str, msg: m.HeartbeatReply) -> None:
        if self.config.autonomous and self.broker_epoch >= 0:
            # The sim's metadata rides on the answer: nothing to catch up on (end 0).
            self.session.heartbeat_answered(msg.sent_ms, self.world.now_ms, stale_epoch=False,
                                            metadata_end=0)
        self.apply_metadata(msg.metadata)

    def _on_metadata(self, src: str, msg: m.Metadata) -> None:
        self.apply_metadata(msg)

    def apply_metadata(self, md: m.Metadata) -> None:
        assert self.partition is not None and self.driver is not None
        if md == self.last_metadata or self.broker_epoch < 0:
            return
        self.last_metadata = md
        p = self.partition
        before = (p.leader_id, p.leader_epoch)
        self.driver.apply_metadata(md.registration, self.world.now_ms,
                                   broker_epochs=dict(md.broker_epochs), ineligible=md.fenced)
        after = (p.leader_id, p.leader_epoch)
        if after != before:
            role = "leader" if p.is_leader else f"follower of {self.cluster.name_of(p.leader_id)}"
            self.world.record(f"{self.name} becomes {role} epoch={p.leader_epoch}")
        if p.is_leader and after != before:
            self.cluster.on_become_leader(self, p.leader_epoch)
        assert self.follower is not None
        self.follower.on_metadata()

    def _on_alter_partition_reply(self, src: str, msg: m.AlterPartitionReply) -> None:
        assert self.driver is not None
        self.world.record(
            f"{self.name} AlterPartition {list(msg.request.new_isr)} -> {msg.error.name}"
        )
        self.driver.on_alter_partition_response(msg.request, msg.error, msg.registration,
                                                self.world.now_ms)

    # -- leader side: produce, fetch, epoch queries, consumers ----------------------------------
    def _on_produce(self, src: str, msg: m.Produce) -> None:
        """The broker's own produce path (``replication.produce``): idempotence, the purgatory;
        with ``transaction_verification``, KIP-890 part 1 first (``_verify_then_produce``).
        Before all of it, as the broker's handler: transactional records naming no
        transactional id are refused (``txn_verification.lacks_transactional_id``)."""
        assert self.partition is not None
        batch = self._batch(msg)
        if lacks_transactional_id(msg.transactional_id or None, [batch]):
            self.world.record(f"{self.name} refuses {msg.value}: transactional, no "
                              "transactional id")
            if msg.acks != ACKS_NONE:
                self.net.send(self.name, src, m.ProduceReply(
                    msg.produce_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1))
            return
        verify = self.config.transaction_verification and bool(msg.transactional_id)
        if verify and self.partition.is_leader:
            # In its producer's order (replication/produce_order.py): behind one still waiting
            # it waits too; one that must ask the coordinator takes a place others wait behind.
            keys = [(self.tp.topic, self.tp.partition, msg.producer_id)]
            self.next_order_place += 1
            place = self.next_order_place
            if self.produce_order.holds(keys):
                self.produce_order.enter(place, keys)
                self.held_produces[place] = (src, msg)
                self.world.record(f"{self.name} holds {msg.value} of p{msg.producer_id} behind "
                                  "its earlier produce")
                return
            guard = txn_verification.begin(self.partition, batch)
            if guard is not None:
                self.produce_order.enter(place, keys)  # nothing ahead: its turn is now
                self._verify_then_produce(src, msg, guard, place)
                return
        self._produce(src, msg, verify, None)

    def _leave_produce_order(self, place: int) -> None:
        """The produce at ``place`` is appended, refused or given up: the ones whose turn
        comes, in order, as the broker's handler (``_verify_then_produce``) takes them."""
        assert self.partition is not None
        turns = self.produce_order.leave(place)
        while turns:
            turn = turns.pop(0)
            src, msg = self.held_produces.pop(turn)
            if self.partition.is_leader:
                guard = txn_verification.begin(self.partition, self._batch(msg))
                if guard is not None:  # the one ahead did not open the transaction here
                    self._verify_then_produce(src, msg, guard, turn)
                    continue
            self._produce(src, msg, True, None)
            turns.extend(self.produce_order.leave(turn))

    def _verify_then_produce(self, src: str, msg: m.Produce, guard: VerificationGuard,
                             place: int) -> None:
        """Ask the coordinator (``VerifyTxn``) and append on its answer; an answer that never
        comes (the coordinator is down) is forgotten at the produce's timeout, unanswered, as
        the client's own timeout fires. Either way the produce then leaves its ``place`` in
        the produce order."""
        self.next_verification_id += 1
        request_id = self.next_verification_id
        self.verifications[request_id] = (src, msg, guard, place)
        self.world.record(f"{self.name} verifies p{msg.producer_id} e{msg.producer_epoch} "
                          f"{msg.value} with {m.TXN_COORDINATOR}")
        self.net.send(self.name, m.TXN_COORDINATOR, m.VerifyTxn(
            request_id, msg.transactional_id, msg.producer_id, msg.producer_epoch))
        self.world.schedule(msg.timeout_ms, self._verification_expired, self.incarnation,
                            request_id)

    def _verification_expired(self, incarnation: int, request_id: int) -> None:
        if incarnation != self.incarnation or not self.alive:
            return
        held = self.verifications.pop(request_id, None)
        if held is not None and self.partition is not None:
            txn_verification.abandon(self.partition, held[2])
            self._leave_produce_order(held[3])

    def _on_verification(self, src: str, reply: m.TxnReply) -> None:
        held = self.verifications.pop(reply.request_id, None)
        if held is None:
            return
        client, msg, guard, place = held
        assert self.partition is not None
        if reply.error is ErrorCode.NONE:
            self._produce(client, msg, True, guard)
            self._leave_produce_order(place)
            return
        error, _message = txn_verification.refuse(self.partition, guard, reply.error)
        self.world.record(f"{self.name} verification of p{msg.producer_id} "
                          f"e{msg.producer_epoch} {msg.value}: {reply.error.name} -> {error.name}")
        if msg.acks != ACKS_NONE:
            self.net.send(self.name, client, m.ProduceReply(msg.produce_id, error, -1))
        self._leave_produce_order(place)

    def _produce(self, src: str, msg: m.Produce, verify: bool,
                 guard: VerificationGuard | None) -> None:
        assert self.partition is not None and self.log is not None
        p = self.partition
        now = self.world.now_ms
        batch = self._batch(msg)
        self.next_produce_id += 1
        produce_id = self.next_produce_id
        result = produce_as_leader(
            p,
            self.log,
            batch,
            acks=msg.acks,
            produce_id=produce_id,
            now_ms=now,
            timeout_ms=msg.timeout_ms,
            settings=self.produce_settings,
            leadership_in_doubt=self.session.leadership_in_doubt(now, 0),
            stepped_down=self.steps_down(),
            verify_transactions=verify,
            verification_guard=guard,
        )
        if result.appended:
            self.cluster.on_leader_append(self, p.leader_epoch)
            self.mirror.append(p.leader_epoch, msg.value)
            self.world.record(
                f"{self.name} append {result.base_offset}:e{p.leader_epoch}:{msg.value} "
                f"acks={msg.acks}"
            )
        elif result.duplicate:
            self.world.record(
                f"{self.name} duplicate {msg.value} of offset {result.base_offset} "
                f"({'parked' if result.parked else 'answered'})"
            )
        if result.parked:
            self.produce_routes[produce_id] = (src, msg.produce_id, msg.acks)
        self.apply(result.effects)
        if not result.parked and msg.acks != ACKS_NONE:
            assert result.answer is not None
            offset = result.base_offset if result.answer is ErrorCode.NONE else -1
            self.net.send(self.name, src, m.ProduceReply(msg.produce_id, result.answer, offset))

    def _batch(self, msg: m.Produce) -> bytes:
        """The record batch a produce carries (the sim's messages carry its fields)."""
        return simple_batch([msg.value.encode()], timestamp_ms=self.world.now_ms,
                            producer_id=msg.producer_id, producer_epoch=msg.producer_epoch,
                            base_sequence=msg.sequence, is_transactional=msg.transactional)

    def _on_write_txn_marker(self, src: str, msg: m.WriteTxnMarker) -> None:
        """The broker's WriteTxnMarkers path (``replication.produce.write_marker_as_leader``):
        the control batch is answered once the HW passes it."""
        assert self.partition is not None and self.log is not None
        p = self.partition
        self.next_produce_id += 1
        produce_id = self.next_produce_id
        result = write_marker_as_leader(
            p, self.log, msg.producer_id, msg.producer_epoch, msg.committed, msg.coordinator_epoch,
            produce_id=produce_id, now_ms=self.world.now_ms, timeout_ms=msg.timeout_ms)
        label = marker_label(msg.producer_id, msg.committed)
        if result.appended:
            self.mirror.append(p.leader_epoch, label)
            self.world.record(f"{self.name} append {result.base_offset}:e{p.leader_epoch}:{label}")
        if result.parked:
            self.produce_routes[produce_id] = (src, msg.produce_id, -1)
        self.apply(result.effects)
        if not result.parked:
            assert result.answer is not None
            offset = result.base_offset if result.answer is ErrorCode.NONE else -1
            self.net.send(self.name, src, m.ProduceReply(msg.produce_id, result.answer, offset))

    def _on_metadata_request(self, src: str, msg: m.MetadataRequest) -> None:
        """Clients learn the leader from any broker, which answers from the metadata it has
        applied: a broker cut off from the controller still names itself (a stale answer that
        clients only take while they know no newer leader epoch)."""
        if self.last_metadata is not None:
            self.net.send(self.name, src, self.last_metadata)

    def _on_fetch_request(self, src: str, msg: m.FetchRequestMsg) -> None:
        assert self.parked is not None
        self.parked.receive(src, msg)

    def release_parked(self, follower_name: str) -> bool:
        """Scenario helper: answer the parked fetch of one follower now."""
        return self.parked is not None and self.parked.release(follower_name)

    def drop_parked(self, follower_name: str) -> None:
        if self.parked is not None:
            self.parked.drop(follower_name)

    def _on_epoch_query(self, src: str, msg: m.EpochQueryMsg) -> None:
        assert self.driver is not None
        error, answer = self.driver.answer_epoch_query(msg.query)
        self.net.send(
            self.name,
            src,
            m.EpochReplyMsg(msg.session, msg.query.current_leader_epoch, error, answer),
        )

    def _on_consumer_fetch(self, src: str, msg: m.ConsumerFetch) -> None:
        """A consumer reads by the broker's rule (``replication.reads``) and keeps what a
        client keeps of it (``replica_view.consumer_kept``)."""
        assert self.partition is not None and self.log is not None
        committed = msg.isolation_level == READ_COMMITTED
        read = read_for_fetch(self.partition, self.log, msg.offset, msg.current_leader_epoch,
                              FetchIsolation.of(-1, committed), self.config.fetch_max_bytes,
                              stepped_down=self.steps_down(), leader_only=msg.rack_id is None,
                              selection=self._replica_selection(msg.rack_id))
        bound = read.bound
        records: tuple[Served, ...] = ()
        next_offset = msg.offset
        if read.records is not None:
            next_offset = read.records.next_offset
            records = replica_view.consumer_kept(read, msg.offset)
            self.cluster.on_consumer_read(self, records, bound.high_watermark,
                                          bound.last_stable_offset, msg.isolation_level,
                                          (msg.offset, min(next_offset, bound.read_upto)))
        self.net.send(self.name, src, m.ConsumerFetchReply(
            msg.fetch_id, read.error, records, bound.high_watermark, bound.log_end_offset,
            bound.last_stable_offset, next_offset, bound.preferred_read_replica))

    def _replica_selection(self, rack_id: str | None) -> ReplicaSelection | None:
        """KIP-392, as the broker's ``fetch_source``: the consumer's rack and the racks of the
        brokers this one's metadata does not fence (a dead broker counts until it is fenced)."""
        racks = self.cluster.racks
        if not rack_id or not racks or self.partition is None:
            return None
        live = {b: r for b, r in racks.items() if b not in self.partition.ineligible}
        return ReplicaSelection(rack_id, live, self.world.now_ms)

    # -- follower side: the node's fetch loop, routed (``follower_side``) ----------------------
    @property
    def fetch_inflight(self) -> bool:
        return self.follower is not None and self.follower.inflight

    def send_fetch(self) -> bool:
        """Scenario step: send the next fetch (or epoch query) to the leader now; False if
        there is nothing to send (one is in flight, no leader)."""
        return self.alive and self.follower is not None and self.follower.send_now()

    def _on_epoch_reply(self, src: str, msg: m.EpochReplyMsg) -> None:
        assert self.follower is not None
        self.follower.on_epoch_reply(msg)

    def _on_fetch_reply(self, src: str, msg: m.FetchReplyMsg) -> None:
        assert self.follower is not None
        action = self.follower.on_fetch_reply(msg)
        if action is not None and action.kind is FollowerActionKind.TRUNCATE:
            self.diverging_answers += 1

    _handlers: ClassVar[dict[type, Callable[[SimBroker, str, Any], None]]] = {
        m.RegisterReply: _on_register_reply,
        m.HeartbeatReply: _on_heartbeat_reply,
        m.Metadata: _on_metadata,
        m.AlterPartitionReply: _on_alter_partition_reply,
        m.Produce: _on_produce,
        m.FetchRequestMsg: _on_fetch_request,
        m.EpochQueryMsg: _on_epoch_query,
        m.ConsumerFetch: _on_consumer_fetch,
        m.WriteTxnMarker: _on_write_txn_marker,
        m.TxnReply: _on_verification,
        m.MetadataRequest: _on_metadata_request,
        m.EpochReplyMsg: _on_epoch_reply,
        m.FetchReplyMsg: _on_fetch_reply,
    }

    # -- views for the checker and the step tables ----------------------------------------------
    @property
    def entries(self) -> list[Entry]:
        return self.mirror.entries

    def view(self) -> ReplicaView | None:
        """This replica for the shared invariants (``spec.partition``); None while down."""
        if not self.alive or self.log is None or self.partition is None:
            return None
        return replica_view.replica_view(self.name, self.partition, self.mirror)

    def snapshot(self) -> dict[str, Any]:
        """{"log": [[offset, epoch, value]...], "leo", "hw", "epochs", ...} of this replica."""
        if not self.alive or self.log is None or self.partition is None:
            return dict(replica_view.DOWN)
        return replica_view.snapshot(self.partition, self.log, self.mirror, self.cluster.name_of)
