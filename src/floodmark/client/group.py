"""A minimal classic-protocol group member for ``floodmark consume --group`` (range assignor).

Speaks the consumer protocol's embedded formats (ConsumerProtocolSubscription/Assignment v0) so it
can share a group with Java/librdkafka/kafka-python consumers that use the ``range`` assignor.
"""

from __future__ import annotations

import struct
from typing import Any

from floodmark.client.connection import KafkaConnection

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


class GroupMember:
    def __init__(self, conn: KafkaConnection, group_id: str, topics: list[str],
                 partition_counts: dict[str, int], session_timeout_ms: int = 10000) -> None:
        self.conn = conn
        self.group_id = group_id
        self.topics = topics
        self.partition_counts = partition_counts
        self.session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation_id = -1
        self.assignment: dict[str, list[int]] = {}

    def join(self, max_rounds: int = 20) -> dict[str, list[int]]:
        for _ in range(max_rounds):
            resp = self.conn.request(11, 5, {
                "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
                "rebalance_timeout": self.session_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription(self.topics)}]})
            if resp.error_code == MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code == REBALANCE_IN_PROGRESS:
                continue
            if resp.error_code != 0:
                raise RuntimeError(f"JoinGroup failed: error {int(resp.error_code)}")
            self.member_id = resp.member_id
            self.generation_id = int(resp.generation_id)
            assignments: list[dict[str, Any]] = []
            if resp.leader == self.member_id:
                subs = {m.member_id: decode_subscription(bytes(m.metadata)) for m in resp.members}
                plan = range_assign(subs, self.partition_counts)
                assignments = [{"member_id": m, "assignment": encode_assignment(a)}
                               for m, a in plan.items()]
            sync = self.conn.request(14, 3, {
                "group_id": self.group_id, "generation_id": self.generation_id,
                "member_id": self.member_id, "group_instance_id": None,
                "assignments": assignments})
            if sync.error_code == REBALANCE_IN_PROGRESS:
                continue
            if sync.error_code != 0:
                raise RuntimeError(f"SyncGroup failed: error {int(sync.error_code)}")
            self.assignment = decode_assignment(bytes(sync.assignment))
            return self.assignment
        raise RuntimeError("could not join the group")

    def heartbeat(self) -> int:
        resp = self.conn.request(12, 3, {"group_id": self.group_id,
                                         "generation_id": self.generation_id,
                                         "member_id": self.member_id, "group_instance_id": None})
        return int(resp.error_code)

    def committed(self) -> dict[tuple[str, int], int]:
        resp = self.conn.request(9, 7, {"group_id": self.group_id, "require_stable": False,
                                        "topics": [{"name": t, "partition_indexes": ps}
                                                   for t, ps in self.assignment.items()]})
        return {(t.name, int(p.partition_index)): int(p.committed_offset)
                for t in resp.topics for p in t.partitions}

    def commit(self, positions: dict[tuple[str, int], int]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in positions.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                               "committed_leader_epoch": -1,
                                               "committed_metadata": ""})
        resp = self.conn.request(8, 7, {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation_id,
            "member_id": self.member_id, "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        errors = [int(p.error_code) for t in resp.topics for p in t.partitions if p.error_code]
        if errors:
            raise RuntimeError(f"OffsetCommit failed: errors {errors}")

    def leave(self) -> None:
        self.conn.request(13, 1, {"group_id": self.group_id, "member_id": self.member_id})
