"""Which hosted partitions a batch of metadata records can change (Kafka's ``TopicsDelta``).

A broker that re-applied its whole image after every batch of records did work linear in the
partitions it hosts for each ISR change of one of them: with thousands of partitions a
broker spent its time re-deciding roles nothing had touched, and its heartbeats waited behind
it. ``touched`` reads the records and says what to re-apply: the partitions named by a
partition or reassignment record, every partition of a topic named by a topic, topic-config or
removal record, or everything (``EVERYTHING``) when a record changes what every partition's
role depends on (a broker's registration, fencing or epoch; dynamic broker configs), when the
batch is empty (the first pass after joining), or when a record's kind is not known here (the
safe answer). Records that change no partition (ACLs, quotas, SCRAM credentials, producer id
blocks, the quorum's own records) touch nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from floodmark.broker.context import PartitionKey
from floodmark.controller import MetadataRecord, scram

# Records whose change reaches every partition: broker epochs and eligibility (which followers
# count, KIP-903 / KIP-966), broker configs (dynamic defaults of every log), the cluster id.
_EVERY_PARTITION = frozenset({"register_broker", "fence_broker", "unfence_broker",
                              "broker_shutdown", "broker_configs", "cluster_id"})
_ONE_TOPIC = frozenset({"topic", "topic_configs", "remove_topic"})
_ONE_PARTITION = frozenset({"partition", "reassignment"})
_NO_PARTITION = frozenset({"producer_ids", "group_configs", "acl", "remove_acl", "client_quota", "leader_change",
                           "voters", "voter_set", scram.CREDENTIAL, scram.REMOVE})


@dataclass(frozen=True)
class Touched:
    """What to re-apply: ``everything``, or the named ``topics`` (all their partitions) and
    ``partitions``."""

    everything: bool = False
    topics: frozenset[str] = field(default_factory=frozenset)
    partitions: frozenset[PartitionKey] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return self.everything or bool(self.topics) or bool(self.partitions)


EVERYTHING = Touched(everything=True)


def touched(records: Iterable[MetadataRecord]) -> Touched:
    """The partitions ``records`` can change (an empty batch: ``EVERYTHING``)."""
    topics: set[str] = set()
    partitions: set[PartitionKey] = set()
    seen = False
    for rec in records:
        seen = True
        kind = rec.get("type")
        if kind in _ONE_PARTITION:
            partitions.add((str(rec["topic"]), int(rec["partition"])))
        elif kind in _ONE_TOPIC:
            topics.add(str(rec["name"]))
        elif kind in _EVERY_PARTITION or kind not in _NO_PARTITION:  # (or a kind not known)
            return EVERYTHING
    if not seen:
        return EVERYTHING
    return Touched(topics=frozenset(topics), partitions=frozenset(partitions))
