"""Random runs of one classic consumer group (``floodmark sim groups --seeds N``).

Each seed: members join, rebalance, consume and commit while random steps hit them (crashes,
restarts, static members restarted with their old process still running, leaves, silences past
the session timeout), the group's stores fail or linger, and the coordinator fails over
(``GroupWorld.failover``). ``spec.groups``'s invariants are checked after every step; a failing
seed replays exactly from its number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.sim.groups.world import GroupSimConfig, GroupWorld, Violation


@dataclass(frozen=True, slots=True)
class GroupExploreOptions:
    steps: int = 3000
    failover_weight: float = 0.005  # the chance that a step is a coordinator failover
    config: GroupSimConfig = field(default_factory=GroupSimConfig)


@dataclass(slots=True)
class GroupSeedResult:
    seed: int
    steps: int
    commits: int
    rebalances: int
    failovers: int
    violations: list[Violation]
    trace: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, object]:
        return {"seed": self.seed, "steps": self.steps, "commits": self.commits,
                "rebalances": self.rebalances, "failovers": self.failovers,
                "violations": [{"invariant": v.invariant, "detail": v.detail, "step": v.step}
                               for v in self.violations]}


def run_group_seed(seed: int, options: GroupExploreOptions | None = None) -> GroupSeedResult:
    options = options or GroupExploreOptions()
    world = GroupWorld(seed, options.config)
    world.run_random(options.steps, options.failover_weight)
    return GroupSeedResult(seed, world.steps, world.commits, world.rebalances, world.failovers,
                           list(world.violations), list(world.trace))
