"""The controller's gauges, read from its metadata image when Prometheus scrapes.

Kafka names (JMX exporter style) of ``kafka.controller:type=KafkaController`` and
``ControllerStats``: ActiveControllerCount, OfflinePartitionsCount, GlobalPartitionCount,
GlobalTopicCount, FencedBrokerCount, ActiveBrokerCount, PreferredReplicaImbalanceCount,
LeaderElectionRateAndTimeMs (as a counter: every election bumps a leader epoch, so the sum of the
leader epochs is the number of elections of the live topics) and UncleanLeaderElectionsPerSec.
``floodmark_controller_underreplicatedpartitions`` is the cluster-wide count (the brokers' own
gauge counts only the partitions each leads, as in Kafka).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class ControllerCollector(Collector):
    def __init__(self, server: Any) -> None:
        self.server = server

    def collect(self) -> Iterable[Metric]:
        image = self.server.image
        brokers = list(image.brokers.values())
        partitions = [reg for t in list(image.topics.values())
                      for reg in list(t.partitions.values())]
        offline = sum(1 for reg in partitions if reg.leader < 0)
        under = sum(1 for reg in partitions if len(reg.isr) < len(reg.replicas))
        imbalance = sum(1 for reg in partitions if reg.replicas and reg.leader != reg.replicas[0])
        fenced = sum(1 for b in brokers if b.fenced)

        def gauge(name: str, doc: str, value: float) -> Metric:
            return GaugeMetricFamily(name, doc, value=value)

        prefix = "kafka_controller_kafkacontroller_"
        yield gauge(prefix + "activecontrollercount", "1 on the active controller", 1)
        yield gauge(prefix + "offlinepartitionscount", "Partitions without a leader", offline)
        yield gauge(prefix + "globalpartitioncount", "Partitions in the cluster", len(partitions))
        yield gauge(prefix + "globaltopiccount", "Topics in the cluster", len(image.topics))
        yield gauge(prefix + "fencedbrokercount", "Registered brokers that are fenced", fenced)
        yield gauge(prefix + "activebrokercount", "Registered brokers that are not fenced",
                    len(brokers) - fenced)
        yield gauge(prefix + "preferredreplicaimbalancecount",
                    "Partitions not led by their preferred (first) replica", imbalance)
        yield gauge("floodmark_controller_underreplicatedpartitions",
                    "Partitions whose ISR is smaller than their replica set", under)
        yield CounterMetricFamily("kafka_controller_controllerstats_leaderelections",
                                  "Leader elections (sum of the partitions' leader epochs)",
                                  value=sum(max(reg.leader_epoch, 0) for reg in partitions))
        yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                  "Unclean leader elections since this controller started",
                                  value=self.server.logic.unclean_elections if self.server.logic else 0)
