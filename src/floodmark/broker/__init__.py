"""The broker: the asyncio shell around the cores. Its server reads and writes Kafka frames,
its handlers translate each request between the wire and the cores' typed values (replication,
transactions, the group coordinators in ``classic_group``, ``consumer_group`` and
``share_group``), and ``cluster_member`` joins it to the controller quorum. See
docs/architecture.md and docs/broker.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.broker import group_routing
    from floodmark.broker.broker import Broker
    from floodmark.broker.classic_group.core import ClassicGroupConfig, ClassicGroupCore
    from floodmark.broker.classic_group.effects import (
        AnswerJoin,
        AnswerSync,
        ClassicEffect,
        GroupEmptied,
        StoreGroup,
    )
    from floodmark.broker.classic_group.messages import JoinGroup, JoinResult, SyncGroup
    from floodmark.broker.classic_group.state import GroupState
    from floodmark.broker.config import BrokerConfig
    from floodmark.broker.consumer_group import classic_members, migration, records
    from floodmark.broker.consumer_group.core import (
        LEAVE_GROUP_MEMBER_EPOCH,
        LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        ConsumerGroupCoordinator,
        CoreConfig,
        Heartbeat,
    )
    from floodmark.broker.membership import LocalMembership
    from floodmark.broker.offsets import (
        GroupRecord,
        OffsetStore,
        decode_key,
        decode_value,
        encode_group_key,
        encode_group_value,
        partition_for,
    )

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "AnswerJoin",
    "AnswerSync",
    "Broker",
    "BrokerConfig",
    "ClassicEffect",
    "ClassicGroupConfig",
    "ClassicGroupCore",
    "ConsumerGroupCoordinator",
    "CoreConfig",
    "GroupEmptied",
    "GroupRecord",
    "GroupState",
    "Heartbeat",
    "JoinGroup",
    "JoinResult",
    "LocalMembership",
    "OffsetStore",
    "StoreGroup",
    "SyncGroup",
    "classic_members",
    "decode_key",
    "decode_value",
    "encode_group_key",
    "encode_group_value",
    "group_routing",
    "migration",
    "partition_for",
    "records",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
