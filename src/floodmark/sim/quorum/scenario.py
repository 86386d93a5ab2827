"""``floodmark sim quorum --scenario election``: a quorum election told step by step, in the
seed documents' drawing (each voter's log, LEO, HW, epoch cache; the leader's view of the
voters' LEOs, the metadata log's "remote LEOs").

The story (seeded, virtual time, the same core and driver as the controller process):
three voters start and elect a leader through pre-vote and vote; it writes m1, m2 and commits
them when a majority has fetched them; it writes m3, which no follower fetches before the
leader loses power; the followers' fetch timeouts start a pre-vote, then an election in the
next epoch; the winner writes its epoch's first record and commits it (and so everything
before it); the old leader restarts Resigned, learns the new epoch, fetches with its last
epoch, is told where that epoch ends (DivergingEpoch) and cuts m3, which was never committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from floodmark.sim.network import NetworkConfig
from floodmark.sim.quorum.world import QuorumSimConfig, QuorumWorld, SimVoter
from floodmark.spec import QuorumStep, node_name

SCENARIO_SEED = 11


@dataclass(slots=True)
class QuorumScenarioResult:
    steps: list[QuorumStep] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    lost_uncommitted: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    @property
    def as_expected(self) -> bool:
        return (not self.violations and {"m1", "m2"} <= set(self.committed)
                and self.lost_uncommitted == ["m3"])

    def as_json(self) -> dict[str, Any]:
        return {"scenario": "election", "as_expected": self.as_expected,
                "committed": self.committed, "lost_uncommitted": self.lost_uncommitted,
                "violations": self.violations,
                "steps": [{"event": s.event, "voters": s.voters} for s in self.steps]}


def _snapshot(voter: SimVoter) -> dict[str, Any]:
    snap = voter.snapshot()
    if not snap["alive"]:
        return snap
    snap["log"] = [[o, e, _short(v)] for o, (e, v) in sorted(voter.entries().items())]
    core, log = voter.core, voter.log
    assert core is not None and log is not None
    if core.is_leader:
        snap["voter_leos"] = {node_name(v.voter_id): v.log_end_offset
                              for v in core.describe(log).voters if v.voter_id != voter.node_id}
    return snap


def _short(value: str) -> str:
    if value.startswith("{"):
        try:
            record = json.loads(value)
        except ValueError:
            return value
        if record.get("type") == "leader_change":
            return f"LC(c{record['leader']})"
        if record.get("type") == "voters":  # a voter bound to its data dir (KIP-853)
            return f"V(c{record['voter']}={str(record['directory_id'])[-4:]})"
        if record.get("type") == "voter_set":  # the voter set (KIP-853's VotersRecord)
            return "VS(" + ",".join(f"c{v}" for v, _d in record["voters"]) + ")"
    return value


def run_election_scenario(seed: int = SCENARIO_SEED) -> QuorumScenarioResult:
    config = QuorumSimConfig(network=NetworkConfig(min_delay_ms=1, max_delay_ms=3),
                             fetch_max_bytes=1 << 20)
    qw = QuorumWorld(seed, config)
    result = QuorumScenarioResult()

    def step(event: str) -> None:
        result.steps.append(QuorumStep(event, {v.name: _snapshot(v)
                                               for v in qw.voters.values()}))

    def observe(event: str, _voter: SimVoter | None) -> None:
        if "Fetch" in event and "diverging=" not in event:
            return  # routine fetches are not steps; their effects (HW moves) are
        if "BeginQuorumEpochResponse" in event or "EndQuorumEpochResponse" in event:
            return
        step(event)

    qw.observer = observe
    step("three voters c1, c2, c3 start: Unattached in epoch 0, empty logs")
    qw.start_all()
    _run_until(qw, lambda: bool(qw.leaders()))
    (leader,) = qw.leaders()
    # The leader-change record, then one voters record per voter (each bound to its data dir).
    _run_until(qw, lambda: leader.core is not None and leader.log is not None
               and len(leader.core.directories) == len(qw.voters)
               and leader.core.high_watermark == leader.log.log_end_offset)
    assert leader.log is not None
    base = leader.log.log_end_offset
    for value in ("m1", "m2"):
        leader.write(value)
        step(f"{leader.name} (active controller) appends {value}")
    _run_until(qw, lambda: all(v.core is not None and v.core.high_watermark >= base + 2
                               for v in qw.voters.values()))
    leader.write("m3")
    step(f"{leader.name} appends m3")
    leader.crash(lose_unsynced=True)
    step(f"{leader.name} loses power before any follower fetches m3")
    _run_until(qw, lambda: any(v is not leader for v in qw.leaders()))
    (new_leader,) = [v for v in qw.leaders() if v is not leader]
    _run_until(qw, lambda: new_leader.core is not None and new_leader.log is not None
               and new_leader.core.high_watermark == new_leader.log.log_end_offset)
    leader.start()
    step(f"{leader.name} restarts (Resigned: it led epoch {new_leader.core.epoch - 1})"
         if new_leader.core else f"{leader.name} restarts")
    _run_until(qw, lambda: leader.log is not None and new_leader.log is not None
               and leader.entries() == new_leader.entries()
               and leader.core is not None and new_leader.core is not None
               and leader.core.high_watermark == new_leader.core.high_watermark)
    qw.observer = None
    step("all voters agree: same log, same HW")
    qw.check_log_matching()
    result.committed = [_short(v) for _o, (_e, v) in sorted(qw.committed.items())]
    final = {v for _e, v in new_leader.entries().values()}
    result.lost_uncommitted = sorted(v for v in ("m1", "m2", "m3") if v not in final)
    result.violations = [f"{v.invariant}: {v.detail}" for v in qw.violations]
    return result


def _run_until(qw: QuorumWorld, done: Any, limit_ms: int = 10_000) -> None:
    deadline = qw.now_ms + limit_ms
    while not done() and qw.now_ms < deadline:
        if not qw.world.step():
            break
