"""The last stable offset on a 3-broker cluster (issue 15): followers build the same producer
state from the batches they replicate, so a new leader has the old leader's LSO and aborted
transactions. The leader is SIGKILLed while a transaction is open; the transaction is then
committed on the new leader (WriteTxnMarkers through floodmark's client, retried to whoever
leads), and read_committed consumers (librdkafka, kafka-python) see exactly the committed
records: nothing of the aborted transaction, nothing of the open one before its commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.cluster import ClusterClient
from floodmark.client.fetch import FetchClient
from floodmark.client.replica_state import read_replica_state
from floodmark.client.transactions import write_txn_marker
from floodmark.constants import LATEST_TIMESTAMP, READ_COMMITTED
from floodmark.replication.producer_state import AbortedTxn
from floodmark.storage.txn_index import decode_entries
from tests.cluster.helpers import start_cluster, wait_until
from tests.compat.txn_helpers import (
    UNVERIFIED,
    new_producer_id,
    produce,
    read_committed_confluent,
    read_committed_kafka_python,
)

pytestmark = pytest.mark.integration

TOPIC = "txn"


def _replica(cluster: object, node_id: int) -> dict[str, int] | None:
    try:
        state = read_replica_state(cluster.address(node_id), TOPIC, 0, 8)  # type: ignore[attr-defined]
    except (OSError, RuntimeError):
        return None
    return state


def _lso(bootstrap: str) -> int | None:
    reader = FetchClient(bootstrap, isolation_level=READ_COMMITTED, request_timeout_ms=5000)
    try:
        return reader.list_offset(TOPIC, 0, LATEST_TIMESTAMP)
    except Exception:
        return None
    finally:
        reader.close()


def test_lso_and_aborted_index_survive_a_leader_sigkill(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "txnlog-cluster", broker_settings=UNVERIFIED)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(30)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 30, "a leader")
        with ClusterClient(cluster.bootstrap) as client:
            aborted_pid, open_pid = new_producer_id(client), new_producer_id(client)
            assert produce(client, TOPIC, 0, [b"p0"]) == (0, 0)
            assert produce(client, TOPIC, 0, [b"aborted"], producer_id=aborted_pid,
                           producer_epoch=0, base_sequence=0, transactional=True) == (0, 1)
            write_txn_marker(client, TOPIC, 0, aborted_pid, 0, committed=False)  # offset 2
            assert produce(client, TOPIC, 0, [b"a0", b"a1"], producer_id=open_pid,
                           producer_epoch=0, base_sequence=0, transactional=True) == (0, 3)
            assert produce(client, TOPIC, 0, [b"p1"]) == (0, 5)

            # Every replica: HW 6, LSO 3 (the open transaction), the same on followers.
            def settled() -> bool:
                states = [_replica(cluster, n) for n in cluster.broker_ids]
                return all(s is not None and s["high_watermark"] == 6
                           and s.get("last_stable_offset") == 3 for s in states)
            wait_until(settled, 30, "every replica at HW 6, LSO 3")

            old_leader = cluster.leader_of(TOPIC)
            cluster.kill(old_leader)
            wait_until(lambda: cluster.leader_of(TOPIC) not in (-1, old_leader), 60,
                       "a new leader")
            # The new leader still sees the transaction open: the LSO stays at 3.
            assert wait_until(lambda: _lso(cluster.bootstrap), 60, "the new leader's LSO") == 3
            write_txn_marker(client, TOPIC, 0, open_pid, 0, committed=True)  # offset 6
            assert produce(client, TOPIC, 0, [b"p2"]) == (0, 7)
            assert wait_until(lambda: _lso(cluster.bootstrap) == 8, 30, "LSO 8")

        expected = [b"p0", b"a0", b"a1", b"p1", b"p2"]
        assert read_committed_confluent(cluster.bootstrap, TOPIC, 0, b"p2") == expected
        assert read_committed_kafka_python(cluster.bootstrap, TOPIC, 0, b"p2") == expected

        # The killed broker comes back, catches up, and has the same LSO and aborted index.
        cluster.start_node(old_leader)

        def caught_up() -> bool:
            states = [_replica(cluster, n) for n in cluster.broker_ids]
            return all(s is not None and s["log_end_offset"] == 8 and s["high_watermark"] == 8
                       and s.get("last_stable_offset") == 8 for s in states)
        wait_until(caught_up, 60, "every replica at LEO/HW/LSO 8")
        for node in cluster.broker_ids:
            entries = [e for f in sorted(cluster.partition_dir(node, TOPIC).glob("*.txnindex"))
                       for e in decode_entries(f.read_bytes())]
            assert entries == [AbortedTxn(aborted_pid, 1, 2, 3)], f"broker {node}"
    finally:
        cluster.stop()
