"""The sans-I/O core against the research traces (T1, T2, T3, T9, T10, T11, T12, T15).

``FakeLog`` is a minimal ``LogView`` (offset -> epoch list plus an epoch cache) so these tests
isolate the core's rules; the simulator tests run the same core over the real storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from floodmark.constants import ACKS_ALL, ACKS_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication.election import (
    AlterPartitionRequest,
    ElectionKind,
    LeaderRecoveryState,
    PartitionRegistration,
    apply_alter_partition,
    build_change,
    validate_alter_partition,
)
from floodmark.replication.epochs import EpochCache, EpochEndOffset
from floodmark.replication.isr import CommittedIsr, PendingExpandIsr, PendingShrinkIsr
from floodmark.replication.modes import Truncation
from floodmark.replication.partition import (
    AssignEpoch,
    Effect,
    EpochQuery,
    FetchResponse,
    FollowerActionKind,
    FollowerFetch,
    HighWatermarkChanged,
    Partition,
    PartitionConfig,
    ProposeIsr,
)
from floodmark.replication.purgatory import CompleteProduce, DelayedProduce, ProducePurgatory


@dataclass
class FakeLog:
    epochs: list[int] = field(default_factory=list)
    epoch_cache: EpochCache = field(default_factory=EpochCache)
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.epochs)

    def append(self, epoch: int, count: int = 1) -> tuple[int, int]:
        base = len(self.epochs)
        self.epochs.extend([epoch] * count)
        self.epoch_cache.assign(epoch, base)
        return base, base + count - 1

    def truncate_to(self, offset: int) -> None:
        del self.epochs[offset:]
        self.epoch_cache.truncate_from_end(offset)


def reg(replicas, isr, leader, leader_epoch=0, partition_epoch=0):  # type: ignore[no-untyped-def]
    return PartitionRegistration(tuple(replicas), tuple(isr), leader, leader_epoch, partition_epoch)


def make(
    broker_id: int,
    min_isr: int = 1,
    lag_ms: int = 30_000,
    mode: Truncation = Truncation.LEADER_EPOCH,
) -> Partition:
    return Partition(PartitionConfig("t", 0, broker_id, min_isr, lag_ms, mode))


def leader_with(
    log: FakeLog, registration: PartitionRegistration, now_ms: int = 0, **kw
) -> Partition:  # type: ignore[no-untyped-def]
    p = make(registration.leader, **kw)
    for effect in p.apply_metadata(log, registration, now_ms):
        if isinstance(effect, AssignEpoch):
            log.epoch_cache.assign(effect.epoch, effect.start_offset)
    return p


def fetch(
    replica: int, offset: int, last_epoch: int, epoch: int, broker_epoch: int = -1
) -> FollowerFetch:
    return FollowerFetch(replica, offset, last_epoch, epoch, 0, broker_epoch)


def completions(effects: list[Effect] | tuple[Effect, ...]) -> list[CompleteProduce]:
    return [e for e in effects if isinstance(e, CompleteProduce)]


# -- T1 ------------------------------------------------------------------------------------------
def test_t1_acks_all_and_one_round_late_follower_hw() -> None:
    log = FakeLog()
    leader = leader_with(log, reg([1, 2], [1, 2], 1))
    assert leader.check_produce(ACKS_ALL) is ErrorCode.NONE
    base, last = log.append(0)
    effects = leader.on_leader_append(log, 7, ACKS_ALL, base, last, 0, 30_000)
    assert completions(effects) == [] and leader.high_watermark == 0
    d = leader.handle_follower_fetch(log, fetch(2, 0, -1, 0), 10)
    assert d.has_data and d.high_watermark == 0 and leader.high_watermark == 0
    # The follower appends and sets HW = min(leader HW, LEO) = 0.
    follower_log = FakeLog()
    follower = make(2)
    follower.apply_metadata(follower_log, reg([1, 2], [1, 2], 1), 10)
    response = FetchResponse(ErrorCode.NONE, 0, d.high_watermark, 0, d.log_end_offset, None, True)
    assert follower.on_fetch_response(follower_log, response).kind is FollowerActionKind.APPEND
    follower_log.append(0)
    follower.after_follower_append(follower_log, response)
    assert follower.high_watermark == 0
    # Second fetch reports LEO 1: leader HW -> 1, produce completes; the answer carries the
    # pre-update snapshot (0), so the follower learns HW 1 one fetch later.
    d2 = leader.handle_follower_fetch(log, fetch(2, 1, 0, 0), 20)
    assert leader.high_watermark == 1
    assert completions(d2.effects) == [CompleteProduce(7, ErrorCode.NONE, 0)]
    assert d2.high_watermark == 0 and not d2.has_data
    assert HighWatermarkChanged(0, 1) in d2.effects


# -- T2 ------------------------------------------------------------------------------------------
def _t2(min_isr: int) -> tuple[Partition, FakeLog]:
    log = FakeLog()
    log.append(0, 100)
    leader = leader_with(log, reg([1, 2], [1, 2], 1), 0, min_isr=min_isr)
    leader.handle_follower_fetch(log, fetch(2, 100, 0, 0), 0)
    assert leader.high_watermark == 100
    log.append(0, 10)
    leader.on_leader_append(log, 1, ACKS_LEADER, 100, 109, 1000, 30_000)
    return leader, log


def test_t2_shrink_only_after_lag_time_and_hw_waits_for_commit() -> None:
    for min_isr, hw_after in ((1, 110), (2, 100)):
        leader, log = _t2(min_isr)
        assert leader.maybe_shrink_isr(log, 15_000) == []
        assert leader.maybe_shrink_isr(log, 30_000) == []
        effects = leader.maybe_shrink_isr(log, 45_000)
        assert len(effects) == 1 and isinstance(effects[0], ProposeIsr)
        proposal = effects[0].request
        assert proposal.new_isr == (1,)
        assert isinstance(leader.role.isr_state, PendingShrinkIsr)  # type: ignore[union-attr]
        assert leader.maximal_isr == (1, 2) and leader.high_watermark == 100
        committed = reg([1, 2], [1], 1, 0, 1)
        leader.handle_alter_partition_response(log, proposal, ErrorCode.NONE, committed, 45_001)
        assert leader.isr == (1,)
        assert leader.high_watermark == hw_after


def test_t2_expansion_needs_hw_and_leso_but_no_time() -> None:
    leader, log = _t2(1)
    proposal = leader.maybe_shrink_isr(log, 45_000)[0].request  # type: ignore[union-attr]
    leader.handle_alter_partition_response(
        log, proposal, ErrorCode.NONE, reg([1, 2], [1], 1, 0, 1), 45_001
    )
    d = leader.handle_follower_fetch(log, fetch(2, 100, 0, 0), 50_000)
    assert not [e for e in d.effects if isinstance(e, ProposeIsr)]  # 100 < HW 110
    d = leader.handle_follower_fetch(log, fetch(2, 110, 0, 0), 50_010)
    proposals = [e for e in d.effects if isinstance(e, ProposeIsr)]
    assert [p.request.new_isr for p in proposals] == [(1, 2)]
    assert isinstance(leader.role.isr_state, PendingExpandIsr)  # type: ignore[union-attr]
    assert leader.maximal_isr == (1, 2)


# -- T3 ------------------------------------------------------------------------------------------
def test_t3_min_insync_replicas() -> None:
    log = FakeLog()
    log.append(0, 10)
    leader = leader_with(log, reg([1, 2, 3], [1], 1), 0, min_isr=2)
    leader.high_watermark = 10
    assert leader.check_produce(ACKS_ALL) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.check_produce(ACKS_LEADER) is ErrorCode.NONE
    base, last = log.append(0)
    effects = leader.on_leader_append(log, 1, ACKS_LEADER, base, last, 0, 30_000)
    assert completions(effects) == [CompleteProduce(1, ErrorCode.NONE, 10)]
    assert leader.high_watermark == 10  # strict min ISR: frozen, consumers do not see x


def test_t3_acks_all_times_out_when_isr_shrinks_below_min() -> None:
    log = FakeLog()
    leader = leader_with(log, reg([1, 2, 3], [1, 2], 1), 0, min_isr=2)
    base, last = log.append(0)
    leader.on_leader_append(log, 9, ACKS_ALL, base, last, 0, 1000)
    leader.apply_metadata(log, reg([1, 2, 3], [1], 1, 0, 1), 5)  # controller removed 2
    assert leader.high_watermark == 0
    assert leader.expire_produces(999) == []
    assert completions(leader.expire_produces(1000)) == [
        CompleteProduce(9, ErrorCode.REQUEST_TIMED_OUT, -1)
    ]


# -- T9 ------------------------------------------------------------------------------------------
def test_t9_new_leader_records_its_epoch_before_writing() -> None:
    log = FakeLog()
    log.append(1, 5)
    leader = leader_with(log, reg([1, 2], [1, 2], 1, 3, 3))
    assert log.epoch_cache.as_pairs() == [[1, 0], [3, 5]]
    d = leader.handle_follower_fetch(log, fetch(2, 7, 2, 3), 0)
    assert d.diverging == EpochEndOffset(1, 5)
    # Without KAFKA-7415's entry the leader cannot answer: OFFSET_OUT_OF_RANGE.
    bare = FakeLog()
    bare.append(1, 5)
    p = make(1)
    p.apply_metadata(bare, reg([1, 2], [1, 2], 1, 3, 3), 0)  # effects deliberately not applied
    assert (
        p.handle_follower_fetch(bare, fetch(2, 7, 2, 3), 0).error is ErrorCode.OFFSET_OUT_OF_RANGE
    )


def test_t9_epoch_offset_mode_does_not_record_epoch_on_election() -> None:
    log = FakeLog()
    p = make(1, mode=Truncation.EPOCH_OFFSET)
    effects = p.apply_metadata(log, reg([1, 2], [1, 2], 1, 3, 3), 0)
    assert not [e for e in effects if isinstance(e, AssignEpoch)]


# -- T10 -----------------------------------------------------------------------------------------
def test_t10_isr_expansion_waits_for_leso() -> None:
    log = FakeLog()
    log.append(0, 5)
    b = make(2)
    b.high_watermark = 3
    for effect in b.apply_metadata(log, reg([1, 2, 3, 4], [2, 3], 2, 1, 1), 0):
        if isinstance(effect, AssignEpoch):
            log.epoch_cache.assign(effect.epoch, effect.start_offset)
    assert b.high_watermark == 3  # C's LEO unknown: stuck
    d = b.handle_follower_fetch(log, fetch(4, 3, 0, 1), 10)
    assert not [e for e in d.effects if isinstance(e, ProposeIsr)]
    d = b.handle_follower_fetch(log, fetch(4, 5, 0, 1), 20)
    assert [e.request.new_isr for e in d.effects if isinstance(e, ProposeIsr)] == [(2, 3, 4)]


# -- T11 -----------------------------------------------------------------------------------------
def test_t11a_pending_expansion_counts_for_hw() -> None:
    log = FakeLog()
    leader = leader_with(log, reg([1, 2, 3], [1, 2], 1))
    d = leader.handle_follower_fetch(log, fetch(3, 0, -1, 0), 0)
    assert [e.request.new_isr for e in d.effects if isinstance(e, ProposeIsr)] == [(1, 2, 3)]
    base, last = log.append(0, 10)
    leader.on_leader_append(log, 1, ACKS_ALL, base, last, 1, 30_000)
    d = leader.handle_follower_fetch(log, fetch(2, 10, 0, 0), 2)
    assert leader.high_watermark == 0 and completions(d.effects) == []


def test_t11b_pending_shrink_and_invalid_update_version() -> None:
    log = FakeLog()
    log.append(0, 5)
    leader = leader_with(log, reg([1, 2, 3], [1, 2, 3], 1))
    leader.handle_follower_fetch(log, fetch(2, 5, 0, 0), 0)
    leader.handle_follower_fetch(log, fetch(3, 5, 0, 0), 0)
    assert leader.high_watermark == 5
    log.append(0, 5)
    leader.handle_follower_fetch(log, fetch(2, 10, 0, 0), 10)
    proposal = leader.maybe_shrink_isr(log, 40_000)[0].request  # type: ignore[union-attr]
    assert proposal.new_isr == (1, 2)
    assert leader.high_watermark == 5  # r3 still counts until the controller agrees
    leader.handle_alter_partition_response(
        log, proposal, ErrorCode.INVALID_UPDATE_VERSION, None, 40_001
    )
    assert isinstance(leader.role.isr_state, PendingShrinkIsr) and leader.high_watermark == 5  # type: ignore[union-attr]
    leader.apply_metadata(log, reg([1, 2, 3], [1, 2], 1, 0, 2), 40_002)
    assert isinstance(leader.role.isr_state, CommittedIsr) and leader.high_watermark == 10  # type: ignore[union-attr]


# -- T12 -----------------------------------------------------------------------------------------
def test_t12_epoch_fencing() -> None:
    log = FakeLog()
    log.append(5, 3)
    new_leader = leader_with(log, reg([1, 2, 3], [2, 3], 2, 6, 7))
    stale = new_leader.handle_follower_fetch(log, fetch(3, 3, 5, 5), 0)
    assert stale.error is ErrorCode.FENCED_LEADER_EPOCH
    assert new_leader.remote_log_end_offsets()[3] == -1  # no state update
    zombie = leader_with(FakeLog(), reg([1, 2, 3], [1, 2, 3], 1, 5, 5))
    assert (
        zombie.handle_follower_fetch(log, fetch(3, 3, 5, 6), 0).error
        is ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    # A zombie's ISR change is fenced by the controller.
    controller_view = reg([1, 2, 3], [2, 3], 2, 6, 7)
    request = AlterPartitionRequest(1, 1, 5, 5, (1, 3), (-1, -1))
    assert (
        validate_alter_partition(
            controller_view, request, registered_broker_epochs={1: 1}, acceptable={1, 2, 3}
        )
        is ErrorCode.FENCED_LEADER_EPOCH
    )


def test_t12_follower_stops_on_fenced_and_retries_on_unknown() -> None:
    log = FakeLog()
    f = make(3)
    f.apply_metadata(log, reg([1, 2, 3], [1, 2, 3], 1, 5, 5), 0)
    retry = f.on_fetch_response(log, FetchResponse(ErrorCode.UNKNOWN_LEADER_EPOCH, 5))
    assert retry.kind is FollowerActionKind.RETRY and retry.backoff
    assert (
        f.on_fetch_response(log, FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, 5)).kind
        is FollowerActionKind.STOP
    )
    assert f.next_fetch(log) is None
    assert (
        f.on_fetch_response(log, FetchResponse(ErrorCode.NONE, 4)).kind is FollowerActionKind.IGNORE
    )


def test_produce_to_follower_is_not_leader() -> None:
    f = make(2)
    f.apply_metadata(FakeLog(), reg([1, 2], [1, 2], 1), 0)
    assert f.check_produce(ACKS_ALL) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_losing_leadership_fails_waiting_produces() -> None:
    log = FakeLog()
    leader = leader_with(log, reg([1, 2], [1, 2], 1))
    base, last = log.append(0)
    leader.on_leader_append(log, 3, ACKS_ALL, base, last, 0, 30_000)
    effects = leader.apply_metadata(log, reg([1, 2], [2], 2, 1, 1), 1)
    assert completions(effects) == [CompleteProduce(3, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]


# -- T15 -----------------------------------------------------------------------------------------
def test_t15_stale_broker_epoch_cannot_rejoin() -> None:
    log = FakeLog()
    log.append(0, 50)
    leader = leader_with(log, reg([1, 2], [1], 1))
    leader.high_watermark = 50
    leader.broker_epochs = {1: 1, 2: 7}
    d = leader.handle_follower_fetch(log, fetch(2, 50, 0, 0, broker_epoch=7), 0)
    proposal = next(e for e in d.effects if isinstance(e, ProposeIsr)).request
    assert proposal.new_isr_broker_epochs == (-1, 7)
    controller_view = reg([1, 2], [1], 1)
    error = validate_alter_partition(
        controller_view, proposal, registered_broker_epochs={1: -1, 2: 9}, acceptable={1, 2}
    )
    assert error is ErrorCode.INELIGIBLE_REPLICA
    leader.handle_alter_partition_response(log, proposal, error, None, 1)
    assert isinstance(leader.role.isr_state, CommittedIsr) and leader.isr == (1,)  # type: ignore[union-attr]
    leader.broker_epochs = {1: 1, 2: 9}
    stale = leader.handle_follower_fetch(log, fetch(2, 50, 0, 0, broker_epoch=7), 2)
    assert stale.error is ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- follower truncation (T6 single-record variant through the core) -----------------------------
def test_follower_truncates_on_diverging_epoch() -> None:
    a = FakeLog()
    a.append(1)
    a.append(1)
    a.epoch_cache.assign(3, 2)
    a.append(3)
    leader = leader_with(a, reg([1, 2], [1, 2], 1, 3, 3))
    b = FakeLog()
    b.append(1)
    b.append(2)
    follower = make(2)
    follower.apply_metadata(b, reg([1, 2], [1, 2], 1, 3, 3), 0)
    request = follower.next_fetch(b)
    assert isinstance(request, FollowerFetch) and (
        request.fetch_offset,
        request.last_fetched_epoch,
    ) == (2, 2)
    d = leader.handle_follower_fetch(a, request, 0)
    assert d.diverging == EpochEndOffset(1, 2)
    action = follower.on_fetch_response(
        b, FetchResponse(ErrorCode.NONE, 3, d.high_watermark, 0, 3, d.diverging)
    )
    assert action.kind is FollowerActionKind.TRUNCATE and action.offset == 1


def test_high_watermark_mode_truncates_on_becoming_follower() -> None:
    log = FakeLog()
    log.append(0, 5)
    f = make(2, mode=Truncation.HIGH_WATERMARK)
    f.high_watermark = 3
    effects = f.apply_metadata(log, reg([1, 2], [1, 2], 1), 0)
    assert [getattr(e, "offset", None) for e in effects] == [3]
    g = make(2)
    g.high_watermark = 3
    assert g.apply_metadata(log, reg([1, 2], [1, 2], 1), 0) == []


# -- election and purgatory ------------------------------------------------------------------------
def test_clean_election_first_live_isr_member_in_assignment_order() -> None:
    current = reg([1, 2, 3], [1, 2, 3], 1, 4, 9)
    change = build_change(current, target_isr=(2, 3), acceptable={2, 3})
    assert change is not None
    assert change.election is ElectionKind.CLEAN
    assert (
        change.registration.leader,
        change.registration.leader_epoch,
        change.registration.partition_epoch,
    ) == (2, 5, 10)


def test_unclean_election_only_when_enabled_and_isr_never_empty() -> None:
    current = reg([1, 2], [1], 1, 0, 0)
    clean = build_change(current, target_isr=(), acceptable={2})
    assert clean is not None and clean.registration.leader == -1 and clean.registration.isr == (1,)
    unclean = build_change(
        current, target_isr=(), acceptable={2}, unclean_leader_election_enable=True
    )
    assert unclean is not None and unclean.election is ElectionKind.UNCLEAN
    assert unclean.registration.isr == (2,)
    assert unclean.registration.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_alter_partition_is_compare_and_set() -> None:
    current = reg([1, 2, 3], [1, 2], 1, 2, 5)
    ok = AlterPartitionRequest(1, 10, 2, 5, (1, 2, 3), (10, 11, 12))
    epochs = {1: 10, 2: 11, 3: 12}
    assert (
        validate_alter_partition(current, ok, registered_broker_epochs=epochs, acceptable={1, 2, 3})
        is ErrorCode.NONE
    )
    assert apply_alter_partition(current, ok).partition_epoch == 6
    old = AlterPartitionRequest(1, 10, 2, 4, (1, 2, 3), (10, 11, 12))
    assert (
        validate_alter_partition(
            current, old, registered_broker_epochs=epochs, acceptable={1, 2, 3}
        )
        is ErrorCode.INVALID_UPDATE_VERSION
    )
    stale_broker = AlterPartitionRequest(1, 9, 2, 5, (1, 2), (9, 11))
    assert (
        validate_alter_partition(
            current, stale_broker, registered_broker_epochs=epochs, acceptable={1, 2, 3}
        )
        is ErrorCode.STALE_BROKER_EPOCH
    )


def test_purgatory_outcomes() -> None:
    purgatory = ProducePurgatory()
    purgatory.add(DelayedProduce(1, 0, 1, 100))
    purgatory.add(DelayedProduce(2, 1, 2, 100))
    assert purgatory.try_complete(1, 1, 2) == [
        CompleteProduce(1, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0)
    ]
    assert purgatory.try_complete(2, 2, 2) == [CompleteProduce(2, ErrorCode.NONE, 1)]
    purgatory.add(DelayedProduce(3, 2, 3, 100))
    assert purgatory.expire(99) == []
    assert purgatory.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER) == [
        CompleteProduce(3, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
    ]
    assert len(purgatory) == 0


def test_eligible_leader_replicas_keep_the_last_replica_standing_safe() -> None:
    """KIP-966 (T14): with ELR the ISR may empty, fenced in-sync members wait in the ELR, an
    unclean shutdown removes a replica from it, and an ELR member is elected when the ISR is empty."""
    r = reg([1, 0, 2], [1, 0, 2], 1, 0, 0)
    step = build_change(r, target_isr=(1, 2), acceptable={1, 2}, min_insync_replicas=2)
    assert step is not None and step.registration.elr == ()
    step = build_change(step.registration, target_isr=(2,), acceptable={2}, min_insync_replicas=2)
    assert step is not None and (step.registration.leader, step.registration.elr) == (2, (1,))
    step = build_change(step.registration, target_isr=(), acceptable=set(), min_insync_replicas=2)
    assert step is not None
    assert (step.registration.leader, step.registration.isr, step.registration.elr) == (
        -1,
        (),
        (1, 2),
    )
    step = build_change(step.registration, acceptable={0, 1}, min_insync_replicas=2)
    assert step is not None and step.election is ElectionKind.CLEAN
    assert (step.registration.leader, step.registration.isr, step.registration.elr) == (
        1,
        (1,),
        (2,),
    )
    step = build_change(
        step.registration, acceptable={0, 1, 2}, min_insync_replicas=2, unclean_shutdown=(2,)
    )
    assert step is not None and step.registration.elr == () and step.registration.leader == 1
    # Without ELR the same history keeps b2 as the only ISR member and re-elects it.
    r2 = reg([1, 0, 2], [2], -1, 3, 3)
    again = build_change(r2, acceptable={0, 1, 2})
    assert again is not None and again.registration.leader == 2


def test_alter_partition_keeps_the_eligible_leader_replicas() -> None:
    """KIP-966: a leader's ISR shrink below min ISR puts the leavers in the ELR (the HW stops
    with them), and an expansion back to min ISR clears it, as through Kafka's one builder."""
    r = reg([1, 2, 3], [1, 2, 3], 3, 2, 5)
    shrink = AlterPartitionRequest(3, 10, 2, 5, (3,), (12,))
    shrunk = apply_alter_partition(r, shrink, min_insync_replicas=2)
    assert (shrunk.isr, shrunk.elr) == ((3,), (1, 2))
    assert apply_alter_partition(r, shrink).elr == ()  # without ELR nothing is tracked
    grow = AlterPartitionRequest(3, 10, 2, 6, (1, 3), (10, 12))
    grown = apply_alter_partition(shrunk, grow, min_insync_replicas=2)
    assert (grown.isr, grown.elr) == ((1, 3), ())
    one_more = apply_alter_partition(shrunk, grow, min_insync_replicas=3)
    assert (one_more.isr, one_more.elr) == ((1, 3), (2,))


def test_the_last_known_leader_is_elected_only_when_no_replica_is_eligible() -> None:
    """Balanced recovery: ISR and ELR empty (every eligible replica had an unclean shutdown) --
    the last leader is elected uncleanly once it is back; with an ELR member left, never."""
    r = reg([1, 2, 3], [3], 3, 4, 9)
    fenced = build_change(r, target_isr=(), acceptable=set(), min_insync_replicas=2)
    assert fenced is not None
    assert (fenced.registration.isr, fenced.registration.elr) == ((), (3,))
    assert fenced.registration.last_known_elr == (3,)
    back = build_change(fenced.registration, acceptable={3}, min_insync_replicas=2,
                        unclean_shutdown=(3,))
    assert back is not None and back.election is ElectionKind.UNCLEAN
    assert (back.registration.leader, back.registration.isr) == (3, (3,))
    assert back.registration.last_known_elr == ()
    assert back.registration.leader_recovery_state is LeaderRecoveryState.RECOVERING
    with_elr = replace(fenced.registration, elr=(2, 3))
    waits = build_change(with_elr, acceptable={3}, min_insync_replicas=2, unclean_shutdown=(3,))
    assert waits is not None and waits.registration.leader == -1
    assert (waits.registration.elr, waits.registration.last_known_elr) == ((2,), (3,))


def test_uncleanly_elected_leader_reports_recovered_with_its_first_expansion() -> None:
    """KIP-704: the controller refuses a larger ISR while RECOVERING unless the leader reports
    RECOVERED; floodmark's leader has nothing to recover and says so in its first proposal."""
    log = FakeLog()
    log.append(0, 3)
    recovering = PartitionRegistration((1, 2), (1,), 1, 1, 1, LeaderRecoveryState.RECOVERING)
    leader = leader_with(log, recovering)
    d = leader.handle_follower_fetch(log, fetch(2, 3, 1, 1), 0)
    request = next(e for e in d.effects if isinstance(e, ProposeIsr)).request
    assert request.new_isr == (1, 2) and request.leader_recovered
    error = validate_alter_partition(
        recovering, request, registered_broker_epochs={1: -1}, acceptable={1, 2}
    )
    assert error is ErrorCode.NONE
    assert (
        apply_alter_partition(recovering, request).leader_recovery_state
        is LeaderRecoveryState.RECOVERED
    )
    unreported = AlterPartitionRequest(1, -1, 1, 1, (1, 2), (-1, -1))
    assert (
        validate_alter_partition(
            recovering, unreported, registered_broker_epochs={1: -1}, acceptable={1, 2}
        )
        is ErrorCode.INVALID_REQUEST
    )


def test_expansion_response_commits_whatever_the_assignment_order() -> None:
    """The proposal lists the ISR in assignment order; the pending state must still match it."""
    log = FakeLog()
    leader = leader_with(log, reg([1, 2, 3], [2, 3], 2))
    d = leader.handle_follower_fetch(log, fetch(1, 0, -1, 0), 0)
    request = next(e for e in d.effects if isinstance(e, ProposeIsr)).request
    assert request.new_isr == (1, 2, 3)
    committed = reg([1, 2, 3], [1, 2, 3], 2, 0, 1)
    leader.handle_alter_partition_response(log, request, ErrorCode.NONE, committed, 1)
    assert isinstance(leader.role.isr_state, CommittedIsr) and leader.isr == (1, 2, 3)  # type: ignore[union-attr]


def test_t12_epoch_query_for_a_newer_epoch_than_the_leaders_own_is_unknown_leader_epoch() -> None:
    """Found by ``floodmark chaos run --faults isolate-then-kill`` (default configuration): a
    leader cut off from the controller, healed while the new leaders were dead, still believed it
    led at epoch 0. librdkafka, whose cached epoch was gone with the dead leader, followed it and
    validated its position (an epoch-1 record) with OffsetsForLeaderEpoch(current -1, epoch 1).
    The stale leader answered "no such epoch, end offset -1", which librdkafka takes for log
    truncation: the consumer was rewound to offset 0. A requester that has seen a newer epoch
    than this leader's own proves the leader is stale: UNKNOWN_LEADER_EPOCH, retriable."""
    log = FakeLog()
    log.append(0, 60)
    stale = leader_with(log, reg([1, 2, 3], [1, 2, 3], 1, 0, 0))
    for current in (-1, 0):
        error, answer = stale.handle_epoch_query(log, EpochQuery(-1, current, 1))
        assert error is ErrorCode.UNKNOWN_LEADER_EPOCH, (current, error, answer)
    error, answer = stale.handle_epoch_query(log, EpochQuery(-1, -1, 0))
    assert error is ErrorCode.NONE and answer.end_offset == 60


# -- KIP-207: a new leader's latest offset waits for its HW to reach the epoch start ------------
def test_new_leader_offsets_not_available_until_hw_reaches_epoch_start() -> None:
    log = FakeLog()
    log.append(0, 3)  # three records of epoch 0, committed under the old leader
    # Broker 2 becomes leader in epoch 1 with the HW it had as a follower (0: one fetch late).
    leader = leader_with(log, reg([1, 2], [1, 2], 2, leader_epoch=1))
    assert leader.high_watermark == 0 and leader.role is not None
    assert leader.role.leader_epoch_start_offset == 3  # type: ignore[union-attr]
    assert not leader.offsets_available  # answering 0 would move a consumer's "latest" back
    # The follower's fetch at the log end moves the HW to the epoch start: offsets again.
    leader.handle_follower_fetch(log, fetch(1, 3, 0, 1), 10)
    assert leader.high_watermark == 3 and leader.offsets_available
    # Followers (and replicas with no role) are never refused by this rule.
    follower = make(1)
    follower.apply_metadata(FakeLog(), reg([1, 2], [1, 2], 2, leader_epoch=1), 0)
    assert follower.offsets_available
