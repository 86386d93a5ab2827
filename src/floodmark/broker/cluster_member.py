"""A broker that is one member of a replicated cluster (``process.roles=broker``).

The broker is the one ``Broker``; what makes it a cluster member is what it is given:

* ``ClusterMembership``, its controller: the controller quorum, through
  ``floodmark.controller.client.ControllerClient``: the broker registers (getting its broker
  epoch), heartbeats every ``broker.heartbeat.interval.ms``, and long-polls the metadata log;
  every applied record batch re-applies the partition registrations it hosts to the core
  (``Partition.apply_metadata``: become leader / follower, ISR and broker-epoch updates, fencing
  of stale metadata by partition epoch). Partitions open with no role, when the metadata names
  this broker a replica; ISR proposals (the driver's ``propose_isr`` port) go to the controller
  as AlterPartition and the answer goes back to the core. Metadata lists every live broker.
* ``replica_fetcher.ReplicaManager``: followers fetch through ``ReplicaFetcherThread``s (one
  connection per leader and fetcher id), and Fetch requests from replicas (v15 ``replica_state``, or v12 ``replica_id >= 0``) are answered by the leader.

Consumer groups: ``__consumer_offsets`` is a replicated topic; a group's coordinator is the leader
of its partition (FindCoordinator says so, other brokers answer NOT_COORDINATOR: see
``handlers/coordination``) and replays that partition's log when it becomes leader. Transactions
likewise: the leader of a transactional id's ``__transaction_state`` partition is its
coordinator and loads that partition when it becomes leader (``txn_coordinator.refresh``). Combined
mode (``process.roles=broker,controller``): ``--controller-data-dir`` runs the controller in this
process, with the controller process's own options and startup (``controller/startup.py``);
with ``--controller-quorum-voters`` it is one voter of the quorum, and the broker side follows
whichever voter is active, as any broker does.
Run: ``python -m floodmark.broker.cluster_member --node-id 1 --controller HOST:PORT
--data-dir DIR [--listen HOST:PORT] [--set name=value ...]``; combined, one voter of three:
``... --node-id 1 --controller-data-dir CDIR --controller-quorum-voters
1@h:9201,2@h:9202,3@h:9203 --data-dir DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from floodmark import lifeline
from floodmark.address import format_host_port, parse_host_port
from floodmark.broker import dir_assignments, dynamic_configs, metadata_delta
from floodmark.broker.alter_partition_manager import AlterPartitionManager
from floodmark.broker.broker import Broker, now_ms
from floodmark.broker.config import BrokerConfig, Configs
from floodmark.broker.context import BrokerInfo, MembershipBase, PartitionKey
from floodmark.broker.log_opener import LogOpener, Opened
from floodmark.broker.metadata import Controller
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.replica_fetcher import ReplicaManager
from floodmark.broker.replica_fetcher_thread import ReplicaFetchConfig
from floodmark.broker.setting_keys import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    OFFSETS_TOPIC_NUM_PARTITIONS,
    SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR,
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS,
    SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR,
    TRANSACTION_STATE_LOG_MIN_ISR,
    TRANSACTION_STATE_LOG_NUM_PARTITIONS,
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR,
)
from floodmark.controller import (
    ControllerClient,
    MetadataRecord,
    RpcError,
    TopicImage,
    UnappliedRecord,
    add_controller_arguments,
    controller_setup,
    open_controller,
    parse_voters,
    start_controller,
    voter_addresses,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import OFFSETS_TOPIC, CoordinatorType, coordinator_partition
from floodmark.metrics_flags import add_metrics_security_arguments, metrics_security
from floodmark.replication import (
    AlterPartitionRequest,
    ControllerSession,
    Partition,
    PartitionRegistration,
    lease,
)
from floodmark.security import ChannelSecurity
from floodmark.settings import eligible_leader_replicas_enabled
from floodmark.storage import EpochCheckpointBatch

if TYPE_CHECKING:  # a combined node's controller; open_controller loads it only for one
    from floodmark.controller import ControllerServer

log = logging.getLogger("floodmark.broker.cluster_member")

HEARTBEAT_TIMEOUT_MAX_S = 5.0  # a heartbeat unanswered this long moves on to the next voter
FENCED_BROKER_LISTED_MS = 30_000
"""How long Metadata answers still list a broker after the controller fenced it. Kafka fences a
SIGKILLed broker only when its session runs out (9 s by default), so clients keep a broker that
restarts at once in their metadata; floodmark fences at once (a closed connection, a refused
port), and librdkafka (2.10 and later) tears down its handle to a broker missing from Metadata:
a transactional producer whose cached group coordinator is that handle then waits in
send_offsets_to_transaction until some other broker changes state (librdkafka issue 5511).
Leaders, ISRs and coordinators never name a fenced broker; only the broker list keeps it."""
CLUSTER_DEFAULTS = {
    "broker.heartbeat.interval.ms": 250,
    "controlled.shutdown.timeout.ms": 5000,
}


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class _Step:
    """What applying a batch of partitions' metadata shares: the time, the brokers' epochs and
    eligibility, and the new leaders' epoch checkpoints to write as one batch."""

    now_ms: int
    broker_epochs: dict[int, int]
    ineligible: frozenset[int]
    epoch_writes: EpochCheckpointBatch


class ClusterMembership(MembershipBase):
    """A broker's membership of a replicated cluster: its client of the controller quorum, the
    loops that keep it a member, and what it makes of the metadata."""

    def __init__(self, controller_client: ControllerClient) -> None:
        self.controller_client = controller_client
        controller_client.on_records = self._on_metadata
        controller_client.on_unapplied = self._on_unapplied
        self._bad_partitions: dict[PartitionKey, str] = {}
        self._opener: LogOpener | None = None
        self._creating: dict[str, asyncio.Task[None]] = {}  # internal topics being created
        self._tasks: list[asyncio.Task[None]] = []
        self._poll_task: asyncio.Task[None] | None = None
        self._started = False
        self._caught_up = asyncio.Event()  # set once the first metadata catch-up is done
        self.session = ControllerSession()  # is this broker's leadership in doubt?
        self._fenced_since: dict[int, int] = {}  # broker id -> when this broker saw it fenced
        self.alter_partitions: AlterPartitionManager[PartitionState] = AlterPartitionManager(
            controller_client.alter_partition, self._proposal_pending,
            self._alter_partition_answered, _monotonic_ms)
        self._isr_sender: asyncio.Task[None] | None = None

    @property
    def controller(self) -> Controller:
        return self.controller_client

    def _setting(self, name: str) -> int:
        value = self.host.config.settings.get(name)
        return int(value if value is not None else CLUSTER_DEFAULTS[name])

    def _set_broker_epoch(self, epoch: int) -> None:
        for ps in self.host.partitions.values():
            ps.core.local_broker_epoch = epoch

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Nothing to open yet: partitions (including the replicated ``__consumer_offsets``)
        open when the metadata names this broker as a replica."""

    def metadata_changed(self) -> None:
        """Applied already: the controller's answer carried the records (``_on_metadata``)."""

    def start(self, port: int, ready: Callable[[int], None] | None) -> None:
        self._tasks.append(asyncio.create_task(self._join(port, ready)))

    def metadata_caught_up(self) -> bool:
        return self._caught_up.is_set()

    async def metadata_ready(self, timeout_s: float) -> bool:
        """The listeners are bound before the broker registers and reads the metadata log
        (it registers its ports); until it has caught up once, a SCRAM user or an ACL it has not
        read yet would be refused. Requests that need them wait here, as Kafka holds requests
        until the broker's first metadata catch-up."""
        if self._caught_up.is_set():
            return True
        try:
            await asyncio.wait_for(self._caught_up.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _join(self, port: int, ready: Callable[[int], None] | None) -> None:
        host = self.host
        address, adv_port = host.advertised
        deadline = time.monotonic() + 60
        while True:
            sent_ms = _monotonic_ms()
            try:
                epoch = await self.controller_client.register(
                    address, adv_port, clean_shutdown=host.storage.clean_shutdown,
                    listeners=self._listener_records(), rack=host.config.rack)
                break
            except (RpcError, KafkaError) as exc:
                if time.monotonic() > deadline:
                    log.error("broker %d could not register with the controller: %s",
                              host.node_id, exc)
                    host.stop()
                    return
                await asyncio.sleep(0.2)
        self._set_broker_epoch(epoch)
        self.session.registered(sent_ms, self.controller_client.session_timeout_ms)
        log.info("broker %d registered broker_epoch=%d", host.node_id, epoch)
        await self.controller_client.catch_up()
        self._started = True
        self._caught_up.set()
        self._on_metadata([])
        # The logs of the partitions it hosts, opened off the loop: served before it
        # heartbeats (and so before the controller unfences it), as when opened in line.
        await self.opener.idle()
        # Directories of partitions this broker no longer holds (deleted topics, replicas moved
        # away while it was down) go; not while its metadata skipped a record (an incomplete
        # picture must never delete data).
        if self.controller_client.unapplied_total:
            log.error("broker %d keeps every partition directory: %d metadata record(s) could "
                      "not be applied (see floodmark cluster status)", host.node_id,
                      self.controller_client.unapplied_total)
        else:
            host.storage.remove_orphans({
                name: dataclasses.replace(meta, partitions=tuple(
                    p for p in meta.partitions if host.node_id in p.replicas))
                for name, meta in self.controller_client.topics().items()})
        self._tasks.append(asyncio.create_task(self._heartbeats()))
        self._poll_task = asyncio.create_task(self._metadata_poll())
        self._tasks.append(asyncio.create_task(self._lease_checks()))
        if ready is not None:
            ready(port)

    def _listener_records(self) -> list[dict[str, object]] | None:
        """Every advertised listener, for the registration; None for a broker without listener
        settings (its one listener is the registration's host:port, as before)."""
        if not self.host.config.listeners.explicit:
            return None
        return [ep.to_record() for ep in self.host.advertised_endpoints()]

    async def _heartbeats(self) -> None:
        host = self.host
        interval_s = self._setting("broker.heartbeat.interval.ms") / 1000
        # A controller that does not answer five heartbeat intervals (1 s to 5 s) is silent
        # (stopped, cut off): try the next voter, before a new active controller's session
        # timeout runs out on this broker.
        timeout_s = min(HEARTBEAT_TIMEOUT_MAX_S, max(1.0, 5 * interval_s))
        while not host.closing:
            await asyncio.sleep(interval_s)
            offline = host.storage.offline_partitions()
            if len(host.storage.dirs) > 1:
                await self._assign_directories()
                # The replicas the metadata places in a failed directory go offline through
                # it (the heartbeat names the directory); the broker lists the others.
                offline = [k for k in offline if self._recorded_dir(k) != self._actual_dir(k)]
            sent_ms = _monotonic_ms()
            try:
                answer = await self.controller_client.heartbeat(
                    timeout_s=timeout_s, offline_replicas=offline,
                    offline_log_dirs=host.storage.offline_directory_ids())
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d heartbeat failed: %s", host.node_id, exc)
                continue
            stale = answer.get("error") == int(ErrorCode.STALE_BROKER_EPOCH)
            if self.session.heartbeat_answered(
                    sent_ms, _monotonic_ms(), stale_epoch=stale,
                    metadata_end=int(answer.get("end", 0)),
                    session_timeout_ms=answer.get("session_timeout_ms")):
                # Fenced meanwhile: the metadata may have moved this broker's partitions. Until
                # the image reaches the controller's end, sequence gaps are not this broker's to
                # judge (ControllerSession); a long poll stuck on a connection cut by the fault
                # (TCP retransmission backoff) would keep it waiting: poll anew at once.
                log.warning("broker %d controller session lapsed: leadership in doubt until the "
                            "metadata reaches offset %d (at %d)", host.node_id,
                            self.session.resync_to, self.controller_client.image.next_offset)
                self._restart_metadata_poll()
            if stale:
                log.warning("broker %d broker_epoch=%d is stale: registering again",
                            host.node_id, self.controller_client.broker_epoch)
                try:
                    address, port = host.advertised
                    sent_ms = _monotonic_ms()
                    epoch = await self.controller_client.register(
                        address, port, clean_shutdown=host.storage.clean_shutdown,
                        listeners=self._listener_records(), rack=host.config.rack)
                    self._set_broker_epoch(epoch)
                    self.session.registered(sent_ms, self.controller_client.session_timeout_ms)
                except (RpcError, KafkaError) as exc:
                    log.warning("broker %d re-registration failed: %s", host.node_id, exc)

    def _recorded_dir(self, key: PartitionKey) -> str | None:
        """The log directory id the metadata records for this broker's replica of ``key``."""
        timage = self.controller_client.image.topics.get(key[0])
        if timage is None:
            return None
        return timage.directories.get(key[1], {}).get(self.host.node_id)

    def _actual_dir(self, key: PartitionKey) -> str | None:
        where = self.host.storage.dir_of(*key)
        return None if where is None or key not in self.host.partitions else where.directory_id

    async def _assign_directories(self) -> None:
        """AssignReplicasToDirs for the replicas placed or moved since the metadata last
        showed them where they are (``dir_assignments``); a failure is retried next time."""
        todo = dir_assignments.pending(self.host.storage.unassigned, self._actual_dir,
                                       self._recorded_dir)
        if not todo:
            return
        try:
            answer = await self.controller_client.assign_replicas_to_dirs(
                dir_assignments.request_directories(todo))
        except (RpcError, KafkaError) as exc:
            log.warning("broker %d AssignReplicasToDirs of %d replica(s) failed: %s",
                        self.host.node_id, sum(map(len, todo.values())), exc)
            return
        refused = [f"{t['name']}-{p['partition_index']}: {ErrorCode(p['error_code']).name}"
                   for d in answer.get("directories", ()) for t in d["topics"]
                   for p in t["partitions"] if p["error_code"]]
        if refused or answer.get("error_code"):
            log.warning("broker %d AssignReplicasToDirs refused (%s): %s", self.host.node_id,
                        ErrorCode(int(answer.get("error_code", 0))).name,
                        ", ".join(refused[:10]) or "the request")

    def _restart_metadata_poll(self) -> None:
        if self._poll_task is not None:
            self._poll_task.cancel()
        self.controller_client.restart_poll()
        self._poll_task = asyncio.create_task(self._metadata_poll())

    def leadership_in_doubt(self) -> bool:
        return self.session.leadership_in_doubt(_monotonic_ms(),
                                                self.controller_client.image.next_offset)

    def steps_down(self, core: Partition, now_ms: int) -> bool:
        """``now_ms``: the broker's clock (``Broker.now_ms``), which the core's fetch times
        use; the session's own clock is monotonic."""
        return lease.steps_down(core, now_ms, in_doubt=self.leadership_in_doubt(),
                                session_timeout_ms=self.session.session_timeout_ms)

    async def _metadata_poll(self) -> None:
        host = self.host
        while not host.closing:
            try:
                await self.controller_client.fetch_metadata(max_wait_ms=2000)
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d metadata fetch failed: %s", host.node_id, exc)
                await asyncio.sleep(0.2)
            except Exception:
                # Never stop learning metadata: log, back off, fetch again.
                log.exception("broker %d applying metadata failed", host.node_id)
                await asyncio.sleep(1.0)

    async def _lease_checks(self) -> None:
        """The lease check of every partition (``ReplicaDriver.check_lease``, the simulator's
        too): produce waiting at a leader that stepped down for clients is answered
        NOT_LEADER_OR_FOLLOWER at once."""
        host = self.host
        # Not in doubt costs one clock read: look often, so waiting produce is answered within
        # 100 ms of the lapse.
        interval_s = min(0.1, self._setting("broker.heartbeat.interval.ms") / 1000)
        stepped_down = False
        while not host.closing:
            await asyncio.sleep(interval_s)
            if not self.leadership_in_doubt():
                stepped_down = False
                continue
            now = host.now_ms()
            timeout_ms = self.session.session_timeout_ms
            down = [ps for ps in list(host.partitions.values())
                    if ps.driver.check_lease(now, in_doubt=True, session_timeout_ms=timeout_ms)]
            if down and not stepped_down:
                log.warning("broker %d stepped down for clients from %d partition(s) it leads: "
                            "its controller session lapsed (Produce and Fetch answer "
                            "NOT_LEADER_OR_FOLLOWER until the metadata says again)",
                            host.node_id, len(down))
            stepped_down = bool(down)

    async def leave(self) -> None:
        """Ask the controller to move leadership away, wait (bounded) until it has."""
        if not self._started:
            return
        node_id = self.host.node_id
        deadline = time.monotonic() + self._setting("controlled.shutdown.timeout.ms") / 1000
        while time.monotonic() < deadline:
            try:
                answer = await self.controller_client.heartbeat(want_shutdown=True)
                if answer.get("shutdown_ready"):
                    log.info("broker %d controlled shutdown: leads no partition", node_id)
                    return
            except (RpcError, KafkaError) as exc:
                log.warning("broker %d controlled shutdown: %s", node_id, exc)
                return
            await asyncio.sleep(0.1)
        log.warning("broker %d controlled shutdown timed out", node_id)

    def stop(self) -> None:
        if self._opener is not None:
            self._opener.close()
        for task in self._tasks:
            task.cancel()
        if self._poll_task is not None:
            self._poll_task.cancel()
        self.controller_client.close()

    def close(self) -> None:
        """The controller client was closed by ``stop``."""

    # -- metadata -------------------------------------------------------------------------------
    def _on_metadata(self, records: list[MetadataRecord]) -> None:
        host = self.host
        if not self._started or host.closing:
            # Shutting down: a change applied now could start a replica fetcher after every
            # fetcher was stopped, and that one would keep the process alive.
            return
        dynamic_configs.apply(host)  # KIP-226 dynamic broker configs, before the partitions
        # Only the partitions these records can change (metadata_delta): re-applying every
        # hosted partition after each ISR change of one was linear in partitions.
        change = metadata_delta.touched(records)
        if self._bad_partitions and not change.everything:  # tried again at every batch
            change = dataclasses.replace(
                change, partitions=change.partitions | frozenset(self._bad_partitions))
        step = self._step()
        wanted: set[PartitionKey] = set()
        for name, timage in self._touched_topics(change):
            indexes = (timage.partitions if change.everything or name in change.topics
                       else [i for t, i in change.partitions if t == name])
            for index in indexes:
                reg = timage.partitions.get(index)
                if reg is None or host.node_id not in reg.replicas:
                    continue
                key = (name, index)
                wanted.add(key)
                self._apply_partition(key, timage, reg, step)
        for key in [k for k in self._candidates(change) if k not in wanted]:
            # The topic was deleted, or this broker left the partition's replicas (a finished
            # or cancelled reassignment): Kafka's StopReplica with delete, through metadata.
            if host.remove_partition(key, delete=True) is not None:
                log.info("partition %s-%d removed from broker %d (deleted=True)", key[0], key[1],
                         host.node_id)
        self._finish_step(step)

    def _step(self) -> _Step:
        image = self.controller_client.image
        # The leader-epoch checkpoints this step makes new leaders write: made durable
        # together, their fsyncs off the event loop (heartbeats go on meanwhile).
        return _Step(self.host.now_ms(), image.broker_epochs(), image.ineligible(),
                     EpochCheckpointBatch())

    def _finish_step(self, step: _Step) -> None:
        host = self.host
        if step.epoch_writes:
            task = asyncio.create_task(self._write_epoch_checkpoints(step.epoch_writes))
            self._tasks.append(task)
            task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
        host.refresh_transactions()  # load / unload the __transaction_state partitions
        host.refresh_share_state()  # and the __share_group_state ones
        host.apply_group_configs()  # the groups' own configs (ConfigResource GROUP)

    @property
    def opener(self) -> LogOpener:
        """Opens the logs of partitions new to this broker on worker threads (``log_opener``);
        each comes back to ``_opened``, which hosts it and applies its metadata as it is
        then."""
        if self._opener is None:
            self._opener = LogOpener(self.host.storage, self._opened, self._hosts_replica)
        return self._opener

    def _hosts_replica(self, key: PartitionKey) -> bool:
        """Does the metadata name this broker a replica of ``key``?"""
        reg = self.controller_client.image.partition(*key)
        return reg is not None and self.host.node_id in reg.replicas

    def _apply_partition(self, key: PartitionKey, timage: TopicImage,
                         reg: PartitionRegistration, step: _Step) -> None:
        """The metadata of one partition this broker is a replica of, applied (a partition not
        hosted yet: its log is opened first, off the loop, and this runs again then)."""
        host = self.host
        name, index = key
        try:
            ps = host.partitions.get(key)
            if ps is not None and host.storage.is_offline(key):
                return  # its log dir failed: the controller moves it elsewhere
            if ps is None:
                if key not in self.opener:
                    self.opener.request(host.storage.begin_open(
                        name, index, timage.configs, step.now_ms, timage.topic_id),
                        timage.configs)
                return
            host.reconfigure_partition(ps, timage.configs)
            was_leader = ps.core.is_leader
            isr_before = len(ps.core.isr)
            ps.apply_metadata(reg, step.now_ms, broker_epochs=step.broker_epochs,
                              ineligible=step.ineligible, epoch_writes=step.epoch_writes)
            if was_leader and ps.core.is_leader:  # e.g. the controller fenced a follower
                host.isr_shrinks += int(len(ps.core.isr) < isr_before)
                host.isr_expands += int(len(ps.core.isr) > isr_before)
            if name == OFFSETS_TOPIC:
                if ps.core.is_leader and host.offsets_loaded.get(index) != ps.leader_epoch:
                    # Group coordinator for this partition now: load the committed offsets and
                    # group metadata its replicated log holds (written by the previous
                    # coordinator); until then COORDINATOR_LOAD_IN_PROGRESS.
                    host.load_offsets_partition(ps)
                elif not ps.core.is_leader:
                    host.unload_offsets_partition(index)
            if was_leader != ps.core.is_leader:
                log.info("partition %s leader_epoch=%d now %s (leader %d, isr %s)", ps.name,
                         ps.leader_epoch, "LEADER" if ps.core.is_leader else "follower",
                         reg.leader, list(reg.isr))
            if host.replicas is not None:
                host.replicas.sync(key, ps)
            host.purgatory.wake(key)  # consumers' and followers' fetches alike
            self._bad_partitions.pop(key, None)
        except (KafkaError, OSError, ValueError, TypeError) as exc:
            # One partition that cannot be applied (a bad config value that slipped into the
            # metadata, a disk error) must not stop every later change.
            self._bad_partition(key, exc)

    def _opened(self, results: list[Opened]) -> None:
        """Logs the opener opened (their files durable): hosted, then given their metadata as
        it is now (the topic may have been deleted, or re-created, meanwhile)."""
        host = self.host
        storage = host.storage
        if host.closing:
            for r in results:
                storage.abandon_open(r.opening)
                if r.log is not None:
                    r.log.close()
            return
        image = self.controller_client.image
        step = self._step()
        for r in results:
            key = r.opening.key
            if r.log is None:
                storage.abandon_open(r.opening)
                self._bad_partition(key, r.error or RuntimeError("not opened"))
                continue
            try:
                plog, hw = storage.finish_open(r.opening, r.log)
            except KafkaError as exc:
                self._bad_partition(key, exc)
                continue
            ps = host.adopt_partition(key[0], key[1], r.configs, plog, hw)
            ps.core.local_broker_epoch = self.controller_client.broker_epoch
            timage = image.topics.get(key[0])
            reg = timage.partitions.get(key[1]) if timage is not None else None
            if (timage is None or reg is None or host.node_id not in reg.replicas
                    or timage.topic_id != r.opening.topic_id):
                # Deleted (or re-created under a new id, or moved away) while it was opened.
                host.remove_partition(key, delete=True)
                log.info("partition %s-%d removed from broker %d (deleted=True) as it opened",
                         key[0], key[1], host.node_id)
                if timage is None or reg is None or host.node_id not in reg.replicas:
                    continue
            self._apply_partition(key, timage, reg, step)
        self._finish_step(step)

    async def _write_epoch_checkpoints(self, batch: EpochCheckpointBatch) -> None:
        """The new leaders of one metadata batch take writes once their epoch is durable."""
        started = time.monotonic()
        durable = await batch.run(self.host.now_ms)
        log.info("leader-epoch checkpoints of %d partitions written (%d durable) in %.0f ms",
                 len(batch), durable, (time.monotonic() - started) * 1000)

    def _touched_topics(self, change: metadata_delta.Touched
                        ) -> list[tuple[str, TopicImage]]:
        """The image's topics ``change`` names (all of them for ``EVERYTHING``)."""
        topics = self.controller_client.image.topics
        if change.everything:
            return list(topics.items())
        names = change.topics | {t for t, _ in change.partitions}
        return [(name, topics[name]) for name in sorted(names) if name in topics]

    def _candidates(self, change: metadata_delta.Touched) -> list[PartitionKey]:
        """Hosted partitions ``change`` may have taken away from this broker."""
        hosted = self.host.partitions
        if change.everything:
            return list(hosted)
        named = [k for k in change.partitions if k in hosted]
        if not change.topics:
            return named
        return [*named, *(k for k in hosted if k[0] in change.topics)]

    def _on_unapplied(self, _bad: UnappliedRecord) -> None:
        """A metadata record skipped (the client logged it): counted in /metrics."""
        if self._host is not None:
            self._host.metadata_apply_errors += 1

    def _bad_partition(self, key: PartitionKey, exc: Exception) -> None:
        last = self._bad_partitions.get(key)
        if last != str(exc):
            self._bad_partitions[key] = str(exc)
            log.error("partition %s-%d: cannot apply its metadata (%s); other partitions go on",
                      key[0], key[1], exc)

    # -- ISR proposals ---------------------------------------------------------------------------
    def propose_isr(self, key: PartitionKey, request: AlterPartitionRequest) -> None:
        """Into the next AlterPartition request (``alter_partition_manager``: one request of
        every pending partition, one in flight)."""
        ps = self.host.partitions.get(key)
        if ps is None:
            return
        if self._isr_sender is None:
            self._isr_sender = asyncio.create_task(self.alter_partitions.run())
            self._tasks.append(self._isr_sender)
        self.alter_partitions.submit(key, ps, request)

    def _proposal_pending(self, ps: PartitionState, req: AlterPartitionRequest) -> bool:
        """Still hosted (not a re-created partition of the same name), still the proposal its
        core waits for (not answered meanwhile by new metadata, still leader)."""
        host = self.host
        return (not host.closing and host.partitions.get((ps.topic, ps.partition)) is ps
                and ps.core.is_proposal_pending(req))

    def _alter_partition_answered(self, ps: PartitionState, req: AlterPartitionRequest,
                                  error: ErrorCode, reg: PartitionRegistration | None) -> None:
        host = self.host
        log.info("partition %s leader_epoch=%d AlterPartition isr=%s -> %s", ps.name,
                 ps.leader_epoch, list(req.new_isr), error.name)
        if host.partitions.get((ps.topic, ps.partition)) is not ps:
            return
        if reg is not None:  # accepted: Kafka's IsrShrinksPerSec / IsrExpandsPerSec
            before = len(ps.core.isr)
            host.isr_shrinks += int(len(reg.isr) < before)
            host.isr_expands += int(len(reg.isr) > before)
        ps.on_alter_partition_response(req, error, reg, host.now_ms())

    # -- the cluster as this broker sees it -------------------------------------------------------
    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """Every unfenced broker of the controller's metadata (and this one), at its endpoint
        of ``listener_name`` (None: the inter-broker listener; a broker without the listener
        is left out)."""
        image = self.controller_client.image
        out: list[BrokerInfo] = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            address = (b.host, b.port) if listener_name is None else b.endpoint(listener_name)
            if not b.fenced and address is not None:
                out.append({"node_id": b.broker_id, "host": address[0], "port": address[1],
                            "rack": b.rack})
        node_id = self.host.node_id
        if not any(b["node_id"] == node_id for b in out):
            own = (self.host.advertised if listener_name is None
                   else self._own_endpoint(listener_name))
            if own is not None:
                out.append({"node_id": node_id, "host": own[0], "port": own[1],
                            "rack": self.host.config.rack})
        return out

    def _own_endpoint(self, listener_name: str) -> tuple[str, int] | None:
        ep = self.host.advertised_endpoint(listener_name)
        return (ep.host, ep.port) if ep is not None else None

    def listed_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """The live brokers, and those fenced less than ``FENCED_BROKER_LISTED_MS`` ago (as
        this broker saw the fence)."""
        out = self.live_brokers(listener_name)
        now = _monotonic_ms()
        image = self.controller_client.image
        for b in image.brokers.values():
            if not b.fenced:
                self._fenced_since.pop(b.broker_id, None)
                continue
            since = self._fenced_since.setdefault(b.broker_id, now)
            address = (b.host, b.port) if listener_name is None else b.endpoint(listener_name)
            if (now - since < FENCED_BROKER_LISTED_MS and b.broker_id != self.host.node_id
                    and address is not None):
                out.append({"node_id": b.broker_id, "host": address[0], "port": address[1],
                            "rack": b.rack})
        return sorted(out, key=lambda b: b["node_id"])

    def fenced_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        out: list[BrokerInfo] = []
        for b in sorted(self.controller_client.image.brokers.values(),
                        key=lambda b: b.broker_id):
            address = (b.host, b.port) if listener_name is None else b.endpoint(listener_name)
            if b.fenced and address is not None and b.broker_id != self.host.node_id:
                out.append({"node_id": b.broker_id, "host": address[0], "port": address[1],
                            "rack": b.rack})
        return out

    def broker_address(self, node_id: int,
                       listener_name: str | None = None) -> tuple[str, int] | None:
        reg = self.controller_client.image.brokers.get(node_id)
        if reg is None or reg.fenced:
            return None
        return (reg.host, reg.port) if listener_name is None else reg.endpoint(listener_name)

    def _internal_partitions(self, key_type: CoordinatorType) -> int:
        """Partition count of a replicated internal topic. On first use it is created in the
        background, as Kafka does (RF = min(3, live brokers); ``__transaction_state``: min(its
        replication factor, live brokers), and ``transaction.state.log.min.isr`` as its
        min.insync.replicas): meanwhile 0 (the asker answers COORDINATOR_NOT_AVAILABLE and the
        client asks again)."""
        image = self.controller_client.image
        name = key_type.topic
        topic = image.topics.get(name)
        if topic is None:
            creating = self._creating.get(name)
            if creating is None or creating.done():
                self._creating[name] = asyncio.create_task(self._create_internal(key_type))
            return 0
        return len(topic.partitions)

    async def _create_internal(self, key_type: CoordinatorType) -> None:
        name = key_type.topic
        live = len(self.controller_client.image.acceptable_brokers())
        configs: Configs = {"cleanup.policy": "compact"}
        if key_type is CoordinatorType.GROUP:
            n = self.host.config.value(OFFSETS_TOPIC_NUM_PARTITIONS)
            rf = max(1, min(3, live))
        elif key_type is CoordinatorType.TRANSACTION:
            n = self.host.config.value(TRANSACTION_STATE_LOG_NUM_PARTITIONS)
            rf = max(1, min(self.host.config.value(TRANSACTION_STATE_LOG_REPLICATION_FACTOR), live))
            configs["min.insync.replicas"] = min(
                rf, self.host.config.value(TRANSACTION_STATE_LOG_MIN_ISR))
        else:  # KIP-932's share coordinator
            n = self.host.config.value(SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS)
            rf = max(1, min(self.host.config.value(SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR), live))
            configs["min.insync.replicas"] = min(
                rf, self.host.config.value(SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR))
        try:
            await self.controller_client.create_topic(name, n, rf, configs)
        except KafkaError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("broker %d could not create %s: %s", self.host.node_id, name, exc)

    def coordinator_for(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP
                        ) -> int:
        """The leader of the key's ``__consumer_offsets`` or ``__transaction_state``
        partition."""
        n = self._internal_partitions(key_type)
        if n == 0:
            return -1
        reg = self.controller_client.image.partition(key_type.topic,
                                                     coordinator_partition(key, n))
        return reg.leader if reg is not None else -1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="floodmark-cluster-broker")
    p.add_argument("--node-id", type=int, required=True,
                   help="Kafka's node.id: the broker id and, in combined mode, the voter id")
    p.add_argument("--controller", default=None, metavar="HOST:PORT[,HOST:PORT...]",
                   help="the controller, or every voter of a quorum (the broker follows the "
                        "active one); default: --controller-quorum-voters' addresses. Combined "
                        "mode without a quorum: where the controller listens")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--advertised-host", default=None,
                   help="the host clients and other brokers are told (default: --listen's)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="TOML file of Kafka-named settings (--set wins over it); the place for "
                        "secrets such as a JAAS entry, which a command line would show")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--controller-data-dir", default=None,
                   help="combined mode (process.roles=broker,controller): also run the "
                        "controller in this process, with its metadata log in this directory; "
                        "with --controller-quorum-voters it is the voter --node-id, listening "
                        "on its voter address")
    p.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help="serve Prometheus /metrics here (port 0: any free port)")
    add_metrics_security_arguments(p)
    add_controller_arguments(p)  # the controller process's own options (combined mode)
    p.add_argument("--log-level", default=os.environ.get("FLOODMARK_LOG_LEVEL", "INFO"))
    args = p.parse_args(argv)
    lifeline.hold()  # started by a test run or a benchmark: end with it
    combined = args.controller_data_dir is not None
    roles = "broker,controller" if combined else "broker"
    advertised = f"{args.advertised_host}:0" if args.advertised_host else None  # bound port
    try:
        config = BrokerConfig.load(data_dir=args.data_dir, listen=args.listen,
                                   advertised=advertised, config_file=args.config,
                                   overrides=[f"process.roles={roles}", *args.overrides],
                                   node_id=args.node_id)
        # A bad eligible.leader.replicas.version is one line, broker or combined.
        eligible_leader_replicas_enabled(config.value(ELIGIBLE_LEADER_REPLICAS_VERSION))
        # Combined: the controller takes this node's own min.insync.replicas and
        # eligible.leader.replicas.version unless its flags say otherwise.
        setup = controller_setup(args, args.node_id, config.get) if combined else None
        quorum_voters = ((setup.quorum[1] if setup.quorum is not None else {})
                         if setup is not None
                         else parse_voters(args.controller_quorum_voters)
                         if args.controller_quorum_voters else {})
        voters = voter_addresses(quorum_voters)
        controllers = args.controller or ",".join(voters)
        # Whose each address is, when the voter list says (a moved voter's entry is replaced
        # by the voter set's endpoint at once, not once it answered there).
        voter_ids = ({} if args.controller else
                     {v: format_host_port(*address) for v, address in quorum_voters.items()})
        if not controllers:
            raise ValueError("--controller HOST:PORT or --controller-quorum-voters is needed")
        own = setup.own_address if setup is not None else None
        # How this broker dials the controller (combined: the same channel its controller
        # serves).
        channel = (setup.security if setup is not None
                   else ChannelSecurity.from_settings(config.get))
        controller_listen = format_host_port(*own) if own is not None else controllers
        for address in controllers.split(","):
            parse_host_port(address, what="--controller")
        if setup is not None and setup.quorum is None:
            parse_host_port(controller_listen, what="--controller (combined mode: one address)")
        if args.metrics_listen:
            parse_host_port(args.metrics_listen, what="--metrics-listen")
        metrics_keystore, metrics_password = metrics_security(args)
    except ValueError as exc:  # a bad address or setting: one line
        print(f"floodmark broker {args.node_id}: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from floodmark.storage import DataDirLock, DataDirLockedError, lock_data_dirs

    locks: list[DataDirLock] = []
    controller: ControllerServer | None = None
    try:  # held until the process ends
        locks.extend(lock_data_dirs([args.data_dir, *map(str, config.log_dirs)]))
        if setup is not None:
            controller, lock = open_controller(setup, args.controller_data_dir)
            locks.append(lock)
    except (DataDirLockedError, OSError, ValueError) as exc:  # ValueError: an unreadable
        # quorum-state or meta.properties (refused rather than started without it)
        print(f"floodmark broker {args.node_id}: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover
        pass
    controller_client = ControllerClient(controllers, config.node_id, channel.client,
                                         voters=voter_ids)
    replicas = ReplicaManager(config.node_id, lambda: controller_client.image, now_ms,
                              config.inter_broker_security,
                              ReplicaFetchConfig.from_settings(config.get))
    try:  # a partition in two log dirs, an unreadable meta.properties: one line
        broker = Broker(config, ClusterMembership(controller_client), replicas)
    except ValueError as exc:
        print(f"floodmark broker {args.node_id}: {exc}", file=sys.stderr)
        return 2
    broker.open()
    if args.metrics_listen:
        from prometheus_client.registry import Collector

        from floodmark.broker.metrics import BrokerCollector
        from floodmark.broker.topic_metrics import BrokerTopicMetrics
        from floodmark.controller import ControllerCollector
        from floodmark.metrics import RequestMetrics, serve_metrics

        broker.request_metrics = RequestMetrics()
        broker.topic_metrics = BrokerTopicMetrics()
        collectors: list[Collector] = [broker.request_metrics, broker.topic_metrics,
                                       BrokerCollector(broker)]
        if controller is not None:
            collectors.append(ControllerCollector(controller))
        mhost, mport = serve_metrics(collectors, args.metrics_listen,
                                     keystore=metrics_keystore, password=metrics_password)
        scheme = "https" if metrics_keystore else "http"
        print(f"floodmark broker {args.node_id} metrics on {scheme}://{mhost}:{mport}/metrics",
              flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, broker.stop)
        controller_task = None
        if controller is not None:
            controller_task, actual = await start_controller(controller, controller_listen)
            if own is None:
                # The lone controller: learn its bound port, and call it directly (no socket
                # to itself). A voter is reached like any other, over its socket: the broker
                # follows whichever voter is active, and a write is answered once committed.
                controller_client.set_address(actual)
                controller_client.local = controller

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
