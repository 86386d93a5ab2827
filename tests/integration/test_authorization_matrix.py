"""The authorization matrix (issue 21): every API the broker serves, called by a principal
without the ACL it needs, gets Kafka's answer (TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_
AUTHORIZATION_FAILED, or a list filtered down to what it may Describe) and changes nothing;
granted the ACLs Kafka's per-API table names, the same call is allowed.

One broker process for the module: a SASL_PLAINTEXT listener with SCRAM-SHA-512 users ``admin``
(in ``super.users``: it sets things up and grants) and ``alice`` (the principal under test, who
holds only what a case grants, for the length of that case). ``CASES`` is keyed by API: a new
API in the API table without a case fails ``test_every_served_api_has_a_case``. The table it
follows is Kafka's "Operations and Resources on Protocols" as ``KafkaApis`` applies it (where
the two differ, the code wins; docs/security.md lists those rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.authorization import CHECKS
from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.security.acl import AclOperation as Op
from floodmark.security.acl import AclPermissionType, PatternType, ResourceType
from floodmark.security.client_security import ClientSecurity
from floodmark.wire.api_table import ApiKey
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.integration

RT = ResourceType
E = ErrorCode
ALICE = "User:alice"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
AUTH_ERRORS = frozenset({int(E.TOPIC_AUTHORIZATION_FAILED), int(E.GROUP_AUTHORIZATION_FAILED),
                         int(E.CLUSTER_AUTHORIZATION_FAILED),
                         int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)})
TOPIC_DENIED = int(E.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(E.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(E.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
CLUSTER = "kafka-cluster"
BROKER_ID = "1"
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_GROUP = 2, 4, 32


def _security(user: str) -> ClientSecurity:
    return ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": PASSWORDS[user]})


@dataclass(frozen=True)
class Grant:
    rt: ResourceType
    name: str
    op: Op

    def creation(self, permission: AclPermissionType = AclPermissionType.ALLOW,
                 pattern: PatternType = PatternType.LITERAL) -> dict[str, Any]:
        """The ACL entry granting this (or, with DENY, refusing it) to alice; a PREFIXED
        pattern covers the name by its first character, a LITERAL ``*`` by the wildcard (the
        cluster resource has one name, ``kafka-cluster``, always literal, as Kafka requires)."""
        if self.rt is RT.CLUSTER:
            pattern = PatternType.LITERAL
        name = {PatternType.LITERAL: self.name, PatternType.PREFIXED: self.name[:1],
                PatternType.MATCH: "*"}[pattern]
        return {"resource_type": int(self.rt), "resource_name": name,
                "resource_pattern_type": int(PatternType.LITERAL if pattern is PatternType.MATCH
                                             else pattern),
                "principal": ALICE, "host": "*", "operation": int(self.op),
                "permission_type": int(permission)}


class Broker:
    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self._admin: KafkaConnection | None = None

    def connect(self, user: str) -> KafkaConnection:
        return KafkaConnection(self.process.bootstrap, timeout_s=15, security=_security(user))

    def admin(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """As the super user, on one connection kept for the module."""
        if self._admin is None:
            self._admin = self.connect("admin")
        return self._admin.request(api_key, version, body)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()

    def grant(self, grants: tuple[Grant, ...]) -> None:
        if grants:
            r = self.admin(30, 3, {"creations": [g.creation() for g in grants]})
            assert [int(x.error_code) for x in r.results] == [0] * len(grants)

    def deny(self, grants: tuple[Grant, ...], pattern: PatternType) -> None:
        if grants:
            r = self.admin(30, 3, {"creations": [g.creation(AclPermissionType.DENY, pattern)
                                                 for g in grants]})
            assert [int(x.error_code) for x in r.results] == [0] * len(grants)

    def revoke_all(self) -> None:
        r = self.admin(31, 3, {"filters": [{
            "resource_type_filter": int(RT.ANY), "resource_name_filter": None,
            "pattern_type_filter": int(PatternType.ANY), "principal_filter": ALICE,
            "host_filter": None, "operation": int(Op.ANY),
            "permission_type": int(AclPermissionType.ANY)}]})
        assert all(int(x.error_code) == 0 for x in r.filter_results)


# -- probes: what a refused call must leave as it was --------------------------------------------
def _end_offset(b: Broker, topic: str) -> int:
    r = b.admin(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].offset)


def _log_start(b: Broker, topic: str) -> int:
    r = b.admin(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -2}]}]})
    return int(r.topics[0].partitions[0].offset)


def _topics(b: Broker) -> dict[str, int]:
    """Every topic and its partition count, as the admin sees them."""
    r = b.admin(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {t.name: len(t.partitions) for t in r.topics}


def _committed(b: Broker, group: str, topic: str) -> int:
    r = b.admin(9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                   "topics": [{"name": topic, "partition_indexes": [0]}]}],
                       "require_stable": False})
    return int(r.groups[0].topics[0].partitions[0].committed_offset)


def _groups(b: Broker) -> list[str]:
    return sorted(g.group_id for g in b.admin(16, 4, {"states_filter": []}).groups)


def _acls(b: Broker) -> list[tuple[int, str, str]]:
    r = b.admin(29, 3, {"resource_type_filter": int(RT.ANY), "resource_name_filter": None,
                        "pattern_type_filter": int(PatternType.ANY), "principal_filter": None,
                        "host_filter": None, "operation": int(Op.ANY),
                        "permission_type": int(AclPermissionType.ANY)})
    return sorted((int(res.resource_type), res.resource_name, a.principal)
                  for res in r.resources for a in res.acls)


def _topic_config(b: Broker, topic: str, key: str) -> str | None:
    r = b.admin(32, 4, {"resources": [{"resource_type": CONFIG_TOPIC, "resource_name": topic,
                                       "configuration_keys": [key]}],
                        "include_synonyms": False, "include_documentation": False})
    return next((c.value for c in r.results[0].configs if c.name == key), None)


def _scram_users(b: Broker) -> list[str]:
    return sorted(u.user for u in b.admin(50, 0, {"users": None}).results)


def _quotas(b: Broker) -> int:
    r = b.admin(48, 1, {"components": [], "strict": False})
    return len(r.entries or ())


# -- the calls ------------------------------------------------------------------------------------
def _errors(*codes: Any) -> tuple[int, ...]:
    return tuple(int(c) for c in codes)


def _produce(topic: str, txn: str | None = None) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(0, 9, {"transactional_id": txn, "acks": 1, "timeout": 5000,
                             "topic_data": [{"name": topic, "partition_data": [
                                 {"index": 0, "records": simple_batch([b"v"])}]}]})
        return _errors(r.responses[0].partition_responses[0].error_code)
    return call


def _fetch(topic: str, replica_id: int = -1) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(1, 12, {"replica_id": replica_id, "max_wait": 0, "min_bytes": 0,
                              "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                              "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                                  {"partition": 0, "current_leader_epoch": -1,
                                   "fetch_offset": 0, "last_fetched_epoch": -1,
                                   "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                              "forgotten_topics_data": [], "rack_id": ""})
        return _errors(r.responses[0].partitions[0].error_code)
    return call


def _list_offsets(c: KafkaConnection) -> Any:
    r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                       "timestamp": -1}]}]})
    return _errors(r.topics[0].partitions[0].error_code)


def _metadata_named(name: str, auto_create: bool = False) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(3, 12, {"topics": [{"name": name, "topic_id": None}],
                              "allow_auto_topic_creation": auto_create,
                              "include_topic_authorized_operations": False})
        return _errors(*(t.error_code for t in r.topics))
    return call


def _metadata_all(c: KafkaConnection) -> Any:
    r = c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    return sorted(t.name for t in r.topics if not t.name.startswith("__"))


def _metadata_cluster_operations(c: KafkaConnection) -> Any:
    r = c.request(3, 10, {"topics": [], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": True})
    return int(r.cluster_authorized_operations)


def _offset_commit(c: KafkaConnection) -> Any:
    r = c.request(8, 9, {"group_id": "g-commit", "generation_id_or_member_epoch": -1,
                         "member_id": "", "group_instance_id": None, "topics": [
                             {"name": "t1", "partitions": [
                                 {"partition_index": 0, "committed_offset": 7,
                                  "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    return _errors(r.topics[0].partitions[0].error_code)


def _offset_fetch(c: KafkaConnection) -> Any:
    r = c.request(9, 9, {"groups": [{"group_id": "g-listed", "member_id": None,
                                     "member_epoch": -1, "topics": [
                                         {"name": "t1", "partition_indexes": [0]}]}],
                         "require_stable": False})
    g = r.groups[0]
    return _errors(g.error_code, *(p.error_code for t in g.topics for p in t.partitions))


def _find_coordinator(key_type: int, key: str) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
        return _errors(r.coordinators[0].error_code)
    return call


def _join(c: KafkaConnection) -> Any:
    r = c.request(11, 7, {"group_id": "g-join", "session_timeout": 10000,
                          "rebalance_timeout": 10000, "member_id": "",
                          "group_instance_id": None, "protocol_type": "consumer",
                          "protocols": [{"name": "range", "metadata": b""}]})
    return _errors(r.error_code)


def _heartbeat(c: KafkaConnection) -> Any:
    return _errors(c.request(12, 4, {"group_id": "g-join", "generation_id": 1,
                                     "member_id": "m", "group_instance_id": None}).error_code)


def _leave(c: KafkaConnection) -> Any:
    r = c.request(13, 5, {"group_id": "g-join", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]})
    return _errors(r.error_code)


def _sync(c: KafkaConnection) -> Any:
    return _errors(c.request(14, 5, {"group_id": "g-join", "generation_id": 1,
                                     "member_id": "m", "group_instance_id": None,
                                     "protocol_type": "consumer", "protocol_name": "range",
                                     "assignments": []}).error_code)


def _describe_groups(c: KafkaConnection) -> Any:
    r = c.request(15, 5, {"groups": ["g-listed"], "include_authorized_operations": True})
    return _errors(r.groups[0].error_code)


def _list_groups(c: KafkaConnection) -> Any:
    return sorted(g.group_id for g in c.request(16, 4, {"states_filter": []}).groups)


def _cg_heartbeat(c: KafkaConnection) -> Any:
    """KIP-848: a new member of consumer group g-848 subscribing to t1."""
    r = c.request(68, 1, {"group_id": "g-848", "member_id": "m-matrix", "member_epoch": 0,
                          "rebalance_timeout": 30000, "subscribed_topic_names": ["t1"],
                          "topic_partitions": []})
    return _errors(r.error_code)


def _cg_describe(c: KafkaConnection) -> Any:
    r = c.request(69, 1, {"group_ids": ["g-848"], "include_authorized_operations": False})
    return _errors(r.groups[0].error_code)


# KIP-932's share groups (the broker runs with group.share.enable=true)
def _topic_id(c: KafkaConnection, topic: str) -> Any:
    r = c.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                          "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False})
    return r.topics[0].topic_id


def _share_heartbeat(c: KafkaConnection) -> Any:
    r = c.request(76, 1, {"group_id": "g-share", "member_id": "m-share", "member_epoch": 0,
                          "subscribed_topic_names": ["t1"]})
    return _errors(r.error_code)


def _share_describe(c: KafkaConnection) -> Any:
    r = c.request(77, 1, {"group_ids": ["g-share"], "include_authorized_operations": False})
    return _errors(r.groups[0].error_code)


def _share_state(api_key: int, **fields: Any) -> Callable[[KafkaConnection], Any]:
    """The share coordinator's inter-broker APIs (84-87) for t1-0 of group g-state."""
    def call(c: KafkaConnection) -> Any:
        r = c.request(api_key, 0, {"group_id": "g-state", "topics": [
            {"topic_id": _topic_id(c, "t1"), "partitions": [{"partition": 0, **fields}]}]})
        return _errors(*(p.error_code for t in r.results for p in t.partitions))
    return call


def _share_fetch(c: KafkaConnection) -> Any:
    topic_id = _topic_id(c, "t1")
    r = c.request(78, 1, {"group_id": "g-share", "member_id": "m-share",
                          "share_session_epoch": 0, "max_wait": 0, "min_bytes": 1,
                          "max_records": 1, "batch_size": 1, "forgotten_topics_data": [],
                          "topics": [{"topic_id": topic_id, "partitions": [
                              {"partition_index": 0, "acknowledgement_batches": []}]}]})
    return _errors(r.error_code, *(p.error_code for t in r.responses for p in t.partitions))


def _share_acknowledge(c: KafkaConnection) -> Any:
    topic_id = _topic_id(c, "t1")
    r = c.request(79, 1, {"group_id": "g-share", "member_id": "m-share-ack",
                          "share_session_epoch": -1, "topics": [{"topic_id": topic_id,
                          "partitions": [{"partition_index": 0,
                                          "acknowledgement_batches": []}]}]})
    return _errors(r.error_code, *(p.error_code for t in r.responses for p in t.partitions))


def _describe_share_offsets(c: KafkaConnection) -> Any:
    r = c.request(90, 0, {"groups": [{"group_id": "g-share-offsets", "topics": [
        {"topic_name": "t1", "partitions": [0]}]}]})
    return _errors(r.groups[0].error_code)


def _alter_share_offsets(c: KafkaConnection) -> Any:
    r = c.request(91, 0, {"group_id": "g-share-offsets", "topics": [
        {"topic_name": "t1", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
    return _errors(r.error_code, *(p.error_code for t in r.responses for p in t.partitions))


def _delete_share_offsets(c: KafkaConnection) -> Any:
    r = c.request(92, 0, {"group_id": "g-share-offsets", "topics": [{"topic_name": "t1"}]})
    return _errors(r.error_code, *(t.error_code for t in r.responses))


def _api_versions(c: KafkaConnection) -> Any:
    return _errors(c.request(18, 3, {"client_software_name": "matrix",
                                     "client_software_version": "1"}).error_code)


def _authenticates(c: KafkaConnection) -> Any:
    """SaslHandshake / SaslAuthenticate: the connection ``c`` was opened by both."""
    return "authenticated"


def _create_topic(c: KafkaConnection) -> Any:
    r = c.request(19, 7, {"topics": [{"name": "made", "num_partitions": 1,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": []}],
                          "timeout": 10000, "validate_only": False})
    t = r.topics[0]
    return _errors(t.error_code, t.topic_config_error_code)


def _delete_topic(c: KafkaConnection) -> Any:
    r = c.request(20, 6, {"topics": [{"name": "doomed", "topic_id": None}], "timeout": 10000})
    return _errors(r.responses[0].error_code)


def _delete_records(c: KafkaConnection) -> Any:
    r = c.request(21, 2, {"topics": [{"name": "trimmed", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 10000})
    return _errors(r.topics[0].partitions[0].error_code)


def _describe_producers(c: KafkaConnection) -> Any:
    r = c.request(61, 0, {"topics": [{"name": "t1", "partition_indexes": [0]}]})
    return _errors(r.topics[0].partitions[0].error_code)


def _token_error(api_key: int, version: int, body: dict[str, Any]
                 ) -> Callable[[KafkaConnection], Any]:
    """A delegation token API's error code, read from the raw answer: a refusal carries
    Kafka's -1 times, which kio's reader refuses (flexible versions: correlation id, tags)."""
    def call(c: KafkaConnection) -> Any:
        c.send(api_key, version, body)
        size = int.from_bytes(bytes(c._read_exact(4)), "big")
        frame = bytes(c._read_exact(size))
        return _errors(int.from_bytes(frame[5:7], "big", signed=True))
    return call


def _describe_tokens(c: KafkaConnection) -> Any:
    r = c.request(41, 3, {"owners": None})
    return sorted(t.principal_name for t in r.tokens)


def _unregister_broker(c: KafkaConnection) -> Any:
    return _errors(c.request(64, 0, {"broker_id": 9}).error_code)


def _init_producer_id(txn: str | None) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        return _errors(c.request(22, 4, {"transactional_id": txn, "transaction_timeout": 60000,
                                         "producer_id": -1, "producer_epoch": -1}).error_code)
    return call


def _offset_for_leader_epoch(replica_id: int) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(23, 4, {"replica_id": replica_id, "topics": [
            {"topic": "t1", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                            "leader_epoch": 0}]}]})
        return _errors(r.topics[0].partitions[0].error_code)
    return call


def _add_partitions_to_txn(c: KafkaConnection) -> Any:
    r = c.request(24, 3, {"v3_and_below_transactional_id": "tx1",
                          "v3_and_below_producer_id": 4242, "v3_and_below_producer_epoch": 0,
                          "v3_and_below_topics": [{"name": "t1", "partitions": [0]}]})
    return _errors(*(p.partition_error_code for t in r.results_by_topic_v3_and_below
                     for p in t.results_by_partition))


def _add_partitions_to_txn_by_broker(c: KafkaConnection) -> Any:
    r = c.request(24, 5, {"transactions": [
        {"transactional_id": "tx1", "producer_id": 4242, "producer_epoch": 0,
         "verify_only": True, "topics": [{"name": "t1", "partitions": [0]}]}]})
    return _errors(r.error_code)


def _add_offsets_to_txn(c: KafkaConnection) -> Any:
    return _errors(c.request(25, 4, {"transactional_id": "tx1", "producer_id": 4242,
                                     "producer_epoch": 0, "group_id": "g-txn"}).error_code)


def _end_txn(c: KafkaConnection) -> Any:
    return _errors(c.request(26, 4, {"transactional_id": "tx1", "producer_id": 4242,
                                     "producer_epoch": 0, "committed": False}).error_code)


def _write_txn_markers(c: KafkaConnection) -> Any:
    r = c.request(27, 1, {"markers": [{"producer_id": 4242, "producer_epoch": 0,
                                       "transaction_result": False, "coordinator_epoch": 0,
                                       "topics": [{"name": "markers",
                                                   "partition_indexes": [0]}]}]})
    return _errors(*(p.error_code for m in r.markers for t in m.topics for p in t.partitions))


def _txn_offset_commit(c: KafkaConnection) -> Any:
    r = c.request(28, 4, {"transactional_id": "tx1", "group_id": "g-txn", "producer_id": 4242,
                          "producer_epoch": 0, "generation_id": -1, "member_id": "",
                          "group_instance_id": None, "topics": [{"name": "t1", "partitions": [
                              {"partition_index": 0, "committed_offset": 1,
                               "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    return _errors(r.topics[0].partitions[0].error_code)


ANY_ACL_FILTER = {"resource_type_filter": int(RT.ANY), "resource_name_filter": None,
                  "pattern_type_filter": int(PatternType.ANY), "principal_filter": None,
                  "host_filter": None, "operation": int(Op.ANY),
                  "permission_type": int(AclPermissionType.ANY)}


def _describe_acls(c: KafkaConnection) -> Any:
    return _errors(c.request(29, 3, ANY_ACL_FILTER).error_code)


def _create_acls(c: KafkaConnection) -> Any:
    made = Grant(RT.TOPIC, "by-alice", Op.READ).creation()
    r = c.request(30, 3, {"creations": [{**made, "principal": "User:made-by-alice"}]})
    return _errors(r.results[0].error_code)


def _delete_acls(c: KafkaConnection) -> Any:
    r = c.request(31, 3, {"filters": [{**ANY_ACL_FILTER, "principal_filter": "User:bob"}]})
    return _errors(r.filter_results[0].error_code)


def _describe_configs(resource_type: int, name: str) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(32, 4, {"resources": [{"resource_type": resource_type,
                                             "resource_name": name,
                                             "configuration_keys": None}],
                              "include_synonyms": False, "include_documentation": False})
        return _errors(r.results[0].error_code)
    return call


def _alter_configs(c: KafkaConnection) -> Any:
    r = c.request(33, 2, {"resources": [{"resource_type": CONFIG_TOPIC, "resource_name": "t1",
                                         "configs": [{"name": "retention.ms",
                                                      "value": "3600000"}]}],
                          "validate_only": False})
    return _errors(r.responses[0].error_code)


def _incremental_alter_configs(resource_type: int, name: str, key: str, value: str
                               ) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(44, 1, {"resources": [{"resource_type": resource_type,
                                             "resource_name": name, "configs": [
                                                 {"name": key, "config_operation": 0,
                                                  "value": value}]}],
                              "validate_only": False})
        return _errors(r.responses[0].error_code)
    return call


def _describe_log_dirs(c: KafkaConnection) -> Any:
    r = c.request(35, 4, {"topics": None})
    return _errors(r.error_code), len(r.results) > 0


def _alter_replica_log_dirs(c: KafkaConnection) -> Any:
    # Not one of the broker's log dirs: LOG_DIR_NOT_FOUND once authorized, nothing moved.
    r = c.request(34, 2, {"dirs": [{"path": "/nowhere/jbod", "topics": [
        {"name": "t1", "partitions": [0]}]}]})
    return _errors(r.results[0].partitions[0].error_code)


def _create_partitions(c: KafkaConnection) -> Any:
    r = c.request(37, 3, {"topics": [{"name": "grow", "count": 2, "assignments": None}],
                          "timeout": 10000, "validate_only": False})
    return _errors(r.results[0].error_code)


def _delete_groups(c: KafkaConnection) -> Any:
    return _errors(c.request(42, 2, {"groups_names": ["g-del"]}).results[0].error_code)


def _elect_leaders(c: KafkaConnection) -> Any:
    r = c.request(43, 2, {"election_type": 0, "timeout": 5000, "topic_partitions": [
        {"topic": "t1", "partitions": [0]}]})
    return _errors(r.error_code)


def _alter_reassignments(c: KafkaConnection) -> Any:
    r = c.request(45, 1, {"timeout": 5000, "allow_replication_factor_change": True,
                          "topics": [{"name": "t1", "partitions": [
                              {"partition_index": 0, "replicas": None}]}]})
    return _errors(r.error_code)


def _list_reassignments(c: KafkaConnection) -> Any:
    return _errors(c.request(46, 0, {"timeout": 5000, "topics": None}).error_code)


def _offset_delete(group: str) -> Callable[[KafkaConnection], Any]:
    def call(c: KafkaConnection) -> Any:
        r = c.request(47, 0, {"group_id": group, "topics": [
            {"name": "t1", "partitions": [{"partition_index": 0}]}]})
        return _errors(r.error_code, *(p.error_code for t in r.topics for p in t.partitions))
    return call


def _describe_client_quotas(c: KafkaConnection) -> Any:
    return _errors(c.request(48, 1, {"components": [], "strict": False}).error_code)


def _alter_client_quotas(c: KafkaConnection) -> Any:
    r = c.request(49, 1, {"entries": [{"entity": [{"entity_type": "user",
                                                   "entity_name": "quota-user"}],
                                       "ops": [{"key": "producer_byte_rate", "value": 1e6,
                                                "remove": False}]}],
                          "validate_only": False})
    return _errors(r.entries[0].error_code)


def _update_features(c: KafkaConnection) -> Any:
    # validate only: the shared broker's levels stay as they are for every other case
    r = c.request(57, 1, {"feature_updates": [{"feature": "transaction.version",
                                               "max_version_level": 2, "upgrade_type": 1}],
                          "validate_only": True})
    return _errors(r.error_code)


def _describe_scram(c: KafkaConnection) -> Any:
    return _errors(c.request(50, 0, {"users": None}).error_code)


def _alter_scram(c: KafkaConnection) -> Any:
    r = c.request(51, 0, {"deletions": [{"name": "nobody", "mechanism": 2}], "upsertions": []})
    return _errors(r.results[0].error_code)


def _describe_quorum(c: KafkaConnection) -> Any:
    r = c.request(55, 1, {"topics": [{"topic_name": "t1",
                                      "partitions": [{"partition_index": 0}]}]})
    return _errors(r.error_code)


def _add_raft_voter(c: KafkaConnection) -> Any:
    r = c.request(80, 0, {"cluster_id": None, "timeout": 1000, "voter_id": 7,
                          "voter_directory_id": None, "listeners": []})
    return _errors(r.error_code)


def _remove_raft_voter(c: KafkaConnection) -> Any:
    r = c.request(81, 0, {"cluster_id": None, "voter_id": 7, "voter_directory_id": None})
    return _errors(r.error_code)


def _describe_cluster(c: KafkaConnection) -> Any:
    r = c.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    return _errors(r.error_code), int(r.cluster_authorized_operations)


def _describe_transactions(c: KafkaConnection) -> Any:
    r = c.request(65, 0, {"transactional_ids": ["tx-listed"]})
    return _errors(r.transaction_states[0].error_code)


def _list_transactions(c: KafkaConnection) -> Any:
    r = c.request(66, 1, {"state_filters": [], "producer_id_filters": [],
                          "duration_filter": -1})
    return sorted(s.transactional_id for s in r.transaction_states)


def _list_config_resources(c: KafkaConnection) -> Any:
    r = c.request(74, 1, {"resource_types": []})
    return _errors(r.error_code)


def _describe_topic_partitions(c: KafkaConnection) -> Any:
    r = c.request(75, 0, {"topics": [{"name": "t1"}], "response_partition_limit": 2000,
                          "cursor": None})
    return _errors(*(t.error_code for t in r.topics))


# -- the matrix -----------------------------------------------------------------------------------
Expect = Any | Callable[[Any], bool]


def not_refused(summary: Any) -> bool:
    """Allowed: the answer carries no authorization error (what else it says depends on
    state this matrix does not build, e.g. UNKNOWN_MEMBER_ID for a member that never joined)."""
    return not (set(summary) & AUTH_ERRORS)


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[KafkaConnection], Any]
    denied: Any
    grants: tuple[Grant, ...]
    allowed: Expect = not_refused
    probe: Callable[[Broker], Any] | None = None
    """What the refused call must leave unchanged."""


def case(name: str, call: Callable[[KafkaConnection], Any], denied: Any,
         *grants: tuple[ResourceType, str, Op], allowed: Expect = not_refused,
         probe: Callable[[Broker], Any] | None = None) -> Case:
    return Case(name, call, denied, tuple(Grant(*g) for g in grants), allowed, probe)


def _ops(*ops: Op) -> Callable[[Any], bool]:
    def allowed(summary: Any) -> bool:
        return summary[0] == (0,) and all(summary[1] & (1 << int(op)) for op in ops)
    return allowed


CASES: dict[ApiKey, list[Case]] = {
    ApiKey.PRODUCE: [
        case("Produce", _produce("t1"), (TOPIC_DENIED,), (RT.TOPIC, "t1", Op.WRITE),
             allowed=(0,), probe=lambda b: _end_offset(b, "t1")),
        case("Produce(transactional)", _produce("t1", "tx1"), (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), (RT.TOPIC, "t1", Op.WRITE),
             probe=lambda b: _end_offset(b, "t1")),
    ],
    ApiKey.FETCH: [
        case("Fetch", _fetch("t1"), (TOPIC_DENIED,), (RT.TOPIC, "t1", Op.READ), allowed=(0,)),
        case("Fetch(replica)", _fetch("t1", replica_id=2), (TOPIC_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)),
    ],
    ApiKey.LIST_OFFSETS: [case("ListOffsets", _list_offsets, (TOPIC_DENIED,),
                               (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,))],
    ApiKey.METADATA: [
        case("Metadata(named)", _metadata_named("t1"), (TOPIC_DENIED,),
             (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,)),
        case("Metadata(unknown topic)", _metadata_named("nowhere"), (TOPIC_DENIED,),
             (RT.TOPIC, "nowhere", Op.DESCRIBE),
             allowed=(int(E.UNKNOWN_TOPIC_OR_PARTITION),)),
        case("Metadata(all topics)", _metadata_all, [], (RT.TOPIC, "t1", Op.DESCRIBE),
             allowed=["t1"]),
        case("Metadata(auto-create)", _metadata_named("auto-made", auto_create=True),
             (TOPIC_DENIED,), (RT.TOPIC, "auto-made", Op.DESCRIBE),
             (RT.TOPIC, "auto-made", Op.CREATE), probe=_topics),
        case("Metadata(cluster operations)", _metadata_cluster_operations, 0,
             (RT.CLUSTER, CLUSTER, Op.DESCRIBE),
             allowed=lambda ops: ops & (1 << int(Op.DESCRIBE)) != 0),
    ],
    ApiKey.OFFSET_COMMIT: [case(
        "OffsetCommit", _offset_commit, (GROUP_DENIED,), (RT.GROUP, "g-commit", Op.READ),
        (RT.TOPIC, "t1", Op.READ), allowed=(0,), probe=lambda b: _committed(b, "g-commit", "t1"))],
    ApiKey.OFFSET_FETCH: [case("OffsetFetch", _offset_fetch, (GROUP_DENIED,),
                               (RT.GROUP, "g-listed", Op.DESCRIBE),
                               (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0, 0))],
    ApiKey.FIND_COORDINATOR: [
        case("FindCoordinator(group)", _find_coordinator(0, "g1"), (GROUP_DENIED,),
             (RT.GROUP, "g1", Op.DESCRIBE), allowed=(0,)),
        case("FindCoordinator(transaction)", _find_coordinator(1, "tx1"), (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.DESCRIBE), allowed=(0,)),
        case("FindCoordinator(share)", _find_coordinator(2, "g:0:0"), (CLUSTER_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)),
    ],
    ApiKey.JOIN_GROUP: [case("JoinGroup", _join, (GROUP_DENIED,),
                             (RT.GROUP, "g-join", Op.READ), probe=_groups)],
    ApiKey.HEARTBEAT: [case("Heartbeat", _heartbeat, (GROUP_DENIED,),
                            (RT.GROUP, "g-join", Op.READ))],
    ApiKey.LEAVE_GROUP: [case("LeaveGroup", _leave, (GROUP_DENIED,),
                              (RT.GROUP, "g-join", Op.READ))],
    ApiKey.SYNC_GROUP: [case("SyncGroup", _sync, (GROUP_DENIED,),
                             (RT.GROUP, "g-join", Op.READ))],
    ApiKey.DESCRIBE_GROUPS: [case("DescribeGroups", _describe_groups, (GROUP_DENIED,),
                                  (RT.GROUP, "g-listed", Op.DESCRIBE), allowed=(0,))],
    ApiKey.CONSUMER_GROUP_HEARTBEAT: [
        case("ConsumerGroupHeartbeat", _cg_heartbeat, (GROUP_DENIED,),
             (RT.GROUP, "g-848", Op.READ), (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,)),
    ],
    ApiKey.CONSUMER_GROUP_DESCRIBE: [case("ConsumerGroupDescribe", _cg_describe,
                                          (GROUP_DENIED,), (RT.GROUP, "g-848", Op.DESCRIBE))],
    ApiKey.SHARE_GROUP_HEARTBEAT: [
        case("ShareGroupHeartbeat", _share_heartbeat, (GROUP_DENIED,),
             (RT.GROUP, "g-share", Op.READ), (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,))],
    ApiKey.SHARE_GROUP_DESCRIBE: [case("ShareGroupDescribe", _share_describe, (GROUP_DENIED,),
                                       (RT.GROUP, "g-share", Op.DESCRIBE))],
    ApiKey.SHARE_FETCH: [case("ShareFetch", _share_fetch, (GROUP_DENIED,),
                              (RT.GROUP, "g-share", Op.READ), (RT.TOPIC, "t1", Op.READ),
                              allowed=(0, 0))],
    ApiKey.SHARE_ACKNOWLEDGE: [case("ShareAcknowledge", _share_acknowledge, (GROUP_DENIED,),
                                    (RT.GROUP, "g-share", Op.READ), (RT.TOPIC, "t1", Op.READ),
                                    allowed=(0, 0))],
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: [case(
        "DescribeShareGroupOffsets", _describe_share_offsets, (GROUP_DENIED,),
        (RT.GROUP, "g-share-offsets", Op.DESCRIBE), (RT.TOPIC, "t1", Op.DESCRIBE),
        allowed=(0,))],
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: [case(
        "AlterShareGroupOffsets", _alter_share_offsets, (GROUP_DENIED,),
        (RT.GROUP, "g-share-offsets", Op.READ), (RT.TOPIC, "t1", Op.READ),
        allowed=(0, 0))],
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: [case(
        "DeleteShareGroupOffsets", _delete_share_offsets, (GROUP_DENIED,),
        (RT.GROUP, "g-share-offsets", Op.DELETE), (RT.TOPIC, "t1", Op.READ),
        allowed=(0, 0))],
    # the share coordinator: ClusterAction, as Kafka
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: [case(
        "InitializeShareGroupState", _share_state(83, state_epoch=0, start_offset=-1),
        (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION))],
    ApiKey.READ_SHARE_GROUP_STATE: [case(
        "ReadShareGroupState", _share_state(84, leader_epoch=0), (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION))],
    ApiKey.WRITE_SHARE_GROUP_STATE: [case(
        "WriteShareGroupState", _share_state(85, state_epoch=0, leader_epoch=0,
                                             start_offset=0, state_batches=[]),
        (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION))],
    ApiKey.DELETE_SHARE_GROUP_STATE: [case(
        "DeleteShareGroupState", _share_state(86), (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION))],
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: [case(
        "ReadShareGroupStateSummary", _share_state(87, leader_epoch=-1), (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION))],
    ApiKey.LIST_GROUPS: [
        case("ListGroups(filtered)", _list_groups, [], (RT.GROUP, "g-listed", Op.DESCRIBE),
             allowed=["g-listed"]),
        case("ListGroups(cluster Describe)", _list_groups, [],
             (RT.CLUSTER, CLUSTER, Op.DESCRIBE),
             allowed=lambda groups: {"g-listed", "g-other"} <= set(groups)),
    ],
    # No authorization: ApiVersions and the SASL exchange come before any principal.
    ApiKey.API_VERSIONS: [case("ApiVersions", _api_versions, (0,), allowed=(0,))],
    ApiKey.SASL_HANDSHAKE: [case("SaslHandshake", _authenticates, "authenticated",
                                 allowed="authenticated")],
    ApiKey.SASL_AUTHENTICATE: [case("SaslAuthenticate", _authenticates, "authenticated",
                                    allowed="authenticated")],
    ApiKey.CREATE_TOPICS: [
        case("CreateTopics", _create_topic, (TOPIC_DENIED, TOPIC_DENIED),
             (RT.TOPIC, "made", Op.CREATE), allowed=(0, TOPIC_DENIED), probe=_topics),
    ],
    ApiKey.DELETE_TOPICS: [case("DeleteTopics", _delete_topic, (TOPIC_DENIED,),
                                (RT.TOPIC, "doomed", Op.DELETE), allowed=(0,), probe=_topics)],
    ApiKey.DELETE_RECORDS: [case("DeleteRecords", _delete_records, (TOPIC_DENIED,),
                                 (RT.TOPIC, "trimmed", Op.DELETE), allowed=(0,),
                                 probe=lambda b: _log_start(b, "trimmed"))],
    ApiKey.INIT_PRODUCER_ID: [
        case("InitProducerId(transactional)", _init_producer_id("tx-init"), (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx-init", Op.WRITE), allowed=(0,)),
        case("InitProducerId(idempotent)", _init_producer_id(None), (CLUSTER_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.IDEMPOTENT_WRITE), allowed=(0,)),
        case("InitProducerId(idempotent, KIP-679)", _init_producer_id(None),
             (CLUSTER_DENIED,), (RT.TOPIC, "t1", Op.WRITE), allowed=(0,)),
    ],
    ApiKey.OFFSET_FOR_LEADER_EPOCH: [
        case("OffsetForLeaderEpoch", _offset_for_leader_epoch(-1), (TOPIC_DENIED,),
             (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,)),
        case("OffsetForLeaderEpoch(replica)", _offset_for_leader_epoch(2), (TOPIC_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION), allowed=(0,)),
        case("OffsetForLeaderEpoch(replica, topic Describe)", _offset_for_leader_epoch(2),
             (TOPIC_DENIED,), (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,)),
    ],
    ApiKey.ADD_PARTITIONS_TO_TXN: [
        case("AddPartitionsToTxn", _add_partitions_to_txn, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), (RT.TOPIC, "t1", Op.WRITE)),
        case("AddPartitionsToTxn(topic refused)", _add_partitions_to_txn, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), allowed=(TOPIC_DENIED,)),
        case("AddPartitionsToTxn(v5, broker)", _add_partitions_to_txn_by_broker,
             (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)),
    ],
    ApiKey.ADD_OFFSETS_TO_TXN: [
        case("AddOffsetsToTxn", _add_offsets_to_txn, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), (RT.GROUP, "g-txn", Op.READ)),
        case("AddOffsetsToTxn(group refused)", _add_offsets_to_txn, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), allowed=(GROUP_DENIED,)),
    ],
    ApiKey.END_TXN: [case("EndTxn", _end_txn, (TXN_DENIED,),
                          (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE))],
    ApiKey.WRITE_TXN_MARKERS: [
        case("WriteTxnMarkers", _write_txn_markers, (CLUSTER_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.CLUSTER_ACTION),
             probe=lambda b: _end_offset(b, "markers")),
        case("WriteTxnMarkers(cluster Alter)", _write_txn_markers, (CLUSTER_DENIED,),
             (RT.CLUSTER, CLUSTER, Op.ALTER), probe=lambda b: _end_offset(b, "markers")),
    ],
    ApiKey.TXN_OFFSET_COMMIT: [
        case("TxnOffsetCommit", _txn_offset_commit, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), (RT.GROUP, "g-txn", Op.READ),
             (RT.TOPIC, "t1", Op.READ)),
        case("TxnOffsetCommit(topic refused)", _txn_offset_commit, (TXN_DENIED,),
             (RT.TRANSACTIONAL_ID, "tx1", Op.WRITE), (RT.GROUP, "g-txn", Op.READ),
             allowed=(TOPIC_DENIED,)),
    ],
    ApiKey.DESCRIBE_ACLS: [case("DescribeAcls", _describe_acls, (CLUSTER_DENIED,),
                                (RT.CLUSTER, CLUSTER, Op.DESCRIBE), allowed=(0,))],
    ApiKey.CREATE_ACLS: [case("CreateAcls", _create_acls, (CLUSTER_DENIED,),
                              (RT.CLUSTER, CLUSTER, Op.ALTER), allowed=(0,), probe=_acls)],
    ApiKey.DELETE_ACLS: [case("DeleteAcls", _delete_acls, (CLUSTER_DENIED,),
                              (RT.CLUSTER, CLUSTER, Op.ALTER), allowed=(0,), probe=_acls)],
    ApiKey.DESCRIBE_CONFIGS: [
        case("DescribeConfigs(topic)", _describe_configs(CONFIG_TOPIC, "t1"), (TOPIC_DENIED,),
             (RT.TOPIC, "t1", Op.DESCRIBE_CONFIGS), allowed=(0,)),
        case("DescribeConfigs(broker)", _describe_configs(CONFIG_BROKER, BROKER_ID),
             (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS), allowed=(0,)),
        case("DescribeConfigs(group)", _describe_configs(CONFIG_GROUP, "g-configs"),
             (GROUP_DENIED,), (RT.GROUP, "g-configs", Op.DESCRIBE_CONFIGS), allowed=(0,)),
    ],
    ApiKey.ALTER_CONFIGS: [case("AlterConfigs", _alter_configs, (TOPIC_DENIED,),
                                (RT.TOPIC, "t1", Op.ALTER_CONFIGS), allowed=(0,),
                                probe=lambda b: _topic_config(b, "t1", "retention.ms"))],
    ApiKey.INCREMENTAL_ALTER_CONFIGS: [
        case("IncrementalAlterConfigs(topic)",
             _incremental_alter_configs(CONFIG_TOPIC, "t1", "retention.bytes", "1048576"),
             (TOPIC_DENIED,), (RT.TOPIC, "t1", Op.ALTER_CONFIGS), allowed=(0,),
             probe=lambda b: _topic_config(b, "t1", "retention.bytes")),
        case("IncrementalAlterConfigs(broker)",
             _incremental_alter_configs(CONFIG_BROKER, BROKER_ID, "log.retention.ms",
                                        "604800000"),
             (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.ALTER_CONFIGS), allowed=(0,)),
        case("IncrementalAlterConfigs(group)",
             _incremental_alter_configs(CONFIG_GROUP, "g-configs",
                                        "consumer.session.timeout.ms", "50000"),
             (GROUP_DENIED,), (RT.GROUP, "g-configs", Op.ALTER_CONFIGS), allowed=(0,)),
    ],
    ApiKey.DESCRIBE_LOG_DIRS: [case("DescribeLogDirs", _describe_log_dirs,
                                    ((CLUSTER_DENIED,), False),
                                    (RT.CLUSTER, CLUSTER, Op.DESCRIBE), allowed=((0,), True))],
    ApiKey.ALTER_REPLICA_LOG_DIRS: [case("AlterReplicaLogDirs", _alter_replica_log_dirs,
                                         (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.ALTER),
                                         allowed=(57,))],
    ApiKey.CREATE_PARTITIONS: [case("CreatePartitions", _create_partitions, (TOPIC_DENIED,),
                                    (RT.TOPIC, "grow", Op.ALTER), allowed=(0,), probe=_topics)],
    ApiKey.DELETE_GROUPS: [case("DeleteGroups", _delete_groups, (GROUP_DENIED,),
                                (RT.GROUP, "g-del", Op.DELETE), allowed=(0,), probe=_groups)],
    ApiKey.ELECT_LEADERS: [case("ElectLeaders", _elect_leaders, (CLUSTER_DENIED,),
                                (RT.CLUSTER, CLUSTER, Op.ALTER))],
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: [case(
        "AlterPartitionReassignments", _alter_reassignments, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.ALTER))],
    ApiKey.LIST_PARTITION_REASSIGNMENTS: [case(
        "ListPartitionReassignments", _list_reassignments, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.DESCRIBE), allowed=(0,))],
    ApiKey.OFFSET_DELETE: [
        case("OffsetDelete", _offset_delete("g-offsets"), (GROUP_DENIED,),
             (RT.GROUP, "g-offsets", Op.DELETE), (RT.TOPIC, "t1", Op.READ),
             allowed=(0, 0), probe=lambda b: _committed(b, "g-offsets", "t1")),
        case("OffsetDelete(topic refused)", _offset_delete("g-listed"), (GROUP_DENIED,),
             (RT.GROUP, "g-listed", Op.DELETE), allowed=(0, TOPIC_DENIED),
             probe=lambda b: _committed(b, "g-listed", "t1")),
    ],
    ApiKey.DESCRIBE_CLIENT_QUOTAS: [case(
        "DescribeClientQuotas", _describe_client_quotas, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS), allowed=(0,))],
    ApiKey.ALTER_CLIENT_QUOTAS: [case(
        "AlterClientQuotas", _alter_client_quotas, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.ALTER_CONFIGS), allowed=(0,), probe=_quotas)],
    ApiKey.UPDATE_FEATURES: [case(
        "UpdateFeatures", _update_features, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.ALTER), allowed=(0,))],
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: [case(
        "DescribeUserScramCredentials", _describe_scram, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.DESCRIBE), allowed=(0,))],
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: [case(
        "AlterUserScramCredentials", _alter_scram, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.ALTER), probe=_scram_users)],
    ApiKey.DESCRIBE_QUORUM: [case("DescribeQuorum", _describe_quorum, (CLUSTER_DENIED,),
                                  (RT.CLUSTER, CLUSTER, Op.DESCRIBE))],
    # KIP-853: Alter on the cluster; a lone broker's voter set is fixed (UNSUPPORTED_VERSION).
    ApiKey.ADD_RAFT_VOTER: [case("AddRaftVoter", _add_raft_voter, (CLUSTER_DENIED,),
                                 (RT.CLUSTER, CLUSTER, Op.ALTER), allowed=(35,))],
    ApiKey.REMOVE_RAFT_VOTER: [case("RemoveRaftVoter", _remove_raft_voter, (CLUSTER_DENIED,),
                                    (RT.CLUSTER, CLUSTER, Op.ALTER), allowed=(35,))],
    # Kafka answers DescribeCluster to anyone; cluster Describe only unlocks the KIP-430
    # operations (0 without it).
    ApiKey.DESCRIBE_CLUSTER: [case("DescribeCluster", _describe_cluster, ((0,), 0),
                                   (RT.CLUSTER, CLUSTER, Op.DESCRIBE),
                                   allowed=_ops(Op.DESCRIBE))],
    ApiKey.DESCRIBE_TRANSACTIONS: [case(
        "DescribeTransactions", _describe_transactions, (TXN_DENIED,),
        (RT.TRANSACTIONAL_ID, "tx-listed", Op.DESCRIBE), allowed=(0,))],
    ApiKey.DESCRIBE_PRODUCERS: [case(
        "DescribeProducers", _describe_producers, (TOPIC_DENIED,), (RT.TOPIC, "t1", Op.READ),
        allowed=(0,))],
    # A token for another owner takes CreateTokens on that user; renewing and expiring need no
    # ACL (the owner and renewers only: a made-up HMAC is not found either way); described
    # tokens are filtered to the caller's own and those it may DescribeTokens the owner of.
    ApiKey.CREATE_DELEGATION_TOKEN: [case(
        "CreateDelegationToken(for bob)", _token_error(38, 3, {
            "owner_principal_type": "User", "owner_principal_name": "bob", "renewers": [],
            "max_lifetime": -1}),
        (int(E.DELEGATION_TOKEN_AUTHORIZATION_FAILED),),
        (RT.USER, "User:bob", Op.CREATE_TOKENS), allowed=(0,))],
    ApiKey.RENEW_DELEGATION_TOKEN: [case(
        "RenewDelegationToken", _token_error(39, 2, {"hmac": b"made-up", "renew_period": 1}),
        (int(E.DELEGATION_TOKEN_NOT_FOUND),), allowed=(int(E.DELEGATION_TOKEN_NOT_FOUND),))],
    ApiKey.EXPIRE_DELEGATION_TOKEN: [case(
        "ExpireDelegationToken", _token_error(40, 2, {"hmac": b"made-up",
                                                      "expiry_time_period": -1}),
        (int(E.DELEGATION_TOKEN_NOT_FOUND),), allowed=(int(E.DELEGATION_TOKEN_NOT_FOUND),))],
    ApiKey.DESCRIBE_DELEGATION_TOKEN: [case(
        "DescribeDelegationToken", _describe_tokens, [],
        (RT.USER, "User:bob", Op.DESCRIBE_TOKENS), allowed=lambda owners: "bob" in owners)],
    # No broker 9: allowed, the controller answers that it is not registered.
    ApiKey.UNREGISTER_BROKER: [case(
        "UnregisterBroker", _unregister_broker, (CLUSTER_DENIED,), (RT.CLUSTER, CLUSTER, Op.ALTER),
        allowed=(int(E.BROKER_ID_NOT_REGISTERED),))],
    ApiKey.LIST_TRANSACTIONS: [case(
        "ListTransactions", _list_transactions, [],
        (RT.TRANSACTIONAL_ID, "tx-listed", Op.DESCRIBE), allowed=["tx-listed"])],
    ApiKey.LIST_CONFIG_RESOURCES: [case(
        "ListConfigResources", _list_config_resources, (CLUSTER_DENIED,),
        (RT.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS), allowed=(0,))],
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: [case(
        "DescribeTopicPartitions", _describe_topic_partitions, (TOPIC_DENIED,),
        (RT.TOPIC, "t1", Op.DESCRIBE), allowed=(0,))],
}
ALL_CASES = [c for cases in CASES.values() for c in cases]


# -- the broker -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data = Path(tmp_path_factory.mktemp("authz-matrix")) / "data"
    process = BrokerProcess(data, [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_PLAINTEXT",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "--set", "authorizer.class.name="
                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--set", "super.users=User:admin",
        "--set", "group.share.enable=true",
        "--set", "delegation.token.secret.key=matrix-secret",
        *(a for user, password in PASSWORDS.items()
          for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")),
    ]).start()
    try:
        b = Broker(process)
        r = b.admin(19, 7, {"topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []} for n in ("t1", "secret", "doomed", "grow", "markers", "trimmed")],
            "timeout": 10000, "validate_only": False})
        assert [int(t.error_code) for t in r.topics] == [0] * 6
        with b.connect("admin") as c:
            for topic in ("t1", "trimmed"):
                assert _produce(topic)(c) == (0,)
                assert _produce(topic)(c) == (0,)
        for group in ("g-listed", "g-del", "g-offsets", "g-other"):  # groups with a committed offset
            r = b.admin(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1,
                               "member_id": "", "topics": [{"name": "t1", "partitions": [
                                   {"partition_index": 0, "committed_offset": 1,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": None}]}]})
            assert int(r.topics[0].partitions[0].error_code) == 0
        r = b.admin(22, 4, {"transactional_id": "tx-listed", "transaction_timeout": 60000,
                            "producer_id": -1, "producer_epoch": -1})
        assert int(r.error_code) == 0
        r = b.admin(38, 3, {"owner_principal_type": "User", "owner_principal_name": "bob",
                            "renewers": [], "max_lifetime": -1})  # a token of bob's
        assert int(r.error_code) == 0
        yield b
        b.close()
    finally:
        process.stop()


def test_every_served_api_has_a_case() -> None:
    """The matrix covers the API table: an API served without a case here fails."""
    assert set(CASES) == set(CHECKS) | {ApiKey.PRODUCE}
    assert all(CASES.values())


def _matches(expect: Expect, summary: Any) -> bool:
    return bool(expect(summary)) if callable(expect) else summary == expect


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_refused_without_acl_and_allowed_with_it(broker: Broker, case: Case) -> None:
    broker.revoke_all()
    before = case.probe(broker) if case.probe else None
    with broker.connect("alice") as c:
        refused = case.call(c)
    assert refused == case.denied, f"{case.name} without ACLs: {refused}"
    if case.probe is not None:
        assert case.probe(broker) == before, f"{case.name}: a refused call changed state"
    broker.grant(case.grants)
    try:
        with broker.connect("alice") as c:
            allowed = case.call(c)
        assert _matches(case.allowed, allowed), f"{case.name} granted {case.grants}: {allowed}"
    finally:
        broker.revoke_all()


DENY_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH)
GRANTED_CASES = [c for c in ALL_CASES if c.grants]


@pytest.mark.parametrize("case", GRANTED_CASES, ids=[c.name for c in GRANTED_CASES])
def test_a_deny_wins_over_the_allow(broker: Broker, case: Case) -> None:
    """Granted what the call needs, and denied the same operations (a literal, a prefixed or a
    wildcard DENY, in turn by case): the call gets the answer it gets with no ACL at all and
    changes nothing (Kafka's rule: DENY wins over any ALLOW)."""
    pattern = DENY_PATTERNS[GRANTED_CASES.index(case) % len(DENY_PATTERNS)]
    broker.revoke_all()
    try:
        broker.grant(case.grants)
        broker.deny(case.grants, pattern)
        before = case.probe(broker) if case.probe else None
        with broker.connect("alice") as c:
            answer = case.call(c)
        assert answer == case.denied, f"{case.name} allowed and denied ({pattern.name}): {answer}"
        if case.probe is not None:
            assert case.probe(broker) == before, f"{case.name}: a denied call changed state"
    finally:
        broker.revoke_all()
