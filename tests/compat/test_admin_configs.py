"""Issue 9, bug 4 (partly): DescribeConfigs answers Kafka's value for flush.ms, not null, and topic
creation accepts file.delete.delay.ms, with confluent-kafka's AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

pytestmark = pytest.mark.compat


def test_flush_ms_and_file_delete_delay(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, 1, config={"file.delete.delay.ms": "60000"})]
                        )["cfg"].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["flush.ms"].value == "9223372036854775807"
    assert configs["file.delete.delay.ms"].value == "60000"


def test_authorized_operations_when_asked(broker) -> None:  # type: ignore[no-untyped-def]
    """KIP-430: Metadata v8-10 with include_*_authorized_operations answers the real set."""
    from floodmark.client import KafkaConnection

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ops", 1, 1)])["ops"].result(30)
    with KafkaConnection(broker.bootstrap) as conn:
        asked = conn.request(3, 10, {"topics": [{"name": "ops"}],
                                     "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": True,
                                     "include_topic_authorized_operations": True})
        plain = conn.request(3, 10, {"topics": [{"name": "ops"}],
                                     "allow_auto_topic_creation": False})
    ops = int(asked.topics[0].topic_authorized_operations)
    assert ops > 0 and ops & (1 << 3) and ops & (1 << 4)  # READ and WRITE
    assert int(asked.cluster_authorized_operations) & (1 << 12)  # IDEMPOTENT_WRITE
    assert int(plain.topics[0].topic_authorized_operations) == -(2**31)
