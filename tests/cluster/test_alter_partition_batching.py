"""A broker's ISR changes of many partitions reach the controller in few AlterPartition
requests, each carrying many partitions (Kafka's ``AlterPartitionManager``), on real processes.

3 brokers, one topic of 24 partitions (RF 3). One broker is SIGSTOPped: the two others, leaders
of about two thirds of the partitions, shrink those ISRs after ``replica.lag.time.max.ms`` (the
controller does not fence the stopped broker: its session is 30 s). SIGCONT: the follower
fetches again and the leaders expand every ISR back. The controller's status counts the
AlterPartition requests and the proposals they carried: before batching every request carried
one partition.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "isr-batch"
PARTITIONS = 24
STOPPED = 3


def _registrations(cluster: LocalCluster) -> dict[int, dict[str, Any]]:
    status = cluster.controller_status() or {}
    parts = status.get("topics", {}).get(TOPIC, {})
    return {int(p): reg for p, reg in parts.items()}


def _counts(cluster: LocalCluster) -> tuple[int, int]:
    status = cluster.controller_status()
    assert status is not None
    counts = status["alter_partition"]
    return int(counts["requests"]), int(counts["partitions"])


def _all(cluster: LocalCluster, isr_of: Any) -> bool:
    regs = _registrations(cluster)
    return len(regs) == PARTITIONS and all(isr_of(reg) for reg in regs.values())


def test_isr_changes_of_many_partitions_share_requests(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"broker.session.timeout.ms": "30000",
                                               "leader.imbalance.check.interval.ms": "600000"})
    paused: int | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until(lambda: _all(cluster, lambda r: sorted(r["isr"]) == [1, 2, 3]), 60,
                   "every partition at full ISR")
        regs = _registrations(cluster)
        shrinking = [p for p, reg in regs.items() if reg["leader"] != STOPPED]
        assert len(shrinking) >= 2
        before = _counts(cluster)

        paused = cluster.pid(STOPPED)
        assert paused is not None
        os.kill(paused, signal.SIGSTOP)
        wait_until(lambda: all(STOPPED not in reg["isr"]
                               for p, reg in _registrations(cluster).items()
                               if p in shrinking), 60,
                   f"every ISR led by another broker without broker {STOPPED}")
        shrunk = _counts(cluster)
        os.kill(paused, signal.SIGCONT)
        paused = None
        wait_until(lambda: _all(cluster, lambda r: sorted(r["isr"]) == [1, 2, 3]), 60,
                   "every ISR back to full")
        after = _counts(cluster)
        assert _registrations(cluster)[shrinking[0]]["leader"] != STOPPED  # (not fenced)

        for (req0, parts0), (req1, parts1) in ((before, shrunk), (shrunk, after)):
            requests, proposals = req1 - req0, parts1 - parts0
            # Every shrink and every expansion went through AlterPartition ...
            assert proposals >= len(shrinking), (requests, proposals)
            # ... and the requests carried several partitions each (one a partition before).
            assert requests * 2 <= proposals, (requests, proposals)
    finally:
        if paused is not None:
            os.kill(paused, signal.SIGCONT)
        cluster.stop()
