"""KIP-932's share sessions, as pure rules: one per (group, member) at a partition leader; the
set of partitions a member's ShareFetch polls without naming them again, and the epoch that
orders its ShareFetch/ShareAcknowledge requests.

``share_session_epoch`` 0 opens a session (a member's first ShareFetch, or after an error);
-1 closes it (the member's last request; acknowledgements still count); any other value must
be the session's next epoch, which every request then advances (wrapping past 2**31 - 1 to 1).
A bounded number of sessions (``max_sessions``) is kept: when a new one finds the cache full,
the sessions idle for longer than ``idle_ms`` (a member that vanished without closing its
session) are evicted; when none is, the new one is SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from floodmark.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
TopicPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the next request's epoch
    partitions: set[TopicPartition] = field(default_factory=set)
    last_used_ms: int = 0


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    error: ErrorCode
    session: ShareSession | None = None
    # sessions closed to make this one: the member's older one, idle ones evicted
    closed: tuple[ShareSession, ...] = ()
    message: str | None = None


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int = 1_000, idle_ms: int = 45_000) -> None:
        assert max_sessions > 0 and idle_ms > 0
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def begin(self, group_id: str, member_id: str, epoch: int, now_ms: int, *,
              acknowledging_only: bool = False) -> SessionAnswer:
        """The session a request with ``epoch`` runs in; advanced (or opened) when it is
        valid. A final request gets its session (or None: it had none) and closes it."""
        key = (group_id, member_id)
        current = self.sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if acknowledging_only:  # ShareAcknowledge cannot open a session
                return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                     message="ShareAcknowledge needs an open share session")
            closed = [] if current is None else [current]
            if current is None and len(self.sessions) >= self.max_sessions:
                idle = [k for k, s in self.sessions.items()
                        if now_ms - s.last_used_ms > self.idle_ms]
                if not idle:
                    return SessionAnswer(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
                closed += [self.sessions.pop(k) for k in idle]
            session = ShareSession(group_id, member_id, last_used_ms=now_ms)
            self.sessions[key] = session
            return SessionAnswer(ErrorCode.NONE, session, closed=tuple(closed))
        if current is None:
            if epoch == FINAL_EPOCH:
                return SessionAnswer(ErrorCode.NONE, None)
            return SessionAnswer(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                 message=f"no share session of member {member_id}")
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return SessionAnswer(ErrorCode.NONE, current)
        if epoch != current.epoch:
            return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 message=f"share session epoch {epoch}, expected "
                                         f"{current.epoch}")
        current.epoch = next_epoch(current.epoch)
        current.last_used_ms = now_ms
        return SessionAnswer(ErrorCode.NONE, current)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)
