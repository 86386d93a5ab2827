"""Where a follower cuts its log, in each protocol mode, and the leader's half of that rule.

Leader side:  ``leader_end_offset_for`` (OffsetsForLeaderEpoch answer) and
              ``validate_fetch`` (Fetch v12+ diverging-epoch check).
Follower side: ``truncation_on_become_follower`` (only HIGH_WATERMARK mode cuts here) and
              ``truncation_point`` (what to cut given the leader's answer, KIP-279 walk-back).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from floodmark.replication.epochs import (
    UNDEFINED,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochCache,
    EpochEndOffset,
)
from floodmark.replication.modes import Truncation


@dataclass(frozen=True, slots=True)
class TruncationPoint:
    """Cut the log so that ``offset`` becomes the LEO. ``final`` False means: cut, then ask again
    (the follower never had the epoch the leader answered with, KIP-279 multi-round walk)."""

    offset: int
    final: bool


def leader_end_offset_for(
    mode: Truncation, cache: EpochCache, requested_epoch: int, log_end_offset: int
) -> EpochEndOffset:
    """The leader's OffsetsForLeaderEpoch answer for ``requested_epoch`` in ``mode``."""
    if mode is Truncation.LEADER_EPOCH:
        return cache.end_offset_for(requested_epoch, log_end_offset)
    if mode is Truncation.EPOCH_OFFSET:
        # OffsetsForLeaderEpoch v0: no epoch in the answer.
        return EpochEndOffset(UNDEFINED_EPOCH, cache.end_offset_for_kip101(requested_epoch, log_end_offset))
    return UNDEFINED


def truncation_on_become_follower(
    mode: Truncation, log_end_offset: int, high_watermark: int
) -> int | None:
    """Offset to truncate to when a replica (re)starts as a follower, before fetching.

    Only the pre-0.11 rule cuts here (to its own, possibly stale, HW): that is the rule KIP-101
    scenario 1 shows losing acknowledged data. The epoch modes cut only on the leader's answer.
    """
    if mode is Truncation.HIGH_WATERMARK and high_watermark < log_end_offset:
        return high_watermark
    return None


def truncation_point(
    mode: Truncation,
    cache: EpochCache,
    log_end_offset: int,
    high_watermark: int,
    leader_answer: EpochEndOffset,
) -> TruncationPoint:
    """Kafka's ``getOffsetTruncationState``: the follower's cut given the leader's answer."""
    if leader_answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader could not answer: legacy fallback to the follower's own high watermark.
        return TruncationPoint(min(high_watermark, log_end_offset), final=True)
    if mode is not Truncation.LEADER_EPOCH or leader_answer.epoch == UNDEFINED_EPOCH:
        # An offset-only answer (KIP-101 as shipped): trust the offset.
        return TruncationPoint(min(leader_answer.end_offset, log_end_offset), final=True)
    mine = cache.end_offset_for(leader_answer.epoch, log_end_offset)
    if mine.end_offset == UNDEFINED_EPOCH_OFFSET:
        # No usable epoch cache on the follower: take the leader's offset.
        return TruncationPoint(min(leader_answer.end_offset, log_end_offset), final=True)
    if mine.epoch != leader_answer.epoch:
        # The follower never had the leader's epoch: cut its own later lineage and ask again
        # with its (now older) latest epoch.
        return TruncationPoint(min(mine.end_offset, log_end_offset), final=False)
    return TruncationPoint(
        min(mine.end_offset, leader_answer.end_offset, log_end_offset), final=True
    )


class FetchValidation(enum.Enum):
    OK = "ok"
    DIVERGING = "diverging"
    OFFSET_OUT_OF_RANGE = "offset-out-of-range"


@dataclass(frozen=True, slots=True)
class FetchCheck:
    result: FetchValidation
    diverging: EpochEndOffset | None = None


FETCH_OK = FetchCheck(FetchValidation.OK)
FETCH_OUT_OF_RANGE = FetchCheck(FetchValidation.OFFSET_OUT_OF_RANGE)


def validate_fetch(
    mode: Truncation,
    cache: EpochCache,
    log_start_offset: int,
    log_end_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> FetchCheck:
    """Leader side of Fetch v12+ truncation (``Partition.readRecords``).

    Only the leader-epoch mode sends ``LastFetchedEpoch``; other modes always read.
    """
    if mode is Truncation.LEADER_EPOCH and last_fetched_epoch != UNDEFINED_EPOCH:
        answer = cache.end_offset_for(last_fetched_epoch, log_end_offset)
        if answer.is_undefined or answer.epoch == UNDEFINED_EPOCH:
            return FETCH_OUT_OF_RANGE
        if fetch_offset < log_start_offset:
            return FETCH_OUT_OF_RANGE
        if answer.epoch < last_fetched_epoch or answer.end_offset < fetch_offset:
            return FetchCheck(FetchValidation.DIVERGING, answer)
        return FETCH_OK
    if fetch_offset < log_start_offset or fetch_offset > log_end_offset:
        return FETCH_OUT_OF_RANGE
    return FETCH_OK
