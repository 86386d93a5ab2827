"""The controller's gauges, read from its metadata image when Prometheus scrapes.

Kafka names (JMX exporter style) of ``kafka.controller:type=KafkaController`` and
``ControllerStats``: ActiveControllerCount, OfflinePartitionsCount, GlobalPartitionCount,
GlobalTopicCount, FencedBrokerCount, ActiveBrokerCount, PreferredReplicaImbalanceCount,
LeaderElectionRateAndTimeMs and UncleanLeaderElectionsPerSec (their counts, ``_total``).
``floodmark_controller_underreplicatedpartitions`` is the cluster-wide count (the brokers' own
gauge counts only the partitions each leads, as in Kafka).

ActiveControllerCount is 1 only while this process is the active controller (the quorum leader
that has taken over: ``server.logic`` is set), 0 on the other voters, so the sum over a quorum
is 1 (the usual "sum != 1" alert). The election counters are ``ElectionCounts``, kept by the
server for its whole life and bumped where the logic decides an election: they never go down
(a deleted topic, a lost leadership or a new logic leaves them as they are); a restarted process
starts again from 0, which Prometheus's ``rate`` reads as a counter reset. Only the controller
that decided an election counts it: sum over the quorum for the cluster's elections.
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
        yield gauge(prefix + "activecontrollercount",
                    "1 on the active controller, 0 on the other voters",
                    int(self.server.logic is not None))
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
        elections = self.server.elections
        yield CounterMetricFamily("kafka_controller_controllerstats_leaderelections",
                                  "Leader elections this controller decided since it started",
                                  value=elections.leader_elections)
        yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                  "Unclean leader elections this controller decided since it "
                                  "started", value=elections.unclean_leader_elections)
