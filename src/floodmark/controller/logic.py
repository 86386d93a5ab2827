"""The controller's decisions, sans-I/O: registrations, heartbeats, fencing, elections, ISR
changes, controlled shutdown, preferred-leader rebalancing, topics and producer ids.

Every method takes ``now_ms`` where time matters and *emits* metadata records: each record is
checked (``record_check``, the same check every broker applies before it applies a record),
applied to the image at once (so the next decision sees it) and queued in ``pending`` with its
metadata offset; the I/O shell (``server.py``) appends the pending records to the metadata log
and makes them durable before answering anyone. Partition changes go through the core's pure
builder (``floodmark.replication.election``): clean election from the ISR, unclean only for
topics with ``unclean.leader.election.enable=true``, AlterPartition as compare-and-set on the
partition epoch with INELIGIBLE_REPLICA for fenced, shutting-down or stale-epoch members.

Rules chosen (and why):

* A broker is fenced when no heartbeat arrived for ``broker.session.timeout.ms``: it leaves every
  ISR (never emptying one: without eligible leader replicas the last member stays, and the
  partition waits for exactly that broker) and partitions it led get a new leader.
* A new incarnation of a broker (restart) gets a new broker epoch; the previous incarnation is
  fenced first, exactly as above, so a restarted leader never continues its old leader epoch and
  a restarted follower rejoins the ISR only through the leader's expansion rule (caught up to HW
  and to the leader-epoch start offset, KAFKA-7128; KIP-903's stale-epoch check).
* A broker that reports an unclean shutdown (it may have lost unflushed records) leaves every
  ISR and ELR it is in when ``unclean_shutdown_leaves_isr`` is set (KIP-966; Kafka applies it
  with eligible leader replicas). Off by default, as Kafka without ELR.
* ``new_incarnation_keeps_isr`` is the ZooKeeper-era rule the seed documents' stories assume: a
  restarted broker keeps its ISR membership (a restarted leader is re-elected with a new leader
  epoch). The simulator's historical scenarios turn it on; nothing that runs does.
* Controlled shutdown: the broker asks in its heartbeat; it becomes unacceptable, leadership moves
  to another ISR member, it leaves the ISRs (keeping one member), and the answer says whether it
  still leads anything. Preferred-leader rebalancing later moves leadership back to the first
  assigned replica when that one is in the ISR and acceptable.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from floodmark import features
from floodmark.constants import NO_LEADER
from floodmark.controller import delegation_tokens, placement, scram
from floodmark.controller.image import (
    MetadataImage,
    MetadataRecord,
    Reassignment,
    acl_to_record,
    quota_to_record,
    registration_to_record,
)
from floodmark.controller.record_check import check_record
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import check_partition_count, validate_topic_name
from floodmark.replication import (
    AlterPartitionRequest,
    ElectionKind,
    PartitionRegistration,
    apply_alter_partition,
    build_change,
    bump_leader_epoch,
    validate_alter_partition,
)
from floodmark.security import (
    AclBinding,
    AclBindingFilter,
    KafkaPrincipal,
    QuotaChanges,
    QuotaEntity,
    ScramUser,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    broker_session_timeout_ms: int = 9000
    unclean_leader_election_enable: bool = False  # cluster default; topics may override
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 10_000
    eligible_leader_replicas_enable: bool = False
    """KIP-966 eligible leader replicas in every election (``min.insync.replicas`` per topic)."""
    min_insync_replicas: int = 1  # cluster default, for ELR; topics may override
    unclean_shutdown_leaves_isr: bool = False
    new_incarnation_keeps_isr: bool = False
    """Historical (ZooKeeper-era) behaviour for the simulator's scenarios only; see above."""
    bootstrap_scram: tuple[ScramUser, ...] = ()
    """SCRAM users a brand-new metadata log starts with (Kafka's ``kafka-storage format
    --add-scram``): written with the cluster id, ignored once the cluster exists."""
    delegation_token_expiry_check_interval_ms: int = 3_600_000
    """How often expired delegation tokens are removed (Kafka's
    ``delegation.token.expiry.check.interval.ms``; brokers refuse an expired one at once)."""
    bootstrap_features: tuple[tuple[str, int], ...] = tuple(sorted(features.BOOTSTRAP.items()))
    """Feature levels a brand-new metadata log is finalized at (Kafka's ``kafka-storage
    format --feature``); a cluster made before a feature existed stays at level 0."""


def elr_config(enabled: bool, min_insync_replicas: int) -> dict[str, Any]:
    """The ``ControllerConfig`` fields of ``eligible.leader.replicas.version`` (KIP-966): ELR in
    every election together with its unclean-shutdown rule, as Kafka turns both on with the
    feature; and the cluster's min.insync.replicas they count against."""
    return {"eligible_leader_replicas_enable": enabled,
            "unclean_shutdown_leaves_isr": enabled,
            "min_insync_replicas": min_insync_replicas}


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    fenced: bool = False
    shutdown_ready: bool = False


@dataclass(frozen=True, slots=True)
class PartitionChangeNote:
    """One committed partition change and why: for logs and traces (not a metadata record)."""

    topic: str
    partition: int
    registration: PartitionRegistration
    why: str


@dataclass
class ElectionCounts:
    """Kafka's ControllerStats LeaderElectionRateAndTimeMs and UncleanLeaderElectionsPerSec, as
    counters that only go up: one per leader election this process decided (a partition change
    giving an existing partition a leader at a new leader epoch; a partition's first leader at
    creation is not an election). The controller server keeps one for its whole life and hands
    it to each ``ControllerLogic`` it activates, so a lost and regained leadership (a new logic)
    does not reset it; a decision rolled back afterwards (never committed) stays counted."""

    leader_elections: int = 0
    unclean_leader_elections: int = 0


class ControllerLogic:
    def __init__(self, image: MetadataImage, config: ControllerConfig,
                 logger: logging.Logger | None = None,
                 elections: ElectionCounts | None = None) -> None:
        self.image = image
        self.config = config
        self.log = logger or log
        self.on_change: Callable[[PartitionChangeNote], None] | None = None
        self.pending: list[tuple[int, MetadataRecord]] = []
        self.last_heartbeat_ms: dict[int, int] = {}
        # broker id -> the ids of its failed log directories, as its last heartbeat said
        self.offline_log_dirs: dict[int, frozenset[str]] = {}
        self._last_rebalance_ms = 0
        self._last_token_sweep_ms = 0
        self._last_tick_ms = 0
        self.elections = elections if elections is not None else ElectionCounts()

    @property
    def unclean_elections(self) -> int:
        return self.elections.unclean_leader_elections

    # -- records -------------------------------------------------------------------------------
    def emit(self, rec: MetadataRecord) -> int:
        """The one way a decision becomes a record: checked (``record_check``: the setting
        registry, the metadata module's names, coherent registrations), applied to the image,
        queued for the log. A record that does not pass raises KafkaError before anything
        changes: the controller never writes a record a broker cannot apply."""
        check_record(rec)
        offset = self.image.next_offset
        self.image.apply(rec)
        self.image.next_offset = offset + 1
        self.pending.append((offset, rec))
        return offset

    def take_pending(self) -> list[tuple[int, MetadataRecord]]:
        out, self.pending = self.pending, []
        return out

    def bootstrap(self) -> None:
        """A brand-new metadata log starts with the cluster id (and the bootstrap SCRAM
        users, salted here: their passwords are never written)."""
        if not self.image.cluster_id:
            self.emit({"type": "cluster_id", "cluster_id": uuid.uuid4().hex[:22]})
            for name, level in self.config.bootstrap_features:
                self.emit({"type": "feature_level", "name": name, "level": level})
            for user in self.config.bootstrap_scram:
                self.emit(scram.credential_record(user.name, user.credential()))
                self.log.info("bootstrap SCRAM credential for user %s (%s)", user.name,
                              user.mechanism.mechanism_name)
        self._elr_safety_config()

    def _elr_safety_config(self) -> None:
        """With eligible leader replicas on, the cluster's min.insync.replicas is a dynamic
        cluster-wide config, written once by the active controller from its own setting if the
        metadata has none (as Kafka 4.1's controller does at activation): every broker and the
        ELR then count against one value, and DescribeConfigs reports it as
        DYNAMIC_DEFAULT_BROKER_CONFIG, as Kafka's does."""
        name = "min.insync.replicas"
        if (not self.config.eligible_leader_replicas_enable
                or self.image.cluster_default(name, None) is not None):
            return
        configs = dict(self.image.broker_configs.get("", {}))
        configs[name] = str(self.config.min_insync_replicas)
        self.emit({"type": "broker_configs", "resource": "", "configs": configs})

    def bootstrap_topic(self, name: str, replicas: list[tuple[int, ...]],
                        configs: dict[str, Any]) -> None:
        """A topic in the bootstrap metadata (the simulator's starting state): every replica in
        the ISR, the first one leading at leader epoch 0, before any broker has registered."""
        if name in self.image.topics:
            return
        self.emit({"type": "topic", "name": name, "topic_id": str(uuid.uuid4()),
                   "configs": dict(configs)})
        for i, assigned in enumerate(replicas):
            reg = PartitionRegistration(replicas=assigned, isr=assigned, leader=assigned[0],
                                        leader_epoch=0, partition_epoch=0)
            self._commit_change(name, i, reg, "bootstrap")

    def start(self, now_ms: int) -> None:
        """After a controller (re)start: every registered broker gets a full session to
        heartbeat before it can be fenced."""
        for bid in self.image.brokers:
            self.last_heartbeat_ms[bid] = now_ms
        self._last_rebalance_ms = now_ms

    # -- partition changes ---------------------------------------------------------------------
    def _commit_change(self, topic: str, partition: int, reg: PartitionRegistration,
                       why: str) -> None:
        old = self.image.partition(topic, partition)
        self.emit(registration_to_record(topic, partition, reg))
        if old is not None and reg.leader != NO_LEADER and reg.leader_epoch > old.leader_epoch:
            self.elections.leader_elections += 1
        self.log.info("partition %s-%d leader=%d leader_epoch=%d partition_epoch=%d isr=%s (%s; was "
                 "leader=%s isr=%s)", topic, partition, reg.leader, reg.leader_epoch,
                 reg.partition_epoch, list(reg.isr), why,
                 old.leader if old else None, list(old.isr) if old else None)
        if self.on_change is not None:
            self.on_change(PartitionChangeNote(topic, partition, reg, why))

    def _min_isr_for_elr(self, topic: str) -> int | None:
        """The topic's effective min.insync.replicas (its own, else the cluster's dynamic
        default, else the controller's), at most its replication factor as the leader counts
        it for the HW (Kafka's ``getTopicEffectiveMinIsr``); None without ELR."""
        if not self.config.eligible_leader_replicas_enable:
            return None
        default = self.image.cluster_default("min.insync.replicas",
                                             self.config.min_insync_replicas)
        timage = self.image.topics[topic]
        value = int(timage.configs.get("min.insync.replicas", default))
        replication_factor = max((len(p.replicas) for p in timage.partitions.values()),
                                 default=value)
        return max(1, min(value, replication_factor))

    def _min_isr_changed(self, topics: list[str], why: str) -> None:
        """A new min.insync.replicas: the ELR is recomputed (an ISR now at min ISR clears it:
        the HW may move without its members from now on)."""
        if not self.config.eligible_leader_replicas_enable:
            return
        for topic in topics:
            timage = self.image.topics.get(topic)
            if timage is None:
                continue
            for partition, reg in sorted(timage.partitions.items()):
                if reg.elr or reg.last_known_elr:
                    self._reelect(topic, partition, why)

    def _reelect(self, topic: str, partition: int, why: str,
                 target_isr: tuple[int, ...] | None = None,
                 unclean_shutdown: tuple[int, ...] = ()) -> None:
        timage = self.image.topics[topic]
        current = timage.partitions[partition]
        change = build_change(
            current,
            target_isr=target_isr,
            acceptable=self.image.acceptable_brokers(),
            unclean_leader_election_enable=timage.unclean_leader_election_enable(
                self._unclean_default()),
            min_insync_replicas=self._min_isr_for_elr(topic),
            unclean_shutdown=unclean_shutdown,
        )
        if change is None:
            return
        if change.election is ElectionKind.UNCLEAN:
            self.elections.unclean_leader_elections += 1
            why += " (UNCLEAN election: records the old ISR committed may be lost)"
            self.log.warning("partition %s-%d unclean election of %d leader_epoch=%d", topic,
                        partition, change.registration.leader, change.registration.leader_epoch)
        self._commit_change(topic, partition, change.registration, why)

    def _remove_from_isrs(self, broker_id: int, why: str, *, unclean_shutdown: bool = False
                          ) -> None:
        """``handleBrokerFenced`` / controlled shutdown: leave every ISR, lose leaderships.
        After an unclean shutdown (``handleBrokerUncleanShutdown``) the ELR is left too."""
        for topic, timage in list(self.image.topics.items()):
            for partition, reg in sorted(timage.partitions.items()):
                if (broker_id in reg.isr or reg.leader == broker_id
                        or (unclean_shutdown and broker_id in reg.elr)):
                    isr = tuple(r for r in reg.isr if r != broker_id)
                    self._reelect(topic, partition, why, isr,
                                  (broker_id,) if unclean_shutdown else ())

    def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                assignments: Mapping[str, Collection[tuple[str, int]]]
                                ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """AssignReplicasToDirs (API 73, KIP-858): the broker says which of its log
        directories (by directory id) holds each of its replicas. Each change is a partition
        record with its ``directories``; the registration is unchanged (the directory is not
        replication state: leader, ISR and epochs stay). A replica assigned to a directory the
        broker's heartbeat reported failed goes offline at once. Answers the request's error
        (STALE_BROKER_EPOCH) and one error per partition: UNKNOWN_TOPIC_OR_PARTITION, or
        NOT_LEADER_OR_FOLLOWER for a partition the broker is no replica of."""
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        offline: list[tuple[str, int]] = []
        failed_dirs = self.offline_log_dirs.get(broker_id, frozenset())
        for directory_id, keys in sorted(assignments.items()):
            for topic, partition in sorted(keys):
                timage = self.image.topics.get(topic)
                part = timage.partitions.get(partition) if timage is not None else None
                if timage is None or part is None:
                    errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if broker_id not in part.replicas:
                    errors[(topic, partition)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                errors[(topic, partition)] = ErrorCode.NONE
                if directory_id in failed_dirs:
                    offline.append((topic, partition))
                if timage.directories.get(partition, {}).get(broker_id) == directory_id:
                    continue  # already so (a repeated request)
                directories = timage.directories_of(partition)
                directories[part.replicas.index(broker_id)] = directory_id
                self.emit({**registration_to_record(topic, partition, part),
                           "directories": directories})
                self.log.info("partition %s-%d: broker %d holds its replica in log dir %s",
                              topic, partition, broker_id, directory_id)
        if offline:
            self._take_replicas_offline(broker_id, offline)
        return ErrorCode.NONE, errors

    def _replicas_in_dirs(self, broker_id: int, dirs: Collection[str]) -> list[tuple[str, int]]:
        """The broker's replicas the metadata places in one of ``dirs``."""
        return [(name, p) for name, t in self.image.topics.items()
                for p, assigned in t.directories.items() if assigned.get(broker_id) in dirs]

    def _take_replicas_offline(self, broker_id: int,
                               keys: Collection[tuple[str, int]]) -> None:
        """The broker's replicas in a failed log directory (its heartbeat's offline log dirs,
        KIP-858): each leaves its ISR and, if it led, its leadership, as for a fenced broker
        but only for those partitions. Every heartbeat repeats the list; a partition that no
        longer names the broker in its ISR or as leader changes nothing."""
        for topic, partition in sorted(keys):
            timage = self.image.topics.get(topic)
            reg = timage.partitions.get(partition) if timage is not None else None
            if reg is None or (broker_id not in reg.isr and reg.leader != broker_id):
                continue
            isr = tuple(r for r in reg.isr if r != broker_id)
            self._reelect(topic, partition, f"broker {broker_id}'s log dir holding the replica "
                          f"failed", isr)

    def fence_broker(self, broker_id: int, why: str) -> None:
        """Not acceptable as leader or ISR member until it heartbeats again."""
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.fenced:
            return
        self.emit({"type": "fence_broker", "broker_id": broker_id,
                   "broker_epoch": reg.broker_epoch})
        self._remove_from_isrs(broker_id, why)

    def unfence_broker(self, broker_id: int) -> None:
        reg = self.image.brokers.get(broker_id)
        if reg is None or not (reg.fenced or reg.in_controlled_shutdown):
            return
        self.emit({"type": "unfence_broker", "broker_id": broker_id,
                   "broker_epoch": reg.broker_epoch})
        self.log.info("unfenced broker %d broker_epoch=%d", broker_id, reg.broker_epoch)
        self._elect_leaderless(f"broker {broker_id} unfenced")

    def _elect_leaderless(self, why: str) -> None:
        for topic, timage in list(self.image.topics.items()):
            for partition, reg in sorted(timage.partitions.items()):
                if reg.leader == NO_LEADER:
                    self._reelect(topic, partition, why)

    # -- brokers ---------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, host: str, port: int, incarnation: str,
                        now_ms: int, *, clean_shutdown: bool = True,
                        listeners: list[dict[str, object]] | None = None,
                        rack: str | None = None) -> int:
        """Returns the broker epoch. A retried registration of a known incarnation gets the same
        epoch; a new incarnation fences the previous one first (it leaves every ISR), unless
        ``new_incarnation_keeps_isr``; ``clean_shutdown=False`` reports a restart that may have
        lost unflushed records. ``rack``: its ``broker.rack`` (None or "": none)."""
        old = self.image.brokers.get(broker_id)
        if old is not None and old.incarnation == incarnation:
            self.last_heartbeat_ms[broker_id] = now_ms
            return old.broker_epoch
        keeps_isr = self.config.new_incarnation_keeps_isr
        if old is not None and not old.fenced and not keeps_isr:
            self.fence_broker(broker_id, f"broker {broker_id} restarted (new incarnation)")
        epoch = self.image.next_offset
        record: MetadataRecord = {"type": "register_broker", "broker_id": broker_id,
                                  "broker_epoch": epoch, "host": host, "port": port,
                                  "incarnation": incarnation}
        if listeners:  # a broker with listener settings: every listener it advertises
            record["listeners"] = listeners
        if rack:
            record["rack"] = rack
        self.emit(record)
        self.last_heartbeat_ms[broker_id] = now_ms
        self.log.info("registered broker %d broker_epoch=%d at %s:%d rack=%s", broker_id, epoch,
                      host, port, rack or "none")
        if not clean_shutdown and self.config.unclean_shutdown_leaves_isr:
            self._remove_from_isrs(broker_id, f"broker {broker_id} restarted after an unclean "
                                   f"shutdown", unclean_shutdown=True)
        elif old is not None and keeps_isr:
            # A new incarnation never continues its predecessor's leader epoch.
            for topic, timage in list(self.image.topics.items()):
                for partition, reg in sorted(timage.partitions.items()):
                    if reg.leader == broker_id:
                        self._commit_change(topic, partition, bump_leader_epoch(reg),
                                            f"broker {broker_id} re-registered as leader")
        self._elect_leaderless(f"broker {broker_id} registered")
        return epoch

    def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (Kafka's ``ReplicationControlManager.unregisterBroker``): the
        registration goes, after its broker left every ISR and ELR it was in (leaderships
        move, as for an unclean shutdown). Kafka refuses only an id with no registration
        (BROKER_ID_NOT_REGISTERED); a broker still running finds its epoch stale at its next
        heartbeat and registers again."""
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                             f"Broker ID {broker_id} is not currently registered")
        self._remove_from_isrs(broker_id, f"broker {broker_id} unregistered",
                               unclean_shutdown=True)
        self.emit({"type": "unregister_broker", "broker_id": broker_id,
                   "broker_epoch": reg.broker_epoch})
        self.last_heartbeat_ms.pop(broker_id, None)
        self.offline_log_dirs.pop(broker_id, None)
        self.log.info("unregistered broker %d broker_epoch=%d (%s)", broker_id,
                      reg.broker_epoch, "fenced" if reg.fenced else "in controlled shutdown"
                      if reg.in_controlled_shutdown else "active: it registers again at its "
                      "next heartbeat")

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int,
                  want_shutdown: bool = False,
                  offline_replicas: Collection[tuple[str, int]] = (),
                  offline_log_dirs: Collection[str] = ()) -> HeartbeatAnswer:
        """``offline_log_dirs``: the ids of the broker's failed log directories; the replicas
        the metadata places there (``directories``) go offline with ``offline_replicas`` (the
        broker's own list of the replicas it could not assign yet)."""
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.broker_epoch != broker_epoch:
            return HeartbeatAnswer(ErrorCode.STALE_BROKER_EPOCH, fenced=True)
        self.last_heartbeat_ms[broker_id] = now_ms
        if offline_log_dirs:  # KIP-858: their replicas, as the metadata's directories say
            self.offline_log_dirs[broker_id] = frozenset(offline_log_dirs)
            offline_replicas = sorted({*offline_replicas,
                                       *self._replicas_in_dirs(broker_id, offline_log_dirs)})
        else:
            self.offline_log_dirs.pop(broker_id, None)
        if offline_replicas:
            self._take_replicas_offline(broker_id, offline_replicas)
        if want_shutdown:
            if not reg.in_controlled_shutdown:
                self.emit({"type": "broker_shutdown", "broker_id": broker_id,
                           "broker_epoch": broker_epoch})
                self._remove_from_isrs(broker_id, f"broker {broker_id} controlled shutdown")
            leads = any(p.leader == broker_id for t in self.image.topics.values()
                        for p in t.partitions.values())
            return HeartbeatAnswer(ErrorCode.NONE, shutdown_ready=not leads)
        self.unfence_broker(broker_id)
        return HeartbeatAnswer(ErrorCode.NONE)

    def tick(self, now_ms: int) -> None:
        """Session expiry, then (periodically) preferred-leader rebalancing.

        If the controller itself was not running for a while (SIGSTOP, a long GC-like stall,
        a starved machine), the silence is its own, not the brokers': everyone gets a fresh
        session instead of being fenced all at once."""
        timeout = self.config.broker_session_timeout_ms
        if self._last_tick_ms and now_ms - self._last_tick_ms > timeout // 2:
            self.log.warning("controller did not run for %d ms: restarting every broker session",
                        now_ms - self._last_tick_ms)
            for bid in self.last_heartbeat_ms:
                self.last_heartbeat_ms[bid] = now_ms
        self._last_tick_ms = now_ms
        for bid, reg in sorted(self.image.brokers.items()):
            if reg.fenced:
                continue
            last = self.last_heartbeat_ms.get(bid, now_ms)
            if now_ms - last > timeout:
                self.log.warning("broker %d broker_epoch=%d missed heartbeats for %d ms: fencing",
                            bid, reg.broker_epoch, now_ms - last)
                self.fence_broker(bid, f"broker {bid} session expired")
        if (self.image.delegation_tokens and now_ms - self._last_token_sweep_ms
                >= self.config.delegation_token_expiry_check_interval_ms):
            self._last_token_sweep_ms = now_ms
            self.sweep_delegation_tokens(now_ms)
        if (self.config.auto_leader_rebalance_enable
                and now_ms - self._last_rebalance_ms >= self.config.leader_imbalance_check_interval_ms):
            self._last_rebalance_ms = now_ms
            self.rebalance_preferred_leaders()

    def _preferred_change(self, reg: PartitionRegistration) -> PartitionRegistration | None:
        """The first assigned replica leads again, when it is in the ISR and acceptable."""
        preferred = reg.replicas[0] if reg.replicas else NO_LEADER
        if (reg.leader == preferred or preferred not in reg.isr
                or preferred not in self.image.acceptable_brokers()):
            return None
        return PartitionRegistration(
            replicas=reg.replicas, isr=reg.isr, leader=preferred,
            leader_epoch=reg.leader_epoch + 1, partition_epoch=reg.partition_epoch + 1,
            leader_recovery_state=reg.leader_recovery_state, elr=reg.elr)

    def rebalance_preferred_leaders(self) -> int:
        """PREFERRED election: the first assigned replica leads again when it is in the ISR and
        acceptable. Returns the number of partitions moved."""
        moved = 0
        for topic, timage in list(self.image.topics.items()):
            for partition, reg in sorted(timage.partitions.items()):
                if (topic, partition) in self.image.reassignments:
                    continue  # moving: the leader changes once, when the move completes
                new = self._preferred_change(reg)
                if new is not None:
                    self._commit_change(topic, partition, new, "preferred leader election")
                    moved += 1
        return moved

    def elect_leader(self, topic: str, partition: int, unclean: bool) -> tuple[ErrorCode, str]:
        """ElectLeaders (KIP-460) for one partition, an operator's explicit choice.

        PREFERRED: the first assigned replica, when it is in the ISR and acceptable. UNCLEAN:
        only for a partition without a leader, any acceptable replica even outside the ISR (the
        seed documents' unclean election: the new leader may lack records the old ISR had
        committed, and the others truncate to its log). Returns (error, message)."""
        reg = self.image.partition(topic, partition)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{partition}"
        if not unclean:
            if reg.replicas and reg.leader == reg.replicas[0]:
                return ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads already"
            new = self._preferred_change(reg)
            if new is None:
                return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"preferred replica {reg.replicas[0] if reg.replicas else -1} is not "
                        f"an acceptable ISR member")
            self._commit_change(topic, partition, new, "preferred leader election (requested)")
            return ErrorCode.NONE, ""
        if reg.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, f"broker {reg.leader} leads"
        change = build_change(reg, acceptable=self.image.acceptable_brokers(),
                              unclean_leader_election_enable=True,
                              min_insync_replicas=self._min_isr_for_elr(topic))
        if change is None or change.registration.leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no acceptable replica"
        lost_isr = [r for r in reg.isr if r != change.registration.leader]
        if change.election is ElectionKind.UNCLEAN:
            self.elections.unclean_leader_elections += 1
        self._commit_change(topic, partition, change.registration,
                            "UNCLEAN election requested by an operator")
        message = (f"broker {change.registration.leader} leads at leader epoch "
                   f"{change.registration.leader_epoch}; records committed by the old ISR "
                   f"{list(reg.isr)} beyond its log end are lost, and "
                   f"{lost_isr or 'the other replicas'} truncate to its log")
        self.log.warning("partition %s-%d: %s", topic, partition, message)
        return ErrorCode.NONE, message

    def move_leadership(self, topic: str, partition: int, why: str) -> bool:
        """A graceful leader change to the next acceptable ISR member (what a controlled
        shutdown of the leader does to one partition); False when there is none."""
        reg = self.image.partition(topic, partition)
        if reg is None:
            return False
        acceptable = self.image.acceptable_brokers()
        candidates = [r for r in reg.isr if r != reg.leader and r in acceptable]
        if not candidates:
            return False
        new = PartitionRegistration(
            replicas=reg.replicas, isr=reg.isr, leader=candidates[0],
            leader_epoch=reg.leader_epoch + 1, partition_epoch=reg.partition_epoch + 1,
            leader_recovery_state=reg.leader_recovery_state, elr=reg.elr)
        self._commit_change(topic, partition, new, why)
        return True

    # -- AlterPartition ------------------------------------------------------------------------
    def alter_partition(self, topic: str, partition: int, request: AlterPartitionRequest
                        ) -> tuple[ErrorCode, PartitionRegistration | None]:
        current = self.image.partition(topic, partition)
        if current is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        error = validate_alter_partition(
            current, request,
            registered_broker_epochs=self.image.broker_epochs(),
            acceptable=self.image.acceptable_brokers(),
        )
        if error is not ErrorCode.NONE:
            self.log.info("partition %s-%d AlterPartition from %d leader_epoch=%d isr=%s rejected: %s",
                     topic, partition, request.broker_id, request.leader_epoch,
                     list(request.new_isr), error.name)
            return error, current if error is ErrorCode.INELIGIBLE_REPLICA else None
        new = apply_alter_partition(current, request,
                                    min_insync_replicas=self._min_isr_for_elr(topic))
        self._commit_change(topic, partition, new, f"AlterPartition from {request.broker_id}")
        self._maybe_complete_reassignment(topic, partition)
        return ErrorCode.NONE, new

    # -- reassignment (KIP-455) ----------------------------------------------------------------
    def alter_partition_reassignment(self, topic: str, partition: int,
                                     target: tuple[int, ...] | None) -> tuple[ErrorCode, str]:
        """Start moving a partition to ``target`` (replacing a reassignment in progress), or
        cancel the one in progress (``target`` None: back to the original replicas).

        The move is the ISR-expand story of the reference documents: the replicas become the
        target followed by the ones to remove; each added replica opens the partition as a
        follower, catches up from the leader and joins the ISR through the leader's ordinary
        AlterPartition. When every target replica is in the ISR the replicas become the target,
        the ISR loses the removed ones, leadership moves (new leader epoch) if the leader was
        removed, and the removed brokers delete their copies when they see the record."""
        reg = self.image.partition(topic, partition)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{partition}"
        ongoing = self.image.reassignments.get((topic, partition))
        original = reg.replicas if ongoing is None else ongoing.original
        if target is None:
            if ongoing is None:
                return (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"no reassignment of {topic}-{partition} is in progress")
            return self._revert_reassignment(topic, partition, reg, original)
        if not target or len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"replicas {list(target)} are empty or repeat a broker")
        unknown = [b for b in target if b not in self.image.brokers]
        if unknown:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"broker(s) {unknown} are not registered")
        if ongoing is None and target == reg.replicas:
            return ErrorCode.NONE, ""  # already there: nothing to move
        adding = tuple(b for b in target if b not in original)
        removing = tuple(b for b in original if b not in target)
        replicas = target + removing
        isr = tuple(r for r in replicas if r in reg.isr)
        if replicas != reg.replicas or isr != reg.isr:
            self._commit_change(topic, partition, replace(
                reg, replicas=replicas, isr=isr, partition_epoch=reg.partition_epoch + 1),
                f"reassignment to {list(target)} started (adding {list(adding)}, removing "
                f"{list(removing)})")
        self.emit({"type": "reassignment", "topic": topic, "partition": partition,
                   "target": list(target), "adding": list(adding), "removing": list(removing),
                   "original": list(original)})
        self._maybe_complete_reassignment(topic, partition)
        return ErrorCode.NONE, ""

    def _revert_reassignment(self, topic: str, partition: int, reg: PartitionRegistration,
                             original: tuple[int, ...]) -> tuple[ErrorCode, str]:
        isr = tuple(r for r in original if r in reg.isr)
        if not isr:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"cannot cancel: no replica of the original {list(original)} is in sync")
        self._finish_reassignment(topic, partition, reg, original, isr,
                                  f"reassignment cancelled, back to {list(original)}")
        return ErrorCode.NONE, ""

    def _maybe_complete_reassignment(self, topic: str, partition: int) -> None:
        ongoing = self.image.reassignments.get((topic, partition))
        reg = self.image.partition(topic, partition)
        if ongoing is None or reg is None or not set(ongoing.target) <= set(reg.isr):
            return
        isr = tuple(r for r in ongoing.target if r in reg.isr)
        self._finish_reassignment(topic, partition, reg, ongoing.target, isr,
                                  f"reassignment to {list(ongoing.target)} completed")

    def _finish_reassignment(self, topic: str, partition: int, reg: PartitionRegistration,
                             replicas: tuple[int, ...], isr: tuple[int, ...], why: str) -> None:
        """The replicas become ``replicas`` (ISR ``isr``, a subset); a leader that is not among
        them hands over to the first acceptable ISR member, at a new leader epoch."""
        leader, leader_epoch = reg.leader, reg.leader_epoch
        if leader not in isr:
            acceptable = self.image.acceptable_brokers()
            leader = next((r for r in isr if r in acceptable), NO_LEADER)
            leader_epoch += 1
        self._commit_change(topic, partition, replace(
            reg, replicas=replicas, isr=isr, leader=leader, leader_epoch=leader_epoch,
            partition_epoch=reg.partition_epoch + 1,
            elr=tuple(r for r in reg.elr if r in replicas), last_known_elr=()), why)
        self.emit({"type": "reassignment", "topic": topic, "partition": partition,
                   "target": None, "adding": [], "removing": []})

    def reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self.image.reassignments

    # -- topics ----------------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, Any], *, validate_only: bool = False,
                     assignments: list[tuple[int, ...]] | None = None) -> None:
        """A new topic: replicas placed over the acceptable brokers' racks and brokers
        (``controller.placement``), or as the operator assigned them (``assignments[i]``:
        partition i's replicas, preferred first)."""
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        placed: list[tuple[int, ...]] = []
        if assignments is not None:
            self._check_assignments(assignments, None)
            num_partitions = len(assignments)
        check_partition_count(self._partition_total(), num_partitions)
        if assignments is None:
            placed = self._place(name, 0, num_partitions, replication_factor)
        topic = {"type": "topic", "name": name, "topic_id": str(uuid.uuid4()),
                 "configs": dict(configs)}
        check_record(topic)  # validate_only answers what the real request would
        if validate_only:
            return
        self.emit(topic)
        if assignments is not None:
            self._add_assigned(name, 0, assignments)
        else:
            self._add_placed(name, 0, placed)

    def _check_assignments(self, assignments: list[tuple[int, ...]],
                           replication_factor: int | None) -> None:
        """Kafka's rules for a manual assignment: every partition has replicas, no broker twice,
        one replication factor, only registered brokers, at least one of them acceptable."""
        rf = replication_factor if replication_factor is not None else (
            len(assignments[0]) if assignments else 0)
        acceptable = self.image.acceptable_brokers()
        for i, replicas in enumerate(assignments):
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {i}: replicas {list(replicas)} are empty or repeat "
                                 f"a broker")
            if len(replicas) != rf:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {i}: {len(replicas)} replicas, the topic has {rf}")
            unknown = [b for b in replicas if b not in self.image.brokers]
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {i}: broker(s) {unknown} are not registered")
            if not any(b in acceptable for b in replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {i}: every assigned broker is fenced or shutting "
                                 f"down")

    def _add_assigned(self, name: str, first: int, assignments: list[tuple[int, ...]]) -> None:
        acceptable = self.image.acceptable_brokers()
        for i, replicas in enumerate(assignments, start=first):
            isr = tuple(r for r in replicas if r in acceptable)
            reg = PartitionRegistration(replicas=tuple(replicas), isr=isr, leader=isr[0],
                                        leader_epoch=0, partition_epoch=0)
            self._commit_change(name, i, reg, "created (assigned)")

    def _place(self, name: str, first: int, count: int, replication_factor: int
               ) -> list[tuple[int, ...]]:
        """Replicas of partitions ``first``.. of topic ``name`` over the acceptable brokers,
        rack-aware (``controller.placement``); INVALID_REPLICATION_FACTOR when it cannot be."""
        racks = self.image.acceptable_racks()
        if not racks:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "no broker is available (every registered broker is fenced or "
                             "shutting down)")
        placed = placement.place_replicas(racks, first, count, replication_factor,
                                          placement.topic_start(name))
        unnamed = placement.mixed_racks(racks)
        if unnamed:
            self.log.warning("topic %s: broker(s) %s have no broker.rack while others have "
                             "one; they count as one rack of their own", name, unnamed)
        return placed

    def _add_placed(self, name: str, first: int, placed: list[tuple[int, ...]]) -> None:
        for i, replicas in enumerate(placed, start=first):
            reg = PartitionRegistration(replicas=replicas, isr=replicas, leader=replicas[0],
                                        leader_epoch=0, partition_epoch=0)
            self._commit_change(name, i, reg, "created")

    def alter_topic_configs(self, name: str, configs: dict[str, Any]) -> None:
        """Replace a topic's configs (the broker validated them against the setting registry;
        brokers apply the new set to the replicas they hold when they see the record)."""
        if name not in self.image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        before = self.image.topics[name].configs.get("min.insync.replicas")
        self.emit({"type": "topic_configs", "name": name, "configs": dict(configs)})
        if configs.get("min.insync.replicas") != before:
            self._min_isr_changed([name], f"topic {name} min.insync.replicas changed")

    def _unclean_default(self) -> bool:
        """The cluster's unclean.leader.election.enable: the dynamic cluster-wide default
        when one is set (KIP-226), else the controller's own setting."""
        value = self.image.cluster_default("unclean.leader.election.enable",
                                           self.config.unclean_leader_election_enable)
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"

    def alter_group_configs(self, group: str, configs: dict[str, Any]) -> None:
        """Replace a group's configs (ConfigResource type GROUP) with ``configs``, which the
        broker checked against its bounds (``floodmark.group_configs``); an empty set removes
        them. Kafka refuses the default group resource ("")."""
        if not group:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        self.emit({"type": "group_configs", "name": group, "configs": dict(configs)})

    def alter_broker_configs(self, resource: str, configs: dict[str, Any]) -> None:
        """Replace the dynamic configs of one broker (``resource`` = its id) or of the
        cluster-wide default (""); the broker validated them against the setting registry.
        Brokers apply the set when they see the record; the controller's own elections use the
        default's ``unclean.leader.election.enable`` from then on (an election it now allows
        happens at once, as Kafka's controller does on this change)."""
        if resource and not (resource.isdigit() and int(resource) >= 0):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"broker resource name must be a broker id or empty, not "
                             f"{resource!r}")
        if (resource and "min.insync.replicas" in configs
                and self.config.eligible_leader_replicas_enable):
            # The ELR counts on every leader freezing its HW below the same min ISR.
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             "broker-level min.insync.replicas cannot be set while eligible "
                             "leader replicas are enabled (KIP-966): set it for the cluster "
                             "or the topic")
        before = self.image.cluster_default("min.insync.replicas", None)
        self.emit({"type": "broker_configs", "resource": resource, "configs": dict(configs)})
        if resource == "" and self.image.cluster_default("min.insync.replicas", None) != before:
            self._min_isr_changed(sorted(self.image.topics),
                                  "the cluster's min.insync.replicas changed")
        if resource == "" and self._unclean_default():
            self._elect_leaderless("unclean.leader.election.enable set for the cluster")

    def alter_scram_credentials(self, deletions: Sequence[scram.Deletion],
                                upsertions: Sequence[scram.Upsertion]
                                ) -> list[scram.AlterResult]:
        """AlterUserScramCredentials (KIP-554): each user's changes together or not at all."""
        records, results = scram.plan_alterations(self.image.scram_credentials, deletions,
                                                  upsertions)
        for rec in records:
            self.emit(rec)
        for r in results:
            if r.error is ErrorCode.NONE:
                self.log.info("SCRAM credentials of user %s altered", r.user)
        return results

    # -- delegation tokens (KIP-48: ``delegation_tokens.py``) ------------------------------------
    def create_delegation_token(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                                renewers: Sequence[KafkaPrincipal], max_lifetime_ms: int,
                                settings: delegation_tokens.TokenSettings, now_ms: int
                                ) -> delegation_tokens.Decision:
        decision = delegation_tokens.create(owner, requester, renewers, max_lifetime_ms,
                                            settings, now_ms)
        return self._token_decision(decision, "created")

    def renew_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                               renew_period_ms: int, settings: delegation_tokens.TokenSettings,
                               now_ms: int) -> delegation_tokens.Decision:
        decision = delegation_tokens.renew(self.image.delegation_tokens.get(token_id),
                                           principal, renew_period_ms, settings, now_ms)
        return self._token_decision(decision, "renewed")

    def expire_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                expiry_period_ms: int, now_ms: int
                                ) -> delegation_tokens.Decision:
        decision = delegation_tokens.expire(self.image.delegation_tokens.get(token_id),
                                            principal, expiry_period_ms, now_ms)
        return self._token_decision(decision, "expired")

    def _token_decision(self, decision: delegation_tokens.Decision, what: str
                        ) -> delegation_tokens.Decision:
        for rec in decision.records:
            self.emit(rec)
            self.log.info("delegation token %s %s", rec["token_id"], what)
        return decision

    def sweep_delegation_tokens(self, now_ms: int) -> None:
        """Tokens past their expiry or max time are removed (Kafka's periodic sweep)."""
        for rec in delegation_tokens.sweep(self.image.delegation_tokens, now_ms):
            self.emit(rec)
            self.log.info("delegation token %s removed: past its expiry", rec["token_id"])

    def delete_topic(self, name: str) -> None:
        if name not in self.image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        self.emit({"type": "remove_topic", "name": name})

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignments: list[tuple[int, ...]] | None = None) -> None:
        timage = self.image.topics.get(name)
        if timage is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        current = len(timage.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r} has {current} partitions; new count {count} "
                             f"must be larger")
        check_partition_count(self._partition_total(), count - current)
        rf = len(timage.partitions[0].replicas)
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"{len(assignments)} assignments for {count - current} new "
                                 f"partition(s)")
            self._check_assignments(assignments, rf)
            if not validate_only:
                self._add_assigned(name, current, assignments)
            return
        placed = self._place(name, current, count - current, rf)
        if not validate_only:
            self._add_placed(name, current, placed)

    def _partition_total(self) -> int:
        return sum(len(t.partitions) for t in self.image.topics.values())

    # -- features (Kafka's FeatureControlManager) ------------------------------------------------
    def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool
                        ) -> list[tuple[str, str | None]]:
        """UpdateFeatures: per (feature, level, upgrade type), why it is refused or None. All or
        nothing, as in Kafka: one refusal writes no record; else one ``feature_level`` record per
        level that changes."""
        refusals = [(name, features.update_refusal(
            name, self.image.features.level(name), level, upgrade_type))
            for name, level, upgrade_type in updates]
        if validate_only or any(why is not None for _, why in refusals):
            return refusals
        for name, level, _ in updates:
            if self.image.features.level(name) != max(level, 0):
                self.emit({"type": "feature_level", "name": name, "level": max(level, 0)})
                self.log.info("feature %s finalized at level %d", name, max(level, 0))
        return refusals

    # -- ACLs (Kafka's AclControlManager) --------------------------------------------------------
    def create_acls(self, bindings: list[AclBinding]) -> None:
        """One ``acl`` record per binding not already in force, under a new id (creating an ACL
        that exists is a success that writes nothing, as in Kafka)."""
        for b in bindings:
            if self.image.acls.id_of(b) is None:
                self.emit(acl_to_record(str(uuid.uuid4()), b))

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it matched, each removed by one ``remove_acl`` record (a
        binding matched by two filters is removed once and reported by both)."""
        matched = [self.image.acls.matching(flt) for flt in filters]
        removed: set[str] = set()
        for acl_id, _b in (m for per_filter in matched for m in per_filter):
            if acl_id not in removed:
                removed.add(acl_id)
                self.emit({"type": "remove_acl", "id": acl_id})
        return [[b for _, b in per_filter] for per_filter in matched]

    # -- client quotas (Kafka's ClientQuotaControlManager) ---------------------------------------
    def alter_client_quotas(self, entries: list[tuple[QuotaEntity, QuotaChanges]]) -> None:
        """One ``client_quota`` record per value that changes (validated entries, from
        ``security.quotas.new_alteration``): setting the value in force or removing a key the
        entity does not hold writes nothing, as in Kafka."""
        for e, changes in entries:
            current = self.image.client_quotas.get(e)
            for key, value in changes.items():
                if value is None and key not in current:
                    continue
                if value is not None and current.get(key) == value:
                    continue
                self.emit(quota_to_record(e, key, value))

    def allocate_producer_ids(self) -> tuple[int, int]:
        """A block [first, first + size) of producer ids for one broker."""
        first = self.image.next_producer_id
        self.emit({"type": "producer_ids", "next": first + PRODUCER_ID_BLOCK})
        return first, PRODUCER_ID_BLOCK
