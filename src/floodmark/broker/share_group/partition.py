"""One share partition (KIP-932): which records of one topic-partition a share group has
handed out, to whom, how often, and which are done. A sans-I/O core: no asyncio, files or
clocks; every input carries ``now_ms``; every call answers what changed, and the driver stores
the state (``snapshot``) before it answers a client whenever ``changed`` is set.

The window of a share partition runs from the **share-partition start offset** (SPSO, the first
record not yet done) to the **end offset** (one past the last record ever acquired; Kafka's
SPEO is that minus one). Every record in the window has a state:

    ============  =========================================================================
    AVAILABLE     may be acquired (again): never locked since it was released or timed out
    ACQUIRED      locked by one member until ``lock_deadline_ms`` (record.lock.duration.ms)
    ACKNOWLEDGED  accepted by the member that held it: done
    ARCHIVED      rejected, a gap, or delivered ``delivery.count.limit`` times: done
    ============  =========================================================================

Records at or past the end offset that the log holds up to the fetch bound (the high watermark,
or the last stable offset for ``read_committed``) are AVAILABLE with no delivery yet; the core
does not keep them. The SPSO moves forward over done records only, so a done record is never
delivered again, and a record is acquired only while AVAILABLE, so no two members ever hold it.

Acquisition counts a delivery; a record whose count reaches the limit is archived when it comes
back (released, or its lock expired) instead of becoming AVAILABLE, so no record is delivered more
than ``delivery_count_limit`` times.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from floodmark.config_rules import BY_DURATION, iso_duration_ms
from floodmark.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (also the ``delivery_state`` of the persisted batches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge ``acknowledge_types`` (KIP-932)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class OffsetReset(enum.Enum):
    """``share.auto.offset.reset`` (a group config; Kafka's default is latest):
    ``by_duration:<ISO-8601 duration>`` starts at the first record no older than that."""

    LATEST = "latest"
    EARLIEST = "earliest"
    BY_DURATION = "by_duration"


def parse_reset(text: str) -> tuple[OffsetReset, int]:
    """A ``share.auto.offset.reset`` value (checked by ``config_rules.ShareAutoOffsetReset``)
    -> its strategy and, for by_duration, the duration in ms."""
    if text.startswith(BY_DURATION):
        return OffsetReset.BY_DURATION, iso_duration_ms(text[len(BY_DURATION):]) or 0
    return OffsetReset(text), 0


DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


@dataclass(frozen=True, slots=True)
class ShareConfig:
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks: window bound

    def __post_init__(self) -> None:
        assert self.record_lock_duration_ms > 0, self
        assert self.delivery_count_limit >= 2, self  # Kafka's bounds: 2 up to the broker's max
        assert self.max_record_locks > 0, self


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of records with one state and delivery count (Kafka's ``PersisterStateBatch``)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareState:
    """What is stored of a share partition: an ACQUIRED record is stored as AVAILABLE (a lock
    does not outlive its leader) with its delivery count, so a restart re-delivers it but never
    beyond the limit."""

    start_offset: int
    end_offset: int
    batches: tuple[StateBatch, ...] = ()
    state_epoch: int = 0  # bumped by AlterShareGroupOffsets/DeleteShareGroupOffsets


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of acquired offsets with one delivery count (ShareFetch's ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    first_offset: int
    last_offset: int
    # One type for the whole range, or one per offset (KIP-932 allows both).
    types: tuple[AcknowledgeType, ...]

    def type_of(self, offset: int) -> AcknowledgeType:
        if len(self.types) == 1:
            return self.types[0]
        return self.types[offset - self.first_offset]


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AcquireResult:
    acquired: tuple[Acquired, ...]
    changed: bool


@dataclass(frozen=True, slots=True)
class AcknowledgeResult:
    error: ErrorCode
    changed: bool
    message: str | None = None


@dataclass
class SharePartition:
    """A share partition's state; ``initialized`` is False until the first fetch placed the
    SPSO (``initialize``) or a stored state was loaded (``restore``)."""

    config: ShareConfig = field(default_factory=ShareConfig)
    start_offset: int = -1
    end_offset: int = -1
    state_epoch: int = 0
    in_flight: dict[int, InFlight] = field(default_factory=dict)

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    # -- starting -------------------------------------------------------------------------
    def initialize(self, reset: OffsetReset, log_start_offset: int, fetch_bound: int,
                   by_duration_offset: int | None = None) -> None:
        """Place the SPSO by ``share.auto.offset.reset``: the log start (earliest), the fetch
        bound, the high watermark or the last stable offset (latest), or for by_duration the
        first offset with a timestamp at or after now minus the duration
        (``by_duration_offset``; None: no such record, the fetch bound, as Kafka)."""
        assert 0 <= log_start_offset <= fetch_bound, (log_start_offset, fetch_bound)
        offset = log_start_offset if reset is OffsetReset.EARLIEST else fetch_bound
        if reset is OffsetReset.BY_DURATION and by_duration_offset is not None:
            offset = min(max(by_duration_offset, log_start_offset), fetch_bound)
        self.start_offset = self.end_offset = offset
        self.in_flight.clear()

    def restore(self, state: ShareState) -> None:
        """Load a stored state: every ACQUIRED record comes back AVAILABLE, or ARCHIVED when it
        had used up its deliveries."""
        assert state.start_offset <= state.end_offset, state
        self.start_offset, self.end_offset = state.start_offset, state.end_offset
        self.state_epoch = state.state_epoch
        self.in_flight.clear()
        for b in state.batches:
            for offset in range(max(b.first_offset, state.start_offset),
                                min(b.last_offset + 1, state.end_offset)):
                rs = b.state
                if rs is RecordState.ACQUIRED:
                    rs = self._came_back(b.delivery_count)
                self.in_flight[offset] = InFlight(rs, b.delivery_count)
        for offset in range(state.start_offset, state.end_offset):
            # a record in the window the stored batches do not name was never delivered
            self.in_flight.setdefault(offset, InFlight(RecordState.AVAILABLE, 0))
        self._advance()

    def reset_to(self, start_offset: int) -> None:
        """AlterShareGroupOffsets (the group has no members): start over at ``start_offset``."""
        assert start_offset >= 0, start_offset
        self.start_offset = self.end_offset = start_offset
        self.in_flight.clear()
        self.state_epoch += 1

    def snapshot(self) -> ShareState:
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            r = self.in_flight[offset]
            rs = self._came_back(r.delivery_count) if r.state is RecordState.ACQUIRED \
                else r.state
            last = batches[-1] if batches else None
            if last is not None and last.last_offset == offset - 1 and last.state is rs \
                    and last.delivery_count == r.delivery_count:
                batches[-1] = StateBatch(last.first_offset, offset, rs, r.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, rs, r.delivery_count))
        return ShareState(self.start_offset, self.end_offset, tuple(batches), self.state_epoch)

    # -- the log moves under the share partition --------------------------------------------
    def log_start_moved(self, log_start_offset: int) -> bool:
        """Retention or DeleteRecords removed records below ``log_start_offset``: they can no
        longer be delivered; the window starts there at the earliest."""
        if not self.initialized or log_start_offset <= self.start_offset:
            return False
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self.in_flight[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance()
        return True

    # -- acquiring ------------------------------------------------------------------------
    def skip(self, offsets: Iterable[int]) -> bool:
        """Offsets that must never be delivered (a transaction's control record, a record of
        an aborted transaction, for ``read_committed``): ARCHIVED if they are AVAILABLE in
        the window or not acquired yet (the window grows over them, at most
        ``max_record_locks`` past the SPSO)."""
        changed = False
        window_end = self.start_offset + self.config.max_record_locks
        for offset in sorted(set(offsets)):
            if offset < self.start_offset or offset >= window_end:
                continue
            while self.end_offset < offset:  # records before it: never delivered yet
                self.in_flight[self.end_offset] = InFlight(RecordState.AVAILABLE, 0)
                self.end_offset += 1
            if offset == self.end_offset:
                self.in_flight[offset] = InFlight(RecordState.ARCHIVED, 0)
                self.end_offset += 1
                changed = True
            elif self.in_flight[offset].state is RecordState.AVAILABLE:
                self._settle(self.in_flight[offset], RecordState.ARCHIVED)
                changed = True
        self._advance()
        return changed

    def first_acquirable(self, fetch_bound: int) -> int | None:
        """The lowest offset ``acquire`` could hand out now (where the leader reads from), or
        None when there is none below ``fetch_bound`` (``expire_locks`` first)."""
        for offset in range(self.start_offset, min(self.end_offset, fetch_bound)):
            if self.in_flight[offset].state is RecordState.AVAILABLE:
                return offset
        window_end = self.start_offset + self.config.max_record_locks
        if self.end_offset < min(fetch_bound, window_end):
            return self.end_offset
        return None

    def acquire(self, member_id: str, fetch_bound: int, max_records: int,
                now_ms: int) -> AcquireResult:
        """Lock up to ``max_records`` records for ``member_id``: AVAILABLE records in the window
        first (lowest offset first), then records past the end offset below ``fetch_bound``,
        never more than ``max_record_locks`` past the SPSO."""
        assert self.initialized, "initialize or restore first"
        assert member_id, "a member acquires"
        assert max_records > 0, max_records
        self.expire_locks(now_ms)
        deadline_ms = now_ms + self.config.record_lock_duration_ms
        taken: list[int] = []
        for offset in range(self.start_offset, min(self.end_offset, fetch_bound)):
            if len(taken) >= max_records:
                break
            r = self.in_flight[offset]
            if r.state is RecordState.AVAILABLE:
                r.state, r.member_id, r.lock_deadline_ms = (
                    RecordState.ACQUIRED, member_id, deadline_ms)
                r.delivery_count += 1
                taken.append(offset)
        window_end = self.start_offset + self.config.max_record_locks
        while len(taken) < max_records and self.end_offset < min(fetch_bound, window_end):
            self.in_flight[self.end_offset] = InFlight(RecordState.ACQUIRED, 1, member_id,
                                                       deadline_ms)
            taken.append(self.end_offset)
            self.end_offset += 1
        return AcquireResult(self._runs(taken), bool(taken))

    def _runs(self, offsets: Iterable[int]) -> tuple[Acquired, ...]:
        out: list[Acquired] = []
        for offset in sorted(offsets):
            count = self.in_flight[offset].delivery_count
            last = out[-1] if out else None
            if last is not None and last.last_offset == offset - 1 \
                    and last.delivery_count == count:
                out[-1] = Acquired(last.first_offset, offset, count)
            else:
                out.append(Acquired(offset, offset, count))
        return tuple(out)

    # -- acknowledging --------------------------------------------------------------------
    def acknowledge(self, member_id: str, acks: Iterable[Acknowledgement]) -> AcknowledgeResult:
        """Apply a member's acknowledgements, all or none: every offset must be ACQUIRED by
        ``member_id`` (else INVALID_RECORD_STATE, nothing changes)."""
        batches = list(acks)
        for a in batches:
            if a.last_offset < a.first_offset or not a.types or (
                    len(a.types) != 1 and len(a.types) != a.last_offset - a.first_offset + 1):
                return AcknowledgeResult(ErrorCode.INVALID_REQUEST, False,
                                         f"bad acknowledgement batch {a}")
            for offset in range(a.first_offset, a.last_offset + 1):
                r = self.in_flight.get(offset)
                if r is None or r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                    return AcknowledgeResult(
                        ErrorCode.INVALID_RECORD_STATE, False,
                        f"offset {offset} is not acquired by member {member_id}")
        for a in batches:
            for offset in range(a.first_offset, a.last_offset + 1):
                kind = a.type_of(offset)
                r = self.in_flight[offset]
                if kind is AcknowledgeType.ACCEPT:
                    self._settle(r, RecordState.ACKNOWLEDGED)
                elif kind is AcknowledgeType.RELEASE:
                    self._release(r)
                else:  # REJECT, GAP
                    self._settle(r, RecordState.ARCHIVED)
        self._advance()
        return AcknowledgeResult(ErrorCode.NONE, bool(batches))

    def release_member(self, member_id: str) -> bool:
        """The member left or its share session closed: what it holds comes back."""
        released = False
        for r in self.in_flight.values():
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
                released = True
        self._advance()
        return released

    # -- timers ---------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.in_flight.values()
                     if r.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def expire_locks(self, now_ms: int) -> bool:
        """Locks whose time passed: their records come back (or are archived at the limit)."""
        expired = False
        for r in self.in_flight.values():
            if r.lock_deadline_ms is not None and r.lock_deadline_ms <= now_ms:
                self._release(r)
                expired = True
        self._advance()
        return expired

    # -- views ----------------------------------------------------------------------------
    def acquired_by(self, member_id: str) -> Iterator[int]:
        return (o for o, r in self.in_flight.items()
                if r.state is RecordState.ACQUIRED and r.member_id == member_id)

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset

    # -- rules ----------------------------------------------------------------------------
    def _came_back(self, delivery_count: int) -> RecordState:
        """The state of a record whose lock ended (released, expired, or lost in a restart)."""
        return (RecordState.ARCHIVED if delivery_count >= self.config.delivery_count_limit
                else RecordState.AVAILABLE)

    def _release(self, r: InFlight) -> None:
        self._settle(r, self._came_back(r.delivery_count))

    @staticmethod
    def _settle(r: InFlight, state: RecordState) -> None:
        r.state, r.member_id, r.lock_deadline_ms = state, None, None

    def _advance(self) -> None:
        """The SPSO moves over done records (and only forward)."""
        while self.start_offset < self.end_offset and \
                self.in_flight[self.start_offset].state in DONE:
            del self.in_flight[self.start_offset]
            self.start_offset += 1
