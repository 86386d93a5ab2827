"""A broker that is one member of a replicated cluster (``process.roles=broker``).

It is the single-process ``Broker`` with three things swapped in, so combined mode is untouched:

* the controller is remote (``floodmark.controller.client.ControllerClient``): the broker
  registers (getting its broker epoch), heartbeats every ``broker.heartbeat.interval.ms``, and
  long-polls the metadata log; every applied record batch re-applies the partition
  registrations it hosts to the core (``Partition.apply_metadata``: become leader / follower,
  ISR and broker-epoch updates, fencing of stale metadata by partition epoch);
* partitions are opened with no role, then told by the controller's metadata who leads; ISR
  proposals (the driver's ``propose_isr`` port) go to the controller as AlterPartition and the
  answer goes back to the core;
* Fetch requests from replicas (v15 ``replica_state``, or v12 ``replica_id >= 0``) are answered
  by ``replica_fetcher.handle_replica_fetch``, followers run ``ReplicaFetcher`` loops, and
  Metadata lists every live broker with the controller's leaders and leader epochs.

Consumer groups: ``__consumer_offsets`` is a replicated topic; a group's coordinator is the leader
of its partition (FindCoordinator says so, other brokers answer NOT_COORDINATOR) and replays that
partition's log when it becomes leader. Replica id -2 (debug) reads of ListOffsets and
OffsetsForLeaderEpoch are answered by any replica from its own log (``floodmark cluster
describe``). DescribeQuorum (api 55, not advertised in ApiVersions) is the same kind of debug
read for a partition's leader: its HW and what it knows of every replica (the remote LEOs of its
followers, ISR members as voters, the others as observers), for ``floodmark ui``. Combined mode: ``--controller-data-dir`` runs the controller in this process.
Run: ``python -m floodmark.broker.cluster_member --node-id 1 --controller HOST:PORT
--data-dir DIR [--listen HOST:PORT] [--set name=value ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from floodmark.broker import dynamic_configs
from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers import admin
from floodmark.broker.offsets import partition_for
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.replica_fetcher import (
    ReplicaFetcher,
    handle_replica_fetch,
    peek_fetch_replica_id,
    replica_of,
)
from floodmark.broker.server import Connection
from floodmark.controller.client import ControllerClient
from floodmark.controller.image import MetadataRecord, record_to_registration
from floodmark.controller.rpc import RpcError
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import OFFSETS_TOPIC, TopicMeta
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.partition import FollowerState, LeaderState
from floodmark.wire.api_table import ApiKey
from floodmark.wire.codec import decode_request, encode_response, peek_header

log = logging.getLogger("floodmark.broker.cluster_member")

DEBUG_REPLICA_ID = -2
# Kafka's DescribeQuorum: KRaft's view of the metadata partition's voters. Answered here for any
# partition this broker leads (a debug read, so deliberately absent from ApiVersions).
DESCRIBE_QUORUM = 55
RETRIABLE_ALTER_PARTITION = frozenset({int(ErrorCode.REQUEST_TIMED_OUT),
                                       int(ErrorCode.NOT_CONTROLLER),
                                       int(ErrorCode.STALE_BROKER_EPOCH)})
GROUP_APIS = frozenset({ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                        ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})
CLUSTER_DEFAULTS = {
    "broker.heartbeat.interval.ms": 250,
    "controlled.shutdown.timeout.ms": 5000,
}


class ClusterBroker(Broker):
    def __init__(self, config: BrokerConfig, controller_address: str) -> None:
        self.controller_client = ControllerClient(controller_address, config.node_id)
        super().__init__(config, self.controller_client)
        self.controller_client.on_records = self._on_metadata
        self.cluster_partitions: dict[tuple[str, int], PartitionState] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._bad_partitions: dict[tuple[str, int], str] = {}
        self.fetchers: dict[tuple[str, int], ReplicaFetcher] = {}
        self.replica_waiters = FetchPurgatory()
        self._cluster_tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._closing = False  # loops check it too (see ReplicaFetcher.stop on wait_for)

    @property
    def closing(self) -> bool:
        """Shutting down: loops (heartbeats, fetchers, ISR checks) end, metadata is ignored."""
        return self._closing

    def _setting(self, name: str) -> int:
        value = self.config.settings.get(name)
        return int(value if value is not None else CLUSTER_DEFAULTS[name])

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Nothing to open yet: partitions (including the replicated ``__consumer_offsets``)
        open when the metadata names this broker as a replica."""

    def _open_topic(self, meta: TopicMeta) -> None:
        """Replicated partitions are opened by ``_on_metadata``."""

    async def serve(self, ready: Callable[[int], None] | None = None) -> None:
        def on_bound(port: int) -> None:
            self._cluster_tasks.append(asyncio.create_task(self._join(port, ready)))

        await super().serve(on_bound)

    async def _join(self, port: int, ready: Callable[[int], None] | None) -> None:
        host, adv_port = self.advertised
        deadline = time.monotonic() + 60
        while True:
            try:
                epoch = await self.controller_client.register(
                    host, adv_port, clean_shutdown=self.storage.clean_shutdown)
                break
            except (RpcError, KafkaError) as exc:
                if time.monotonic() > deadline:
                    log.error("broker %d could not register with the controller: %s",
                              self.node_id, exc)
                    self.stop()
                    return
                await asyncio.sleep(0.2)
        for ps in self.cluster_partitions.values():
            ps.core.local_broker_epoch = epoch
        log.info("broker %d registered broker_epoch=%d", self.node_id, epoch)
        await self.controller_client.catch_up()
        self._started = True
        self._on_metadata([])
        self.storage.remove_orphans(self.controller_client.topics())
        self._cluster_tasks.append(asyncio.create_task(self._heartbeats()))
        self._cluster_tasks.append(asyncio.create_task(self._metadata_poll()))
        self._cluster_tasks.append(asyncio.create_task(self._isr_checks()))
        if ready is not None:
            ready(port)

    async def _heartbeats(self) -> None:
        interval_s = self._setting("broker.heartbeat.interval.ms") / 1000
        while not self._closing:
            await asyncio.sleep(interval_s)
            try:
                answer = await self.controller_client.heartbeat()
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d heartbeat failed: %s", self.node_id, exc)
                continue
            if answer.get("error") == int(ErrorCode.STALE_BROKER_EPOCH):
                log.warning("broker %d broker_epoch=%d is stale: registering again",
                            self.node_id, self.controller_client.broker_epoch)
                try:
                    host, port = self.advertised
                    epoch = await self.controller_client.register(
                        host, port, clean_shutdown=self.storage.clean_shutdown)
                    for ps in self.cluster_partitions.values():
                        ps.core.local_broker_epoch = epoch
                except (RpcError, KafkaError) as exc:
                    log.warning("broker %d re-registration failed: %s", self.node_id, exc)

    async def _metadata_poll(self) -> None:
        while not self._closing:
            try:
                await self.controller_client.fetch_metadata(max_wait_ms=2000)
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d metadata fetch failed: %s", self.node_id, exc)
                await asyncio.sleep(0.2)
            except Exception:
                # Never stop learning metadata: log, back off, fetch again.
                log.exception("broker %d applying metadata failed", self.node_id)
                await asyncio.sleep(1.0)

    async def _isr_checks(self) -> None:
        lag_ms = int(self.config.get("replica.lag.time.max.ms"))
        while not self._closing:
            await asyncio.sleep(max(0.05, lag_ms / 2000))
            now = self.now_ms()
            for ps in list(self.cluster_partitions.values()):
                if ps.core.is_leader:
                    try:
                        ps.apply(ps.core.maybe_shrink_isr(ps.log, now))
                    except Exception:
                        log.exception("partition %s leader_epoch=%d ISR check failed", ps.name,
                                      ps.leader_epoch)

    async def _shutdown(self) -> None:
        if self._started:
            await self._controlled_shutdown()
        self._closing = True
        for task in self._cluster_tasks:
            task.cancel()
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.controller_client.close()
        await super()._shutdown()

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away, wait (bounded) until it has."""
        deadline = time.monotonic() + self._setting("controlled.shutdown.timeout.ms") / 1000
        while time.monotonic() < deadline:
            try:
                answer = await self.controller_client.heartbeat(want_shutdown=True)
                if answer.get("shutdown_ready"):
                    log.info("broker %d controlled shutdown: leads no partition", self.node_id)
                    return
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d controlled shutdown: %s", self.node_id, exc)
                return
            await asyncio.sleep(0.1)
        log.warning("broker %d controlled shutdown timed out", self.node_id)

    # -- metadata -------------------------------------------------------------------------------
    def _on_metadata(self, records: list[MetadataRecord]) -> None:
        if not self._started or self._closing:
            # Shutting down: a change applied now could start a replica fetcher after every
            # fetcher was stopped, and that one would keep the process alive.
            return
        image = self.controller_client.image
        dynamic_configs.apply(self)  # KIP-226 dynamic broker configs, before the partitions
        now = self.now_ms()
        wanted: set[tuple[str, int]] = set()
        broker_epochs = image.broker_epochs()
        ineligible = image.ineligible()
        for name, timage in image.topics.items():
            for index, reg in timage.partitions.items():
                if self.node_id not in reg.replicas:
                    continue
                key = (name, index)
                wanted.add(key)
                try:
                    ps = self.cluster_partitions.get(key)
                    if ps is None:
                        ps = self._open_cluster_partition(name, index, timage.configs,
                                                          timage.topic_id)
                    self.reconfigure_partition(ps, timage.configs)
                    was_leader = ps.core.is_leader
                    isr_before = len(ps.core.isr)
                    ps.apply_metadata(reg, now, broker_epochs=broker_epochs, ineligible=ineligible)
                    if was_leader and ps.core.is_leader:  # e.g. the controller fenced a follower
                        self.isr_shrinks += int(len(ps.core.isr) < isr_before)
                        self.isr_expands += int(len(ps.core.isr) > isr_before)
                    if name == OFFSETS_TOPIC and ps.core.is_leader and not was_leader:
                        # Group coordinator for this partition now: load the committed offsets the
                        # replicated log holds (written by the previous coordinator).
                        n = self.offsets.replay(functools.partial(
                            self.storage.read_all, ps.log, ps.log_end_offset))
                        log.info("partition %s leader_epoch=%d coordinator: replayed %d committed "
                                 "offsets", ps.name, ps.leader_epoch, n)
                    if was_leader != ps.core.is_leader:
                        log.info("partition %s leader_epoch=%d now %s (leader %d, isr %s)", ps.name,
                                 ps.leader_epoch, "LEADER" if ps.core.is_leader else "follower",
                                 reg.leader, list(reg.isr))
                    self._sync_fetcher(key, ps, reg)
                    self.purgatory.wake(key)
                    self.replica_waiters.wake(key)
                except (KafkaError, OSError, ValueError, TypeError) as exc:
                    # One partition that cannot be applied (a bad config value that slipped
                    # into the metadata, a disk error) must not stop every later change.
                    self._bad_partition(key, exc)
        for key in [k for k in self.cluster_partitions if k not in wanted]:
            self._remove_partition(key, delete=key[0] not in image.topics)

    def _bad_partition(self, key: tuple[str, int], exc: Exception) -> None:
        last = self._bad_partitions.get(key)
        if last != str(exc):
            self._bad_partitions[key] = str(exc)
            log.error("partition %s-%d: cannot apply its metadata (%s); other partitions go on",
                      key[0], key[1], exc)

    def _open_cluster_partition(self, topic: str, index: int, configs: dict[str, Any],
                                topic_id: uuid.UUID | None = None) -> PartitionState:
        min_isr = int(configs.get("min.insync.replicas", self.config.get("min.insync.replicas")))
        plog, hw = self.storage.open_log(topic, index, configs, self.now_ms(), topic_id=topic_id)
        ps = PartitionState(
            topic, index, self.node_id, plog, hooks=self, min_insync_replicas=min_isr,
            topic_configs=dict(configs),
            checkpointed_high_watermark=hw, truncation=self.config.truncation,
            replica_lag_time_max_ms=int(self.config.get("replica.lag.time.max.ms")))
        ps.core.local_broker_epoch = self.controller_client.broker_epoch
        self.cluster_partitions[(topic, index)] = ps
        self.partitions[(topic, index)] = ps
        return ps

    def _remove_partition(self, key: tuple[str, int], *, delete: bool) -> None:
        ps = self.cluster_partitions.pop(key)
        self.partitions.pop(key, None)
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            fetcher.stop()
        ps.apply(ps.core.resign())
        ps.log.close()
        if delete:
            self.storage.delete_log(*key)
        self.purgatory.wake(key)
        log.info("partition %s removed from broker %d (deleted=%s)", ps.name, self.node_id,
                 delete)

    def _sync_fetcher(self, key: tuple[str, int], ps: PartitionState,
                      reg: PartitionRegistration) -> None:
        fetcher = self.fetchers.get(key)
        role = ps.core.role
        if isinstance(role, FollowerState):
            target = (role.leader_id, role.leader_epoch)
            if fetcher is not None and fetcher.target != target:
                # New leader or epoch: drop any request in flight to the old one (it may be
                # stopped and never answer) and start over against the new one.
                fetcher.stop()
                fetcher = None
            if fetcher is None:
                fetcher = ReplicaFetcher(self, ps, target)
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.changed.set()
        elif fetcher is not None:
            fetcher.stop()
            del self.fetchers[key]

    # -- ISR proposals ---------------------------------------------------------------------------
    def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
        ps = self.cluster_partitions.get(key)
        if ps is not None:
            self._cluster_tasks.append(asyncio.create_task(self._alter_partition(ps, request)))

    async def _alter_partition(self, ps: PartitionState, req: AlterPartitionRequest) -> None:
        args = {"broker_id": req.broker_id, "broker_epoch": req.broker_epoch,
                "leader_epoch": req.leader_epoch, "partition_epoch": req.partition_epoch,
                "new_isr": list(req.new_isr),
                "new_isr_broker_epochs": list(req.new_isr_broker_epochs),
                "leader_recovered": req.leader_recovered}
        attempt = 0
        while not self._closing:
            if ((ps.topic, ps.partition) not in self.cluster_partitions
                    or not ps.core.is_proposal_pending(req)):
                return  # answered meanwhile by new metadata, or no longer leader
            try:
                answer = await self.controller_client.alter_partition(ps.topic, ps.partition, args)
            except (RpcError, KafkaError) as exc:
                answer = {"error": int(ErrorCode.REQUEST_TIMED_OUT), "message": str(exc)}
            if int(answer["error"]) not in RETRIABLE_ALTER_PARTITION:
                break
            args["broker_epoch"] = self.controller_client.broker_epoch  # re-registered?
            # Controller unreachable or behind: keep the proposal (the HW rules stay safe with
            # the maximal ISR) and retry until it is answered or made moot by new metadata.
            attempt += 1
            log.warning("partition %s leader_epoch=%d AlterPartition attempt %d: %s %s",
                        ps.name, ps.leader_epoch, attempt,
                        ErrorCode(int(answer["error"])).name, answer.get("message", ""))
            await asyncio.sleep(min(1.0, 0.1 * attempt))
        else:
            return  # shutting down
        error = ErrorCode(int(answer["error"]))
        reg_rec = answer.get("registration")
        reg = record_to_registration(reg_rec) if reg_rec and error is ErrorCode.NONE else None
        log.info("partition %s leader_epoch=%d AlterPartition isr=%s -> %s", ps.name,
                 ps.leader_epoch, list(req.new_isr), error.name)
        if reg is not None:  # accepted: Kafka's IsrShrinksPerSec / IsrExpandsPerSec
            before = len(ps.core.isr)
            self.isr_shrinks += int(len(reg.isr) < before)
            self.isr_expands += int(len(reg.isr) > before)
        if (ps.topic, ps.partition) not in self.cluster_partitions:
            return
        ps.apply(ps.core.handle_alter_partition_response(ps.log, req, error, reg,
                                                         self.now_ms()))

    # -- dispatch ---------------------------------------------------------------------------------
    def dispatch(self, frame: memoryview | bytes, conn: Connection) -> Any:
        key, version, _corr = peek_header(frame)
        if key == ApiKey.FETCH:
            # Consumers' fetches (v4-14, replica id -1) go straight to the broker's handler;
            # only replica fetches are decoded here (v15+ name the replica in a tagged field).
            if version < 15 and peek_fetch_replica_id(frame, version) < 0:
                return super().dispatch(frame, conn)
            header, body = decode_request(frame)
            if replica_of(body, header.api_version)[0] >= 0:
                return self._finish_replica_fetch(header, body)
            return super().dispatch(frame, conn, (header, body))  # decoded once
        if key == ApiKey.METADATA:
            header, body = decode_request(frame)
            return encode_response(header.api_key, header.api_version, header.correlation_id,
                                   self._metadata(header, body, conn))
        if key == ApiKey.FIND_COORDINATOR:
            header, body = decode_request(frame)
            return encode_response(header.api_key, header.api_version, header.correlation_id,
                                   self._find_coordinator(header, body))
        if key in GROUP_APIS:
            header, body = decode_request(frame)
            refusal = self._not_coordinator(header, body)
            if refusal is not None:
                return encode_response(header.api_key, header.api_version,
                                       header.correlation_id, refusal)
        if key in (ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH) and (
                key == ApiKey.LIST_OFFSETS or version >= 3):
            header, body = decode_request(frame)
            if int(body.replica_id) == DEBUG_REPLICA_ID:
                answer = (self._debug_list_offsets(body) if key == ApiKey.LIST_OFFSETS
                          else self._debug_epochs(body))
                return encode_response(header.api_key, header.api_version,
                                       header.correlation_id, answer)
        if key == DESCRIBE_QUORUM and version in (0, 1):
            header, body = decode_request(frame)
            return encode_response(header.api_key, header.api_version, header.correlation_id,
                                   self._debug_leader_view(body))
        result = super().dispatch(frame, conn)
        if key in (ApiKey.PRODUCE, ApiKey.OFFSET_COMMIT):
            # New data on the leader: wake follower fetches parked on these partitions.
            self.replica_waiters.wake_all()
        return result

    async def _finish_replica_fetch(self, header: Any, body: Any) -> Any:
        result = await handle_replica_fetch(self, header, body)
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)

    # -- consumer groups: coordinator = leader of the group's __consumer_offsets partition ---------
    def _offsets_partitions(self) -> int:
        """Partition count of the replicated offsets topic, creating it on first use with
        RF = min(3, live brokers)."""
        image = self.controller_client.image
        topic = image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            n = int(self.config.get("offsets.topic.num.partitions"))
            rf = max(1, min(3, len(image.acceptable_brokers())))
            try:
                self.controller_client.create_topic(OFFSETS_TOPIC, n, rf,
                                                    {"cleanup.policy": "compact"})
            except KafkaError as exc:
                if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
            topic = image.topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else 0

    def _coordinator_for(self, group: str) -> int:
        try:
            n = self._offsets_partitions()
        except KafkaError:
            return -1
        if n == 0:
            return -1
        reg = self.controller_client.image.partition(OFFSETS_TOPIC, partition_for(group, n))
        return reg.leader if reg is not None else -1

    def _find_coordinator(self, header: Any, body: Any) -> dict[str, Any]:
        image = self.controller_client.image

        def answer(key: str) -> dict[str, Any]:
            leader = self._coordinator_for(key)
            reg = image.brokers.get(leader)
            if reg is None or reg.fenced:
                return {"key": key, "node_id": -1, "host": "", "port": -1,
                        "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                        "error_message": "no live leader for the group's offsets partition"}
            return {"key": key, "node_id": leader, "host": reg.host, "port": reg.port,
                    "error_code": 0, "error_message": None}

        if header.api_version >= 4:
            return {"throttle_time": 0,
                    "coordinators": [answer(k) for k in body.coordinator_keys]}
        one = answer(body.key)
        del one["key"]
        return {"throttle_time": 0, **one}

    def _not_coordinator(self, header: Any, body: Any) -> dict[str, Any] | None:
        """NOT_COORDINATOR (in the request's own response shape) unless this broker leads the
        group's offsets partition; a stale coordinator must not write a follower's log."""
        api, version = header.api_key, header.api_version
        if api == ApiKey.OFFSET_FETCH and version >= 8:
            groups = [g.group_id for g in body.groups]
        else:
            groups = [body.group_id]
        if all(self._coordinator_for(g) == self.node_id for g in groups):
            return None
        err = int(ErrorCode.NOT_COORDINATOR)
        if api == ApiKey.OFFSET_COMMIT:
            return {"throttle_time": 0, "topics": [
                {"name": t.name, "partitions": [{"partition_index": int(p.partition_index),
                                                 "error_code": err} for p in t.partitions]}
                for t in body.topics]}
        if api == ApiKey.OFFSET_FETCH:
            if version >= 8:
                return {"throttle_time": 0, "groups": [
                    {"group_id": g, "topics": [], "error_code": err} for g in groups]}
            return {"throttle_time": 0, "error_code": err, "topics": []}
        if api == ApiKey.LEAVE_GROUP:
            return {"throttle_time": 0, "error_code": err, "members": []}
        if api == ApiKey.JOIN_GROUP:
            return {"throttle_time": 0, "error_code": err, "generation_id": -1,
                    "leader": "", "member_id": "", "members": []}
        return {"throttle_time": 0, "error_code": err}

    # Debug reads (replica id -2, as Kafka's DEBUGGING_REPLICA_ID): any replica, leader or not,
    # answers from its own log, so tools can show every replica's LEO, HW and epoch cache.
    def _debug_list_offsets(self, body: Any) -> dict[str, Any]:
        committed = int(getattr(body, "isolation_level", 0)) == 1
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                out: dict[str, Any] = {"partition_index": int(p.partition_index),
                                       "error_code": 0, "old_style_offsets": [],
                                       "timestamp": -1, "offset": -1, "leader_epoch": -1}
                ps = self.partitions.get((t.name, int(p.partition_index)))
                ts = int(p.timestamp)
                if ps is None:
                    out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif ts == -1:  # latest: LEO, or the HW with isolation_level=1
                    out["offset"] = ps.high_watermark if committed else ps.log_end_offset
                    out["leader_epoch"] = ps.log.epoch_cache.latest_epoch
                elif ts == -2:
                    out["offset"] = ps.log_start_offset
                    out["leader_epoch"] = ps.log.epoch_cache.epoch_for_offset(ps.log_start_offset)
                else:
                    out["error_code"] = int(ErrorCode.INVALID_REQUEST)
                parts.append(out)
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def _debug_epochs(self, body: Any) -> dict[str, Any]:
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                out: dict[str, Any] = {"error_code": 0, "partition": int(p.partition),
                                       "leader_epoch": -1, "end_offset": -1}
                ps = self.partitions.get((t.topic, int(p.partition)))
                if ps is None:
                    out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    answer = ps.log.epoch_cache.end_offset_for(int(p.leader_epoch),
                                                               ps.log_end_offset)
                    out["leader_epoch"], out["end_offset"] = answer.epoch, answer.end_offset
                parts.append(out)
            topics.append({"topic": t.topic, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def _debug_leader_view(self, body: Any) -> dict[str, Any]:
        """DescribeQuorum for ordinary partitions: the leader's HW and, per replica, the LEO it
        has learned from that replica's fetches (its own LEO for itself; -1 = not yet known)."""
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                index = int(p.partition_index)
                out: dict[str, Any] = {"partition_index": index, "error_code": 0,
                                       "leader_id": -1, "leader_epoch": -1,
                                       "high_watermark": -1, "current_voters": [],
                                       "observers": []}
                ps = self.partitions.get((t.topic_name, index))
                if ps is None:
                    out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif not isinstance(ps.core.role, LeaderState):
                    out["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                else:
                    core = ps.core
                    isr = set(core.isr)
                    out.update(leader_id=self.node_id, leader_epoch=core.leader_epoch,
                               high_watermark=ps.high_watermark)
                    remote = core.remote_log_end_offsets()
                    for replica in ps.core.role.replicas:
                        state = core.replica_states.get(replica)
                        entry = {"replica_id": replica,
                                 "log_end_offset": (ps.log_end_offset if replica == self.node_id
                                                    else remote.get(replica, -1)),
                                 "last_fetch_timestamp": (state.last_fetch_time_ms
                                                          if state and state.last_fetch_time_ms
                                                          else -1),
                                 "last_caught_up_timestamp": (
                                     state.last_caught_up_time_ms
                                     if state and state.last_caught_up_time_ms else -1)}
                        key = "current_voters" if replica in isr else "observers"
                        out[key].append(entry)
                parts.append(out)
            topics.append({"topic_name": t.topic_name, "partitions": parts})
        return {"error_code": 0, "topics": topics}

    def live_brokers(self) -> list[dict[str, Any]]:
        """Every unfenced broker of the controller's metadata (and this one)."""
        image = self.controller_client.image
        out = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
               for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
               if not b.fenced]
        if not any(b["node_id"] == self.node_id for b in out):
            out.extend(super().live_brokers())
        return out

    def is_coordinator(self, group: str) -> bool:
        return self._coordinator_for(group) == self.node_id

    def _metadata(self, header: Any, body: Any, conn: Connection) -> dict[str, Any]:
        # Admin clients send CreateTopics etc. to the "controller": any broker forwards them.
        out = admin.metadata(self, header, body, conn)
        for topic in out["topics"]:
            for p in topic["partitions"]:
                if p["leader_id"] < 0:
                    p["error_code"] = int(ErrorCode.LEADER_NOT_AVAILABLE)
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="floodmark-cluster-broker")
    p.add_argument("--node-id", type=int, required=True)
    p.add_argument("--controller", required=True, help="HOST:PORT of the controller")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--advertised-host", default=None,
                   help="the host clients and other brokers are told (default: --listen's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--controller-data-dir", default=None,
                   help="combined mode (process.roles=broker,controller): also run the "
                        "controller in this process, listening on --controller, with its "
                        "metadata log in this directory")
    p.add_argument("--broker-session-timeout-ms", type=int, default=9000,
                   help="combined mode: the embedded controller's session timeout")
    p.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help="serve Prometheus /metrics here (port 0: any free port)")
    p.add_argument("--log-level", default=os.environ.get("FLOODMARK_LOG_LEVEL", "INFO"))
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    roles = "broker,controller" if args.controller_data_dir else "broker"
    advertised = f"{args.advertised_host}:0" if args.advertised_host else None  # bound port
    config = BrokerConfig.load(data_dir=args.data_dir, listen=args.listen, advertised=advertised,
                               config_file=None,
                               overrides=[f"process.roles={roles}", *args.overrides],
                               node_id=args.node_id)
    from floodmark.storage.data_dir import DataDirLock, DataDirLockedError, lock_data_dir

    locks: list[DataDirLock] = []
    try:  # held until the process ends
        locks.append(lock_data_dir(args.data_dir))
        if args.controller_data_dir:
            locks.append(lock_data_dir(args.controller_data_dir))
    except (DataDirLockedError, OSError) as exc:
        print(f"floodmark broker {args.node_id}: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover
        pass
    broker = ClusterBroker(config, args.controller)
    broker.open()
    controller = None
    if args.controller_data_dir:
        from floodmark.controller.logic import ControllerConfig
        from floodmark.controller.rpc import parse_address
        from floodmark.controller.server import ControllerServer

        controller = ControllerServer(args.controller_data_dir, ControllerConfig(
            broker_session_timeout_ms=args.broker_session_timeout_ms))
    if args.metrics_listen:
        from floodmark.broker.metrics import BrokerCollector
        from floodmark.controller.metrics import ControllerCollector
        from floodmark.metrics import RequestMetrics, serve_metrics

        broker.request_metrics = RequestMetrics()
        collectors: list[Any] = [broker.request_metrics, BrokerCollector(broker)]
        if controller is not None:
            collectors.append(ControllerCollector(controller))
        mhost, mport = serve_metrics(collectors, args.metrics_listen)
        print(f"floodmark broker {args.node_id} metrics on http://{mhost}:{mport}/metrics",
              flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, broker.stop)
        controller_task = None
        if controller is not None:
            host, port = parse_address(args.controller)
            bound: asyncio.Future[int] = loop.create_future()
            controller_task = asyncio.create_task(
                controller.serve(host, port, bound.set_result))
            actual = await bound
            broker.controller_client.set_address(f"{host}:{actual}")
            broker.controller_client.local = controller
            print(f"floodmark controller listening on {host}:{actual}", flush=True)

        def ready(port: int) -> None:
            print(f"floodmark broker {args.node_id} listening on {config.listen_host}:{port}",
                  flush=True)

        await broker.serve(ready)
        if controller is not None and controller_task is not None:
            controller.stop()  # after the broker's controlled shutdown
            await controller_task

    asyncio.run(run())
    for lock in locks:
        lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
