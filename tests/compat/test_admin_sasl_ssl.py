"""confluent-kafka's AdminClient over SASL_SSL + SCRAM-SHA-512 against a real broker with the
ACL authorizer: what librdkafka's admin test (0081) does with ACLs, topics and configs, in the
place of that test (librdkafka's test suite is not built on these machines).

The admin (``super.users``) creates a topic, describes its configs and the broker's, creates a
LITERAL topic ACL and a PREFIXED group ACL for alice, describes them with filters (exact and
ANY/MATCH), deletes one; alice sees the topic in Metadata only while the ACL that implies
Describe exists, and her own CreateAcls is refused CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.security.client_security import ClientSecurity
from tests.conftest import BrokerProcess
from tests.tls_pki import make_pki

pytestmark = pytest.mark.compat

PASSWORDS = {"admin": "admin-secret-0081", "alice": "alice-secret-0081"}
TOPIC = "acl-0081"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    tmp = Path(tmp_path_factory.mktemp("admin-sasl-ssl"))
    pki = make_pki(tmp / "tls")
    process = BrokerProcess(tmp / "data", [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_SSL",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "--set", "ssl.keystore.type=PEM",
        "--set", f"ssl.keystore.location={pki.broker.keystore}",
        "--set", "authorizer.class.name="
                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--set", "super.users=User:admin",
        *(a for user, password in PASSWORDS.items()
          for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")),
    ]).start()
    yield process, pki.ca
    process.stop()


def _admin(broker: tuple[BrokerProcess, Path], user: str) -> AdminClient:
    process, ca = broker
    return AdminClient({"bootstrap.servers": process.bootstrap, "security.protocol": "SASL_SSL",
                        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
                        "sasl.password": PASSWORDS[user], "ssl.ca.location": str(ca)})


def _bindings(admin: AdminClient, f: AclBindingFilter) -> set[tuple[Any, ...]]:
    return {(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
             b.permission_type) for b in admin.describe_acls(f).result(30)}


def _key(b: AclBinding) -> tuple[Any, ...]:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
            b.permission_type)


def test_acls_topics_and_configs_over_sasl_ssl(broker: tuple[BrokerProcess, Path]) -> None:
    admin, alice = _admin(broker, "admin"), _admin(broker, "alice")
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"retention.ms": "3600000"})]
                        )[TOPIC].result(30)

    # DescribeConfigs: the topic's own value, and a broker's
    (topic_configs,) = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, TOPIC)]).values()
    entries = topic_configs.result(30)
    assert entries["retention.ms"].value == "3600000"
    assert not entries["retention.ms"].is_default
    node = admin.describe_cluster().result(30).nodes[0].id
    (broker_configs,) = admin.describe_configs(
        [ConfigResource(ResourceType.BROKER, str(node))]).values()
    assert broker_configs.result(30)["min.insync.replicas"].value == "1"

    # Metadata hides a topic alice may not Describe
    assert TOPIC not in alice.list_topics(timeout=30).topics

    read_topic = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                            "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    read_groups = AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED,
                             "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([read_topic, read_groups]).values():
        assert future.result(30) is None

    everything_of_alice = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)
    assert _bindings(admin, everything_of_alice) == {_key(read_topic), _key(read_groups)}
    # MATCH: the PREFIXED group ACL covers the group g-orders
    matching = AclBindingFilter(ResourceType.GROUP, "g-orders", ResourcePatternType.MATCH,
                                None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert _bindings(admin, matching) == {_key(read_groups)}
    # Read implies Describe: alice sees the topic now
    assert TOPIC in alice.list_topics(timeout=30).topics

    # alice may not write ACLs (Alter on the cluster), nor read them (Describe on it)
    refused = alice.create_acls([read_groups])[read_groups]
    with pytest.raises(KafkaException) as err:
        refused.result(30)
    assert err.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    # (confluent-kafka 2.16 answers DescribeAcls' top-level error with an empty list, so the
    # refusal is read on the wire with floodmark's client, as alice over SASL_SSL too)
    process, ca = broker
    sec = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": PASSWORDS["alice"], "ssl.ca.location": ca})
    with KafkaConnection(process.bootstrap, timeout_s=30, security=sec) as conn:
        answer = conn.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                      "pattern_type_filter": 1, "principal_filter": None,
                                      "host_filter": None, "operation": 1,
                                      "permission_type": 1})  # ANY of everything
    assert (int(answer.error_code), len(answer.resources)) == (
        int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), 0)

    # DeleteAcls by filter: the topic's ACL goes, the group's stays
    topic_filter = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                                    None, None, AclOperation.ANY, AclPermissionType.ANY)
    (deleted,) = admin.delete_acls([topic_filter]).values()
    assert {_key(b) for b in deleted.result(30)} == {_key(read_topic)}
    assert _bindings(admin, everything_of_alice) == {_key(read_groups)}
    assert TOPIC not in alice.list_topics(timeout=30).topics
