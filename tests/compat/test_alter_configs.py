"""Issue 9: topic configs altered at run time (IncrementalAlterConfigs and AlterConfigs) with
confluent-kafka's AdminClient and kafka-python's admin: validated by the setting registry,
decided by the controller, applied by every replica's broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.compat


def _set(admin: AdminClient, topic: str, **values: str) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in values.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    next(iter(admin.incremental_alter_configs([resource]).values())).result(30)


def _configs(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([resource])[resource].result(30).items()}


def _produce_error(bootstrap: str, topic: str, size: int) -> str | None:
    errors: list[str | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.max.bytes": 2_000_000,
                  "message.timeout.ms": 20000})
    p.produce(topic, value=b"x" * size,
              on_delivery=lambda err, _m: errors.append(err.name() if err else None))
    p.flush(30)
    return errors[0] if errors else "no delivery report"


def test_incremental_and_legacy_alter_configs(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("cfgalt", 1, 1)])["cfgalt"].result(30)
    assert _produce_error(broker.bootstrap, "cfgalt", 50_000) is None
    _set(admin, "cfgalt", max_message_bytes="10000", retention_ms="3600000")
    got = _configs(admin, "cfgalt")
    assert got["max.message.bytes"] == "10000" and got["retention.ms"] == "3600000"
    assert _produce_error(broker.bootstrap, "cfgalt", 50_000) == "MSG_SIZE_TOO_LARGE"
    # APPEND to a list config, DELETE back to the default.
    append = ConfigResource(ConfigResource.Type.TOPIC, "cfgalt", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    next(iter(admin.incremental_alter_configs([append]).values())).result(30)
    got = _configs(admin, "cfgalt")
    assert got["cleanup.policy"] == "delete,compact" and got["max.message.bytes"] == "1048588"
    # Live: the size limit is gone, and the topic is compacted now, so a record without a key
    # is refused (KIP-467's INVALID_RECORD).
    assert _produce_error(broker.bootstrap, "cfgalt", 50_000) == "INVALID_RECORD"
    # A bad value is refused with INVALID_CONFIG and nothing changes.
    with pytest.raises(KafkaException) as bad:
        _set(admin, "cfgalt", min_insync_replicas="abc")
    assert "INVALID_CONFIG" in str(bad.value)
    assert "min.insync.replicas" not in {k for k, v in _configs(admin, "cfgalt").items()
                                         if v == "abc"}
    # ... and at creation (issue 11: it used to reach the metadata and stop a broker).
    with pytest.raises(KafkaException) as at_create:
        admin.create_topics([NewTopic("cfgbad", 1, 1, config={"min.insync.replicas": "abc"})]
                            )["cfgbad"].result(30)
    assert "INVALID_CONFIG" in str(at_create.value)
    with pytest.raises(KafkaException) as unknown:
        _set(admin, "cfgalt", no_such_setting="1")
    assert "INVALID_CONFIG" in str(unknown.value)

    # kafka-python's alter_configs (the older API): the entries replace the whole set.
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        kp.alter_configs([KResource(ConfigResourceType.TOPIC, "cfgalt",
                                    configs={"retention.ms": "7200000"})])
    finally:
        kp.close()
    assert _configs(admin, "cfgalt")["retention.ms"] == "7200000"
    # AlterConfigs itself replaces the whole set (kafka-python re-sends the dynamic configs it
    # read first, so the raw request shows it): cleanup.policy returns to its default.
    from floodmark.client import KafkaConnection

    with KafkaConnection(broker.bootstrap) as conn:
        resp = conn.request(33, 2, {"resources": [
            {"resource_type": 2, "resource_name": "cfgalt",
             "configs": [{"name": "retention.ms", "value": "7200000"}]}],
            "validate_only": False})
    assert int(resp.responses[0].error_code) == 0
    got = _configs(admin, "cfgalt")
    assert got["retention.ms"] == "7200000" and got["cleanup.policy"] == "delete"

    # The new set survives a restart (it is in the controller's metadata log).
    broker.restart()
    assert _configs(AdminClient({"bootstrap.servers": broker.bootstrap}),
                    "cfgalt")["retention.ms"] == "7200000"


def test_every_broker_of_a_cluster_applies_the_change(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("cfgc", 1, 3)])["cfgc"].result(30)
        assert _produce_error(cluster.bootstrap, "cfgc", 50_000) is None
        _set(admin, "cfgc", max_message_bytes="10000")
        for node in (1, 2, 3):  # every broker's metadata has the new value
            one = AdminClient({"bootstrap.servers": cluster.address(node)})
            wait_until(lambda one=one: _configs(one, "cfgc").get("max.message.bytes") == "10000",
                       30, f"broker {node} to see the change")
        assert _produce_error(cluster.bootstrap, "cfgc", 50_000) == "MSG_SIZE_TOO_LARGE"
    finally:
        cluster.stop()
