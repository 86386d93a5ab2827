"""Hypothesis stateful test of the replication core's leader-side invariants.

One leader (broker 1) of replicas (1, 2, 3), min.insync.replicas 2, followers that fetch whole or
partial ranges, produces with acks 0/1/all, time passing (ISR shrink checks), and a controller that
accepts or rejects ISR proposals by compare-and-set. After every step:

* HW <= LEO, and the leader HW never decreases;
* every member of the controller's ISR (the election pool) really holds every offset below the HW
  (commit quorum ⊇ election pool: the maximal-ISR rule);
* the committed ISR is a subset of the maximal ISR;
* an acks=all produce completes with NONE only once the HW covers it, at most once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from floodmark.constants import ACKS_ALL
from floodmark.errors import ErrorCode
from floodmark.replication.election import (
    AlterPartitionRequest,
    PartitionRegistration,
    apply_alter_partition,
    validate_alter_partition,
)
from floodmark.replication.epochs import EpochCache
from floodmark.replication.partition import (
    AssignEpoch,
    Effect,
    FollowerFetch,
    Partition,
    PartitionConfig,
    ProposeIsr,
)
from floodmark.replication.purgatory import CompleteProduce

REPLICAS = (1, 2, 3)
MIN_ISR = 2
LAG_MS = 1000


@dataclass
class FakeLog:
    epochs: list[int] = field(default_factory=list)
    epoch_cache: EpochCache = field(default_factory=EpochCache)
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.epochs)


class CoreMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.now_ms = 0
        self.log = FakeLog()
        self.controller = PartitionRegistration(REPLICAS, REPLICAS, 1, 0, 0)
        self.leader = Partition(PartitionConfig("t", 0, 1, MIN_ISR, LAG_MS))
        self.broker_epochs = {1: 1, 2: 2, 3: 3}
        self.leader.local_broker_epoch = 1
        self.follower_leo = {2: 0, 3: 0}
        self.proposals: list[AlterPartitionRequest] = []
        self.waiting: dict[int, int] = {}  # produce id -> required offset (acks=all)
        self.completed: set[int] = set()
        self.next_id = 0
        self.last_hw = 0
        self._apply(
            self.leader.apply_metadata(
                self.log, self.controller, 0, broker_epochs=self.broker_epochs
            )
        )

    def _apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        for effect in effects:
            if isinstance(effect, AssignEpoch):
                self.log.epoch_cache.assign(effect.epoch, effect.start_offset)
            elif isinstance(effect, ProposeIsr):
                self.proposals.append(effect.request)
            elif isinstance(effect, CompleteProduce):
                assert effect.produce_id not in self.completed, "completed twice"
                self.completed.add(effect.produce_id)
                required = self.waiting.pop(effect.produce_id, None)
                if effect.error is ErrorCode.NONE and required is not None:
                    assert self.leader.high_watermark >= required
                    assert len(self.leader.maximal_isr) >= MIN_ISR

    @rule(acks=st.sampled_from([0, 1, ACKS_ALL]), count=st.integers(1, 3))
    def produce(self, acks: int, count: int) -> None:
        if self.leader.check_produce(acks) is not ErrorCode.NONE:
            assert acks == ACKS_ALL and len(self.leader.isr) < MIN_ISR
            return
        base = self.log.log_end_offset
        self.log.epochs.extend([0] * count)
        self.log.epoch_cache.assign(0, base)
        self.next_id += 1
        if acks == ACKS_ALL:
            self.waiting[self.next_id] = base + count
        self._apply(
            self.leader.on_leader_append(
                self.log, self.next_id, acks, base, base + count - 1, self.now_ms, 10_000
            )
        )

    @rule(replica=st.sampled_from([2, 3]), partial=st.booleans())
    def follower_fetch(self, replica: int, partial: bool) -> None:
        offset = self.follower_leo[replica]
        last_epoch = 0 if offset > 0 else -1
        decision = self.leader.handle_follower_fetch(
            self.log,
            FollowerFetch(replica, offset, last_epoch, 0, 0, self.broker_epochs[replica]),
            self.now_ms,
        )
        assert decision.error is ErrorCode.NONE and decision.diverging is None
        assert decision.high_watermark <= self.leader.high_watermark  # pre-update snapshot
        self._apply(decision.effects)
        if decision.has_data:
            self.follower_leo[replica] = decision.read_from + 1 if partial else decision.read_upto

    @rule(replica=st.sampled_from([2, 3]))
    def follower_catches_up(self, replica: int) -> None:
        """Two whole fetches: copy everything, then report the new LEO."""
        self.follower_fetch(replica, False)
        self.follower_fetch(replica, False)

    @rule(ms=st.sampled_from([1, 600, 1500]))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms
        self._apply(self.leader.maybe_shrink_isr(self.log, self.now_ms))
        self._apply(self.leader.expire_produces(self.now_ms))

    @precondition(lambda self: bool(self.proposals))
    @rule(accept=st.booleans())
    def controller_answers(self, accept: bool) -> None:
        request = self.proposals.pop(0)
        error = validate_alter_partition(
            self.controller,
            request,
            registered_broker_epochs=self.broker_epochs,
            acceptable=set(REPLICAS),
        )
        registration = None
        if error is ErrorCode.NONE and accept:
            self.controller = apply_alter_partition(self.controller, request)
            registration = self.controller
        elif error is ErrorCode.NONE:
            error = ErrorCode.INELIGIBLE_REPLICA  # e.g. the replica's broker was fenced meanwhile
        self._apply(
            self.leader.handle_alter_partition_response(
                self.log, request, error, registration, self.now_ms
            )
        )

    @invariant()
    def hw_bounded_and_monotonic(self) -> None:
        if not hasattr(self, "leader"):
            return
        hw = self.leader.high_watermark
        assert 0 <= hw <= self.log.log_end_offset
        assert hw >= self.last_hw
        self.last_hw = hw

    @invariant()
    def election_pool_holds_committed_data(self) -> None:
        if not hasattr(self, "leader"):
            return
        for replica in self.controller.isr:
            if replica != 1:
                assert self.follower_leo[replica] >= self.leader.high_watermark, (
                    f"controller ISR member {replica} lacks committed offsets"
                )

    @invariant()
    def committed_isr_within_maximal(self) -> None:
        if not hasattr(self, "leader"):
            return
        assert set(self.leader.isr) <= set(self.leader.maximal_isr)
        # Replication quorum superset: the election pool never outgrows the commit quorum.
        assert set(self.controller.isr) <= set(self.leader.maximal_isr)


TestCoreStateMachine = CoreMachine.TestCase
TestCoreStateMachine.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)


def test_pending_expansion_sequence_keeps_the_election_pool_complete() -> None:
    """A fixed interleaving the random search rarely reaches (KIP-497 pending expansion): r3
    leaves the ISR, catches up, its expansion is pending while r2 alone fetches new data, then the
    controller accepts r3. With the maximal-ISR and caught-up rules the HW waited for r3."""
    machine = CoreMachine()
    machine.setup()
    machine.produce(ACKS_ALL, 1)
    machine.follower_catches_up(2)
    machine.time_passes(1500)  # r3 lags: shrink proposed
    machine.controller_answers(True)
    assert machine.controller.isr == (1, 2)
    machine.follower_catches_up(3)  # LEO >= HW and >= LESO: expansion proposed
    assert machine.proposals and machine.proposals[0].new_isr == (1, 2, 3)
    machine.produce(1, 2)
    machine.follower_catches_up(2)
    assert machine.leader.high_watermark == 1  # r3 (pending) still at 1
    machine.controller_answers(True)
    machine.election_pool_holds_committed_data()
    machine.committed_isr_within_maximal()
    machine.hw_bounded_and_monotonic()
