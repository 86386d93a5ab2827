"""Consumer groups for the dashboard: members, committed offsets and lag per partition.

Every reachable broker is asked for the groups it knows (ListGroups); each group is then
described by its coordinator, the leader of the group's ``__consumer_offsets`` partition
(DescribeGroups for the members and their assignment, OffsetFetch for every committed offset).
Lag is the partition's high watermark (its leader's, from the same refresh) minus the committed
offset, as ``kafka-consumer-groups --describe`` computes it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from floodmark.broker import partition_for
from floodmark.client import KafkaConnection, RequestFailed, decode_assignment
from floodmark.metadata import OFFSETS_TOPIC

PartitionKey = tuple[str, int]
TIMEOUT_S = 2.0


def _list(address: str) -> list[str]:
    try:
        with KafkaConnection(address, timeout_s=TIMEOUT_S) as conn:
            resp = conn.request(16, 4, {"states_filter": []})
    except (OSError, RequestFailed):
        return []
    return [str(g.group_id) for g in resp.groups] if int(resp.error_code) == 0 else []


def _describe(address: str, coordinator: int, group_ids: list[str],
              high_watermarks: dict[PartitionKey, int | None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with KafkaConnection(address, timeout_s=TIMEOUT_S) as conn:
        described = conn.request(15, 5, {"groups": group_ids,
                                         "include_authorized_operations": False})
        for g in described.groups:
            members = [{"member_id": str(m.member_id), "client_id": str(m.client_id),
                        "host": str(m.client_host),
                        "assignment": decode_assignment(bytes(m.member_assignment))}
                       for m in g.members]
            fetched = conn.request(9, 7, {"group_id": g.group_id, "require_stable": False,
                                          "topics": None})
            offsets = []
            for t in fetched.topics:
                for p in t.partitions:
                    committed = int(p.committed_offset)
                    hw = high_watermarks.get((str(t.name), int(p.partition_index)))
                    offsets.append({
                        "topic": str(t.name), "partition": int(p.partition_index),
                        "committed_offset": committed, "high_watermark": hw,
                        "lag": hw - committed if hw is not None and committed >= 0 else None})
            out.append({"group": str(g.group_id), "state": str(g.group_state),
                        "protocol_type": str(g.protocol_type), "coordinator": coordinator,
                        "members": members,
                        "offsets": sorted(offsets, key=lambda o: (o["topic"], o["partition"]))})
    return out


def read_groups(reachable: dict[int, str], leaders: dict[PartitionKey, int],
                high_watermarks: dict[PartitionKey, int | None],
                pool: ThreadPoolExecutor) -> list[dict[str, Any]]:
    """``GET /api/groups``: one entry per group, from its coordinator."""
    n = sum(1 for topic, _p in leaders if topic == OFFSETS_TOPIC)
    if n == 0 or not reachable:
        return []
    names: set[str] = set()
    for listed in pool.map(_list, list(reachable.values())):
        names.update(listed)
    by_coordinator: dict[int, list[str]] = {}
    for name in sorted(names):
        coordinator = leaders.get((OFFSETS_TOPIC, partition_for(name, n)), -1)
        by_coordinator.setdefault(coordinator, []).append(name)
    groups: list[dict[str, Any]] = []
    futures = {c: pool.submit(_describe, reachable[c], c, ids, high_watermarks)
               for c, ids in by_coordinator.items() if c in reachable}
    for c, ids in by_coordinator.items():
        if c in futures:
            try:
                groups.extend(futures[c].result())
                continue
            except (OSError, RequestFailed):
                pass
        groups.extend({"group": g, "state": "Unknown", "protocol_type": None, "coordinator": c,
                       "members": [], "offsets": []} for g in ids)
    return sorted(groups, key=lambda g: str(g["group"]))
