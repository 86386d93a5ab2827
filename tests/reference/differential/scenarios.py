"""The scenarios, in the order of issue 23: each sends the same requests to one broker and
records the answers worth comparing under step names (``Session.record``). A scenario is written
once and run against both brokers; nothing in it depends on which broker it talks to.

Request versions are ones both brokers serve (Kafka 4.1 dropped the oldest; floodmark's table
is ``wire/api_table.py``). Record timestamps are fixed, so ListOffsets by time compares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from floodmark.records import Record, build_batch
from floodmark.wire.api_table import ApiKey as K
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
    """Metadata: an unknown topic with auto-creation off; a bad topic name."""
    s.step("unknown_topic", K.METADATA, 9, {"topics": [{"name": s.name("nothing")}],
                                            "allow_auto_topic_creation": False})
    s.step("invalid_name", K.METADATA, 9, {"topics": [{"name": "bad/name"}],
                                           "allow_auto_topic_creation": False})
    topic = s.create_topic("meta", 3)
    s.step("three_partitions", K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                "allow_auto_topic_creation": False})


# -- produce and fetch -------------------------------------------------------------------------
@scenario
def produce(s: Session) -> None:
    """Produce: acks 1 and -1, an invalid acks value, unknown topic and partition, a batch
    above max.message.bytes, a batch with a bad CRC, a batch at offset 2 after two records."""
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
        "replica_id": -1, "isolation_level": isolation, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": epoch, "timestamp": t}
            for p, t in specs]}]})


@scenario
def list_offsets(s: Session) -> None:
    """ListOffsets: earliest (-2), latest (-1), max-timestamp (-3, KIP-734), by timestamp
    (before, inside, after the records), an unknown partition, a future leader epoch."""
    topic = s.create_topic("offsets")
    _list_offsets(s, "empty_earliest_latest_max", topic, [(0, -2), (0, -1), (0, -3)])
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
