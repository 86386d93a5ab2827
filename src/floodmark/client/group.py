"""A minimal classic-protocol group member for ``floodmark consume --group`` (range assignor),
that follows its coordinator through failovers.

Speaks the consumer protocol's embedded formats (ConsumerProtocolSubscription/Assignment v0) so it
can share a group with Java/librdkafka/kafka-python consumers that use the ``range`` assignor.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from floodmark.client.cluster import ClusterClient, NoBrokerAvailable, Retriable, error_text
from floodmark.client.connection import RequestFailed
from floodmark.errors import ErrorCode

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


def _str(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_subscription(topics: list[str]) -> bytes:
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def decode_subscription(data: bytes) -> list[str]:
    _version, n = struct.unpack_from(">hi", data, 0)
    pos = 6
    topics = []
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        topics.append(data[pos + 2 : pos + 2 + ln].decode())
        pos += 2 + ln
    return topics


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(assignment))
    for topic, parts in sorted(assignment.items()):
        out += _str(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    _version, n = struct.unpack_from(">hi", data, 0)
    pos = 6
    out: dict[str, list[int]] = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + ln].decode()
        pos += 2 + ln
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[topic] = list(struct.unpack_from(f">{count}i", data, pos))
        pos += 4 * count
    return out


def range_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    topics = sorted({t for ts in members.values() for t in ts})
    for topic in topics:
        subs = sorted(m for m, ts in members.items() if topic in ts)
        n = partitions.get(topic, 0)
        per, extra = divmod(n, len(subs)) if subs else (0, 0)
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            out[m][topic] = list(range(start, start + count))
            start += count
    return out


class GroupError(RequestFailed):
    """The group refused this member for good (a bad group id, a fenced instance...), or its
    coordinator could not be reached in time: one line for the person running the command."""


# Answers that mean "ask FindCoordinator again" (Kafka's consumer does the same).
COORDINATOR_MOVED = frozenset({int(ErrorCode.NOT_COORDINATOR),
                               int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                               int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)})
# Answers that mean "this member must join again".
REJOIN = frozenset({int(ErrorCode.REBALANCE_IN_PROGRESS), int(ErrorCode.UNKNOWN_MEMBER_ID),
                    int(ErrorCode.ILLEGAL_GENERATION)})
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 2.0


class GroupMember:
    """One member of a classic consumer group that follows its coordinator: every request goes
    to the broker FindCoordinator names; a lost connection, NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS makes it ask again and retry
    with backoff (0.1 s doubling to 2 s) until ``coordinator_timeout_s`` has passed."""

    def __init__(self, cluster: ClusterClient, group_id: str, topics: list[str],
                 partition_counts: dict[str, int], session_timeout_ms: int = 10000,
                 coordinator_timeout_s: float = 120.0) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topics = topics
        self.partition_counts = partition_counts
        self.session_timeout_ms = session_timeout_ms
        self.coordinator_timeout_s = coordinator_timeout_s
        self.member_id = ""
        self.generation_id = -1
        self.assignment: dict[str, list[int]] = {}
        self.coordinator_changes = 0  # times the member had to find its coordinator again
        self._coordinator: int | None = None

    # -- the coordinator ---------------------------------------------------------------------
    def _request(self, api_key: int, version: int, body: dict[str, Any],
                 error_of: Callable[[Any], int], *, timeout_s: float | None = None) -> Any:
        """``body`` to the group's coordinator; the answer, once it is not a coordinator error
        (``error_of`` reads the answer's error code)."""
        deadline = time.monotonic() + (self.coordinator_timeout_s if timeout_s is None
                                       else timeout_s)
        backoff_s = BACKOFF_MIN_S
        why = ""
        while True:
            try:
                if self._coordinator is None:
                    self._coordinator = self.cluster.coordinator(self.group_id)
                resp = self.cluster.request_node(self._coordinator, api_key, version, body)
                code = int(error_of(resp))
                if code not in COORDINATOR_MOVED:
                    return resp
                why = error_text(code)
            except (RequestFailed, Retriable) as exc:
                if isinstance(exc, GroupError) or (isinstance(exc, RequestFailed)
                                                   and exc.__cause__ is None
                                                   and not isinstance(exc, NoBrokerAvailable)):
                    raise  # an answer that said no (not a lost connection)
                why = str(exc)
            self._coordinator = None
            self.coordinator_changes += 1
            if time.monotonic() + backoff_s > deadline:
                raise GroupError(f"group {self.group_id}: no coordinator answered ({why})")
            time.sleep(backoff_s)
            backoff_s = min(BACKOFF_MAX_S, backoff_s * 2)

    # -- membership ------------------------------------------------------------------------------
    def join(self, max_rounds: int = 50) -> dict[str, list[int]]:
        for _ in range(max_rounds):
            resp = self._request(11, 5, {
                "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.session_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription(self.topics)}]},
                lambda r: r.error_code)
            code = int(resp.error_code)
            if code == MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if code == int(ErrorCode.UNKNOWN_MEMBER_ID):
                self.member_id = ""  # forgotten (session expired): join afresh
                continue
            if code == REBALANCE_IN_PROGRESS:
                continue
            if code != 0:
                raise GroupError(f"group {self.group_id}: JoinGroup refused: {error_text(code)}")
            self.member_id = resp.member_id
            self.generation_id = int(resp.generation_id)
            assignments: list[dict[str, Any]] = []
            if resp.leader == self.member_id:
                subs = {m.member_id: decode_subscription(bytes(m.metadata)) for m in resp.members}
                plan = range_assign(subs, self.partition_counts)
                assignments = [{"member_id": m, "assignment": encode_assignment(a)}
                               for m, a in plan.items()]
            sync = self._request(14, 3, {
                "group_id": self.group_id, "generation_id": self.generation_id,
                "member_id": self.member_id, "group_instance_id": None,
                "assignments": assignments}, lambda r: r.error_code)
            code = int(sync.error_code)
            if code == int(ErrorCode.UNKNOWN_MEMBER_ID):
                self.member_id = ""
                continue
            if code in REJOIN:
                continue
            if code != 0:
                raise GroupError(f"group {self.group_id}: SyncGroup refused: {error_text(code)}")
            self.assignment = decode_assignment(bytes(sync.assignment))
            return self.assignment
        raise GroupError(f"group {self.group_id}: could not join in {max_rounds} rounds")

    def heartbeat(self) -> int:
        """0, or the error that makes this member join again (``REJOIN``)."""
        resp = self._request(12, 3, {"group_id": self.group_id,
                                     "generation_id": self.generation_id,
                                     "member_id": self.member_id, "group_instance_id": None},
                             lambda r: r.error_code)
        code = int(resp.error_code)
        if code and code not in REJOIN:
            raise GroupError(f"group {self.group_id}: Heartbeat refused: {error_text(code)}")
        return code

    def committed(self) -> dict[tuple[str, int], int]:
        resp = self._request(9, 7, {"group_id": self.group_id, "require_stable": False,
                                    "topics": [{"name": t, "partition_indexes": ps}
                                               for t, ps in self.assignment.items()]},
                             lambda r: r.error_code)
        if int(resp.error_code):
            raise GroupError(f"group {self.group_id}: OffsetFetch refused: "
                             f"{error_text(int(resp.error_code))}")
        return {(t.name, int(p.partition_index)): int(p.committed_offset)
                for t in resp.topics for p in t.partitions}

    def commit(self, positions: dict[tuple[str, int], int], *,
               timeout_s: float | None = None) -> int:
        """Commit ``positions`` under this member's generation: 0, or the error that makes it
        join again (``REJOIN``: nothing was committed)."""
        if not positions:
            return 0
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in positions.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                               "committed_leader_epoch": -1,
                                               "committed_metadata": ""})
        resp = self._request(8, 7, {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation_id,
            "member_id": self.member_id, "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
            lambda r: next((int(p.error_code) for t in r.topics for p in t.partitions
                            if int(p.error_code) in COORDINATOR_MOVED), 0),
            timeout_s=timeout_s)
        errors = {int(p.error_code) for t in resp.topics for p in t.partitions if p.error_code}
        if errors & REJOIN:
            return min(errors & REJOIN)
        if errors:
            raise GroupError(f"group {self.group_id}: OffsetCommit refused: "
                             + ", ".join(error_text(e) for e in sorted(errors)))
        return 0

    def leave(self, *, timeout_s: float = 5.0) -> bool:
        """LeaveGroup, so the group rebalances at once rather than after the session timeout;
        False when no coordinator took it within ``timeout_s``."""
        if not self.member_id:
            return True
        try:
            self._request(13, 3, {"group_id": self.group_id, "members": [
                {"member_id": self.member_id, "group_instance_id": None}]},
                lambda r: r.error_code, timeout_s=timeout_s)
        except (GroupError, RequestFailed, Retriable):
            return False
        self.member_id = ""
        return True
