"""``floodmark chaos run --workload share`` end to end: three confluent-kafka share consumers
of one share group (KIP-932) acknowledging ACCEPT every record while brokers are killed and
paused (partition leaders, group and share coordinators among them), then a drainer of the
group until idle. The checker (unit-tested in test_checker_share.py): no record accepted is
delivered again, every record written is delivered at least once, delivery counts only grow
and stay within the limit. A run costs minutes of a real cluster in namespaces: slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.test_chaos_run import chaos_run

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_share_workload_through_broker_kills_and_pauses(tmp_path: Path) -> None:
    code, result = chaos_run(tmp_path, "--workload", "share", "--time-limit-s", "60",
                             "--faults", "kill,pause", "--seed", "3", timeout_s=900)
    counts = {k: v for k, v in result["anomaly_counts"].items() if v}
    assert result["valid"] and code == 0, (counts, result.get("work_dir"))
    share = result["group"]
    assert share["drained"] and share["accepted"] > 0, share
    assert share["records_delivered"] >= result["acknowledged"], share
    assert result["faults"], "no fault was injected"
