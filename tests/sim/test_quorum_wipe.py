"""A controller voter that lost its whole data dir (log, snapshots, ``quorum-state``,
directory id) and comes back (``sim/quorum/wipe.py``). Trusted as the same voter (KIP-595's
static voter set) it lost a committed record or elected two leaders in one epoch (these
scenarios failed before ``voter_set``); on a new directory id it is an observer until the
leader re-admits it (KIP-853)."""

from __future__ import annotations

import pytest

from floodmark.controller.quorum import core
from floodmark.sim.quorum.explore import QuorumExploreOptions, run_quorum_seed
from floodmark.sim.quorum.wipe import WIPE_SCENARIOS, run_wipe_scenario


@pytest.mark.parametrize("name", WIPE_SCENARIOS)
def test_a_wiped_voter_breaks_no_invariant_and_is_readmitted(name: str) -> None:
    result = run_wipe_scenario(name)
    assert result.safe, result.violations
    final = result.steps[-1].voters
    assert all(v["alive"] for v in final.values())
    # Formed with every voter bound to its directory (no record needed); the wiped one is
    # bound again to its new directory by one committed voters record, once caught up.
    voters_records = [v for v in result.committed if '"type": "voters"' in v]
    assert len(voters_records) == 1 and '-dir2"' in voters_records[0], voters_records
    if name == "wiped-records":
        assert "m1" in result.committed and "m1" in result.final_values


@pytest.mark.parametrize("name", WIPE_SCENARIOS)
def test_without_the_directory_rule_the_scenarios_break_raft(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The rule off (every node id accepted on any directory: KIP-595's trust): the same
    # schedules lose the committed m1 / elect two leaders in one epoch.
    monkeypatch.setattr(core, "accepts", lambda bindings, voter_id, directory_id: True)
    result = run_wipe_scenario(name)
    expected = "leader-completeness" if name == "wiped-records" else "election-safety"
    assert any(v.startswith(expected) for v in result.violations), result.violations


@pytest.mark.parametrize("name", WIPE_SCENARIOS)
def test_unformatted_voters_are_bound_by_the_leader_as_it_hears_from_them(name: str) -> None:
    # Without the formation step (controllers started by hand on empty dirs) the leader binds
    # each voter to the directory it first hears it on, one committed voters record each; the
    # scenarios then run after every binding is committed.
    result = run_wipe_scenario(name, formatted=False)
    assert result.safe, result.violations
    voters_records = [v for v in result.committed if '"type": "voters"' in v]
    assert len(voters_records) == 4, voters_records


def test_explorer_with_lost_data_dirs_finds_no_violation_and_readmits() -> None:
    options = QuorumExploreOptions(wipes=True)
    results = [run_quorum_seed(seed, options) for seed in range(1, 13)]
    assert all(r.ok for r in results), [(r.seed, r.violations[:2]) for r in results if not r.ok]
    assert sum(r.wipes for r in results) >= 5
    assert sum(r.readmissions for r in results) >= 5


def test_explorer_with_lost_data_dirs_and_the_rule_off_breaks_raft(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Seed 5 (of the first 100, 15 fail this way with the rule off).
    monkeypatch.setattr(core, "accepts", lambda bindings, voter_id, directory_id: True)
    result = run_quorum_seed(5, QuorumExploreOptions(wipes=True))
    assert not result.ok
