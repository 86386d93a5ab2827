"""Leader-side partition state for the single-node broker: leader epoch, HW, ISR, fencing, acks.

This issue runs every partition with RF=1, so the ISR is always {this node}. The rules live here,
small and without I/O, so the cluster issue can swap in the replication core's ``Partition``:
- fencing (replication-protocol.md §5.4): a request's CurrentLeaderEpoch older than ours is
  FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH, -1 skips the check;
- HW = min LEO over the ISR, never advancing while |ISR| < min.insync.replicas (Kafka 3.7+), and
  never decreasing;
- acks=all needs |ISR| >= min.insync.replicas before appending (NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from floodmark.broker.producer_state import ProducerStateTable
from floodmark.errors import ErrorCode

log = logging.getLogger(__name__)

NO_EPOCH = -1


@dataclass(eq=False)
class PartitionState:
    topic: str
    partition: int
    node_id: int
    leader_epoch: int
    log: Any  # floodmark.storage.log.Log
    min_insync_replicas: int = 1
    high_watermark: int = 0
    isr: tuple[int, ...] = ()
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)

    def __post_init__(self) -> None:
        if not self.isr:
            self.isr = (self.node_id,)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch == NO_EPOCH:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def check_acks(self, required_acks: int) -> ErrorCode:
        if required_acks not in (-1, 0, 1):
            return ErrorCode.INVALID_REQUIRED_ACKS
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def maybe_increment_high_watermark(self) -> bool:
        """Leader HW = min LEO over the ISR (here only our own LEO); returns True if it moved."""
        if len(self.isr) < self.min_insync_replicas:
            return False
        new_hw = self.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def acks_satisfied(self, required_offset: int) -> ErrorCode | None:
        """Completion of a waiting acks=all produce: NONE once HW passed it, else None (wait)."""
        if self.high_watermark >= required_offset:
            return ErrorCode.NONE
        return None

    def become_leader(self, leader_epoch: int) -> None:
        """Record (epoch, LEO) in the epoch cache before accepting writes (KAFKA-7415)."""
        if leader_epoch > self.leader_epoch or self.log.epoch_cache.latest_epoch < leader_epoch:
            self.log.assign_epoch(leader_epoch, self.log_end_offset)
        self.leader_epoch = leader_epoch
        log.info("partition %s became leader leader_epoch=%d log_end_offset=%d",
                 self.name, leader_epoch, self.log_end_offset)
