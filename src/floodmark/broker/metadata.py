"""Cluster metadata for combined mode (``process.roles=broker,controller``): one process owns it.

The broker talks to the controller only through :class:`Controller`; :class:`LocalController`
keeps the metadata in one JSON document in the data directory (written to a temp file, fsynced,
renamed). The cluster issue can replace it with a remote controller without touching handlers.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import (
    PartitionMeta,
    TopicMeta,
    check_partition_count,
    validate_topic_name,
)

log = logging.getLogger(__name__)

METADATA_FILE = "floodmark-metadata.json"
PRODUCER_ID_BLOCK = 1000


class Controller(Protocol):
    def topics(self) -> dict[str, TopicMeta]: ...
    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, Any],
        *, internal: bool = False, validate_only: bool = False,
    ) -> TopicMeta: ...
    def delete_topic(self, name: str, *, validate_only: bool = False) -> TopicMeta: ...
    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> TopicMeta: ...
    def allocate_producer_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...


class LocalController:
    """Single-node controller: every partition is led by this node with RF=1, ISR={node}."""

    def __init__(self, data_dir: Path, node_id: int) -> None:
        self._path = data_dir / METADATA_FILE
        self._node_id = node_id
        self._topics: dict[str, TopicMeta] = {}
        self._cluster_id = uuid.uuid4().hex[:22]
        self._next_producer_id = 1000
        self._producer_id_limit = 1000  # ids below the limit are reserved in the file
        self._load()

    # -- persistence ---------------------------------------------------------------------------
    def _load(self) -> None:
        if not self._path.exists():
            self._save()
            return
        doc = json.loads(self._path.read_text())
        if doc.get("version") != 1:
            raise ValueError(f"{self._path}: unsupported metadata version {doc.get('version')!r}")
        self._cluster_id = doc["cluster_id"]
        # Never reuse a producer id handed out before a crash: start after the reserved block.
        self._next_producer_id = int(doc["producer_id_limit"])
        self._producer_id_limit = self._next_producer_id
        for t in doc["topics"]:
            parts = tuple(
                PartitionMeta(p["partition"], p["leader"], p["leader_epoch"],
                              tuple(p["replicas"]), tuple(p["isr"]))
                for p in t["partitions"]
            )
            self._topics[t["name"]] = TopicMeta(
                t["name"], uuid.UUID(t["topic_id"]), parts, dict(t["configs"]), t["internal"]
            )

    def _save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self._cluster_id,
            "producer_id_limit": self._producer_id_limit,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "internal": t.internal,
                    "configs": t.configs,
                    "partitions": [
                        {"partition": p.partition, "leader": p.leader,
                         "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                         "isr": list(p.isr)}
                        for p in t.partitions
                    ],
                }
                for t in self._topics.values()
            ],
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as fh:
                json.dump(doc, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            # A full disk: the old file stays as it was; the change is refused, not half-made.
            tmp.unlink(missing_ok=True)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot write {self._path.name}: {exc.strerror or exc}") from exc
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def topics(self) -> dict[str, TopicMeta]:
        return self._topics

    # -- changes ---------------------------------------------------------------------------------
    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, Any],
        *, internal: bool = False, validate_only: bool = False,
    ) -> TopicMeta:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        check_partition_count(self._partition_total(), num_partitions)
        if replication_factor != 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} > 1 live broker",
            )
        parts = tuple(
            PartitionMeta(i, self._node_id, 0, (self._node_id,), (self._node_id,))
            for i in range(num_partitions)
        )
        meta = TopicMeta(name, uuid.uuid4(), parts, dict(configs), internal)
        if not validate_only:
            self._topics[name] = meta
            try:
                self._save()
            except KafkaError:
                del self._topics[name]
                raise
            log.info("created topic %s partitions=%d leader_epoch=0", name, num_partitions)
        return meta

    def delete_topic(self, name: str, *, validate_only: bool = False) -> TopicMeta:
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        if meta.internal:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot delete internal topic {name!r}")
        if validate_only:
            return meta
        del self._topics[name]
        try:
            self._save()
        except KafkaError:
            self._topics[name] = meta
            raise
        log.info("deleted topic %s", name)
        return meta

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> TopicMeta:
        meta = self._topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        current = len(meta.partitions)
        if count <= current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {current} partitions; new count {count} must be larger",
            )
        check_partition_count(self._partition_total(), count - current)
        extra = tuple(
            PartitionMeta(i, self._node_id, 0, (self._node_id,), (self._node_id,))
            for i in range(current, count)
        )
        new = replace(meta, partitions=meta.partitions + extra)
        if not validate_only:
            self._topics[name] = new
            self._save()
        return new

    def _partition_total(self) -> int:
        return sum(len(t.partitions) for t in self._topics.values())

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
            self._save()
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid
