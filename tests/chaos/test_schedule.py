"""The fault schedule is a pure function of the seed and the fault names."""

from __future__ import annotations

import itertools

import pytest

from floodmark.chaos.schedule import DEFAULT_FAULTS, FAMILIES, expand, plan


def test_same_seed_same_schedule_and_seeds_differ() -> None:
    a = plan(7, DEFAULT_FAULTS, 120)
    assert a == plan(7, DEFAULT_FAULTS, 120)
    assert [f.as_json() for f in a] != [f.as_json() for f in plan(8, DEFAULT_FAULTS, 120)]


def test_faults_fit_the_time_limit_one_at_a_time() -> None:
    for seed in range(20):
        faults = plan(seed, ["kill", "pause"], 60)
        assert faults and faults[0].start_s >= 3.0
        for before, after in itertools.pairwise(faults):
            assert before.start_s + before.duration_s < after.start_s
        assert faults[-1].start_s + faults[-1].duration_s <= 60 + 1e-9
        assert {f.name for f in faults} <= set(FAMILIES["kill"] + FAMILIES["pause"])


def test_families_expand_and_compounds_need_both_halves() -> None:
    assert expand(["pause"]) == ["pause-one", "pause-leader"]
    assert "isolate-then-kill" not in expand(["partition"])
    both = expand(["partition", "kill"])
    assert "isolate-then-kill" in both and "failover-twice" in both
    assert expand(["failover-twice"]) == ["failover-twice"]


@pytest.mark.parametrize("bad", [["meteor"], []])
def test_unknown_empty_or_unbuilt_faults_are_refused(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        expand(bad)


def test_power_loss_leaves_out_faults_that_take_down_several_brokers() -> None:
    names = expand(["kill", "partition", "power-loss"])
    assert "power-loss" in names and "kill-one" in names
    assert not {"kill-majority", "kill-all", "isolate-then-kill", "failover-twice"} & set(names)
    assert "kill-all" in expand(["kill-all", "power-loss"])  # asked for by name: kept


def test_the_last_isr_member_power_cut_needs_eligible_leader_replicas() -> None:
    """Issue 13's finding 5 as a fault: scheduled with pause and power-loss when KIP-966 is on;
    without it only when named (to show the loss)."""
    assert "pause-then-power-cut" in expand(["pause", "power-loss"])
    assert "pause-then-power-cut" not in expand(["pause"])
    off = expand(["pause", "power-loss"], eligible_leader_replicas=False)
    assert "pause-then-power-cut" not in off and "power-loss" in off
    assert expand(["pause-then-power-cut"], eligible_leader_replicas=False) == [
        "pause-then-power-cut"]
    assert "kill-all" not in expand(["pause-then-power-cut", "kill"])  # power cuts: one at a time


def test_member_faults_only_with_the_group_workload() -> None:
    from floodmark.chaos.run import ChaosConfig
    from floodmark.chaos.schedule import GROUP_DEFAULT_FAULTS

    with pytest.raises(ValueError, match="needs --workload group"):
        ChaosConfig(faults=["member-kill"]).validate()
    with pytest.raises(ValueError, match="needs --workload group"):
        ChaosConfig(faults=["group"], workload="txn").validate()
    config = ChaosConfig(workload="group", faults=ChaosConfig.default_faults("group"))
    config.validate()
    names = expand(GROUP_DEFAULT_FAULTS)
    assert {"member-leave", "member-kill", "member-join", "kill-group-coordinator",
            "failover-rebalance", "kill-leader", "isolate-leader"} <= set(names)
    with pytest.raises(ValueError, match="needs --workload group"):
        ChaosConfig(faults=["failover-rebalance"]).validate()
    # a group coordinator's faults work with any workload (FindCoordinator for the group)
    ChaosConfig(faults=["group-coordinator"]).validate()
