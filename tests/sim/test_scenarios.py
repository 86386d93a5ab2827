"""Every SPEC §3 scenario in every protocol mode reproduces its historical outcome."""

from __future__ import annotations

import json

import pytest

from floodmark.cli import main
from floodmark.replication.modes import Truncation
from floodmark.sim.partition.scenarios import SCENARIOS, run_scenario

HW = Truncation.HIGH_WATERMARK
EO = Truncation.EPOCH_OFFSET
LE = Truncation.LEADER_EPOCH


@pytest.mark.parametrize("mode", list(Truncation), ids=lambda m: m.value)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_matches_history(name: str, mode: Truncation) -> None:
    result = run_scenario(name, mode)
    assert result.as_expected, result.verdict
    assert result.verdict.startswith(f"VERDICT {name} [{mode.value}]")


def test_hw_truncation_loses_acknowledged_m2_only_in_high_watermark_mode() -> None:
    old = run_scenario("hw-truncation-data-loss", HW)
    assert "m2" in old.acknowledged and old.lost == ["m2"]
    for mode in (EO, LE):
        new = run_scenario("hw-truncation-data-loss", mode)
        assert new.lost == [] and not new.diverged
        leader = new.final[new.final_leader or ""]
        assert [v for _o, _e, v in leader["log"]] == ["m1", "m2", "m3"]


def test_power_outage_diverges_at_offset_1_in_high_watermark_mode() -> None:
    result = run_scenario("power-outage-divergence", HW)
    assert result.diverged and result.diverged_at == 1
    logs = {name: [v for _o, _e, v in r["log"]] for name, r in result.final.items()}
    assert logs == {"A": ["m1", "m2"], "B": ["m1", "m3"]}
    fixed = run_scenario("power-outage-divergence", LE)
    assert {tuple(v for _o, _e, v in r["log"]) for r in fixed.final.values()} == {("m1", "m3")}


def test_multi_round_truncation_walks_back_twice() -> None:
    result = run_scenario("multi-round-truncation", LE)
    assert result.facts["diverging_answers"] == 2
    logs = {tuple(v for _o, _e, v in r["log"]) for r in result.final.values()}
    assert logs == {("x0", "x1", "y", "w")}


def test_three_replica_sync_table_shows_remote_leos() -> None:
    result = run_scenario("three-replica-sync", LE)
    leader_rows = [
        s["replicas"]["L"] for s in result.steps if s["event"].startswith("end of fetch round")
    ]
    assert [row["remote_leos"] for row in leader_rows] == [{"F1": 0, "F2": 0}, {"F1": 2, "F2": 2}]
    assert [row["hw"] for row in leader_rows] == [0, 2]
    assert all(r["hw"] == r["leo"] == 2 for r in result.final.values())


def test_retry_below_min_isr_is_written_once() -> None:
    """Issue 13, finding 6: the retry at a new leader whose ISR is below min ISR is parked, not
    refused NOT_ENOUGH_REPLICAS, so the scripted client never resends it under a new epoch."""
    result = run_scenario("retry-below-min-isr", LE)
    retry = next(s for s in result.steps if "the client's retry" in s["event"])
    assert retry["event"].split(" -> ")[1].startswith("pending"), retry["event"]
    assert retry["replicas"]["F1"]["isr"] == ["F1"]
    assert result.facts == {"retry_answer": "NONE", "retry_offset": 1, "copies_of_v1": 1}
    alive = {name: [v for _o, _e, v in r["log"]] for name, r in result.final.items()
             if name != "L"}
    assert alive == {"F1": ["v0", "v1"], "F2": ["v0", "v1"]}
    assert not any("epoch 1" in s["event"] for s in result.steps)


def test_cli_scenario_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["sim", "scenario", "hw-truncation-data-loss", "--truncation", "high-watermark", "--json"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("scenario", "truncation", "acknowledged", "lost", "diverged", "final", "steps"):
        assert key in data
    assert (
        data["truncation"] == "high-watermark"
        and data["lost"] == ["m2"]
        and data["diverged"] is True
    )
    replica = data["final"]["A"]
    assert set(replica) >= {"log", "leo", "hw", "epochs"}
    assert all(len(entry) == 3 for entry in replica["log"])
    step = data["steps"][0]
    assert set(step) >= {"event", "leader", "leader_epoch", "replicas"}


def test_cli_scenario_text_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "scenario", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in SCENARIOS)
    assert main(["sim", "scenario", "fast-leader-failover"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("VERDICT fast-leader-failover [leader-epoch]")
    assert sum(1 for line in out if line.startswith("VERDICT")) == 1
    assert any("LEO=" in line and "HW=" in line and "epochs=" in line for line in out)
