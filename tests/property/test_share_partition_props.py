"""The share-partition core (KIP-932) under any interleaving of fetches by several members,
acknowledgements of every kind (also wrong ones), lock timeouts, members leaving, restarts from
the stored state and retention: a record is never held by two members at once, no record is
delivered more than ``delivery.count.limit`` times, the SPSO only moves forward, and nothing
below the SPSO (nothing done) is ever delivered again."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from floodmark.broker.share_group.partition import (
    DONE,
    Acknowledgement,
    AcknowledgeType,
    OffsetReset,
    RecordState,
    ShareConfig,
    SharePartition,
)
from floodmark.errors import ErrorCode

MEMBERS = ["m0", "m1", "m2"]
LIMIT = 3
LOCK_MS = 100
CONFIG = ShareConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=LIMIT,
                     max_record_locks=12)


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(reset=st.sampled_from(list(OffsetReset)), log_start=st.integers(0, 5),
                produced=st.integers(0, 10))
    def start(self, reset: OffsetReset, log_start: int, produced: int) -> None:
        self.sp = SharePartition(CONFIG)
        self.log_start = log_start
        self.hw = log_start + produced
        self.now_ms = 0
        self.sp.initialize(reset, self.log_start, self.hw)
        self.last_start = self.sp.start_offset
        self.deliveries: dict[int, int] = {}
        self.done: set[int] = set()  # acknowledged or archived: never again
        self.held: dict[int, str] = {}  # the model's view of who holds what

    def _observe_settled(self) -> None:
        """Offsets that left the window or are done in it."""
        for offset in list(self.held):
            r = self.sp.in_flight.get(offset)
            if r is None or r.state is not RecordState.ACQUIRED:
                del self.held[offset]
        for offset, r in self.sp.in_flight.items():
            if r.state in DONE:
                self.done.add(offset)
        self.done.update(o for o in self.deliveries if o < self.sp.start_offset)

    @rule(n=st.integers(1, 6))
    def produce(self, n: int) -> None:
        self.hw += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 8))
    def fetch(self, member: str, max_records: int) -> None:
        res = self.sp.acquire(member, self.hw, max_records, self.now_ms)
        self._observe_settled()  # acquire expires locks first
        count = 0
        for run in res.acquired:
            for offset in range(run.first_offset, run.last_offset + 1):
                count += 1
                assert offset not in self.held, f"{offset} held by {self.held[offset]} too"
                assert offset not in self.done, f"{offset} was done and came back"
                assert offset >= self.sp.start_offset
                assert offset < self.hw, "delivered past the fetch bound"
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert run.delivery_count == self.deliveries[offset], (offset, run)
                assert self.deliveries[offset] <= LIMIT, f"{offset} delivered too often"
                self.held[offset] = member
        assert count <= max_records

    @rule(member=st.sampled_from(MEMBERS), kind=st.sampled_from(list(AcknowledgeType)),
          data=st.data())
    def acknowledge(self, member: str, kind: AcknowledgeType, data: st.DataObject) -> None:
        mine = sorted(o for o, m in self.held.items() if m == member)
        honest = data.draw(st.booleans())
        if honest and mine:
            first = data.draw(st.sampled_from(mine))
            last = first
            while last + 1 in self.held and self.held[last + 1] == member:
                last += 1
            last = data.draw(st.integers(first, last))
        else:
            first = data.draw(st.integers(0, self.hw + 2))
            last = first + data.draw(st.integers(0, 3))
        legit = all(self.held.get(o) == member for o in range(first, last + 1))
        res = self.sp.acknowledge(member, [Acknowledgement(first, last, (kind,))])
        if legit:
            assert res.error is ErrorCode.NONE, res
        else:
            assert res.error is ErrorCode.INVALID_RECORD_STATE, res
            assert not res.changed
        self._observe_settled()

    @rule(data=st.data())
    def skip_aborted(self, data: st.DataObject) -> None:
        """A read_committed leader archives control and aborted records before acquiring."""
        offsets = data.draw(st.sets(st.integers(0, self.hw + 3), max_size=4))
        self.sp.skip(offsets)
        for o in offsets:
            r = self.sp.in_flight.get(o)
            if r is not None and r.state is RecordState.ARCHIVED and o not in self.held:
                self.done.add(o)
        self._observe_settled()

    @rule(ms=st.integers(1, 2 * LOCK_MS))
    def wait(self, ms: int) -> None:
        self.now_ms += ms
        self.sp.expire_locks(self.now_ms)
        self._observe_settled()

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self.sp.release_member(member)
        self._observe_settled()

    @rule()
    def restart(self) -> None:
        """The leader restarts (or another takes over) from the stored state: locks are lost."""
        stored = self.sp.snapshot()
        self.sp = SharePartition(CONFIG)
        self.sp.restore(stored)
        self._observe_settled()
        assert not self.held

    @rule(n=st.integers(1, 5))
    def retention(self, n: int) -> None:
        self.log_start = min(self.hw, self.log_start + n)
        self.sp.log_start_moved(self.log_start)
        self._observe_settled()

    @invariant()
    def spso_forward_only(self) -> None:
        assert self.sp.start_offset >= self.last_start
        self.last_start = self.sp.start_offset

    @invariant()
    def window_is_whole(self) -> None:
        sp = self.sp
        assert set(sp.in_flight) == set(range(sp.start_offset, sp.end_offset))
        assert sp.start_offset == sp.end_offset or sp.in_flight[sp.start_offset].state not in DONE
        for r in sp.in_flight.values():
            assert (r.state is RecordState.ACQUIRED) == (r.member_id is not None)
            assert (r.state is RecordState.ACQUIRED) == (r.lock_deadline_ms is not None)
            assert r.delivery_count <= LIMIT
            if r.state is RecordState.AVAILABLE:
                assert r.delivery_count < LIMIT

    @invariant()
    def snapshot_round_trips(self) -> None:
        if not self.sp.initialized:
            return
        copy = SharePartition(CONFIG)
        copy.restore(self.sp.snapshot())
        assert copy.snapshot() == self.sp.snapshot() or any(
            r.state is RecordState.ACQUIRED for r in self.sp.in_flight.values())


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)


def test_lock_timeout_redelivers_then_archives_at_the_limit() -> None:
    sp = SharePartition(ShareConfig(record_lock_duration_ms=10, delivery_count_limit=2))
    sp.initialize(OffsetReset.EARLIEST, 0, 1)
    assert sp.acquire("a", 1, 10, 0).acquired[0].delivery_count == 1
    assert sp.acquire("b", 1, 10, 5).acquired == ()  # still locked by a
    assert sp.acquire("b", 1, 10, 10).acquired[0].delivery_count == 2  # a's lock expired
    assert sp.expire_locks(20)
    assert sp.start_offset == 1 and sp.acquire("a", 1, 10, 30).acquired == ()


def test_release_redelivers_and_accept_moves_the_start() -> None:
    sp = SharePartition()
    sp.initialize(OffsetReset.EARLIEST, 0, 3)
    assert [(a.first_offset, a.last_offset) for a in sp.acquire("a", 3, 10, 0).acquired] == \
        [(0, 2)]
    res = sp.acknowledge("a", [Acknowledgement(0, 2, (AcknowledgeType.ACCEPT,
                                                      AcknowledgeType.RELEASE,
                                                      AcknowledgeType.ACCEPT))])
    assert res.error is ErrorCode.NONE
    assert sp.start_offset == 1
    again = sp.acquire("b", 3, 10, 1).acquired
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in again] == [(1, 1, 2)]


def test_latest_starts_at_the_fetch_bound() -> None:
    sp = SharePartition()
    sp.initialize(OffsetReset.LATEST, 2, 7)
    assert sp.start_offset == 7 and sp.acquire("a", 7, 10, 0).acquired == ()
    assert sp.acquire("a", 9, 10, 0).acquired[0].first_offset == 7
