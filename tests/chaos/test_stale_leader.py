"""A leader cut off from the controller, after the controller has elected another, must not tell a
client "no such epoch" for an epoch newer than its own (found by ``floodmark chaos run --faults
isolate-then-kill`` in the default configuration).

The run's story: the cut-off leader (epoch 0) was healed while the brokers the controller had
moved its partitions to were dead. librdkafka had lost its cached leader epoch with the dead
leader, so it accepted the stale leader's own Metadata (leader itself, epoch 0). It validated its
position, a record of epoch 1, with OffsetsForLeaderEpoch(current -1, epoch 1). The stale leader
answered "no such epoch, end offset -1", which librdkafka reads as log truncation: the consumer
was rewound to offset 0 (with ``auto.offset.reset=latest`` it would have skipped records).

Here, on real processes in network namespaces, the same request goes to a leader cut off from
the controller and the other brokers, once the controller has elected another leader. Before the
fix it answered NONE with end offset -1; now it answers UNKNOWN_LEADER_EPOCH (retriable: the
client refreshes its metadata).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available, namespace_executor, run_in
from floodmark.chaos.nodes import LabCluster, host_of
from floodmark.client.connection import KafkaConnection
from floodmark.controller.client import ControllerClient
from floodmark.errors import ErrorCode

pytestmark = pytest.mark.integration

OFFSET_FOR_LEADER_EPOCH = 23


def test_stale_leader_answers_unknown_leader_epoch_for_a_newer_epoch(tmp_path: Path) -> None:
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))
    with Lab(["ctl", "b1", "b2", "b3", "clients"], prefix="stale") as lab:
        cluster = LabCluster(lab, tmp_path / "cluster", 3, {"replica.lag.time.max.ms": "3000"},
                             {"broker.session.timeout.ms": "2000",
                              "auto.leader.rebalance.enable": "false"})
        clients = namespace_executor(lab.ns("clients"))
        try:
            cluster.start()
            admin = ControllerClient(cluster.controller_address, -1)

            def registration() -> dict[str, Any] | None:
                status = cluster.controller_status()
                part = (status or {}).get("topics", {}).get("s", {}).get("0")
                return part if isinstance(part, dict) else None

            run_in(clients, lambda: asyncio.run(admin.create_topic("s", 1, 3, {})), 30)
            deadline = time.monotonic() + 60
            first: dict[str, Any] | None = None
            while time.monotonic() < deadline and not (first and first["leader"] > 0):
                first = run_in(clients, registration, 10)
                time.sleep(0.2)
            assert first and first["leader"] > 0, first
            old = int(first["leader"])
            lab.isolate(host_of(old), ["ctl", *(f"b{i}" for i in (1, 2, 3) if i != old)])
            moved: dict[str, Any] | None = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                moved = run_in(clients, registration, 10)
                if moved and moved["leader"] not in (old, -1):
                    break
                time.sleep(0.2)
            assert moved and moved["leader"] not in (old, -1), moved
            newer = int(moved["leader_epoch"])
            assert newer > int(first["leader_epoch"])

            def ask(current: int) -> Any:
                with KafkaConnection(cluster.address(old)) as conn:
                    resp = conn.request(OFFSET_FOR_LEADER_EPOCH, 4, {
                        "replica_id": -1, "topics": [{"topic": "s", "partitions": [{
                            "partition": 0, "current_leader_epoch": current,
                            "leader_epoch": newer}]}]})
                return resp.topics[0].partitions[0]

            for current in (-1, int(first["leader_epoch"])):
                answer = run_in(clients, lambda c=current: ask(c), 10)
                assert answer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH, (current, answer)
        finally:
            clients.shutdown(wait=False)
            lab.heal()
            cluster.kill_all()
