"""The broker's handle on one partition: the replication core's ``Partition`` plus its log.

Every replication rule is the core's (``floodmark.replication.partition``): becoming leader
(recording (epoch, LEO) in the epoch cache first, KAFKA-7415), leader-epoch fencing (KIP-320),
acks/min.insync.replicas checks (with Kafka 4's effective min ISR = min(min.insync.replicas,
replication factor)), the HW rule, and the produce purgatory. This module only applies the
core's effects to the real log and exposes what request handlers need. In this issue a single
node leads every partition with RF=1, ISR={node}; the cluster issue feeds real registrations.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from floodmark.errors import ErrorCode
from floodmark.replication import fencing
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.epochs import EpochEndOffset
from floodmark.replication.modes import DEFAULT_TRUNCATION, Truncation
from floodmark.replication.partition import (
    AssignEpoch,
    Effect,
    EpochQuery,
    HighWatermarkChanged,
    Partition,
    PartitionConfig,
    TruncateTo,
)
from floodmark.replication.producer_state import ProducerStateTable
from floodmark.replication.purgatory import CompleteProduce

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PartitionState:
    topic: str
    partition: int
    node_id: int
    leader_epoch_at_open: int
    log: Any  # floodmark.storage.log.Log
    min_insync_replicas: int = 1
    checkpointed_high_watermark: int = 0
    replicas: tuple[int, ...] = ()
    isr_at_open: tuple[int, ...] = ()
    partition_epoch: int = 0
    truncation: Truncation = DEFAULT_TRUNCATION
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    core: Partition = field(init=False)

    def __post_init__(self) -> None:
        replicas = self.replicas or (self.node_id,)
        self.core = Partition(PartitionConfig(self.topic, self.partition, self.node_id,
                                              min_insync_replicas=self.min_insync_replicas,
                                              truncation=self.truncation))
        self.core.high_watermark = Partition.clamp_high_watermark(
            self.checkpointed_high_watermark, self.log)
        registration = PartitionRegistration(
            replicas=replicas, isr=self.isr_at_open or replicas, leader=self.node_id,
            leader_epoch=self.leader_epoch_at_open, partition_epoch=self.partition_epoch)
        self.apply(self.core.apply_metadata(self.log, registration, 0))
        log.info("partition %s leader_epoch=%d leader at log_end_offset=%d high_watermark=%d",
                 self.name, self.leader_epoch, self.log_end_offset, self.high_watermark)

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
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    # -- effects -------------------------------------------------------------------------------
    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> tuple[bool, list[CompleteProduce]]:
        """Apply the core's effects to the log; returns (HW moved, completed produces)."""
        hw_moved = False
        done: list[CompleteProduce] = []
        for effect in effects:
            if isinstance(effect, AssignEpoch):
                if self.log.epoch_cache.latest_epoch < effect.epoch:
                    self.log.assign_epoch(effect.epoch, effect.start_offset)
            elif isinstance(effect, HighWatermarkChanged):
                hw_moved = True
            elif isinstance(effect, CompleteProduce):
                done.append(effect)
            elif isinstance(effect, TruncateTo):
                log.warning("partition %s leader_epoch=%d truncating to %d: %s", self.name,
                            self.leader_epoch, effect.offset, effect.reason)
                self.truncate_to(effect.offset)
            else:  # ProposeIsr: no ISR changes with RF=1; the cluster issue sends them on
                log.info("partition %s leader_epoch=%d ignoring %r", self.name,
                         self.leader_epoch, effect)
        return hw_moved, done

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset``; the producer table forgets what the log lost."""
        self.log.truncate_to(offset)
        self.producers.rebuild(self.log.iter_batch_headers())

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.producers.clear()

    # -- requests ------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        return fencing.check_leader_request(self.leader_epoch, current_leader_epoch,
                                            is_leader=self.core.is_leader)

    def on_leader_append(self, produce_id: int, acks: int, first_offset: int, last_offset: int,
                         now_ms: int, timeout_ms: int) -> tuple[bool, list[CompleteProduce]]:
        return self.apply(self.core.on_leader_append(self.log, produce_id, acks, first_offset,
                                                     last_offset, now_ms, timeout_ms))

    def maybe_increment_high_watermark(self, now_ms: int = 0) -> bool:
        """After an append that is not a client produce (e.g. committed offsets)."""
        hw_moved, _ = self.on_leader_append(-1, 0, self.log_end_offset, self.log_end_offset,
                                            now_ms, 0)
        return hw_moved

    def expire_produces(self, now_ms: int) -> list[CompleteProduce]:
        return self.apply(self.core.expire_produces(now_ms))[1]

    def end_offset_for_epoch(self, current_leader_epoch: int,
                             leader_epoch: int) -> tuple[ErrorCode, EpochEndOffset]:
        return self.core.handle_epoch_query(
            self.log, EpochQuery(-1, current_leader_epoch, leader_epoch))
