"""A classic group's state as the core keeps it: Kafka's group states, the members, and the
group's own timers (deadlines in ms of the runner's clock, ``None`` when not running)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from floodmark.groups.classic_group.messages import Protocols


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    last_heartbeat_ms: int = 0
    join_request: int | None = None  # the JoinGroup parked in the core, waiting for the round
    sync_request: int | None = None  # the SyncGroup parked, waiting for the leader's assignment

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    @property
    def parked(self) -> bool:
        """Waiting in JoinGroup or SyncGroup: alive (Kafka's shouldKeepAlive), it cannot
        heartbeat until the coordinator answers it."""
        return self.join_request is not None or self.sync_request is not None


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # KIP-394 ids handed out with MEMBER_ID_REQUIRED -> when they lapse unused (ms)
    pending_members: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    rebalance_deadline_ms: int | None = None  # the round ends (members not rejoined are removed)
    initial_delay_deadline_ms: int | None = None  # group.initial.rebalance.delay.ms runs out
    storing: bool = False  # the leader's assignment is being stored (SyncGroup waits)
