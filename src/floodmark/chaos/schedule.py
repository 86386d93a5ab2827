"""The fault schedule: which faults, when, for how long — a pure function of the seed.

``--faults`` takes families (``partition,kill,pause,flap,power-loss,controller``) or single fault
names; a family stands for all its faults. Targets that depend on the cluster's state (the
leader of a partition) are picked when the fault starts, with the same seeded generator.

Faults (the seeds' stories in brackets):

partition
  ``isolate-leader`` — a partition leader cut off from the other brokers and the controller while
  clients still reach it [Jepsen 2013; with ``--acks 1`` its acknowledgements are lost];
  ``isolate-one`` — any broker, the same way; ``split`` — a random majority/minority split of
  brokers and controller; ``bridge`` — two halves, one node in the middle sees both.
kill
  ``kill-one``, ``kill-leader`` — SIGKILL, restart after the fault's duration;
  ``kill-majority``, ``kill-all`` — SIGKILL several brokers at once, restart them one by one
  [seeds 000/001: a restarted follower truncating to its stale HW, elected before it refetched];
  ``isolate-then-kill`` (with partition) — cut a follower off until it leaves the ISR, kill the
  rest, heal it, restart the others later [seed 002's unclean election];
  ``failover-twice`` (with partition) — the two followers cannot reach each other, the leader
  dies, then its successor dies before the ISR shrinks, so the last replica is elected from
  what its log holds [seeds 000/001: under the pre-0.11 rule that replica cut its log to its
  own, one-fetch-stale HW when it started following the successor].
pause
  ``pause-one``, ``pause-leader`` — SIGSTOP, SIGCONT after the fault's duration.
flap
  ``flap`` — one broker's links cut and healed every 0.3–1.5 s.
controller
  ``kill-controller``, ``pause-controller``, ``isolate-controller`` (the active controller: of a
  quorum, its leader); ``kill-controllers`` (every controller at once, restarted one by one).
restart
  ``restart-one``, ``restart-leader`` — SIGTERM (a controlled shutdown: the broker closes its
  logs cleanly), down for a moment, restarted; the fault waits (bounded) until it is back in the
  ISR of its partitions. ``restart-all`` — the same for every broker in turn, a rolling restart:
  afterwards every replica, leaders included, runs on state rebuilt from its files at start
  [issue 28: the rebuilt aborted-transaction index].
txn-coordinator
  ``kill-txn-coordinator``, ``restart-txn-coordinator``, ``pause-txn-coordinator``,
  ``isolate-txn-coordinator`` — the broker FindCoordinator(key_type=1) names for the
  transactional producers' ``transactional.id``s (SIGKILL, SIGTERM then restart, SIGSTOP,
  cut off from the other brokers and the controller).
group (``--workload group`` only)
  ``member-leave`` — a group member closes (revoke, LeaveGroup) and a new one joins after the
  fault's duration; ``member-kill`` — a member is SIGKILLed (the group notices after its
  session timeout) and a new one joins later; ``member-join`` — an extra member joins for the
  fault's duration, then leaves.
group-coordinator
  ``kill-group-coordinator``, ``restart-group-coordinator``, ``pause-group-coordinator``,
  ``isolate-group-coordinator`` — the broker FindCoordinator(key_type=0) names for the
  workload's group (the leader of its ``__consumer_offsets`` partition).
  ``failover-rebalance`` (group with group-coordinator) — a rebalance across a coordinator
  failover [issue 22]: the group coordinator is SIGKILLed, a member leaves and a new one joins
  while it is down, so the newly elected coordinator loads the group and runs the rebalance;
  the old one returns after the fault.
power-loss
  ``power-loss`` — every broker runs in the unsafe page-cache mode
  (``floodmark.unsafe.power.loss.page.cache``: writes not yet fsynced live in the process), so
  SIGKILL is a power cut; the fault cuts one broker's power and restarts it [seed 002's power
  outage, one replica at a time]. With power-loss, faults that take down several brokers at once
  are left out: more than min.insync.replicas − 1 replicas losing unsynced data is outside
  SPEC §4's premise.
  ``pause-then-power-cut`` (with pause) — issue 13's finding 5, KIP-966's last replica standing:
  a partition's followers are paused until its ISR is the leader alone, the leader's power is cut
  and it restarts, then the followers continue. With eligible leader replicas (the default) a
  follower leads and nothing is lost; it is in the schedule only then (or when named, to show
  the loss without them).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

FAMILIES: dict[str, tuple[str, ...]] = {
    "partition": ("isolate-leader", "isolate-one", "split", "bridge"),
    "kill": ("kill-one", "kill-leader", "kill-majority", "kill-all"),
    "pause": ("pause-one", "pause-leader"),
    "flap": ("flap",),
    "controller": ("kill-controller", "pause-controller", "isolate-controller",
                   "kill-controllers"),
    "power-loss": ("power-loss",),
    "restart": ("restart-one", "restart-leader", "restart-all"),
    "txn-coordinator": ("kill-txn-coordinator", "restart-txn-coordinator",
                        "pause-txn-coordinator", "isolate-txn-coordinator"),
    "group": ("member-leave", "member-kill", "member-join"),
    "group-coordinator": ("kill-group-coordinator", "restart-group-coordinator",
                          "pause-group-coordinator", "isolate-group-coordinator"),
}
COMPOUND: dict[str, tuple[str, ...]] = {"isolate-then-kill": ("partition", "kill"),
                                        "failover-twice": ("partition", "kill"),
                                        "pause-then-power-cut": ("pause", "power-loss"),
                                        "failover-rebalance": ("group", "group-coordinator")}
# Faults whose SIGKILL is a power cut: the brokers run with the power-loss page cache.
POWER_CUTS = frozenset({"power-loss", "pause-then-power-cut"})
# Left out unless eligible leader replicas are on (or the fault is named).
NEEDS_ELR = frozenset({"pause-then-power-cut"})
DEFAULT_FAULTS = ("partition", "kill", "pause", "flap", "controller")
# The transactional workload's default: the plain one's, plus clean restarts and faults of the
# transaction coordinator.
TXN_DEFAULT_FAULTS = ("restart", "kill", "pause", "txn-coordinator", "partition", "flap",
                      "controller")
# The consumer-group workload's: members leaving and joining, faults of the group coordinator,
# and of the input partitions' leaders and the network.
GROUP_DEFAULT_FAULTS = ("group", "group-coordinator", "kill", "pause", "partition", "flap")
# Faults that only the consumer-group workload can carry out (its members).
GROUP_ONLY = frozenset({*FAMILIES["group"], "failover-rebalance"})
NOT_BUILT: frozenset[str] = frozenset()
# Faults that take down more than one broker: left out when brokers can lose unsynced data.
MULTI_BROKER = frozenset({"kill-majority", "kill-all", "isolate-then-kill", "failover-twice"})
# Seconds a fault lasts: long enough for the controller to fence a broker (its session timeout)
# and for the ISR to shrink (replica.lag.time.max.ms) in the chaos cluster's settings.
DURATION_S = (4.0, 9.0)
GAP_S = (2.0, 5.0)
WARMUP_S = 3.0


@dataclass(frozen=True)
class Fault:
    name: str
    start_s: float
    duration_s: float
    params: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "start_s": round(self.start_s, 3),
                "duration_s": round(self.duration_s, 3), **self.params}


def all_names() -> list[str]:
    return sorted({n for names in FAMILIES.values() for n in names} | set(COMPOUND))


def expand(faults: Iterable[str], *, eligible_leader_replicas: bool = True) -> list[str]:
    """Family and fault names -> fault names, in a stable order. ValueError on unknown names
    or on faults that are not built yet."""
    wanted = [f.strip() for f in faults if f.strip()]
    names: list[str] = []
    for item in wanted:
        if item in FAMILIES:
            names += [n for n in FAMILIES[item] if n not in names]
        elif item in all_names():
            if item not in names:
                names.append(item)
        else:
            raise ValueError(f"unknown fault {item!r}; expected families "
                             f"{', '.join(FAMILIES)} or faults {', '.join(all_names())}")
    for compound, needs in COMPOUND.items():
        if all(f in wanted for f in needs) and compound not in names:
            names.append(compound)
    if POWER_CUTS & set(names):
        names = [n for n in names if n not in MULTI_BROKER or n in wanted]
    if not eligible_leader_replicas:
        names = [n for n in names if n not in NEEDS_ELR or n in wanted]
    refused = sorted(NOT_BUILT & set(names))
    if refused:
        raise ValueError(f"fault {', '.join(refused)} is not available yet")
    if not names:
        raise ValueError("no faults given")
    return names


def plan(seed: int, faults: Iterable[str], time_limit_s: float,
         duration_s: tuple[float, float] = DURATION_S,
         gap_s: tuple[float, float] = GAP_S, *, eligible_leader_replicas: bool = True
         ) -> list[Fault]:
    """One fault at a time from ``WARMUP_S`` until ``time_limit_s``; each heals before the next
    (gaps between them let the cluster recover, as in Jepsen's nemesis intervals)."""
    names = expand(faults, eligible_leader_replicas=eligible_leader_replicas)
    rng = random.Random(seed)
    out: list[Fault] = []
    t = WARMUP_S
    while True:
        name = names[rng.randrange(len(names))]
        duration = rng.uniform(*duration_s)
        if name in COMPOUND or name in ("kill-majority", "kill-all", "failover-twice",
                                        "restart-all"):
            duration = max(duration, 6.0)
        if t + duration > time_limit_s and out:
            break
        params: dict[str, Any] = {"pick": rng.randrange(1 << 30)}
        out.append(Fault(name, t, min(duration, max(1.0, time_limit_s - t)), params))
        t += out[-1].duration_s + rng.uniform(*gap_s)
        if t >= time_limit_s:
            break
    return out
