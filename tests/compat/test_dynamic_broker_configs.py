"""Dynamic broker configs (KIP-226, issue 9 Build 1): IncrementalAlterConfigs, AlterConfigs and
DescribeConfigs for BROKER resources (one broker's id and the cluster-wide default ""),
with confluent-kafka's AdminClient and kafka-python's admin. A change is checked by the setting
registry (read-only settings refused with Kafka's error and message), decided by the controller
as a metadata record, applied live (segments roll at the new log.segment.bytes, retention
deletes at the new log.retention.ms; min.insync.replicas on every broker of a cluster) and kept
across a restart; DescribeConfigs names the source of every value and its synonyms."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.compat

BROKER = ConfigResource.Type.BROKER


def _alter(admin: AdminClient, name: str, **sets: Any) -> None:
    """SET name=value (DELETE when the value is None) on broker resource ``name``; the
    cluster-wide default ("") by a raw IncrementalAlterConfigs v1 (neither Python client
    lets a broker resource be named "": kafka-configs.sh --entity-default does)."""
    if name == "":
        _alter_default(admin.bootstrap, **sets)  # type: ignore[attr-defined]
        return
    entries = [ConfigEntry(k.replace("_", "."), None if v is None else str(v),
                           incremental_operation=AlterConfigOpType.DELETE if v is None
                           else AlterConfigOpType.SET) for k, v in sets.items()]
    res = ConfigResource(BROKER, name, incremental_configs=entries)
    next(iter(admin.incremental_alter_configs([res]).values())).result(30)


class Admin(AdminClient):  # type: ignore[misc]
    def __init__(self, bootstrap: str) -> None:
        super().__init__({"bootstrap.servers": bootstrap})
        self.bootstrap = bootstrap


def _alter_default(bootstrap: str, **sets: Any) -> None:
    from floodmark.client import KafkaConnection

    configs = [{"name": k.replace("_", "."), "config_operation": 1 if v is None else 0,
                "value": None if v is None else str(v)} for k, v in sets.items()]
    with KafkaConnection(bootstrap) as conn:
        resp = conn.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "",
                                                   "configs": configs}],
                                    "validate_only": False})
    (res,) = resp.responses
    assert int(res.error_code) == 0, res.error_message


def _describe_default(bootstrap: str) -> dict[str, str | None]:
    from floodmark.client import KafkaConnection

    with KafkaConnection(bootstrap) as conn:
        resp = conn.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "",
                                                   "configuration_keys": None}],
                                    "include_synonyms": True, "include_documentation": False})
    (res,) = resp.results
    assert int(res.error_code) == 0, res.error_message
    assert all(int(c.config_source) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
               for c in res.configs)
    return {c.name: c.value for c in res.configs}


def _describe(admin: AdminClient, rtype: Any, name: str) -> dict[str, Any]:
    res = ConfigResource(rtype, name)
    fut = admin.describe_configs([res])[res]  # librdkafka asks for synonyms
    return dict(fut.result(30))


def _chain(bootstrap: str, rtype: int, name: str, config: str) -> list[tuple[str, str | None]]:
    """The synonyms of one config, from a raw DescribeConfigs v4 (confluent-kafka keeps them in
    a dict by name, so the layers of one name collapse there)."""
    from floodmark.client import KafkaConnection

    with KafkaConnection(bootstrap) as conn:
        resp = conn.request(32, 4, {"resources": [{"resource_type": rtype, "resource_name": name,
                                                   "configuration_keys": [config]}],
                                    "include_synonyms": True, "include_documentation": False})
    (entry,) = resp.results[0].configs
    return [(ConfigSource(int(s.source)).name, s.value) for s in entry.synonyms]


def _segments(data_dir: Path, topic: str) -> int:
    return len(list((data_dir / f"{topic}-0").glob("*.log")))


def _earliest(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dyn-probe"})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        c.close()


def test_broker_configs_dynamic_default_and_per_broker(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory("--set", "log.retention.ms=3600000",
                       "--set", "log.retention.check.interval.ms=300")
    admin = Admin(b.bootstrap)
    node = "1"

    got = _describe(admin, BROKER, node)
    ret = got["log.retention.ms"]
    assert ret.value == "3600000" and not ret.is_read_only
    assert ret.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert _chain(b.bootstrap, 4, node, "log.retention.ms") == [
        ("STATIC_BROKER_CONFIG", "3600000")]  # no DEFAULT: log.retention.ms is null (Kafka)
    assert got["num.partitions"].is_read_only
    assert got["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value

    admin.create_topics([NewTopic("dyn-t", 1, 1)])["dyn-t"].result(30)
    topic = _describe(admin, ConfigResource.Type.TOPIC, "dyn-t")
    assert topic["retention.ms"].value == "3600000"
    assert topic["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    # The cluster-wide default, then this broker's own value on top of it.
    _alter(admin, "", log_retention_ms=7200000, log_segment_bytes=2048)
    _alter(admin, node, log_retention_ms=5400000)
    got = _describe(admin, BROKER, node)
    assert got["log.retention.ms"].value == "5400000"
    assert got["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert _chain(b.bootstrap, 4, node, "log.retention.ms") == [
        ("DYNAMIC_BROKER_CONFIG", "5400000"), ("DYNAMIC_DEFAULT_BROKER_CONFIG", "7200000"),
        ("STATIC_BROKER_CONFIG", "3600000")]  # no DEFAULT: log.retention.ms is null (Kafka)
    assert got["log.segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    # min.insync.replicas: the controller's own, written with eligible leader replicas on
    assert _describe_default(b.bootstrap) == {"log.retention.ms": "7200000",
                                              "log.segment.bytes": "2048",
                                              "min.insync.replicas": "1"}
    topic = _describe(admin, ConfigResource.Type.TOPIC, "dyn-t")
    assert _chain(b.bootstrap, 2, "dyn-t", "retention.ms")[0] == (
        "DYNAMIC_BROKER_CONFIG", "5400000")
    assert topic["segment.bytes"].value == "2048"
    assert topic["segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    # Applied live: the topic (no segment.bytes of its own) rolls at 2048 bytes now ...
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    # ten minutes old: inside this broker's 5,400,000 ms (the periodic retention check, every
    # 300 ms here, must find nothing to delete yet), far past the 1,000 ms set below
    old_ms = int(time.time() * 1000) - 600_000
    for i in range(60):
        p.produce("dyn-t", value=b"x" * 200, key=b"%d" % i, timestamp=old_ms)
        p.flush(10)
    assert _segments(b.data_dir, "dyn-t") > 3
    assert _earliest(b.bootstrap, "dyn-t") == 0
    # ... and retention deletes at this broker's new log.retention.ms.
    _alter(admin, node, log_retention_ms=1000)
    wait_until(lambda: _earliest(b.bootstrap, "dyn-t") > 0, 30, "retention at the new value")

    # Read-only settings: Kafka's error and message; nothing changes.
    for name, bad in (("num.partitions", "5"), ("log.retention.ms", "soon")):
        res = ConfigResource(BROKER, node, incremental_configs=[
            ConfigEntry(name, bad, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as info:
            next(iter(admin.incremental_alter_configs([res]).values())).result(30)
        err = info.value.args[0]
        assert err.name() == "INVALID_REQUEST"
        expected = ("Cannot update these configs dynamically: Set(num.partitions)"
                    if name == "num.partitions" else "Not a number of type LONG")
        assert expected in err.str()
    assert _describe(admin, BROKER, node)["num.partitions"].value == "1"

    # Both layers survive a restart (they are metadata records), and still apply.
    b.restart()
    admin = Admin(b.bootstrap)
    got = _describe(admin, BROKER, node)
    assert got["log.retention.ms"].value == "1000"
    assert got["log.segment.bytes"].value == "2048"
    before = _segments(b.data_dir, "dyn-t")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for _ in range(30):
        p.produce("dyn-t", value=b"y" * 200)
        p.flush(10)
    assert _segments(b.data_dir, "dyn-t") > before or _earliest(b.bootstrap, "dyn-t") > 0

    # DELETE: this broker's value goes, the default shows through.
    _alter(admin, node, log_retention_ms=None)
    got = _describe(admin, BROKER, node)
    assert got["log.retention.ms"].value == "7200000"
    assert got["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_kafka_python_admin_alters_and_describes_a_broker(broker_factory) -> None:  # type: ignore[no-untyped-def]
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    b = broker_factory()
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=30000)
    try:
        done = kp.alter_configs([KResource(ConfigResourceType.BROKER, "1",
                                           {"log.cleaner.backoff.ms": "2000",
                                            "unclean.leader.election.enable": "true"})])
        assert done == {"broker": {"1": "OK"}}
        described = kp.describe_configs([KResource(ConfigResourceType.BROKER, "1")],
                                        include_synonyms=True, config_filter="all")
        text = repr(described)
        assert "log.cleaner.backoff.ms" in text and "'2000'" in text
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        got = _describe(admin, BROKER, "1")
        assert got["log.cleaner.backoff.ms"].value == "2000"
        assert got["unclean.leader.election.enable"].value == "true"
        assert got["unclean.leader.election.enable"].source == \
            ConfigSource.DYNAMIC_BROKER_CONFIG.value
        # kafka-python checks the read-only flags DescribeConfigs gave it ...
        with pytest.raises(ValueError, match=r"auto\.create\.topics\.enable"):
            kp.alter_configs([KResource(ConfigResourceType.BROKER, "1",
                                        {"auto.create.topics.enable": "false"})])
        # ... and sent anyway, the broker refuses with Kafka's error and message.
        refused = kp.alter_configs([KResource(ConfigResourceType.BROKER, "1",
                                              {"auto.create.topics.enable": "false"})],
                                   raise_on_unknown=False)["broker"]["1"]
        assert "InvalidRequest" in refused
        assert "Cannot update these configs dynamically: Set(auto.create.topics.enable)" in refused
    finally:
        kp.close()


def test_cluster_default_min_insync_replicas_applies_on_every_broker(tmp_path: Path) -> None:
    """min.insync.replicas=3 as the cluster-wide dynamic default: with one of three replicas
    down, acks=all produce is refused (NOT_ENOUGH_REPLICAS); deleted again, it succeeds."""
    cluster = start_cluster(tmp_path / "dyn-c")
    try:
        admin = Admin(cluster.bootstrap)
        admin.create_topics([NewTopic("dyn-c-t", 1, 3)])["dyn-c-t"].result(30)
        _alter(admin, "", min_insync_replicas=3)
        for node in (1, 2, 3):
            one = AdminClient({"bootstrap.servers": cluster.address(node)})
            wait_until(lambda one=one, node=node: _describe(one, BROKER, str(node))[
                "min.insync.replicas"].value == "3", 30, f"broker {node} to apply the default")
        leader = cluster.leader_of("dyn-c-t")
        victim = next(n for n in (1, 2, 3) if n != leader)
        cluster.kill(victim)

        def produce_error() -> str | None:
            errors: list[str | None] = []
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                          "message.timeout.ms": 8000, "retries": 0})
            p.produce("dyn-c-t", b"v", on_delivery=lambda e, _m: errors.append(
                None if e is None else e.name()))
            p.flush(15)
            return errors[0] if errors else "NO_ANSWER"

        wait_until(lambda: produce_error() == "NOT_ENOUGH_REPLICAS", 60,
                   "acks=all to be refused below the dynamic min ISR")
        _alter(admin, "", min_insync_replicas=None)
        wait_until(lambda: produce_error() is None, 60, "acks=all to succeed again")
    finally:
        cluster.stop()


def test_kerberos_settings_are_accepted_as_kafka_accepts_them(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """What librdkafka's admin test (0081) asks of a broker: AlterConfigs (the legacy API, as
    0081 sends it) setting sasl.kerberos.min.time.before.relogin on a broker succeeds, as on
    Kafka, although floodmark serves no GSSAPI; DescribeConfigs shows it as a dynamic broker
    config and the other Kerberos settings at Kafka's defaults. An unknown name is still
    refused."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(BROKER, "1", set_config={"sasl.kerberos.min.time.before.relogin":
                                                  "58000"})
    assert next(iter(admin.alter_configs([res]).values())).result(30) is None
    got = _describe(admin, BROKER, "1")
    assert got["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert got["sasl.kerberos.min.time.before.relogin"].source == \
        ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert got["sasl.kerberos.kinit.cmd"].value == "/usr/bin/kinit"
    unknown = ConfigResource(BROKER, "1", set_config={"sasl.kerberos.no.such.setting": "1"})
    with pytest.raises(KafkaException, match="Unknown broker config"):
        next(iter(admin.alter_configs([unknown]).values())).result(30)
