"""The classic group coordinator core (``broker.classic_group``) under any sequence of joins,
syncs, heartbeats, commits, leaves, crashes, static restarts (the old process lingering),
stores that land, fail or are lost, and coordinator failovers. The world
(``sim.groups.world``) checks ``spec.groups`` after every step:

* no two members that the coordinator lets commit own one partition (given the leader's
  round-robin assignment) — in one generation, and across a static member's replacement;
* a commit is accepted only under the group's current generation (a fenced or stale one
  commits nothing), and committed offsets never go backwards;
* generations only grow: in one core, in the stored records, and a loaded core never starts
  below a generation whose assignment a member was given.

And directly: a static member's replacement fences the old member id everywhere; a stored
record loaded into a fresh core continues the same generation with the same members, each
heartbeating on and getting its assignment again without a rebalance.
"""

from __future__ import annotations

import logging
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.broker.classic_group.core import ClassicGroupConfig, ClassicGroupCore
from floodmark.broker.classic_group.effects import AnswerJoin, AnswerSync, StoreGroup
from floodmark.broker.classic_group.messages import JoinGroup, SyncGroup
from floodmark.broker.classic_group.state import GroupState
from floodmark.errors import ErrorCode
from floodmark.sim.groups.world import GROUP, GroupSimConfig, GroupWorld

logging.getLogger("floodmark.broker.classic_group").setLevel(logging.ERROR)

# the explorer's weights (the members' routine, now and then a fault), and failovers
ACTIONS = [*(a for a, w in GroupWorld.ACTIONS.items() for _ in range(max(1, round(w * 2)))),
           "failover"]
step = st.tuples(st.sampled_from(ACTIONS), st.integers(-2, 3),
                 st.sampled_from([10, 50, 200, 700, 3500]))


def _world(seed: int) -> GroupWorld:
    return GroupWorld(seed, GroupSimConfig(members=4, static_members=2, partitions=5))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), steps=st.lists(step, min_size=1, max_size=400))
def test_group_invariants_hold_under_any_steps(seed: int,
                                               steps: list[tuple[str, int, int]]) -> None:
    w = _world(seed)
    for action, who, amount_ms in steps:
        w.step(action, who, amount_ms)
        assert not w.violations, "\n".join([str(w.violations[0]), *w.trace])


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(50, 600))
def test_a_stored_record_loaded_into_a_fresh_core_continues_the_generation(
        seed: int, steps: int) -> None:
    w = _world(seed)
    w.run_random(steps, failover_weight=0.01)
    for _ in range(200):  # settle: every answer delivered, every store landed
        if not (w.answers or w.stores):
            break
        w.step("store" if w.stores else "deliver", 0, 0)
    g = w.classic.groups.get(GROUP)
    if g is None or g.state is not GroupState.STABLE or g.storing:
        return
    record = w.classic.record_of(g, w.now_ms)
    fresh = ClassicGroupCore(ClassicGroupConfig(0, 1, 60_000), random.Random(seed))
    loaded, effects = fresh.load(GROUP, record, w.now_ms + 1)
    assert effects == []
    assert loaded.generation_id == g.generation_id and loaded.state is GroupState.STABLE
    assert list(loaded.members) == list(g.members)
    assert loaded.static_members == g.static_members
    assert (loaded.leader_id, loaded.protocol_name) == (g.leader_id, g.protocol_name)
    for member_id, m in g.members.items():
        assert fresh.heartbeat(GROUP, member_id, g.generation_id, m.group_instance_id,
                               w.now_ms + 2) is ErrorCode.NONE
        out = fresh.sync(SyncGroup(1, GROUP, member_id, g.generation_id, (),
                                   m.group_instance_id), w.now_ms + 2)
        assert out == [AnswerSync(1, ErrorCode.NONE, m.assignment, GroupState.STABLE)]
    assert fresh.groups[GROUP].generation_id == g.generation_id  # no rebalance


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(20, 400), store_ok=st.booleans())
def test_a_static_members_replacement_fences_the_old_member_id(seed: int, steps: int,
                                                                store_ok: bool) -> None:
    w = _world(seed)
    w.run_random(steps, failover_weight=0.0)
    g = w.classic.groups.get(GROUP)
    static = [m for m in (g.members.values() if g else []) if m.group_instance_id]
    if g is None or not static:
        return
    old = static[0]
    instance = old.group_instance_id
    w.stores.clear()  # what was asked before is not this test's
    effects = w.classic.join(JoinGroup(9_999_999, GROUP, "", instance, "again", "/h",
                                    old.session_timeout_ms, old.rebalance_timeout_ms,
                                    old.protocol_type, old.protocols, True), w.now_ms)
    new_id = g.static_members[instance]
    assert new_id != old.member_id
    generation = g.generation_id
    for err in (w.classic.heartbeat(GROUP, old.member_id, generation, instance, w.now_ms),
                w.classic.commit_error(GROUP, old.member_id, generation, instance)):
        assert err is ErrorCode.FENCED_INSTANCE_ID
    stores = [e for e in effects if isinstance(e, StoreGroup)]
    answered = [e for e in effects if isinstance(e, AnswerJoin) and e.request_id == 9_999_999]
    if g.state is GroupState.STABLE and stores and not answered:
        # answered only once stored; undone when the store fails
        token = stores[0].token
        assert token is not None
        out = w.classic.stored(token, ErrorCode.NONE if store_ok else
                            ErrorCode.COORDINATOR_NOT_AVAILABLE, w.now_ms)
        (answer,) = [e for e in out if isinstance(e, AnswerJoin)]
        if store_ok:
            assert answer.result.error is ErrorCode.NONE and answer.result.member_id == new_id
            assert w.classic.heartbeat(GROUP, old.member_id, generation, instance,
                                    w.now_ms) is ErrorCode.FENCED_INSTANCE_ID
        else:
            assert answer.result.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert g.static_members[instance] == old.member_id
            assert w.classic.heartbeat(GROUP, new_id, generation, instance,
                                    w.now_ms) is ErrorCode.FENCED_INSTANCE_ID
