"""Random runs of one consumer group (``floodmark sim groups --seeds N``), in two worlds:

* ``classic``: a classic group (``world.GroupWorld``). Each seed: members join, rebalance,
  consume and commit while random steps hit them (crashes, restarts, static members restarted
  with their old process still running, leaves, silences past the session timeout), the
  group's stores fail or linger, and the coordinator fails over (``GroupWorld.failover``);
* ``mixed``: classic and consumer-protocol members in one group (``mixed.MixedGroupWorld``):
  the same faults, members restarting with the other protocol, so the group is upgraded to a
  consumer group and downgraded back (KIP-848's online migration), classic members served by
  the consumer group with Kafka's join and sync timeouts, static members of either protocol.

``spec.groups``'s invariants are checked after every step; a failing seed replays exactly from
its number (and its world).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.sim.groups.mixed import MixedGroupWorld, MixedSimConfig
from floodmark.sim.groups.world import GroupSimConfig, GroupWorld, Violation

WORLDS = ("classic", "mixed")


@dataclass(frozen=True, slots=True)
class GroupExploreOptions:
    steps: int = 3000
    failover_weight: float = 0.005  # the chance that a step is a coordinator failover
    config: GroupSimConfig = field(default_factory=GroupSimConfig)
    world: str = "classic"  # or "mixed"
    mixed_config: MixedSimConfig = field(default_factory=MixedSimConfig)


@dataclass(slots=True)
class GroupSeedResult:
    seed: int
    steps: int
    commits: int
    rebalances: int
    failovers: int
    violations: list[Violation]
    trace: list[str]
    world: str = "classic"
    upgrades: int = 0  # mixed: classic group -> consumer group
    downgrades: int = 0  # and back

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, object]:
        return {"world": self.world, "seed": self.seed, "steps": self.steps,
                "commits": self.commits, "upgrades": self.upgrades,
                "downgrades": self.downgrades,
                "rebalances": self.rebalances, "failovers": self.failovers,
                "violations": [{"invariant": v.invariant, "detail": v.detail, "step": v.step}
                               for v in self.violations]}


def run_group_seed(seed: int, options: GroupExploreOptions | None = None) -> GroupSeedResult:
    options = options or GroupExploreOptions()
    if options.world == "mixed":
        mixed = MixedGroupWorld(seed, options.mixed_config)
        mixed.run_random(options.steps, options.failover_weight)
        return GroupSeedResult(seed, mixed.steps, mixed.commits, 0, mixed.failovers,
                               list(mixed.violations), list(mixed.trace), "mixed",
                               mixed.upgrades, mixed.downgrades)
    if options.world != "classic":
        raise ValueError(f"world {options.world!r}: one of {WORLDS}")
    world = GroupWorld(seed, options.config)
    world.run_random(options.steps, options.failover_weight)
    return GroupSeedResult(seed, world.steps, world.commits, world.rebalances, world.failovers,
                           list(world.violations), list(world.trace))
