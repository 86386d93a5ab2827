"""What brokers and the controller agree a topic is: names, partitions, limits.

Below both (the layers point down only): the controller validates and assigns with these, the
brokers and clients read them. ``OFFSETS_TOPIC`` and ``TRANSACTION_STATE_TOPIC`` are the
internal topics; ``coordinator_partition`` says which of their partitions holds a key (a group,
a transactional id), and so which partition's leader coordinates it.
"""

from __future__ import annotations

import enum
import re
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from floodmark.errors import ErrorCode, KafkaError

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"  # KIP-932's share coordinator
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's ``key_type``: what the key names, and the internal topic whose
    partition leader coordinates it."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2  # KIP-932: "group:topic id:partition", a share partition's state

    @property
    def topic(self) -> str:
        return {CoordinatorType.GROUP: OFFSETS_TOPIC,
                CoordinatorType.TRANSACTION: TRANSACTION_STATE_TOPIC,
                CoordinatorType.SHARE: SHARE_STATE_TOPIC}[self]
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionMeta, ...]
    configs: dict[str, Any] = field(default_factory=dict)
    internal: bool = False


def coordinator_partition(key: str, num_partitions: int) -> int:
    """The partition of an internal topic that holds ``key`` (a group id in
    ``__consumer_offsets``, a transactional id in ``__transaction_state``): a hash of the key,
    as Kafka's ``partitionFor`` (CRC-32 here, where Kafka uses Java's ``hashCode``)."""
    return zlib.crc32(key.encode()) % num_partitions


# Every partition costs open files, memory and a replica fetcher: a bound on the total keeps one
# request (CreateTopics or CreatePartitions with a count of 2^31) from exhausting the process.
MAX_PARTITIONS = 10_000


def check_partition_count(current_total: int, adding: int) -> None:
    """Refuse a change that adds ``adding`` partitions to a cluster holding ``current_total``."""
    if adding < 1:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"invalid partition count {adding}")
    if current_total + adding > MAX_PARTITIONS:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"{adding} more partition(s) would make {current_total + adding}; "
                         f"floodmark serves at most {MAX_PARTITIONS} partitions")


def validate_topic_name(name: str) -> None:
    if name in (".", "..") or not _TOPIC_NAME.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name {name!r}")


def deletable_topic(topics: Mapping[str, TopicMeta], name: str) -> TopicMeta:
    """The topic DeleteTopics may delete: it exists and is not internal."""
    meta = topics.get(name)
    if meta is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
    if meta.internal:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"cannot delete internal topic {name!r}")
    return meta
