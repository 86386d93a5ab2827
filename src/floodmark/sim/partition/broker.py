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

from floodmark.constants import READ_COMMITTED
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
    ReplicaDriver,
    ReplicaSelection,
    read_for_fetch,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition import replica_view
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.controller_side import ControllerSide
from floodmark.sim.partition.follower_side import FollowerSide
from floodmark.sim.partition.parked_fetches import ParkedFetches
from floodmark.sim.partition.produce_side import ProduceSide
from floodmark.sim.partition.replica_view import LogMirror, Served
from floodmark.sim.world import World
from floodmark.spec import Entry, ReplicaView
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
        self.log: Log | None = None
        self.partition: Partition | None = None
        self.driver: ReplicaDriver | None = None
        self.mirror = LogMirror()  # the log as (epoch, value) entries: index = offset
        self.parked: ParkedFetches | None = None  # follower fetches parked here, routed
        self._tick_at: int | None = None  # when the node's timer fires next (``_arm_tick``)
        self.deferred: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.follower: FollowerSide | None = None  # the node's follower fetch loop, routed
        # Produce and WriteTxnMarker, routed to the broker's produce path (``produce_side``).
        self.produces: ProduceSide = ProduceSide(
            self, lambda epoch: cluster.on_leader_append(self, epoch))
        # Registration, heartbeats, metadata, ISR proposals, the lease (``controller_side``).
        self.controller_side: ControllerSide = ControllerSide(
            self, self._timer, cluster.name_of,
            lambda epoch: cluster.on_become_leader(self, epoch))
        self.diverging_answers = 0
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
        self.produces.restart()
        self.world.record(
            f"{self.name} start LEO={self.log.log_end_offset} HW={self.partition.high_watermark} "
            f"epochs={self.log.epoch_cache.as_pairs()}"
        )
        self.controller_side.start()  # registers
        self._tick_at = None
        if cfg.autonomous:
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
        self.controller_side.lost_data_on_crash = lose_unsynced  # told at re-registration
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

    # -- the controller: registration, heartbeats, metadata, the lease (``controller_side``) -----
    @property
    def broker_epoch(self) -> int:
        return self.controller_side.broker_epoch

    @property
    def session(self) -> ControllerSession:
        return self.controller_side.session

    def steps_down(self) -> bool:
        return self.controller_side.steps_down()

    # -- checkpoints: the HW, and the recovery point after the OS writes the log back ----------
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
        self.produces.complete(done)

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        self.controller_side.propose_isr(request)

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

    # -- leader side: fetch, epoch queries, consumers (produce: ``produce_side``) ---------------
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
        m.RegisterReply: lambda b, _src, msg: b.controller_side.on_register_reply(msg),
        m.HeartbeatReply: lambda b, _src, msg: b.controller_side.on_heartbeat_reply(msg),
        m.Metadata: lambda b, _src, msg: b.controller_side.apply_metadata(msg),
        m.AlterPartitionReply: lambda b, _src, msg: b.controller_side.on_alter_partition_reply(
            msg),
        m.Produce: lambda b, src, msg: b.produces.on_produce(src, msg),
        m.FetchRequestMsg: _on_fetch_request,
        m.EpochQueryMsg: _on_epoch_query,
        m.ConsumerFetch: _on_consumer_fetch,
        m.WriteTxnMarker: lambda b, src, msg: b.produces.on_write_txn_marker(src, msg),
        m.TxnReply: lambda b, src, msg: b.produces.on_verification(src, msg),
        m.MetadataRequest: lambda b, src, _msg: b.controller_side.on_metadata_request(src),
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
