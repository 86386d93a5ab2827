"""A broker's gauges, read from its partitions when Prometheus scrapes (``floodmark.metrics``).

Kafka names (JMX exporter style): ReplicaManager's UnderReplicatedPartitions,
UnderMinIsrPartitionCount, AtMinIsrPartitionCount, PartitionCount, LeaderCount,
IsrShrinksPerSec, IsrExpandsPerSec; per partition ``kafka_log_log_logendoffset``,
``..._logstartoffset`` and ``..._size`` (bytes of its segment files), and on the leader
``kafka_cluster_partition_underreplicated`` and ``..._underminisr`` (its ISR is smaller than
min.insync.replicas, at most the replication factor: acks=all produces are refused with
NOT_ENOUGH_REPLICAS); kafka_exporter's
``kafka_consumergroup_lag`` for the groups this broker coordinates, on the partitions it leads.
``floodmark_partition_high_watermark`` is floodmark's own (Kafka has no HW bean), as are the
transaction coordinator's ``floodmark_transactions`` (ids coordinated here, by state) and
``floodmark_transaction_markers_written`` (partitions that answered a marker).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from floodmark.broker.broker import Broker


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterable[Metric]:
        b = self.broker
        labels = ["topic", "partition"]
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset of this replica",
                                labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset",
                                  "Log start offset of this replica", labels=labels)
        hw = GaugeMetricFamily("floodmark_partition_high_watermark",
                               "High watermark of this replica", labels=labels)
        urp = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                "1 if this broker leads the partition and its ISR is smaller "
                                "than its replica set", labels=labels)
        under_min = GaugeMetricFamily("kafka_cluster_partition_underminisr",
                                      "1 if this broker leads the partition and its ISR is "
                                      "smaller than min.insync.replicas", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size",
                                 "Bytes of this replica's segment files", labels=labels)
        under = leaders = count = under_min_count = at_min_count = 0
        high_watermarks: dict[tuple[str, int], int] = {}
        for (topic, index), ps in list(b.partitions.items()):
            name = [topic, str(index)]
            count += 1
            leo.add_metric(name, ps.log_end_offset)
            start.add_metric(name, ps.log_start_offset)
            hw.add_metric(name, ps.high_watermark)
            size.add_metric(name, ps.log.size_bytes)
            core = ps.core
            if core.is_leader:
                leaders += 1
                high_watermarks[(topic, index)] = ps.high_watermark
                role = core.role
                replicas = len(role.replicas) if role is not None else 0
                isr = len(core.isr)
                lagging = int(isr < replicas)
                under += lagging
                urp.add_metric(name, lagging)
                min_isr = core.effective_min_isr()
                below = int(isr < min_isr)
                under_min_count += below
                at_min_count += int(isr == min_isr)
                under_min.add_metric(name, below)
        yield leo
        yield start
        yield hw
        yield size
        yield urp
        yield under_min
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than the replica set",
                                value=under)
        yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                                "Partitions led here whose ISR is smaller than "
                                "min.insync.replicas", value=under_min_count)
        yield GaugeMetricFamily("kafka_server_replicamanager_atminisrpartitioncount",
                                "Partitions led here whose ISR is exactly min.insync.replicas "
                                "(one more loss refuses acks=all)", value=at_min_count)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Partitions hosted by this broker", value=count)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                "Partitions led by this broker", value=leaders)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks accepted by the controller (IsrShrinksPerSec)",
                                  value=b.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions accepted by the controller (IsrExpandsPerSec)",
                                  value=b.isr_expands)
        yield CounterMetricFamily(
            "kafka_server_broker_metadata_metrics_metadata_apply_error_count",
            "Metadata records this broker could not apply and skipped (Kafka's "
            "metadata-apply-error-count); floodmark cluster status lists them",
            value=b.metadata_apply_errors)
        image = getattr(b.controller, "image", None)  # a cluster member's metadata image
        if image is not None:
            yield GaugeMetricFamily(
                "kafka_server_broker_metadata_metrics_last_applied_record_offset",
                "Offset of the last metadata record this broker applied (Kafka's "
                "last-applied-record-offset); cluster status shows when (metadata_applied)",
                value=image.next_offset - 1)
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the group's committed offset (groups "
                                "coordinated here, partitions led here)",
                                labels=["consumergroup", "topic", "partition"])
        # (a scrape runs on the metrics server's thread: it reads the coordinators a broker has
        # built, and never builds one, whose timers belong on the broker's loop)
        if b.built("offsets"):
            offsets = b.offsets
            for group in list(offsets.groups()):
                for (topic, index), committed in list(offsets.group_offsets(group).items()):
                    top = high_watermarks.get((topic, index))
                    if top is not None and committed.offset >= 0:
                        lag.add_metric([group, topic, str(index)],
                                       max(0, top - committed.offset))
        yield lag
        by_state: dict[str, int] = {}
        transactions = b.transactions if b.built("transactions") else None
        for m in transactions.core.transactions() if transactions is not None else ():
            by_state[m.state.kafka_name] = by_state.get(m.state.kafka_name, 0) + 1
        txns = GaugeMetricFamily("floodmark_transactions",
                                 "Transactional ids this broker coordinates, by state",
                                 labels=["state"])
        for state, n in sorted(by_state.items()):
            txns.add_metric([state], n)
        yield txns
        yield CounterMetricFamily("floodmark_transaction_markers_written",
                                  "Transaction markers partition leaders confirmed to this "
                                  "coordinator (one per partition and transaction)",
                                  value=transactions.markers_sent
                                  if transactions is not None else 0)
