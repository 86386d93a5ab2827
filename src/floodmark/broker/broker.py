"""The broker process: state, lifecycle (open/recover, serve, checkpoint, shut down), dispatch.

One asyncio event loop. The broker owns the partition logs (through ``floodmark.storage``), the
partition state (``partition_state``), the fetch purgatory, the group coordinator and the
committed-offset store; it asks the controller (``metadata.Controller``) for every metadata
change. Request handlers live in ``broker/handlers``, in one table, and see the broker through
``context.HandlerContext``.

One broker for a lone node and a cluster member alike: what differs is what it is given
(``context.Membership``: its controller and how it joins, learns metadata and leaves; a
``replica_fetcher.ReplicaManager`` for replication over the wire), never a subclass.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from floodmark.broker import replica_mover, sendfile, storage_glue
from floodmark.broker.authentication import Authentication
from floodmark.broker.authorization import Authorization, Finish
from floodmark.broker.boundary import Answer, Encoded
from floodmark.broker.config import BrokerConfig, Configs
from floodmark.broker.context import BrokerInfo, Membership, PartitionKey
from floodmark.broker.fetch_sessions import FetchSessionCache
from floodmark.broker.handlers import HANDLERS, RAW_HANDLERS, data
from floodmark.broker.membership import LocalMembership
from floodmark.broker.metadata import Controller, LocalController
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.partition_timers import PartitionTimers
from floodmark.broker.produce_order import TxnProduces
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.quotas import ClientQuotas
from floodmark.broker.replica_fetcher import ReplicaManager, replica_of
from floodmark.broker.server import Connection, start_listener
from floodmark.broker.setting_keys import (
    DEFAULT_REPLICATION_FACTOR,
    GROUP_CONSUMER_ASSIGNORS,
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
    GROUP_CONSUMER_MAX_SIZE,
    GROUP_CONSUMER_MIGRATION_POLICY,
    GROUP_CONSUMER_SESSION_TIMEOUT_MS,
    GROUP_INITIAL_REBALANCE_DELAY_MS,
    GROUP_MAX_SESSION_TIMEOUT_MS,
    GROUP_MAX_SIZE,
    GROUP_MIN_SESSION_TIMEOUT_MS,
    GROUP_SHARE_ENABLE,
    LOG_CHECKPOINT_INTERVAL_MS,
    LOG_CLEANER_BACKOFF_MS,
    LOG_CLEANER_ENABLE,
    LOG_RETENTION_CHECK_INTERVAL_MS,
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    MIN_INSYNC_REPLICAS,
    NUM_NETWORK_THREADS,
    NUM_PARTITIONS,
    QUOTA_WINDOW_NUM,
    QUOTA_WINDOW_SIZE_SECONDS,
    REPLICA_LAG_TIME_MAX_MS,
    SOCKET_REQUEST_MAX_BYTES,
    TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS,
    TRANSACTION_MAX_TIMEOUT_MS,
    TRANSACTIONAL_ID_EXPIRATION_MS,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    SHARE_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    TopicMeta,
    coordinator_partition,
)
from floodmark.records import TimestampType
from floodmark.replication import (
    AlterPartitionRequest,
    Partition,
    ProduceSettings,
    TimestampBounds,
    target_compression,
)
from floodmark.security import Endpoint, TlsServer, Verdict
from floodmark.settings import topic_log_config
from floodmark.storage import Log, LogConfig
from floodmark.wire import (
    SUPPORTED,
    ApiKey,
    ProtocolError,
    RequestHeader,
    accepted_range,
    api_versions_error_response,
    decode_request,
    encode_response,
    peek_client_id,
    peek_header,
)

if TYPE_CHECKING:
    from floodmark.broker.groups import GroupCoordinator
    from floodmark.broker.share_group.driver import ShareGroups
    from floodmark.broker.share_group.share_coordinator import ShareCoordinator
    from floodmark.broker.share_group.state_service import ShareStateService
    from floodmark.broker.topic_metrics import BrokerTopicMetrics
    from floodmark.broker.txn_coordinator import BrokerTxnCoordinator
    from floodmark.groups import ConsumerGroupCoordinator, OffsetStore
    from floodmark.metrics import RequestMetrics

log = logging.getLogger(__name__)


PERIODIC_MIN_SLEEP_S = 0.01
PERIODIC_MAX_SLEEP_S = 0.5
FLUSH_CHECK_INTERVAL_MS = 500
"""How often each partition applies its flush policy (``log.flush.interval.*``)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


FIRST_CATCH_UP_WAIT_S = 30.0
"""How long a request that reached a starting broker waits for its first metadata catch-up."""


class Broker:
    def __init__(self, config: BrokerConfig, membership: Membership | None = None,
                 replicas: ReplicaManager | None = None) -> None:
        """``membership``: a cluster member's (``cluster_member.ClusterMembership``); without one
        the broker runs its own controller (``membership.LocalMembership``: combined mode of a
        one-node cluster). ``replicas``: replication over the wire, for a cluster member."""
        self.config = config
        self.node_id = config.node_id
        self.data_dir = Path(config.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.membership: Membership = membership or LocalMembership(
            self.data_dir, self.node_id, rack=config.rack)
        self.controller: Controller = self.membership.controller
        self.replicas = replicas
        self.partitions: dict[PartitionKey, PartitionState] = {}
        self.partition_timers = PartitionTimers()  # when each partition's work is next due
        self.purgatory = FetchPurgatory()
        self.fetch_sessions = FetchSessionCache(
            config.value(MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS),
            config.value(MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS))
        # __consumer_offsets partition -> the leader epoch at which this broker loaded it: it
        # coordinates that partition's groups only while it leads at that epoch.
        self.offsets_loaded: dict[int, int] = {}
        # The coordinators (offsets, groups, consumer groups, transactions, share groups) are
        # built at their first use (the properties below), with their modules: a broker that
        # is never asked about groups or transactions neither imports nor builds them.
        self._group_configs_seen = False  # a group had configs of its own (apply_group_configs)
        self._expiring_members: asyncio.Task[None] | None = None
        self._expiring_share_members: asyncio.Task[None] | None = None
        # Transactional Produce through KIP-890's verification, in each producer's order.
        self.txn_produces = TxnProduces(self._partition_core)
        self.connections: set[Connection] = set()
        self.authentication = Authentication(config, lambda: self.controller.scram_credentials(),
                                             lambda: self.controller.delegation_token_infos())
        self.max_request_bytes = config.value(SOCKET_REQUEST_MAX_BYTES)
        self.storage = storage_glue.Storage(self.data_dir, config)
        self._servers: list[asyncio.Server | TlsServer] = []
        self._stopping: asyncio.Event | None = None
        self._serving = False
        # Requests are held until the first metadata catch-up after the start (Kafka enables
        # request processing only then): see ``_after_first_catch_up``.
        self._metadata_caught_up = False
        self._tasks: list[asyncio.Task[None]] = []
        self.bound_port: int = config.listen_port  # the first listener's
        self.bound_ports: dict[str, int] = {}  # listener name -> bound port
        # acks=all produces parked in the core's purgatory, answered on CompleteProduce.
        self._next_produce_id = 0
        self._produce_settings: dict[int, tuple[LogConfig, ProduceSettings]] = {}
        self._last_disk_warning_s = 0.0
        self._checkpoint_due = False  # a partition's HW checkpoint is due: write them all
        self._waiting_produces: dict[int, asyncio.Future[tuple[ErrorCode, int]]] = {}
        self.request_counts: dict[int, int] = {}  # api key -> requests received
        # Set (before serve) to count requests, latency and bytes per API for /metrics.
        self.request_metrics: RequestMetrics | None = None
        self.topic_metrics: BrokerTopicMetrics | None = None  # per topic, set with the above
        self.now_ms = now_ms
        # ISR changes the controller accepted (Kafka's IsrShrinksPerSec / IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.metadata_apply_errors = 0  # metadata records skipped (Kafka's metadata-apply-error-count)
        self._closing = False
        self.membership.attach(self)
        # authorizer.class.name set: one check at dispatch before any handler (authorization)
        self.authorization = Authorization.configured(self)
        # client quotas (metadata records): applied where the response is sent (broker/quotas)
        self.quotas = ClientQuotas(self.controller.client_quotas, self.now_ms,
                                   config.value(QUOTA_WINDOW_NUM),
                                   config.value(QUOTA_WINDOW_SIZE_SECONDS) * 1000)

    # -- the coordinators, built at first use -----------------------------------------------------
    def built(self, name: str) -> bool:
        """Has the coordinator property ``name`` been built yet (``functools.cached_property``
        keeps it in the instance's ``__dict__``)?"""
        return name in self.__dict__

    @functools.cached_property
    def offsets(self) -> OffsetStore:
        from floodmark.groups import OffsetStore

        return OffsetStore()

    @functools.cached_property
    def groups(self) -> GroupCoordinator:
        from floodmark.broker.groups import GroupCoordinator
        from floodmark.broker.handlers import group_apis

        config = self.config
        return GroupCoordinator(
            initial_rebalance_delay_ms=config.value(GROUP_INITIAL_REBALANCE_DELAY_MS),
            min_session_timeout_ms=config.value(GROUP_MIN_SESSION_TIMEOUT_MS),
            max_session_timeout_ms=config.value(GROUP_MAX_SESSION_TIMEOUT_MS),
            max_size=config.value(GROUP_MAX_SIZE),
            persist=functools.partial(group_apis.store_group, self),
            clock_ms=now_ms,  # the records' state timestamps are wall-clock time (as Kafka's)
        )

    @functools.cached_property
    def consumer_groups(self) -> ConsumerGroupCoordinator:
        from floodmark.groups import (
            ConsumerGroupCoordinator,
            CoreConfig,
            MigrationPolicy,
            consumer_group_assignors,
        )

        config = self.config
        return ConsumerGroupCoordinator(CoreConfig(
            session_timeout_ms=config.value(GROUP_CONSUMER_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms=config.value(GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS),
            assignors=consumer_group_assignors(config.value(GROUP_CONSUMER_ASSIGNORS)),
            migration_policy=MigrationPolicy.parse(
                config.value(GROUP_CONSUMER_MIGRATION_POLICY)),
            max_size=config.value(GROUP_CONSUMER_MAX_SIZE),
            classic_max_size=config.value(GROUP_MAX_SIZE)))

    @functools.cached_property
    def transactions(self) -> BrokerTxnCoordinator:
        """Started at once when built on a serving broker (its timer runs on the loop); else
        by ``serve``."""
        from floodmark.broker.txn_coordinator import BrokerTxnCoordinator

        config = self.config
        coordinator = BrokerTxnCoordinator(
            self, functools.partial(data.append_partition, self),
            max_timeout_ms=config.value(TRANSACTION_MAX_TIMEOUT_MS),
            cleanup_interval_ms=config.value(TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS),
            expiration_ms=config.value(TRANSACTIONAL_ID_EXPIRATION_MS))
        if self._serving and not self._closing:
            coordinator.start()
        return coordinator

    # KIP-932: the share coordinator (the state of the share partitions whose
    # __share_group_state partition this broker leads) and the share groups, whose share
    # partitions keep their state there (persister)
    @functools.cached_property
    def share_coordinator(self) -> ShareCoordinator:
        from floodmark.broker.share_group.share_coordinator import ShareCoordinator

        return ShareCoordinator()

    @functools.cached_property
    def share_state(self) -> ShareStateService:
        from floodmark.broker.handlers import group_apis
        from floodmark.broker.share_group.state_service import ShareStateService

        return ShareStateService(
            self.share_coordinator, self._share_state_partitions,
            self._share_state_leader_epoch,
            functools.partial(group_apis.append_record_replicated, self, SHARE_STATE_TOPIC))

    @functools.cached_property
    def share_groups(self) -> ShareGroups:
        from floodmark.broker.handlers import group_apis
        from floodmark.broker.share_group.driver import share_groups_of
        from floodmark.broker.share_group.persister import SharePersister

        return share_groups_of(self.config, SharePersister(
            self.node_id, self.membership, self.share_state,
            lambda: self.config.inter_broker_security),
            functools.partial(group_apis.store_record_pairs, self))

    def _group_state_built(self) -> bool:
        """Is any state of ``__consumer_offsets`` held yet (offsets, groups)?"""
        return any(self.built(name) for name in
                   ("offsets", "groups", "consumer_groups", "share_groups"))

    @property
    def share_groups_enabled(self) -> bool:
        """Are share groups on here (ApiVersions lists their APIs then)? The share groups'
        own setting once they are built; before, ``group.share.enable``, which they will be
        built with (``share_group.driver.share_groups_of``): every client's first request
        asks, and the answer does not build them."""
        if self.built("share_groups"):
            return self.share_groups.settings.enabled
        return self.config.value(GROUP_SHARE_ENABLE)

    def _leads_any(self, topic: str) -> bool:
        return any(t == topic and ps.core.is_leader for (t, _), ps in self.partitions.items())

    def refresh_transactions(self) -> None:
        """The transaction coordinator loads the ``__transaction_state`` partitions this broker
        now leads and unloads the others (``BrokerTxnCoordinator.refresh``); with none led
        and none loaded (the coordinator not built yet), there is nothing to do."""
        if self.built("transactions") or self._leads_any(TRANSACTION_STATE_TOPIC):
            self.transactions.refresh()

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Open (and recover) the partition logs this node hosts (a cluster member's open when
        the metadata names it a replica)."""
        t0 = time.monotonic()
        self.membership.open()
        log.info("broker %d opened %d partitions in %.2fs", self.node_id, len(self.partitions),
                 time.monotonic() - t0)

    def open_partition(self, topic: str, index: int, configs: Configs,
                       topic_id: uuid.UUID | None = None) -> PartitionState:
        """Open (and recover) one partition's log; its role comes from the metadata applied
        next (``PartitionState.apply_metadata``). With ``topic_id``, a directory of another
        topic of the same name raises INCONSISTENT_TOPIC_ID (``partition.metadata``)."""
        plog, hw = self.storage.open_log(topic, index, configs, self.now_ms(),
                                         topic_id=topic_id)
        return self.adopt_partition(topic, index, configs, plog, hw)

    def adopt_partition(self, topic: str, index: int, configs: Configs, plog: Log,
                        hw: int) -> PartitionState:
        """Host a partition whose log was opened (``Storage.finish_open``: its files are
        durable) with checkpointed high watermark ``hw``; its role comes from the metadata
        applied next."""
        min_isr = self.config.min_insync_replicas(configs)
        ps = PartitionState(
            topic, index, self.node_id, plog, hooks=self, min_insync_replicas=min_isr,
            topic_configs=dict(configs),
            checkpointed_high_watermark=hw, truncation=self.config.truncation,
            replica_lag_time_max_ms=self.config.value(REPLICA_LAG_TIME_MAX_MS),
            flush_check_interval_ms=FLUSH_CHECK_INTERVAL_MS,
            checkpoint_interval_ms=self.config.value(LOG_CHECKPOINT_INTERVAL_MS),
            opened_ms=self.now_ms(), timers=self.partition_timers)
        self.partitions[(topic, index)] = ps
        self.partition_timers.arm((topic, index), ps.driver.next_deadline_ms())
        return ps

    def remove_partition(self, key: PartitionKey, *, delete: bool) -> PartitionState | None:
        """This node no longer hosts the partition: stop following, resign, close (and delete)
        its log, wake whatever waits on it."""
        ps = self.partitions.pop(key, None)
        if ps is None:
            return None
        self.partition_timers.discard(key)
        if key[0] == OFFSETS_TOPIC:
            self.unload_offsets_partition(key[1])
        if self.replicas is not None:
            self.replicas.remove(key)
        ps.apply(ps.core.resign())
        ps.log.close()
        if delete:
            self.storage.delete_log(*key)
        self.purgatory.wake(key)
        return ps

    def move_replica(self, key: PartitionKey, destination: storage_glue.LogDir) -> None:
        """AlterReplicaLogDirs: move the replica to another of this broker's log directories
        while it serves (``replica_mover``); the task ends with the broker."""
        task = replica_mover.start_move(self, key, destination)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    @property
    def closing(self) -> bool:
        """Shutting down: loops (heartbeats, fetchers, ISR checks) end, metadata is ignored."""
        return self._closing

    async def serve(self, ready: Callable[[int], None] | None = None) -> None:
        self._stopping = asyncio.Event()
        dispatch = (self.dispatch if self.request_metrics is None
                    else self.request_metrics.wrap(self.dispatch))
        listeners = self.config.listeners
        tls = self.config.listener_tls
        for ep in listeners.listeners:
            server = await start_listener(
                ep.host or self.config.listen_host, ep.port, dispatch, self.max_request_bytes,
                self._connection_opened, self.connections.discard, ep, tls.get(ep.name),
                self.config.value(NUM_NETWORK_THREADS))
            self._servers.append(server)
            self.bound_ports[ep.name] = server.sockets[0].getsockname()[1]
        self.bound_port = self.bound_ports[listeners.listeners[0].name]
        for ep in listeners.listeners:
            adv = self.advertised_endpoint(ep.name)
            log.info("broker %d listening on %s:%d (%s, %s) advertised %s", self.node_id,
                     ep.host or self.config.listen_host, self.bound_ports[ep.name], ep.name,
                     ep.security_protocol.value,
                     f"{adv.host}:{adv.port}" if adv is not None else "nowhere")
        self._tasks.append(asyncio.create_task(self._periodic()))
        self._serving = True  # from here a coordinator built at first use starts at once
        if self.built("transactions"):
            self.transactions.start()
        if self.config.value(LOG_CLEANER_ENABLE):
            self._tasks.append(asyncio.create_task(self._cleaner()))
        self.membership.start(self.bound_port, ready)
        await self._stopping.wait()
        await self._shutdown()

    def _connection_opened(self, conn: Connection) -> None:
        self.connections.add(conn)
        conn.sasl = self.authentication.session_for(conn.listener_name, conn.security_protocol)

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _periodic(self) -> None:
        """The broker-wide periodic work, and every partition's own (``Partition.tick``, when
        its ``next_deadline_ms`` is due: ISR shrink, produce timeouts, flush, HW checkpoint).
        Sleeps until the earliest partition deadline, between 10 ms and 500 ms."""
        retention_s = self.config.value(LOG_RETENTION_CHECK_INTERVAL_MS) / 1000
        last_retention = time.monotonic()
        while True:
            await asyncio.sleep(self._periodic_sleep_s())
            self._expire_group_members()
            now = self.now_ms()
            self.tick_partitions(now)
            self.check_log_dirs()
            if time.monotonic() - last_retention >= retention_s:
                last_retention = time.monotonic()
                try:
                    self.apply_retention(now)
                except (OSError, KafkaError) as exc:
                    self._disk_trouble("retention", exc)
            if self._checkpoint_due:
                self._checkpoint_due = False
                # Snapshot on the loop, fsync+rename on a worker thread: the event loop never
                # waits for the disk in steady state.
                snapshot = self.storage.checkpoint_snapshot(self.partitions)
                try:
                    await asyncio.to_thread(self.storage.write_checkpoint_snapshot, snapshot)
                except (OSError, KafkaError) as exc:
                    self._disk_trouble("checkpoint", exc)

    def _expire_group_members(self) -> None:
        """Sessions past their timeout, in the coordinators built so far (one not built has
        no members)."""
        if self.built("groups"):
            self.groups.expire_sessions()
        if self.built("consumer_groups"):
            deadline_ms = self.consumer_groups.next_deadline_ms()
            if deadline_ms is not None and deadline_ms <= self.now_ms() and (
                    self._expiring_members is None or self._expiring_members.done()):
                from floodmark.broker.handlers import consumer_group_apis

                self._expiring_members = asyncio.get_running_loop().create_task(
                    consumer_group_apis.expire_members(self))
        if self.built("share_groups"):
            deadline_ms = self.share_groups.coordinator.next_deadline_ms()
            if deadline_ms is not None and deadline_ms <= self.now_ms() and (
                    self._expiring_share_members is None
                    or self._expiring_share_members.done()):
                from floodmark.broker.handlers import share_group_apis

                self._expiring_share_members = asyncio.get_running_loop().create_task(
                    share_group_apis.expire_members(self))

    def _partition_core(self, key: PartitionKey) -> Partition | None:
        ps = self.partitions.get(key)
        return None if ps is None else ps.core

    def _deadline_of(self, key: PartitionKey) -> int | None:
        ps = self.partitions.get(key)
        return None if ps is None else ps.driver.next_deadline_ms()

    def _periodic_sleep_s(self) -> float:
        self.partition_timers.refresh(self._deadline_of)
        earliest = self.partition_timers.next_deadline_ms()
        if earliest is None:
            return PERIODIC_MAX_SLEEP_S
        return min(PERIODIC_MAX_SLEEP_S, max(PERIODIC_MIN_SLEEP_S,
                                             (earliest - self.now_ms()) / 1000))

    def tick_partitions(self, now_ms: int) -> None:
        """Run the periodic work of the partitions that have some due (``partition_timers``:
        the cost is in proportion to them, not to every hosted partition); one partition's
        failure is logged and the others carry on (its work is retried at its next
        deadline)."""
        timers = self.partition_timers
        timers.refresh(self._deadline_of)
        for key in timers.pop_due(now_ms):
            ps = self.partitions.get(key)
            if ps is None:
                continue
            deadline = ps.driver.next_deadline_ms()
            if deadline is not None and deadline <= now_ms:
                try:
                    ps.driver.tick(now_ms)
                except Exception:
                    log.exception("partition %s leader_epoch=%d periodic work failed", ps.name,
                                  ps.leader_epoch)
            timers.arm(key, ps.driver.next_deadline_ms())

    def check_log_dirs(self) -> None:
        """A log directory that is gone or replaced, or where a log met an I/O error, fails
        as a whole (``fail_log_dir``); the others keep serving."""
        troubled = self.storage.take_troubled()  # logs that met an I/O error since the last
        for where in self.storage.dirs:
            if where.offline is not None:
                continue
            reason = where.failure()
            for key in troubled if reason is None else ():
                ps = self.partitions.get(key)
                if ps is not None and self.storage.dir_of(*key) is where and (
                        ps.log.offline or ps.log.last_io_error):
                    reason = f"partition {ps.name}: {ps.log.last_io_error or 'offline'}"
                    break
            if reason is not None:
                self.fail_log_dir(where, reason)

    def fail_log_dir(self, where: storage_glue.LogDir, reason: str) -> None:
        """Take the directory's replicas offline (produce and fetch answer
        KAFKA_STORAGE_ERROR, followers stop fetching); the controller hears of them with the
        next heartbeat and moves their leadership and ISR membership elsewhere."""
        keys = self.storage.take_offline(where, reason)
        log.error("broker %d log dir %s failed (%s): %d replica(s) offline: %s", self.node_id,
                  where.path, reason, len(keys), ", ".join(f"{t}-{p}" for t, p in keys) or "none")
        for key, future in list(self.storage.moving.items()):
            if future.destination is where:
                self.storage.abort_move(key)
        for key in keys:
            ps = self.partitions.get(key)
            if ps is None:
                continue
            ps.log.take_offline(f"log dir {where.path} failed: {reason}")
            if self.replicas is not None:
                self.replicas.remove(key)
            # No longer a leader or follower here: produces waiting for acks=all are answered
            # NOT_LEADER_OR_FOLLOWER (the client finds the new leader), nothing waits forever.
            ps.apply(ps.core.resign())
            self.purgatory.wake(key)

    def _disk_trouble(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_disk_warning_s >= 10:  # one line per 10 s, not one per round
            self._last_disk_warning_s = now
            log.warning("broker %d %s failed: %s", self.node_id, what, exc)

    def apply_retention(self, now_ms: int) -> None:
        """retention.ms / retention.bytes: whole segments below the HW only (storage's rule)."""
        for ps in self.partitions.values():
            deleted = ps.driver.apply_retention(now_ms)  # the LSO follows the log start
            if deleted:
                log.info("partition %s leader_epoch=%d retention deleted %d segment(s), "
                         "log_start_offset=%d", ps.name, ps.leader_epoch, deleted,
                         ps.log_start_offset)

    async def _cleaner(self) -> None:
        """Log compaction, every log.cleaner.backoff.ms, leaders and followers alike, each below
        its own HW (Kafka's cleaner threads do the same, independently on every replica). The
        plan and the segment swaps run on the event loop; reading and rewriting the data runs
        on a worker thread, so produce and fetch go on meanwhile."""
        while True:  # log.cleaner.backoff.ms is dynamic: read every round
            await asyncio.sleep(self.config.value(LOG_CLEANER_BACKOFF_MS) / 1000)
            for ps in list(self.partitions.values()):
                if ps.log.config.compact:
                    await self.clean_log(ps)

    async def clean_log(self, ps: PartitionState) -> None:
        key = (ps.topic, ps.partition)
        if key in self.storage.moving:
            return  # cleaned after the move (the copy rounds assume sealed segments stay)
        cleaner = self.storage.cleaner
        try:
            # Below the LSO only: a record of an open transaction may still be aborted.
            job = cleaner.prepare(key, ps.log, ps.last_stable_offset, self.now_ms())
            if job is None:
                return
            await asyncio.to_thread(job.run)
            result = cleaner.finish(key, job)
        except (OSError, KafkaError) as exc:
            self._disk_trouble(f"log cleaning of {ps.name}", exc)
            return
        if result is not None:
            log.log(logging.INFO if result.changed else logging.DEBUG,
                    "partition %s leader_epoch=%d cleaned (%s)", ps.name, ps.leader_epoch,
                    result.describe())

    def checkpoint(self) -> None:
        self.storage.write_checkpoints(self.partitions)

    async def _shutdown(self) -> None:
        await self.membership.leave()
        log.info("broker %d shutting down", self.node_id)
        self._closing = True
        self.membership.stop()
        if self.replicas is not None:
            self.replicas.stop()
        for task in self._tasks:
            task.cancel()
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.abort()
        if self.built("groups"):
            self.groups.shutdown()
        if self.built("transactions"):
            self.transactions.stop()
        if self.built("share_groups"):
            self.share_groups.persister.close()
        self.purgatory.wake_all()
        await asyncio.sleep(0)
        self.close()

    def close(self) -> None:
        for ps in self.partitions.values():
            if not ps.log.offline:  # an offline log refuses even a flush (fsync error, failed dir)
                try:
                    self.storage.flush(ps.log)
                except (OSError, KafkaError) as exc:  # the log is offline now: not marked clean
                    log.error("broker %d: flush of %s at shutdown failed: %s", self.node_id,
                              ps.name, exc)
        try:
            self.checkpoint()
        except OSError as exc:  # every other directory was written (write_checkpoint_snapshot)
            log.error("broker %d: checkpoints at shutdown failed: %s", self.node_id, exc)
        for ps in self.partitions.values():
            ps.log.close()
        self.storage.mark_clean_shutdown(ps.log for ps in self.partitions.values())
        self.membership.close()
        served = ", ".join(f"{ApiKey(k).name if k in ApiKey._value2member_map_ else k}={n}"
                           for k, n in sorted(self.request_counts.items()))
        log.info("broker %d closed cleanly (checkpoints written); requests: %s", self.node_id,
                 served or "none")
        if sendfile.SENDFILE_ENABLED:
            log.info("broker %d %s", self.node_id, sendfile.SendfileStats.describe())

    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """The brokers clients may talk to (Metadata, DescribeCluster), at their endpoints of
        ``listener_name`` (None: the inter-broker listener)."""
        return self.membership.live_brokers(listener_name)

    def is_coordinator(self, group: str) -> bool:
        """Does this broker coordinate ``group`` (and has it loaded the group's partition)?"""
        return self.coordinator_error(group) is ErrorCode.NONE

    def coordinator_error(self, group: str) -> ErrorCode:
        """NONE when this broker coordinates ``group``; COORDINATOR_LOAD_IN_PROGRESS while it
        leads the group's offsets partition but has not loaded it at its current leader epoch
        (Kafka's answer: the client asks again, rather than reading offsets or membership this
        broker does not know yet); NOT_COORDINATOR otherwise."""
        topic = self.controller.topics().get(OFFSETS_TOPIC)
        if topic is None or self.membership.coordinator_for(group) != self.node_id:
            return ErrorCode.NOT_COORDINATOR
        n = len(topic.partitions)
        index = coordinator_partition(group, n)
        ps = self.partitions.get((OFFSETS_TOPIC, index))
        if ps is None or not ps.core.is_leader or self.offsets_loaded.get(index) != \
                ps.leader_epoch:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def load_offsets_partition(self, ps: PartitionState) -> None:
        """This broker leads ``ps`` (a ``__consumer_offsets`` partition) now: load its groups'
        committed offsets and metadata from its log, from nothing, and coordinate them."""
        n = len(self.controller.topics()[OFFSETS_TOPIC].partitions)
        if ps.log_end_offset == ps.log_start_offset and not self._group_state_built():
            # An empty log loads nothing: the coordinators, built at their first use, start
            # as loading it would leave them (a new broker's start does not build them).
            self.offsets_loaded[ps.partition] = ps.leader_epoch
            log.info("partition %s leader_epoch=%d coordinator: empty, nothing to load",
                     ps.name, ps.leader_epoch)
            return
        self.groups.unload(self.offsets.unload_partition(ps.partition, n)
                           + [g for g in self.groups.groups
                              if coordinator_partition(g, n) == ps.partition])
        loaded = self.offsets.load_partition(
            ps.partition, n, functools.partial(self.storage.read_all, ps.log,
                                               ps.log_end_offset))
        self.consumer_groups.unload([g for g in self.consumer_groups.groups
                                     if coordinator_partition(g, n) == ps.partition])
        # each group to its core (the rule the simulator's failovers run too)
        from floodmark.groups import routing as group_routing  # built at first use, as the cores

        self.groups.apply(group_routing.load(self.groups.core, self.consumer_groups, loaded,
                                             self.now_ms()))
        from floodmark.broker.share_group.driver import share_topics

        self.share_groups.load_groups(
            loaded.share_groups, [g for g in self.share_groups.coordinator.groups
                                  if coordinator_partition(g, n) == ps.partition],
            share_topics(self.controller.topics()), self.now_ms())
        self.offsets_loaded[ps.partition] = ps.leader_epoch
        stable = sum(1 for r in loaded.groups.values() if r.members)
        log.info("partition %s leader_epoch=%d coordinator: loaded %d committed offsets, %d "
                 "groups (%d with members), %d consumer groups (KIP-848), %d share groups "
                 "(KIP-932)%s", ps.name,
                 ps.leader_epoch, loaded.offsets, len(loaded.groups), stable,
                 len(loaded.consumer_groups), len(loaded.share_groups),
                 f", {loaded.unreadable} unreadable group records skipped"
                 if loaded.unreadable else "")

    def _share_state_partitions(self) -> int:
        topic = self.controller.topics().get(SHARE_STATE_TOPIC)
        return 0 if topic is None else len(topic.partitions)

    def _share_state_leader_epoch(self, index: int) -> int | None:
        ps = self.partitions.get((SHARE_STATE_TOPIC, index))
        if ps is None or not ps.core.is_leader:
            return None
        return ps.leader_epoch

    def apply_group_configs(self) -> None:
        """Take the groups' own configs in the metadata into use (``group_config_admin``).
        While no group has configs of its own and none ever had on this broker, there is
        nothing to take: the coordinators are not built for it (they are built at first use,
        and then run with the broker's settings)."""
        if not self._group_configs_seen and not self.controller.group_configs():
            return
        self._group_configs_seen = True
        from floodmark.broker import group_config_admin

        group_config_admin.apply(self)

    def refresh_share_state(self) -> None:
        """Load the ``__share_group_state`` partitions this broker now leads (or leads at a
        new leader epoch) into the share coordinator; forget the ones it no longer leads."""
        led = {index: (ps.leader_epoch, functools.partial(self.storage.read_all, ps.log,
                                                          ps.log_end_offset))
               for (topic, index), ps in self.partitions.items()
               if topic == SHARE_STATE_TOPIC and ps.core.is_leader}
        if not led and not self.built("share_coordinator"):
            return  # nothing led, nothing loaded
        from floodmark.broker.share_group.share_coordinator import load_led

        load_led(self.share_coordinator, led, self._share_state_partitions(),
                 SHARE_STATE_TOPIC)

    def unload_offsets_partition(self, index: int) -> None:
        """Another broker leads ``__consumer_offsets-index`` now (or nobody): forget its groups
        here, so nothing stale is answered if this broker leads it again before loading."""
        if self.offsets_loaded.pop(index, None) is None:
            return
        topic = self.controller.topics().get(OFFSETS_TOPIC)
        if topic is None:
            return
        if not self._group_state_built():
            return  # nothing was loaded: nothing to forget
        n = len(topic.partitions)
        gone = self.offsets.unload_partition(index, n)
        self.groups.unload(gone + [g for g in self.groups.groups if coordinator_partition(g, n) == index])
        self.consumer_groups.unload([g for g in self.consumer_groups.groups
                                     if coordinator_partition(g, n) == index])
        self.share_groups.load_groups({}, [g for g in self.share_groups.coordinator.groups
                                           if coordinator_partition(g, n) == index], {},
                                      self.now_ms())
        log.info("partition %s-%d coordinator no more: %d groups unloaded", OFFSETS_TOPIC, index,
                 len(set(gone)))

    @property
    def advertised(self) -> tuple[str, int]:
        """Where other brokers reach this one: the inter-broker listener's advertised
        endpoint (``inter.broker.listener.name``; the one listener of a node without
        listener settings)."""
        ep = self.advertised_endpoint(self.config.listeners.inter_broker_listener_name)
        assert ep is not None, "listener_config names an advertised inter-broker listener"
        return ep.host, ep.port

    def advertised_endpoint(self, name: str) -> Endpoint | None:
        """Listener ``name`` as clients are told (a wildcard host: the listen host, else
        loopback; port 0: the bound one); None when the listener is not advertised."""
        ep = self.config.listeners.advertised_for(name)
        if ep is None:
            return None
        host = ep.host or self.config.advertised_host or self.config.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return Endpoint(ep.name, host, ep.port or self.bound_ports.get(ep.name, 0),
                        ep.security_protocol)

    def advertised_endpoints(self) -> list[Endpoint]:
        """Every advertised listener (what the broker registers with the controller)."""
        out = []
        for ep in self.config.listeners.advertised:
            adv = self.advertised_endpoint(ep.name)
            if adv is not None:
                out.append(adv)
        return out

    # -- topic configs -----------------------------------------------------------------------------
    async def alter_topic_configs(self, name: str, configs: Configs, *,
                                  validate_only: bool = False) -> None:
        """AlterConfigs / IncrementalAlterConfigs for a topic: ``configs`` is the whole new set,
        validated by the setting registry, decided by the controller, applied to the replicas."""
        if name not in self.controller.topics():
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        configs = self.storage.validate_topic_configs(configs)
        if validate_only:
            return
        await self.controller.alter_topic_configs(name, configs)
        meta = self.controller.topics()[name]
        for p in meta.partitions:
            ps = self.partitions.get((name, p.partition))
            if ps is not None:
                self.reconfigure_partition(ps, meta.configs)

    def reconfigure_partition(self, ps: PartitionState, configs: Configs, *,
                              force: bool = False) -> None:
        """New topic configs, or (``force``) new dynamic broker defaults under the same ones."""
        if ps.topic_configs == configs and not force:
            return
        log_config, min_isr = topic_log_config(
            configs, self.storage.base_config, self.config.value(MIN_INSYNC_REPLICAS))
        ps.reconfigure(log_config, min_isr, self.now_ms())
        ps.topic_configs = dict(configs)
        if not force:
            log.info("partition %s: topic configs now %s", ps.name, configs)

    def produce_settings(self, ps: PartitionState) -> ProduceSettings:
        """The produce path's settings for a partition, made once per log config (a partition's
        config object changes only when its configs do; the cache holds the object, so its id
        is not reused while cached, and is emptied past 4096 entries)."""
        cfg = ps.log.config
        cached = self._produce_settings.get(id(cfg))
        if cached is not None and cached[0] is cfg:
            return cached[1]
        timestamps = (None if cfg.message_timestamp_type == TimestampType.LOG_APPEND_TIME else
                      TimestampBounds(cfg.message_timestamp_before_max_ms,
                                      cfg.message_timestamp_after_max_ms))
        settings = ProduceSettings(
            max_message_bytes=int(cfg.max_message_bytes),
            unsafe_ack_duplicates_before_commit=self.config.unsafe_ack_duplicates_before_commit,
            compacted=cfg.compact, timestamps=timestamps,
            compression=target_compression(cfg.compression_type, cfg.compression_gzip_level,
                                           cfg.compression_lz4_level, cfg.compression_zstd_level))
        if len(self._produce_settings) >= 4096:
            self._produce_settings.clear()
        self._produce_settings[id(cfg)] = (cfg, settings)
        return settings

    def next_produce_id(self) -> int:
        self._next_produce_id += 1
        return self._next_produce_id

    def park_produce(self, produce_id: int) -> asyncio.Future[tuple[ErrorCode, int]]:
        fut: asyncio.Future[tuple[ErrorCode, int]] = asyncio.get_running_loop().create_future()
        self._waiting_produces[produce_id] = fut
        return fut

    # -- BrokerHooks: what the partitions' driver asks of the broker ------------------------------
    def wake_fetches(self, key: tuple[str, int]) -> None:
        self.purgatory.wake(key)

    def wake_replica_fetches(self, key: tuple[str, int]) -> None:
        """The core's ``WakeFollowerFetches`` (the leader appended, or stopped leading): the
        fetches waiting on ``key`` in the one purgatory ask it again (a follower's through
        ``ReplicaManager.answer_fetch``; a consumer's re-reads, as Kafka's DelayedFetch)."""
        self.purgatory.wake(key)

    def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
        self.membership.propose_isr(key, request)

    def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None:
        fut = self._waiting_produces.pop(produce_id, None)
        if fut is not None and not fut.done():
            fut.set_result((error, base_offset))

    def flush_log(self, key: tuple[str, int]) -> None:
        """The partition's flush check is due: its log's flush policy decides. A disk error is
        said (one line per 10 s) and the next check tries again."""
        ps = self.partitions.get(key)
        if ps is None:
            return
        try:
            self.storage.maybe_flush(ps.log, self.now_ms())
        except (OSError, KafkaError) as exc:
            self._disk_trouble(f"flush of {ps.name}", exc)

    def checkpoint_due(self) -> None:
        self._checkpoint_due = True

    # -- metadata changes ----------------------------------------------------------------------
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Configs, *, validate_only: bool = False,
                           assignments: list[tuple[int, ...]] | None = None) -> TopicMeta:
        if assignments is not None and (num_partitions != -1 or replication_factor != -1):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "a manual replica assignment comes "
                             "with num_partitions and replication_factor -1")
        if num_partitions == -1:
            num_partitions = self.config.value(NUM_PARTITIONS)
        if replication_factor == -1:
            replication_factor = self.config.value(DEFAULT_REPLICATION_FACTOR)
        configs = self.storage.validate_topic_configs(configs)
        if name in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"{name} is internal")
        meta = await self.controller.create_topic(name, num_partitions, replication_factor,
                                                  configs, validate_only=validate_only,
                                                  assignments=assignments)
        if not validate_only:
            self.membership.metadata_changed()
        return meta

    async def delete_topic(self, name: str) -> TopicMeta:
        meta = await self.controller.delete_topic(name, validate_only=True)
        if isinstance(self.controller, LocalController):
            # The logs go first: on a full disk, deleting a topic is how space comes back, and
            # the metadata log (on the same disk) needs a little of it to record the deletion.
            for p in meta.partitions:
                self.remove_partition((name, p.partition), delete=True)
        # A cluster member's replicas go when the controller's remove_topic record is applied
        # (with the answer): never before the controller decided, which it may not (stopped,
        # NOT_CONTROLLER, REQUEST_TIMED_OUT), and the topic would stay without them.
        meta = await self.controller.delete_topic(name)
        if self.built("offsets"):
            self.offsets.remove_topic(name)
        try:
            self.checkpoint()
        except OSError as exc:
            log.warning("checkpoint after deleting topic %s failed: %s", name, exc)
        return meta

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                assignments: list[tuple[int, ...]] | None = None) -> None:
        await self.controller.create_partitions(name, count, validate_only=validate_only,
                                                assignments=assignments)
        if not validate_only:
            self.membership.metadata_changed()

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch(self, frame: memoryview | bytes,
                 conn: Connection) -> Encoded | Awaitable[Encoded | None] | None:
        if not self._metadata_caught_up:
            if not self.membership.metadata_caught_up():
                return self._after_first_catch_up(bytes(frame), conn)
            self._metadata_caught_up = True
        return self._dispatch_now(frame, conn)

    def _dispatch_now(self, frame: memoryview | bytes,
                      conn: Connection) -> Encoded | Awaitable[Encoded | None] | None:
        key, version, corr = peek_header(frame)
        sasl = conn.sasl if conn is not None else None
        if sasl is not None:  # a SASL listener: before authentication, only the exchange
            admission = sasl.admits(key, len(frame), self.now_ms())
            if admission.verdict is not Verdict.SERVE:
                if admission.verdict is Verdict.IGNORE:
                    return None  # failed: closing after the delay, nothing more is answered
                raise ProtocolError(admission.reason)
        counts = self.request_counts
        counts[key] = counts.get(key, 0) + 1
        if key == ApiKey.API_VERSIONS and version > SUPPORTED[ApiKey.API_VERSIONS].max_version:
            # Too new: answer in the v0 layout with our table, without parsing the body (P1).
            from floodmark.broker.handlers import admin

            return api_versions_error_response(
                corr, admin.api_keys_table(self.share_groups_enabled))
        rng = accepted_range(key, version)
        if rng is None:
            raise ProtocolError(f"unknown api_key {key} (correlation_id={corr})")
        if version not in rng:
            raise ProtocolError(
                f"unsupported version {version} of api_key {key} (supported {rng.min_version}-"
                f"{rng.max_version})"
            )
        authz = self.authorization
        quotas = self.quotas
        started_ns = time.perf_counter_ns() if quotas.active else 0
        raw = RAW_HANDLERS.get(key)
        if raw is not None:
            parts: Encoded | Awaitable[Encoded | None] | None = raw(
                self, frame if isinstance(frame, memoryview) else memoryview(frame), version,
                None if authz is None else authz.produce_gate(conn))
            if key == ApiKey.PRODUCE and quotas.active:
                parts = quotas.produce_answered(frame, version, conn, parts)
                return quotas.request_answered(key, version, peek_client_id(frame), conn, parts,
                                               time.perf_counter_ns() - started_ns)
            return parts
        header, body = decode_request(frame)
        verdict = None if authz is None else authz.check(header, body, conn)
        if verdict is None:
            result = HANDLERS[key](self, header, body, conn)
        elif verdict.refused is not None:
            result = verdict.refused
        else:
            result = (verdict.handler or HANDLERS[key])(
                self, header, body if verdict.request is None else verdict.request, conn)
        finish = None if verdict is None or verdict.refused is not None else verdict.finish
        answer: Encoded | Awaitable[Encoded | None] | None = (
            self._finish(header, result, finish) if inspect.isawaitable(result)
            else self._encode(header, result, finish))
        if not quotas.active or conn is None:
            return answer
        client_id = header.client_id or ""
        if key == ApiKey.FETCH:
            if replica_of(body, version)[0] >= 0:
                return answer  # a broker's replica fetch: no client quota counts it
            answer = quotas.fetch_answered(version, client_id, conn, answer)
        return quotas.request_answered(key, version, client_id, conn, answer,
                                       time.perf_counter_ns() - started_ns)

    async def _after_first_catch_up(self, frame: bytes, conn: Connection) -> Encoded | None:
        """A request that came before this broker's first metadata catch-up since its start,
        answered after it. The listeners are bound before the broker registers (it registers
        their ports), but until it has read the metadata log its image is empty or old: a
        Metadata answer without the topics a consumer subscribes to makes librdkafka drop them
        from its subscription and the whole group rebalance, a FindCoordinator would name the
        wrong broker. Kafka enables request processing only after that catch-up. If it takes
        longer than ``FIRST_CATCH_UP_WAIT_S`` (no controller reachable), the request is
        answered from what the broker has, as before."""
        await self.membership.metadata_ready(FIRST_CATCH_UP_WAIT_S)
        answer = self._dispatch_now(frame, conn)
        if answer is None or isinstance(answer, list):
            return answer
        return await answer

    async def _finish(self, header: RequestHeader, pending: Awaitable[Answer],
                      finish: Finish | None = None) -> Encoded | None:
        return self._encode(header, await pending, finish)

    def _encode(self, header: RequestHeader, result: Answer, finish: Finish | None = None
                ) -> Encoded | None:
        if result is None or isinstance(result, list):
            return result
        if finish is not None:
            result = finish(result)
        if self.request_metrics is not None:  # Kafka's ErrorsPerSec (Fetch counts its own)
            self.request_metrics.count_errors(header.api_key, result)
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)
