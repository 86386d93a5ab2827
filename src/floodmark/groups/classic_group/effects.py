"""What the classic group core asks its runner to do, as values, applied in order.

``ClassicGroupCore`` never waits: a parked JoinGroup or SyncGroup is answered by an
``AnswerJoin``/``AnswerSync`` out of whichever later call completes it, and a group record to
store is a ``StoreGroup``. A ``StoreGroup`` with a ``token`` holds SyncGroup answers back until
the runner reports the store's outcome with ``ClassicGroupCore.stored(token, error, now_ms)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.errors import ErrorCode
from floodmark.groups.classic_group.messages import JoinResult
from floodmark.groups.classic_group.state import GroupState
from floodmark.groups.offsets import GroupRecord


@dataclass(frozen=True, slots=True)
class AnswerJoin:
    """Answer the JoinGroup ``request_id`` (at once, or after it waited in the core)."""

    request_id: int
    result: JoinResult


@dataclass(frozen=True, slots=True)
class AnswerSync:
    """Answer the SyncGroup ``request_id``; ``state`` is the group's when it was answered."""

    request_id: int
    error: ErrorCode
    assignment: bytes
    state: GroupState | None


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """Write the group's ``GroupMetadataValue`` to its ``__consumer_offsets`` partition (Kafka's
    storeGroup). ``token`` None: nothing waits for it (log a failure); otherwise report the
    outcome with ``stored(token, ...)``: the generation's SyncGroup answers wait for it."""

    group_id: str
    record: GroupRecord
    token: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class GroupEmptied:
    """The group's last member went (the runner may drop what it keeps for the group)."""

    group_id: str


ClassicEffect = AnswerJoin | AnswerSync | StoreGroup | GroupEmptied

__all__ = ["AnswerJoin", "AnswerSync", "ClassicEffect", "GroupEmptied", "StoreGroup"]
