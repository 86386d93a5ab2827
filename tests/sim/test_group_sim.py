"""The classic group coordinator core in the simulator (``floodmark sim groups``): random
runs keep ``spec.groups``'s invariants, and the scenario that broke them before a static
member's replacement waited for its record (commit 6c32a44's explorer found it in seeds 184 and
230): the replacement answered at once, its record lost in a failover, the new coordinator
loads the old member id and the old process — paused, not dead — commits its older offsets
over the new one's."""

from __future__ import annotations

import logging

from floodmark.errors import ErrorCode
from floodmark.sim.groups.explore import GroupExploreOptions, run_group_seed
from floodmark.sim.groups.world import GROUP, GroupSimConfig, GroupWorld
from floodmark.spec import groups as spec

logging.getLogger("floodmark.broker.classic_group").setLevel(logging.ERROR)


def test_random_runs_keep_the_group_invariants() -> None:
    options = GroupExploreOptions(steps=2000)
    results = [run_group_seed(seed, options) for seed in range(1, 21)]
    bad = [(r.seed, r.violations[0]) for r in results if not r.ok]
    assert bad == []
    # the runs did what they are for
    assert sum(r.failovers for r in results) > 30
    assert sum(r.commits for r in results) > 300 and sum(r.rebalances for r in results) > 30


def test_a_lost_static_replacement_lets_no_zombie_commit_backwards() -> None:
    w = GroupWorld(1, GroupSimConfig(members=1, static_members=1, partitions=1))
    m = w.members[0]
    w.join(m)
    w.deliver()  # JoinGroup answered: the leader syncs with its assignment
    w.store_done(True)  # the generation's assignment is stored
    w.deliver()  # SyncGroup answered
    assert m.owned == {0}
    m.positions[0] = 7  # consumed, not committed
    w.restart(m)  # a new process under the same group.instance.id; the old one lingers
    zombie, fresh = w.zombies[0], w.members[0]
    assert w.classic.heartbeat(GROUP, zombie.member_id, zombie.generation, zombie.instance_id,
                            w.now_ms) is ErrorCode.FENCED_INSTANCE_ID
    w.deliver()
    w.deliver()
    # The new member id is being stored: the new process has no answer yet, so nothing to read
    # or commit (answered before its record was stored, it read from 0 and committed 12 here).
    assert fresh.joining is not None and not fresh.owned
    if fresh.owned:
        fresh.positions[0] = 12
        w.commit(fresh)
    w.failover(landed=0)  # the store of the new member id is lost
    assert [r.member_id for r in w.log[-1].members] == [zombie.member_id]
    w.commit(zombie)  # the old process wakes up and commits what it consumed
    assert not w.violations, [str(v) for v in w.violations]
    assert w.committed == {0: 7}
    w.join(fresh)  # the new one joins again, replaces the old id, this time stored
    for _ in range(6):
        w.step("store", 0, 0)
        w.deliver()
    assert fresh.owned == {0} and fresh.positions == {0: 7}  # from the committed offset
    fresh.positions[0] = 12
    w.commit(fresh)
    w.commit(zombie)  # refused: fenced
    assert w.committed == {0: 12}
    assert not w.violations, [str(v) for v in w.violations]
    assert spec.committed_backwards({0: 12}, {0: 7}) == (0, 12, 7)
