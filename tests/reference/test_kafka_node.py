"""The real Kafka node itself (``kafka_node``): it serves what a client asks, and Kafka's own
command-line tools run against it (``./dev kafka tool NAME``)."""

from __future__ import annotations

import pytest

from floodmark.client.connection import KafkaConnection
from tests.reference.kafka_node import KafkaCluster, kafka_version, random_cluster_id, run_tool

pytestmark = pytest.mark.integration


def test_a_cluster_id_is_22_url_safe_characters() -> None:
    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)


def test_kafka_tools_run_against_the_node(kafka_broker: KafkaCluster) -> None:
    created = run_tool("kafka-topics", ["--bootstrap-server", kafka_broker.bootstrap, "--create",
                                        "--topic", "tool-check", "--partitions", "2"], check=True)
    assert "Created topic tool-check." in created.stdout
    with KafkaConnection(kafka_broker.bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": "tool-check", "topic_id": None}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert len(meta.topics[0].partitions) == 2
        versions = conn.request(18, 3, {"client_software_name": "floodmark",
                                        "client_software_version": "0"})
    assert int(versions.error_code) == 0
    end_txn = next(k for k in versions.api_keys if int(k.api_key) == 26)
    assert int(end_txn.max_version) >= 5, f"Kafka {kafka_version()} serves EndTxn v5 (KIP-890)"
