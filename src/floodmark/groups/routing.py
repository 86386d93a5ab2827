"""Which of the two group coordinator cores serves a group's request, and how a group changes
kind (KIP-848's online migration), as pure rules (Kafka's ``GroupMetadataManager``: the
routing of ``classicGroupJoin``/``consumerGroupHeartbeat``/``validateOffsetCommit`` by the
group's type, ``convertToConsumerGroup``, ``convertToClassicGroup``).

No asyncio, sockets or clocks: the inputs are the two cores (``classic_group.core``,
``consumer_group.core``) and ``now_ms``, the outputs are routes, records and the classic
core's effects. The broker's handlers (``handlers.classic_protocol``, ``group_apis``,
``consumer_group_apis``) and the simulator's mixed world (``sim/groups/mixed.py``) both call
these, so the simulator proves the routing that runs.

A group id is one kind at a time:

* **JoinGroup** into a consumer group with members is the consumer group's (a classic protocol
  member, ``consumer_group.classic_members``); an empty consumer group gives way (its records
  become tombstones) and the classic core serves the join; else the classic core's.
* **SyncGroup, Heartbeat, LeaveGroup, OffsetCommit**: a consumer group's (with or without
  members) when one exists, else the classic core's.
* **ConsumerGroupHeartbeat** into a classic group with members upgrades it when the heartbeat
  joins (member epoch 0), ``group.consumer.migration.policy`` allows it and the group uses the
  consumer protocol (``migration.can_upgrade``); otherwise it is GROUP_ID_NOT_FOUND. An empty
  classic group (or only its stored record) gives way to a joining member.
* **ShareGroupHeartbeat** for an id that is a consumer group, or a classic group with members,
  is refused (``share_group_conflict``): a group id is one kind.
* **DeleteGroups** deletes a share group, else a consumer group, else the classic group or the
  offsets stored under the id (``delete_route``).
* A consumer-group **change** is stored in one batch: an upgrade's classic tombstone first,
  the consumer group's records, and, when the change downgraded the group (the last
  consumer-protocol member went), the classic group's record, which the classic core loads and
  rebalances once stored. A batch that cannot be stored is undone on both cores.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from floodmark.errors import ErrorCode
from floodmark.groups.classic_group.core import ClassicGroupCore
from floodmark.groups.classic_group.effects import ClassicEffect
from floodmark.groups.classic_group.state import Group
from floodmark.groups.consumer_group import migration
from floodmark.groups.consumer_group import records as cg_records
from floodmark.groups.consumer_group.core import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    Heartbeat,
    HeartbeatAnswer,
)
from floodmark.groups.offsets import (
    GroupRecord,
    Loaded,
    MemberRecord,
    encode_group_key,
    encode_group_value,
)

__all__ = [
    "Change",
    "Core",
    "Delete",
    "HeartbeatRoute",
    "Join",
    "begin_upgrade",
    "change",
    "commit_error",
    "consumer_group_heartbeat",
    "delete_route",
    "heartbeat",
    "join_group",
    "load",
    "owner",
    "record_of_snapshot",
    "share_group_conflict",
    "snapshot_of",
    "stored",
    "take_over",
    "undo",
    "validate_commit",
]


class Core(enum.Enum):
    """The core that serves a request."""

    CLASSIC = "classic"  # classic_group.core
    CONSUMER = "consumer"  # consumer_group.core (classic protocol members: classic_members)


class Join(enum.Enum):
    """Where a JoinGroup goes."""

    CLASSIC = "classic"
    CONSUMER = "consumer"  # a classic protocol member of a consumer group with members
    CONSUMER_GROUP_GIVES_WAY = "consumer-group-gives-way"  # delete the empty one, then CLASSIC


def _consumer_group(consumer: ConsumerGroupCoordinator, group_id: str,
                    with_members: bool) -> bool:
    g = consumer.groups.get(group_id)
    return g is not None and (bool(g.members) or not with_members)


def owner(consumer: ConsumerGroupCoordinator, group_id: str) -> Core:
    """SyncGroup, Heartbeat, LeaveGroup and OffsetCommit: a consumer group's when one exists
    (with or without members), else the classic core's."""
    return Core.CONSUMER if _consumer_group(consumer, group_id, with_members=False) \
        else Core.CLASSIC


def join_group(consumer: ConsumerGroupCoordinator, group_id: str) -> Join:
    """JoinGroup (Kafka's ``classicGroupJoin``): into a consumer group with members always
    (the migration policy governs only the conversions); an empty one gives way."""
    if _consumer_group(consumer, group_id, with_members=True):
        return Join.CONSUMER
    if _consumer_group(consumer, group_id, with_members=False):
        return Join.CONSUMER_GROUP_GIVES_WAY
    return Join.CLASSIC


class Delete(enum.Enum):
    """Which kind of group a DeleteGroups of an id deletes (Kafka's
    ``GroupMetadataManager.groupsByType`` lookup in ``deleteGroups``)."""

    SHARE = "share"  # KIP-932: an empty share group goes
    CONSUMER = "consumer"  # KIP-848: an empty consumer group goes, with its offsets
    CLASSIC = "classic"  # the classic group and/or the offsets stored under the id
    NOT_FOUND = "not-found"


def delete_route(share_group: bool, consumer: ConsumerGroupCoordinator,
                 classic_groups: Mapping[str, Group], has_offsets: bool,
                 group_id: str) -> Delete:
    """``share_group``: the share coordinator has ``group_id``; ``has_offsets``: offsets are
    stored under it."""
    if share_group:
        return Delete.SHARE
    if _consumer_group(consumer, group_id, with_members=False):
        return Delete.CONSUMER
    if group_id in classic_groups or has_offsets:
        return Delete.CLASSIC
    return Delete.NOT_FOUND


def share_group_conflict(consumer: ConsumerGroupCoordinator,
                         classic_groups: Mapping[str, Group], group_id: str) -> bool:
    """A ShareGroupHeartbeat for ``group_id`` is refused (GROUP_ID_NOT_FOUND, "not a share
    group"): it is a consumer group, or a classic group with members (an empty classic group
    may be only its stored offsets)."""
    classic = classic_groups.get(group_id)
    return _consumer_group(consumer, group_id, with_members=False) or (
        classic is not None and bool(classic.members))


@dataclass(frozen=True, slots=True)
class HeartbeatRoute:
    """Where a ConsumerGroupHeartbeat goes: refused (GROUP_ID_NOT_FOUND, ``refused`` says
    why), converting the classic group ``upgrade`` first, after the empty classic group gives
    way (``classic_gives_way``: delete it, and tombstone its record when one is stored), or
    straight to the consumer-group core (all None/False)."""

    refused: str | None = None
    upgrade: migration.ClassicSnapshot | None = None
    classic_gives_way: bool = False


def consumer_group_heartbeat(classic_groups: Mapping[str, Group],
                             consumer: ConsumerGroupCoordinator, group_id: str,
                             member_epoch: int, classic_stored: bool) -> HeartbeatRoute:
    """``classic_groups``: the classic core's groups; ``classic_stored``: a classic group
    record of ``group_id`` is stored (its last, not a tombstone)."""
    classic = classic_groups.get(group_id)
    if classic is not None and classic.members:
        upgrade = snapshot_of(classic)
        why = "the heartbeat does not join (member epoch 0)" if member_epoch != 0 else \
            migration.can_upgrade(consumer.config.migration_policy, upgrade,
                                  consumer.config.max_size)
        return HeartbeatRoute(refused=why) if why is not None else HeartbeatRoute(upgrade=upgrade)
    gives_way = member_epoch == 0 and group_id not in consumer.groups and (
        classic is not None or classic_stored)
    return HeartbeatRoute(classic_gives_way=gives_way)


def begin_upgrade(classic: ClassicGroupCore, upgrade: migration.ClassicSnapshot,
                  now_ms: int) -> tuple[GroupRecord, list[ClassicEffect]]:
    """The classic core lets the group go: its members answer to the consumer group's rules
    from now on (parked JoinGroup and SyncGroup requests: REBALANCE_IN_PROGRESS, they rejoin).
    Returns the classic group's record as it was (the upgrade's ``replaces_classic``: loaded
    back when the heartbeat is refused or its batch is not stored) and the effects."""
    record = record_of_snapshot(upgrade, now_ms)
    return record, classic.unload([upgrade.group_id], ErrorCode.REBALANCE_IN_PROGRESS)


def heartbeat(consumer: ConsumerGroupCoordinator, hb: Heartbeat,
              upgrade: migration.ClassicSnapshot | None,
              topics: Mapping[str, cg_records.TopicMetadata],
              now_ms: int) -> tuple[HeartbeatAnswer, list[cg_records.ConsumerGroupRecord]]:
    """The heartbeat, converting ``upgrade`` to a consumer group first; a refused heartbeat
    converts nothing (as in Kafka). Returns the answer and the records to store."""
    records: list[cg_records.ConsumerGroupRecord] = []
    if upgrade is not None:
        try:
            records = consumer.upgrade(upgrade, topics, now_ms)
        except ValueError as exc:
            return HeartbeatAnswer(
                ErrorCode.GROUP_ID_NOT_FOUND, hb.member_id, hb.member_epoch,
                consumer.config_of(hb.group_id).heartbeat_interval_ms,
                message=f"Cannot upgrade the classic group {hb.group_id} to a consumer group: "
                        f"{exc}"), []
    ans = consumer.heartbeat(hb, topics, now_ms)
    if ans.error is not ErrorCode.NONE:
        if upgrade is not None:
            consumer.restore(hb.group_id, None)
        return ans, []
    return ans, [*records, *ans.records]


@dataclass(frozen=True, slots=True)
class Change:
    """A consumer-group change made, to be stored as one batch (``pairs``)."""

    group_id: str
    before: ConsumerGroup | None  # the group before the change: what ``undo`` puts back
    records: tuple[cg_records.ConsumerGroupRecord, ...]
    replaces_classic: GroupRecord | None  # an upgrade: the classic group's record as it was
    classic: GroupRecord | None  # a downgrade: the classic group it became
    rebalance: bool  # a downgrade: the classic group rebalances once stored

    def pairs(self) -> list[tuple[bytes, bytes | None]]:
        """The batch in ``__consumer_offsets``' layouts (None: a tombstone), in order: an
        upgrade's classic tombstone, the consumer group's records, a downgrade's classic
        record."""
        key = encode_group_key(self.group_id)
        out: list[tuple[bytes, bytes | None]] = []
        if self.replaces_classic is not None:
            out.append((key, None))
        out.extend(cg_records.encode(r) for r in self.records)
        if self.classic is not None:
            out.append((key, encode_group_value(self.classic)))
        return out


def change(consumer: ConsumerGroupCoordinator, group_id: str,
           make: Callable[[], Sequence[cg_records.ConsumerGroupRecord]], now_ms: int,
           replaces_classic: GroupRecord | None = None) -> Change:
    """Run ``make`` (a call of the consumer-group core that returns the records it emitted)
    and gather what it changed; no records: nothing to store."""
    before = consumer.snapshot(group_id)
    records = tuple(make())
    downgraded = consumer.take_downgrade(group_id)
    classic = None if downgraded is None or not records else \
        record_of_snapshot(downgraded, now_ms)
    return Change(group_id, before, records, replaces_classic, classic,
                  classic is not None and downgraded is not None and downgraded.rebalance)


def take_over(classic: ClassicGroupCore, c: Change, now_ms: int) -> list[ClassicEffect]:
    """A downgrade: the classic core serves the group from now on (its members heartbeat to
    it), before the batch is stored."""
    if c.classic is None:
        return []
    return classic.load(c.group_id, c.classic, now_ms)[1]


def undo(classic: ClassicGroupCore, consumer: ConsumerGroupCoordinator, c: Change,
         now_ms: int) -> list[ClassicEffect]:
    """The batch was not stored: the consumer group goes back to what it was (so the core
    never runs ahead of its log), a downgrade's classic group goes, an upgrade's comes back."""
    consumer.restore(c.group_id, c.before)
    out: list[ClassicEffect] = []
    if c.classic is not None:
        out += classic.unload([c.group_id], ErrorCode.REBALANCE_IN_PROGRESS)
    if c.replaces_classic is not None:
        out += classic.load(c.group_id, c.replaces_classic, now_ms)[1]
    return out


def stored(classic: ClassicGroupCore, c: Change, now_ms: int) -> list[ClassicEffect]:
    """The batch is stored: a downgraded group rebalances in the classic core."""
    if not c.rebalance:
        return []
    return classic.rebalance(c.group_id, "downgraded from a consumer group", now_ms)


def load(classic: ClassicGroupCore, consumer: ConsumerGroupCoordinator, loaded: Loaded,
         now_ms: int) -> list[ClassicEffect]:
    """A new coordinator takes the groups of a ``__consumer_offsets`` partition as its log
    left them (``OffsetStore.load_partition``): each classic group from its last record but
    an empty one a consumer group replaced; each consumer group from its records, every member
    with a fresh session."""
    out: list[ClassicEffect] = []
    for group_id, rec in loaded.groups.items():
        if group_id in loaded.consumer_groups and not rec.members:
            continue
        out += classic.load(group_id, rec, now_ms)[1]
    for records in loaded.consumer_groups.values():
        for r in records:
            consumer.apply(r)
    consumer.loaded(loaded.consumer_groups, now_ms)
    return out


# -- OffsetCommit -------------------------------------------------------------------------------
def validate_commit(classic: ClassicGroupCore, consumer: ConsumerGroupCoordinator,
                    group_id: str, member_id: str, generation: int, instance_id: str | None,
                    api_version: int, now_ms: int) -> ErrorCode:
    """OffsetCommit's member check by the core that owns the group (KIP-848: the generation
    is the member epoch); a classic member's commit counts as a sign of life."""
    if owner(consumer, group_id) is Core.CONSUMER:
        return consumer.validate_commit(group_id, member_id, generation, api_version)
    return classic.validate_commit(group_id, member_id, generation, instance_id, now_ms)


def commit_error(classic: ClassicGroupCore, consumer: ConsumerGroupCoordinator,
                 group_id: str, member_id: str, generation: int, instance_id: str | None,
                 api_version: int) -> ErrorCode:
    """``validate_commit`` without touching the member's session: may it commit now?"""
    if owner(consumer, group_id) is Core.CONSUMER:
        return consumer.validate_commit(group_id, member_id, generation, api_version)
    return classic.commit_error(group_id, member_id, generation, instance_id)


# -- a classic group as the migration reads and writes it ----------------------------------------
def snapshot_of(g: Group) -> migration.ClassicSnapshot:
    """A classic group as ``consumer_group.migration`` reads it (its upgrade)."""
    return migration.ClassicSnapshot(
        g.group_id, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
        tuple(migration.ClassicMember(m.member_id, m.group_instance_id, m.client_id,
                                      m.client_host, m.session_timeout_ms,
                                      m.rebalance_timeout_ms, m.protocols, m.assignment)
              for m in g.members.values()))


def record_of_snapshot(s: migration.ClassicSnapshot, now_ms: int) -> GroupRecord:
    """The ``GroupMetadataValue`` of the classic group a consumer group became (its
    downgrade), or of one it replaces (its upgrade): what is stored, and what the classic core
    loads."""
    protocol = s.protocol_name or ""
    return GroupRecord(s.protocol_type or "", s.generation, s.protocol_name, s.leader, now_ms,
                       tuple(MemberRecord(m.member_id, m.instance_id, m.client_id,
                                          m.client_host, m.rebalance_timeout_ms,
                                          m.session_timeout_ms, m.metadata_for(protocol),
                                          m.assignment) for m in s.members))
