"""The broker's handle on one partition: the replication core's ``Partition``, its log, and the
one driver (``replication.driver``) that carries out the core's decisions.

Every replication rule is the core's (``floodmark.replication.partition``): becoming leader
(recording (epoch, LEO) in the epoch cache first, KAFKA-7415), leader-epoch fencing (KIP-320),
acks/min.insync.replicas checks (with Kafka 4's effective min ISR = min(min.insync.replicas,
replication factor)), the HW rule, and the produce purgatory. Applying its effects is the
driver's; what only the broker can do (wake waiting fetches, consumers' and followers', answer
a produce, send AlterPartition) is the ``BrokerHooks`` the broker passes in. The role always
comes from metadata: the broker calls :meth:`apply_metadata` with the partition's registration
(a single broker's own metadata names it leader of everything; a cluster member's comes from the
controller).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Protocol

from floodmark.broker.config import Configs
from floodmark.broker.partition_timers import PartitionTimers
from floodmark.errors import ErrorCode
from floodmark.replication import (
    DEFAULT_TRUNCATION,
    AlterPartitionRequest,
    CompleteProduce,
    Effect,
    EpochEndOffset,
    EpochQuery,
    LeaderState,
    Partition,
    PartitionConfig,
    PartitionRegistration,
    ReplicaDriver,
    Truncation,
    fencing,
)
from floodmark.storage import EpochCheckpointBatch, Log, LogConfig, flush_checks_needed

log = logging.getLogger(__name__)


class BrokerHooks(Protocol):
    """The broker's side of a partition's ports."""

    def wake_fetches(self, key: tuple[str, int]) -> None: ...
    def wake_replica_fetches(self, key: tuple[str, int]) -> None: ...
    def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None: ...
    def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None: ...
    def flush_log(self, key: tuple[str, int]) -> None: ...
    def checkpoint_due(self) -> None: ...


class _Ports:
    """``ReplicaPorts`` for one partition of a broker."""

    __slots__ = ("hooks", "key", "name")

    def __init__(self, hooks: BrokerHooks | None, key: tuple[str, int]) -> None:
        self.hooks = hooks
        self.key = key
        self.name = f"{key[0]}-{key[1]}"

    def high_watermark_changed(self, old: int, new: int) -> None:
        if self.hooks is not None:
            self.hooks.wake_fetches(self.key)

    def complete_produce(self, done: CompleteProduce) -> None:
        if self.hooks is not None:
            self.hooks.complete_produce(done.produce_id, done.error, done.base_offset)

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        if self.hooks is not None:
            self.hooks.propose_isr(self.key, request)

    def wake_follower_fetches(self) -> None:
        if self.hooks is not None:
            self.hooks.wake_replica_fetches(self.key)

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        log.warning("partition %s truncated%s from log_end_offset %d to %d: %s", self.name,
                    " fully" if fully else "", before, after, reason)

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        pass

    def flush_log(self) -> None:
        if self.hooks is not None:
            self.hooks.flush_log(self.key)

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        # One file holds every partition's HW: the broker writes it once for the whole tick.
        if self.hooks is not None:
            self.hooks.checkpoint_due()


@dataclass(eq=False)
class PartitionState:
    topic: str
    partition: int
    node_id: int
    log: Log
    hooks: BrokerHooks | None = None
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    checkpointed_high_watermark: int = 0
    truncation: Truncation = DEFAULT_TRUNCATION
    flush_check_interval_ms: int | None = None
    """How often the log's flush policy is checked, when it has anything to check
    (``policies.flush_checks_needed``: not with Kafka's default, the OS's writeback)."""
    checkpoint_interval_ms: int | None = None
    opened_ms: int = 0  # the periodic work's timers start here (``Partition.start_timers``)
    topic_configs: Configs = field(default_factory=dict)  # as last applied
    timers: PartitionTimers | None = None
    """The broker's deadline heap: told of every input (``apply``), which may move the core's
    next deadline."""
    core: Partition = field(init=False)
    driver: ReplicaDriver = field(init=False)

    def __post_init__(self) -> None:
        # Idempotence and open transactions survive restarts: the producer table is rebuilt
        # from the batch headers, the aborted-transaction index checked against it.
        self.driver = ReplicaDriver.open(
            PartitionConfig(
                self.topic, self.partition, self.node_id,
                min_insync_replicas=self.min_insync_replicas,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                truncation=self.truncation,
                flush_check_interval_ms=self._flush_check_ms(self.log.config),
                checkpoint_interval_ms=self.checkpoint_interval_ms),
            self.log, _Ports(self.hooks, (self.topic, self.partition)),
            checkpointed_high_watermark=self.checkpointed_high_watermark,
            now_ms=self.opened_ms)
        self.core = self.driver.partition
        log.info("partition %s opened at log_end_offset=%d high_watermark=%d", self.name,
                 self.log_end_offset, self.high_watermark)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    def _flush_check_ms(self, log_config: LogConfig) -> int | None:
        return self.flush_check_interval_ms if flush_checks_needed(log_config) else None

    def reconfigure(self, log_config: LogConfig, min_insync_replicas: int, now_ms: int) -> None:
        """New topic configs (AlterConfigs): the log's settings and the core's min ISR; they
        apply from the next append, roll, retention or cleaning pass. A flush policy that now
        needs (or no longer needs) a check timer re-arms the core's timers (aligned, so the
        other work keeps its due times)."""
        self.log.config = log_config
        self.min_insync_replicas = min_insync_replicas
        flush_check_ms = self._flush_check_ms(log_config)
        restart = flush_check_ms != self.core.config.flush_check_interval_ms
        self.core.config = replace(self.core.config, min_insync_replicas=min_insync_replicas,
                                   flush_check_interval_ms=flush_check_ms)
        if restart and self.core.schedule is not None:
            self.core.start_timers(now_ms)
            if self.timers is not None:
                self.timers.touch(self.key)

    def replace_log(self, moved: Log, now_ms: int) -> None:
        """The same log, reopened from another log directory (AlterReplicaLogDirs): every
        offset, epoch and aborted transaction is in its files, so the core's state (HW, ISR,
        producers) stays as it is."""
        assert moved.log_end_offset == self.log.log_end_offset, (moved, self.log)
        assert moved.log_start_offset == self.log.log_start_offset, (moved, self.log)
        self.log = moved
        self.driver.log = moved
        role = self.core.role
        if isinstance(role, LeaderState) and not role.epoch_start_durable:
            # A batch was making the old copy's epoch checkpoint durable (it skips a closed
            # log): this copy's, now, so the leader takes writes.
            moved.assign_epoch(role.leader_epoch, role.leader_epoch_start_offset)
            self.core.epoch_start_durable(role.leader_epoch, now_ms)

    def apply_metadata(self, registration: PartitionRegistration, now_ms: int, *,
                       broker_epochs: dict[int, int] | None = None,
                       ineligible: frozenset[int] = frozenset(),
                       epoch_writes: EpochCheckpointBatch | None = None) -> None:
        """The partition's registration from metadata decides the role. With
        ``epoch_writes``, becoming leader puts the epoch checkpoint into that batch (the
        partition takes writes once the batch made it durable)."""
        self.driver.apply_metadata(registration, now_ms, broker_epochs=broker_epochs,
                                   ineligible=ineligible, epoch_writes=epoch_writes)
        self._touch()

    def on_alter_partition_response(self, request: AlterPartitionRequest, error: ErrorCode,
                                    registration: PartitionRegistration | None,
                                    now_ms: int) -> None:
        self.driver.on_alter_partition_response(request, error, registration, now_ms)
        self._touch()

    # -- views ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def leader_epoch(self) -> int:
        return self.core.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    @property
    def isr(self) -> tuple[int, ...]:
        return self.core.isr

    @property
    def last_stable_offset(self) -> int:
        return self.core.last_stable_offset

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    # -- effects -------------------------------------------------------------------------------
    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        self.driver.apply(effects)
        self._touch()

    def _touch(self) -> None:
        if self.timers is not None:  # the input may have parked a produce (a new deadline)
            self.timers.touch(self.key)

    def truncate_to(self, offset: int, reason: str) -> None:
        self.driver.truncate_to(offset, reason)

    # -- requests ------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        return fencing.check_leader_request(self.leader_epoch, current_leader_epoch,
                                            is_leader=self.core.is_leader)

    def maybe_increment_high_watermark(self, now_ms: int = 0) -> None:
        """After an append that is not a client produce (e.g. committed offsets)."""
        self.apply(self.core.on_leader_append(self.log, -1, 0, self.log_end_offset,
                                              self.log_end_offset, now_ms, 0))

    def end_offset_for_epoch(self, current_leader_epoch: int,
                             leader_epoch: int) -> tuple[ErrorCode, EpochEndOffset]:
        return self.driver.answer_epoch_query(EpochQuery(-1, current_leader_epoch, leader_epoch))
