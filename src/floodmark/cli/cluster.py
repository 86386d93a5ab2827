"""``floodmark cluster up|down|status|describe|diff|kill|start``: the front end of the local-cluster
supervisor (``floodmark.cluster``)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from floodmark.cluster.describe import describe
from floodmark.cluster.diff import lost_offsets
from floodmark.cluster.local import (
    CONTROLLER_ID,
    DEFAULT_DATA_DIR,
    STATE_FILE,
    LocalCluster,
    pid_state,
)


def register(subparsers: Any) -> None:
    cluster = subparsers.add_parser("cluster", help="a local replicated cluster: up, down, "
                                                    "status, kill, start")
    sub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                       help=f"cluster directory (default ./{DEFAULT_DATA_DIR})")

    p = sub.add_parser("up", help="start the controller and N brokers; stay in the foreground")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="NAME=VALUE", help="broker setting (Kafka names), repeatable")
    p.add_argument("--controller-set", dest="controller_overrides", action="append", default=[],
                   metavar="NAME=VALUE",
                   help="controller setting: broker.session.timeout.ms, "
                        "unclean.leader.election.enable, auto.leader.rebalance.enable, "
                        "leader.imbalance.check.interval.ms")
    data_dir(p)
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("down", help="stop a cluster started with `cluster up`")
    data_dir(p)
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("status", help="nodes, pids, addresses, liveness")
    p.add_argument("--json", action="store_true")
    data_dir(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("describe", help="per replica: LEO, HW, log start, epoch cache, read "
                                        "from each broker")
    p.add_argument("topic")
    p.add_argument("--json", action="store_true")
    data_dir(p)
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("diff", help="offsets whose records differ between two brokers' copies "
                                    "of a partition (reads the segment files; e.g. what an "
                                    "unclean election lost)")
    p.add_argument("topic")
    p.add_argument("old", type=int, help="broker id whose records are checked (old leader)")
    p.add_argument("new", type=int, help="broker id to compare with (new leader)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--upto", type=int, default=None,
                   help="only offsets below this (e.g. the old leader's HW); default: all")
    data_dir(p)
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("kill", help="send a signal to one node (fault drill)")
    p.add_argument("id", type=int)
    p.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "STOP", "CONT"])
    data_dir(p)
    p.set_defaults(func=cmd_kill)
    p = sub.add_parser("start", help="start one (dead) node again, on its previous port")
    p.add_argument("id", type=int)
    data_dir(p)
    p.set_defaults(func=cmd_start)
    cluster.set_defaults(func=lambda a: (cluster.print_help(), 2)[1])


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _load(args: argparse.Namespace) -> LocalCluster:
    path = Path(args.data_dir) / STATE_FILE
    if not path.exists():
        raise SystemExit(f"no cluster in {args.data_dir} (start one with `floodmark cluster up`)")
    return LocalCluster(args.data_dir)


def cmd_up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.data_dir, args.brokers, _pairs(args.overrides),
                           _pairs(args.controller_overrides))
    if any(cluster.node_state(n) != "dead" for n in [CONTROLLER_ID, *cluster.broker_ids]):
        print(f"a cluster is already running in {args.data_dir}", file=sys.stderr)
        return 1
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        print(f"controller 0 at {cluster.controller_address}", flush=True)
        for b in cluster.broker_ids:
            print(f"broker {b} at {cluster.address(b)} (pid {cluster.pid(b)})", flush=True)
        print(f"bootstrap: {cluster.bootstrap}", flush=True)
        print(f"logs: {cluster.data_dir / 'logs'}; stop with `floodmark cluster down "
              f"--data-dir {args.data_dir}` or Ctrl-C", flush=True)
        while not stop["now"]:
            time.sleep(0.2)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass  # reap nodes we started that died (kill drills)
            except ChildProcessError:
                pass
            cluster.reload()
    finally:
        cluster.stop()
        cluster.state["supervisor_pid"] = None
        cluster._save()
        print("cluster stopped", flush=True)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    cluster = _load(args)
    sup = cluster.state.get("supervisor_pid")
    if sup and pid_state(int(sup)) != "dead":
        os.kill(int(sup), signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and pid_state(int(sup)) != "dead":
            time.sleep(0.1)
    cluster.reload()
    cluster.stop()  # nodes started by `cluster start`, or a supervisor that is gone
    print("cluster down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = _load(args).status()
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    print(f"bootstrap: {status['bootstrap']}")
    for n in status["nodes"]:
        extra = ""
        if "fenced" in n:
            extra = f" broker_epoch={n['broker_epoch']}" + (" FENCED" if n["fenced"] else "")
        if "metrics" in n:
            extra += f" metrics={n['metrics']}"
        print(f"  {n['id']:>3} {n['role']:<10} pid={n['pid']} {n['address']:<22} "
              f"{n['state']}{extra}")
    for topic, parts in sorted(status.get("partitions", {}).items()):
        for p, reg in sorted(parts.items(), key=lambda kv: int(kv[0])):
            print(f"  {topic}-{p}: leader={reg['leader']} leader_epoch={reg['leader_epoch']} "
                  f"isr={reg['isr']} replicas={reg['replicas']} "
                  f"partition_epoch={reg['partition_epoch']}")
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    cluster = _load(args)
    cluster.kill(args.id, getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to node {args.id} (pid {cluster.pid(args.id)})")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    cluster = _load(args)
    cluster.start_node(args.id)
    print(f"node {args.id} started at {cluster.address(args.id)} (pid {cluster.pid(args.id)})")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    cluster = _load(args)
    try:
        rows = describe(cluster, args.topic)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{args.topic}-{row['partition']}: leader {row['leader']} leader_epoch "
              f"{row['leader_epoch']} partition_epoch {row['partition_epoch']} isr {row['isr']}")
        for r in row["replicas"]:
            if "error" in r:
                print(f"  replica {r['id']}: unreachable ({r['error']})")
                continue
            cache = ", ".join(f"{e}@{o}" for e, o in r["epoch_cache"])
            role = "leader  " if r["id"] == row["leader"] else "follower"
            print(f"  replica {r['id']} {role} LEO {r['log_end_offset']} HW "
                  f"{r['high_watermark']} log_start {r['log_start_offset']} epochs [{cache}]")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    cluster = _load(args)
    old_dir = cluster.partition_dir(args.old, args.topic, args.partition)
    new_dir = cluster.partition_dir(args.new, args.topic, args.partition)
    for d in (old_dir, new_dir):
        if not d.is_dir():
            print(f"error: no partition directory {d}", file=sys.stderr)
            return 1
    upto = args.upto if args.upto is not None else 1 << 62
    lost = lost_offsets(old_dir, new_dir, upto)
    if not lost:
        print(f"{args.topic}-{args.partition}: every record of broker {args.old} is on broker "
              f"{args.new}")
        return 0
    runs: list[str] = []
    start = prev = lost[0]
    for o in [*lost[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    print(f"{args.topic}-{args.partition}: {len(lost)} record(s) of broker {args.old} missing "
          f"or different on broker {args.new}: offsets {', '.join(runs)}")
    return 3
