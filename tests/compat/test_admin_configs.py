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
