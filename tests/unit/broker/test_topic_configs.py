"""Issue 23's topic configs: Kafka 4.1.1's names, defaults, validation (with Kafka's messages,
as a real Kafka 4.1.1 node answered them), DescribeConfigs entries, and what floodmark does with
them: compression.type re-compression and KIP-937's timestamp bounds on the produce path,
segment.jitter.ms / segment.index.bytes rolls in storage."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.unit.replication.test_produce_path import PID, Leader

from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers.admin import _entry, _topic_entries
from floodmark.compression import Compression
from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import (
    BatchHeader,
    Record,
    build_batch,
    decode_batch,
    decode_records,
    simple_batch,
)
from floodmark.replication.log_validator import (
    TargetCompression,
    TimestampBounds,
    out_of_range_timestamps,
    recompress,
    target_compression,
)
from floodmark.replication.produce import ProduceSettings, produce_as_leader
from floodmark.settings import ConfigSource, ConfigType, validate_dynamic, validate_topic_configs
from floodmark.storage import Log, LogConfig, MemoryFileSystem

LONG_MAX = 2**63 - 1


# -- validation: Kafka 4.1.1's answers to CreateTopics(validate_only) --------------------------
REFUSED = [
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: "
     "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: "
     "Value must be no more than 17"),
    ("compression.zstd.level", "23", "Invalid value 23 for configuration "
     "compression.zstd.level: Value must be no more than 22"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
    ("segment.jitter.ms", "-1", "Invalid value -1 for configuration segment.jitter.ms: Value "
     "must be at least 0"),
    ("segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value "
     "must be at least 4"),
    ("index.interval.bytes", "-1", "Invalid value -1 for configuration index.interval.bytes: "
     "Value must be at least 0"),
    ("preallocate", "maybe", "Invalid value maybe for configuration preallocate: Expected value "
     "to be either true or false"),
    ("file.delete.delay.ms", "-1", "Invalid value -1 for configuration file.delete.delay.ms: "
     "Value must be at least 0"),
    ("message.timestamp.before.max.ms", "-1", "Invalid value -1 for configuration "
     "message.timestamp.before.max.ms: Value must be at least 0"),
    ("message.timestamp.after.max.ms", "x", "Invalid value x for configuration "
     "message.timestamp.after.max.ms: Not a number of type LONG"),
    ("leader.replication.throttled.replicas", "a:b", "Invalid value [a:b] for configuration "
     "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the "
     "literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],"
     "[partitionId]:[brokerId],..."),
    ("follower.replication.throttled.replicas", "0:1,x", "Invalid value [0:1, x] for "
     "configuration follower.replication.throttled.replicas: follower.replication.throttled."
     "replicas must be the literal '*' or a list of replicas in the following format: "
     "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. "
     "Topic cannot be configured with remote log storage."),
    ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value "
     "must be at least -2"),
    ("local.retention.bytes", "-3", "Invalid value -3 for configuration local.retention.bytes: "
     "Value must be at least -2"),
    ("remote.log.copy.disable", "yes", "Invalid value yes for configuration "
     "remote.log.copy.disable: Expected value to be either true or false"),
    ("remote.log.delete.on.disable", "1", "Invalid value 1 for configuration "
     "remote.log.delete.on.disable: Expected value to be either true or false"),
]


@pytest.mark.parametrize(("name", "value", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_bad_value_is_refused_with_kafkas_message(name: str, value: str, message: str) -> None:
    with pytest.raises(KafkaError) as err:
        validate_topic_configs({name: value})
    assert err.value.code is ErrorCode.INVALID_CONFIG
    assert err.value.message == message


@pytest.mark.parametrize(("name", "value"), [
    ("leader.replication.throttled.replicas", "*"),
    ("follower.replication.throttled.replicas", "0:1,1:2"),
    ("follower.replication.throttled.replicas", ""),
    ("compression.type", "uncompressed"), ("compression.type", "zstd"),
    ("compression.gzip.level", "-1"), ("compression.gzip.level", "9"),
    ("compression.zstd.level", "-131072"), ("compression.lz4.level", "1"),
    ("remote.log.copy.disable", "true"), ("remote.storage.enable", "false"),
    ("local.retention.ms", "-2"), ("segment.ms", "1"), ("segment.jitter.ms", "0"),
    ("preallocate", "true"), ("file.delete.delay.ms", "0"), ("segment.index.bytes", "4"),
])
def test_a_good_value_is_kept(name: str, value: str) -> None:
    assert validate_topic_configs({name: value}) == {name: value}


# -- DescribeConfigs: Kafka 4.1.1's entries for a topic without configs of its own -------------
# name -> (value, type, synonyms with their source: Kafka lists none where the broker setting
# has no value of its own, or where there is no broker setting)
KAFKA_DEFAULTS: dict[str, tuple[str, ConfigType, list[str]]] = {
    "compression.type": ("producer", ConfigType.STRING, ["compression.type"]),
    "compression.gzip.level": ("-1", ConfigType.INT, ["compression.gzip.level"]),
    "compression.lz4.level": ("9", ConfigType.INT, ["compression.lz4.level"]),
    "compression.zstd.level": ("3", ConfigType.INT, ["compression.zstd.level"]),
    "file.delete.delay.ms": ("60000", ConfigType.LONG, ["log.segment.delete.delay.ms"]),
    "follower.replication.throttled.replicas": ("", ConfigType.LIST, []),
    "leader.replication.throttled.replicas": ("", ConfigType.LIST, []),
    "index.interval.bytes": ("4096", ConfigType.INT, ["log.index.interval.bytes"]),
    "local.retention.bytes": ("-2", ConfigType.LONG, ["log.local.retention.bytes"]),
    "local.retention.ms": ("-2", ConfigType.LONG, ["log.local.retention.ms"]),
    "message.timestamp.after.max.ms": ("3600000", ConfigType.LONG,
                                       ["log.message.timestamp.after.max.ms"]),
    "message.timestamp.before.max.ms": (str(LONG_MAX), ConfigType.LONG,
                                        ["log.message.timestamp.before.max.ms"]),
    "preallocate": ("false", ConfigType.BOOLEAN, ["log.preallocate"]),
    "remote.log.copy.disable": ("false", ConfigType.BOOLEAN, []),
    "remote.log.delete.on.disable": ("false", ConfigType.BOOLEAN, []),
    "remote.storage.enable": ("false", ConfigType.BOOLEAN, []),
    "segment.index.bytes": ("10485760", ConfigType.INT, ["log.index.size.max.bytes"]),
    "segment.jitter.ms": ("0", ConfigType.LONG, []),
    "segment.ms": ("604800000", ConfigType.LONG, []),
    "flush.ms": (str(LONG_MAX), ConfigType.LONG, []),
}


def _entries(own: dict[str, Any], config: BrokerConfig | None = None) -> dict[str, Any]:
    broker = SimpleNamespace(config=config or BrokerConfig(Path("/nonexistent")))
    return {e["name"]: e for e in _topic_entries(broker, own, True)}  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(KAFKA_DEFAULTS))
def test_describe_answers_kafkas_default_entry(name: str) -> None:
    value, kind, synonyms = KAFKA_DEFAULTS[name]
    entry = _entries({})[name]
    assert (entry["value"], entry["config_type"], entry["config_source"], entry["read_only"],
            entry["is_default"]) == (value, int(kind), int(ConfigSource.DEFAULT_CONFIG), False,
                                     True)
    assert [s["name"] for s in entry["synonyms"]] == synonyms
    assert all(s["source"] == ConfigSource.DEFAULT_CONFIG and s["value"] == value
               for s in entry["synonyms"])


def test_describe_a_topics_own_value_and_a_broker_setting() -> None:
    entries = _entries({"segment.ms": "1000", "compression.type": "gzip"})
    assert entries["segment.ms"]["value"] == "1000"
    assert entries["segment.ms"]["config_source"] == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s["name"], s["value"]) for s in entries["segment.ms"]["synonyms"]] == [
        ("segment.ms", "1000")]
    assert [(s["name"], s["value"]) for s in entries["compression.type"]["synonyms"]] == [
        ("compression.type", "gzip"), ("compression.type", "producer")]
    # a broker started with log.roll.hours=1 (and no log.roll.ms): the derived value, no synonym
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=["log.roll.hours=1"])
    assert _entries({}, config)["segment.ms"]["value"] == "3600000"
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=["log.roll.ms=5000"])
    entry = _entries({}, config)["segment.ms"]
    assert entry["value"] == "5000"
    assert entry["config_source"] == ConfigSource.STATIC_BROKER_CONFIG
    assert [s["name"] for s in entry["synonyms"]] == ["log.roll.ms"]


def test_the_broker_defaults_reach_every_topics_log_config() -> None:
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=[
        "compression.type=zstd", "log.roll.hours=2", "log.roll.jitter.ms=60000",
        "log.message.timestamp.after.max.ms=5", "log.index.size.max.bytes=4096"])
    log_config = LogConfig.from_kafka(config.log_settings())
    assert (log_config.compression_type, log_config.segment_ms, log_config.segment_jitter_ms,
            log_config.message_timestamp_after_max_ms, log_config.segment_index_bytes) == (
        "zstd", 2 * 3_600_000, 60_000, 5, 4096)
    topic = LogConfig.from_kafka({"segment.ms": "10", "compression.type": "lz4"}, log_config)
    assert (topic.segment_ms, topic.compression_type) == (10, "lz4")


# -- compression.type ------------------------------------------------------------------------
def _records(n: int, ts: int = 1000) -> list[Record]:
    return [Record(i, ts + i, f"k{i}".encode(), b"value-%d" % i * 20, (("h", b"x"),))
            for i in range(n)]


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_recompress_keeps_every_field_but_the_codec(source: Compression, target: str) -> None:
    batch = build_batch(_records(5), compression=source, producer_id=7, producer_epoch=2,
                        base_sequence=40, is_transactional=True)
    goal = target_compression(target, -1, 9, 3)
    assert goal is not None
    out = recompress(batch, goal)
    before, after = BatchHeader(batch), BatchHeader(out)
    assert after.compression is goal.codec and after.verify_crc()
    for field in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp",
                  "producer_id", "producer_epoch", "base_sequence", "records_count",
                  "is_transactional", "timestamp_type", "partition_leader_epoch"):
        assert getattr(after, field) == getattr(before, field), field
    assert decode_batch(out)[1] == decode_batch(batch)[1]
    if source is goal.codec:
        assert out is batch  # nothing to do: not even copied


def test_recompress_a_mixed_set_and_the_levels() -> None:
    records = build_batch(_records(3), compression=Compression.GZIP) + build_batch(
        _records(2), compression=Compression.ZSTD)
    out = recompress(records, TargetCompression(Compression.ZSTD, 19))
    headers = [BatchHeader(out), BatchHeader(out, BatchHeader(out).size)]
    assert [h.compression for h in headers] == [Compression.ZSTD, Compression.ZSTD]
    assert target_compression("producer", -1, 9, 3) is None
    assert target_compression("gzip", -1, 9, 3) == TargetCompression(Compression.GZIP, None)
    assert target_compression("gzip", 9, 9, 3) == TargetCompression(Compression.GZIP, 9)
    assert target_compression("lz4", -1, 17, 3) == TargetCompression(Compression.LZ4, 17)
    assert target_compression("snappy", -1, 9, 3) == TargetCompression(Compression.SNAPPY, None)


def test_the_leader_stores_the_topics_codec_and_keeps_the_sequence() -> None:
    leader = Leader(ProduceSettings(compression=TargetCompression(Compression.LZ4, 9)))
    out = leader.produce(0, acks=1)
    assert out.answer is ErrorCode.NONE
    stored = BatchHeader(leader.log.read_all())
    assert stored.compression is Compression.LZ4
    assert (stored.producer_id, stored.base_sequence) == (PID, 0)
    again = leader.produce(0, acks=1)  # the retry is still recognised as a duplicate
    assert again.duplicate and again.base_offset == 0
    assert leader.produce(1, acks=1).base_offset == 1


# -- message.timestamp.before.max.ms / after.max.ms (KIP-937) -----------------------------------
def test_out_of_range_timestamps_name_each_record_as_kafka_does() -> None:
    now = 1_000_000
    bounds = TimestampBounds(before_max_ms=1000, after_max_ms=500)
    batch = build_batch([Record(0, now, None, b"a"), Record(1, now - 1001, None, b"b"),
                         Record(2, now + 501, None, b"c"), Record(3, -1, None, b"d")])
    assert out_of_range_timestamps(batch, bounds, now) == [
        (1, f"Timestamp {now - 1001} of message with offset 1 is out of range. The timestamp "
            f"should be within [{now - 1000}, {now + 500}]"),
        (2, f"Timestamp {now + 501} of message with offset 2 is out of range. The timestamp "
            f"should be within [{now - 1000}, {now + 500}]")]
    assert out_of_range_timestamps(batch, TimestampBounds(LONG_MAX, LONG_MAX), now) == []
    inside = simple_batch([b"x"], timestamp_ms=now + 500)
    assert out_of_range_timestamps(inside, bounds, now) == []


def test_the_leader_refuses_a_record_from_the_future() -> None:
    leader = Leader(ProduceSettings(timestamps=TimestampBounds(LONG_MAX, 3_600_000)))
    now = 10
    late = simple_batch([b"a", b"b"], timestamp_ms=now + 3_600_001, producer_id=PID,
                        producer_epoch=0, base_sequence=0)
    out = produce_as_leader(leader.core, leader.log, late, acks=1, produce_id=1, now_ms=now,
                            timeout_ms=1000, settings=leader.settings)
    assert out.answer is ErrorCode.INVALID_TIMESTAMP
    assert out.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [index for index, _ in out.record_errors] == [0, 1]
    assert leader.log.log_end_offset == 0
    assert leader.produce(0, acks=1, now_ms=now).answer is ErrorCode.NONE  # sequence 0 is free


# -- storage: segment.jitter.ms, segment.index.bytes -----------------------------------------------
def test_jitter_rolls_each_segment_a_little_early() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d/t-0")
    log = Log.open("/d/t-0", LogConfig(segment_ms=1000, segment_jitter_ms=600), fs=fs, now_ms=0)
    jitter = log._roll_jitter_ms(log.active_segment)
    assert 0 <= jitter < 600
    log.append_as_leader(simple_batch([b"a"]), 0, now_ms=0)
    log.append_as_leader(simple_batch([b"b"]), 0, now_ms=999 - jitter)
    assert log.segment_base_offsets() == [0]
    log.append_as_leader(simple_batch([b"c"]), 0, now_ms=1000 - jitter)
    assert log.segment_base_offsets() == [0, 2]


def test_a_full_index_rolls_the_segment() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d/t-0")
    # 40 bytes: five offset-index entries (8 B) or three time-index entries (12 B), the last of
    # which is the roll's own (Kafka's TimeIndex.isFull)
    log = Log.open("/d/t-0", LogConfig(segment_index_bytes=40, index_interval_bytes=0),
                   fs=fs, now_ms=0)
    for i in range(12):
        log.append_as_leader(simple_batch([b"x"], timestamp_ms=i), 0, now_ms=i)
    assert len(log.segment_base_offsets()) >= 3
    assert all(len(s.time_index) <= 3 and len(s.index) <= 5 for s in log.segments)
    assert [r.value for r in decode_records(log.read_all())] == [b"x"] * 12


# -- retention.ms from log.retention.hours/minutes; the broker settings, dynamic -----------------
def test_retention_ms_derives_from_minutes_then_hours_with_no_synonym() -> None:
    entry = _entries({})["retention.ms"]
    assert (entry["value"], entry["synonyms"]) == ("604800000", [])
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=["log.retention.hours=2"])
    assert _entries({}, config)["retention.ms"]["value"] == str(2 * 3_600_000)
    assert LogConfig.from_kafka(config.log_settings()).retention_ms == 2 * 3_600_000
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=[
        "log.retention.hours=2", "log.retention.minutes=3"])
    assert _entries({}, config)["retention.ms"]["value"] == str(3 * 60_000)
    assert LogConfig.from_kafka(config.log_settings()).retention_ms == 3 * 60_000
    config = BrokerConfig.load(data_dir="/nonexistent", overrides=[
        "log.retention.minutes=3", "log.retention.ms=5000"])
    entry = _entries({}, config)["retention.ms"]
    assert (entry["value"], [s["name"] for s in entry["synonyms"]]) == ("5000",
                                                                       ["log.retention.ms"])


def test_a_broker_setting_without_a_value_has_no_synonym() -> None:

    config = BrokerConfig(Path("/nonexistent"))
    entry = _entry("log.retention.ms", config.sources("log.retention.ms"), "log.retention.ms",
                   True)
    assert (entry["value"], entry["synonyms"], entry["read_only"]) == (None, [], False)
    hours = _entry("log.retention.hours", config.sources("log.retention.hours"),
                   "log.retention.hours", True)
    assert (hours["value"], hours["read_only"]) == ("168", True)  # read-only, as in Kafka


@pytest.mark.parametrize(("name", "value", "message"), [
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("log.roll.ms", "0", "Invalid value 0 for configuration log.roll.ms: Value must be at "
     "least 1"),
    ("log.message.timestamp.after.max.ms", "-1", "Invalid value -1 for configuration "
     "log.message.timestamp.after.max.ms: Value must be at least 0"),
    ("compression.lz4.level", "0", "Invalid value 0 for configuration compression.lz4.level: "
     "Value must be at least 1"),
])
def test_the_broker_defaults_are_dynamic_and_bounded(name: str, value: str,
                                                     message: str) -> None:

    with pytest.raises(ValueError) as err:
        validate_dynamic({name: value}, "")
    assert str(err.value) == message
    assert validate_dynamic({"compression.type": "zstd", "log.roll.ms": "1000"}, "") == {
        "compression.type": "zstd", "log.roll.ms": 1000}
