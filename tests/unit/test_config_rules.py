"""Issue 24 §2: one table of Kafka's validators (``floodmark.config_rules.RULES``), applied with
Kafka's wording by every place a config value is judged: a topic's set (CreateTopics,
AlterConfigs, IncrementalAlterConfigs), a dynamic broker set, the controller's record check, a
broker's start, and the CLI before it sends."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from floodmark.broker.config import BrokerConfig
from floodmark.cli.common import CliError, check_configs
from floodmark.cli.main import main
from floodmark.config_rules import NOT_FOR_BROKER_DEFAULT, RULES, Between
from floodmark.controller.image import MetadataImage, UnappliedRecord
from floodmark.controller.record_check import check_record
from floodmark.errors import ErrorCode, KafkaError
from floodmark.group_configs import GROUP_CONFIGS
from floodmark.settings import (
    SETTINGS,
    TOPIC_CONFIG_DEFAULTS,
    TOPIC_ONLY_CONFIGS,
    check_value,
    rule_of,
    validate_dynamic,
    validate_topic_configs,
)

# A topic config, a bad value, and what Kafka answers (ConfigException's words).
REFUSED = [
    ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at "
     "least -1"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value "
     "must be at least 1"),
    ("cleanup.policy", "compact,keep", "Invalid value keep for configuration cleanup.policy: "
     "String must be one of: compact, delete"),
    ("message.timestamp.type", "WallClock", "Invalid value WallClock for configuration "
     "message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
    ("max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value "
     "must be at least 0"),
    ("segment.bytes", "10", "Invalid value 10 for configuration segment.bytes: Value must be at "
     "least 61"),
    ("min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration "
     "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at "
     "least 1"),
    ("delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: "
     "Value must be at least 0"),
    ("max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: "
     "Value must be at least 1"),
    ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number "
     "of type LONG"),
    ("unclean.leader.election.enable", "yes", "Invalid value yes for configuration "
     "unclean.leader.election.enable: Expected value to be either true or false"),
]


@pytest.mark.parametrize(("name", "value", "message"), REFUSED)
def test_a_topic_config_out_of_kafkas_bounds_is_refused_with_kafkas_words(
        name: str, value: str, message: str) -> None:
    with pytest.raises(KafkaError) as err:
        validate_topic_configs({name: value})
    assert (err.value.code, err.value.message) == (ErrorCode.INVALID_CONFIG, message)
    # the controller refuses the record with the same words (a record written by an older
    # version, or by hand, never reaches a broker)
    with pytest.raises(KafkaError) as err:
        check_record({"type": "topic_configs", "name": "t", "configs": {name: value}})
    assert (err.value.code, err.value.message) == (ErrorCode.INVALID_CONFIG, message)
    # and the CLI before it sends
    with pytest.raises(CliError, match=message.replace(".", r"\.")):
        check_configs({name: value}, topic=True)


def test_an_unknown_topic_config_is_named_as_kafka_names_it() -> None:
    with pytest.raises(KafkaError) as err:
        validate_topic_configs({"retention.fortnights": "1"})
    assert err.value.message == "Unknown topic config name: retention.fortnights"


def test_a_negative_log_retention_ms_is_no_limit_as_in_kafka() -> None:
    """Kafka defines log.retention.ms without a validator (4.1.1 takes -5 for the cluster
    default); the topic's retention.ms is at least -1."""
    assert validate_dynamic({"log.retention.ms": "-5"}, "") == {"log.retention.ms": -5}
    with pytest.raises(KafkaError):
        validate_topic_configs({"retention.ms": "-5"})


@pytest.mark.parametrize(("name", "value", "message"), [
    ("log.cleanup.policy", "keep", "Invalid value keep for configuration log.cleanup.policy: "
     "String must be one of: compact, delete"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value "
     "must be at least 1"),
    ("log.cleaner.backoff.ms", "-1", "Invalid value -1 for configuration "
     "log.cleaner.backoff.ms: Value must be at least 0"),
])
def test_a_dynamic_broker_default_gets_its_topic_configs_rule(name: str, value: str,
                                                              message: str) -> None:
    with pytest.raises(ValueError) as err:
        validate_dynamic({name: value}, "")
    assert str(err.value) == message
    with pytest.raises(CliError, match="Invalid value"):  # the CLI, for a broker entity
        check_configs({name: value}, topic=False)


@pytest.mark.parametrize(("setting", "message"), [
    ("log.roll.hours=0", "Invalid value 0 for configuration log.roll.hours: Value must be at "
     "least 1"),
    ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at "
     "least 1"),
    ("process.roles=broker,voter", "Invalid value voter for configuration process.roles: "
     "String must be one of: broker, controller"),
])
def test_a_broker_does_not_start_with_a_setting_kafka_refuses(
        tmp_path: Path, setting: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        BrokerConfig.load(data_dir=str(tmp_path), overrides=[setting])
    assert str(err.value) == message


def test_every_rule_names_a_setting_or_topic_config() -> None:
    known = (set(SETTINGS) | set(TOPIC_CONFIG_DEFAULTS) | set(TOPIC_ONLY_CONFIGS)
             | set(GROUP_CONFIGS))
    assert set(RULES) <= known, sorted(set(RULES) - known)


def test_every_default_passes_its_rule() -> None:
    for name, setting in SETTINGS.items():
        if setting.default is not None:
            check_value(name, setting.default)


def test_the_cli_leaves_names_it_does_not_know_to_the_broker() -> None:
    check_configs({"confluent.tier.enable": "maybe"}, topic=True)
    check_configs({"some.future.setting": "-5"}, topic=False)


_BOUNDED = sorted((name, rule) for name, rule in RULES.items()
                  if isinstance(rule, Between) and rule.high is None
                  and name in TOPIC_CONFIG_DEFAULTS and name not in NOT_FOR_BROKER_DEFAULT)


@given(st.sampled_from(_BOUNDED), st.integers(-(2**31), 2**31 - 1))
def test_a_floor_is_kept_exactly_by_the_topic_and_its_broker_default(
        entry: tuple[str, Between], value: int) -> None:
    name, rule = entry
    assert rule.low is not None
    broker_name = TOPIC_CONFIG_DEFAULTS[name]
    assert rule_of(broker_name) is rule
    if value >= rule.low:
        check_value(name, str(value))
        return
    with pytest.raises(ValueError) as err:
        check_value(name, str(value))
    assert str(err.value) == (f"Invalid value {value} for configuration {name}: Value must be "
                              f"at least {rule.low}")
    with pytest.raises(ValueError, match=f"configuration {broker_name}: Value must be at least"):
        check_value(broker_name, str(value))


def test_a_record_from_before_a_rule_keeps_its_good_values() -> None:
    """A metadata record with a value the table refuses (written before the rule existed, as
    a topic's retention.ms=-5 was, or by hand) is applied without that value, and reported;
    nothing else in it is lost."""
    image = MetadataImage()
    unapplied: list[UnappliedRecord] = []
    image.apply_all([
        (0, {"type": "broker_configs", "resource": "",
             "configs": {"log.cleanup.policy": "keep", "log.segment.bytes": "2048"}}),
        (1, {"type": "topic", "name": "old", "topic_id": str(uuid.uuid4()),
             "configs": {"retention.ms": "-5", "cleanup.policy": "compact"}}),
    ], unapplied.append)
    assert image.broker_configs[""] == {"log.segment.bytes": "2048"}
    assert image.topics["old"].configs == {"cleanup.policy": "compact"}
    assert [u.offset for u in unapplied] == [0, 1]
    assert unapplied[0].reason.startswith("applied without the broker config values refused")
    assert "Invalid value keep for configuration log.cleanup.policy" in unapplied[0].reason
    assert unapplied[1].reason.startswith("applied without the topic config values refused")


def test_cluster_up_refuses_a_bad_setting_before_any_process_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "c"
    assert main(["cluster", "up", "--brokers", "1", "--data-dir", str(data_dir),
                 "--set", "min.insync.replicas=0"]) == 1
    assert capsys.readouterr().err == ("error: Invalid value 0 for configuration "
                                       "min.insync.replicas: Value must be at least 1\n")
    assert not data_dir.exists()  # nothing started, nothing written
