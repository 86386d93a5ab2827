"""Unit tests of the model checker's transition rules and invariants (pure logic, no search)."""

from __future__ import annotations

import pytest

from floodmark.mc.invariants import (
    check_state,
    check_transition,
    log_matching,
    no_committed_record_lost,
    single_record_per_committed_offset,
    strong_isr,
)
from floodmark.mc.model import (
    NO_LEADER,
    Action,
    Model,
    ModelConfig,
    ModelState,
    ReplicaState,
    truncate_replica,
)
from floodmark.replication.modes import Truncation

A, B, C = 0, 1, 2


def step(model: Model, state: ModelState, kind: str, replica: int, arg: int = -1) -> ModelState:
    """Take the one successor labelled (kind, replica, arg); fail if the model does not offer it."""
    wanted = Action(kind, replica, arg)
    found = [succ for action, succ in model.successors(state) if action == wanted]
    assert found, f"{wanted} not enabled; enabled: {[a for a, _ in model.successors(state)]}"
    assert len(found) == 1
    return found[0]


def enabled(model: Model, state: ModelState) -> set[Action]:
    return {action for action, _ in model.successors(state)}


def leader_a_follower_b(mode: Truncation, **kw: int) -> tuple[Model, ModelState]:
    """A leads epoch 0, B follows it; both have applied the request."""
    model = Model(ModelConfig(mode, **kw))  # type: ignore[arg-type]
    s = model.initial_state()
    s = step(model, s, "ElectLeader", A)
    s = step(model, s, "BecomeLeader", A, 0)
    s = step(model, s, "BecomeFollower", B, 0)
    return model, s


@pytest.mark.parametrize("mode", list(Truncation))
def test_follower_learns_hw_one_fetch_late(mode: Truncation) -> None:
    model, s = leader_a_follower_b(mode)
    assert not s.replicas[B].pending_truncation  # empty log: nothing to ask the leader about
    s = step(model, s, "LeaderWrite", A, 0)
    assert s.replicas[A].hw == 0  # B has not fetched yet: HW cannot move
    s = step(model, s, "Fetch", B, A)  # B gets r0; the leader learns B's LEO was 0
    assert s.replicas[B].log == ((0, 0),)
    assert (s.replicas[A].hw, s.replicas[B].hw) == (0, 0)
    s = step(model, s, "Fetch", B, A)  # fetch offset 1 -> leader HW 1, response has the old HW
    assert (s.replicas[A].hw, s.replicas[B].hw) == (1, 0)
    assert s.committed == ((0, 0, 0),)
    s = step(model, s, "Fetch", B, A)  # one fetch later B learns it
    assert s.replicas[B].hw == 1
    # Nothing left to learn: a further fetch changes nothing and is not offered.
    assert Action("Fetch", B, A) not in enabled(model, s)


def test_new_leader_records_epoch_only_in_leader_epoch_mode() -> None:
    for mode, expected in (
        (Truncation.LEADER_EPOCH, ((0, 0),)),
        (Truncation.EPOCH_OFFSET, ()),
        (Truncation.HIGH_WATERMARK, ()),
    ):
        _, s = leader_a_follower_b(mode)
        assert s.replicas[A].cache == expected, mode


def test_high_watermark_mode_truncates_to_hw_on_become_follower() -> None:
    model, s = leader_a_follower_b(Truncation.HIGH_WATERMARK)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "Fetch", B, A)
    assert s.replicas[B].log == ((0, 0),) and s.replicas[B].hw == 0
    s = step(model, s, "ElectLeader", B)  # epoch 1, B leader
    s2 = step(model, s, "BecomeFollower", A, 1)
    assert s2.replicas[A].log == ((0, 0),)  # A's HW is 1: nothing to cut
    # B itself, given a newer request naming A, would cut r0 (its HW is still 0).
    s3 = step(model, s, "ElectLeader", A)  # epoch 2, A leader
    s3 = step(model, s3, "BecomeFollower", B, 2)
    assert s3.replicas[B].log == ()


def test_epoch_mode_fencing_rejects_fetch_across_epochs() -> None:
    model, s = leader_a_follower_b(Truncation.LEADER_EPOCH)
    s = step(model, s, "ControllerShrinkIsr", B)  # epoch 1: leader A, ISR {A}
    s = step(model, s, "BecomeFollower", B, 1)  # B is in epoch 1, A still in epoch 0
    assert Action("Fetch", B, A) not in enabled(model, s)
    unfenced = Model(ModelConfig(Truncation.LEADER_EPOCH, fencing=False))
    assert Action("Fetch", B, A) in enabled(unfenced, s)
    s = step(model, s, "BecomeLeader", A, 1)
    assert Action("Fetch", B, A) in enabled(model, s)


def test_diverging_fetch_truncates_through_real_rule() -> None:
    """T6 single-record variant: A [0:e1:a0, 1:e1:a1, 2:e3:a2], B [0:e1:a0, 1:e2:b1]."""
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, log_size=3, max_epoch=4))
    base = model.initial_state()
    a = ReplicaState(
        log=((1, 0), (1, 1), (3, 2)),
        hw=1,
        leader_epoch=3,
        leader=A,
        isr=0b11,
        cache=((1, 0), (3, 2)),
        remote_leo=(3, -1),
        pending_truncation=False,
    )
    b = ReplicaState(
        log=((1, 0), (2, 3)),
        hw=1,
        leader_epoch=3,
        leader=A,
        isr=0,
        cache=((1, 0), (2, 1)),
        remote_leo=(),
        pending_truncation=False,
    )
    s = base._replace(replicas=(a, b), controller_epoch=3, controller_leader=A)
    s = step(model, s, "Fetch", B, A)  # DivergingEpoch(1, 2) -> cut to min(1, 2, 2) = 1
    assert s.replicas[B].log == ((1, 0),)
    assert s.replicas[B].cache == ((1, 0),)
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "Fetch", B, A)
    assert s.replicas[B].log == a.log


def test_truncate_replica_clamps_hw_and_drops_cache_entries() -> None:
    rep = ReplicaState(((0, 0), (2, 1), (2, 2)), 3, 2, NO_LEADER, 0, ((0, 0), (2, 1)), (), False)
    cut = truncate_replica(rep, 1)
    assert cut.log == ((0, 0),) and cut.hw == 1 and cut.cache == ((0, 0),)
    assert truncate_replica(rep, 5) == rep


def test_invariants_flag_handmade_bad_states() -> None:
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, replicas=2))
    s = model.initial_state()
    good = ReplicaState(((0, 0),), 1, 0, A, 0b11, ((0, 0),), (1, 1), False)
    other = ReplicaState(((0, 1),), 1, 0, A, 0, ((0, 0),), (), False)
    bad = s._replace(replicas=(good, other), controller_isr=0b11, committed=((0, 0, 0),))
    assert log_matching(model, bad) is not None
    assert strong_isr(model, bad) is not None
    assert no_committed_record_lost(model, bad) is None
    lost = bad._replace(replicas=(other, other))
    assert no_committed_record_lost(model, lost) is not None
    twice = bad._replace(committed=((0, 0, 0), (0, 0, 1)))
    assert single_record_per_committed_offset(model, twice) is not None
    over = s._replace(replicas=(good._replace(hw=2), good))
    violation = check_state(model, over)
    assert violation is not None and violation.invariant == "HwBelowLeo"
    two_leaders = s._replace(replicas=(good, good._replace(leader=B)))
    violation = check_state(model, two_leaders)
    assert violation is not None and violation.invariant == "OneLeaderPerEpoch"
    assert check_state(model, s) is None


def test_transition_invariants() -> None:
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, replicas=2))
    s = model.initial_state()
    leader = ReplicaState(((0, 0),), 1, 0, A, 0b11, ((0, 0),), (1, 1), False)
    before = s._replace(replicas=(leader, s.replicas[B]))
    after = s._replace(replicas=(leader._replace(hw=0), s.replicas[B]))
    v = check_transition(model, before, Action("Fetch", B, A), after)
    assert v is not None and v.invariant == "LeaderHwMonotonic"
    older = s._replace(replicas=(leader._replace(leader_epoch=-1, leader=NO_LEADER), s.replicas[B]))
    v = check_transition(model, before, Action("BecomeFollower", A, 0), older)
    assert v is not None and v.invariant == "EpochsMonotonic"
    v = check_transition(model, before, Action("StuckFetch", B, A), before)
    assert v is not None and v.invariant == "TruncationProgress"


def test_unclean_restart_loses_suffix_and_leaves_isr() -> None:
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, unclean_restarts=1, max_epoch=3))
    _, s = leader_a_follower_b(Truncation.LEADER_EPOCH)
    s = s._replace(restarts_left=1)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "UncleanRestart", A, 0)
    assert s.replicas[A].log == () and s.replicas[A].leader == NO_LEADER
    assert s.controller_isr == 0b10 and s.controller_leader == NO_LEADER
    assert s.controller_epoch == 1 and s.restarts_left == 0
    assert not any(a.kind == "UncleanRestart" for a in enabled(model, s))


def test_controller_respects_epoch_budget_and_never_empties_isr() -> None:
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, replicas=2, max_epoch=2))
    s = model.initial_state()
    s = step(model, s, "ControllerShrinkIsr", A)
    assert s.controller_isr == 0b10
    assert not any(a.kind == "ControllerShrinkIsr" for a in enabled(model, s))
    s = step(model, s, "ElectLeader", B)
    assert s.controller_epoch == 1
    assert not any(a.kind in ("ElectLeader", "ControllerShrinkIsr") for a in enabled(model, s))


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        ModelConfig(Truncation.LEADER_EPOCH, replicas=0)
    with pytest.raises(ValueError):
        ModelConfig(Truncation.LEADER_EPOCH, log_size=0)
    assert ModelConfig(Truncation.LEADER_EPOCH).fenced
    assert ModelConfig(Truncation.EPOCH_OFFSET).fenced  # the broker fences in every mode
    assert not ModelConfig(Truncation.HIGH_WATERMARK, fencing=False).fenced
    assert ModelConfig(Truncation.LEADER_EPOCH, log_size=3).record_limit == 3


def test_pending_shrink_does_not_advance_hw_until_accepted() -> None:
    """Maximal ISR: a member being removed still counts until the controller agrees."""
    model, s = leader_a_follower_b(Truncation.LEADER_EPOCH)
    s = step(model, s, "LeaderWrite", A, 0)
    assert s.replicas[A].hw == 0
    s = step(model, s, "LeaderShrinkIsr", A, B)  # B never fetched: out of sync
    assert s.replicas[A].pending_isr == 0b01 and s.replicas[A].isr == 0b11
    assert s.replicas[A].hw == 0 and s.controller_isr == 0b11
    assert not any(a.kind in ("LeaderShrinkIsr", "LeaderExpandIsr") for a in enabled(model, s))
    s = step(model, s, "AlterPartitionAccepted", A)
    assert s.replicas[A].isr == 0b01 and s.replicas[A].pending_isr == 0
    assert s.controller_isr == 0b01
    assert s.replicas[A].hw == 1  # alone in the ISR now: r0 committed


def test_pending_expand_counts_at_once_and_zombie_proposal_is_rejected() -> None:
    model, s = leader_a_follower_b(Truncation.LEADER_EPOCH)
    s = step(model, s, "LeaderShrinkIsr", A, B)
    s = step(model, s, "AlterPartitionAccepted", A)
    s = step(model, s, "LeaderWrite", A, 0)
    assert s.replicas[A].hw == 1
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "Fetch", B, A)  # B's LEO 1 >= HW 1 and >= LESO 0: may rejoin
    s = step(model, s, "LeaderExpandIsr", A, B)
    assert s.replicas[A].pending_isr == 0b11
    s2 = step(model, s, "LeaderWrite", A, 1)
    assert s2.replicas[A].hw == 1  # B counts already: the HW waits for it
    s2 = step(model, s2, "AlterPartitionAccepted", A)
    assert s2.controller_isr == 0b11 and s2.replicas[A].isr == 0b11

    # A zombie's proposal: the controller moved on (epoch 1, leader B) -> rejected.
    model, s = leader_a_follower_b(Truncation.LEADER_EPOCH)
    s = step(model, s, "ElectLeader", B)
    s = step(model, s, "LeaderShrinkIsr", A, B)
    assert Action("AlterPartitionAccepted", A) not in enabled(model, s)
    s = step(model, s, "AlterPartitionRejected", A)
    assert s.replicas[A].pending_isr == 0 and s.replicas[A].isr == 0b11
    assert s.controller_isr == 0b11 and s.controller_leader == B


def test_atomic_isr_changes_commit_immediately() -> None:
    model, s = leader_a_follower_b(Truncation.LEADER_EPOCH, async_isr=False)  # type: ignore[arg-type]
    s = step(model, s, "LeaderShrinkIsr", A, B)
    assert s.replicas[A].isr == 0b01 and s.controller_isr == 0b01 and s.replicas[A].pending_isr == 0


def test_epoch_offset_follower_asks_before_fetching() -> None:
    """KIP-101 as shipped: a follower with a log asks OffsetsForLeaderEpoch first."""
    model, s = leader_a_follower_b(Truncation.EPOCH_OFFSET)
    s = step(model, s, "LeaderWrite", A, 0)
    s = step(model, s, "Fetch", B, A)
    s = step(model, s, "ElectLeader", B)  # epoch 1: B leads, never writes
    s = step(model, s, "ElectLeader", A)  # epoch 2: A leads again
    s = step(model, s, "BecomeFollower", B, 2)
    s = step(model, s, "BecomeLeader", A, 2)
    assert s.replicas[B].pending_truncation
    assert Action("Fetch", B, A) not in enabled(model, s)
    s = step(model, s, "OffsetsForLeaderEpoch", B, A)  # epoch 0 is A's latest: LEO 1, keep r0
    assert not s.replicas[B].pending_truncation and s.replicas[B].log == ((0, 0),)


def test_replication_quorum_superset_invariant() -> None:
    model = Model(ModelConfig(Truncation.LEADER_EPOCH, replicas=2))
    s = model.initial_state()
    leader = ReplicaState((), 0, 0, A, 0b01, ((0, 0),), (0, -1), False)
    bad = s._replace(
        replicas=(leader, s.replicas[B]),
        controller_epoch=0,
        controller_leader=A,
        controller_isr=0b11,
    )
    v = check_state(model, bad)
    assert v is not None and v.invariant == "ReplicationQuorumSuperset"
    pending = bad._replace(replicas=(leader._replace(pending_isr=0b11), s.replicas[B]))
    assert check_state(model, pending) is None
    stale = bad._replace(controller_epoch=1)  # A has not applied epoch 1 yet: not checked
    assert check_state(model, stale) is None
