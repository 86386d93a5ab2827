"""Group configs (ConfigResource GROUP): Kafka's names, types, rules, the broker's bounds and
their messages (``floodmark.group_configs``), their metadata record, and the share partition's
``by_duration`` start."""

from __future__ import annotations

from typing import Any

import pytest

from floodmark.broker.share_group.partition import OffsetReset, SharePartition, parse_reset
from floodmark.config_rules import iso_duration_ms
from floodmark.controller.image import MetadataImage
from floodmark.controller.record_check import check_record
from floodmark.controller.snapshot import image_records
from floodmark.errors import ErrorCode, KafkaError
from floodmark.group_configs import GROUP_CONFIGS, effective, validate
from floodmark.settings import DEFAULTS


def broker(**overrides: Any) -> Any:
    values = {**DEFAULTS, **{k.replace("_", "."): v for k, v in overrides.items()}}
    return values.get


def refused(configs: dict[str, Any], get: Any = None) -> str:
    with pytest.raises(KafkaError) as err:
        validate(configs, broker() if get is None else get)
    assert err.value.code is ErrorCode.INVALID_CONFIG
    return err.value.message


def test_kafka_4_2_names() -> None:
    assert sorted(GROUP_CONFIGS) == sorted([
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms", "share.delivery.count.limit",
        "share.partition.max.record.locks", "share.auto.offset.reset", "share.isolation.level",
        "share.renew.acknowledge.enable", "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms"])


def test_values_are_typed() -> None:
    assert validate({"consumer.session.timeout.ms": "50000",
                     "share.auto.offset.reset": "earliest",
                     "share.renew.acknowledge.enable": "false"}, broker()) == {
        "consumer.session.timeout.ms": 50_000, "share.auto.offset.reset": "earliest",
        "share.renew.acknowledge.enable": False}


@pytest.mark.parametrize(("configs", "message"), [
    ({"foo": "1"}, "Unknown group config name: foo"),
    ({"consumer.session.timeout.ms": "abc"},
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"share.record.lock.duration.ms": "500"},
     "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at "
     "least 1000"),
    ({"share.isolation.level": "hello"},
     "Invalid value hello for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ({"share.renew.acknowledge.enable": "1"},
     "Invalid value 1 for configuration share.renew.acknowledge.enable: Expected value to be "
     "either true or false"),
    ({"consumer.session.timeout.ms": "30000"},
     "consumer.session.timeout.ms must be greater than or equal to "
     "group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "70000"},
     "consumer.session.timeout.ms must be less than or equal to "
     "group.consumer.max.session.timeout.ms"),
    ({"share.record.lock.duration.ms": "5000"},
     "share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    ({"share.delivery.count.limit": "11"},
     "share.delivery.count.limit must be less than or equal to "
     "group.share.max.delivery.count.limit"),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to "
     "group.streams.max.standby.replicas"),
    ({"share.auto.offset.reset": "none"},
     "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for "
     "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
     "of the format 'by_duration:<PnDTnHnMn.nS>'."),
])
def test_kafka_refusals(configs: dict[str, Any], message: str) -> None:
    assert refused(configs) == message


def test_unknown_name_first_as_kafka() -> None:
    assert refused({"consumer.session.timeout.ms": "abc", "zzz": "1"}) == \
        "Unknown group config name: zzz"


def test_session_timeout_above_heartbeat_with_the_broker_value() -> None:
    loose = broker(group_share_max_heartbeat_interval_ms=60_000)
    assert refused({"share.heartbeat.interval.ms": "50000"}, loose) == \
        "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
    assert validate({"share.heartbeat.interval.ms": "50000",
                     "share.session.timeout.ms": "55000"}, loose)


def test_the_bounds_are_the_brokers_settings() -> None:
    """confluent-kafka-python's suite lowers group.share.min.record.lock.duration.ms to 1 s."""
    low = broker(group_share_min_record_lock_duration_ms=1000)
    assert validate({"share.record.lock.duration.ms": "5000"}, low) == {
        "share.record.lock.duration.ms": 5000}


def test_a_broker_default_outside_the_bounds_does_not_block_other_names() -> None:
    """floodmark's tests run 300 ms heartbeats: a group may still set its reset strategy."""
    fast = broker(group_consumer_heartbeat_interval_ms=300)
    assert validate({"share.auto.offset.reset": "earliest"}, fast)


@pytest.mark.parametrize(("text", "ok"), [
    ("earliest", True), ("latest", True), ("by_duration:PT1H", True),
    ("by_duration:P1DT2H3M4.5S", True), ("by_duration:PT0S", True),
    ("by_duration:-PT1H", False), ("by_duration:PT", False), ("by_duration:P1DT", False),
    ("by_duration:1h", False), ("Earliest", False), ("none", False), ("", False),
])
def test_share_auto_offset_reset(text: str, ok: bool) -> None:
    if ok:
        assert validate({"share.auto.offset.reset": text}) == {"share.auto.offset.reset": text}
    else:
        with pytest.raises(KafkaError):
            validate({"share.auto.offset.reset": text})


@pytest.mark.parametrize(("text", "ms"), [
    ("P1D", 86_400_000), ("PT1H30M", 5_400_000), ("PT0.5S", 500), ("pt2m", 120_000),
    ("-PT1S", -1000), ("PT-1.5S", -1500), ("P", None), ("PT", None), ("1H", None),
])
def test_iso_durations_as_java_reads_them(text: str, ms: int | None) -> None:
    assert iso_duration_ms(text) == ms


def test_effective_values_own_over_broker() -> None:
    values = effective({"share.delivery.count.limit": 3},
                       broker(group_share_record_lock_duration_ms=1000))
    assert values["share.delivery.count.limit"] == 3
    assert values["share.record.lock.duration.ms"] == 1000
    assert values["share.renew.acknowledge.enable"] is True  # no broker setting: Kafka's
    assert values["consumer.heartbeat.interval.ms"] == 5000


def test_the_record_is_checked_replayed_and_kept_in_snapshots() -> None:
    with pytest.raises(KafkaError, match="Unknown group config name: nope"):
        check_record({"type": "group_configs", "name": "g", "configs": {"nope": 1}})
    with pytest.raises(KafkaError):
        check_record({"type": "group_configs", "name": "", "configs": {}})
    image = MetadataImage()
    rec = {"type": "group_configs", "name": "g", "configs": {"share.auto.offset.reset":
                                                            "earliest"}}
    check_record(rec)
    image.apply(rec)
    again = MetadataImage()
    for r in image_records(image):
        again.apply(r)
    assert again.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    image.apply({"type": "group_configs", "name": "g", "configs": {}})
    assert image.group_configs == {}


def test_by_duration_starts_at_the_first_recent_offset() -> None:
    assert parse_reset("by_duration:PT1M") == (OffsetReset.BY_DURATION, 60_000)
    assert parse_reset("earliest") == (OffsetReset.EARLIEST, 0)
    core = SharePartition()
    core.initialize(OffsetReset.BY_DURATION, 2, 10, 6)
    assert core.start_offset == 6
    core.initialize(OffsetReset.BY_DURATION, 2, 10, None)  # nothing that recent: the end
    assert core.start_offset == 10
    core.initialize(OffsetReset.BY_DURATION, 2, 10, 0)  # below the log start: the start
    assert core.start_offset == 2
