"""The controller quorum in the simulator: the core and driver the controller runs, random
schedules of crashes (with loss of unsynced data), restarts, pauses, partitions and message
loss, and the invariants: election safety, leader completeness, log matching, no committed
record lost or changed, the leader's HW never decreasing."""

from __future__ import annotations

from collections import Counter

import pytest

from floodmark.controller.quorum import core as quorum_core
from floodmark.controller.quorum import state_file as quorum_state_file
from floodmark.controller.quorum.core import QuorumCore
from floodmark.controller.quorum.driver import QuorumDriver
from floodmark.sim.quorum.explore import QuorumExploreOptions, run_quorum_seed
from floodmark.sim.quorum.world import QuorumSimConfig, QuorumWorld


def test_the_simulated_voter_runs_the_controllers_core_and_driver() -> None:
    qw = QuorumWorld(1)
    qw.start_all()
    for voter in qw.voters.values():
        assert type(voter.driver) is QuorumDriver and type(voter.core) is QuorumCore


def test_explorer_finds_no_violation_and_exercises_every_fault() -> None:
    kinds: Counter[str] = Counter()
    elections = committed = 0
    for seed in range(1, 21):
        result = run_quorum_seed(seed)
        assert result.ok, (seed, result.violations[:3], result.faults)
        kinds.update(f.split()[1] for f in result.faults)
        elections += result.elections
        committed += result.committed
    assert set(kinds) >= {"crash", "crash-lose-unsynced", "stop", "restart", "pause",
                          "partition-hold", "partition-reset", "heal"}
    assert elections > 20 and committed > 600


@pytest.mark.parametrize("voters", [1, 2, 5])
def test_other_quorum_sizes(voters: int) -> None:
    options = QuorumExploreOptions(voters=voters, fault_phase_ms=2000, recovery_ms=3000)
    for seed in range(1, 6):
        result = run_quorum_seed(seed, options)
        assert result.ok, (voters, seed, result.violations[:3])
        assert result.committed > 0


def test_a_seed_replays_exactly() -> None:
    a = run_quorum_seed(7, trace=True)
    b = run_quorum_seed(7, trace=True)
    assert a.trace_hash == b.trace_hash and a.events == b.events


def test_one_voter_quorum_commits_alone() -> None:
    qw = QuorumWorld(3, QuorumSimConfig(voters=1))
    qw.start_all()
    qw.start_writes()
    qw.run_for(1000)
    (leader,) = qw.leaders()
    assert leader.core is not None and leader.core.high_watermark >= 20
    assert not qw.violations


def _first_violation(seeds: int) -> set[str]:
    found: set[str] = set()
    for seed in range(1, seeds + 1):
        found.update(v.invariant for v in run_quorum_seed(seed).violations)
        if found:
            break
    return found


def test_the_invariants_catch_a_voter_that_ignores_the_log_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_core, "log_is_up_to_date", lambda *_args: True)
    assert _first_violation(40) & {"leader-completeness", "committed-record-lost",
                                   "committed-record-changed"}


def test_the_invariants_catch_a_vote_that_is_not_persisted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_state_file.QuorumStateFile, "write", lambda *_args: None)
    assert "election-safety" in _first_violation(40)


def test_election_scenario_step_by_step() -> None:
    from floodmark.sim.quorum.scenario import run_election_scenario
    from floodmark.spec.quorum_steps import render_quorum_steps

    result = run_election_scenario()
    assert result.as_expected, (result.committed, result.lost_uncommitted, result.violations)
    events = [s.event for s in result.steps]
    assert any("pre_vote=True" in e for e in events)
    assert any("pre_vote=False" in e for e in events)
    assert any("becomes leader (epoch 2)" in e for e in events)
    assert any("diverging=EpochEndOffset(epoch=1, end_offset=3)" in e for e in events)
    final = result.steps[-1].voters
    assert {v["leo"] for v in final.values()} == {4} and {v["hw"] for v in final.values()} == {4}
    assert [c[2] for c in final["c1"]["log"]] == ["LC(c1)", "m1", "m2", "LC(c2)"]
    lines = render_quorum_steps(result.steps)
    assert any("voter LEOs:" in line for line in lines)


def test_cli_explores_and_refuses_bad_input() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "floodmark.cli", "sim", "quorum", "--seeds", "3",
                          "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["seeds"] == 3 and data["failing_seeds"] == [] and data["elections"] >= 3
    assert data["committed_records"] > 0
    bad = subprocess.run([sys.executable, "-m", "floodmark.cli", "sim", "quorum", "--seeds", "0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_pre_vote_keeps_a_rejoining_voter_from_disturbing_a_stable_leader() -> None:
    """KIP-996's point: a voter cut off for many election timeouts keeps asking pre-votes in
    its old epoch; when it comes back nobody's epoch has moved and the leader stays."""
    from floodmark.sim.network import PartitionMode

    qw = QuorumWorld(5)
    qw.start_all()
    qw.start_writes()
    qw.run_for(1000)
    (leader,) = qw.leaders()
    assert leader.core is not None
    epoch = leader.core.epoch
    cut = next(v for v in qw.voters.values() if v is not leader)
    qw.partition(cut.node_id, PartitionMode.RESET)
    qw.run_for(3000)  # ten election timeouts
    assert cut.core is not None and cut.core.epoch == epoch
    assert type(cut.core.role).__name__ == "Prospective"
    qw.heal()
    qw.run_for(1000)
    assert qw.leaders() == [leader] and leader.core.epoch == epoch
    assert cut.core.leader_id == leader.node_id and not qw.violations


def test_graceful_stop_hands_over_without_waiting_for_the_fetch_timeout() -> None:
    """EndQuorumEpoch: the best successor stands at once instead of after a fetch timeout."""
    qw = QuorumWorld(9)
    qw.start_all()
    qw.start_writes()
    qw.run_for(1000)
    (leader,) = qw.leaders()
    stopped_at = qw.now_ms
    leader.stop_gracefully()
    while not [v for v in qw.leaders() if v is not leader] and qw.now_ms < stopped_at + 5000:
        qw.world.step()
    elected_after_ms = qw.now_ms - stopped_at
    assert elected_after_ms < qw.config.fetch_timeout_ms, elected_after_ms
    assert not qw.violations
