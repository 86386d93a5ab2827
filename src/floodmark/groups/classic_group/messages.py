"""What the classic group core is asked (a JoinGroup, a SyncGroup, each with the id its runner
gave the request) and what it answers, as values.

A JoinGroup or SyncGroup may wait in the core (parked) until the rebalance or the leader's
assignment completes; its answer then comes out of a later call, as an ``effects.AnswerJoin`` or
``effects.AnswerSync`` naming the same ``request_id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from floodmark.errors import ErrorCode

Protocols = tuple[tuple[str, bytes], ...]  # (protocol name, member metadata), the member's order


@dataclass(frozen=True, slots=True)
class JoinGroup:
    request_id: int
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394): a new member is handed an id first


@dataclass(frozen=True, slots=True)
class SyncGroup:
    request_id: int
    group_id: str
    member_id: str
    generation_id: int
    assignments: tuple[tuple[str, bytes], ...]  # the leader's: member id -> its assignment
    group_instance_id: str | None = None


@dataclass
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


class MemberDescription(TypedDict):
    """A member as DescribeGroups lists it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class GroupDescription(TypedDict):
    """A group as DescribeGroups (and ListGroups) show it."""

    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberDescription]
