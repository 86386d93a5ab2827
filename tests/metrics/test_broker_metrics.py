"""The broker metrics an operator alerts on, scraped over HTTP from a real 3-broker cluster:
per-topic BrokerTopicMetrics (messages and bytes in on the leader, bytes out to a consumer,
replication bytes out to the followers), errors per API and error code, Kafka's local/remote
request times, log size per partition, and UnderMinIsrPartitionCount through a follower kill."""

from __future__ import annotations

import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import cluster_progress, start_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
TOPIC = "metered"
MESSAGES = 200
VALUE = b"v" * 100
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path / "cluster", metrics=True)
    try:
        yield c
    finally:
        c.stop()


def _scrape(cluster: LocalCluster, node_id: int) -> Samples:
    port = cluster.node(node_id)["metrics_port"]
    with urllib.request.urlopen(f"http://{cluster.advertised_host}:{port}/metrics",
                                timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_topic_error_time_size_and_min_isr_metrics(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([topic])[TOPIC].result(30)
    with pytest.raises(Exception, match=r"TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([topic])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for _ in range(MESSAGES):
        producer.produce(TOPIC, value=VALUE, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "metered",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    for _ in range(60):  # bounded: each poll waits at most 0.5 s
        seen += sum(1 for m in consumer.consume(MESSAGES, 0.5) if m.error() is None)
        if seen >= MESSAGES:
            break
    consumer.close()
    assert seen == MESSAGES

    leader = cluster.leader_of(TOPIC)
    scraped = {b: _scrape(cluster, b) for b in cluster.broker_ids}
    lead = scraped[leader]
    assert _value(lead, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) \
        == MESSAGES
    assert _value(lead, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) \
        > MESSAGES * len(VALUE)
    # The all-topics series (no label) counts this topic too, and never less than it.
    assert _value(lead, "kafka_server_brokertopicmetrics_bytesin_total") >= _value(
        lead, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert _value(lead, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) \
        > MESSAGES * len(VALUE)
    assert _value(lead, "kafka_server_brokertopicmetrics_replicationbytesout_total") \
        > MESSAGES * len(VALUE)
    assert _value(lead, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                  topic=TOPIC) >= 1
    assert _value(lead, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                  topic=TOPIC) == 0
    for b in cluster.broker_ids:  # followers append by replication: not "bytes in"
        if b != leader:
            assert _value(scraped[b], "kafka_server_brokertopicmetrics_messagesin_total",
                          topic=TOPIC) == 0
        assert _value(scraped[b], "kafka_log_log_size", topic=TOPIC, partition="0") \
            > MESSAGES * len(VALUE)

    errors = "kafka_network_requestmetrics_errors_total"
    assert sum(_value(s, errors, request="CreateTopics", error="TOPIC_ALREADY_EXISTS")
               for s in scraped.values()) == 1
    assert _value(lead, errors, request="Produce", error="NONE") >= 1
    assert _value(lead, errors, request="Fetch", error="NONE") >= 1
    # acks=all: the produce waits for the followers (remote time), every request is counted
    # once in the local and once in the remote histogram.
    produced = _value(lead, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produced >= 1
    for part in ("localtimems", "remotetimems", "totaltimems"):
        assert _value(lead, f"kafka_network_requestmetrics_{part}_count",
                      request="Produce") == produced
    assert _value(lead, "kafka_network_requestmetrics_remotetimems_sum", request="Produce") > 0
    assert _value(lead, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert _value(lead, "kafka_server_replicamanager_atminisrpartitioncount") == 1

    victim = next(b for b in cluster.broker_ids if b != leader)
    cluster.kill(victim, signal.SIGKILL)

    def under_min_isr() -> bool:
        s = _scrape(cluster, leader)
        return (_value(s, "kafka_server_replicamanager_underminisrpartitioncount") == 1
                and _value(s, "kafka_cluster_partition_underminisr", topic=TOPIC,
                           partition="0") == 1)

    wait_until(under_min_isr, 20, "the leader's ISR below min.insync.replicas",
               progress=lambda: cluster_progress(cluster))
