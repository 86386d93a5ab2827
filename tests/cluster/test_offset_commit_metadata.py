"""Issue 9, bug 3: OffsetCommit on a cluster checks the cluster's metadata, not the partitions the
coordinator happens to host. A topic with three RF=1 partitions spread over three brokers: a
confluent-kafka consumer commits an offset for each and reads them back."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration


def test_commit_offsets_for_partitions_the_coordinator_does_not_host(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("spread", 3, 1)])["spread"].result(30)
        wait_until(lambda: all(cluster.leader_of("spread", p) > 0 for p in range(3)), 30,
                   "leaders")
        leaders = {cluster.leader_of("spread", p) for p in range(3)}
        assert len(leaders) > 1, "the partitions should live on different brokers"
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-spread",
                      "enable.auto.commit": False})
        try:
            wanted = [TopicPartition("spread", p, 10 + p) for p in range(3)]
            results = c.commit(offsets=wanted, asynchronous=False)
            assert [r.error for r in results] == [None, None, None], results
            got = c.committed([TopicPartition("spread", p) for p in range(3)], timeout=30)
            assert [t.offset for t in got] == [10, 11, 12]
        finally:
            c.close()
    finally:
        cluster.stop()
