"""``floodmark chaos run --workload group`` end to end: three confluent-kafka members of one
group (the classic protocol, and KIP-848's with ``--group-protocol consumer``) polling and committing (sync and async) while members leave, die and join and the
group coordinator is killed, restarted, paused and cut off, beside the input leaders' faults.

A run costs two to three minutes of a real cluster in namespaces (set-up, recovery, final read),
so those are slow tests; the checks themselves are unit-tested in test_checker_group.py. The
short mixed-protocol run (``--group-protocol mixed``: members switching between the classic and
the KIP-848 protocol, so the group converts both ways while a partition leader is killed) is
in the default suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.protocol_switch import switch_plan
from floodmark.chaos.schedule import plan
from tests.chaos.test_chaos_run import chaos_run

pytestmark = pytest.mark.integration


def _assert_valid_group_run(code: int, result: dict[str, Any]) -> dict[str, Any]:
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    group: dict[str, Any] = result["group"]
    assert group["commits"]["ok"] > 0 and group["deliveries"] > 0, group
    assert group["committed_at_end"], group
    return group


@pytest.mark.slow
def test_group_workload_through_member_and_coordinator_faults(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--workload", "group", "--time-limit-s", "60",
                             "--faults", "group,group-coordinator", "--seed", "3")
    group = _assert_valid_group_run(code, result)
    assert group["generations"] >= 2, group  # members left and joined: rebalances happened
    names = {f["name"] for f in result["faults"]}
    assert names & {"kill-group-coordinator", "restart-group-coordinator",
                    "pause-group-coordinator", "isolate-group-coordinator"}, names


@pytest.mark.slow
def test_kip848_group_workload_through_member_and_coordinator_faults(tmp_path: Path) -> None:
    """The same faults with KIP-848's protocol: the broker assigns, partitions move one by one
    (each increment or revocation is a span of its own)."""
    code, result = chaos_run(tmp_path, "--workload", "group", "--group-protocol", "consumer",
                             "--time-limit-s", "60", "--faults", "group,group-coordinator",
                             "--seed", "3")
    group = _assert_valid_group_run(code, result)
    assert group["spans"] >= 4, group  # members left and joined: partitions moved
    assert result["config"]["group_protocol"] == "consumer"


# Seed 3 in 15 s: kill-leader from 3 s to 10 s; three switches, each member leaving (no
# SIGKILL): at 6.6 s the lone KIP-848 member leaves (a downgrade), at 10.0 s a classic member
# comes back on the consumer protocol (an upgrade), at 13.8 s another.
MIXED_SEED = 3
MIXED_FAULTS = ["kill-leader"]
MIXED_SWITCHES = [(6.574, False), (10.001, False), (13.82, False)]


def test_mixed_protocols_convert_both_ways_while_a_leader_is_killed(tmp_path: Path) -> None:
    """KIP-848's online migration under a fault: a classic group upgraded when a member comes
    back on the consumer protocol, a consumer group downgraded when its last KIP-848 member
    leaves; one owner per (epoch, partition), commits never backwards, nothing lost."""
    assert [f.name for f in plan(MIXED_SEED, ["kill", "pause"], 15)] == MIXED_FAULTS
    assert [(s.at_s, s.kill) for s in switch_plan(MIXED_SEED, 15)] == MIXED_SWITCHES
    code, result = chaos_run(tmp_path, "--workload", "group", "--group-protocol", "mixed",
                             "--time-limit-s", "15", "--faults", "kill,pause",
                             "--seed", str(MIXED_SEED), timeout_s=300)
    group = _assert_valid_group_run(code, result)
    assert [f["name"] for f in result["faults"]] == MIXED_FAULTS
    switched = [s for s in result["protocol_switches"] if "joined" in s]
    assert len(switched) == len(MIXED_SWITCHES), result["protocol_switches"]
    conversions = group["conversions"]
    assert conversions["upgrade"] >= 1 and conversions["downgrade"] >= 1, conversions
    by_protocol = group["spans_by_protocol"]
    assert by_protocol["classic"] > 0 and by_protocol["consumer"] > 0, by_protocol
    assert result["config"]["group_protocol"] == "mixed"


@pytest.mark.slow
def test_mixed_protocols_ninety_seconds_of_partitions_kills_and_pauses(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--workload", "group", "--group-protocol", "mixed",
                             "--time-limit-s", "90", "--faults", "partition,kill,pause",
                             "--seed", "7", timeout_s=900)
    group = _assert_valid_group_run(code, result)
    assert group["conversions"]["upgrade"] >= 1 and group["conversions"]["downgrade"] >= 1


@pytest.mark.slow
def test_group_workload_five_minutes_of_every_default_fault(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--workload", "group", "--time-limit-s", "300",
                             "--seed", "1", timeout_s=1500)
    _assert_valid_group_run(code, result)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer", "mixed"])
def test_consumer_moved_back_past_its_commits_is_caught(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        protocol: str) -> None:
    """The drill (``FLOODMARK_CHAOS_GROUP_REWIND=1``): members start every assignment at the
    beginning of its partitions, as issue 22's new coordinator made a Quix application do; a
    member leaving makes the others start again, past what the group committed. Under KIP-848
    too: its spans are per increment, and the check still sees the rewind."""
    monkeypatch.setenv("FLOODMARK_CHAOS_GROUP_REWIND", "1")
    code, result = chaos_run(tmp_path, "--workload", "group", "--group-protocol", protocol,
                             "--time-limit-s", "20", "--faults", "member-leave", "--seed", "1")
    assert code == 1 and not result["valid"]
    counts = result["anomaly_counts"]
    assert counts["rewound"] > 0 and counts["redelivered"] > 0, counts
