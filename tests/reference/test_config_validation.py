"""floodmark refuses a topic config value as the real Kafka does (issue 24 §2): the same values,
the same code, the same words. Each case goes to the session's real Kafka (``kafka_broker``,
the release ``tools/kafka/pom.xml`` pins) as CreateTopics from a real client (confluent-kafka)
and through floodmark's one check (``settings.validate_topic_configs``, what the broker, the
controller and the CLI run); dynamic broker defaults go as the same IncrementalAlterConfigs to
both the real Kafka and a floodmark broker process. The differences kept on purpose are listed with their reason
(docs/kafka-differences.md)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from floodmark.errors import KafkaError
from floodmark.settings import validate_topic_configs
from tests.reference.kafka_node import KafkaCluster

pytestmark = pytest.mark.integration

CASES = [
    ("retention.ms", "-5"), ("retention.ms", "soon"), ("retention.bytes", "-7"),
    ("min.insync.replicas", "0"), ("cleanup.policy", "compact,keep"),
    ("message.timestamp.type", "WallClock"), ("max.message.bytes", "-1"),
    ("min.cleanable.dirty.ratio", "1.5"), ("flush.messages", "0"), ("flush.ms", "-1"),
    ("delete.retention.ms", "-1"), ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"), ("unclean.leader.election.enable", "yes"),
    ("compression.type", "brotli"), ("compression.gzip.level", "10"),
    ("compression.zstd.level", "23"), ("segment.index.bytes", "2"),
    ("index.interval.bytes", "-1"), ("file.delete.delay.ms", "-1"), ("segment.ms", "0"),
    ("segment.jitter.ms", "-1"), ("local.retention.ms", "-3"),
    ("leader.replication.throttled.replicas", "x"), ("retention.fortnights", "1"),
    ("message.timestamp.after.max.ms", "-1"),
    ("cleanup.policy", ""),  # taken by both: neither delete nor compact
]

# (name, value) -> why floodmark answers otherwise on purpose.
KEPT_DIFFERENT = {
    ("segment.bytes", "1000"): "Kafka 4.1's floor is 1 MiB; floodmark's is one batch header",
}


def _kafka_answer(admin: AdminClient, name: str, value: str) -> str:
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    (future,) = admin.create_topics([NewTopic(topic, 1, 1, config={name: value})]).values()
    try:
        future.result(30)
    except KafkaException as exc:
        error = exc.args[0]
        return f"{error.name()}: {error.str()}"
    admin.delete_topics([topic])
    return "ACCEPTED"


def _floodmark_answer(name: str, value: str) -> str:
    try:
        validate_topic_configs({name: value})
    except KafkaError as exc:
        return f"{exc.code.name}: {exc.message}"
    return "ACCEPTED"


def test_topic_config_refusals_are_kafkas(kafka_broker: KafkaCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    differ = [(name, value, kafka, fm) for name, value in CASES
              if (kafka := _kafka_answer(admin, name, value))
              != (fm := _floodmark_answer(name, value))]
    assert not differ, "\n".join(f"{n}={v!r}\n  kafka:     {k}\n  floodmark: {f}"
                                 for n, v, k, f in differ)
    for (name, value), why in KEPT_DIFFERENT.items():  # still different, for the reason given
        assert _kafka_answer(admin, name, value) != _floodmark_answer(name, value), why


BROKER_CASES = [
    ("log.retention.ms", "-5"),  # accepted by both: no validator, a negative is no limit
    ("log.cleanup.policy", "keep"), ("min.insync.replicas", "0"), ("log.segment.bytes", "abc"),
    ("log.message.timestamp.type", "Now"), ("log.cleaner.min.cleanable.ratio", "2"),
    ("message.max.bytes", "-1"), ("log.flush.interval.messages", "0"),
    ("compression.type", "brotli"), ("log.cleaner.backoff.ms", "-1"),
    ("log.retention.hours", "1"),  # read-only
]


def _alter_cluster_default(bootstrap: str, name: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of the cluster-wide broker default (resource ""), SET or (value
    None) DELETE: the answer's code and message."""
    with KafkaConnection(bootstrap, client_id="config-validation") as conn:
        answer = conn.request(44, 1, {"validate_only": False, "resources": [{
            "resource_type": 4, "resource_name": "", "configs": [{
                "name": name, "config_operation": 0 if value is not None else 1,
                "value": value}]}]})
    (result,) = answer.responses
    return int(result.error_code), result.error_message


def test_broker_config_refusals_are_kafkas(kafka_broker: KafkaCluster, broker) -> None:  # type: ignore[no-untyped-def]
    """The same request to both brokers (a floodmark broker process, the real Kafka): the same
    code and words for each dynamic broker default, and both put back afterwards."""
    differ = []
    for name, value in BROKER_CASES:
        answers = [_alter_cluster_default(b, name, value)
                   for b in (kafka_broker.bootstrap, broker.bootstrap)]
        if answers[0] != answers[1]:
            differ.append(f"{name}={value!r}\n  kafka:     {answers[0]}\n  floodmark: {answers[1]}")
        for b, (code, _message) in zip((kafka_broker.bootstrap, broker.bootstrap), answers,
                                       strict=True):
            if code == 0:
                assert _alter_cluster_default(b, name, None)[0] == 0
    assert not differ, "\n".join(differ)
