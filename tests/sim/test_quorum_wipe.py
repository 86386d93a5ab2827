"""A controller voter that lost its whole data dir (log, snapshots, ``quorum-state``) and comes
back (``sim/quorum_wipe.py``): trusted as the same voter (KIP-595's static voter set) it can
lose a committed record or elect two leaders in one epoch."""

from __future__ import annotations

import pytest

from floodmark.sim.quorum_wipe import WIPE_SCENARIOS, run_wipe_scenario


@pytest.mark.xfail(strict=True, reason="a wiped voter is trusted as the same voter (KIP-595)")
@pytest.mark.parametrize("name", WIPE_SCENARIOS)
def test_a_wiped_voter_breaks_no_invariant(name: str) -> None:
    result = run_wipe_scenario(name)
    assert result.safe, result.violations


def test_the_wiped_voter_scenarios_break_raft_today() -> None:
    records = run_wipe_scenario("wiped-records")
    assert any(v.startswith("leader-completeness") for v in records.violations)
    assert "m1" in records.committed and "m1" not in records.final_values
    vote = run_wipe_scenario("wiped-vote")
    assert any(v.startswith("election-safety") for v in vote.violations)
