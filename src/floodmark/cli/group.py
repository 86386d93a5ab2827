"""``floodmark group list|describe|delete|reset-offsets|delete-offsets``: kafka-consumer-groups.sh's
jobs with its columns, ``--json`` for every listing; moving offsets lives in ``group_offsets``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from floodmark.cli import group_offsets
from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    connect,
    coordinator_request,
    offsets_at,
    report,
)
from floodmark.cli.group_offsets import all_groups
from floodmark.client import ClusterClient, RequestFailed


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("group", help="consumer groups: list, describe, delete, "
                                                "reset or delete offsets "
                                                "(kafka-consumer-groups.sh)")
    gsub = group.add_subparsers(dest="group_command", metavar="ACTION")
    p = gsub.add_parser("list", help="every group with its state")
    p.add_argument("--json", action="store_true")
    add_bootstrap(p)
    p.set_defaults(func=group_list)
    p = gsub.add_parser("describe", help="committed offset, log end offset and lag per partition")
    p.add_argument("group")
    p.add_argument("--json", action="store_true")
    add_bootstrap(p)
    p.set_defaults(func=group_describe)
    p = gsub.add_parser("delete", help="delete an empty group and its offsets")
    p.add_argument("group")
    add_bootstrap(p)
    p.set_defaults(func=group_delete)
    group_offsets.register(gsub)
    group.set_defaults(func=lambda a: (group.print_help(), 2)[1])


def group_list(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        states = all_groups(cluster)
    if args.json:
        print(json.dumps([{"group": g, "state": s} for g, s in sorted(states.items())]))
    else:
        for g, state in sorted(states.items()):
            print(f"{g}\t{state}")
    return 0


def _consumer_group(cluster: ClusterClient, group: str
                    ) -> tuple[str, dict[tuple[str, int], tuple[str, str, str]]] | None:
    """A KIP-848 consumer group's state and its members' partitions (ConsumerGroupDescribe);
    None when the group is not one (GROUP_ID_NOT_FOUND) or the broker does not serve the API."""
    try:
        desc = coordinator_request(cluster, group, 69, 1, {
            "group_ids": [group], "include_authorized_operations": False})
    except RequestFailed:
        return None
    g = desc.groups[0]
    if int(g.error_code) != 0:
        return None
    members = {(str(tp.topic_name), int(p)): (str(m.member_id), str(m.client_host),
                                              str(m.client_id))
               for m in g.members for tp in m.assignment.topic_partitions for p in tp.partitions}
    return str(g.group_state), members


def _group_rows(cluster: ClusterClient, group: str) -> tuple[str, list[dict[str, Any]]]:
    members: dict[tuple[str, int], tuple[str, str, str]] = {}
    consumer_group = _consumer_group(cluster, group)
    if consumer_group is not None:
        state, members = consumer_group
    else:
        desc = coordinator_request(cluster, group, 15, 5, {
            "groups": [group], "include_authorized_operations": False})
        g = desc.groups[0]
        state = str(g.group_state)
        from floodmark.client import decode_assignment

        for m in g.members:
            try:
                assigned = decode_assignment(bytes(m.member_assignment))
            except Exception:
                assigned = {}
            for topic, parts in assigned.items():
                for p in parts:
                    members[(topic, p)] = (str(m.member_id), str(m.client_host),
                                           str(m.client_id))
    fetched = coordinator_request(cluster, group, 9, 7, {"group_id": group, "topics": None,
                                                           "require_stable": False})
    rows = []
    committed = {(str(t.name), int(p.partition_index)): int(p.committed_offset)
                 for t in fetched.topics for p in t.partitions}
    for topic in sorted({t for t, _p in [*committed, *members]}):
        parts = sorted({p for t, p in [*committed, *members] if t == topic})
        ends = offsets_at(cluster, topic, parts, -1)
        for p in parts:
            current = committed.get((topic, p), -1)
            member = members.get((topic, p), ("-", "-", "-"))
            rows.append({"group": group, "topic": topic, "partition": p,
                         "current_offset": current, "log_end_offset": ends[p],
                         "lag": ends[p] - current if current >= 0 else None,
                         "consumer_id": member[0], "host": member[1], "client_id": member[2]})
    return state, rows


def group_describe(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        state, rows = _group_rows(cluster, args.group)
    if state == "Dead" and not rows:  # kafka-consumer-groups.sh: "does not exist"
        raise CliError(f"consumer group {args.group!r} does not exist")
    if args.json:
        print(json.dumps({"group": args.group, "state": state, "partitions": rows}))
        return 0
    print(f"group {args.group} ({state})")
    print("GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID")
    for r in rows:
        lag = "-" if r["lag"] is None else r["lag"]
        current = "-" if r["current_offset"] < 0 else r["current_offset"]
        print(f"{r['group']} {r['topic']} {r['partition']} {current} {r['log_end_offset']} "
              f"{lag} {r['consumer_id']} {r['host']} {r['client_id']}")
    return 0


def group_delete(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        resp = coordinator_request(cluster, args.group, 42, 2, {"groups_names": [args.group]})
    r = resp.results[0]
    rc = report([(args.group, int(r.error_code), None)])
    if rc == 0:
        print(f"deleted group {args.group}")
    return rc
