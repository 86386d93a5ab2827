"""The group coordinators' cores, sans-I/O: the classic protocol's (``classic_group``: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, generations and rebalances), KIP-848's consumer groups
(``consumer_group``: member epochs, target assignments and reconciliation, the server-side
assignors, classic members inside a consumer group and the online migration), the routing between
the two (``routing``), and what a coordinator stores in ``__consumer_offsets`` (``offsets``,
``share_records``). The broker's handlers, the simulator's group worlds and the tests all run this
code; only the broker gives it sockets and a log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.groups import routing, share_records
    from floodmark.groups.classic_group.core import ClassicGroupConfig, ClassicGroupCore
    from floodmark.groups.classic_group.effects import (
        AnswerJoin,
        AnswerSync,
        ClassicEffect,
        GroupEmptied,
        StoreGroup,
    )
    from floodmark.groups.classic_group.messages import (
        GroupDescription,
        JoinGroup,
        JoinResult,
        MemberDescription,
        SyncGroup,
    )
    from floodmark.groups.classic_group.state import Group, GroupState, Member
    from floodmark.groups.consumer_group import classic_members, migration, records
    from floodmark.groups.consumer_group.assignors import Partitions
    from floodmark.groups.consumer_group.core import (
        LEAVE_GROUP_MEMBER_EPOCH,
        LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        ConsumerGroup,
        ConsumerGroupCoordinator,
        CoreConfig,
        Heartbeat,
        HeartbeatAnswer,
        consumer_group_assignors,
    )
    from floodmark.groups.consumer_group.migration import MigrationPolicy
    from floodmark.groups.offsets import (
        CommittedOffset,
        GroupRecord,
        OffsetStore,
        decode_key,
        decode_value,
        encode_group_key,
        encode_group_value,
        partition_for,
    )
    from floodmark.groups.share_records import GroupView, MemberView, StatePartitions, TopicState

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "AnswerJoin",
    "AnswerSync",
    "ClassicEffect",
    "ClassicGroupConfig",
    "ClassicGroupCore",
    "CommittedOffset",
    "ConsumerGroup",
    "ConsumerGroupCoordinator",
    "CoreConfig",
    "Group",
    "GroupDescription",
    "GroupEmptied",
    "GroupRecord",
    "GroupState",
    "GroupView",
    "Heartbeat",
    "HeartbeatAnswer",
    "JoinGroup",
    "JoinResult",
    "Member",
    "MemberDescription",
    "MemberView",
    "MigrationPolicy",
    "OffsetStore",
    "Partitions",
    "StatePartitions",
    "StoreGroup",
    "SyncGroup",
    "TopicState",
    "classic_members",
    "consumer_group_assignors",
    "decode_key",
    "decode_value",
    "encode_group_key",
    "encode_group_value",
    "migration",
    "partition_for",
    "records",
    "routing",
    "share_records",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
