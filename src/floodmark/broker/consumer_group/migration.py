"""KIP-848's online migration between a classic group and a consumer group, as pure rules
(Kafka's ``GroupMetadataManager.convertToConsumerGroup`` / ``convertToClassicGroup``,
``ConsumerGroup.fromClassicGroup``, ``ClassicGroup.fromConsumerGroup``).

* **Upgrade**: a ConsumerGroupHeartbeat that joins (epoch 0) a non-empty classic group whose
  protocol type is ``consumer``, when ``group.consumer.migration.policy`` allows upgrades: the
  classic group's record becomes a tombstone and the consumer group's records are written in
  the same batch. Every classic member stays, as a *classic protocol member* of the consumer
  group: its member epoch and the group epoch are the classic generation, its target and
  current assignment the partitions the classic group gave it (all stable), its subscription
  the topics of its JoinGroup metadata, and its JoinGroup protocols and session timeout kept
  in ``ClassicMemberMetadata``.
* **Downgrade**: when the last member speaking the consumer protocol leaves (or is fenced)
  and the others all speak the classic protocol, when the policy allows downgrades: the
  consumer group's records become tombstones and a classic group record is written, stable at
  the group epoch with each member's target assignment, and the classic group then rebalances.

A classic group is handed in and out as ``ClassicSnapshot`` values (the broker's shell maps
them to its classic core's state and to ``GroupMetadataValue`` records).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.broker.consumer_group.assignors import Partitions
from floodmark.broker.consumer_group.records import (
    ClassicMemberMetadata,
    ConsumerGroupRecord,
    CurrentAssignment,
    GroupEpoch,
    MemberAssignment,
    MemberState,
    MemberSubscription,
    PartitionMetadata,
    Subscription,
    TargetEpoch,
    TargetMember,
    TopicMetadata,
)
from floodmark.wire import (
    PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's names; Kafka 4's default
    ``bidirectional``)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)

    @classmethod
    def parse(cls, setting: object) -> MigrationPolicy:
        """The setting's value, in any case; anything else is refused (Kafka's validator)."""
        try:
            return cls(str(setting).strip().lower())
        except ValueError:
            raise ValueError(f"group.consumer.migration.policy: {setting!r}; expected one of "
                             f"{[p.value for p in cls]}") from None


@dataclass(frozen=True, slots=True)
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's order
    assignment: bytes  # ConsumerProtocolAssignment

    def metadata_for(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass(frozen=True, slots=True)
class ClassicSnapshot:
    """A classic group as the migration reads or writes it."""

    group_id: str
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: tuple[ClassicMember, ...]
    # a downgrade: the classic group rebalances once loaded (not after a static replacement,
    # whose joining member is answered from it)
    rebalance: bool = True


def can_upgrade(policy: MigrationPolicy, classic: ClassicSnapshot,
                max_size: int = 2**31 - 1) -> str | None:
    """Why the classic group may not become a consumer group (None: it may); ``max_size``
    is ``group.consumer.max.size`` (Kafka's ``validateOnlineUpgrade``)."""
    if not policy.upgrade_enabled:
        return "the online upgrade is disabled (group.consumer.migration.policy)"
    if classic.protocol_type != PROTOCOL_TYPE:
        return (f"the group does not use the consumer embedded protocol "
                f"(protocol type {classic.protocol_type!r})")
    if len(classic.members) > max_size:
        return (f"its {len(classic.members)} members exceed group.consumer.max.size "
                f"({max_size})")
    return None


def upgrade_records(classic: ClassicSnapshot,
                    topics: Mapping[str, TopicMetadata]) -> list[ConsumerGroupRecord]:
    """The consumer group's records replacing ``classic`` (``ValueError``: a member's embedded
    protocol cannot be read), in Kafka's order: subscriptions, group epoch, targets,
    assignment epoch, current assignments; then the subscribed topics' metadata."""
    group_id, epoch = classic.group_id, classic.generation
    subscriptions: dict[str, Subscription] = {}
    assigned: dict[str, Partitions] = {}
    for m in classic.members:
        # the group's protocol; in a first rebalance not chosen yet: the member's first
        sub = decode_subscription(m.metadata_for(classic.protocol_name or "") if
                                  classic.protocol_name else m.protocols[0][1])
        subscriptions[m.member_id] = Subscription(
            m.instance_id, sub.rack_id, m.client_id, m.client_host, tuple(sorted(sub.topics)),
            None, m.rebalance_timeout_ms, None,
            ClassicMemberMetadata(m.session_timeout_ms, m.protocols))
        assigned[m.member_id] = frozenset(
            (topics[t].topic_id, p) for t, ps in decode_assignment(m.assignment).items()
            if t in topics for p in ps)
    records: list[ConsumerGroupRecord] = [
        MemberSubscription(group_id, mid, s) for mid, s in subscriptions.items()]
    records.append(GroupEpoch(group_id, epoch))
    records.extend(TargetMember(group_id, mid, parts) for mid, parts in assigned.items())
    records.append(TargetEpoch(group_id, epoch))
    records.extend(MemberAssignment(group_id, mid, CurrentAssignment(
        epoch, epoch, MemberState.STABLE, parts, frozenset())) for mid, parts in assigned.items())
    names = sorted({t for s in subscriptions.values() for t in s.subscribed_topic_names
                    if t in topics})
    records.append(PartitionMetadata(group_id, tuple(topics[n] for n in names)))
    return records


@dataclass(frozen=True, slots=True)
class MemberView:
    """What the downgrade reads of a consumer group's member."""

    member_id: str
    subscription: Subscription
    target: Partitions


def can_downgrade(policy: MigrationPolicy, members: Mapping[str, Subscription],
                  leaving: str, classic_max_size: int = 2**31 - 1) -> bool:
    """Whether ``leaving`` going turns the group back into a classic group: it speaks the
    consumer protocol, every other member the classic one, there is another member, no more
    of them than ``group.max.size`` (``classic_max_size``), and the policy allows downgrades
    (Kafka's ``validateOnlineDowngradeWithFencedMember``)."""
    others = [s for mid, s in members.items() if mid != leaving]
    return (policy.downgrade_enabled and leaving in members
            and members[leaving].classic is None and bool(others)
            and len(others) <= classic_max_size
            and all(s.classic is not None for s in others))


def select_protocol(members: list[ClassicMember]) -> str:
    """The protocol every member supports that most members prefer (Kafka's
    ``ClassicGroup.selectProtocol``: each member votes for its first supported candidate)."""
    common = set.intersection(*({n for n, _ in m.protocols} for m in members))
    votes: dict[str, int] = {}
    for m in members:
        first = next(n for n, _ in m.protocols if n in common)
        votes[first] = votes.get(first, 0) + 1
    return max(sorted(votes), key=lambda n: votes[n])


def downgrade(group_id: str, group_epoch: int, members: list[MemberView], leaving: str,
              names: Mapping[uuid.UUID, str]) -> ClassicSnapshot:
    """The classic group a consumer group becomes when ``leaving`` goes: every other member
    (all classic protocol members) with its target assignment, stable at the group epoch;
    ``names`` maps topic ids to names."""
    staying = [m for m in members if m.member_id != leaving]
    classic_members = []
    for m in staying:
        c = m.subscription.classic
        assert c is not None, "only classic protocol members stay in a downgraded group"
        classic_members.append(ClassicMember(
            m.member_id, m.subscription.instance_id, m.subscription.client_id,
            m.subscription.client_host, c.session_timeout_ms,
            m.subscription.rebalance_timeout_ms, c.supported_protocols, b""))
    protocol = select_protocol(classic_members)
    out = []
    for m, cm in zip(staying, classic_members, strict=True):
        parts: dict[str, tuple[int, ...]] = {}
        for topic_id, p in sorted(m.target, key=lambda tp: (str(tp[0]), tp[1])):
            if topic_id in names:
                parts[names[topic_id]] = (*parts.get(names[topic_id], ()), p)
        meta = cm.metadata_for(protocol)
        version = version_of(meta) if len(meta) >= 2 else 0
        out.append(ClassicMember(cm.member_id, cm.instance_id, cm.client_id, cm.client_host,
                                 cm.session_timeout_ms, cm.rebalance_timeout_ms, cm.protocols,
                                 encode_assignment(parts, version)))
    return ClassicSnapshot(group_id, group_epoch, PROTOCOL_TYPE, protocol,
                           out[0].member_id if out else None, tuple(out))


def tombstones(group_id: str, member_ids: list[str]) -> list[ConsumerGroupRecord]:
    """Every record of a consumer group as a tombstone, in Kafka's order
    (``ConsumerGroup.createGroupTombstoneRecords``): the group epoch goes last."""
    out: list[ConsumerGroupRecord] = [MemberAssignment(group_id, m, None) for m in member_ids]
    out.extend(TargetMember(group_id, m, None) for m in member_ids)
    out.append(TargetEpoch(group_id, None))
    out.extend(MemberSubscription(group_id, m, None) for m in member_ids)
    out.append(PartitionMetadata(group_id, None))
    out.append(GroupEpoch(group_id, None))
    return out
