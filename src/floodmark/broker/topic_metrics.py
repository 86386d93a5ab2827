"""Kafka's BrokerTopicMetrics, per topic and for all topics, counted where Produce and Fetch
build their answers.

Names as the Prometheus JMX exporter's usual Kafka rules write them: the bean
``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``, and the all-topics bean (no
``topic`` key) the same name without the label. A dashboard sums ``{topic=""}`` for the broker
(or ``{topic!=""}`` by topic), never both: each byte is in both series.

What is counted (Kafka's rules):

- ``bytesin`` / ``messagesin``: record batches a leader appended for a Produce (bytes as sent,
  records by how far the log end moved); refused and duplicate batches add nothing;
- ``bytesout``: record bytes in Fetch answers to consumers; followers' fetches count in
  ``replicationbytesout`` (all topics only), as in Kafka;
- ``totalproducerequests`` / ``failedproducerequests``, ``totalfetchrequests`` /
  ``failedfetchrequests``: one per partition of a request (Kafka marks them per partition),
  failed when that partition's answer is an error at the time it is read or appended
  (an acks=all timeout later is a REQUEST_TIMED_OUT in the errors metric, not a failure here).

Only topics this broker hosts get a ``topic`` label (a client asking for unknown topics cannot
grow the label set). Kafka has no per-topic messages-out metric (a Fetch answer's records are
sent from the segment files unread), and neither has floodmark.

Cost: a dict lookup and a few integer additions per partition of a Produce or Fetch, only
when ``/metrics`` is on (``Broker.topic_metrics`` is None otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample


class TopicCounts:
    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "messages_in",
                 "total_fetch", "total_produce")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.total_produce = 0
        self.failed_produce = 0
        self.total_fetch = 0
        self.failed_fetch = 0


# (exporter name, help, TopicCounts field): the per-topic series, each with its all-topics sum.
_PER_TOPIC = (
    ("bytesin", "Record bytes appended by Produce as leader (Kafka BytesInPerSec)", "bytes_in"),
    ("messagesin", "Records appended by Produce as leader (Kafka MessagesInPerSec)",
     "messages_in"),
    ("bytesout", "Record bytes sent in Fetch answers to consumers (Kafka BytesOutPerSec)",
     "bytes_out"),
    ("totalproducerequests", "Produce partitions received (Kafka TotalProduceRequestsPerSec)",
     "total_produce"),
    ("failedproducerequests", "Produce partitions answered with an unexpected error (Kafka "
     "FailedProduceRequestsPerSec)", "failed_produce"),
    ("totalfetchrequests", "Fetch partitions received (Kafka TotalFetchRequestsPerSec)",
     "total_fetch"),
    ("failedfetchrequests", "Fetch partitions answered with an error (Kafka "
     "FailedFetchRequestsPerSec)", "failed_fetch"),
)
PREFIX = "kafka_server_brokertopicmetrics_"


class BrokerTopicMetrics(Collector):
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounts] = {}
        self.replication_bytes_out = 0

    def counts(self, topic: str) -> TopicCounts:
        c = self.topics.get(topic)
        if c is None:
            c = self.topics[topic] = TopicCounts()
        return c

    def collect(self) -> Iterable[Metric]:
        topics = sorted(list(self.topics.items()))
        for name, doc, field in _PER_TOPIC:
            family = CounterMetricFamily(PREFIX + name, doc, labels=["topic"])
            total = 0
            for topic, c in topics:
                value = getattr(c, field)
                total += value
                family.add_metric([topic], value)
            # The all-topics bean: the same name without the label (the JMX exporter's output).
            family.samples.append(Sample(f"{PREFIX}{name}_total", {}, total))
            yield family
        yield CounterMetricFamily(PREFIX + "replicationbytesout",
                                  "Record bytes sent in Fetch answers to follower replicas "
                                  "(Kafka ReplicationBytesOutPerSec)",
                                  value=self.replication_bytes_out)
