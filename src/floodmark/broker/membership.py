"""A lone broker's membership: the one-node cluster of combined mode (``process.roles=broker,
controller``), its controller in process (``metadata.LocalController``).

The node is the only broker, so it leads every partition it hosts and coordinates every group
and transactional id (``__transaction_state`` is created on first use);
its ISR never changes (there is no one to propose a change to). A cluster member's membership is
``cluster_member.ClusterMembership``; the broker is the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from floodmark.broker import dynamic_configs
from floodmark.broker.context import BrokerInfo, MembershipBase, PartitionKey
from floodmark.broker.log_opener import OPEN_THREADS, open_all
from floodmark.broker.metadata import Controller, LocalController
from floodmark.broker.setting_keys import (
    OFFSETS_TOPIC_NUM_PARTITIONS,
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS,
    TRANSACTION_STATE_LOG_NUM_PARTITIONS,
)
from floodmark.broker.storage_glue import LogOpening
from floodmark.errors import KafkaError
from floodmark.metadata import OFFSETS_TOPIC, CoordinatorType, PartitionMeta, TopicMeta
from floodmark.records import CorruptRecordError
from floodmark.replication import AlterPartitionRequest, Partition, PartitionRegistration
from floodmark.security import ScramUser
from floodmark.storage import EpochCheckpointBatch

log = logging.getLogger(__name__)


class LocalMembership(MembershipBase):
    def __init__(self, data_dir: Path, node_id: int,
                 bootstrap_scram: tuple[ScramUser, ...] = (), *, rack: str | None = None,
                 bootstrap_features: tuple[tuple[str, int], ...] | None = None) -> None:
        """``rack``: this node's ``broker.rack`` (registered, and answered in Metadata);
        ``bootstrap_features``: the levels a new metadata log starts at (None: this
        release's, ``features.BOOTSTRAP``)."""
        self._local = LocalController(data_dir, node_id, bootstrap_scram, rack=rack,
                                      bootstrap_features=bootstrap_features)
        self._rack = rack

    @property
    def controller(self) -> Controller:
        return self._local

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Open (and recover) every partition log the metadata knows; replay committed offsets."""
        host = self.host
        controller = self._local
        self.metadata_changed()
        if OFFSETS_TOPIC not in controller.topics():
            n = host.config.value(OFFSETS_TOPIC_NUM_PARTITIONS)
            controller.create_topic_now(OFFSETS_TOPIC, n, 1, {"cleanup.policy": "compact"})
            self.metadata_changed()
        dynamic_configs.apply(host)  # KIP-226 dynamic broker configs from the metadata
        for p in controller.topics()[OFFSETS_TOPIC].partitions:
            ps = host.partitions.get((OFFSETS_TOPIC, p.partition))
            if ps is not None:  # one that could not be opened stays offline (logged above)
                host.load_offsets_partition(ps)
        host.storage.remove_orphans(controller.topics())

    def metadata_changed(self) -> None:
        """Open the partitions not open yet; this node leads each of them. Their logs are
        opened on ``OPEN_THREADS`` threads (``log_opener.open_all``: after a SIGKILL each
        recovered log is fsynced, and one after another 10,000 of them took minutes), and their
        new leader epochs' checkpoints are made durable together (``EpochCheckpointBatch``,
        concurrent fsyncs) before any of them takes a write."""
        host = self.host
        storage = host.storage
        openings: list[tuple[TopicMeta, PartitionMeta, LogOpening]] = []
        for meta in list(self._local.topics().values()):
            for p in meta.partitions:
                if (meta.name, p.partition) in host.partitions:
                    continue
                try:
                    openings.append((meta, p, storage.begin_open(
                        meta.name, p.partition, meta.configs, host.now_ms(), meta.topic_id)))
                except KafkaError as exc:  # its log directory is offline
                    log.error("partition %s-%d not opened: %s", meta.name, p.partition,
                              exc.message)
        outcomes = open_all([opening for _, _, opening in openings], OPEN_THREADS)
        epoch_writes = EpochCheckpointBatch()
        for (meta, p, opening), outcome in zip(openings, outcomes, strict=True):
            try:
                if isinstance(outcome, Exception):
                    storage.abandon_open(opening)
                    raise outcome
                plog, hw = storage.finish_open(opening, outcome)
            except KafkaError as exc:
                # Another topic's directory (partition.metadata): that partition stays
                # offline, the others are served.
                log.error("partition %s-%d not opened: %s", meta.name, p.partition,
                          exc.message)
                continue
            except CorruptRecordError as exc:
                # Corrupt data the open found (e.g. an unreadable transaction marker):
                # that partition stays offline, named with where; the others are served.
                log.error("partition %s-%d not opened: corrupt log: %s", meta.name,
                          p.partition, exc)
                continue
            ps = host.adopt_partition(meta.name, p.partition, meta.configs, plog, hw)
            replicas = p.replicas or (host.node_id,)
            ps.apply_metadata(PartitionRegistration(
                replicas=replicas, isr=p.isr or replicas, leader=host.node_id,
                leader_epoch=p.leader_epoch, partition_epoch=0), host.now_ms(),
                epoch_writes=epoch_writes)
        if epoch_writes:
            started = time.monotonic()
            durable = epoch_writes.run_now(host.now_ms(), concurrent=True)
            log.info("leader-epoch checkpoints of %d partitions written (%d durable) in %.0f ms",
                     len(epoch_writes), durable, (time.monotonic() - started) * 1000)
        host.refresh_transactions()  # the transaction coordinator of what it now leads
        host.refresh_share_state()  # and the share coordinator
        host.apply_group_configs()  # the groups' own configs (ConfigResource GROUP)

    def start(self, port: int, ready: Callable[[int], None] | None) -> None:
        if ready is not None:
            ready(port)

    async def leave(self) -> None:
        """Nobody to hand leadership to."""

    def stop(self) -> None:
        """No loops of its own."""

    def close(self) -> None:
        self._local.close()

    # -- the cluster as this node sees it ---------------------------------------------------------
    def propose_isr(self, key: PartitionKey, request: AlterPartitionRequest) -> None:
        """A single broker is every partition's only replica: its ISR never changes."""
        log.info("partition %s-%d: no controller to propose ISR %s to", key[0], key[1],
                 list(request.new_isr))

    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """This one, alone (at listener ``listener_name``'s advertised endpoint)."""
        address = self.broker_address(self.host.node_id, listener_name)
        if address is None:
            return []
        host, port = address
        return [{"node_id": self.host.node_id, "host": host, "port": port, "rack": self._rack}]

    def listed_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        return self.live_brokers(listener_name)

    def fenced_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """A single broker is never fenced."""
        return []

    def coordinator_for(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP
                        ) -> int:
        """A single broker coordinates every group and transactional id."""
        if key_type is not CoordinatorType.GROUP and key_type.topic not in \
                self._local.topics():
            n = self.host.config.value(
                TRANSACTION_STATE_LOG_NUM_PARTITIONS if key_type is CoordinatorType.TRANSACTION
                else SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS)
            self._local.create_topic_now(key_type.topic, n, 1, {"cleanup.policy": "compact"})
            self.metadata_changed()
        return self.host.node_id

    def leadership_in_doubt(self) -> bool:
        """Never: this node is its own controller."""
        return False

    def steps_down(self, core: Partition, now_ms: int) -> bool:
        """Never: this node is its own controller."""
        return False

    def broker_address(self, node_id: int,
                       listener_name: str | None = None) -> tuple[str, int] | None:
        if node_id != self.host.node_id:
            return None
        if listener_name is None:
            return self.host.advertised
        ep = self.host.advertised_endpoint(listener_name)
        return (ep.host, ep.port) if ep is not None else None
