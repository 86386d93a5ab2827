"""The leader epoch cache: leader epoch -> first offset written in that epoch.

Pure data and rules (Kafka's ``LeaderEpochFileCache``); storage persists it as
``leader-epoch-checkpoint``. Both epochs and start offsets are strictly increasing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An answer to "where does epoch E end?" (OffsetsForLeaderEpoch / DivergingEpoch)."""

    epoch: int
    end_offset: int

    @property
    def is_undefined(self) -> bool:
        return self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class EpochCache:
    """Sorted epoch -> start offset entries with Kafka's update rules. No I/O."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[EpochEntry | tuple[int, int]] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for item in entries:
            entry = item if isinstance(item, EpochEntry) else EpochEntry(item[0], item[1])
            self._check_appendable(entry)
            self._entries.append(entry)

    def _check_appendable(self, entry: EpochEntry) -> None:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"epoch entry must be non-negative, got {entry}")
        if self._entries:
            last = self._entries[-1]
            if entry.epoch <= last.epoch or entry.start_offset < last.start_offset:
                raise ValueError(f"epoch entries not increasing: {last} then {entry}")

    # -- reading ---------------------------------------------------------------------------
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def as_pairs(self) -> list[list[int]]:
        return [[e.epoch, e.start_offset] for e in self._entries]

    def copy(self) -> EpochCache:
        clone = EpochCache()
        clone._entries = list(self._entries)
        return clone

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochCache) and self._entries == other._entries

    def __hash__(self) -> int:
        return hash(tuple(self._entries))

    def __repr__(self) -> str:
        inner = ", ".join(f"{e.epoch}:{e.start_offset}" for e in self._entries)
        return f"EpochCache({{{inner}}})"

    @property
    def latest_epoch(self) -> int:
        """Epoch of the newest entry, or UNDEFINED_EPOCH (-1) when empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch whose range contains ``offset`` (largest entry starting at or before it)."""
        found = UNDEFINED_EPOCH
        for entry in self._entries:
            if entry.start_offset <= offset:
                found = entry.epoch
            else:
                break
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's ``endOffsetFor`` (KIP-279 + KAFKA-7415 semantics).

        Returns (epoch, end offset) where the epoch is the largest cached epoch <= the requested
        one and the end offset is the start of the next higher epoch, or the LEO for the latest.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            # Nothing to answer with: an undefined request, or no cache at all.
            return UNDEFINED
        if requested_epoch == self._entries[-1].epoch:
            # The requested epoch is the current one: it ends at the log end.
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher: EpochEntry | None = None
        floor: EpochEntry | None = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                higher = entry
                break
            floor = entry
        if higher is None:
            # The requested epoch is above everything we know: we cannot say where it ends.
            return UNDEFINED
        if floor is None:
            # The requested epoch precedes every cached epoch (KAFKA-7415): answer with the
            # requested epoch itself, ending where our first known epoch starts.
            return EpochEndOffset(requested_epoch, higher.start_offset)
        # We never had exactly this epoch, or it is an older one: the largest epoch we had at
        # or below it, ending where the next epoch we know started.
        return EpochEndOffset(floor.epoch, higher.start_offset)

    def end_offset_for_kip101(self, requested_epoch: int, log_end_offset: int) -> int:
        """The end-offset rule of KIP-101 as first shipped (0.11): an offset only.

        LEO if the epoch is the latest; else the start of the first epoch above it; undefined
        when the epoch is above everything or below the first cached epoch.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return log_end_offset
        if requested_epoch < self._entries[0].epoch:
            return UNDEFINED_EPOCH_OFFSET
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                return entry.start_offset
        return UNDEFINED_EPOCH_OFFSET

    # -- updating --------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Returns True when the cache changed.

        No-op when the epoch is already the latest and starts at or before this offset. Otherwise
        every entry from the end with epoch >= ``epoch`` or start >= ``start_offset`` is removed
        first (an epoch that never got a record is replaced), then the entry is appended.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was truncated to ``end_offset``: drop entries starting at or after it."""
        changed = False
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
            changed = True
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start advanced to ``start_offset``: drop entries starting at or before it and
        re-insert the last dropped epoch as starting at ``start_offset``."""
        removed: EpochEntry | None = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        if removed is None:
            return False
        self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
        return True

    def clear(self) -> None:
        self._entries.clear()
