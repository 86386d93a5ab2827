"""Random fault schedules against the controller quorum (``floodmark sim quorum --seeds N``).

Each seed: three (or N) voters start, the active controller writes throughout, and for
``fault_phase_ms`` of virtual time random faults hit: crashes with or without loss of unsynced
data, restarts, SIGSTOP-like pauses, a voter cut off (connections held or reset), heals; the
network also delays and drops requests. Then everything heals and restarts, and the quorum must
converge: one leader, identical logs, every committed record present. The invariants of
``QuorumWorld`` are checked after every event; a failing seed replays exactly from its number.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from floodmark.controller import directory_of
from floodmark.sim.network import NetworkConfig, PartitionMode
from floodmark.sim.quorum.world import QuorumSimConfig, QuorumWorld, SimVoter, Violation

FAULTS = ("crash", "crash-lose-unsynced", "stop", "restart", "pause", "resume",
          "partition-hold", "partition-reset", "heal")
CHANGES = ("add-voter", "remove-voter", "update-voter")
"""Drawn with ``voter_changes``: an operator asks the leader (if any) to add a node outside
its voter set or remove one of its voters (never below one voter); or one of its voters tells
it a new endpoint (UpdateRaftVoter, as a voter restarted on another port does)."""
WIPE = "wipe"
"""A crash that loses the whole data dir (log, snapshots, ``quorum-state``, directory id); the
voter restarts later on a new directory. Drawn only while every other voter is a voter on its
known directory: Raft survives the loss of a minority's disks, not of a majority's."""


@dataclass(frozen=True, slots=True)
class QuorumExploreOptions:
    voters: int = 3
    fault_phase_ms: int = 4000
    recovery_ms: int = 4000
    loss_probability: float = 0.02
    min_fault_gap_ms: int = 40
    max_fault_gap_ms: int = 400
    snapshot_interval: int = 0
    """Committed records between snapshots (KIP-630; 0: off)."""
    wipes: bool = False
    """Also draw ``wipe`` faults (``--wipes``)."""
    voter_changes: bool = False
    """Also draw AddRaftVoter / RemoveRaftVoter sent to the leader (``--voter-changes``;
    KIP-853); the last node starts as an observer."""

    def sim_config(self) -> QuorumSimConfig:
        return QuorumSimConfig(voters=self.voters, network=NetworkConfig(
            min_delay_ms=1, max_delay_ms=5, loss_probability=self.loss_probability),
            snapshot_interval=self.snapshot_interval,
            segment_bytes=512 if self.snapshot_interval else 1 << 30,
            bootstrap_voters=self.voters - 1 if self.voter_changes and self.voters > 1 else 0)


@dataclass(slots=True)
class QuorumSeedResult:
    seed: int
    violations: list[Violation]
    elections: int
    writes: int
    committed: int
    faults: list[str] = field(default_factory=list)
    events: int = 0
    trace_hash: str = ""
    snapshots_loaded: int = 0
    wipes: int = 0
    readmissions: int = 0
    voter_changes: int = 0
    """AddRaftVoter / RemoveRaftVoter the leader accepted."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, object]:
        return {"seed": self.seed, "ok": self.ok, "elections": self.elections,
                "writes": self.writes, "committed": self.committed, "events": self.events,
                "faults": len(self.faults), "trace_hash": self.trace_hash,
                "snapshots_loaded": self.snapshots_loaded,
                "wipes": self.wipes, "readmissions": self.readmissions,
                "voter_changes": self.voter_changes,
                "violations": [{"time_ms": v.time_ms, "invariant": v.invariant,
                                "detail": v.detail} for v in self.violations]}


def _rebound(voter: SimVoter) -> bool:
    """A wiped voter re-admitted: its id is bound to its new data dir (as it knows)."""
    core = voter.core
    return core is not None and directory_of(core.directories, voter.node_id) == (
        core.directory_id)


def _change_voters(qw: QuorumWorld, kind: str) -> str | None:
    """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter to a leader: what was asked and
    Kafka's answer."""
    leaders = [v for v in qw.leaders() if not v.paused]
    if not leaders:
        return None
    leader = qw.rng.choice(leaders)
    assert leader.core is not None
    if kind == "update-voter":
        target = qw.rng.choice(leader.core.voters)
        return f"{leader.name} c{target} {leader.update_voter(target)}"
    add = kind == "add-voter"
    voters = leader.core.voters
    targets = [i for i in qw.voters if (i not in voters) == add]
    if not targets:
        return None
    target = qw.rng.choice(targets)
    return f"{leader.name} c{target} {leader.change_voters(add, target)}"


def _inject(qw: QuorumWorld, faults: list[str], wiped: set[int] | None = None,
            changes: bool = False) -> None:
    """One random fault. ``wiped``: voters that lost their data dir and are not re-admitted
    yet (None: no wipes drawn); ``changes``: voter set changes drawn too."""
    rng = qw.rng
    kind = rng.choice(FAULTS + ((WIPE,) if wiped is not None else ())
                      + (CHANGES if changes else ()))
    if kind in CHANGES:
        asked = _change_voters(qw, kind)
        if asked is not None:
            faults.append(f"{qw.now_ms} {kind} {asked}")
        return
    voters = list(qw.voters.values())
    live = [v for v in voters if v.alive]
    dead = [v for v in voters if not v.alive]
    if kind.startswith("crash") and live:
        victim = rng.choice(live)
        victim.crash(lose_unsynced=kind == "crash-lose-unsynced")
    elif kind == "stop" and live:
        leaders = [v for v in live if v.core is not None and v.core.is_leader]
        victim = rng.choice(leaders or live)
        victim.stop_gracefully()
    elif kind == "restart" and dead:
        victim = rng.choice(dead)
        victim.start()
    elif kind == "pause" and live:
        victim = rng.choice(live)
        victim.pause()
    elif kind == "resume":
        paused = [v for v in live if v.paused]
        if not paused:
            return
        victim = rng.choice(paused)
        victim.resume()
    elif kind.startswith("partition"):
        victim = rng.choice(voters)
        qw.partition(victim.node_id, PartitionMode.HOLD if kind.endswith("hold")
                     else PartitionMode.RESET)
    elif kind == WIPE and wiped is not None:
        wiped -= {v.node_id for v in voters if _rebound(v)}
        if wiped:
            return  # one lost disk at a time (Raft survives a minority's, not a majority's)
        victim = rng.choice(voters)
        victim.wipe()
        wiped.add(victim.node_id)
    elif kind == "heal":
        qw.heal()
        victim = None
    else:
        return
    faults.append(f"{qw.now_ms} {kind}" + (f" {victim.name}" if victim is not None else ""))


def run_quorum_seed(seed: int, options: QuorumExploreOptions | None = None,
                    *, trace: bool = False) -> QuorumSeedResult:
    opts = options or QuorumExploreOptions()
    qw = QuorumWorld(seed, opts.sim_config())
    qw.world.trace_enabled = trace
    faults: list[str] = []
    wiped: set[int] | None = set() if opts.wipes else None
    qw.start_all()
    qw.start_writes()
    end = qw.now_ms + opts.fault_phase_ms
    while qw.now_ms < end and not qw.violations:
        gap = qw.rng.randint(opts.min_fault_gap_ms, opts.max_fault_gap_ms)
        qw.run_for(min(gap, max(0, end - qw.now_ms)))
        qw.check_log_matching()
        qw.check_committed_on_majority()
        if qw.now_ms < end:
            _inject(qw, faults, wiped, opts.voter_changes)
    # Recovery: heal everything, let the quorum converge, then stop writing and settle.
    qw.heal()
    for voter in qw.voters.values():
        voter.resume()
        if not voter.alive:
            voter.start()
    qw.run_for(opts.recovery_ms)
    qw.stop_writes()
    qw.run_for(max(1000, opts.recovery_ms // 2))
    qw.check_log_matching()
    qw.check_committed_on_majority()
    _check_converged(qw)
    return QuorumSeedResult(seed, list(qw.violations), qw.elections, qw.writes,
                            len(qw.committed), faults, qw.world.events_run,
                            qw.world.trace_hash,
                            sum(v.snapshots_loaded for v in qw.voters.values()),
                            sum(1 for f in faults if f" {WIPE} " in f), qw.readmissions,
                            sum(1 for f in faults if f.split(" ")[1] in CHANGES
                                and f.endswith(" NONE")))


def _check_converged(qw: QuorumWorld) -> None:
    leaders = qw.leaders()
    if len(leaders) != 1:
        qw.violation("no-progress", f"{len(leaders)} leaders after recovery "
                                    f"({[v.name for v in leaders]})")
        return
    leader = leaders[0]
    assert leader.core is not None and leader.log is not None
    leo = leader.log.log_end_offset
    if leader.core.high_watermark != leo:
        qw.violation("no-progress", f"leader {leader.name} HW {leader.core.high_watermark} "
                                    f"!= LEO {leo} after recovery")
    reference = leader.entries()
    for offset, entry in qw.committed.items():
        if reference.get(offset) != entry:
            qw.violation("committed-record-lost", f"committed {entry} at {offset} missing "
                                                  f"from the final leader {leader.name}")
            return
    for voter in qw.voters.values():
        if voter.entries() != reference:
            qw.violation("no-progress", f"{voter.name} log differs from leader "
                                        f"{leader.name} after recovery")


def explore_quorum(seeds: int, start_seed: int = 1,
                   options: QuorumExploreOptions | None = None) -> list[QuorumSeedResult]:
    return [run_quorum_seed(seed, options) for seed in range(start_seed, start_seed + seeds)]


def with_voters(options: QuorumExploreOptions, voters: int) -> QuorumExploreOptions:
    return replace(options, voters=voters)
