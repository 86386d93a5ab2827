"""Group configs are controller metadata (a ``group_configs`` record, Kafka's ConfigRecord of
resource type GROUP): set through one broker with confluent-kafka's AdminClient, every broker of
a 3-broker cluster answers them (replicated to each broker's metadata image), and after the
whole cluster is stopped and started again every broker still does (the controller's log and
snapshots keep them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from floodmark.client.connection import KafkaConnection
from floodmark.cluster import LocalCluster
from floodmark.wire.api_table import ApiKey
from tests.cluster.helpers import SESSION_TIMEOUT_MS, wait_until

pytestmark = pytest.mark.integration

GROUP_CONFIG_SOURCE = 8  # DYNAMIC_GROUP_CONFIG
WANTED = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}


def group_configs_at(address: str, group: str) -> dict[str, tuple[str, int]]:
    """The group's configs as one broker answers them: name -> (value, source)."""
    conn = KafkaConnection(address, timeout_s=5)
    try:
        answer = conn.request(int(ApiKey.DESCRIBE_CONFIGS), 4, {
            "resources": [{"resource_type": 32, "resource_name": group,
                           "configuration_keys": sorted(WANTED)}],
            "include_synonyms": False, "include_documentation": False})
    finally:
        conn.close()
    (res,) = answer.results
    assert int(res.error_code) == 0, res
    return {str(c.name): (str(c.value), int(c.config_source)) for c in res.configs}


def every_broker_answers(cluster: LocalCluster, group: str) -> bool:
    want = {name: (value, GROUP_CONFIG_SOURCE) for name, value in WANTED.items()}
    return all(group_configs_at(cluster.address(b), group) == want
               for b in cluster.broker_ids)


@pytest.mark.timeout(240)
def test_group_configs_reach_every_broker_and_survive_a_cluster_restart(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "gc-cluster", 3, {"group.share.enable": "true"},
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        res = ConfigResource(ResourceType.GROUP, "app", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in WANTED.items()])
        for future in admin.incremental_alter_configs([res]).values():
            future.result(30)
        wait_until(lambda: every_broker_answers(cluster, "app"), 30,
                   "every broker answers the group's configs")
        cluster.stop()
        cluster.start()
        wait_until(lambda: every_broker_answers(cluster, "app"), 60,
                   "every broker answers the group's configs after the restart")
    finally:
        cluster.stop()
