"""``floodmark group list|describe|delete|reset-offsets``: kafka-consumer-groups.sh's jobs with
its columns, ``--json`` for every listing, reset as a plan until ``--execute``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    connect,
    coordinator_request,
    offsets_at,
    report,
)
from floodmark.client.cluster import ClusterClient
from floodmark.client.connection import RequestFailed
from floodmark.progress import Bar, add_progress_flag


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("group", help="consumer groups: list, describe, delete, "
                                                "reset offsets (kafka-consumer-groups.sh)")
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
    p = gsub.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    p.add_argument("group")
    p.add_argument("--topic", required=True)
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[+00:00]")
    p.add_argument("--execute", action="store_true", help="without it, only show the plan")
    p.add_argument("--json", action="store_true",
                   help='the plan as [{"group", "topic", "partition", "new_offset"}, ...]')
    add_progress_flag(p)
    add_bootstrap(p)
    p.set_defaults(func=group_reset_offsets)
    group.set_defaults(func=lambda a: (group.print_help(), 2)[1])


def group_list(args: argparse.Namespace) -> int:
    states: dict[str, str] = {}
    with connect(args) as cluster:
        cluster.metadata([])
        unreachable: list[str] = []
        for node in sorted(cluster.brokers):  # every coordinator knows its own groups
            try:
                resp = cluster.request_node(node, 16, 4, {"states_filter": []})
            except RequestFailed as exc:
                # Metadata still lists a broker a moment after it died (docs/cluster.md): it
                # coordinates nothing now, its groups moved with its partitions.
                unreachable.append(str(exc))
                continue
            for g in resp.groups:
                states[str(g.group_id)] = str(g.group_state)
        if unreachable and len(unreachable) == len(cluster.brokers):
            raise RequestFailed("no broker answered ListGroups: " + "; ".join(unreachable))
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
        from floodmark.client.group import decode_assignment

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


def _timestamp_ms(text: str) -> int:
    """``--to-datetime``: ISO 8601 as kafka-consumer-groups.sh takes it (no zone: UTC)."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def group_reset_offsets(args: argparse.Namespace) -> int:
    if args.to_offset is not None and args.to_offset < 0:
        raise CliError(f"--to-offset {args.to_offset}: offsets are 0 or more")
    ts = _timestamp_ms(args.to_datetime) if args.to_datetime else None
    with connect(args) as cluster:
        n = cluster.partitions(args.topic)
        parts = list(range(n))
        # Each leader's answer advances the bar: ListOffsets (twice for --to-offset, which is
        # kept within [log start, log end] as Kafka's tool does), then the commit.
        steps = n * (2 if args.to_offset is not None else 1) + (n if args.execute else 0)
        with Bar(steps, f"reset {args.group} on {args.topic}", args.progress) as bar:
            if args.to_offset is not None:
                low = offsets_at(cluster, args.topic, parts, -2, bar.advance)
                high = offsets_at(cluster, args.topic, parts, -1, bar.advance)
                target = {p: min(max(args.to_offset, low[p]), high[p]) for p in parts}
            else:
                if ts is None:
                    ts = -2 if args.to_earliest else -1
                target = offsets_at(cluster, args.topic, parts, ts, bar.advance)
            state, _rows = _group_rows(cluster, args.group)
            if state not in ("Empty", "Dead"):
                raise RequestFailed(f"group {args.group} is {state}: reset offsets of an "
                                    "inactive group only (stop its consumers first)")
            resp = None
            if args.execute:
                resp = coordinator_request(cluster, args.group, 8, 8, {
                    "group_id": args.group, "generation_id_or_member_epoch": -1,
                    "member_id": "", "group_instance_id": None, "topics": [{
                        "name": args.topic, "partitions": [
                            {"partition_index": p, "committed_offset": target[p],
                             "committed_leader_epoch": -1, "committed_metadata": ""}
                            for p in parts]}]})
                bar.advance(n)
    if args.json:
        print(json.dumps([{"group": args.group, "topic": args.topic, "partition": p,
                           "new_offset": target[p]} for p in parts]))
    else:
        print("GROUP TOPIC PARTITION NEW-OFFSET")
        for p in parts:
            print(f"{args.group} {args.topic} {p} {target[p]}")
    if resp is None:
        print("(a plan: add --execute to commit it)", file=sys.stderr if args.json else sys.stdout)
        return 0
    return report([(f"{args.topic}-{p.partition_index}", int(p.error_code), None)
                   for t in resp.topics for p in t.partitions])
