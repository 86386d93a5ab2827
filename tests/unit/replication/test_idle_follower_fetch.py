"""The leader's idle round: a follower of the ISR fetching at the leader's LEO while the HW is
there too (``Partition.handle_follower_fetch``'s short path, taken on every partition of a fetch
session on every Fetch).

The short path records the follower's fetch and skips the ISR expansion and the HW step. These
tests hold it to what the full path would do: the skipped steps are no-ops in every state the
short path is taken in (Hypothesis draws the ISR state, min ISR, eligibility and the other
followers' progress), and the ISR rules that depend on the fetch (an idle member stays in sync
past ``replica.lag.time.max.ms``; one that stops fetching is shrunk out; a caught-up
non-member is still added) behave as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.errors import ErrorCode
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.epochs import EpochCache
from floodmark.replication.isr import (
    CommittedIsr,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
    ReplicaState,
)
from floodmark.replication.partition import (
    AssignEpoch,
    FollowerFetch,
    Partition,
    PartitionConfig,
    ProposeIsr,
)

LAG_MS = 10_000
LEADER, EPOCH = 1, 5


@dataclass
class Log:
    log_end_offset: int = 0
    log_start_offset: int = 0
    epoch_cache: EpochCache = field(default_factory=EpochCache)


def leader(replicas: tuple[int, ...], isr: tuple[int, ...], leo: int, *, min_isr: int = 1,
           now_ms: int = 0) -> tuple[Partition, Log]:
    log = Log(leo)
    p = Partition(PartitionConfig("t", 0, LEADER, min_isr, LAG_MS))
    for effect in p.apply_metadata(log, PartitionRegistration(replicas, isr, LEADER, EPOCH, 0),
                                   now_ms):
        if isinstance(effect, AssignEpoch):
            log.epoch_cache.assign(effect.epoch, effect.start_offset)
    return p, log


def fetch(replica: int, offset: int) -> FollowerFetch:
    return FollowerFetch(replica, offset, EPOCH, EPOCH, 0)


def caught_up(p: Partition, log: Log, replicas: tuple[int, ...], now_ms: int) -> None:
    """Every follower fetched at the LEO once and the HW reached it."""
    for r in replicas:
        if r != LEADER:
            p.handle_follower_fetch(log, fetch(r, log.log_end_offset), now_ms)
    assert p.high_watermark == log.log_end_offset


def test_an_idle_fetch_records_the_follower_and_decides_nothing_else() -> None:
    p, log = leader((1, 2, 3), (1, 2, 3), leo=7)
    caught_up(p, log, (1, 2, 3), now_ms=100)
    before = p.replica_states[2]
    decision = p.handle_follower_fetch(log, fetch(2, 7), 5_000)
    assert decision.error is ErrorCode.NONE and decision.diverging is None
    assert (decision.high_watermark, decision.log_end_offset) == (7, 7)
    assert not decision.has_data and decision.effects == ()
    after = p.replica_states[2]
    assert (after.log_end_offset, after.last_fetch_time_ms, after.last_caught_up_time_ms) \
        == (7, 5_000, 5_000)
    assert before.last_caught_up_time_ms == 100
    assert p.high_watermark == 7 and p.isr == (1, 2, 3)


def test_an_idle_member_stays_in_sync_past_the_lag_time_and_a_silent_one_is_shrunk() -> None:
    p, log = leader((1, 2, 3), (1, 2, 3), leo=3)
    caught_up(p, log, (1, 2, 3), now_ms=0)
    end = 4 * LAG_MS
    for now in range(1_000, end, 1_000):  # idle rounds: 2 fetches all along, 3 stops early
        for r in (2, 3) if now < LAG_MS // 2 else (2,):
            p.handle_follower_fetch(log, fetch(r, 3), now)
        assert p.maybe_shrink_isr(log, now) == []  # both at the LEO: in sync
    log.log_end_offset = 4  # a write: a follower not at the LEO now needs a recent catch-up
    shrink = [e.request.new_isr for e in p.maybe_shrink_isr(log, end)
              if isinstance(e, ProposeIsr)]
    assert shrink == [(1, 2)]


def test_a_caught_up_non_member_at_the_leo_is_still_added() -> None:
    p, log = leader((1, 2, 3), (1, 2), leo=4)
    caught_up(p, log, (1, 2), now_ms=0)
    decision = p.handle_follower_fetch(log, fetch(3, 4), 1_000)
    assert [e.request.new_isr for e in decision.effects if isinstance(e, ProposeIsr)] \
        == [(1, 2, 3)]


def _isr_state(kind: str, isr: tuple[int, ...], others: tuple[int, ...]) -> IsrState:
    committed = CommittedIsr(isr)
    if kind == "expand" and others:
        return PendingExpandIsr(isr, others[0], committed)
    if kind == "shrink" and len(isr) > 1:
        return PendingShrinkIsr(isr, isr[-1:], committed)
    return committed


@settings(max_examples=300, deadline=None)
@given(
    followers=st.integers(1, 4),
    members=st.integers(0, 4),
    kind=st.sampled_from(["committed", "expand", "shrink"]),
    min_isr=st.integers(1, 5),
    leo=st.integers(0, 50),
    lags=st.lists(st.tuples(st.integers(-1, 50), st.integers(0, 3 * LAG_MS)), min_size=4,
                  max_size=4),
    ineligible=st.sets(st.integers(2, 5)),
    now_ms=st.integers(0, 4 * LAG_MS),
)
def test_the_skipped_steps_are_no_ops_wherever_the_short_path_is_taken(
        followers: int, members: int, kind: str, min_isr: int, leo: int,
        lags: list[tuple[int, int]], ineligible: set[int], now_ms: int) -> None:
    replicas = (LEADER, *range(2, 2 + followers))
    isr = (LEADER, *replicas[1:1 + members])
    p, log = leader(replicas, isr, leo, min_isr=min_isr)
    p.high_watermark = leo  # the short path's condition: the HW at the leader's LEO
    p.ineligible = frozenset(ineligible)
    others = tuple(r for r in replicas if r not in isr)
    assert p.role is not None
    p.role = type(p.role)(**{**{f: getattr(p.role, f) for f in p.role.__slots__},
                             "isr_state": _isr_state(kind, isr, others)})
    for r, (follower_leo, caught_up_ms) in zip(replicas[1:], lags, strict=False):
        p.replica_states[r] = ReplicaState(r, min(follower_leo, leo), 0, leo, caught_up_ms,
                                           caught_up_ms)
    fetching = [r for r in p.role.isr_state.isr if r != LEADER]
    for r in fetching:
        role_before = p.role
        decision = p.handle_follower_fetch(log, fetch(r, leo), now_ms)
        assert decision.error is ErrorCode.NONE and decision.effects == ()
        assert p.replica_states[r].last_caught_up_time_ms >= now_ms
        # What the full path would have done after recording the fetch: nothing.
        assert p._maybe_expand_isr(r, log) == []
        assert p._maybe_increment_hw(log, now_ms) == []
        assert p.role == role_before and p.high_watermark == leo
