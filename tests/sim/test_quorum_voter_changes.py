"""KIP-853 in the simulator: AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter sent to the leader of the quorum the
controller runs (its ``QuorumCore`` and ``QuorumDriver``), among crashes, partitions, pauses and
elections, with the invariants checked after every event."""

from __future__ import annotations

from floodmark.sim.quorum.explore import QuorumExploreOptions, run_quorum_seed
from floodmark.sim.quorum.world import QuorumSimConfig, QuorumWorld, SimVoter


def _leader(qw: QuorumWorld, limit_ms: int = 3000) -> SimVoter:
    for _ in range(limit_ms // 50):
        leaders = qw.leaders()
        if len(leaders) == 1 and leaders[0].core is not None and (
                leaders[0].core.high_watermark > 0):
            return leaders[0]
        qw.run_for(50)
    raise AssertionError("no leader")


def _settle(qw: QuorumWorld, done: object, limit_ms: int = 5000) -> None:
    for _ in range(limit_ms // 50):
        if done():  # type: ignore[operator]
            return
        qw.run_for(50)
    raise AssertionError("no progress")


def test_add_an_observer_remove_the_leader_and_keep_committing() -> None:
    qw = QuorumWorld(5, QuorumSimConfig(voters=4, bootstrap_voters=3))
    qw.start_all()
    qw.start_writes()
    leader = _leader(qw)
    c4 = qw.voters[4]
    assert c4.core is not None and not c4.core.is_voter
    # c4 follows as an observer; once the leader saw it caught up, it is added.
    answer = "REQUEST_TIMED_OUT"
    for _ in range(100):
        answer = leader.change_voters(True, 4)
        if answer != "REQUEST_TIMED_OUT":
            break
        qw.run_for(20)
    assert answer == "NONE"
    _settle(qw, lambda: all(v.core is not None and v.core.voters == (1, 2, 3, 4)
                            and v.core.high_watermark > 3 for v in qw.voters.values()))
    assert c4.core.is_voter
    # The leader removes itself: it resigns after the commit, a voter of the new set leads.
    assert leader.change_voters(False, leader.node_id) == "NONE"
    _settle(qw, lambda: any(v.core is not None and v.core.is_leader and v is not leader
                            for v in qw.voters.values()))
    new_leader = qw.leaders()[0]
    assert new_leader.core is not None and leader.node_id not in new_leader.core.voters
    committed = len(qw.committed)
    new_leader.crash(lose_unsynced=False)  # SIGKILL: the three voters left still commit
    _settle(qw, lambda: len(qw.committed) > committed + 10 and bool(qw.leaders()))
    assert qw.leaders()[0] is not leader
    qw.check_log_matching()
    qw.check_committed_on_majority()
    assert not qw.violations, qw.violations[:3]


def test_explorer_with_voter_changes_finds_no_violation() -> None:
    options = QuorumExploreOptions(voters=4, voter_changes=True, fault_phase_ms=3000,
                                   recovery_ms=3000)
    accepted = 0
    for seed in range(1, 7):
        result = run_quorum_seed(seed, options)
        assert result.ok, (seed, result.violations[:3], result.faults)
        accepted += result.voter_changes
    assert accepted > 0


def test_an_updated_endpoint_reaches_every_voter_and_outlives_the_leaders_crash() -> None:
    """UpdateRaftVoter (KIP-853): c2's new endpoint in a voter set record of the same voters;
    once committed every voter has it in force, a crashed and restarted leader still has it
    (its ``quorum-state``), and the quorum keeps committing with the same three voters."""
    qw = QuorumWorld(7, QuorumSimConfig(voters=3))
    qw.start_all()
    qw.start_writes()
    leader = _leader(qw)
    answer = "REQUEST_TIMED_OUT"
    for _ in range(100):
        answer = leader.update_voter(2)
        if answer != "REQUEST_TIMED_OUT":
            break
        qw.run_for(20)
    assert answer == "NONE"

    def everywhere() -> bool:
        return all(v.core is not None and v.driver is not None and v.core.voters == (1, 2, 3)
                   and set(v.core.voter_endpoints(v.driver.log)) == {2}
                   for v in qw.voters.values())
    _settle(qw, everywhere)
    committed = len(qw.committed)
    leader.crash(lose_unsynced=False)
    _settle(qw, lambda: len(qw.committed) > committed + 5 and bool(qw.leaders()))
    leader.start()
    _settle(qw, everywhere)
    qw.check_log_matching()
    qw.check_committed_on_majority()
    assert not qw.violations, qw.violations[:3]

