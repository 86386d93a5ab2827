"""Unit tests of the model checker's transitions (over the running code) and its invariants."""

from __future__ import annotations

import pytest

from floodmark.controller.image import BrokerRegistration
from floodmark.mc.invariants import (
    check_transition,
    epochs_monotonic,
    leader_hw_monotonic,
    log_matching,
    no_committed_record_lost,
    one_leader_per_epoch,
    replication_quorum_superset,
    single_record_per_committed_offset,
    strong_isr,
    truncation_progress,
)
from floodmark.mc.model import Action, Model, ModelConfig, ModelState, StateView
from floodmark.mc.pieces import ControllerValue, ReplicaValue
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.isr import CommittedIsr, PendingShrinkIsr
from floodmark.replication.modes import Truncation
from floodmark.replication.partition import FetchPhase, FollowerState, LeaderState

A, B, C = 0, 1, 2
LE = Truncation.LEADER_EPOCH


def offered(model: Model, state: ModelState) -> list[tuple[Action, ModelState]]:
    return list(model.successors(state))


def step(model: Model, state: ModelState, kind: str, replica: int, arg: int | None = None
         ) -> ModelState:
    """Take the successor labelled (kind, replica[, arg]); for ApplyMetadata without ``arg`` the
    newest published change. Fails if the model does not offer it."""
    found = [(a, s) for a, s in offered(model, state)
             if a.kind == kind and a.replica == replica and (arg is None or a.arg == arg)]
    assert found, f"{kind}({replica}) not enabled; enabled: {[a for a, _ in offered(model, state)]}"
    return max(found, key=lambda pair: pair[0].arg)[1]


def kinds(model: Model, state: ModelState) -> set[tuple[str, int]]:
    return {(a.kind, a.replica) for a, _ in offered(model, state)}


def rep(model: Model, state: ModelState, r: int) -> ReplicaValue:
    return model.view(state).replicas[r]


def leader_a_follower_b(mode: Truncation, **kw: object) -> tuple[Model, ModelState]:
    """A leads epoch 0, B follows it; both have applied the topic's creation."""
    model = Model(ModelConfig(mode, **kw))  # type: ignore[arg-type]
    s = model.initial_state()
    s = step(model, s, "ApplyMetadata", A)
    s = step(model, s, "ApplyMetadata", B)
    return model, s


def test_initial_state_is_what_the_controller_logic_creates() -> None:
    model = Model(ModelConfig(LE, replicas=3))
    view = model.view(model.initial_state())
    reg = view.controller.registration
    assert (reg.leader, reg.leader_epoch, reg.isr, reg.replicas) == (A, 0, (A, B, C), (A, B, C))
    assert all(r.role is None and r.log == () for r in view.replicas)


@pytest.mark.parametrize("mode", list(Truncation))
def test_follower_learns_hw_one_fetch_late(mode: Truncation) -> None:
    model, s = leader_a_follower_b(mode)
    s = step(model, s, "LeaderWrite", A, 0)
    assert rep(model, s, A).hw == 0  # B has not fetched yet: HW cannot move
    s = step(model, s, "Fetch", B, A)  # B gets r0; the leader learns B's LEO was 0
    assert rep(model, s, B).log == ((0, 0),)
    assert (rep(model, s, A).hw, rep(model, s, B).hw) == (0, 0)
    s = step(model, s, "Fetch", B, A)  # fetch offset 1 -> leader HW 1, response has the old HW
    assert (rep(model, s, A).hw, rep(model, s, B).hw) == (1, 0)
    assert s.committed == ((0, 0, 0),)
    s = step(model, s, "Fetch", B, A)  # one fetch later B learns it
    assert rep(model, s, B).hw == 1
    assert ("Fetch", B) not in kinds(model, s)  # nothing left to learn


def test_new_leader_records_epoch_only_in_leader_epoch_mode() -> None:
    for mode, expected in (
        (LE, ((0, 0),)),
        (Truncation.EPOCH_OFFSET, ()),
        (Truncation.HIGH_WATERMARK, ()),
    ):
        model, s = leader_a_follower_b(mode)
        assert rep(model, s, A).cache == expected, mode


def test_high_watermark_mode_truncates_to_own_hw_on_becoming_follower() -> None:
    model, s = leader_a_follower_b(Truncation.HIGH_WATERMARK)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "Fetch", B, A)
    assert rep(model, s, B).log == ((0, 0),) and rep(model, s, B).hw == 0
    s = step(model, s, "MoveLeadership", B)  # epoch 1
    s = step(model, s, "MoveLeadership", A)  # epoch 2
    s = step(model, s, "ApplyMetadata", B)  # B follows A in epoch 2: cut to its HW 0
    assert rep(model, s, B).log == ()
    assert isinstance(rep(model, s, B).role, FollowerState)


def test_epoch_fencing_rejects_fetch_across_epochs() -> None:
    model, s = leader_a_follower_b(LE)
    s = step(model, s, "MoveLeadership", B)
    s = step(model, s, "MoveLeadership", A)
    s = step(model, s, "ApplyMetadata", B)  # B follows A in epoch 2; A still leads epoch 0
    assert ("Fetch", B) not in kinds(model, s)  # UNKNOWN_LEADER_EPOCH: B retries
    unfenced = Model(ModelConfig(LE, fencing=False))
    u = unfenced.initial_state()
    for r in (A, B):
        u = step(unfenced, u, "ApplyMetadata", r)
    u = step(unfenced, step(unfenced, u, "MoveLeadership", B), "MoveLeadership", A)
    u = step(unfenced, u, "ApplyMetadata", B)
    u = step(unfenced, u, "LeaderWrite", A, 0)
    assert ("Fetch", B) in kinds(unfenced, u)  # no epoch in the request: A answers
    s = step(model, s, "ApplyMetadata", A)
    assert ("Fetch", B) in kinds(model, s)


def test_a_lost_fetch_answer_updates_only_the_leader() -> None:
    model, s = leader_a_follower_b(LE)
    s = step(model, s, "LeaderWrite", A, 0)
    lost = step(model, s, "FetchResponseLost", B, A)
    assert rep(model, lost, B) == rep(model, s, B)  # B got nothing
    assert [f.log_end_offset for f in rep(model, lost, A).followers] == [0]  # A recorded it
    # An answer that changes nothing for the follower is not "lost" separately.
    s = step(model, s, "Fetch", B, A)
    assert ("FetchResponseLost", B) not in kinds(model, s) and ("Fetch", B) in kinds(model, s)


def test_unclean_restart_loses_suffix_and_registers_a_new_incarnation() -> None:
    model, s = leader_a_follower_b(LE, unclean_restarts=1)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "UncleanRestart", A, 0)
    view = model.view(s)
    assert view.replicas[A].log == () and view.replicas[A].role is None
    reg = view.controller.registration
    assert reg.leader == B and reg.leader_epoch == 1 and A not in reg.isr
    assert s.restarts_left == 0
    assert ("UncleanRestart", A) not in kinds(model, s)


def test_controller_respects_its_budget_of_changes() -> None:
    model = Model(ModelConfig(LE, replicas=2, max_epoch=2))
    s = model.initial_state()
    assert ("Fence", A) in kinds(model, s) and ("MoveLeadership", B) in kinds(model, s)
    s = step(model, s, "Fence", B)
    assert model.view(s).controller.registration.isr == (A,)
    assert not {k for k, _ in kinds(model, s)} & {"Fence", "Unfence", "MoveLeadership"}


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        ModelConfig(LE, replicas=0)
    with pytest.raises(ValueError):
        ModelConfig(LE, log_size=0)
    assert ModelConfig(Truncation.EPOCH_OFFSET).fenced  # the broker fences in every mode
    assert ModelConfig(LE, log_size=3).record_limit == 3


def test_pending_shrink_does_not_advance_hw_until_the_controller_agrees() -> None:
    model, s = leader_a_follower_b(LE)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "LeaderShrinkIsr", A)  # B never fetched: out of sync
    a = rep(model, s, A)
    assert isinstance(a.role, LeaderState) and isinstance(a.role.isr_state, PendingShrinkIsr)
    assert a.hw == 0 and model.view(s).controller.registration.isr == (A, B)
    assert ("LeaderShrinkIsr", A) not in kinds(model, s)  # one proposal at a time
    s = step(model, s, "AlterPartition", A)
    a = rep(model, s, A)
    assert isinstance(a.role, LeaderState) and a.role.isr_state == CommittedIsr((A,))
    assert model.view(s).controller.registration.isr == (A,)
    assert a.hw == 1  # alone in the ISR now: r0 committed


def test_a_zombie_leaders_proposal_is_fenced_and_stays_pending() -> None:
    model, s = leader_a_follower_b(LE)
    s = step(model, s, "MoveLeadership", B)
    s = step(model, s, "LeaderShrinkIsr", A)
    # FENCED_LEADER_EPOCH: the real core keeps the proposal pending until new metadata, so the
    # controller's answer changes nothing and is not a step.
    assert ("AlterPartition", A) not in kinds(model, s)
    assert rep(model, s, A).proposal is not None
    s = step(model, s, "ApplyMetadata", A)
    assert rep(model, s, A).proposal is None and not rep(model, s, A).is_leader


def test_atomic_isr_changes_are_answered_in_the_proposing_step() -> None:
    model, s = leader_a_follower_b(LE, async_isr=False)
    s = step(model, s, "LeaderShrinkIsr", A)
    a = rep(model, s, A)
    assert a.proposal is None and isinstance(a.role, LeaderState)
    assert a.role.isr_state == CommittedIsr((A,))
    assert model.view(s).controller.registration.isr == (A,)


def test_epoch_offset_follower_asks_before_fetching() -> None:
    """KIP-101 as shipped: a follower with a log asks OffsetsForLeaderEpoch first."""
    model, s = leader_a_follower_b(Truncation.EPOCH_OFFSET)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "MoveLeadership", B)
    s = step(model, s, "MoveLeadership", A)
    s = step(model, s, "ApplyMetadata", A)
    s = step(model, s, "ApplyMetadata", B)
    b = rep(model, s, B)
    assert isinstance(b.role, FollowerState) and b.role.phase is FetchPhase.TRUNCATING
    assert ("Fetch", B) not in kinds(model, s)
    s = step(model, s, "OffsetsForLeaderEpoch", B, A)
    b = rep(model, s, B)
    assert isinstance(b.role, FollowerState) and b.role.phase is FetchPhase.FETCHING
    assert b.log == ((0, 0),)


def test_partition_epochs_are_renumbered_so_equal_situations_are_equal_states() -> None:
    model, s = leader_a_follower_b(LE)
    s = step(model, s, "LeaderShrinkIsr", A)
    s = step(model, s, "AlterPartition", A)  # ISR {A}, partition epoch 1
    s = step(model, s, "Fetch", B, A)  # at A's LEO: expansion proposed
    s = step(model, s, "AlterPartition", A)  # ISR {A, B} again, partition epoch 2
    reg = model.view(s).controller.registration
    assert reg.isr == (A, B)
    # Only the controller and A hold a partition epoch newer than B's 0: ranks 0 and 1.
    assert reg.partition_epoch == 1


# -- invariants on hand-made states --------------------------------------------------------------
def _leader(log: tuple[tuple[int, int], ...], hw: int, epoch: int = 0,
            isr: tuple[int, ...] = (A, B)) -> ReplicaValue:
    role = LeaderState(epoch, 0, (A, B), CommittedIsr(isr), 0)
    return ReplicaValue(log, ((epoch, 0),), hw, role, (), (), frozenset(), 0, None)


def _follower(log: tuple[tuple[int, int], ...], hw: int) -> ReplicaValue:
    role = FollowerState(A, 0, 0, (A, B), FetchPhase.FETCHING)
    return ReplicaValue(log, ((0, 0),), hw, role, (), (), frozenset(), 1, None)


def _view(*replicas: ReplicaValue, isr: tuple[int, ...] = (A, B), leader: int = A,
          committed: tuple[tuple[int, int, int], ...] = ()) -> StateView:
    brokers = tuple(BrokerRegistration(r, r, "h", 1, str(r)) for r in range(len(replicas)))
    reg = PartitionRegistration((A, B), isr, leader, 0, 0)
    return StateView(replicas, ControllerValue(reg, brokers), committed, 0, 0)


def test_invariants_flag_handmade_bad_states() -> None:
    model = Model(ModelConfig(LE, replicas=2))
    good = _leader(((0, 0),), 1)
    other = _follower(((0, 1),), 1)
    bad = _view(good, other, committed=((0, 0, 0),))
    assert log_matching(model, bad) is not None
    assert strong_isr(model, bad) is not None
    assert no_committed_record_lost(model, bad) is None
    assert no_committed_record_lost(model, _view(other, other, committed=((0, 0, 0),)))
    assert single_record_per_committed_offset(model, _view(good, other,
                                                           committed=((0, 0, 0), (0, 0, 1))))
    assert one_leader_per_epoch(model, _view(good, good)) is not None
    fine = _view(good, _follower(((0, 0),), 1), committed=((0, 0, 0),))
    assert log_matching(model, fine) is None and strong_isr(model, fine) is None


def test_replication_quorum_superset_invariant() -> None:
    model = Model(ModelConfig(LE, replicas=2))
    alone = _leader((), 0, isr=(A,))
    assert replication_quorum_superset(model, _view(alone, _follower((), 0))) is not None
    assert replication_quorum_superset(model, _view(alone, _follower((), 0), isr=(A,))) is None


def test_transition_invariants() -> None:
    model = Model(ModelConfig(LE, replicas=2))
    before = _view(_leader(((0, 0),), 1), _follower((), 0))
    after = _view(_leader(((0, 0),), 0), _follower((), 0))
    assert leader_hw_monotonic(model, before, Action("Fetch", B, A), after) is not None
    older = _view(_leader(((0, 0),), 1), _follower((), 0)._replace(
        role=FollowerState(A, -1, 0, (A, B), FetchPhase.FETCHING)))
    assert epochs_monotonic(model, before, Action("ApplyMetadata", B, 0), older) is not None
    assert truncation_progress(model, before, Action("StuckFetch", B, A), before) is not None
    s = model.initial_state()
    violation = check_transition(model, s, Action("StuckFetch", B, A), s)
    assert violation is not None and violation.invariant == "TruncationProgress"
