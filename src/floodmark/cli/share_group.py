"""``floodmark share-group list|describe``: KIP-932's share groups (kafka-share-groups.sh's
jobs): the groups with their state; a group's members with their assignments, and per partition
the share-partition start offset (SPSO), the log end offset and the records between them not yet
acknowledged. ``--json`` for both."""

from __future__ import annotations

import argparse
import json
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect, coordinator_request
from floodmark.client import ClusterClient, RequestFailed
from floodmark.errors import ErrorCode

LIST_GROUPS, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 16, 77, 90


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("list", help="every share group with its state")
    p.add_argument("--json", action="store_true")
    add_bootstrap(p)
    p.set_defaults(func=share_group_list)
    p = subparsers.add_parser("describe", help="members, assignments, and per partition the "
                                               "start offset, log end offset and lag")
    p.add_argument("group")
    p.add_argument("--json", action="store_true")
    add_bootstrap(p)
    p.set_defaults(func=share_group_describe)


def share_groups(cluster: ClusterClient) -> dict[str, str]:
    """Every share group with its state: each coordinator lists its own (ListGroups v5,
    type ``share``)."""
    states: dict[str, str] = {}
    cluster.metadata([])
    failures: list[str] = []
    for node in sorted(cluster.brokers):
        try:
            resp = cluster.request_node(node, LIST_GROUPS, 5, {"states_filter": [],
                                                                "types_filter": ["share"]})
        except RequestFailed as exc:
            failures.append(str(exc))  # a broker that just died coordinates nothing now
            continue
        for g in resp.groups:
            states[str(g.group_id)] = str(g.group_state)
    if failures and len(failures) == len(cluster.brokers):
        raise RequestFailed("no broker answered ListGroups: " + "; ".join(failures))
    return states


def share_group_list(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        states = share_groups(cluster)
    if args.json:
        print(json.dumps([{"group": g, "state": s} for g, s in sorted(states.items())]))
    else:
        for g, state in sorted(states.items()):
            print(f"{g}\t{state}")
    return 0


def describe(cluster: ClusterClient, group: str) -> dict[str, Any]:
    """The group's members (ShareGroupDescribe) and its partitions' start offsets
    (DescribeShareGroupOffsets) with each partition's log end offset."""
    desc = coordinator_request(cluster, group, SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": [group], "include_authorized_operations": False},
        lambda r: int(r.groups[0].error_code)).groups[0]
    if int(desc.error_code) != ErrorCode.NONE:
        raise CliError(f"share group {group}: {ErrorCode(int(desc.error_code)).name}"
                       + (f" ({desc.error_message})" if desc.error_message else ""))
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "member_epoch": int(m.member_epoch),
                "assignment": sorted(f"{t.topic_name}-{p}" for t in m.assignment.topic_partitions
                                     for p in t.partitions)}
               for m in desc.members]
    offsets = coordinator_request(cluster, group, DESCRIBE_SHARE_GROUP_OFFSETS, 0, {
        "groups": [{"group_id": group, "topics": None}]},
        lambda r: int(r.groups[0].error_code)).groups[0]
    partitions = []
    for t in offsets.topics:
        for p in t.partitions:
            start = int(p.start_offset)
            end = _log_end_offset(cluster, str(t.topic_name), int(p.partition_index))
            partitions.append({"topic": str(t.topic_name), "partition": int(p.partition_index),
                               "start_offset": start, "log_end_offset": end,
                               "lag": max(0, end - start) if start >= 0 and end >= 0 else None,
                               "error": None if int(p.error_code) == 0
                               else ErrorCode(int(p.error_code)).name})
    return {"group": group, "state": desc.group_state, "group_epoch": int(desc.group_epoch),
            "assignment_epoch": int(desc.assignment_epoch), "members": members,
            "partitions": sorted(partitions, key=lambda x: (x["topic"], x["partition"]))}


def _log_end_offset(cluster: ClusterClient, topic: str, partition: int) -> int:
    try:
        resp = cluster.request_node(cluster.leader(topic, partition), 2, 5, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1,
                 "timestamp": -1}]}]})
    except RequestFailed:
        return -1
    p = resp.topics[0].partitions[0]
    return int(p.offset) if int(p.error_code) == 0 else -1


def share_group_describe(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        out = describe(cluster, args.group)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"group {out['group']}  state {out['state']}  group epoch {out['group_epoch']}")
    print("MEMBER\tCLIENT\tHOST\tEPOCH\tASSIGNMENT")
    for m in out["members"]:
        print(f"{m['member_id']}\t{m['client_id']}\t{m['host']}\t{m['member_epoch']}\t"
              f"{','.join(m['assignment']) or '-'}")
    print("TOPIC\tPARTITION\tSTART-OFFSET\tLOG-END-OFFSET\tLAG")
    for p in out["partitions"]:
        lag = "-" if p["lag"] is None else p["lag"]
        print(f"{p['topic']}\t{p['partition']}\t{p['start_offset']}\t{p['log_end_offset']}\t"
              f"{lag}")
    return 0
