"""``floodmark cluster reassign-partitions`` (kafka-reassign-partitions.sh): move replicas between
brokers with AlterPartitionReassignments and ListPartitionReassignments (KIP-455), carried out by
ordinary replication (docs/cluster.md, "Moving replicas").

One action per call, with kafka-reassign-partitions' flags and JSON documents:

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the topics' current
  assignment and a proposed one over the listed brokers (``{"version": 1, "partitions":
  [{"topic", "partition", "replicas", "log_dirs"}]}``). The proposal is the controller's own
  placement rule (``floodmark.controller.placement``): rack-aware (KIP-36) where brokers have a
  ``broker.rack``, unless ``--disable-rack-aware``. Nothing is changed.
- ``--execute --reassignment-json-file F``: prints the current assignment of those partitions
  (save it to roll back) and starts the moves. Refused while another reassignment is in
  progress unless ``--additional`` (Kafka's rule).
- ``--verify --reassignment-json-file F``: per partition, completed, still in progress, or no
  move in progress but the replicas differ from the file's.
- ``--cancel --reassignment-json-file F``: cancels the moves of those partitions that are in
  progress (the replicas return to the ones before the move).
- ``--list``: the moves in progress, with the replicas being added and removed.

``log_dirs`` entries other than ``"any"`` are refused with one line: moving a replica between a
broker's directories is AlterReplicaLogDirs, a separate step. ``--json`` (verify, list) prints
one entry per partition for scripts. Every mistake in a file is one line naming the entry.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect, read_tools_json_list
from floodmark.client import ClusterClient, error_text
from floodmark.controller import place_replicas, topic_start
from floodmark.errors import KafkaError

API_ALTER_REASSIGNMENTS, ALTER_REASSIGNMENTS_VERSION = 45, 0
API_LIST_REASSIGNMENTS, LIST_REASSIGNMENTS_VERSION = 46, 0
TIMEOUT_MS = 30_000
MAX_PARTITIONS = 100_000
ANY_LOG_DIR = "any"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")

Assignment = dict[tuple[str, int], list[int]]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reassign-partitions",
                       help="move replicas between brokers: --generate, --execute, --verify, "
                            "--cancel, --list (kafka-reassign-partitions.sh)")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true",
                         help="propose an assignment of --topics-to-move-json-file's topics over "
                              "--broker-list (changes nothing)")
    actions.add_argument("--execute", action="store_true",
                         help="start the moves of --reassignment-json-file")
    actions.add_argument("--verify", action="store_true",
                         help="whether the moves of --reassignment-json-file are complete")
    actions.add_argument("--cancel", action="store_true",
                         help="cancel the moves of --reassignment-json-file in progress")
    actions.add_argument("--list", action="store_true", help="the moves in progress")
    p.add_argument("--topics-to-move-json-file", default=None, metavar="FILE",
                   help='with --generate: {"topics": [{"topic": "t"}, ...], "version": 1}')
    p.add_argument("--broker-list", default=None, metavar="ID,ID,...",
                   help="with --generate: the brokers the replicas may go to")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="with --generate: place as if no broker had a rack")
    p.add_argument("--reassignment-json-file", default=None, metavar="FILE",
                   help='{"version": 1, "partitions": [{"topic", "partition", "replicas", '
                        '"log_dirs"}, ...]} (what --generate proposes)')
    p.add_argument("--additional", action="store_true",
                   help="with --execute: start these moves beside others in progress")
    p.add_argument("--json", action="store_true",
                   help="with --verify or --list: one JSON entry per partition")
    add_bootstrap(p)
    p.set_defaults(func=cluster_reassign_partitions)


# -- the documents --------------------------------------------------------------------------


def reassignment_json(assignment: Assignment) -> str:
    """kafka-reassign-partitions' document, partitions sorted by topic and number."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": replicas,
         "log_dirs": [ANY_LOG_DIR] * len(replicas)}
        for (t, p), replicas in sorted(assignment.items())]}, separators=(",", ":"))


def read_reassignment(path: Path) -> Assignment:
    """The target replicas of each partition in a reassignment file; every mistake one line."""
    option = "--reassignment-json-file"
    entries = read_tools_json_list(path, option, "partitions")
    if not entries or len(entries) > MAX_PARTITIONS:
        raise CliError(f"{option} {path}: expected "
                       '{"version": 1, "partitions": [{"topic", "partition", "replicas"}, ...]} '
                       f"(1 to {MAX_PARTITIONS} entries)")
    out: Assignment = {}
    for i, e in enumerate(entries):
        where = f"{option} {path}: partitions[{i}]"
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and e["topic"]
                and type(e.get("partition")) is int and e["partition"] >= 0
                and isinstance(e.get("replicas"), list) and e["replicas"]
                and all(type(b) is int and b >= 0 for b in e["replicas"])):
            raise CliError(f"{where} is not "
                           '{"topic": str, "partition": int, "replicas": [broker ids]}')
        key = (str(e["topic"]), int(e["partition"]))
        replicas = [int(b) for b in e["replicas"]]
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{where}: replicas {replicas} name a broker twice")
        if key in out:
            raise CliError(f"{option} {path}: {key[0]}-{key[1]} appears twice")
        dirs = e.get("log_dirs")
        if dirs is not None:
            if not (isinstance(dirs, list) and len(dirs) == len(replicas)):
                raise CliError(f"{where}: log_dirs must list one directory per replica")
            if any(d != ANY_LOG_DIR for d in dirs):
                raise CliError(f"{where}: log_dirs other than \"any\" are not moved by "
                               "reassign-partitions (AlterReplicaLogDirs moves a replica "
                               "between a broker's directories)")
        out[key] = replicas
    return out


def read_topics_to_move(path: Path) -> list[str]:
    option = "--topics-to-move-json-file"
    entries = read_tools_json_list(path, option, "topics")
    if not entries:
        raise CliError(f'{option} {path}: expected {{"topics": [{{"topic": "t"}}, ...], '
                       '"version": 1}')
    topics: list[str] = []
    for i, e in enumerate(entries):
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and e["topic"]):
            raise CliError(f'{option} {path}: topics[{i}] is not {{"topic": str}}')
        if e["topic"] in topics:
            raise CliError(f"{option} {path}: topic {e['topic']} appears twice")
        topics.append(str(e["topic"]))
    return topics


def broker_list(value: str | None) -> list[int]:
    if not value:
        raise CliError("--generate needs --broker-list ID,ID,... (the brokers to place on)")
    try:
        brokers = [int(b) for b in value.split(",") if b.strip()]
    except ValueError:
        raise CliError(f"--broker-list {value!r}: broker ids are numbers, e.g. 1,2,3") from None
    if not brokers:
        raise CliError("--broker-list names no broker")
    if len(set(brokers)) != len(brokers):
        raise CliError(f"--broker-list {value}: a broker is named twice")
    return brokers


# -- what the cluster says ------------------------------------------------------------------


def _cluster_view(cluster: ClusterClient,
                  topics: list[str] | None) -> tuple[dict[int, str | None], Assignment]:
    """Every live broker with its rack, and the replicas of the topics' partitions (every topic
    when ``topics`` is None). An unknown topic is a one-line error. The live brokers are those
    DescribeCluster lists, as kafka-reassign-partitions asks describeCluster: Metadata also
    lists a broker fenced a moment ago (``FENCED_BROKER_LISTED_MS`` in the broker)."""
    described = cluster.request_any(60, 1, {"include_cluster_authorized_operations": False,
                                            "endpoint_type": 1})
    if int(described.error_code):
        why = error_text(int(described.error_code), described.error_message)
        raise CliError(f"DescribeCluster: {why}")
    racks = {int(b.broker_id): (str(b.rack) if b.rack else None) for b in described.brokers}
    meta = cluster.metadata(topics)
    assignment: Assignment = {}
    for t in meta.topics:
        if int(t.error_code):
            raise CliError(f"topic {t.name}: {error_text(int(t.error_code))}")
        for p in t.partitions:
            assignment[(str(t.name), int(p.partition_index))] = [int(b) for b in p.replica_nodes]
    return racks, assignment


def _in_progress(cluster: ClusterClient,
                 partitions: Iterable[tuple[str, int]] | None) -> dict[tuple[str, int], Any]:
    topics: dict[str, list[int]] = {}
    for t, p in partitions or ():
        topics.setdefault(t, []).append(p)
    resp = cluster.request_any(API_LIST_REASSIGNMENTS, LIST_REASSIGNMENTS_VERSION, {
        "timeout_ms": TIMEOUT_MS,
        "topics": None if partitions is None else [
            {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
    if int(resp.error_code):
        raise CliError("listing reassignments: " + error_text(int(resp.error_code))
                       + (f": {resp.error_message}" if resp.error_message else ""))
    return {(str(t.name), int(p.partition_index)): p
            for t in resp.topics for p in t.partitions}


def _alter(cluster: ClusterClient,
           changes: dict[tuple[str, int], list[int] | None]) -> list[tuple[str, int, str]]:
    """Send the changes (None cancels); the partitions refused, each with its error text."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), replicas in sorted(changes.items()):
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    resp = cluster.request_any(API_ALTER_REASSIGNMENTS, ALTER_REASSIGNMENTS_VERSION, {
        "timeout_ms": TIMEOUT_MS,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    if int(resp.error_code):
        raise CliError("reassignment: " + error_text(int(resp.error_code))
                       + (f": {resp.error_message}" if resp.error_message else ""))
    return [(str(t.name), int(p.partition_index),
             error_text(int(p.error_code)) + (f": {p.error_message}" if p.error_message else ""))
            for t in resp.responses for p in t.partitions if int(p.error_code)]


def _names(partitions: Iterable[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions))


# -- the actions ----------------------------------------------------------------------------


def propose(racks: Mapping[int, str | None], current: Assignment, brokers: list[int],
            rack_aware: bool) -> Assignment:
    """The proposed assignment of ``current``'s topics over ``brokers``: each topic keeps its
    partition count and replication factor, placed by the controller's rule."""
    unknown = [b for b in brokers if b not in racks]
    if unknown:
        raise CliError(f"Unknown broker id {unknown[0]} (live brokers: "
                       f"{','.join(str(b) for b in sorted(racks))})")
    on = {b: (racks[b] if rack_aware else None) for b in brokers}
    by_topic: dict[str, list[tuple[int, list[int]]]] = {}
    for (t, p), replicas in current.items():
        by_topic.setdefault(t, []).append((p, replicas))
    proposed: Assignment = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(parts[0][1])
        try:
            placed = place_replicas(on, 0, len(parts), rf, topic_start(topic))
        except KafkaError as exc:
            raise CliError(f"topic {topic}: {exc.message}") from None
        for p, placed_replicas in enumerate(placed):
            proposed[(topic, p)] = list(placed_replicas)
    return proposed


def _generate(cluster: ClusterClient, args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file:
        raise CliError("--generate needs --topics-to-move-json-file FILE")
    topics = read_topics_to_move(Path(args.topics_to_move_json_file))
    brokers = broker_list(args.broker_list)
    racks, current = _cluster_view(cluster, topics)
    proposed = propose(racks, current, brokers, not args.disable_rack_aware)
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
    return 0


def _execute(cluster: ClusterClient, target: Assignment, additional: bool) -> int:
    racks, current = _cluster_view(cluster, sorted({t for t, _p in target}))
    missing = [k for k in target if k not in current]
    if missing:
        t, p = missing[0]
        raise CliError(f"partition {t}-{p} does not exist")
    unknown = sorted({b for replicas in target.values() for b in replicas} - set(racks))
    if unknown:
        raise CliError(f"Unknown broker id {unknown[0]}")
    if not additional and _in_progress(cluster, None):
        raise CliError("Cannot execute because there is an existing partition assignment. "
                       "Use --additional to override this and create a new partition "
                       "assignment in addition to the existing one.")
    print("Current partition replica assignment\n\n"
          + reassignment_json({k: current[k] for k in target})
          + "\n\nSave this to use as the --reassignment-json-file option during rollback")
    refused = _alter(cluster, dict(target))
    for t, p, text in refused:
        print(f"error: {t}-{p}: {text}", file=sys.stderr)
    started = [k for k in target if (k[0], k[1]) not in {(t, p) for t, p, _x in refused}]
    if started:
        print(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} "
              f"for {_names(started)}")
    return 1 if refused else 0


def verify_states(target: Assignment, current: Assignment,
                  moving: dict[tuple[str, int], Any]) -> list[dict[str, Any]]:
    """Per partition of ``target``: ``completed``, ``in_progress`` or ``mismatch`` (no move in
    progress, and the replicas are not the file's)."""
    out: list[dict[str, Any]] = []
    for (t, p), replicas in sorted(target.items()):
        now = current.get((t, p), [])
        state = ("in_progress" if (t, p) in moving
                 else "completed" if now == replicas else "mismatch")
        out.append({"topic": t, "partition": p, "state": state, "replicas": now,
                    "target": replicas})
    return out


def _verify(cluster: ClusterClient, target: Assignment, as_json: bool) -> int:
    _racks, current = _cluster_view(cluster, sorted({t for t, _p in target}))
    states = verify_states(target, current, _in_progress(cluster, target))
    if as_json:
        print(json.dumps(states))
        return 0
    print("Status of partition reassignment:")
    for s in states:
        name = f"{s['topic']}-{s['partition']}"
        if s["state"] == "completed":
            print(f"Reassignment of partition {name} is completed.")
        elif s["state"] == "in_progress":
            print(f"Reassignment of partition {name} is still in progress.")
        else:
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{','.join(map(str, s['replicas']))} rather than "
                  f"{','.join(map(str, s['target']))}.")
    return 0


def _cancel(cluster: ClusterClient, target: Assignment) -> int:
    active = sorted(_in_progress(cluster, target))
    if not active:
        print("None of the specified partition reassignments are active.")
        return 0
    refused = _alter(cluster, {k: None for k in active})
    if refused:
        for t, p, text in refused:
            print(f"error: cancelling the reassignment of {t}-{p}: {text}", file=sys.stderr)
        return 1
    print(f"Successfully cancelled partition reassignment{'s' if len(active) > 1 else ''} "
          f"for: {_names(active)}")
    return 0


def _list(cluster: ClusterClient, as_json: bool) -> int:
    moving = _in_progress(cluster, None)
    rows = [(t, p, [int(b) for b in m.replicas], [int(b) for b in m.adding_replicas],
             [int(b) for b in m.removing_replicas]) for (t, p), m in sorted(moving.items())]
    if as_json:
        print(json.dumps([{"topic": t, "partition": p, "replicas": replicas, "adding": adding,
                           "removing": removing} for t, p, replicas, adding, removing in rows]))
        return 0
    if not rows:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for t, p, replicas, adding, removing in rows:
        line = f"{t}-{p}: replicas: {_ids(replicas)}."
        if adding:
            line += f" adding: {_ids(adding)}."
        if removing:
            line += f" removing: {_ids(removing)}."
        print(line)
    return 0


def _ids(brokers: list[int]) -> str:
    return ",".join(str(b) for b in brokers)


def _check_options(args: argparse.Namespace) -> str:
    action = next(a for a in ACTIONS if getattr(args, a))
    allowed = {"generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
               "execute": {"reassignment_json_file", "additional"},
               "verify": {"reassignment_json_file", "json"},
               "cancel": {"reassignment_json_file"},
               "list": {"json"}}[action]
    for opt in ("topics_to_move_json_file", "broker_list", "disable_rack_aware",
                "reassignment_json_file", "additional", "json"):
        if getattr(args, opt) and opt not in allowed:
            raise CliError(f"--{opt.replace('_', '-')} cannot be used with --{action}")
    if action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        raise CliError(f"--{action} needs --reassignment-json-file FILE")
    return action


def cluster_reassign_partitions(args: argparse.Namespace) -> int:
    action = _check_options(args)
    target = (read_reassignment(Path(args.reassignment_json_file))
              if args.reassignment_json_file else {})
    with connect(args) as cluster:
        if action == "generate":
            return _generate(cluster, args)
        if action == "execute":
            return _execute(cluster, target, args.additional)
        if action == "verify":
            return _verify(cluster, target, args.json)
        if action == "cancel":
            return _cancel(cluster, target)
        return _list(cluster, args.json)
