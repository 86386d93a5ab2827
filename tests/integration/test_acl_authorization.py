"""Authorization on a real broker process (authorizer.class.name=StandardAuthorizer).

Until SASL lands every connection is ``User:ANONYMOUS``, so the two sides of each test are told
apart by client host, which ACLs match too: the *admin* connects from 127.0.0.2 and holds ALL on
every resource type; the *user* connects from 127.0.0.1 and holds only what a test grants it.
The ACLs are set up under ``super.users=User:ANONYMOUS``, then the broker restarts without it
(so they also prove ACLs survive a restart). Written per (principal, host) so that it can run
per SASL user later: ``USER`` / ``USER_HOST`` are the only names of the caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.security.acl import AclOperation as Op
from floodmark.security.acl import AclPermissionType, PatternType, ResourceType
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.integration

AUTHORIZER = ["--set", "authorizer.class.name="
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]
USER, USER_HOST = "User:ANONYMOUS", "127.0.0.1"
ADMIN_HOST = "127.0.0.2"
RT = ResourceType
ALLOW = AclPermissionType.ALLOW


def _creation(rt: ResourceType, name: str, op: Op, host: str, pattern: PatternType =
              PatternType.LITERAL) -> dict[str, Any]:
    return {"resource_type": int(rt), "resource_name": name, "resource_pattern_type": int(pattern),
            "principal": USER, "host": host, "operation": int(op), "permission_type": int(ALLOW)}


def _filter(rt: ResourceType, name: str, op: Op, host: str) -> dict[str, Any]:
    return {"resource_type_filter": int(rt), "resource_name_filter": name,
            "pattern_type_filter": int(PatternType.LITERAL), "principal_filter": USER,
            "host_filter": host, "operation": int(op), "permission_type": int(ALLOW)}


ADMIN_ACLS = [_creation(RT.CLUSTER, "kafka-cluster", Op.ALL, ADMIN_HOST),
              _creation(RT.TOPIC, "*", Op.ALL, ADMIN_HOST),
              _creation(RT.GROUP, "*", Op.ALL, ADMIN_HOST),
              _creation(RT.TRANSACTIONAL_ID, "*", Op.ALL, ADMIN_HOST)]


class Cluster:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    def admin(self) -> KafkaConnection:
        return KafkaConnection(self.broker.bootstrap, timeout_s=10, source_host=ADMIN_HOST)

    def user(self) -> KafkaConnection:
        return KafkaConnection(self.broker.bootstrap, timeout_s=10, source_host=USER_HOST)

    def grant(self, *creations: dict[str, Any]) -> None:
        with self.admin() as c:
            r = c.request(30, 3, {"creations": list(creations)})
        assert [int(x.error_code) for x in r.results] == [0] * len(creations)

    def revoke(self, *creations: dict[str, Any]) -> None:
        filters = [{"resource_type_filter": c["resource_type"],
                    "resource_name_filter": c["resource_name"],
                    "pattern_type_filter": c["resource_pattern_type"],
                    "principal_filter": c["principal"], "host_filter": c["host"],
                    "operation": c["operation"], "permission_type": c["permission_type"]}
                   for c in creations]
        with self.admin() as c:
            r = c.request(31, 3, {"filters": filters})
        assert all(int(x.error_code) == 0 for x in r.filter_results)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data = tmp_path_factory.mktemp("acl") / "data"
    b = BrokerProcess(Path(data), [*AUTHORIZER, "--set", "super.users=User:ANONYMOUS"]).start()
    try:
        with KafkaConnection(b.bootstrap, timeout_s=10) as c:
            r = c.request(30, 3, {"creations": ADMIN_ACLS})
            assert [int(x.error_code) for x in r.results] == [0] * len(ADMIN_ACLS)
            r = c.request(19, 7, {"topics": [{"name": n, "num_partitions": 1,
                                              "replication_factor": 1, "assignments": [],
                                              "configs": []} for n in ("t1", "secret")],
                                  "timeout": 10000, "validate_only": False})
            assert [int(t.error_code) for t in r.topics] == [0, 0]
        b.stop()
        b.extra_args = list(AUTHORIZER)  # no super user from here on
        b.start()
        yield Cluster(b)
    finally:
        b.stop()


def _metadata(c: KafkaConnection, topics: list[str] | None) -> dict[str, int]:
    r = c.request(3, 12, {"topics": None if topics is None else [
        {"name": n, "topic_id": None} for n in topics], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True})
    return {t.name: int(t.error_code) for t in r.topics}


def test_acls_survive_restart_and_admin_apis_need_cluster_acls(cluster: Cluster) -> None:
    with cluster.admin() as c:
        r = c.request(29, 3, {"resource_type_filter": int(RT.ANY), "resource_name_filter": None,
                              "pattern_type_filter": int(PatternType.ANY),
                              "principal_filter": None, "host_filter": ADMIN_HOST,
                              "operation": int(Op.ANY), "permission_type": 1})
        assert int(r.error_code) == 0
        assert len(r.resources) == 4
    with cluster.user() as c:
        r = c.request(29, 3, {"resource_type_filter": int(RT.ANY), "resource_name_filter": None,
                              "pattern_type_filter": int(PatternType.ANY),
                              "principal_filter": None, "host_filter": None,
                              "operation": int(Op.ANY), "permission_type": 1})
        assert int(r.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        r = c.request(30, 3, {"creations": [_creation(RT.TOPIC, "x", Op.READ, "*")]})
        assert int(r.results[0].error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_create_acls_errors_as_kafka(cluster: Cluster) -> None:
    bad = dict(_creation(RT.TOPIC, "x", Op.READ, "*"), resource_type=int(RT.ANY))
    cluster_named = _creation(RT.CLUSTER, "other", Op.ALTER, "*")
    with cluster.admin() as c:
        r = c.request(30, 3, {"creations": [bad, cluster_named]})
    assert [int(x.error_code) for x in r.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "resourceType" in r.results[0].error_message
    assert "kafka-cluster" in r.results[1].error_message


def test_metadata_hides_and_refuses_undescribable_topics(cluster: Cluster) -> None:
    with cluster.user() as c:
        assert _metadata(c, None) == {}
        assert _metadata(c, ["t1"]) == {"t1": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert _metadata(c, ["nope"]) == {"nope": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant = _creation(RT.TOPIC, "t", Op.READ, USER_HOST, PatternType.PREFIXED)
    cluster.grant(grant)
    try:
        with cluster.user() as c:
            assert _metadata(c, None) == {"t1": 0}  # Read implies Describe; secret hidden
            r = c.request(3, 12, {"topics": [{"name": "t1", "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": True})
            ops = r.topics[0].topic_authorized_operations
            assert ops == (1 << Op.READ) | (1 << Op.DESCRIBE)
    finally:
        cluster.revoke(grant)


def _describe_topic_partitions(c: KafkaConnection, topics: list[str]) -> dict[str, int]:
    r = c.request(75, 0, {"topics": [{"name": n} for n in topics],
                          "response_partition_limit": 2000, "cursor": None})
    return {t.name: int(t.error_code) for t in r.topics}


def test_describe_topic_partitions_hides_and_refuses_undescribable_topics(
        cluster: Cluster) -> None:
    """As Metadata: every topic lists only the describable ones, a named one refused answers
    TOPIC_AUTHORIZATION_FAILED whether it exists or not."""
    with cluster.user() as c:
        assert _describe_topic_partitions(c, []) == {}
        assert _describe_topic_partitions(c, ["t1", "nope"]) == {
            "t1": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "nope": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant = _creation(RT.TOPIC, "t", Op.READ, USER_HOST, PatternType.PREFIXED)
    cluster.grant(grant)
    try:
        with cluster.user() as c:
            assert _describe_topic_partitions(c, []) == {"t1": 0}  # secret hidden
            r = c.request(75, 0, {"topics": [{"name": "t1"}, {"name": "secret"}],
                                  "response_partition_limit": 2000, "cursor": None})
            answers = {t.name: (int(t.error_code), t.topic_authorized_operations,
                                len(t.partitions)) for t in r.topics}
            assert answers == {
                "t1": (0, (1 << Op.READ) | (1 << Op.DESCRIBE), 1),
                "secret": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -(2**31), 0)}
    finally:
        cluster.revoke(grant)


def test_list_config_resources_needs_describe_configs_on_the_cluster(cluster: Cluster) -> None:
    with cluster.user() as c:
        r = c.request(74, 1, {"resource_types": [2]})
        assert (int(r.error_code), list(r.config_resources)) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    with cluster.admin() as c:
        r = c.request(74, 1, {"resource_types": [2]})
        assert int(r.error_code) == 0
        assert {"t1", "secret"} <= {x.resource_name for x in r.config_resources}


# -- the matrix: each API without its ACL is refused and changes nothing; with it, it works ---
def _produce(c: KafkaConnection, topic: str) -> int:
    from floodmark.records import simple_batch
    batch = simple_batch([b"v"])
    r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


def _end_offset(c: KafkaConnection, topic: str) -> int:
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].offset)


def _list_offsets_error(c: KafkaConnection, topic: str) -> int:
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].error_code)


def _fetch_error(c: KafkaConnection, topic: str) -> int:
    r = c.request(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                          "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                          "topics": [{"topic": topic, "partitions": [
                              {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                               "last_fetched_epoch": -1, "log_start_offset": -1,
                               "partition_max_bytes": 1 << 20}]}],
                          "forgotten_topics_data": [], "rack_id": ""})
    return int(r.responses[0].partitions[0].error_code)


def _create_topic_error(c: KafkaConnection, name: str) -> int:
    r = c.request(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}],
                          "timeout": 10000, "validate_only": False})
    return int(r.topics[0].error_code)


def _topic_exists(cluster: Cluster, name: str) -> bool:
    with cluster.admin() as c:
        return _metadata(c, [name]).get(name) == 0


def _describe_configs_error(c: KafkaConnection, topic: str) -> int:
    r = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                         "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    return int(r.results[0].error_code)


def _join_error(c: KafkaConnection, group: str) -> int:
    r = c.request(11, 5, {"group_id": group, "session_timeout": 10000,
                          "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                          "protocol_type": "consumer",
                          "protocols": [{"name": "range", "metadata": b""}]})
    return int(r.error_code)


def _init_pid_error(c: KafkaConnection, txn: str | None) -> int:
    r = c.request(22, 4, {"transactional_id": txn, "transaction_timeout": 60000,
                          "producer_id": -1, "producer_epoch": -1})
    return int(r.error_code)


def test_matrix_produce_needs_write_and_writes_nothing_without(cluster: Cluster) -> None:
    with cluster.admin() as admin:
        before = _end_offset(admin, "t1")
    with cluster.user() as c:
        assert _produce(c, "t1") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with cluster.admin() as admin:
        assert _end_offset(admin, "t1") == before
    grant = _creation(RT.TOPIC, "t1", Op.WRITE, USER_HOST)
    cluster.grant(grant)
    try:
        with cluster.user() as c:
            assert _produce(c, "t1") == 0
        with cluster.admin() as admin:
            assert _end_offset(admin, "t1") == before + 1
    finally:
        cluster.revoke(grant)


@pytest.mark.parametrize("api,op,rt,name,call,denied", [
    ("Fetch", Op.READ, RT.TOPIC, "t1", lambda c: _fetch_error(c, "t1"),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("ListOffsets", Op.DESCRIBE, RT.TOPIC, "t1", lambda c: _list_offsets_error(c, "t1"),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeConfigs", Op.DESCRIBE_CONFIGS, RT.TOPIC, "t1",
     lambda c: _describe_configs_error(c, "t1"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ("JoinGroup", Op.READ, RT.GROUP, "g1", lambda c: _join_error(c, "g1"),
     ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ("InitProducerId(txn)", Op.WRITE, RT.TRANSACTIONAL_ID, "tx1",
     lambda c: _init_pid_error(c, "tx1"), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("InitProducerId(idempotent)", Op.IDEMPOTENT_WRITE, RT.CLUSTER, "kafka-cluster",
     lambda c: _init_pid_error(c, None), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
])
def test_matrix_read_apis(cluster: Cluster, api: str, op: Op, rt: ResourceType, name: str,
                          call: Any, denied: ErrorCode) -> None:
    with cluster.user() as c:
        assert call(c) == denied, api
    grant = _creation(rt, name, op, USER_HOST)
    cluster.grant(grant)
    try:
        with cluster.user() as c:
            result = call(c)
        # JoinGroup's first answer asks a new member to rejoin with its id (KIP-394)
        assert result in (0, ErrorCode.MEMBER_ID_REQUIRED), (api, result)
    finally:
        cluster.revoke(grant)


def test_matrix_create_and_delete_topics(cluster: Cluster) -> None:
    with cluster.user() as c:
        assert _create_topic_error(c, "made") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert not _topic_exists(cluster, "made")
    grant = _creation(RT.TOPIC, "made", Op.CREATE, USER_HOST)
    cluster.grant(grant)
    try:
        with cluster.user() as c:
            assert _create_topic_error(c, "made") == 0
        assert _topic_exists(cluster, "made")
        with cluster.user() as c:
            r = c.request(20, 6, {"topics": [{"name": "made", "topic_id": None}],
                                  "timeout": 10000})
            assert int(r.responses[0].error_code) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _topic_exists(cluster, "made")
    finally:
        cluster.revoke(grant)


def test_matrix_cluster_alter_apis(cluster: Cluster) -> None:
    with cluster.user() as c:
        r = c.request(43, 2, {"election_type": 0, "topic_partitions": [
            {"topic": "t1", "partitions": [0]}], "timeout": 5000})
        assert int(r.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        r = c.request(35, 4, {"topics": None})
        assert int(r.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_confluent_admin_client_acls(cluster: Cluster) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import AclOperation as COp
    from confluent_kafka.admin import AclPermissionType as CPerm
    from confluent_kafka.admin import ResourceType as CRT
    cluster.grant(_creation(RT.CLUSTER, "kafka-cluster", Op.ALTER, USER_HOST))
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker.bootstrap})
        binding = AclBinding(CRT.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice",
                             "*", COp.READ, CPerm.ALLOW)
        for f in admin.create_acls([binding]).values():
            assert f.result() is None
        # MATCH: what applies to orders-1 (the admin's "*" too, left out by the principal)
        flt = AclBindingFilter(CRT.TOPIC, "orders-1", ResourcePatternType.MATCH, "User:alice",
                               None, COp.ANY, CPerm.ANY)
        assert admin.describe_acls(flt).result(timeout=10) == [binding]  # Alter implies Describe
        deleted = [b for f in admin.delete_acls([flt]).values() for b in f.result()]
        assert deleted == [binding]
        assert admin.describe_acls(flt).result(timeout=10) == []
    finally:
        cluster.revoke(_creation(RT.CLUSTER, "kafka-cluster", Op.ALTER, USER_HOST))


def test_kafka_python_admin_acls(cluster: Cluster) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as KPT
    from kafka.admin import ResourceType as KRT
    cluster.grant(_creation(RT.CLUSTER, "kafka-cluster", Op.ALTER, USER_HOST))
    admin = KafkaAdminClient(bootstrap_servers=cluster.broker.bootstrap)
    try:
        acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KRT.GROUP, "g-bob", KPT.LITERAL))
        result = admin.create_acls([acl])
        assert result["failed"] == [], result
        flt = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KRT.ANY, None, KPT.ANY))
        found, _error = admin.describe_acls(flt)
        assert [(a.principal, a.resource_pattern.resource_name) for a in found] == [
            ("User:bob", "g-bob")]
        removed = admin.delete_acls([flt])
        assert len(removed[0][1]) == 1
    finally:
        admin.close()
        cluster.revoke(_creation(RT.CLUSTER, "kafka-cluster", Op.ALTER, USER_HOST))


def test_cli_acl_add_list_remove(cluster: Cluster, tmp_path: Path) -> None:
    import subprocess
    import sys
    config = tmp_path / "client.properties"
    config.write_text("# until TLS/SASL: nothing to set\nsecurity.protocol=PLAINTEXT\n")
    base = ["--bootstrap-server", cluster.broker.bootstrap, "--command-config", str(config)]

    def acl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "floodmark.cli", "acl", *args, *base],
                              capture_output=True, text=True, timeout=60)

    refused = acl("add", "--allow-principal", "User:carol", "--operation", "Read",
                  "--topic", "reports")
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stdout
    grant = _creation(RT.CLUSTER, "kafka-cluster", Op.ALTER, USER_HOST)
    cluster.grant(grant)
    try:
        added = acl("add", "--allow-principal", "User:carol", "--operation", "Read",
                    "--operation", "Describe", "--topic", "reports",
                    "--resource-pattern-type", "prefixed")
        assert added.returncode == 0, added.stdout + added.stderr
        listed = acl("list", "--topic", "reports", "--resource-pattern-type", "prefixed")
        assert "User:carol has ALLOW permission for operation READ from host *" in listed.stdout
        removed = acl("remove", "--allow-principal", "User:carol", "--operation", "Read",
                      "--operation", "Describe", "--topic", "reports",
                      "--resource-pattern-type", "prefixed")
        assert removed.returncode == 0 and removed.stdout.count("removed") == 2, removed.stdout
        assert "carol" not in acl("list", "--topic", "reports").stdout
        bad = acl("add", "--allow-principal", "User:carol", "--operation", "Write",
                  "--group", "g")
        assert bad.returncode == 1 and "does not support" in bad.stderr + bad.stdout
    finally:
        cluster.revoke(grant)
