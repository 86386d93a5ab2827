"""The scenarios, in the order of issue 23: each sends the same requests to one broker and
records the answers worth comparing under step names (``Session.record``). A scenario is written
once and run against both brokers; nothing in it depends on which broker it talks to.

Request versions are ones both brokers serve (Kafka 4.1 dropped the oldest; floodmark's table
is ``wire/api_table.py``). Record timestamps are fixed, so ListOffsets by time compares."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from floodmark.records import Record, build_batch
from floodmark.wire.api_table import ApiKey as K
from tests.reference.differential.normalise import plain
from tests.reference.differential.session import CLOSED, Session

BASE_TS = 1_700_000_000_000  # record timestamps: fixed, so answers by time compare


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Session], None]
    doc: str


SCENARIOS: list[Scenario] = []


def scenario(fn: Callable[[Session], None]) -> Callable[[Session], None]:
    SCENARIOS.append(Scenario(fn.__name__, fn, (fn.__doc__ or "").strip()))
    return fn


def _topic_spec(name: str, partitions: int = 1, replication: int = 1,
                configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": replication,
            "assignments": [], "configs": [{"name": k, "value": v}
                                           for k, v in (configs or {}).items()]}


def _create(s: Session, step: str, spec: dict[str, Any], validate_only: bool = False) -> Any:
    return s.step(step, K.CREATE_TOPICS, 5, {"topics": [spec], "timeout": 10_000,
                                             "validate_only": validate_only})


def _batch(values: list[bytes], ts: list[int] | None = None, **kw: Any) -> bytes:
    ts = ts or [BASE_TS + i for i in range(len(values))]
    return build_batch([Record(i, t, None, v) for i, (t, v) in enumerate(zip(ts, values,
                                                                            strict=True))], **kw)


def _produce(s: Session, step: str, topic: str, batch: bytes, partition: int = 0,
             acks: int = -1, version: int = 9) -> Any:
    return s.step(step, K.PRODUCE, version, {
        "transactional_id": None, "acks": acks, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": batch}]}]})


# -- topics ------------------------------------------------------------------------------------
@scenario
def create_topics(s: Session) -> None:
    """CreateTopics: a good topic; the same again; bad partition counts and replication
    factors; an unknown config, a bad config value; validate_only (nothing created)."""
    good = s.name("created")
    _create(s, "create", _topic_spec(good, 2))
    _create(s, "create_existing", _topic_spec(good, 2))
    _create(s, "zero_partitions", _topic_spec(s.name("zero"), 0))
    _create(s, "negative_partitions", _topic_spec(s.name("neg"), -5))
    _create(s, "replication_above_brokers", _topic_spec(s.name("rf3"), 1, 3))
    _create(s, "zero_replication", _topic_spec(s.name("rf0"), 1, 0))
    _create(s, "unknown_config", _topic_spec(s.name("unknown-cfg"), 1, 1,
                                             {"no.such.config": "1"}))
    _create(s, "bad_config_value", _topic_spec(s.name("bad-cfg"), 1, 1,
                                               {"retention.ms": "soon"}))
    _create(s, "bad_cleanup_policy", _topic_spec(s.name("bad-policy"), 1, 1,
                                                 {"cleanup.policy": "shred"}))
    _create(s, "bad_topic_name", _topic_spec("bad/name", 1))
    _create(s, "validate_only", _topic_spec(s.name("dry"), 3), validate_only=True)
    s.step("validate_only_created_nothing", K.METADATA, 9, {
        "topics": [{"name": s.name("dry")}], "allow_auto_topic_creation": False})
    s.wait_leaders(good, 2)
    s.step("metadata_of_created", K.METADATA, 9, {
        "topics": [{"name": good}], "allow_auto_topic_creation": False})


@scenario
def delete_topics(s: Session) -> None:
    """DeleteTopics: an unknown topic; a topic that exists, then Metadata for it."""
    s.step("delete_unknown", K.DELETE_TOPICS, 5, {"topic_names": [s.name("never")],
                                                  "timeout": 10_000})
    topic = s.create_topic("doomed")
    s.step("delete", K.DELETE_TOPICS, 5, {"topic_names": [topic], "timeout": 10_000})
    s.until(lambda: s.ask(K.METADATA, 9, {"topics": [{"name": topic}],
                                         "allow_auto_topic_creation": False}),
            lambda r: r is not CLOSED and int(r.topics[0].error_code) != 0, "topic gone")
    s.step("metadata_after_delete", K.METADATA, 9, {"topics": [{"name": topic}],
                                                   "allow_auto_topic_creation": False})


@scenario
def metadata(s: Session) -> None:
    """Metadata: an unknown topic with auto-creation off; a bad topic name. DescribeCluster
    v1 and v2 (fenced brokers asked for), and asked for controllers (KIP-919)."""
    s.step("unknown_topic", K.METADATA, 9, {"topics": [{"name": s.name("nothing")}],
                                            "allow_auto_topic_creation": False})
    s.step("invalid_name", K.METADATA, 9, {"topics": [{"name": "bad/name"}],
                                           "allow_auto_topic_creation": False})
    topic = s.create_topic("meta", 3)
    s.step("three_partitions", K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                "allow_auto_topic_creation": False})
    for step, version, endpoint_type, fenced in (
            ("describe_cluster_v1", 1, 1, False), ("describe_cluster_v2", 2, 1, False),
            ("describe_cluster_v2_fenced", 2, 1, True),
            ("describe_cluster_controllers", 2, 2, False)):
        s.step(step, K.DESCRIBE_CLUSTER, version, {
            "include_cluster_authorized_operations": False, "endpoint_type": endpoint_type,
            "include_fenced_brokers": fenced})


@scenario
def describe_topic_partitions(s: Session) -> None:
    """DescribeTopicPartitions (KIP-966): a topic of 3 partitions; paged one partition at a
    time with the cursor; two topics with the limit reached at the first one's end, then from
    the cursor; every topic from a cursor; an unknown topic and a bad name; a cursor naming a
    topic not asked for, a negative cursor partition; a limit of 0."""
    a = s.create_topic("dtp-a", 3)
    b = s.create_topic("dtp-b", 2)

    def ask(step: str, names: list[str], limit: int = 2000,
            cursor: tuple[str, int] | None = None) -> None:
        s.step(step, K.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                   "partition_index": cursor[1]}})
    ask("one_topic", [a])
    ask("first_page", [a], 1)
    ask("second_page", [a], 1, (a, 1))
    ask("limit_at_a_topic_end", [b, a], 3)
    ask("from_the_next_topic", [a, b], 3, (b, 0))
    ask("all_topics_from_a_cursor", [], 4, (a, 0))
    ask("unknown_and_bad_name", [s.name("nothing"), "bad/name"])
    ask("cursor_not_asked_for", [a], 10, (b, 0))
    ask("negative_cursor_partition", [a], 10, (a, -1))
    ask("zero_limit", [a], 0)


@scenario
def list_config_resources(s: Session) -> None:
    """ListConfigResources: v0 (client-metrics subscriptions: none), v1 for brokers and broker
    loggers, client metrics, groups, the topic created here (by name, among the others), and
    an unsupported type; v0 and v1 with no type named."""
    topic = s.create_topic("lcr")
    s.step("v0", K.LIST_CONFIG_RESOURCES, 0, {})
    for step, types in (("v1_brokers_and_loggers", [4, 8]), ("v1_client_metrics", [16]),
                        ("v1_groups", [32]), ("v1_unsupported_type", [1]),
                        ("v1_topic_and_broker_unsupported", [2, 4, 64])):
        s.step(step, K.LIST_CONFIG_RESOURCES, 1, {"resource_types": types})
    answer = s.ask(K.LIST_CONFIG_RESOURCES, 1, {"resource_types": [2]})
    s.record("v1_topics_include_the_new_one", None if answer is CLOSED else (
        int(answer.error_code), (topic, 2) in {(str(r.resource_name), int(r.resource_type))
                                               for r in answer.config_resources}))
    answer = s.ask(K.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
    s.record("v1_every_type", None if answer is CLOSED else (
        int(answer.error_code), sorted({int(r.resource_type) for r in answer.config_resources})))


# -- produce and fetch -------------------------------------------------------------------------
@scenario
def produce(s: Session) -> None:
    """Produce: acks 1 and -1, an invalid acks value, unknown topic and partition, a batch
    above max.message.bytes, a batch with a bad CRC, a batch at offset 2 after two records;
    one topic named twice in one request."""
    topic = s.create_topic("produce", 1, {"max.message.bytes": "2000"})
    _produce(s, "acks_all", topic, _batch([b"a", b"b"]))
    _produce(s, "acks_one", topic, _batch([b"c"]), acks=1)
    _produce(s, "acks_two", topic, _batch([b"d"]), acks=2)
    _produce(s, "unknown_topic", s.name("no-such-topic"), _batch([b"e"]))
    _produce(s, "unknown_partition", topic, _batch([b"f"]), partition=7)
    _produce(s, "oversized", topic, _batch([b"x" * 5000]))
    bad = bytearray(_batch([b"g"]))
    bad[-1] ^= 0xFF  # the last byte of the record: inside what the CRC covers
    _produce(s, "bad_crc", topic, bytes(bad))
    _produce(s, "after_refusals", topic, _batch([b"h"]))
    _produce(s, "v11", topic, _batch([b"i"]), version=11)
    _produce(s, "v11_unknown_partition", topic, _batch([b"j"]), partition=7, version=11)
    # One topic named twice in a request: one topic in the answer, both partitions' answers
    s.step("topic_named_twice", K.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": _batch([b"k"])}]},
            {"name": s.name("no-such-topic"), "partition_data": [
                {"index": 0, "records": _batch([b"l"])}]},
            {"name": topic, "partition_data": [{"index": 3, "records": _batch([b"m"])}]}]})



def _topic_id(s: Session, topic: str) -> uuid.UUID | None:
    answer = s.ask(K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                    "allow_auto_topic_creation": False})
    return None if answer is CLOSED else answer.topics[0].topic_id


@scenario
def produce_by_topic_id(s: Session) -> None:
    """Produce v13 (KIP-516, topics named by topic id): a produce by id (acks -1 and 1); an id
    no topic has (UNKNOWN_TOPIC_ID); the zero id; a known id with an unknown partition; one
    request mixing a known id, an unknown id and the known id's second partition; then Fetch
    by name finds the records written by id."""
    topic = s.create_topic("produce-id", 2)
    known = _topic_id(s, topic)
    unknown = uuid.uuid4()
    zero = uuid.UUID(int=0)
    # Topic ids differ between the brokers: the answer's ids are shown as which they are.
    labels = {known: "known", unknown: "unknown", zero: "zero"}
    value = iter(range(1000))

    def by_id(step: str, topics: list[tuple[uuid.UUID, list[int]]], acks: int = -1) -> None:
        answer = s.ask(K.PRODUCE, 13, {
            "transactional_id": None, "acks": acks, "timeout": 10_000, "topic_data": [
                {"topic_id": tid, "partition_data": [
                    {"index": i, "records": _batch([b"v%d" % next(value)])} for i in parts]}
                for tid, parts in topics]})
        if answer is CLOSED:
            s.record(step, CLOSED)
            return
        s.record(step, {"throttle_time": answer.throttle_time, "responses": [
            {"name": labels.get(r.topic_id, f"other {r.topic_id}"),
             "partition_responses": plain(r.partition_responses)}
            for r in answer.responses]})
    by_id("by_id", [(known, [0])])
    by_id("by_id_acks_one", [(known, [1])], acks=1)
    by_id("unknown_id", [(unknown, [0])])
    by_id("zero_id", [(zero, [0])])
    by_id("unknown_partition", [(known, [5])])
    by_id("mixed", [(known, [0]), (unknown, [0, 1]), (known, [1])])
    _fetch(s, "fetch_by_name", topic, 0)
    _fetch(s, "fetch_by_name_p1", topic, 0, partition=1)

def _fetch(s: Session, step: str, topic: str, offset: int, partition: int = 0,
           epoch: int = -1, version: int = 12, log_start: int = -1) -> Any:
    return s.step(step, K.FETCH, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": log_start,
            "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})


@scenario
def fetch(s: Session) -> None:
    """Fetch: from 0, at the end, beyond the end (out of range), an unknown partition and
    topic, a future leader epoch (unknown), the current one, a negative offset."""
    topic = s.create_topic("fetch")
    _produce(s, "produce", topic, _batch([b"a", b"b", b"c"]))
    _fetch(s, "from_start", topic, 0)
    _fetch(s, "at_end", topic, 3)
    _fetch(s, "beyond_end", topic, 10)
    _fetch(s, "negative_offset", topic, -2)
    _fetch(s, "unknown_partition", topic, 0, partition=5)
    _fetch(s, "unknown_topic", s.name("no-fetch"), 0)
    _fetch(s, "current_epoch", topic, 0, epoch=0)
    _fetch(s, "future_epoch", topic, 0, epoch=7)
    _fetch(s, "v11_from_start", topic, 0, version=11)


def _list_offsets(s: Session, step: str, topic: str, specs: list[tuple[int, int]],
                  epoch: int = -1, version: int = 7, isolation: int = 0) -> Any:
    """``specs``: (partition, timestamp)."""
    return s.step(step, K.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": isolation, "timeout": 10_000, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": epoch, "timestamp": t}
            for p, t in specs]}]})


@scenario
def list_offsets(s: Session) -> None:
    """ListOffsets: earliest (-2), latest (-1), max-timestamp (-3, KIP-734), by timestamp
    (before, inside, after the records), an unknown partition, a future leader epoch."""
    topic = s.create_topic("offsets")
    for name, spec in (("empty_earliest", -2), ("empty_latest", -1), ("empty_max", -3)):
        _list_offsets(s, name, topic, [(0, spec)])
    _list_offsets(s, "duplicate_partition", topic, [(0, -2), (0, -1)])
    # one batch whose largest timestamp is its first record's; then a second batch
    _produce(s, "produce_1", topic, _batch([b"a", b"b", b"c"],
                                           [BASE_TS + 50, BASE_TS + 10, BASE_TS + 20]))
    _produce(s, "produce_2", topic, _batch([b"d", b"e"], [BASE_TS + 30, BASE_TS + 40]))
    for name, spec in (("earliest", -2), ("latest", -1), ("max_timestamp", -3),
                       ("before_all", BASE_TS - 1), ("exact_second", BASE_TS + 10),
                       ("between", BASE_TS + 35), ("after_all", BASE_TS + 1000)):
        _list_offsets(s, name, topic, [(0, spec)])
    _list_offsets(s, "unknown_partition", topic, [(9, -1)])
    _list_offsets(s, "future_epoch", topic, [(0, -1)], epoch=5)
    _list_offsets(s, "current_epoch", topic, [(0, -1)], epoch=0)
    _list_offsets(s, "v1_latest", topic, [(0, -1)], version=1)
    # Specs by version: -3 from v7, -4 earliest local from v8 (KIP-405), -5 latest tiered from
    # v9 (KIP-1005); older versions and specs no served version defines: UNSUPPORTED_VERSION.
    for name, spec, version in (("v6_max_timestamp", -3, 6), ("v7_earliest_local", -4, 7),
                                ("v8_earliest_local", -4, 8), ("v8_latest_tiered", -5, 8),
                                ("v9_latest_tiered", -5, 9), ("v10_earliest", -2, 10),
                                ("v10_max_timestamp", -3, 10), ("v10_pending_upload", -6, 10),
                                ("v10_minus_seven", -7, 10)):
        _list_offsets(s, name, topic, [(0, spec)], version=version)


@scenario
def offset_for_leader_epoch(s: Session) -> None:
    """OffsetForLeaderEpoch: the current epoch, an older one, a future one, unknown
    partition; with and without the current-leader-epoch check."""
    topic = s.create_topic("epochs")
    _produce(s, "produce", topic, _batch([b"a", b"b"]))

    def ask(step: str, leader_epoch: int, current: int = -1, partition: int = 0) -> None:
        s.step(step, K.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{
            "topic": topic, "partitions": [{"partition": partition,
                                            "current_leader_epoch": current,
                                            "leader_epoch": leader_epoch}]}]})
    ask("epoch_0", 0)
    ask("epoch_3", 3)
    ask("epoch_minus_1", -1)
    ask("current_check_ok", 0, current=0)
    ask("current_future", 0, current=4)
    ask("unknown_partition", 0, partition=3)


# -- configs -----------------------------------------------------------------------------------
TOPIC, BROKER, GROUP_RESOURCE = 2, 4, 32  # ConfigResource types


def _describe(s: Session, step: str, rtype: int, name: str, keys: list[str] | None,
              synonyms: bool = True) -> Any:
    return s.step(step, K.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": False})


def _describe_once_applied(s: Session, step: str, rtype: int, name: str, key: str,
                           applied: Callable[[Any], bool]) -> Any:
    """DescribeConfigs of one key, asked until the change before it shows (at most 30 s): a
    Kafka broker answers from its metadata image, which takes the committed change a moment
    after IncrementalAlterConfigs answered (read-after-write is not promised), so asking once
    compares timing, not answers."""
    body = {"resources": [{"resource_type": rtype, "resource_name": name,
                           "configuration_keys": [key]}],
            "include_synonyms": True, "include_documentation": False}

    def shows(answer: Any) -> bool:
        if answer is CLOSED:
            return True
        entries = [c for r in answer.results for c in r.configs if str(c.name) == key]
        return bool(entries) and applied(entries[0])
    return s.record(step, s.until(lambda: s.ask(K.DESCRIBE_CONFIGS, 4, body), shows,
                                  f"{key} changed"))


def _alter(s: Session, step: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
           validate_only: bool = False) -> Any:
    """``ops``: (name, operation: 0 SET 1 DELETE 2 APPEND 3 SUBTRACT, value)."""
    return s.step(step, K.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})


# A broker's settings whose answers the scenario compares: the ones clients and tools read.
BROKER_KEYS = ["advertised.listeners", "min.insync.replicas", "num.partitions",
               "default.replication.factor", "log.retention.hours", "log.retention.ms",
               "message.max.bytes", "auto.create.topics.enable", "log.cleanup.policy",
               "log.segment.bytes", "unclean.leader.election.enable",
               "offsets.topic.replication.factor", "transactional.id.expiration.ms",
               "group.initial.rebalance.delay.ms", "broker.id", "node.id", "no.such.config"]


@scenario
def describe_configs(s: Session) -> None:
    """DescribeConfigs: every config of a new topic (with synonyms), of a topic with a set
    config, chosen broker configs, an unknown topic, an unknown key."""
    plain_topic = s.create_topic("cfg-plain")
    set_topic = s.create_topic("cfg-set", 1, {"retention.ms": "3600000",
                                              "cleanup.policy": "compact"})
    _describe(s, "topic_all", TOPIC, plain_topic, None)
    _describe(s, "topic_set_values", TOPIC, set_topic,
              ["retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas"])
    _describe(s, "topic_no_synonyms", TOPIC, set_topic, ["retention.ms"], synonyms=False)
    _describe(s, "topic_unknown_key", TOPIC, set_topic, ["no.such.config"])
    _describe(s, "unknown_topic", TOPIC, s.name("no-cfg"), None)
    _describe(s, "broker_keys", BROKER, "1", BROKER_KEYS)
    _describe(s, "unknown_broker", BROKER, "99", ["num.partitions"])


@scenario
def incremental_alter_configs(s: Session) -> None:
    """IncrementalAlterConfigs: set then describe, a bad value, an unknown config, DELETE back
    to the default, APPEND to a list, validate_only, an unknown topic, a broker's read-only
    config, a dynamic broker config."""
    topic = s.create_topic("alter")
    _alter(s, "set_retention", TOPIC, topic, [("retention.ms", 0, "7200000")])
    _describe_once_applied(s, "after_set", TOPIC, topic, "retention.ms",
                           lambda c: str(c.value) == "7200000")
    _alter(s, "bad_value", TOPIC, topic, [("retention.ms", 0, "soon")])
    _alter(s, "unknown_config", TOPIC, topic, [("no.such.config", 0, "1")])
    _alter(s, "delete_retention", TOPIC, topic, [("retention.ms", 1, None)])
    _describe_once_applied(s, "after_delete", TOPIC, topic, "retention.ms",
                           lambda c: str(c.value) != "7200000")
    _alter(s, "append_policy", TOPIC, topic, [("cleanup.policy", 2, "compact")])
    _describe_once_applied(s, "after_append", TOPIC, topic, "cleanup.policy",
                           lambda c: "compact" in str(c.value))
    _alter(s, "validate_only", TOPIC, topic, [("segment.ms", 0, "60000")], validate_only=True)
    _describe(s, "after_validate_only", TOPIC, topic, ["segment.ms"])
    _alter(s, "unknown_topic", TOPIC, s.name("no-alter"), [("retention.ms", 0, "1")])
    _alter(s, "broker_read_only", BROKER, "1", [("log.dirs", 0, "/tmp/x")],
           validate_only=True)
    _alter(s, "broker_dynamic", BROKER, "1", [("log.cleaner.threads", 0, "2")],
           validate_only=True)
    _alter(s, "broker_bad_value", BROKER, "1", [("log.cleaner.threads", 0, "many")],
           validate_only=True)


# The group configs Kafka 4.1 has (4.2 adds share.delivery.count.limit,
# share.partition.max.record.locks, share.renew.acknowledge.enable and
# streams.initial.rebalance.delay.ms, which floodmark has too).
GROUP_KEYS = ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
              "share.session.timeout.ms", "share.heartbeat.interval.ms",
              "share.record.lock.duration.ms", "share.auto.offset.reset",
              "share.isolation.level", "streams.session.timeout.ms",
              "streams.heartbeat.interval.ms", "streams.num.standby.replicas", "no.such.config"]


@scenario
def group_configs(s: Session) -> None:
    """Group configs (ConfigResource GROUP, KIP-848 / KIP-932): a group without any (every key
    a default), set two then describe (DYNAMIC_GROUP_CONFIG), an unknown name, a bad value, a
    value below its rule or the broker's minimum or above its maximum, APPEND to a string, a
    null value, by_duration good and bad, validate_only, DELETE back to the default and of an
    unknown name, the default group resource (""), legacy AlterConfigs."""
    group = s.name("gc")
    _describe(s, "defaults", GROUP_RESOURCE, group, GROUP_KEYS)
    _alter(s, "set", GROUP_RESOURCE, group, [("share.auto.offset.reset", 0, "earliest"),
                                    ("consumer.session.timeout.ms", 0, "50000")])
    _describe_once_applied(s, "after_set", GROUP_RESOURCE, group, "share.auto.offset.reset",
                           lambda c: str(c.value) == "earliest")
    _describe(s, "after_set_all", GROUP_RESOURCE, group, GROUP_KEYS)
    _alter(s, "unknown_name", GROUP_RESOURCE, group, [("no.such.config", 0, "1")])
    _alter(s, "bad_value", GROUP_RESOURCE, group, [("share.isolation.level", 0, "sometimes")])
    _alter(s, "not_a_number", GROUP_RESOURCE, group, [("share.record.lock.duration.ms", 0, "many")])
    _alter(s, "below_rule", GROUP_RESOURCE, group, [("share.record.lock.duration.ms", 0, "500")])
    _alter(s, "below_minimum", GROUP_RESOURCE, group, [("consumer.session.timeout.ms", 0, "1000")])
    _alter(s, "above_maximum", GROUP_RESOURCE, group, [("consumer.heartbeat.interval.ms", 0, "16000")])
    _alter(s, "append_to_a_string", GROUP_RESOURCE, group, [("share.auto.offset.reset", 2, "x")])
    _alter(s, "null_value", GROUP_RESOURCE, group, [("share.isolation.level", 0, None)])
    _alter(s, "by_duration", GROUP_RESOURCE, group, [("share.auto.offset.reset", 0, "by_duration:PT1H")],
           validate_only=True)
    _alter(s, "by_duration_negative", GROUP_RESOURCE, group,
           [("share.auto.offset.reset", 0, "by_duration:-PT1H")])
    _alter(s, "validate_only", GROUP_RESOURCE, group, [("share.record.lock.duration.ms", 0, "20000")],
           validate_only=True)
    _describe(s, "after_validate_only", GROUP_RESOURCE, group, ["share.record.lock.duration.ms"])
    _alter(s, "delete", GROUP_RESOURCE, group, [("share.auto.offset.reset", 1, None)])
    _describe_once_applied(s, "after_delete", GROUP_RESOURCE, group, "share.auto.offset.reset",
                           lambda c: str(c.value) == "latest")
    _alter(s, "delete_unknown", GROUP_RESOURCE, group, [("no.such.config", 1, None)])
    _alter(s, "default_group", GROUP_RESOURCE, "", [("share.auto.offset.reset", 0, "earliest")])
    _describe(s, "describe_default_group", GROUP_RESOURCE, "", ["share.auto.offset.reset"])
    legacy = s.name("gc-legacy")
    s.step("legacy_alter", K.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": GROUP_RESOURCE, "resource_name": legacy,
         "configs": [{"name": "share.isolation.level", "value": "read_committed"}]}],
        "validate_only": False})
    _describe_once_applied(s, "after_legacy_alter", GROUP_RESOURCE, legacy, "share.isolation.level",
                           lambda c: str(c.value) == "read_committed")


# -- partitions and records --------------------------------------------------------------------
@scenario
def create_partitions(s: Session) -> None:
    """CreatePartitions: grow 2 -> 4, the same count, a decrease, an unknown topic,
    validate_only; Metadata after."""
    topic = s.create_topic("grow", 2)

    def grow(step: str, name: str, count: int, validate_only: bool = False) -> None:
        s.step(step, K.CREATE_PARTITIONS, 3, {
            "topics": [{"name": name, "count": count, "assignments": None}],
            "timeout": 10_000, "validate_only": validate_only})
    grow("grow_validate_only", topic, 6, validate_only=True)
    grow("grow_to_4", topic, 4)
    grow("same_count", topic, 4)
    grow("decrease", topic, 3)
    grow("unknown_topic", s.name("no-grow"), 3)
    s.wait_leaders(topic, 4)
    s.step("metadata_after", K.METADATA, 9, {"topics": [{"name": topic}],
                                             "allow_auto_topic_creation": False})


@scenario
def delete_records(s: Session) -> None:
    """DeleteRecords: up to offset 2 of 5, beyond the high watermark, -1 (the HW), an unknown
    partition; ListOffsets earliest and a Fetch below the new log start after."""
    topic = s.create_topic("trim")
    _produce(s, "produce", topic, _batch([b"a", b"b", b"c", b"d", b"e"]))

    def delete(step: str, offset: int, partition: int = 0) -> None:
        s.step(step, K.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": offset}]}], "timeout": 10_000})
    delete("to_2", 2)
    delete("beyond_hw", 9)
    delete("backwards", 1)
    delete("unknown_partition", 1, partition=4)
    _list_offsets(s, "earliest_after", topic, [(0, -2)])
    _fetch(s, "fetch_below_start", topic, 0)
    delete("to_hw", -1)
    _list_offsets(s, "earliest_after_hw", topic, [(0, -2)])


# -- groups ------------------------------------------------------------------------------------
GROUP, TXN = 0, 1  # FindCoordinator key types
PROTOCOLS = [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}]


@scenario
def groups(s: Session) -> None:
    """Classic group APIs: JoinGroup without a member id (MEMBER_ID_REQUIRED), with it (the
    leader), SyncGroup, Heartbeat, OffsetCommit, OffsetFetch; then wrong generations and
    unknown members on each; DescribeGroups and ListGroups through the states; LeaveGroup."""
    group = s.name("group")
    topic = s.create_topic("group-topic")
    s.coordinator(group, GROUP)

    def join(step: str, member: str) -> Any:
        return s.record(step, s.settled(K.JOIN_GROUP, 7, {
            "group_id": group, "session_timeout": 30_000, "rebalance_timeout": 10_000,
            "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": PROTOCOLS}, lambda r: int(r.error_code)))
    first = join("join_without_member_id", "")
    member = str(first.member_id) if first is not CLOSED else ""
    joined = join("join", member)
    generation = int(joined.generation_id) if joined is not CLOSED else -1
    s.step("describe_completing_rebalance", K.DESCRIBE_GROUPS, 5, {"groups": [group]})

    def sync(step: str, gen: int, mem: str) -> None:
        s.step(step, K.SYNC_GROUP, 5, {
            "group_id": group, "generation_id": gen, "member_id": mem,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": mem, "assignment": b"\x00\x01"}]})
    sync("sync_wrong_generation", generation + 5, member)
    sync("sync_unknown_member", generation, "nobody")
    sync("sync", generation, member)

    def heartbeat(step: str, gen: int, mem: str) -> None:
        s.step(step, K.HEARTBEAT, 4, {"group_id": group, "generation_id": gen,
                                      "member_id": mem, "group_instance_id": None})
    heartbeat("heartbeat", generation, member)
    heartbeat("heartbeat_wrong_generation", generation + 5, member)
    heartbeat("heartbeat_unknown_member", generation, "nobody")
    heartbeat("heartbeat_unknown_group", generation, member)  # below: a group never joined

    def commit(step: str, gen: int, mem: str, offset: int, grp: str = group) -> None:
        s.step(step, K.OFFSET_COMMIT, 8, {
            "group_id": grp, "generation_id_or_member_epoch": gen, "member_id": mem,
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
    commit("commit", generation, member, 3)
    commit("commit_wrong_generation", generation + 5, member, 4)
    commit("commit_unknown_member", generation, "nobody", 4)
    commit("commit_simple_unknown_group", -1, "", 2, grp=s.name("simple"))

    def offsets(step: str, grp: str) -> None:
        s.step(step, K.OFFSET_FETCH, 8, {"groups": [
            {"group_id": grp, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}],
            "require_stable": False})
    offsets("offset_fetch", group)
    offsets("offset_fetch_simple", s.name("simple"))
    offsets("offset_fetch_unknown_group", s.name("nogroup"))
    s.step("describe_stable", K.DESCRIBE_GROUPS, 5, {"groups": [group, s.name("nogroup")]})
    s.step("describe_stable_v6", K.DESCRIBE_GROUPS, 6, {"groups": [group, s.name("nogroup")]})

    def list_groups(step: str, version: int, types: list[str] | None = None) -> None:
        listed = s.ask(K.LIST_GROUPS, version, {"states_filter": [], "types_filter": types or []})
        if listed is not CLOSED:  # only this run's groups: the Kafka node serves other tests too
            s.record(step, {"error_code": listed.error_code, "groups": [
                g for g in listed.groups if s.run_id in str(g.group_id)]})
    list_groups("list_groups", 4)
    list_groups("list_groups_v5", 5)
    for types in (["classic"], ["Classic"], ["consumer"], ["share", "classic"], ["bogus"]):
        list_groups("list_groups_v5_types_" + "_".join(types), 5, types)
    s.step("leave", K.LEAVE_GROUP, 5, {"group_id": group, "members": [
        {"member_id": member, "group_instance_id": None}]})
    s.step("leave_unknown_member", K.LEAVE_GROUP, 5, {"group_id": group, "members": [
        {"member_id": "nobody", "group_instance_id": None}]})
    s.step("describe_after_leave", K.DESCRIBE_GROUPS, 5, {"groups": [group]})
    s.step("describe_after_leave_v6", K.DESCRIBE_GROUPS, 6, {"groups": [group]})
    # JoinGroup v8 (a reason, KIP-800) and v9 (skip_assignment) on a second group
    other = s.name("group-v9")
    s.coordinator(other, GROUP)
    for step, version in (("join_v8_without_member_id", 8), ("join_v9_without_member_id", 9)):
        s.record(step, s.settled(K.JOIN_GROUP, version, {
            "group_id": other, "session_timeout": 30_000, "rebalance_timeout": 10_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": PROTOCOLS, "reason": "differential test"}, lambda r: int(r.error_code)))


@scenario
def unregister_broker(s: Session) -> None:
    """UnregisterBroker of an id no broker registered (a live one would be unregistered)."""
    s.step("not_registered", K.UNREGISTER_BROKER, 0, {"broker_id": 9})


# -- transactions ------------------------------------------------------------------------------
@scenario
def describe_producers(s: Session) -> None:
    """DescribeProducers (KIP-664): an idempotent producer's two batches on partition 0 (its
    epoch, last sequence and last timestamp), partition 1 without producers, a partition the
    topic does not have, an unknown topic."""
    topic = s.create_topic("producers", 2)
    init = s.record("init", s.settled(K.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1}, lambda r: int(r.error_code)))
    pid, epoch = (int(init.producer_id), int(init.producer_epoch)) if init is not CLOSED \
        else (-1, -1)
    _produce(s, "first", topic, _batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch,
                                       base_sequence=0))
    _produce(s, "second", topic, _batch([b"c"], ts=[BASE_TS + 50], producer_id=pid,
                                        producer_epoch=epoch, base_sequence=2))
    s.step("describe", K.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": topic, "partition_indexes": [0, 1, 9]},
        {"name": s.name("no-such-topic"), "partition_indexes": [0]}]})


# -- transactions ------------------------------------------------------------------------------
@scenario
def transactions(s: Session) -> None:
    """Transaction APIs: InitProducerId (idempotent, then transactional), EndTxn with no
    transaction, AddPartitionsToTxn with a wrong epoch and an unknown producer id, then the
    right one; DescribeTransactions and ListTransactions in Ongoing, after the commit;
    InitProducerId again (the epoch bump)."""
    topic = s.create_topic("txn-topic")
    txn = s.name("txn")
    s.record("init_idempotent", s.settled(K.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1}, lambda r: int(r.error_code)))
    s.coordinator(txn, TXN)
    init_body = {"transactional_id": txn, "transaction_timeout": 60_000, "producer_id": -1,
                 "producer_epoch": -1}
    init = s.record("init", s.settled(K.INIT_PRODUCER_ID, 4, init_body,
                                      lambda r: int(r.error_code)))
    pid, epoch = (int(init.producer_id), int(init.producer_epoch)) if init is not CLOSED \
        else (-1, -1)

    def end(step: str, commit: bool, e: int = epoch) -> None:
        s.record(step, s.settled(K.END_TXN, 3, {
            "transactional_id": txn, "producer_id": pid, "producer_epoch": e,
            "committed": commit}, lambda r: int(r.error_code)))
    end("end_without_transaction", True)
    end("abort_without_transaction", False)

    def add(step: str, p: int, e: int, name: str = txn) -> Any:
        return s.step(step, K.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": name, "v3_and_below_producer_id": p,
            "v3_and_below_producer_epoch": e,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    add("add_wrong_epoch", pid, epoch + 3)
    add("add_wrong_producer_id", pid + 1000, epoch)
    add("add_unknown_txn_id", pid, epoch, name=s.name("no-txn"))
    add("add", pid, epoch)
    # Transactional records in a Produce that names no transactional id: refused whole
    # (KafkaApis.handleProduceRequest), authorizer or not; nothing is appended.
    s.step("produce_txn_records_without_id", K.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": _batch(
            [b"no-id"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
            is_transactional=True)}]}]})
    s.step("describe_ongoing", K.DESCRIBE_TRANSACTIONS, 0,
           {"transactional_ids": [txn, s.name("no-txn")]})

    def listed(step: str, states: list[str]) -> None:
        answer = s.ask(K.LIST_TRANSACTIONS, 1, {"state_filters": states,
                                                "producer_id_filters": [],
                                                "duration_filter": -1})
        if answer is not CLOSED:
            s.record(step, {"error_code": answer.error_code,
                            "unknown_state_filters": answer.unknown_state_filters,
                            "transaction_states": [t for t in answer.transaction_states
                                                   if s.run_id in str(t.transactional_id)]})
    listed("list_ongoing", ["Ongoing"])
    listed("list_unknown_state", ["Sleeping"])

    def listed_v2(step: str, pattern: str | None) -> None:
        answer = s.ask(K.LIST_TRANSACTIONS, 2, {"state_filters": [], "producer_id_filters": [],
                                                "duration_filter": -1,
                                                "transactional_id_pattern": pattern})
        if answer is not CLOSED:
            s.record(step, {"error_code": answer.error_code,
                            "unknown_state_filters": answer.unknown_state_filters,
                            "transaction_states": [t for t in answer.transaction_states
                                                   if s.run_id in str(t.transactional_id)]})
    listed_v2("list_v2_no_pattern", None)
    listed_v2("list_v2_whole_id", f"diff-txn-{s.run_id}")
    listed_v2("list_v2_prefix_only", "diff-txn")  # matches() or find()?
    listed_v2("list_v2_regex", "diff-t.n-.*")
    listed_v2("list_v2_bad_regex", "[unclosed")
    _produce_txn = build_batch([Record(0, BASE_TS, None, b"t")], producer_id=pid,
                               producer_epoch=epoch, base_sequence=0, is_transactional=True)
    s.step("produce", K.PRODUCE, 9, {
        "transactional_id": txn, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0,
                                                           "records": _produce_txn}]}]})
    end("commit_wrong_epoch", True, epoch + 3)
    end("commit", True)
    s.until(lambda: s.ask(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}),
            lambda r: r is CLOSED or str(r.transaction_states[0].transaction_state)
            == "CompleteCommit", "the commit complete")
    s.step("describe_committed", K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})
    _list_offsets(s, "last_stable", topic, [(0, -1)], isolation=1)
    again = s.record("init_again", s.settled(K.INIT_PRODUCER_ID, 5, init_body,
                                             lambda r: int(r.error_code)))
    if again is not CLOSED:
        s.record("init_again_epoch_bumped", int(again.producer_epoch) == epoch + 1)
        s.record("init_again_same_producer", int(again.producer_id) == pid)
    add("add_old_epoch_after_bump", pid, epoch)


@scenario
def transactions_v2(s: Session) -> None:
    """Transaction version 2 (KIP-890 part 2): the finalized ``transaction.version`` in
    ApiVersions v4; EndTxn v5 with nothing open (commit refused, abort bumps the epoch); a
    Produce v12 that adds its partition itself; the commit's epoch bump and the new epoch in the
    answer; a retry of that EndTxn one epoch behind, a commit at the new epoch with nothing
    open, a zombie two epochs behind; the old epoch's late Produce, fenced."""
    versions = s.ask(K.API_VERSIONS, 4, {"client_software_name": "differential",
                                         "client_software_version": "0"})
    if versions is not CLOSED:
        s.record("finalized_transaction_version", [
            (str(f.name), int(f.min_version_level), int(f.max_version_level))
            for f in versions.finalized_features if f.name == "transaction.version"])
        s.record("supported_transaction_version", [
            (str(f.name), int(f.min_version), int(f.max_version))
            for f in versions.supported_features if f.name == "transaction.version"])
    topic = s.create_topic("txn2-topic")
    txn = s.name("txn2")
    s.coordinator(txn, TXN)
    init = s.record("init", s.settled(K.INIT_PRODUCER_ID, 5, {
        "transactional_id": txn, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1}, lambda r: int(r.error_code)))
    pid, epoch = (int(init.producer_id), int(init.producer_epoch)) if init is not CLOSED \
        else (-1, -1)

    def end(step: str, commit: bool, e: int) -> int:
        """EndTxn v5: its error code and the epoch the answer names, relative to ``epoch``
        (producer ids differ between brokers; the epochs they hand out do not)."""
        answer = s.settled(K.END_TXN, 5, {"transactional_id": txn, "producer_id": pid,
                                           "producer_epoch": e, "committed": commit},
                           lambda r: int(r.error_code))
        if answer is CLOSED:
            s.record(step, CLOSED)
            return e
        same_pid = int(answer.producer_id) in (pid, -1)
        new_epoch = int(answer.producer_epoch)
        s.record(step, {"error_code": int(answer.error_code), "same_producer_id": same_pid,
                        "epoch_bumps": new_epoch - epoch if new_epoch >= 0 else None})
        return new_epoch if new_epoch >= 0 else e

    def produce(step: str, e: int, seq: int, value: bytes) -> None:
        batch = build_batch([Record(0, BASE_TS, None, value)], producer_id=pid, producer_epoch=e,
                            base_sequence=seq, is_transactional=True)
        answer = s.settled(K.PRODUCE, 12, {
            "transactional_id": txn, "acks": -1, "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
            lambda r: int(r.responses[0].partition_responses[0].error_code))
        if answer is not CLOSED:
            p = answer.responses[0].partition_responses[0]
            s.record(step, {"error_code": int(p.error_code), "base_offset": int(p.base_offset)})

    end("commit_with_nothing_open", True, epoch)
    e1 = end("abort_with_nothing_open", False, epoch)
    produce("produce_adds_its_partition", e1, 0, b"committed")
    s.until(lambda: s.ask(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}),
            lambda r: r is CLOSED or str(r.transaction_states[0].transaction_state)
            == "Ongoing", "the partition in the transaction")
    s.record("described_ongoing", [
        (str(st.transaction_state), int(st.producer_epoch) - epoch,
         [(str(t.topic) == topic, list(t.partitions)) for t in st.topics])
        for st in s.ask(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})
        .transaction_states])
    e2 = end("commit", True, e1)
    s.until(lambda: s.ask(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}),
            lambda r: r is CLOSED or str(r.transaction_states[0].transaction_state)
            == "CompleteCommit", "the commit complete")
    end("commit_retried_one_epoch_behind", True, e1)
    end("abort_retried_one_epoch_behind", False, e1)
    end("commit_at_new_epoch_with_nothing_open", True, e2)
    end("commit_two_epochs_behind", True, e2 - 2)
    produce("late_produce_old_epoch", e1, 1, b"late")
    _list_offsets(s, "last_stable", topic, [(0, -1)], isolation=1)


@scenario
def end_txn_v0_retries_a_v2_bump(s: Session) -> None:
    """A version-0 EndTxn that retries an EndTxn v5 (transaction version 2) which bumped the
    epoch, at the old epoch: after an abort with nothing open (the epoch bumped, CompleteAbort),
    EndTxn v0 abort and commit at the old epoch; after a committed transaction (Produce v12,
    EndTxn v5 commit, CompleteCommit), EndTxn v0 commit and abort at the old epoch, v5's own
    retry for comparison, and EndTxn v0 commit and abort at the new epoch. What Kafka answers decides the coordinator's rule
    (``replication/transactions/``, tests/property/test_txn_coordinator_props.py)."""
    topic = s.create_topic("txn-v0-retry")
    txn = s.name("txn-v0-retry")
    s.coordinator(txn, TXN)
    init = s.settled(K.INIT_PRODUCER_ID, 5, {
        "transactional_id": txn, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1}, lambda r: int(r.error_code))
    if init is CLOSED:
        s.record("init", CLOSED)
        return
    pid, epoch = int(init.producer_id), int(init.producer_epoch)

    def end(step: str, version: int, commit: bool, e: int) -> int:
        answer = s.settled(K.END_TXN, version, {"transactional_id": txn, "producer_id": pid,
                                                 "producer_epoch": e, "committed": commit},
                           lambda r: int(r.error_code))
        if answer is CLOSED:
            s.record(step, CLOSED)
            return e
        new_epoch = int(getattr(answer, "producer_epoch", -1))
        s.record(step, {"error_code": int(answer.error_code),
                        "epoch_bumps": new_epoch - epoch if new_epoch >= 0 else None})
        return new_epoch if new_epoch >= 0 else e

    def state(want: str) -> None:
        s.until(lambda: s.ask(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}),
                lambda r: r is CLOSED or str(r.transaction_states[0].transaction_state) == want,
                want)

    e1 = end("abort_v5_nothing_open", 5, False, epoch)
    state("CompleteAbort")
    end("abort_v0_old_epoch", 0, False, epoch)
    end("commit_v0_old_epoch", 0, True, epoch)
    end("abort_v3_old_epoch", 3, False, epoch)
    batch = build_batch([Record(0, BASE_TS, None, b"v0-retry")], producer_id=pid,
                        producer_epoch=e1, base_sequence=0, is_transactional=True)
    produced = s.settled(K.PRODUCE, 12, {
        "transactional_id": txn, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        lambda r: int(r.responses[0].partition_responses[0].error_code))
    s.record("produce_v12", produced if produced is CLOSED else
             int(produced.responses[0].partition_responses[0].error_code))
    end("commit_v5", 5, True, e1)
    state("CompleteCommit")
    end("commit_v0_old_epoch_after_commit", 0, True, e1)
    end("abort_v0_old_epoch_after_commit", 0, False, e1)
    e2 = end("commit_v5_retry_old_epoch", 5, True, e1)
    # at the epoch the commit bumped to: a version-0 EndTxn asks for what was done (the same
    # outcome again) or the other one (refused)
    end("commit_v0_new_epoch_after_commit", 0, True, e2)
    end("abort_v0_new_epoch_after_commit", 0, False, e2)
    s.step("describe_after", K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]})


# -- the metadata quorum -----------------------------------------------------------------------
@scenario
def describe_quorum(s: Session) -> None:
    """DescribeQuorum (KIP-595, KIP-836; v2 KIP-853) for ``__cluster_metadata`` partition 0 at
    v0, v1, v2: leader, epoch, voters and observers, fetch times, the voters' endpoints. Ids,
    offsets and times differ by nature between the clusters: recorded is what they must
    satisfy (the leader is a voter, its high watermark is its log end offset, the times are
    the leader's clock's now). Then what is refused: partition 1, two partitions, the metadata
    topic with another topic, no topic at all."""
    def quorum(step: str, version: int) -> None:
        before = time.time_ns() // 1_000_000 - 60_000
        answer = s.ask(K.DESCRIBE_QUORUM, version, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        if answer is CLOSED:
            s.record(step, CLOSED)
            return
        after = time.time_ns() // 1_000_000 + 60_000
        out: dict[str, Any] = {"error_code": int(answer.error_code),
                               "error_message": getattr(answer, "error_message", None)}
        topics = []
        for t in answer.topics:
            parts = []
            for p in t.partitions:
                voters = {int(v.replica_id): v for v in p.current_voters}
                leader = voters.get(int(p.leader_id))
                part: dict[str, Any] = {
                    "partition_index": int(p.partition_index), "error_code": int(p.error_code),
                    "error_message": getattr(p, "error_message", None),
                    "leader_is_a_voter": leader is not None,
                    "leader_epoch_at_least_one": int(p.leader_epoch) >= 1,
                    "voters": len(voters), "observers": len(p.observers),
                    "high_watermark_is_leaders_end": leader is not None and int(
                        p.high_watermark) == int(leader.log_end_offset)}
                if version >= 1 and leader is not None:
                    part["leader_times_now"] = all(
                        before <= int(ts) <= after for ts in (
                            leader.last_fetch_timestamp, leader.last_caught_up_timestamp))
                if version >= 2 and leader is not None:
                    part["leader_directory_id"] = plain(leader.replica_directory_id)
                parts.append(part)
            topics.append({"topic_name": str(t.topic_name), "partitions": parts})
        out["topics"] = topics
        if version >= 2:
            voter_ids = {int(v.replica_id) for t in answer.topics for p in t.partitions
                         for v in p.current_voters}
            out["nodes"] = [{"is_a_voter": int(n.node_id) in voter_ids,
                             "listeners": [str(li.name) for li in n.listeners]}
                            for n in answer.nodes]
        s.record(step, out)
    for version in (0, 1, 2):
        quorum(f"v{version}", version)

    def refused(step: str, topics: list[tuple[str, list[int]]]) -> None:
        s.step(step, K.DESCRIBE_QUORUM, 2, {"topics": [
            {"topic_name": name, "partitions": [{"partition_index": i} for i in parts]}
            for name, parts in topics]})
    refused("partition_1", [("__cluster_metadata", [1])])
    refused("two_partitions", [("__cluster_metadata", [0, 0])])
    refused("with_another_topic", [("__cluster_metadata", [0]), (s.name("nothing"), [0])])
    refused("no_topic", [])
