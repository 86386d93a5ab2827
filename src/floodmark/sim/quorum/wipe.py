"""``floodmark sim quorum --scenario wiped-records|wiped-vote``: a controller voter that lost its
whole data dir (metadata log, snapshots, ``quorum-state``) and comes back, told step by step.

Raft's safety rests on two promises every voter keeps on its disk: the records it acknowledged
(they counted towards the commit index) and the vote it cast in its epoch. A wiped voter keeps
neither. If it is trusted as the same voter (KIP-595's static voter set):

* ``wiped-records``: c_A acknowledged m1 (committed by the leader with c_A's copy), loses its
  disk and, with the old leader down, votes for c_B, which never had m1: c_B leads without a
  committed record (leader completeness), and when the old leader returns m1 is cut.
* ``wiped-vote``: in one epoch c_X wins with c_W's vote; c_W loses its disk, forgets that vote
  and gives it again, in the same epoch, to c_Y: two leaders in one epoch (election safety).

Each scenario is scripted with network cuts and crashes on the same core, driver, ``Log`` and
``quorum-state`` file the controller process runs; the invariants are ``QuorumWorld``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.sim.network import NetworkConfig, PartitionMode
from floodmark.sim.quorum.scenario import _run_until, _snapshot
from floodmark.sim.quorum.world import QuorumSimConfig, QuorumWorld, SimVoter
from floodmark.spec import QuorumStep

WIPE_SCENARIOS = ("wiped-records", "wiped-vote")
WIPE_SEED = 7


@dataclass(slots=True)
class WipeScenarioResult:
    name: str
    steps: list[QuorumStep] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    final_values: list[str] = field(default_factory=list)
    leaders_by_epoch: dict[int, int] = field(default_factory=dict)

    @property
    def safe(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, Any]:
        return {"scenario": self.name, "safe": self.safe, "violations": self.violations,
                "committed": self.committed, "final_values": self.final_values,
                "steps": [{"event": s.event, "voters": s.voters} for s in self.steps]}


class _Script:
    def __init__(self, name: str, seed: int, formatted: bool) -> None:
        config = QuorumSimConfig(network=NetworkConfig(min_delay_ms=1, max_delay_ms=3),
                                 fetch_max_bytes=1 << 20, format_voters=formatted)
        self.qw = QuorumWorld(seed, config)
        self.result = WipeScenarioResult(name)
        self.qw.observer = self._observe

    def step(self, event: str) -> None:
        self.result.steps.append(QuorumStep(event, {v.name: _snapshot(v)
                                                    for v in self.qw.voters.values()}))

    def _observe(self, event: str, _voter: SimVoter | None) -> None:
        words = event.split()
        if "becomes" in words or (len(words) > 3 and words[3].startswith("Vote")):
            self.step(event)

    def run_until(self, done: Callable[[], bool], limit_ms: int = 5000) -> bool:
        _run_until(self.qw, done, limit_ms)
        return done()

    def cut_off(self, voter: SimVoter) -> None:
        self.qw.partition(voter.node_id, PartitionMode.HOLD)

    def finish(self) -> WipeScenarioResult:
        qw = self.qw
        qw.observer = None
        qw.check_log_matching()
        qw.check_committed_on_majority()
        self.step("end")
        result = self.result
        result.violations = [f"{v.invariant}: {v.detail}" for v in qw.violations]
        result.committed = [v for _o, (_e, v) in sorted(qw.committed.items())]
        result.leaders_by_epoch = dict(qw.leaders_by_epoch)
        leaders = qw.leaders()
        if leaders:
            result.final_values = [v for _o, (_e, v) in sorted(leaders[0].entries().items())]
        return result


def _caught_up(qw: QuorumWorld, voters: list[SimVoter]) -> bool:
    """One leader; every voter holds its whole log, knows it committed, and knows every voter
    bound to its data dir (the ``voters`` records committed), itself a voter."""
    leaders = qw.leaders()
    if len(leaders) != 1 or leaders[0].log is None or leaders[0].core is None:
        return False
    end = leaders[0].log.log_end_offset
    bound = len(leaders[0].core.directories) == len(qw.voters)
    return bound and all(
        v.core is not None and v.log is not None and v.log.log_end_offset == end
        and v.core.high_watermark == end and v.core.is_voter
        and v.core.directories == leaders[0].core.directories for v in voters)


def run_wiped_records_scenario(seed: int = WIPE_SEED, formatted: bool = True
                               ) -> WipeScenarioResult:
    s = _Script("wiped-records", seed, formatted)
    qw = s.qw
    s.step("three voters start")
    qw.start_all()
    s.run_until(lambda: _caught_up(qw, list(qw.voters.values())))
    (leader,) = qw.leaders()
    a, b = [v for v in qw.voters.values() if v is not leader]
    s.cut_off(b)
    s.step(f"{b.name} is cut off from the others")
    leader.write("m1")
    s.step(f"{leader.name} (active controller) appends m1, e.g. an acknowledged CreateTopics")
    s.run_until(lambda: leader.core is not None and leader.log is not None
                and leader.core.high_watermark == leader.log.log_end_offset)
    s.step(f"{a.name} fetched m1: {leader.name} commits it (2 of 3) and would answer the writer")
    a.wipe()
    s.step(f"{a.name} loses its data dir (a new disk): log and quorum-state gone")
    leader.crash(lose_unsynced=False)
    s.step(f"{leader.name} (the only other copy of m1) goes down")
    a.start()
    qw.heal()
    s.step(f"{a.name} restarts empty; {b.name}'s link heals")
    s.run_until(lambda: bool(qw.leaders()))
    s.run_until(lambda: False, 600)
    leader.start()
    s.step(f"{leader.name} restarts")
    s.run_until(lambda: _caught_up(qw, list(qw.voters.values())), 3000)
    s.step("settled")
    return s.finish()


def run_wiped_vote_scenario(seed: int = WIPE_SEED, formatted: bool = True
                            ) -> WipeScenarioResult:
    s = _Script("wiped-vote", seed, formatted)
    qw = s.qw
    s.step("three voters start")
    qw.start_all()
    s.run_until(lambda: _caught_up(qw, list(qw.voters.values())))
    (w,) = qw.leaders()
    x, y = [v for v in qw.voters.values() if v is not w]
    net = qw.net
    net.cut(x.name, y.name, PartitionMode.HOLD)
    s.step(f"the link {x.name}-{y.name} is cut")
    w.stop_gracefully()  # EndQuorumEpoch: both others stand at once, each voting for itself
    s.step(f"{w.name} (leader) stops gracefully: EndQuorumEpoch to {x.name} and {y.name}")
    s.run_until(lambda: not w.alive)
    net.cut(w.name, y.name, PartitionMode.HOLD)
    s.run_until(lambda: all(v.core is not None and type(v.core.role).__name__ == "Candidate"
                            for v in (x, y)))
    s.step(f"{x.name} and {y.name} are candidates in the same epoch")
    w.start()
    s.step(f"{w.name} restarts with its disk; it can reach {x.name} only")
    s.run_until(lambda: x.core is not None and x.core.is_leader)
    net.cut(w.name, x.name, PartitionMode.HOLD)
    w.wipe()
    w.start()
    net.heal(w.name, y.name)
    s.step(f"{w.name} loses its data dir and restarts empty; now it reaches {y.name} only")
    s.run_until(lambda: y.core is not None and (y.core.is_leader
                                               or type(y.core.role).__name__ != "Candidate"),
                1000)
    s.step(f"{y.name} no longer a candidate in that epoch (or leads it)")
    qw.heal()
    s.step("every link heals")
    s.run_until(lambda: _caught_up(qw, list(qw.voters.values())), 3000)
    s.step("settled")
    return s.finish()


def run_wipe_scenario(name: str, seed: int = WIPE_SEED, formatted: bool = True
                      ) -> WipeScenarioResult:
    """``formatted``: the quorum formed with every voter's directory id (``cluster up``);
    False: on unformatted dirs, bound by the leader as it hears from each voter."""
    if name == "wiped-records":
        return run_wiped_records_scenario(seed, formatted)
    if name == "wiped-vote":
        return run_wiped_vote_scenario(seed, formatted)
    raise ValueError(f"unknown scenario {name!r}; expected one of {', '.join(WIPE_SCENARIOS)}")
