"""The quorum's pure rules: majorities, whose log is newer, the commit index.

Each is one function so the core, the simulator's invariant checks and the tests share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from floodmark.replication import UNDEFINED_EPOCH, LogView


class QuorumLogView(LogView, Protocol):
    """The partition core's log facts (``floodmark.storage.Log`` fits) plus ``recovery_point``,
    the flushed end offset: a leader counts only what is on its disk towards a majority."""

    @property
    def recovery_point(self) -> int: ...


def majority(voter_count: int) -> int:
    """Votes (or copies) needed out of ``voter_count``: more than half."""
    return voter_count // 2 + 1


def last_log_epoch(log: QuorumLogView) -> int:
    """The epoch a voter presents as its last: the newest epoch cache entry (Kafka's
    ``lastFetchedEpoch``; an empty log has none)."""
    return log.epoch_cache.latest_epoch if log.log_end_offset > 0 else UNDEFINED_EPOCH


def log_is_up_to_date(candidate_last_epoch: int, candidate_end_offset: int,
                      voter_last_epoch: int, voter_end_offset: int) -> bool:
    """Raft's §5.4.1 check, KIP-595's wording: the candidate's (last epoch, end offset) is at
    least the voter's, compared epoch first. A voter never helps elect a leader that lacks a
    record the voter has, so a committed record (on a majority) is on every possible leader."""
    return (candidate_last_epoch, candidate_end_offset) >= (voter_last_epoch, voter_end_offset)


def majority_end_offset(end_offsets: Iterable[int]) -> int:
    """The largest offset a majority of the voters have reached: with the end offsets sorted
    from high to low, the one at position ``n // 2`` (unknown offsets count as -1)."""
    ordered: Sequence[int] = sorted(end_offsets, reverse=True)
    return ordered[len(ordered) // 2]


def leader_high_watermark(current: int, epoch_start_offset: int,
                          leader_flushed_end_offset: int | None,
                          voter_end_offsets: Iterable[int]) -> int:
    """The metadata high watermark (the commit index) after a fetch or a flush on the leader.

    The candidate is the majority end offset over the leader's *flushed* end offset and every
    other voter's last fetch offset. It commits only when it passes the leader's epoch start
    offset, that is when a majority holds a record of the leader's own epoch (Raft §5.4.2: an
    older epoch's records are committed only indirectly, or a later leader could still cut them,
    the Figure 8 case). The HW never decreases on a leader. ``leader_flushed_end_offset``
    None: a leader that removed itself from the voter set (KIP-853) commits on the other
    voters alone."""
    own = [] if leader_flushed_end_offset is None else [leader_flushed_end_offset]
    candidate = majority_end_offset([*own, *voter_end_offsets])
    if candidate > epoch_start_offset and candidate > current:
        return candidate
    return current
