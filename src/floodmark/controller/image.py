"""The cluster metadata as a sequence of records, and the image they replay into.

The controller decides; every decision is a list of ``MetadataRecord`` values appended to the
metadata log (``metadata_log.py``). The controller and every broker replay the same records, in
log order, into a ``MetadataImage`` — the KRaft idea: state is a fold over a log, so a restart
(controller) or a late joiner (broker) rebuilds exactly the same picture, and a broker that has
applied records up to offset N knows precisely which changes it has seen.

Records are plain JSON objects (``{"type": ..., ...}``) stored one per record batch value in
floodmark's own log format. Kafka's record names, reduced to what floodmark needs:

=====================  ==========================================================================
``register_broker``    a broker incarnation: id, broker epoch (= the record's metadata offset,
                       hence monotonic across controller restarts), address, incarnation id,
                       and ``rack`` (its ``broker.rack``, KIP-36) when it has one
``fence_broker``       missed heartbeats past ``broker.session.timeout.ms`` (or a new incarnation
                       replaced it); not acceptable as leader or ISR member
``unfence_broker``     heartbeating again with its current broker epoch
``broker_shutdown``    in controlled shutdown: leadership moves away, not acceptable
``unregister_broker``  that registration (id and broker epoch) removed (Kafka's
                       UnregisterBrokerRecord, UnregisterBroker / ``kafka-cluster unregister``);
                       a record naming another epoch changes nothing
``topic``              name, topic id, configs
``partition``          the full ``PartitionRegistration`` (replicas, ISR, leader, leader epoch,
                       partition epoch, recovery state, KIP-966 ELR and last known ELR):
                       Kafka's PartitionRecord and PartitionChangeRecord in one shape; with
                       ``directories`` (KIP-858: the log directory id of each replica, in
                       ``replicas`` order, ``UNASSIGNED_DIRECTORY`` where unknown) when
                       AssignReplicasToDirs changed them; a record without it keeps each
                       remaining replica's directory
``topic_configs``      a topic's whole config set after AlterConfigs / IncrementalAlterConfigs
``remove_topic``       topic deleted
``reassignment``       a partition reassignment in progress (KIP-455): ``target`` replicas,
                       ``adding``, ``removing`` and the ``original`` assignment; a null
                       ``target`` ends it (done or cancelled)
``broker_configs``     the dynamic broker configs of one resource after AlterConfigs /
                       IncrementalAlterConfigs: ``resource`` is a broker id, or "" for the
                       cluster-wide default (KIP-226); the whole set, typed
``group_configs``      a group's whole config set after AlterConfigs / IncrementalAlterConfigs
                       of resource type GROUP (Kafka's ConfigRecord of type 32): ``name``,
                       ``configs`` typed (``floodmark.group_configs``); empty: none left
``producer_ids``       next unallocated producer id (blocks handed to brokers)
``user_scram_credential``, ``remove_user_scram_credential``
                       a user's SCRAM credential for one mechanism (salt, stored and server
                       keys, iterations; never a password), or its removal (``scram.py``)
``delegation_token``, ``remove_delegation_token``
                       a delegation token (KIP-48: owner, requester, renewers, issue, max and
                       expiry times; never its HMAC) or its removal (``delegation_tokens.py``)
``cluster_id``         written once, first record of a new cluster
``feature_level``      a feature's finalized level (Kafka's FeatureLevelRecord, KIP-584):
                       ``name`` and ``level`` (``floodmark.features``); written with the cluster
                       id for a new cluster; in a snapshot also the
                       ``epoch`` (the offset of the last change) it had
``acl``                an ACL binding under its id (Kafka's AccessControlEntryRecord): resource
                       type, name and pattern type, principal, host, operation, permission type,
                       Kafka's numbers for each
``remove_acl``         the ACL of that id deleted (RemoveAccessControlEntryRecord)
``client_quota``       a client quota (Kafka's ClientQuotaRecord): ``entity`` as [type, name or
                       null for the default] pairs, ``key``, and ``value`` or ``remove``: true
``voter_set``          the controller quorum's voter set (KIP-853's VotersRecord, written by the
                       quorum, ``controller/quorum``): ``epoch``, ``voters`` as [id, directory
                       id], ``endpoints`` as [id, host:port] for the voters UpdateRaftVoter
                       moved; the image keeps the latest (brokers dial the controllers there,
                       ``controller_endpoints``) and a snapshot carries it
=====================  ==========================================================================
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from floodmark.controller import delegation_tokens, scram
from floodmark.controller.record_check import MetadataRecord, check_record
from floodmark.errors import KafkaError
from floodmark.features import NONE_FINALIZED, FinalizedFeatures
from floodmark.group_configs import split as split_group_configs
from floodmark.metadata import INTERNAL_TOPICS, PartitionMeta, TopicMeta
from floodmark.replication import LeaderRecoveryState, PartitionRegistration
from floodmark.security import (
    AclBinding,
    AclStore,
    Endpoint,
    QuotaEntity,
    QuotaStore,
    ScramCredential,
    ScramMechanism,
    new_binding,
)
from floodmark.settings import split_dynamic_configs, split_topic_configs

__all__ = [
    "UNAPPLIED_KEPT",
    "UNASSIGNED_DIRECTORY",
    "BrokerRegistration",
    "MetadataImage",
    "MetadataRecord",
    "Reassignment",
    "TopicImage",
    "UnappliedRecord",
    "VoterSetImage",
    "acl_to_record",
    "quota_to_record",
    "record_to_acl",
    "record_to_quota",
    "record_to_registration",
    "registration_to_record",
    "topic_metas",
]


UNAPPLIED_KEPT = 20
"""A reader keeps (and reports) this many of the newest records it could not apply."""


@dataclass(frozen=True, slots=True)
class UnappliedRecord:
    """A record a reader of the metadata log could not apply (written by an older or buggier
    controller): it was skipped, the records after it were applied."""

    offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    incarnation: str
    fenced: bool = False
    in_controlled_shutdown: bool = False
    listeners: tuple[Endpoint, ...] = ()
    """Every listener the broker advertises (none: a broker without listener settings, whose
    one listener is ``host:port``)."""
    rack: str | None = None
    """Its ``broker.rack`` (KIP-36): Metadata and DescribeCluster answer it, replica placement
    spreads over it (``controller.placement``)."""

    def endpoint(self, listener_name: str) -> tuple[str, int] | None:
        """Where a client of listener ``listener_name`` reaches this broker (Kafka answers
        each client with the endpoints of the listener it came in on); None: the broker has
        no such listener."""
        if not self.listeners:
            return self.host, self.port
        for ep in self.listeners:
            if ep.name == listener_name:
                return ep.host, ep.port
        return None

    @property
    def acceptable(self) -> bool:
        """May lead or join an ISR: registered, unfenced, not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition moving to ``target`` (KIP-455): while it runs the partition's replicas are
    the target followed by ``removing``; ``adding`` are the target replicas that were not in
    the original assignment (they catch up and join the ISR as any follower does)."""

    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    original: tuple[int, ...] = ()
    """The assignment before the move, in its order (a cancellation restores it)."""


@dataclass(frozen=True, slots=True)
class VoterSetImage:
    """The latest ``voter_set`` record replayed (KIP-853's VotersRecord): the controller
    quorum's voters and the endpoints it names (a voter not named listens where
    ``controller.quorum.voters`` says)."""

    epoch: int
    voters: tuple[tuple[int, str], ...]  # (voter id, directory id)
    endpoints: tuple[tuple[int, str], ...] = ()  # (voter id, host:port)

    @classmethod
    def from_record(cls, rec: MetadataRecord) -> VoterSetImage:
        return cls(int(rec["epoch"]), tuple((int(v), str(d)) for v, d in rec["voters"]),
                   tuple((int(v), str(e)) for v, e in rec.get("endpoints") or ()))

    def to_record(self) -> MetadataRecord:
        rec: MetadataRecord = {"type": "voter_set", "epoch": self.epoch,
                               "voters": [[v, d] for v, d in self.voters]}
        if self.endpoints:
            rec["endpoints"] = [[v, e] for v, e in self.endpoints]
        return rec


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, Any]
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    directories: dict[int, dict[int, str]] = field(default_factory=dict)
    """partition -> broker id -> the log directory id holding its replica (KIP-858's
    ``directories``, assigned by AssignReplicasToDirs); a replica without one is unassigned."""

    def directories_of(self, partition: int) -> list[str]:
        """The record's ``directories``: one per replica, in ``replicas`` order."""
        reg = self.partitions.get(partition)
        assigned = self.directories.get(partition, {})
        return [] if reg is None else [assigned.get(b, UNASSIGNED_DIRECTORY)
                                       for b in reg.replicas]

    def unclean_leader_election_enable(self, default: bool = False) -> bool:
        value = self.configs.get("unclean.leader.election.enable", default)
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)


UNASSIGNED_DIRECTORY = "unassigned"
"""A replica whose log directory the controller has not been told (Kafka's
``DirectoryId.UNASSIGNED``)."""


def registration_to_record(topic: str, partition: int, reg: PartitionRegistration) -> MetadataRecord:
    return {
        "type": "partition",
        "topic": topic,
        "partition": partition,
        "replicas": list(reg.replicas),
        "isr": list(reg.isr),
        "leader": reg.leader,
        "leader_epoch": reg.leader_epoch,
        "partition_epoch": reg.partition_epoch,
        "leader_recovery_state": reg.leader_recovery_state.value,
        "elr": list(reg.elr),
        "last_known_elr": list(reg.last_known_elr),
    }


def record_to_registration(rec: MetadataRecord) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(int(r) for r in rec["replicas"]),
        isr=tuple(int(r) for r in rec["isr"]),
        leader=int(rec["leader"]),
        leader_epoch=int(rec["leader_epoch"]),
        partition_epoch=int(rec["partition_epoch"]),
        leader_recovery_state=LeaderRecoveryState(int(rec.get("leader_recovery_state", 0))),
        elr=tuple(int(r) for r in rec.get("elr", ())),
        last_known_elr=tuple(int(r) for r in rec.get("last_known_elr", ())),
    )


def acl_to_record(acl_id: str, b: AclBinding) -> MetadataRecord:
    return {"type": "acl", "id": acl_id, "resource_type": int(b.pattern.resource_type),
            "resource_name": b.pattern.name, "pattern_type": int(b.pattern.pattern_type),
            "principal": b.entry.principal, "host": b.entry.host,
            "operation": int(b.entry.operation), "permission_type": int(b.entry.permission)}


def record_to_acl(rec: MetadataRecord) -> AclBinding:
    return new_binding(int(rec["resource_type"]), str(rec["resource_name"]),
                       int(rec["pattern_type"]), str(rec["principal"]), str(rec["host"]),
                       int(rec["operation"]), int(rec["permission_type"]))


def quota_to_record(e: QuotaEntity, key: str, value: float | None) -> MetadataRecord:
    """A client quota set (``value``) or removed (None) as a ``client_quota`` record."""
    rec: MetadataRecord = {"type": "client_quota", "entity": [list(p) for p in e.parts],
                           "key": key}
    if value is None:
        rec["remove"] = True
    else:
        rec["value"] = value
    return rec


def record_to_quota(rec: MetadataRecord) -> tuple[QuotaEntity, str, float | None]:
    """(entity, key, value or None when removed) of a ``client_quota`` record."""
    e = QuotaEntity(tuple(sorted(((str(t), None if n is None else str(n))
                                  for t, n in rec["entity"]), key=lambda p: p[0])))
    value = None if rec.get("remove") else float(rec["value"])
    return e, str(rec["key"]), value


class MetadataImage:
    """Everything the records say, as of ``next_offset`` (the offset after the last applied)."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.cluster_id = ""
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.next_producer_id = 1000
        self.broker_configs: dict[str, dict[str, Any]] = {}  # resource ("" = default) -> set
        self.group_configs: dict[str, dict[str, Any]] = {}  # group id -> its own configs
        self.reassignments: dict[tuple[str, int], Reassignment] = {}
        self.acls = AclStore()  # the authorizer of every broker reads this one
        # user -> mechanism -> credential (SASL/SCRAM, KIP-554)
        self.scram_credentials: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        # token id -> delegation token (KIP-48)
        self.delegation_tokens: dict[str, delegation_tokens.TokenInfo] = {}
        self.client_quotas = QuotaStore()  # every broker's quota manager reads this one
        self.features = NONE_FINALIZED  # finalized feature levels (KIP-584)
        self.voter_set: VoterSetImage | None = None  # the controller quorum's (KIP-853)

    # -- views ---------------------------------------------------------------------------------
    def acceptable_brokers(self) -> set[int]:
        return {b.broker_id for b in self.brokers.values() if b.acceptable}

    def acceptable_racks(self) -> dict[int, str | None]:
        """Each acceptable broker's rack (None: it has no ``broker.rack``)."""
        return {b.broker_id: b.rack for b in self.brokers.values() if b.acceptable}

    def broker_epochs(self) -> dict[int, int]:
        return {b.broker_id: b.broker_epoch for b in self.brokers.values()}

    def ineligible(self) -> frozenset[int]:
        return frozenset(b.broker_id for b in self.brokers.values() if not b.acceptable)

    def cluster_default(self, name: str, static: Any) -> Any:
        """A dynamic cluster-wide default broker config, else ``static``."""
        return self.broker_configs.get("", {}).get(name, static)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t is not None else None

    # -- replay --------------------------------------------------------------------------------
    def apply_all(self, records: Iterable[tuple[int, MetadataRecord]],
                  on_unapplied: Callable[[UnappliedRecord], None] | None = None
                  ) -> list[MetadataRecord]:
        """Apply (offset, record) pairs at or after ``next_offset``, in order; returns those
        applied (earlier offsets were seen already and are skipped).

        With ``on_unapplied`` every record is checked first (``record_check``): one that does
        not pass (or fails to apply) is skipped, reported there, and the rest are applied, so
        one bad record never wedges a reader. A topic's record that fails only for config
        values is applied without them (and reported): a reader never loses a topic, whose
        partitions a broker would otherwise delete as orphans. Without it the error is
        raised."""
        applied = []
        for offset, rec in records:
            if offset < self.next_offset:
                continue
            if offset != self.next_offset:
                raise ValueError(f"metadata gap: expected offset {self.next_offset}, got {offset}")
            if on_unapplied is None:
                self.apply(rec)
            else:
                try:
                    check_record(rec)
                    self.apply(rec)
                except (KafkaError, KeyError, TypeError, ValueError) as exc:
                    self.next_offset = offset + 1
                    reason = exc.message if isinstance(exc, KafkaError) else repr(exc)
                    kept = _without_bad_configs(rec)
                    if kept is None:
                        on_unapplied(UnappliedRecord(offset, reason))
                        continue
                    # A topic is never lost over a config value (a broker would delete the
                    # partitions of a topic it does not know): applied without the values the
                    # check refuses, reported all the same.
                    self.apply(kept)
                    rec = kept
                    which = {"broker_configs": "broker", "group_configs": "group"}.get(
                        rec["type"], "topic")
                    on_unapplied(UnappliedRecord(offset, f"applied without the {which} config "
                                                         f"values refused: {reason}"))
            self.next_offset = offset + 1
            applied.append(rec)
        return applied

    def apply(self, rec: MetadataRecord) -> None:
        kind = rec["type"]
        if kind == "cluster_id":
            self.cluster_id = str(rec["cluster_id"])
        elif kind == "feature_level":
            levels = dict(self.features.levels)
            levels[str(rec["name"])] = int(rec["level"])
            levels = {name: level for name, level in levels.items() if level > 0}
            # the epoch: the record's offset (``next_offset`` until the caller moves past it),
            # or the one a snapshot kept
            epoch = int(rec.get("epoch", self.next_offset))
            self.features = FinalizedFeatures(epoch, tuple(sorted(levels.items())))
        elif kind == "register_broker":
            bid = int(rec["broker_id"])
            self.brokers[bid] = BrokerRegistration(
                bid, int(rec["broker_epoch"]), str(rec["host"]), int(rec["port"]),
                str(rec["incarnation"]),
                listeners=tuple(Endpoint.from_record(x) for x in rec.get("listeners") or ()),
                rack=None if rec.get("rack") is None else str(rec["rack"]),
            )
        elif kind in ("fence_broker", "unfence_broker", "broker_shutdown"):
            bid = int(rec["broker_id"])
            old = self.brokers.get(bid)
            if old is None or old.broker_epoch != int(rec["broker_epoch"]):
                return  # about an older incarnation
            if kind == "fence_broker":
                self.brokers[bid] = replace(old, fenced=True)
            elif kind == "unfence_broker":
                self.brokers[bid] = replace(old, fenced=False, in_controlled_shutdown=False)
            else:
                self.brokers[bid] = replace(old, in_controlled_shutdown=True)
        elif kind == "unregister_broker":
            bid = int(rec["broker_id"])
            old = self.brokers.get(bid)
            if old is not None and old.broker_epoch == int(rec["broker_epoch"]):
                del self.brokers[bid]
        elif kind == "topic":
            self.topics[str(rec["name"])] = TopicImage(
                str(rec["name"]), uuid.UUID(str(rec["topic_id"])), dict(rec["configs"]))
        elif kind == "partition":
            topic = self.topics.get(str(rec["topic"]))
            if topic is not None:
                index = int(rec["partition"])
                reg = record_to_registration(rec)
                topic.partitions[index] = reg
                directories = rec.get("directories")
                if directories is not None:
                    assigned = {b: str(d) for b, d in zip(reg.replicas, directories,
                                                          strict=True)
                                if d != UNASSIGNED_DIRECTORY}
                else:  # unchanged for the replicas that remain (a new one is unassigned)
                    before = topic.directories.get(index, {})
                    assigned = {b: before[b] for b in reg.replicas if b in before}
                if assigned:
                    topic.directories[index] = assigned
                else:
                    topic.directories.pop(index, None)
        elif kind == "topic_configs":
            timage = self.topics.get(str(rec["name"]))
            if timage is not None:
                timage.configs = dict(rec["configs"])
        elif kind == "remove_topic":
            self.topics.pop(str(rec["name"]), None)
            for key in [k for k in self.reassignments if k[0] == str(rec["name"])]:
                del self.reassignments[key]
        elif kind == "reassignment":
            key = (str(rec["topic"]), int(rec["partition"]))
            if rec["target"] is None:
                self.reassignments.pop(key, None)
            else:
                self.reassignments[key] = Reassignment(
                    tuple(int(b) for b in rec["target"]), tuple(int(b) for b in rec["adding"]),
                    tuple(int(b) for b in rec["removing"]),
                    tuple(int(b) for b in rec.get("original", ())))
        elif kind == "broker_configs":
            if rec["configs"]:
                self.broker_configs[str(rec["resource"])] = dict(rec["configs"])
            else:
                self.broker_configs.pop(str(rec["resource"]), None)
        elif kind == "group_configs":
            if rec["configs"]:
                self.group_configs[str(rec["name"])] = dict(rec["configs"])
            else:
                self.group_configs.pop(str(rec["name"]), None)
        elif kind == scram.CREDENTIAL:
            user, cred = scram.record_credential(rec)
            self.scram_credentials.setdefault(user, {})[cred.mechanism] = cred
        elif kind == scram.REMOVE:
            user, mech = scram.record_removal(rec)
            creds = self.scram_credentials.get(user, {})
            creds.pop(mech, None)
            if not creds:
                self.scram_credentials.pop(user, None)
        elif kind == delegation_tokens.TOKEN:
            token = delegation_tokens.record_token(rec)
            self.delegation_tokens[token.token_id] = token
        elif kind == delegation_tokens.REMOVE:
            self.delegation_tokens.pop(delegation_tokens.record_token_id(rec), None)
        elif kind == "producer_ids":
            self.next_producer_id = int(rec["next"])
        elif kind == "acl":
            self.acls.add(str(rec["id"]), record_to_acl(rec))
        elif kind == "remove_acl":
            self.acls.remove(str(rec["id"]))
        elif kind == "client_quota":
            q_entity, q_key, q_value = record_to_quota(rec)
            if q_value is None:
                self.client_quotas.remove(q_entity, q_key)
            else:
                self.client_quotas.set(q_entity, q_key, q_value)
        elif kind == "voter_set":  # the controller quorum's voter set (KIP-853)
            self.voter_set = VoterSetImage.from_record(rec)
        elif kind in ("leader_change", "voters"):
            pass  # the controller quorum's own records (controller/quorum): an epoch's opening,
            # a voter's data dir binding
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")


def _without_bad_configs(rec: MetadataRecord) -> MetadataRecord | None:
    """A ``topic``/``topic_configs``/``broker_configs`` record that fails the check only for
    config values (one written before a rule of ``config_rules`` existed): the same record with
    the values the setting registry takes; None for anything else."""
    kind = rec.get("type")
    if kind not in ("topic", "topic_configs", "broker_configs", "group_configs") or not \
            isinstance(rec.get("configs"), dict):
        return None
    if kind == "group_configs":
        kept, refused = split_group_configs(rec["configs"])
    elif kind == "broker_configs":
        kept, refused = split_dynamic_configs(rec["configs"], str(rec.get("resource", "")))
    else:
        kept, refused = split_topic_configs(rec["configs"])
    fixed = {**rec, "configs": kept}
    try:
        check_record(fixed)
    except KafkaError:
        return None
    return fixed if refused else None


def topic_metas(image: MetadataImage) -> dict[str, TopicMeta]:
    """The brokers' view of the image's topics (what request handlers read)."""
    out: dict[str, TopicMeta] = {}
    for name, t in image.topics.items():
        parts = tuple(PartitionMeta(p, reg.leader, reg.leader_epoch, reg.replicas, reg.isr)
                      for p, reg in sorted(t.partitions.items()))
        out[name] = TopicMeta(name, t.topic_id, parts, dict(t.configs), name in INTERNAL_TOPICS)
    return out
