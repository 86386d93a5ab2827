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

from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import run_in
from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from tests.chaos.stale_leader_lab import stale_leader_lab

pytestmark = pytest.mark.integration

OFFSET_FOR_LEADER_EPOCH = 23


def test_stale_leader_answers_unknown_leader_epoch_for_a_newer_epoch(tmp_path: Path) -> None:
    with stale_leader_lab(tmp_path, "stale", "s") as lab:
        first, moved = lab.cut_off_leader()
        old = int(first["leader"])
        newer = int(moved["leader_epoch"])
        assert newer > int(first["leader_epoch"])

        def ask(current: int) -> Any:
            with KafkaConnection(lab.cluster.address(old)) as conn:
                resp = conn.request(OFFSET_FOR_LEADER_EPOCH, 4, {
                    "replica_id": -1, "topics": [{"topic": "s", "partitions": [{
                        "partition": 0, "current_leader_epoch": current,
                        "leader_epoch": newer}]}]})
            return resp.topics[0].partitions[0]

        for current in (-1, int(first["leader_epoch"])):
            answer = run_in(lab.clients, lambda c=current: ask(c), 10)
            assert answer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH, (current, answer)
