"""``floodmark topic create|list|describe|delete|add-partitions|alter|alter-config|
delete-records`` (kafka-topics.sh, kafka-configs.sh and kafka-delete-records.sh's jobs; the
last in ``delete_records``), over the cluster client: any broker answers,
leaders are followed. ``list`` filters the partitions in trouble as kafka-topics.sh does
(``partition_health``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.cli import delete_records
from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    check_configs,
    connect,
    kafka_config_list,
    pairs,
    report,
)
from floodmark.cli.config import RESOURCE_TOPIC, describe_configs
from floodmark.cli.partition_health import describe_line, live_brokers, partition_views
from floodmark.client import (
    ClusterClient,
    KafkaConnection,
    RequestFailed,
    epoch_cache,
    error_text,
    read_replica_state,
)
from floodmark.security import ClientSecurity


def register(subparsers: Any) -> None:
    topic = subparsers.add_parser("topic", help="create, list, describe, delete topics, add "
                                                "partitions or alter their configs")
    tsub = topic.add_subparsers(dest="topic_command", metavar="ACTION")
    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=None, help="default: 1")
    p.add_argument("--replication-factor", type=int, default=None,
                   help="default: the cluster's default.replication.factor")
    p.add_argument("--replica-assignment", default=None, metavar="B:B,B:B,...",
                   help="each partition's replicas, preferred leader first, partitions "
                        "separated by commas (kafka-topics.sh's; not with --partitions or "
                        "--replication-factor)")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    add_bootstrap(p)
    p.set_defaults(func=topic_create)
    p = tsub.add_parser("list", help="list topics, or the partitions in trouble")
    p.add_argument("--json", action="store_true",
                   help='[{"topic", "partitions", "internal"}, ...]; with a filter '
                        '[{"topic", "partition", "leader", "replicas", "isr"}, ...]')
    trouble = p.add_mutually_exclusive_group()
    trouble.add_argument("--under-replicated-partitions", action="store_true",
                         help="only partitions with fewer in-sync replicas than replicas")
    trouble.add_argument("--under-min-isr-partitions", action="store_true",
                         help="only partitions with fewer in-sync replicas than the topic's "
                              "min.insync.replicas")
    trouble.add_argument("--at-min-isr-partitions", action="store_true",
                         help="only partitions with exactly min.insync.replicas in sync")
    trouble.add_argument("--unavailable-partitions", action="store_true",
                         help="only partitions without a live leader")
    add_bootstrap(p)
    p.set_defaults(func=topic_list)
    for name, aliases, what in (("add-partitions", ["create-partitions"],
                                 "add partitions to a topic (CreatePartitions)"),
                                ("alter", [], "kafka-topics.sh --alter: the partition count")):
        p = tsub.add_parser(name, aliases=aliases, help=what)
        p.add_argument("name")
        p.add_argument("--partitions", type=int, required=True, metavar="N",
                       help="the new partition count (more than the topic has)")
        add_bootstrap(p)
        p.set_defaults(func=topic_add_partitions)
    p = tsub.add_parser("describe", help="partitions, leader, epoch, ISR, LEO, HW, log start, epochs")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    p.add_argument("--all-configs", action="store_true",
                   help="every config with its source (DYNAMIC_TOPIC_CONFIG, "
                        "DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG...), "
                        "not only the topic's own (JSON: \"all_configs\")")
    add_bootstrap(p)
    p.set_defaults(func=topic_describe)
    p = tsub.add_parser("delete", help="delete a topic")
    p.add_argument("name")
    add_bootstrap(p)
    p.set_defaults(func=topic_delete)
    p = tsub.add_parser("alter-config", help="set or delete topic configs (kafka-configs.sh --alter)")
    p.add_argument("name")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete", action="append", default=[], metavar="NAME")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                   help="kafka-configs.sh's form of --set: comma-separated, a list value in "
                   "brackets (cleanup.policy=[compact,delete])")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                   help="kafka-configs.sh's form of --delete")
    add_bootstrap(p)
    p.set_defaults(func=topic_alter_config)
    delete_records.add_parser(tsub)
    topic.set_defaults(func=lambda a: (topic.print_help(), 2)[1])


def topic_create(args: argparse.Namespace) -> int:
    given = pairs(args.config, "--config")
    check_configs(given, topic=True)
    configs = [{"name": k, "value": v} for k, v in given.items()]
    assignment = replica_assignment(args.replica_assignment)
    if assignment and (args.partitions is not None or args.replication_factor is not None):
        raise CliError("--replica-assignment gives the partitions and their replicas: leave "
                       "out --partitions and --replication-factor")
    partitions = len(assignment) if assignment else (args.partitions or 1)
    if args.partitions is not None and args.partitions < 1:
        raise CliError(f"--partitions {args.partitions}: a topic needs at least one partition")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CliError(f"--replication-factor {args.replication_factor}: at least 1")
    rf = -1 if args.replication_factor is None else args.replication_factor  # cluster default
    with connect(args) as cluster:
        resp = cluster.request_any(19, 7, {"topics": [{
            "name": args.name, "num_partitions": -1 if assignment else partitions,
            "replication_factor": -1 if assignment else rf,
            "assignments": [{"partition_index": i, "broker_ids": replicas}
                            for i, replicas in enumerate(assignment)],
            "configs": configs}], "timeout": 30000, "validate_only": False})
    rc = report([(t.name, int(t.error_code), t.error_message) for t in resp.topics])
    if rc == 0:
        t = resp.topics[0]
        factor = (len(assignment[0]) if assignment
                  else int(t.replication_factor) if int(t.replication_factor) > 0 else rf)
        print(f"created topic {args.name} with {partitions} partition(s), replication "
              f"factor {factor}")
    return rc


def replica_assignment(value: str | None) -> list[list[int]]:
    """kafka-topics.sh's ``--replica-assignment 1:2,2:3``: per partition its replicas; every
    mistake one line."""
    if value is None:
        return []
    out: list[list[int]] = []
    for i, part in enumerate(value.split(",")):
        try:
            replicas = [int(b) for b in part.split(":")]
        except ValueError:
            raise CliError(f"--replica-assignment {value!r}: partition {i} is not broker ids "
                           "joined by ':' (e.g. 1:2,2:1)") from None
        if len(set(replicas)) != len(replicas) or min(replicas) < 0:
            raise CliError(f"--replica-assignment {value!r}: partition {i} names a broker "
                           "twice or a negative id")
        if out and len(replicas) != len(out[0]):
            raise CliError(f"--replica-assignment {value!r}: every partition needs as many "
                           "replicas as the first")
        out.append(replicas)
    return out


def topic_list(args: argparse.Namespace) -> int:
    filtered = (args.under_replicated_partitions or args.under_min_isr_partitions
                or args.at_min_isr_partitions or args.unavailable_partitions)
    with connect(args) as cluster:
        meta = cluster.metadata(None)
        min_isr = (_min_insync_replicas(cluster, [str(t.name) for t in meta.topics])
                   if args.under_min_isr_partitions or args.at_min_isr_partitions else {})
    if filtered:
        live = live_brokers(meta)
        rows = [p for p in partition_views(meta)
                if (args.under_replicated_partitions and p.under_replicated)
                or (args.unavailable_partitions and p.unavailable(live))
                or (args.under_min_isr_partitions and p.under_min_isr(min_isr.get(p.topic, 1)))
                or (args.at_min_isr_partitions and p.at_min_isr(min_isr.get(p.topic, 1)))]
        if args.json:
            print(json.dumps([p.as_json() for p in rows]))
        else:
            for p in rows:
                print(describe_line(p))
        return 0
    topics = sorted(meta.topics, key=lambda t: t.name or "")
    if args.json:
        print(json.dumps([{"topic": str(t.name), "partitions": len(t.partitions),
                           "internal": bool(t.is_internal)} for t in topics]))
        return 0
    for t in topics:
        print(t.name)
    return 0


def _min_insync_replicas(cluster: ClusterClient, topics: list[str]) -> dict[str, int]:
    """Each topic's ``min.insync.replicas`` in force (its own, else the broker's)."""
    if not topics:
        return {}
    resp = cluster.request_any(32, 4, {"resources": [
        {"resource_type": 2, "resource_name": t, "configuration_keys": ["min.insync.replicas"]}
        for t in topics], "include_synonyms": False, "include_documentation": False})
    out: dict[str, int] = {}
    for res in resp.results:
        if int(res.error_code):
            raise RequestFailed(f"configs of topic {res.resource_name}: "
                                f"{error_text(int(res.error_code), res.error_message)}")
        for c in res.configs:
            if c.name == "min.insync.replicas" and c.value is not None:
                out[str(res.resource_name)] = int(c.value)
    return out


def topic_add_partitions(args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise CliError(f"--partitions {args.partitions}: a topic needs at least one partition")
    with connect(args) as cluster:
        resp = cluster.request_any(37, 3, {"topics": [
            {"name": args.name, "count": args.partitions, "assignments": None}],
            "timeout": 30000, "validate_only": False})
    rc = report([(f"topic {r.name}", int(r.error_code), r.error_message) for r in resp.results])
    if rc == 0:
        print(f"topic {args.name} now has {args.partitions} partition(s)")
    return rc


def _list_offsets(conn: KafkaConnection, topic: str, partitions: list[int], timestamp: int,
                  replica_id: int = -1, isolation_level: int = 0) -> dict[int, tuple[int, int]]:
    resp = conn.request(2, 7, {"replica_id": replica_id, "isolation_level": isolation_level,
                               "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": timestamp} for p in partitions]}]})
    return {int(p.partition_index): (int(p.offset), int(p.leader_epoch))
            for p in resp.topics[0].partitions}


def _topic_configs(conn: KafkaConnection, topic: str) -> dict[str, str | None]:
    """The topic's own settings (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG): cleanup.policy,
    the compaction settings, segment.bytes... as given at creation."""
    resp = conn.request(32, 4, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    res = resp.results[0]
    if int(res.error_code):
        return {}
    return {str(c.name): c.value for c in res.configs if int(c.config_source) == 1}


def _replica_states(meta: Any, topic: str, p: Any,
                    security: ClientSecurity) -> list[dict[str, Any]]:
    """Per replica LEO, HW, LSO and epoch cache, read from that replica's broker (cluster
    mode)."""
    addresses = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in meta.brokers}
    out: list[dict[str, Any]] = []
    for r in p.replica_nodes:
        entry: dict[str, Any] = {"id": int(r)}
        address = addresses.get(int(r))
        try:
            if address is None:
                raise RuntimeError("not a live broker")
            entry.update(read_replica_state(address, topic, int(p.partition_index),
                                       int(p.leader_epoch), security))
        except (OSError, RuntimeError) as exc:
            entry["error"] = str(exc)
        out.append(entry)
    return out


def topic_describe(args: argparse.Namespace) -> int:
    out = []
    with connect(args) as cluster:
        meta = cluster.metadata([args.name] if args.name else None)
        for t in sorted(meta.topics, key=lambda t: t.name or ""):
            if t.error_code:
                print(f"error: {t.name}: {error_text(int(t.error_code))}", file=sys.stderr)
                return 1
            parts = sorted(t.partitions, key=lambda p: p.partition_index)
            rows = []
            for p in parts:
                i = int(p.partition_index)
                # Each partition's figures from its leader (any broker when it has none).
                address = cluster.brokers.get(int(p.leader_id))
                conn = (cluster.connection(address) if address is not None
                        else cluster.connection(next(iter(cluster.brokers.values()))))
                hw = _list_offsets(conn, t.name, [i], -1)
                lso = _list_offsets(conn, t.name, [i], -1, isolation_level=1)  # read_committed
                leo = _list_offsets(conn, t.name, [i], -1, replica_id=-2)
                start = _list_offsets(conn, t.name, [i], -2)
                rows.append({
                    "partition": i, "leader": int(p.leader_id),
                    "leader_epoch": int(p.leader_epoch),
                    "replicas": [int(r) for r in p.replica_nodes],
                    "isr": [int(r) for r in p.isr_nodes],
                    "log_end_offset": leo[i][0], "high_watermark": hw[i][0],
                    "last_stable_offset": lso[i][0], "log_start_offset": start[i][0],
                    "epoch_cache": [{"epoch": e, "start_offset": o} for e, o in epoch_cache(
                        conn, t.name, i, int(p.leader_epoch), start[i][0])],
                })
                if len(p.replica_nodes) > 1:  # a cluster: ask every replica's own broker
                    states = _replica_states(meta, t.name, p, cluster.security)
                    rows[-1]["replica_states"] = states
                    lead = next((x for x in states if x["id"] == int(p.leader_id)
                                 and "error" not in x), None)
                    if lead is not None:  # the leader's own view, whichever broker we asked
                        rows[-1].update(
                            log_end_offset=lead["log_end_offset"],
                            high_watermark=lead["high_watermark"],
                            last_stable_offset=lead.get("last_stable_offset",
                                                        rows[-1]["last_stable_offset"]),
                            log_start_offset=lead["log_start_offset"],
                            epoch_cache=[{"epoch": e, "start_offset": o}
                                         for e, o in lead["epoch_cache"]])
            any_conn = cluster.connection(next(iter(cluster.brokers.values())))
            out.append({"topic": t.name, "topic_id": str(t.topic_id), "internal": t.is_internal,
                        "configs": _topic_configs(any_conn, str(t.name)), "partitions": rows})
            if args.all_configs:
                out[-1]["all_configs"] = [
                    e.as_json() for e in describe_configs(cluster, RESOURCE_TOPIC, str(t.name))]
    if args.json:
        print(json.dumps(out if not args.name else out[0], indent=2))
        return 0
    for t in out:
        configs = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
        print(f"Topic: {t['topic']}  TopicId: {t['topic_id']}  Partitions: {len(t['partitions'])}"
              f"  Configs: {configs}")
        for c in t.get("all_configs", ()):
            print(f"  config {c['name']}={c['value']} source {c['source']}")
        for r in t["partitions"]:
            cache = ", ".join(f"{e['epoch']}@{e['start_offset']}" for e in r["epoch_cache"])
            # The LSO only where a transaction holds it below the HW.
            stable = (f" LSO {r['last_stable_offset']}"
                      if r["last_stable_offset"] != r["high_watermark"] else "")
            print(f"  partition {r['partition']}: leader {r['leader']} leader_epoch "
                  f"{r['leader_epoch']} isr {r['isr']} log_start {r['log_start_offset']} "
                  f"HW {r['high_watermark']}{stable} LEO {r['log_end_offset']} epochs [{cache}]")
            for rs in r.get("replica_states", []):
                if "error" in rs:
                    print(f"    replica {rs['id']}: unreachable ({rs['error']})")
                    continue
                rcache = ", ".join(f"{e}@{o}" for e, o in rs["epoch_cache"])
                rstable = rs.get("last_stable_offset", rs["high_watermark"])
                rlso = f" LSO {rstable}" if rstable != rs["high_watermark"] else ""
                print(f"    replica {rs['id']}: LEO {rs['log_end_offset']} HW "
                      f"{rs['high_watermark']}{rlso} epochs [{rcache}]")
    return 0


def topic_delete(args: argparse.Namespace) -> int:
    with connect(args) as cluster:
        resp = cluster.request_any(20, 6, {"topics": [{"name": args.name, "topic_id": None}],
                                           "timeout": 30000})
    rc = report([(r.name or args.name, int(r.error_code), r.error_message) for r in resp.responses])
    if rc == 0:
        print(f"deleted topic {args.name}")
    return rc


def topic_alter_config(args: argparse.Namespace) -> int:
    to_set = {**pairs(args.set, "--set"),
              **pairs(kafka_config_list(args.add_config), "--add-config")}
    to_delete = [*args.delete, *kafka_config_list(args.delete_config)]
    if not to_set and not to_delete:
        raise CliError("nothing to alter: give --set NAME=VALUE (--add-config) or --delete NAME "
                       "(--delete-config)")
    check_configs(to_set, topic=True)
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in to_set.items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in to_delete]
    with connect(args) as cluster:
        resp = cluster.request_any(44, 1, {"resources": [
            {"resource_type": 2, "resource_name": args.name, "configs": ops}],
            "validate_only": False})
    r = resp.responses[0]
    rc = report([(args.name, int(r.error_code), r.error_message)])
    if rc == 0:
        print(f"altered topic {args.name}: {len(ops)} config(s)")
    return rc
