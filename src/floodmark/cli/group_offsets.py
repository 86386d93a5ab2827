"""``floodmark group reset-offsets|delete-offsets``: kafka-consumer-groups.sh's ways of moving an
inactive group's committed offsets, and of deleting them (OffsetDelete, KIP-496).

reset-offsets: for each group (``GROUP`` or ``--all-groups``) the partitions in scope
(``--topic T``, ``--topic T:0,1``, ``--all-topics`` = every partition the group has an offset
for, or the rows of ``--from-file``) get a new offset by one mode: ``--to-earliest``,
``--to-latest``, ``--to-current``, ``--to-offset N``, ``--shift-by N``, ``--to-datetime``,
``--by-duration``, ``--from-file``. ``--to-offset``, ``--shift-by`` and the file's offsets are
kept within [log start, log end] as Kafka keeps them. The plan is printed (``--dry-run``, the default) and
committed only with ``--execute``; ``--export`` prints it as the CSV ``--from-file`` reads. A group
with active members is refused (Kafka refuses it too): its consumers would overwrite the reset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    connect,
    coordinator_request,
    offsets_at,
    report,
)
from floodmark.cli.offset_specs import (
    PlannedOffset,
    TopicScope,
    clamp,
    export_csv,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topic_scope,
    read_offsets_csv,
)
from floodmark.client import COORDINATOR_MOVED, ClusterClient, RequestFailed, error_text
from floodmark.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from floodmark.progress import Bars, add_progress_flag

INACTIVE_STATES = frozenset({"Empty", "Dead"})


def register(gsub: Any) -> None:
    p = gsub.add_parser("reset-offsets", help="move inactive groups' committed offsets "
                                              "(a plan until --execute)")
    p.add_argument("group", nargs="?", help="the group (or --all-groups)")
    p.add_argument("--all-groups", action="store_true", help="every group the cluster has")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="a topic, or some of its partitions (repeat for more)")
    p.add_argument("--all-topics", action="store_true",
                   help="every partition the group has a committed offset for")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-current", action="store_true",
                     help="the committed offset (the log end where there is none)")
    how.add_argument("--to-offset", type=int, metavar="N", help="N, within [log start, log end]")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="the committed offset + N (N may be negative), within [log start, "
                          "log end]")
    how.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                     help="the first offset at or after that time (zone: Z or +HH:MM; none: "
                          "local time)")
    how.add_argument("--by-duration", metavar="PnDTnHnMnS",
                     help="the first offset at or after now minus that ISO-8601 duration")
    how.add_argument("--from-file", metavar="CSV",
                     help="topic,partition,offset a line (group,topic,partition,offset for "
                          "--all-groups): what --export prints")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the plan")
    run.add_argument("--dry-run", action="store_true",
                     help="only show the plan (the default)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help='the plan as [{"group", "topic", "partition", "new_offset"}, ...]')
    out.add_argument("--export", action="store_true",
                     help="the plan as CSV, the form --from-file reads")
    add_progress_flag(p)
    add_bootstrap(p)
    p.set_defaults(func=group_reset_offsets)

    p = gsub.add_parser("delete-offsets", help="delete a group's committed offsets of topics "
                                               "it no longer consumes (OffsetDelete)")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]",
                   help="a topic (every partition), or some of its partitions (repeat for more)")
    p.add_argument("--json", action="store_true",
                   help='[{"topic", "partition", "error"}, ...] (error null when deleted)')
    add_bootstrap(p)
    p.set_defaults(func=group_delete_offsets)


# -- the group's side -----------------------------------------------------------------------------
def group_state(cluster: ClusterClient, group: str) -> str:
    resp = coordinator_request(
        cluster, group, 15, 5, {"groups": [group], "include_authorized_operations": False},
        lambda r: int(r.groups[0].error_code))
    g = resp.groups[0]
    if int(g.error_code):
        raise RequestFailed(f"group {group}: {error_text(int(g.error_code))}")
    return str(g.group_state)


def committed_offsets(cluster: ClusterClient, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of the group (OffsetFetch of all topics)."""
    resp = coordinator_request(cluster, group, 9, 7, {"group_id": group, "topics": None,
                                                     "require_stable": False},
                               lambda r: int(r.error_code))
    if int(resp.error_code):
        raise RequestFailed(f"group {group}: {error_text(int(resp.error_code))}")
    return {(str(t.name), int(p.partition_index)): int(p.committed_offset)
            for t in resp.topics for p in t.partitions if int(p.committed_offset) >= 0}


def all_groups(cluster: ClusterClient) -> dict[str, str]:
    """Every group with its state: each coordinator lists its own (ListGroups)."""
    states: dict[str, str] = {}
    cluster.metadata([])
    unreachable: list[str] = []
    for node in sorted(cluster.brokers):
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
    return states


def _partitions_of(cluster: ClusterClient, scope: TopicScope) -> list[int]:
    """The scope's partitions, each checked against the topic's partition count."""
    count = cluster.partitions(scope.topic)  # an unknown topic: one line with the code
    if scope.partitions is None:
        return list(range(count))
    beyond = [p for p in scope.partitions if p >= count]
    if beyond:
        raise CliError(f"--topic {scope.topic}:{','.join(map(str, scope.partitions))}: topic "
                       f"{scope.topic} has {count} partition(s) (0..{count - 1}), no "
                       f"{','.join(map(str, beyond))}")
    return list(scope.partitions)


# -- the plan -------------------------------------------------------------------------------------
def _scope(args: argparse.Namespace, cluster: ClusterClient, group: str,
           committed: dict[tuple[str, int], int]) -> dict[str, list[int]]:
    """topic -> partitions to reset for this group."""
    out: dict[str, set[int]] = {}
    for text in args.topic:
        scope = parse_topic_scope(text)
        out.setdefault(scope.topic, set()).update(_partitions_of(cluster, scope))
    if args.all_topics:
        for t, p in committed:
            out.setdefault(t, set()).add(p)
    return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}


def _targets(args: argparse.Namespace, cluster: ClusterClient, group: str, topic: str,
             parts: list[int], committed: dict[tuple[str, int], int],
             now_ms: int) -> dict[int, int]:
    """The new offset of each partition of ``topic`` by the one mode given."""
    if args.to_earliest:
        return offsets_at(cluster, topic, parts, EARLIEST_TIMESTAMP)
    if args.to_latest:
        return offsets_at(cluster, topic, parts, LATEST_TIMESTAMP)
    if args.to_datetime is not None or args.by_duration is not None:
        ts = (parse_datetime_ms(args.to_datetime) if args.to_datetime is not None
              else now_ms - parse_duration_ms(args.by_duration))
        return offsets_at(cluster, topic, parts, ts)  # none at or after it: the log end
    if args.to_current:
        without = [p for p in parts if (topic, p) not in committed]
        ends = offsets_at(cluster, topic, without, LATEST_TIMESTAMP) if without else {}
        return {p: committed.get((topic, p), ends.get(p, 0)) for p in parts}
    if args.shift_by is not None:
        missing = [p for p in parts if (topic, p) not in committed]
        if missing:
            raise CliError(f"group {group} has no committed offset for {topic} partition(s) "
                           f"{','.join(map(str, missing))}: --shift-by moves a committed offset "
                           "(use --to-earliest, --to-latest or --to-offset there)")
        wanted = {p: committed[(topic, p)] + args.shift_by for p in parts}
    else:
        wanted = {p: int(args.to_offset) for p in parts}
    return _clamped(cluster, topic, wanted)


def _clamped(cluster: ClusterClient, topic: str, wanted: dict[int, int]) -> dict[int, int]:
    parts = sorted(wanted)
    low = offsets_at(cluster, topic, parts, EARLIEST_TIMESTAMP)
    high = offsets_at(cluster, topic, parts, LATEST_TIMESTAMP)
    out = {}
    for p in parts:
        out[p] = clamp(wanted[p], low[p], high[p])
        if out[p] != wanted[p]:  # kafka-consumer-groups.sh says so too
            print(f"note: {topic}-{p}: offset {wanted[p]} is outside the log [{low[p]}, "
                  f"{high[p]}]; {out[p]} instead", file=sys.stderr)
    return out


def _file_plan(cluster: ClusterClient, group: str,
               rows: list[PlannedOffset]) -> list[PlannedOffset]:
    mine = [r for r in rows if r.group in (None, group)]
    counts: dict[str, int] = {}
    for r in mine:
        if r.topic not in counts:
            counts[r.topic] = cluster.partitions(r.topic)
        if r.partition >= counts[r.topic]:
            raise CliError(f"--from-file: topic {r.topic} has {counts[r.topic]} partition(s), "
                           f"no {r.partition}")
    plan: list[PlannedOffset] = []
    for topic in dict.fromkeys(r.topic for r in mine):  # kept within the log, as Kafka does
        kept = _clamped(cluster, topic, {r.partition: r.offset for r in mine if r.topic == topic})
        plan += [PlannedOffset(group, topic, p, off) for p, off in sorted(kept.items())]
    return plan


def _plan_group(args: argparse.Namespace, cluster: ClusterClient, group: str,
                file_rows: list[PlannedOffset] | None, now_ms: int) -> list[PlannedOffset]:
    state = group_state(cluster, group)
    if state not in INACTIVE_STATES:
        raise CliError(f"group {group} is {state}: offsets can be reset only while it has no "
                       "active members (stop its consumers first)")
    if file_rows is not None:
        plan = _file_plan(cluster, group, file_rows)
        if not plan and not args.all_groups:
            raise CliError(f"--from-file {args.from_file} has no offsets for group {group}")
        return plan
    committed = committed_offsets(cluster, group)
    scope = _scope(args, cluster, group, committed)
    if not scope and not args.all_groups:  # among all groups, one without offsets is no news
        raise CliError(f"group {group} has no committed offsets: name the topics with --topic")
    plan = []
    for topic, parts in scope.items():
        target = _targets(args, cluster, group, topic, parts, committed, now_ms)
        plan += [PlannedOffset(group, topic, p, target[p]) for p in parts]
    return plan


def _commit(cluster: ClusterClient, group: str, plan: list[PlannedOffset]) -> int:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in plan:
        by_topic.setdefault(r.topic, []).append({
            "partition_index": r.partition, "committed_offset": r.offset,
            "committed_leader_epoch": -1, "committed_metadata": ""})
    resp = coordinator_request(cluster, group, 8, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
        lambda r: next((int(p.error_code) for t in r.topics for p in t.partitions
                        if int(p.error_code) in COORDINATOR_MOVED), 0))
    return report([(f"group {group}: {t.name}-{p.partition_index}", int(p.error_code), None)
                   for t in resp.topics for p in t.partitions])


def group_reset_offsets(args: argparse.Namespace) -> int:
    if (args.group is None) == (not args.all_groups):
        raise CliError("name one group, or give --all-groups")
    file_rows = read_offsets_csv(args.from_file) if args.from_file is not None else None
    if file_rows is None and not args.topic and not args.all_topics:
        raise CliError("which partitions? give --topic TOPIC[:P,...] or --all-topics "
                       "(or --from-file)")
    # Argument mistakes first, before any request: one line, nothing asked of the cluster.
    if args.to_datetime is not None:
        parse_datetime_ms(args.to_datetime)
    if args.by_duration is not None:
        parse_duration_ms(args.by_duration)
    if args.to_offset is not None and args.to_offset < 0:
        raise CliError(f"--to-offset {args.to_offset}: offsets are 0 or more")
    for text in args.topic:
        parse_topic_scope(text)
    now_ms = int(time.time() * 1000)
    rc = 0
    plan: list[PlannedOffset] = []
    with connect(args) as cluster:
        if args.all_groups:
            groups = sorted(all_groups(cluster))
            if not groups:
                raise CliError("the cluster has no groups")
        else:
            groups = [args.group]
        by_group: list[tuple[str, list[PlannedOffset]]] = []
        with Bars(args.progress) as bars:
            task = bars.add("planning the reset", len(groups))
            for group in groups:
                try:
                    by_group.append((group, _plan_group(args, cluster, group, file_rows,
                                                        now_ms)))
                except CliError as exc:
                    if not args.all_groups:
                        raise
                    print(f"error: {exc}", file=sys.stderr)  # the others go on (as Kafka's)
                    rc = 1
                bars.update(task, advance=1)
        for group, group_plan in by_group:
            plan += group_plan
            if args.execute and group_plan:
                rc |= _commit(cluster, group, group_plan)
    _show(args, plan)
    return rc


def _show(args: argparse.Namespace, plan: list[PlannedOffset]) -> None:
    if args.export:  # the group column unless one group was named (Kafka's tool's rule)
        sys.stdout.write(export_csv(plan, with_group=bool(args.all_groups)))
    elif args.json:
        print(json.dumps([{"group": r.group, "topic": r.topic, "partition": r.partition,
                           "new_offset": r.offset} for r in plan]))
    else:
        rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        rows += [(str(r.group), r.topic, str(r.partition), str(r.offset)) for r in plan]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if not args.execute:
        print("(a plan: add --execute to commit it)",
              file=sys.stderr if args.json or args.export else sys.stdout)


# -- delete-offsets -------------------------------------------------------------------------------
def group_delete_offsets(args: argparse.Namespace) -> int:
    scopes = [parse_topic_scope(t) for t in args.topic]
    with connect(args) as cluster:
        wanted: dict[str, set[int]] = {}
        for scope in scopes:
            wanted.setdefault(scope.topic, set()).update(_partitions_of(cluster, scope))
        resp = coordinator_request(cluster, args.group, 47, 0, {
            "group_id": args.group, "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in sorted(ps)]}
                for t, ps in sorted(wanted.items())]},
            lambda r: int(r.error_code))
    if int(resp.error_code):
        return report([(f"group {args.group}", int(resp.error_code), None)])
    rows = [(str(t.name), int(p.partition_index), int(p.error_code))
            for t in resp.topics for p in t.partitions]
    if args.json:
        print(json.dumps([{"topic": t, "partition": p, "error": error_text(c) if c else None}
                          for t, p, c in rows]))
    else:
        print("TOPIC PARTITION STATUS")
        for t, p, c in rows:
            print(f"{t} {p} {'Successful' if not c else error_text(c)}")
    return 1 if any(c for _t, _p, c in rows) else 0
