"""The controller a single broker runs in process (combined mode, ``process.roles=broker,
controller``, of a one-node cluster, as KRaft runs it).

There is one controller in floodmark: ``floodmark.controller.logic.ControllerLogic`` over a
``MetadataImage``, its records appended and fsynced to a metadata log before anyone is answered.
The controller process, the simulator and this class all drive that same logic. What this class
adds is only the shell a lone broker needs: the metadata log in ``<data dir>/controller/``, this
node registered as the only broker (a new incarnation at every start, so leader epochs move on as
in a cluster), the ``TopicMeta`` view request handlers read, producer-id blocks, and a one-time
import of the JSON document (``floodmark-metadata.json``) earlier versions kept.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Protocol

from floodmark import features
from floodmark.broker.config import Configs
from floodmark.controller import (
    ControllerConfig,
    ControllerLogic,
    MetadataImage,
    MetadataLog,
    QuorumView,
    Reassignment,
    ReplicaProgress,
    delegation_tokens,
    elr_config,
    registration_to_record,
    scram,
    topic_metas,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.features import FinalizedFeatures
from floodmark.metadata import INTERNAL_TOPICS, PartitionMeta, TopicMeta, deletable_topic
from floodmark.replication import PartitionRegistration
from floodmark.security import (
    AclBinding,
    AclBindingFilter,
    AclStore,
    KafkaPrincipal,
    QuotaChanges,
    QuotaEntity,
    QuotaStore,
    ScramUser,
)
from floodmark.settings import DEFAULTS, eligible_leader_replicas_enabled, split_topic_configs

log = logging.getLogger(__name__)

METADATA_FILE = "floodmark-metadata.json"  # earlier versions' metadata, imported once
CONTROLLER_DIR = "controller"


class Controller(Protocol):
    """What the broker asks of its controller. Reads are answered from the broker's metadata
    at once; changes are awaited (a remote controller may be slow or gone: the request that
    needs it waits, never the broker's event loop)."""

    def topics(self) -> dict[str, TopicMeta]: ...
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Configs,
        *, internal: bool = False, validate_only: bool = False,
        assignments: list[tuple[int, ...]] | None = None,
    ) -> TopicMeta: ...
    async def delete_topic(self, name: str, *, validate_only: bool = False) -> TopicMeta: ...
    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                assignments: list[tuple[int, ...]] | None = None
                                ) -> TopicMeta: ...
    async def allocate_producer_id(self) -> int: ...
    async def elect_leaders(self, partitions: list[tuple[str, int]], *, unclean: bool
                            ) -> list[tuple[str, int, ErrorCode, str]]: ...
    async def alter_topic_configs(self, name: str, configs: Configs) -> None: ...
    async def alter_broker_configs(self, resource: str, configs: Configs) -> None: ...
    def broker_configs(self) -> dict[str, Configs]: ...
    async def alter_group_configs(self, group: str, configs: Configs) -> None: ...
    def group_configs(self) -> dict[str, Configs]: ...
    async def unregister_broker(self, broker_id: int) -> None: ...
    async def create_delegation_token(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                                      renewers: list[KafkaPrincipal], max_lifetime_ms: int,
                                      settings: delegation_tokens.TokenSettings
                                      ) -> delegation_tokens.Decision: ...
    async def renew_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                     period_ms: int, settings: delegation_tokens.TokenSettings
                                     ) -> delegation_tokens.Decision: ...
    async def expire_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                      period_ms: int) -> delegation_tokens.Decision: ...
    def delegation_token_infos(self) -> delegation_tokens.Tokens: ...
    async def alter_scram_credentials(self, deletions: list[scram.Deletion],
                                      upsertions: list[scram.Upsertion]
                                      ) -> list[scram.AlterResult]: ...
    def scram_credentials(self) -> scram.Credentials: ...
    async def alter_partition_reassignments(
        self, changes: list[tuple[str, int, tuple[int, ...] | None]]
    ) -> list[tuple[str, int, ErrorCode, str]]: ...
    def reassignments(self) -> dict[tuple[str, int], Reassignment]: ...
    async def create_acls(self, bindings: list[AclBinding]) -> None: ...
    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]: ...
    def acls(self) -> AclStore: ...
    async def alter_client_quotas(self, entries: list[tuple[QuotaEntity, QuotaChanges]]
                                  ) -> None: ...
    def client_quotas(self) -> QuotaStore: ...
    def finalized_features(self) -> FinalizedFeatures: ...
    async def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool
                              ) -> list[tuple[str, str | None]]: ...
    async def describe_quorum(self) -> QuorumView: ...
    async def change_raft_voters(self, add: bool, voter_id: int, directory_id: str) -> None: ...
    @property
    def cluster_id(self) -> str: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _importable_configs(topic: str, configs: Configs) -> Configs:
    """An earlier version's topic configs, each kept only if the setting registry takes it
    (the metadata log holds only records every reader can apply); the rest are dropped with a
    line each."""
    kept, refused = split_topic_configs(configs)
    for name, reason in refused.items():
        log.error("importing topic %s: config %s=%r dropped (%s)", topic, name, configs[name],
                  reason)
    return kept


class LocalController:
    """``ControllerLogic`` in process, with this node the only registered broker."""

    def __init__(self, data_dir: Path, node_id: int,
                 bootstrap_scram: tuple[ScramUser, ...] = (), *, rack: str | None = None,
                 bootstrap_features: tuple[tuple[str, int], ...] | None = None) -> None:
        """``bootstrap_scram``: SCRAM users a new metadata log starts with (``--add-scram``);
        ``rack``: this node's ``broker.rack``; ``bootstrap_features``: the feature levels a
        new metadata log starts at (``--feature``; None: ``features.BOOTSTRAP``)."""
        self._node_id = node_id
        self._rack = rack
        self._mlog = MetadataLog(str(data_dir / CONTROLLER_DIR))
        # KIP-966 as every controller runs it (one broker: its restart is always clean here,
        # so the ELR only carries it across its own fencing at start).
        self.logic = ControllerLogic(MetadataImage(), ControllerConfig(
            auto_leader_rebalance_enable=False, bootstrap_scram=bootstrap_scram,
            bootstrap_features=(features.bootstrap_levels() if bootstrap_features is None
                                else bootstrap_features),
            **elr_config(eligible_leader_replicas_enabled(
                DEFAULTS["eligible.leader.replicas.version"]), DEFAULTS["min.insync.replicas"])))
        self._replay()
        self._topics: dict[str, TopicMeta] | None = None
        self._pid_next = self._pid_limit = 0
        legacy = data_dir / METADATA_FILE
        if self._mlog.log_end_offset == 0:
            if legacy.exists():
                self._import_legacy(legacy)
            else:
                self.logic.bootstrap()
        # A new incarnation: the previous one is fenced (its leaderships end) and this one leads
        # again at a new leader epoch, exactly as a restarted broker of a cluster.
        self.logic.register_broker(node_id, "localhost", 0, uuid.uuid4().hex, _now_ms(),
                                   rack=rack)
        self._persist()
        if legacy.exists():
            legacy.rename(legacy.with_name(METADATA_FILE + ".imported"))

    # -- persistence ---------------------------------------------------------------------------
    def _replay(self) -> None:
        image = MetadataImage()
        image.apply_all(self._mlog.read_all())
        self.logic.image = image
        self.logic.pending.clear()

    def _persist(self) -> None:
        """Append what the logic decided and fsync; on failure (a full disk) the decision is
        undone: the image is rebuilt from the log, which rolled the append back."""
        pending = self.logic.take_pending()
        if not pending:
            return
        self._topics = None
        try:
            self._mlog.append(pending)
        except (OSError, KafkaError) as exc:
            self._replay()
            message = getattr(exc, "strerror", None) or getattr(exc, "message", None) or str(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot write the metadata log: {message}") from exc

    def _import_legacy(self, path: Path) -> None:
        doc = json.loads(path.read_text())
        if doc.get("version") != 1:
            raise ValueError(f"{path}: unsupported metadata version {doc.get('version')!r}")
        emit = self.logic.emit
        emit({"type": "cluster_id", "cluster_id": str(doc["cluster_id"])})
        emit({"type": "producer_ids", "next": int(doc["producer_id_limit"])})
        for t in doc["topics"]:
            # A topic the JSON document knew without an id gets one now, once: the metadata
            # log keeps it from here on, so it is the same at every later start.
            emit({"type": "topic", "name": t["name"],
                  "topic_id": t.get("topic_id") or str(uuid.uuid4()),
                  "configs": _importable_configs(t["name"], dict(t["configs"]))})
            for p in t["partitions"]:
                reg = PartitionRegistration(
                    replicas=tuple(p["replicas"]), isr=tuple(p["isr"]), leader=int(p["leader"]),
                    leader_epoch=int(p["leader_epoch"]), partition_epoch=0)
                emit(registration_to_record(t["name"], int(p["partition"]), reg))
        log.info("imported %s: %d topics", path.name, len(doc["topics"]))

    # -- queries ---------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self.logic.image.cluster_id

    def topics(self) -> dict[str, TopicMeta]:
        if self._topics is None:
            self._topics = topic_metas(self.logic.image)
        return self._topics

    # -- changes (in process: decided, appended and fsynced before the await returns) ----------
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Configs,
        *, internal: bool = False, validate_only: bool = False,
        assignments: list[tuple[int, ...]] | None = None,
    ) -> TopicMeta:
        return self.create_topic_now(name, num_partitions, replication_factor, configs,
                                     validate_only=validate_only, assignments=assignments)

    def create_topic_now(
        self, name: str, num_partitions: int, replication_factor: int, configs: Configs,
        *, validate_only: bool = False, assignments: list[tuple[int, ...]] | None = None,
    ) -> TopicMeta:
        """``create_topic`` without a loop (the broker's start creates the offsets topic)."""
        self.logic.create_topic(name, num_partitions, replication_factor, configs,
                                validate_only=validate_only, assignments=assignments)
        if validate_only:
            parts = tuple(PartitionMeta(i, self._node_id, 0, (self._node_id,), (self._node_id,))
                          for i in range(len(assignments) if assignments else num_partitions))
            return TopicMeta(name, uuid.uuid4(), parts, dict(configs), name in INTERNAL_TOPICS)
        self._persist()
        log.info("created topic %s partitions=%d", name, num_partitions)
        return self.topics()[name]

    async def delete_topic(self, name: str, *, validate_only: bool = False) -> TopicMeta:
        meta = deletable_topic(self.topics(), name)
        if not validate_only:
            self.logic.delete_topic(name)
            self._persist()
            log.info("deleted topic %s", name)
        return meta

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignments: list[tuple[int, ...]] | None = None) -> TopicMeta:
        self.logic.create_partitions(name, count, validate_only=validate_only,
                                     assignments=assignments)
        self._persist()
        return self.topics()[name]

    async def alter_topic_configs(self, name: str, configs: Configs) -> None:
        self.logic.alter_topic_configs(name, configs)
        self._persist()

    async def alter_broker_configs(self, resource: str, configs: Configs) -> None:
        self.logic.alter_broker_configs(resource, configs)
        self._persist()

    def broker_configs(self) -> dict[str, Configs]:
        return self.logic.image.broker_configs

    async def alter_group_configs(self, group: str, configs: Configs) -> None:
        self.logic.alter_group_configs(group, configs)
        self._persist()

    def group_configs(self) -> dict[str, Configs]:
        return self.logic.image.group_configs

    async def create_delegation_token(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                                      renewers: list[KafkaPrincipal], max_lifetime_ms: int,
                                      settings: delegation_tokens.TokenSettings
                                      ) -> delegation_tokens.Decision:
        decision = self.logic.create_delegation_token(owner, requester, renewers,
                                                      max_lifetime_ms, settings, _now_ms())
        self._persist()
        return decision

    async def renew_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                     period_ms: int, settings: delegation_tokens.TokenSettings
                                     ) -> delegation_tokens.Decision:
        decision = self.logic.renew_delegation_token(token_id, principal, period_ms, settings,
                                                     _now_ms())
        self._persist()
        return decision

    async def expire_delegation_token(self, token_id: str, principal: KafkaPrincipal,
                                      period_ms: int) -> delegation_tokens.Decision:
        decision = self.logic.expire_delegation_token(token_id, principal, period_ms,
                                                      _now_ms())
        self._persist()
        return decision

    def delegation_token_infos(self) -> delegation_tokens.Tokens:
        return self.logic.image.delegation_tokens

    async def unregister_broker(self, broker_id: int) -> None:
        """Only this node can be registered, and it is running: a running Kafka broker whose
        registration is removed registers again at its next heartbeat, so the registration
        stays as it is (answered without error). Removing it first leaves every ISR and ELR,
        and this broker holds the only replica of every partition: each was left without a
        leader for good, and everything acknowledged before unreadable (found by the fuzzer's
        valid UnregisterBroker frames; re-registering at once as a new incarnation did not
        bring the leaders back either). Another id is BROKER_ID_NOT_REGISTERED."""
        if broker_id != self._node_id or broker_id not in self.logic.image.brokers:
            self.logic.unregister_broker(broker_id)
            self._persist()

    async def alter_scram_credentials(self, deletions: list[scram.Deletion],
                                      upsertions: list[scram.Upsertion]
                                      ) -> list[scram.AlterResult]:
        results = self.logic.alter_scram_credentials(deletions, upsertions)
        self._persist()
        return results

    def scram_credentials(self) -> scram.Credentials:
        return self.logic.image.scram_credentials

    async def alter_partition_reassignments(
        self, changes: list[tuple[str, int, tuple[int, ...] | None]]
    ) -> list[tuple[str, int, ErrorCode, str]]:
        out = []
        for topic, partition, target in changes:
            err, message = self.logic.alter_partition_reassignment(topic, partition, target)
            out.append((topic, partition, err, message))
        self._persist()
        return out

    def reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self.logic.image.reassignments

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        self.logic.create_acls(bindings)
        self._persist()

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        matched = self.logic.delete_acls(filters)
        self._persist()
        return matched

    def acls(self) -> AclStore:
        return self.logic.image.acls

    async def change_raft_voters(self, add: bool, voter_id: int, directory_id: str) -> None:
        """A lone node's voter set is itself, fixed (Kafka's static quorum answers so too)."""
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "a lone broker has no metadata quorum "
                         "(controller.quorum.voters): its voter set is fixed")

    async def describe_quorum(self) -> QuorumView:
        """The metadata quorum of a lone node: itself, the only voter, always the leader, at
        epoch 0 (it holds no elections), its metadata log's end committed. No controller
        listener of its own, so no endpoint."""
        end = self._mlog.log_end_offset
        now = _now_ms()
        return QuorumView(self._node_id, 0, end, (ReplicaProgress(self._node_id, end, now, now),))

    async def alter_client_quotas(self, entries: list[tuple[QuotaEntity, QuotaChanges]]
                                  ) -> None:
        self.logic.alter_client_quotas(entries)
        self._persist()

    def client_quotas(self) -> QuotaStore:
        return self.logic.image.client_quotas

    def finalized_features(self) -> FinalizedFeatures:
        return self.logic.image.features

    async def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool
                              ) -> list[tuple[str, str | None]]:
        refusals = self.logic.update_features(updates, validate_only)
        self._persist()
        return refusals

    async def elect_leaders(self, partitions: list[tuple[str, int]], *, unclean: bool
                      ) -> list[tuple[str, int, ErrorCode, str]]:
        out = []
        for topic, partition in partitions:
            err, message = self.logic.elect_leader(topic, partition, unclean)
            out.append((topic, partition, err, message))
        self._persist()
        return out

    async def allocate_producer_id(self) -> int:
        if self._pid_next >= self._pid_limit:
            first, count = self.logic.allocate_producer_ids()
            self._persist()
            self._pid_next, self._pid_limit = first, first + count
        pid = self._pid_next
        self._pid_next += 1
        return pid

    def close(self) -> None:
        self._mlog.close()
