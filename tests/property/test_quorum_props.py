"""Properties of the quorum's rules and of the quorum under random schedules (Hypothesis picks
the seed, the quorum size and the loss rate; the simulator runs the controller's own core)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.controller.quorum.rules import (
    leader_high_watermark,
    log_is_up_to_date,
    majority,
    majority_end_offset,
)
from floodmark.sim.quorum.explore import QuorumExploreOptions, run_quorum_seed

offsets = st.lists(st.integers(-1, 1000), min_size=1, max_size=7)


@given(offsets)
def test_majority_end_offset_is_the_largest_offset_a_majority_reached(leos: list[int]) -> None:
    m = majority_end_offset(leos)
    assert sum(1 for x in leos if x >= m) >= majority(len(leos))
    assert all(sum(1 for x in leos if x >= y) < majority(len(leos)) for y in leos if y > m)


@given(st.integers(0, 500), st.integers(0, 500), st.integers(0, 1000), offsets)
def test_leader_high_watermark_never_decreases_and_needs_the_epoch(
        current: int, epoch_start: int, leader: int, others: list[int]) -> None:
    new = leader_high_watermark(current, epoch_start, leader, others)
    assert new >= current
    if new != current:
        assert new > epoch_start
        assert new == majority_end_offset([leader, *others])


@given(st.integers(-1, 5), st.integers(0, 20), st.integers(-1, 5), st.integers(0, 20))
def test_up_to_date_is_a_total_order(e1: int, o1: int, e2: int, o2: int) -> None:
    assert log_is_up_to_date(e1, o1, e2, o2) or log_is_up_to_date(e2, o2, e1, o1)
    if log_is_up_to_date(e1, o1, e2, o2) and log_is_up_to_date(e2, o2, e1, o1):
        assert (e1, o1) == (e2, o2)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 10**6), st.sampled_from([1, 2, 3, 4, 5]),
       st.sampled_from([0.0, 0.02, 0.05]))
def test_quorum_invariants_hold_under_random_schedules(seed: int, voters: int,
                                                       loss: float) -> None:
    result = run_quorum_seed(seed, QuorumExploreOptions(
        voters=voters, fault_phase_ms=1500, recovery_ms=3000, loss_probability=loss))
    assert result.ok, (seed, voters, loss, [(v.invariant, v.detail) for v in result.violations])
