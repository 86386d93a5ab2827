"""``floodmark topic|produce|consume``: line-oriented tools that speak the wire protocol."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from floodmark.client.cluster import ClusterClient, Retriable, error_text
from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.client.partitioner import partition_for_key
from floodmark.client.replica_state import epoch_cache, replica_state
from floodmark.errors import ErrorCode

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def register(subparsers: Any) -> None:
    topic = subparsers.add_parser("topic", help="create, list, describe or delete topics")
    tsub = topic.add_subparsers(dest="topic_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP,
                       help="host:port[,host:port...]: every address is tried")

    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    common(p)
    p.set_defaults(func=topic_create)
    p = tsub.add_parser("list", help="list topics")
    common(p)
    p.set_defaults(func=topic_list)
    p = tsub.add_parser("describe", help="partitions, leader, epoch, ISR, LEO, HW, log start, epochs")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=topic_describe)
    p = tsub.add_parser("delete", help="delete a topic")
    p.add_argument("name")
    common(p)
    p.set_defaults(func=topic_delete)
    p = tsub.add_parser("alter-config", help="set or delete topic configs (kafka-configs.sh --alter)")
    p.add_argument("name")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete", action="append", default=[], metavar="NAME")
    common(p)
    p.set_defaults(func=topic_alter_config)
    topic.set_defaults(func=lambda a: (topic.print_help(), 2)[1])

    group = subparsers.add_parser("group", help="consumer groups: list, describe, delete, "
                                                "reset offsets (kafka-consumer-groups.sh)")
    gsub = group.add_subparsers(dest="group_command", metavar="ACTION")
    p = gsub.add_parser("list", help="every group with its state")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=group_list)
    p = gsub.add_parser("describe", help="committed offset, log end offset and lag per partition")
    p.add_argument("group")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=group_describe)
    p = gsub.add_parser("delete", help="delete an empty group and its offsets")
    p.add_argument("group")
    common(p)
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
    common(p)
    p.set_defaults(func=group_reset_offsets)
    group.set_defaults(func=lambda a: (group.print_help(), 2)[1])

    p = subparsers.add_parser("produce", help="produce stdin lines to a topic")
    p.add_argument("topic")
    p.add_argument("--key-separator", default=None, help="split each line into key SEP value")
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=500, help="lines per record batch")
    common(p)
    p.set_defaults(func=produce_cmd)

    p = subparsers.add_parser("consume", help="print a topic's records, one per line")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--group", default=None, help="consume as a member of this group; commits")
    p.add_argument("--max-messages", type=int, default=None)
    p.add_argument("--timeout-ms", type=int, default=None,
                   help="stop after this long without new records (default: run forever)")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--key-separator", default="\t")
    common(p)
    p.set_defaults(func=consume_cmd)


def _check(errors: list[tuple[str, int, str | None]]) -> int:
    bad = [(n, c, m) for n, c, m in errors if c]
    for name, code, msg in bad:
        print(f"error: {name}: {error_text(code)}{': ' + msg if msg else ''}", file=sys.stderr)
    return 1 if bad else 0


def topic_create(args: argparse.Namespace) -> int:
    configs = []
    for item in args.config:
        name, _, value = item.partition("=")
        configs.append({"name": name, "value": value})
    with ClusterClient(args.bootstrap_server) as cluster:
        resp = cluster.request_any(19, 7, {"topics": [{
            "name": args.name, "num_partitions": args.partitions,
            "replication_factor": args.replication_factor, "assignments": [],
            "configs": configs}], "timeout": 30000, "validate_only": False})
    rc = _check([(t.name, int(t.error_code), t.error_message) for t in resp.topics])
    if rc == 0:
        print(f"created topic {args.name} with {args.partitions} partition(s)")
    return rc


def topic_list(args: argparse.Namespace) -> int:
    with ClusterClient(args.bootstrap_server) as cluster:
        meta = cluster.metadata(None)
    for t in sorted(meta.topics, key=lambda t: t.name or ""):
        print(t.name)
    return 0


def _list_offsets(conn: KafkaConnection, topic: str, partitions: list[int], timestamp: int,
                  replica_id: int = -1) -> dict[int, tuple[int, int]]:
    resp = conn.request(2, 7, {"replica_id": replica_id, "isolation_level": 0, "topics": [
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


def _replica_states(meta: Any, topic: str, p: Any) -> list[dict[str, Any]]:
    """Per replica LEO, HW and epoch cache, read from that replica's broker (cluster mode)."""
    addresses = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in meta.brokers}
    out: list[dict[str, Any]] = []
    for r in p.replica_nodes:
        entry: dict[str, Any] = {"id": int(r)}
        address = addresses.get(int(r))
        try:
            if address is None:
                raise RuntimeError("not a live broker")
            entry.update(replica_state(address, topic, int(p.partition_index),
                                       int(p.leader_epoch)))
        except (OSError, RuntimeError) as exc:
            entry["error"] = str(exc)
        out.append(entry)
    return out


def topic_describe(args: argparse.Namespace) -> int:
    out = []
    with ClusterClient(args.bootstrap_server) as cluster:
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
                leo = _list_offsets(conn, t.name, [i], -1, replica_id=-2)
                start = _list_offsets(conn, t.name, [i], -2)
                rows.append({
                    "partition": i, "leader": int(p.leader_id),
                    "leader_epoch": int(p.leader_epoch),
                    "replicas": [int(r) for r in p.replica_nodes],
                    "isr": [int(r) for r in p.isr_nodes],
                    "log_end_offset": leo[i][0], "high_watermark": hw[i][0],
                    "log_start_offset": start[i][0],
                    "epoch_cache": [{"epoch": e, "start_offset": o} for e, o in epoch_cache(
                        conn, t.name, i, int(p.leader_epoch), start[i][0])],
                })
                if len(p.replica_nodes) > 1:  # a cluster: ask every replica's own broker
                    states = _replica_states(meta, t.name, p)
                    rows[-1]["replica_states"] = states
                    lead = next((x for x in states if x["id"] == int(p.leader_id)
                                 and "error" not in x), None)
                    if lead is not None:  # the leader's own view, whichever broker we asked
                        rows[-1].update(
                            log_end_offset=lead["log_end_offset"],
                            high_watermark=lead["high_watermark"],
                            log_start_offset=lead["log_start_offset"],
                            epoch_cache=[{"epoch": e, "start_offset": o}
                                         for e, o in lead["epoch_cache"]])
            any_conn = cluster.connection(next(iter(cluster.brokers.values())))
            out.append({"topic": t.name, "topic_id": str(t.topic_id), "internal": t.is_internal,
                        "configs": _topic_configs(any_conn, str(t.name)), "partitions": rows})
    if args.json:
        print(json.dumps(out if not args.name else out[0], indent=2))
        return 0
    for t in out:
        configs = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
        print(f"Topic: {t['topic']}  TopicId: {t['topic_id']}  Partitions: {len(t['partitions'])}"
              f"  Configs: {configs}")
        for r in t["partitions"]:
            cache = ", ".join(f"{e['epoch']}@{e['start_offset']}" for e in r["epoch_cache"])
            print(f"  partition {r['partition']}: leader {r['leader']} leader_epoch "
                  f"{r['leader_epoch']} isr {r['isr']} log_start {r['log_start_offset']} "
                  f"HW {r['high_watermark']} LEO {r['log_end_offset']} epochs [{cache}]")
            for rs in r.get("replica_states", []):
                if "error" in rs:
                    print(f"    replica {rs['id']}: unreachable ({rs['error']})")
                    continue
                rcache = ", ".join(f"{e}@{o}" for e, o in rs["epoch_cache"])
                print(f"    replica {rs['id']}: LEO {rs['log_end_offset']} HW "
                      f"{rs['high_watermark']} epochs [{rcache}]")
    return 0


def topic_delete(args: argparse.Namespace) -> int:
    with ClusterClient(args.bootstrap_server) as cluster:
        resp = cluster.request_any(20, 6, {"topics": [{"name": args.name, "topic_id": None}],
                                           "timeout": 30000})
    rc = _check([(r.name or args.name, int(r.error_code), r.error_message) for r in resp.responses])
    if rc == 0:
        print(f"deleted topic {args.name}")
    return rc


_RETRIABLE_CODES = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REQUEST_TIMED_OUT))


def _offsets_at(cluster: ClusterClient, topic: str, partitions: list[int],
                timestamp: int) -> dict[int, int]:
    """ListOffsets asked of each partition's leader, retried while leaders move. A timestamp
    later than every record answers the log end offset (as kafka-consumer-groups.sh does)."""
    found: dict[int, int] = {}

    def attempt() -> dict[int, int]:
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            if p not in found:
                by_leader.setdefault(cluster.leader(topic, p), []).append(p)
        for leader, parts in by_leader.items():
            resp = cluster.request_node(leader, 2, 7, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in parts]}]})
            for part in resp.topics[0].partitions:
                code = int(part.error_code)
                if code in _RETRIABLE_CODES:
                    continue
                if code:
                    raise RequestFailed(f"offsets of {topic}-{part.partition_index}: "
                                        f"{error_text(code)}")
                offset = int(part.offset)
                if offset < 0:  # no record at or after the timestamp
                    offset = _offsets_at(cluster, topic, [int(part.partition_index)], -1)[
                        int(part.partition_index)]
                found[int(part.partition_index)] = offset
        missing = [p for p in partitions if p not in found]
        if missing:
            raise Retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic} partitions {missing}")
        return found

    return cluster.retry(attempt)


def produce_cmd(args: argparse.Namespace) -> int:
    from floodmark.records import Record, build_batch

    acks = -1 if args.acks in ("all", "-1") else int(args.acks)
    topic = args.topic
    with ClusterClient(args.bootstrap_server) as cluster:
        n_parts = cluster.partitions(topic, create=True)
        pending: dict[int, list[Record]] = {}
        robin = 0
        sent = 0

        def send_to_leaders() -> int:
            """Each partition's batch to its leader; retriable answers (a leader moved) are sent
            again to the new leader. At least once: a timed-out batch may be written twice."""
            def attempt() -> int:
                nonlocal sent
                by_leader: dict[int, list[int]] = {}
                for part in pending:
                    by_leader.setdefault(cluster.leader(topic, part), []).append(part)
                now = int(time.time() * 1000)
                last = ErrorCode.NONE
                for leader, parts in by_leader.items():
                    data = [{"index": part, "records": build_batch(
                        [Record(i, now, r.key, r.value) for i, r in enumerate(pending[part])])}
                        for part in parts]
                    body = {"transactional_id": None, "acks": acks, "timeout": 30000,
                            "topic_data": [{"name": topic, "partition_data": data}]}
                    try:
                        if acks == 0:
                            cluster.connection(cluster.brokers[leader]).send(0, 9, body)
                            codes = {part: 0 for part in parts}
                        else:
                            resp = cluster.request_node(leader, 0, 9, body)
                            codes = {int(r.index): int(r.error_code) for t in resp.responses
                                     for r in t.partition_responses}
                    except RequestFailed as exc:
                        raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE,
                                        f"broker {leader}: {exc}") from exc
                    for part, code in codes.items():
                        if code == 0:
                            sent += len(pending.pop(part))
                        elif code in _RETRIABLE_CODES:
                            last = ErrorCode(code)
                        else:
                            raise RequestFailed(f"produce to {topic}-{part}: {error_text(code)}")
                if pending:
                    raise Retriable(last, f"produce to {topic}")
                return 0
            return cluster.retry(attempt)

        buffered = 0
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\n").rstrip(b"\r")
            key: bytes | None = None
            value: bytes | None = line
            if args.key_separator is not None:
                sep = args.key_separator.encode()
                if sep in line:
                    key, value = line.split(sep, 1)
            if args.partition is not None:
                part = args.partition
            elif key is not None:
                part = partition_for_key(key, n_parts)  # Kafka's murmur2, as Java and Spark
            else:
                part = robin % n_parts
                robin += 1
            pending.setdefault(part, []).append(Record(0, 0, key, value))
            buffered += 1
            if buffered >= args.batch_size:
                buffered = 0
                send_to_leaders()
        if pending:
            send_to_leaders()
    print(f"produced {sent} record(s) to {topic}", file=sys.stderr)
    return 0


def consume_cmd(args: argparse.Namespace) -> int:
    from floodmark.client.group import GroupMember
    from floodmark.records import decode_records

    out = sys.stdout.buffer
    printed = 0
    topic = args.topic
    with ClusterClient(args.bootstrap_server) as cluster:
        n_parts = cluster.partitions(topic)
        member: GroupMember | None = None
        partitions = list(range(n_parts))
        positions: dict[int, int] = {}
        if args.group:
            coordinator = cluster.brokers[cluster.coordinator(args.group)]
            member = GroupMember(cluster.connection(coordinator), args.group, [topic],
                                 {topic: n_parts})
            partitions = member.join().get(topic, [])
            committed = member.committed()
            for p in partitions:
                if committed.get((topic, p), -1) >= 0:
                    positions[p] = committed[(topic, p)]
        missing = [p for p in partitions if p not in positions]
        if missing:
            positions.update(_offsets_at(cluster, topic, missing,
                                         -2 if args.from_beginning else -1))
        idle_since = time.monotonic()
        last_heartbeat = time.monotonic()
        try:
            while partitions:
                if args.max_messages is not None and printed >= args.max_messages:
                    break
                got = 0
                by_leader: dict[int, list[int]] = {}
                try:
                    for p in partitions:
                        by_leader.setdefault(cluster.leader(topic, p), []).append(p)
                except Retriable:
                    time.sleep(0.2)  # no leader right now: ask again
                    by_leader = {}
                    cluster.leaders.clear()
                wait_ms = 500 // max(1, len(by_leader))
                for leader, parts in by_leader.items():
                    try:
                        resp = cluster.request_node(leader, 1, 12, {
                            "replica_id": -1, "max_wait": wait_ms, "min_bytes": 1,
                            "max_bytes": 16 << 20, "isolation_level": 0, "session_id": 0,
                            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                                {"partition": p, "current_leader_epoch": -1,
                                 "fetch_offset": positions[p], "last_fetched_epoch": -1,
                                 "log_start_offset": -1, "partition_max_bytes": 4 << 20}
                                for p in parts]}],
                            "forgotten_topics_data": [], "rack_id": ""})
                    except RequestFailed:
                        cluster.leaders.clear()  # the leader went away: find the new one
                        time.sleep(0.2)
                        continue
                    for t in resp.responses:
                        for p in t.partitions:
                            code = int(p.error_code)
                            if code in _RETRIABLE_CODES:
                                cluster.leaders.clear()
                                continue
                            if code:
                                print(f"error: {topic}-{p.partition_index}: {error_text(code)}",
                                      file=sys.stderr)
                                return 1
                            if not p.records:
                                continue
                            index = int(p.partition_index)
                            for rec in decode_records(p.records, validate=False):
                                if rec.offset < positions[index]:
                                    continue
                                if args.max_messages is not None and printed >= args.max_messages:
                                    break
                                if args.print_key:
                                    out.write((rec.key or b"") + args.key_separator.encode())
                                out.write((rec.value or b"") + b"\n")
                                printed += 1
                                got += 1
                                positions[index] = rec.offset + 1
                out.flush()
                now = time.monotonic()
                if got:
                    idle_since = now
                elif args.timeout_ms is not None and (now - idle_since) * 1000 >= args.timeout_ms:
                    break
                if member is not None and now - last_heartbeat > 2:
                    last_heartbeat = now
                    if member.heartbeat() != 0:
                        partitions = member.join().get(topic, [])
        finally:
            if member is not None:
                member.commit({(topic, p): positions[p] for p in partitions if p in positions})
                member.leave()
    return 0


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise RequestFailed(f"{what} {item!r} is not NAME=VALUE")
        out[name] = value
    return out


def topic_alter_config(args: argparse.Namespace) -> int:
    ops = [{"name": k, "config_operation": 0, "value": v}
           for k, v in _pairs(args.set, "--set").items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in args.delete]
    with ClusterClient(args.bootstrap_server) as cluster:
        resp = cluster.request_any(44, 1, {"resources": [
            {"resource_type": 2, "resource_name": args.name, "configs": ops}],
            "validate_only": False})
    r = resp.responses[0]
    rc = _check([(args.name, int(r.error_code), r.error_message)])
    if rc == 0:
        print(f"altered topic {args.name}: {len(ops)} config(s)")
    return rc


def _coordinator_request(cluster: ClusterClient, group: str, api: int, version: int,
                         body: Any) -> Any:
    def attempt() -> Any:
        return cluster.request_node(cluster.coordinator(group), api, version, body)
    return cluster.retry(attempt)


def group_list(args: argparse.Namespace) -> int:
    states: dict[str, str] = {}
    with ClusterClient(args.bootstrap_server) as cluster:
        cluster.metadata([])
        for node in sorted(cluster.brokers):  # every coordinator knows its own groups
            resp = cluster.request_node(node, 16, 4, {"states_filter": []})
            for g in resp.groups:
                states[str(g.group_id)] = str(g.group_state)
    if args.json:
        print(json.dumps([{"group": g, "state": s} for g, s in sorted(states.items())]))
    else:
        for g, state in sorted(states.items()):
            print(f"{g}\t{state}")
    return 0


def _group_rows(cluster: ClusterClient, group: str) -> tuple[str, list[dict[str, Any]]]:
    desc = _coordinator_request(cluster, group, 15, 5, {"groups": [group],
                                                         "include_authorized_operations": False})
    g = desc.groups[0]
    members: dict[tuple[str, int], tuple[str, str, str]] = {}
    from floodmark.client.group import decode_assignment

    for m in g.members:
        try:
            assigned = decode_assignment(bytes(m.member_assignment))
        except Exception:
            assigned = {}
        for topic, parts in assigned.items():
            for p in parts:
                members[(topic, p)] = (str(m.member_id), str(m.client_host), str(m.client_id))
    fetched = _coordinator_request(cluster, group, 9, 7, {"group_id": group, "topics": None,
                                                           "require_stable": False})
    rows = []
    committed = {(str(t.name), int(p.partition_index)): int(p.committed_offset)
                 for t in fetched.topics for p in t.partitions}
    for topic in sorted({t for t, _p in [*committed, *members]}):
        parts = sorted({p for t, p in [*committed, *members] if t == topic})
        ends = _offsets_at(cluster, topic, parts, -1)
        for p in parts:
            current = committed.get((topic, p), -1)
            member = members.get((topic, p), ("-", "-", "-"))
            rows.append({"group": group, "topic": topic, "partition": p,
                         "current_offset": current, "log_end_offset": ends[p],
                         "lag": ends[p] - current if current >= 0 else None,
                         "consumer_id": member[0], "host": member[1], "client_id": member[2]})
    return str(g.group_state), rows


def group_describe(args: argparse.Namespace) -> int:
    with ClusterClient(args.bootstrap_server) as cluster:
        state, rows = _group_rows(cluster, args.group)
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
    with ClusterClient(args.bootstrap_server) as cluster:
        resp = _coordinator_request(cluster, args.group, 42, 2, {"groups_names": [args.group]})
    r = resp.results[0]
    rc = _check([(args.group, int(r.error_code), None)])
    if rc == 0:
        print(f"deleted group {args.group}")
    return rc


def group_reset_offsets(args: argparse.Namespace) -> int:
    from datetime import datetime

    with ClusterClient(args.bootstrap_server) as cluster:
        n = cluster.partitions(args.topic)
        parts = list(range(n))
        if args.to_offset is not None:
            target = {p: args.to_offset for p in parts}
        else:
            if args.to_datetime:
                when = datetime.fromisoformat(args.to_datetime)
                ts = int(when.timestamp() * 1000)
            else:
                ts = -2 if args.to_earliest else -1
            target = _offsets_at(cluster, args.topic, parts, ts)
        state, _rows = _group_rows(cluster, args.group)
        if state not in ("Empty", "Dead"):
            raise RequestFailed(f"group {args.group} is {state}: reset offsets of an inactive "
                                "group only (stop its consumers first)")
        for p in parts:
            print(f"{args.group} {args.topic} {p} -> {target[p]}")
        if not args.execute:
            print("(a plan: add --execute to commit it)")
            return 0
        resp = _coordinator_request(cluster, args.group, 8, 8, {
            "group_id": args.group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": args.topic, "partitions": [
                {"partition_index": p, "committed_offset": target[p],
                 "committed_leader_epoch": -1, "committed_metadata": ""} for p in parts]}]})
    return _check([(f"{args.topic}-{p.partition_index}", int(p.error_code), None)
                   for t in resp.topics for p in t.partitions])
