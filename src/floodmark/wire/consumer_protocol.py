"""The consumer protocol's embedded formats, ``ConsumerProtocolSubscription`` (a JoinGroup
protocol's metadata) and ``ConsumerProtocolAssignment`` (a SyncGroup assignment), every
version Kafka defines (0-3), from kio's schema: an int16 version, then the body of that
version. As Kafka's ``ConsumerProtocol``: a version above the highest known is read as the
highest (newer versions only append fields), a negative one is an error.

The broker reads these where the group coordinator must understand a classic member (the
online migration of a group between the classic and the consumer protocol, KIP-848).
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.serial import entity_reader, entity_writer

from floodmark.errors import FloodmarkError

PROTOCOL_TYPE = "consumer"  # the JoinGroup protocol type of consumers
HIGHEST_VERSION = 3

_SUBSCRIPTIONS: tuple[Any, ...] = (subscription_v0, subscription_v1, subscription_v2,
                                   subscription_v3)
_ASSIGNMENTS: tuple[Any, ...] = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)

TopicPartitions = dict[str, tuple[int, ...]]  # topic name -> partitions


class BadEmbeddedProtocol(FloodmarkError, ValueError):
    """Embedded consumer-protocol bytes floodmark cannot read."""


@dataclass(frozen=True, slots=True)
class EmbeddedSubscription:
    version: int
    topics: tuple[str, ...]
    owned: TopicPartitions  # v1+: what the member owns (cooperative rebalancing); else empty
    rack_id: str | None  # v3+


@functools.cache
def _reader(module: Any, name: str) -> Any:
    return entity_reader(getattr(module, name))


def version_of(data: bytes) -> int:
    """The version an embedded subscription or assignment was written with."""
    if len(data) < 2:
        raise BadEmbeddedProtocol(f"{len(data)} bytes: shorter than the version")
    version = int(struct.unpack_from(">h", data, 0)[0])
    if version < 0:
        raise BadEmbeddedProtocol(f"version {version}")
    return version


def _read(modules: tuple[Any, ...], name: str, data: bytes) -> Any:
    version = min(version_of(data), HIGHEST_VERSION)
    try:
        value, _end = _reader(modules[version], name)(memoryview(data)[2:], 0)
    except Exception as exc:  # kio's reader fails with whatever its parsing met
        raise BadEmbeddedProtocol(f"{name} v{version}: {exc}") from None
    return value


def decode_subscription(data: bytes) -> EmbeddedSubscription:
    s = _read(_SUBSCRIPTIONS, "ConsumerProtocolSubscription", data)
    owned = {str(tp.topic): tuple(int(p) for p in tp.partitions)
             for tp in getattr(s, "owned_partitions", ())}
    return EmbeddedSubscription(version_of(data), tuple(str(t) for t in s.topics), owned,
                                getattr(s, "rack_id", None))


def decode_assignment(data: bytes) -> TopicPartitions:
    """The partitions of an assignment (an empty one: nothing assigned, as Kafka reads it)."""
    if not data:
        return {}
    a = _read(_ASSIGNMENTS, "ConsumerProtocolAssignment", data)
    out: TopicPartitions = {}
    for tp in a.assigned_partitions:
        out[str(tp.topic)] = out.get(str(tp.topic), ()) + tuple(int(p) for p in tp.partitions)
    return out


def encode_assignment(partitions: TopicPartitions, version: int) -> bytes:
    """An assignment in ``version`` (the member's subscription version, as Kafka answers it;
    above the highest known: the highest), without user data."""
    version = max(0, min(version, HIGHEST_VERSION))
    module = _ASSIGNMENTS[version]
    value = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(module.TopicPartition(topic=t, partitions=tuple(sorted(ps)))
                                  for t, ps in sorted(partitions.items())),
        user_data=None)
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(module.ConsumerProtocolAssignment)(out, value)
    return out.getvalue()
