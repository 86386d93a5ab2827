"""``floodmark cluster up|down|status|describe|diff|kill|start|quorum|health|elect-leaders|
log-dirs|reassign-partitions|add-controller|remove-controller``: the front end of the local-cluster supervisor
(``floodmark.cluster``); ``health``, ``elect-leaders``, ``log-dirs`` and ``reassign-partitions``
ask any cluster over the wire (``floodmark.cli.health``, ``floodmark.cli.elect_leaders``,
``floodmark.cli.log_dirs``, ``floodmark.cli.reassign``).

``up`` starts the controller (node 0) and N brokers (nodes 1..N) as separate processes, writes
``<data-dir>/cluster.json``, prints the bootstrap address and stays in the foreground until
``cluster down`` or Ctrl-C (``--detach``: returns once every node listens; the nodes run on until
``cluster down``). ``--base-port`` gives stable ports, ``--listen-host``/``--advertised-host``
serve other machines, ``--controller HOST:PORT`` runs brokers that join a controller elsewhere.
On an existing directory ``up`` starts what it has; ``--brokers`` more than it has adds brokers,
fewer is refused. ``--controllers N`` (a new cluster: 3 by default) runs N controller processes as
one quorum (node 0, then 1001, 1002, ...); ``quorum`` shows its leader, epoch, HW and each voter's
LEO and lag. ``--racks a,b,c`` gives the brokers their ``broker.rack`` round-robin. ``--combined`` runs no controller processes: each broker is also a voter
(``process.roles=broker,controller``, role ``broker,controller`` in ``status``). Every user
mistake is one line (``error: ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from floodmark import features
from floodmark.address import BadAddress, parse_bootstrap
from floodmark.cli import elect_leaders, health, log_dirs, raft_voters, reassign
from floodmark.cli.checks import check_bindable, check_data_dir
from floodmark.cli.common import CliError, check_configs, pairs
from floodmark.cluster import (
    CLIENT_PROPERTIES,
    DEFAULT_DATA_DIR,
    MAX_CONTROLLERS,
    MODES,
    QUORUM_METRICS_PORT_OFFSET,
    QUORUM_PORT_OFFSET,
    STATE_FILE,
    ClusterError,
    LocalCluster,
    describe_replicas,
    load_cluster,
    lost_offsets,
    offset_runs,
    partitions_on_disk,
    pid_state,
)
from floodmark.progress import ProgressWatch

MAX_BASE_PORT = 65535 - 200
DEFAULT_CONTROLLERS = 3
UP_CONTROLLER_DEFAULTS = {"broker.session.timeout.ms": "9000"}
"""A new cluster's controller settings unless ``--controller-set`` gives them: Kafka's broker
session (9 s; ``LocalCluster`` keeps 2 s for the test suite's quick fencing). A 2 s session
fenced live brokers of a loaded machine whose event loop was busy for a moment (a metadata
batch that made a broker leader of hundreds of partitions, a shared CPU), and their leaders
moved away and back again. A killed broker is fenced at once all the same (its connections
close: ``controller.liveness``); a hung one after the session."""


def register(subparsers: Any) -> None:
    cluster = subparsers.add_parser("cluster", help="a local replicated cluster: up, down, "
                                                    "status, describe, diff, kill, start, "
                                                    "quorum, health, elect-leaders, log-dirs, "
                                                    "reassign-partitions")
    sub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                       help=f"cluster directory (default ./{DEFAULT_DATA_DIR})")

    p = sub.add_parser("up", help="start the controller and N brokers (foreground, or --detach)")
    p.add_argument("--brokers", type=int, default=None,
                   help="a new cluster: 3 by default; an existing one: what it has, and a larger "
                        "number adds brokers")
    p.add_argument("--controllers", type=int, default=None,
                   help=f"a new cluster: how many controller processes form its quorum "
                        f"(default {DEFAULT_CONTROLLERS}; 1: a lone controller); an existing one "
                        "keeps its count")
    p.add_argument("--combined", action="store_true", default=None,
                   help="a new cluster: no controller processes; every broker is also a voter "
                        "of the controller quorum (process.roles=broker,controller; Kafka "
                        "supports this for development only)")
    p.add_argument("--detach", action="store_true",
                   help="return once every node listens; the nodes run on until `cluster down`")
    p.add_argument("--base-port", type=int, default=None, metavar="PORT",
                   help="stable ports: the controller on PORT, broker N on PORT+N, its /metrics "
                        "on PORT+100+N (default: free ports, kept across restarts)")
    p.add_argument("--listen-host", default=None, metavar="HOST",
                   help="address every node binds (default 127.0.0.1; 0.0.0.0: every interface)")
    p.add_argument("--advertised-host", default=None, metavar="HOST",
                   help="address clients and other brokers are told (default: --listen-host, "
                        "or this machine's host name for 0.0.0.0)")
    p.add_argument("--controller", default=None, metavar="HOST:PORT",
                   help="join the controller of a cluster on another machine: run brokers only")
    p.add_argument("--first-broker-id", type=int, default=None,
                   help="with --controller: the first broker id here (ids must be unique)")
    p.add_argument("--security", default=None, choices=sorted(MODES),
                   help="a new cluster: ssl = TLS client listeners and mTLS between every node "
                        "(a throwaway CA under DATA_DIR/tls); sasl_ssl = SASL_SSL + "
                        "SCRAM-SHA-512 on the client and inter-broker listeners (users admin "
                        "and floodmark-node), mTLS on the controller channel, ACLs on; writes "
                        "DATA_DIR/client.properties for clients (--command-config)")
    p.add_argument("--racks", default=None, metavar="A,B,C",
                   help="a new cluster: broker.rack of each broker, assigned round-robin in "
                        "broker id order (KIP-36: replicas spread over racks)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="NAME=VALUE", help="broker setting (Kafka names), repeatable")
    p.add_argument("--feature", dest="features", action="append", default=[],
                   metavar="NAME=LEVEL",
                   help="a new cluster: a feature level its metadata starts at, as "
                        "kafka-storage format --feature (transaction.version=0|1|2; default "
                        "2, as Kafka 4.x); repeatable")
    p.add_argument("--release-version", default=None, metavar="X.Y",
                   help="a new cluster: the feature levels of this Kafka release, as "
                        "kafka-storage format --release-version (3.3 ... 4.1); --feature "
                        "overrides one")
    p.add_argument("--controller-set", dest="controller_overrides", action="append", default=[],
                   metavar="NAME=VALUE",
                   help="controller setting: broker.session.timeout.ms (9000 by default, "
                        "as Kafka), "
                        "unclean.leader.election.enable, auto.leader.rebalance.enable, "
                        "leader.imbalance.check.interval.ms, "
                        "eligible.leader.replicas.version (KIP-966, 1 by default; 0 turns it "
                        "off)")
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
                                    "of a topic's partitions (reads the segment files; e.g. what "
                                    "an unclean election lost)")
    p.add_argument("topic")
    p.add_argument("old", type=int, help="broker id whose records are checked (old leader)")
    p.add_argument("new", type=int, help="broker id to compare with (new leader)")
    p.add_argument("--partition", type=int, default=None,
                   help="only this partition (default: every partition either broker holds)")
    p.add_argument("--upto", type=int, default=None,
                   help="only offsets below this (e.g. the old leader's HW); default: all")
    p.add_argument("--json", action="store_true",
                   help='[{"partition", "lost": [offsets...]}, ...]')
    data_dir(p)
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("quorum", help="the controller quorum: leader, epoch, HW, each voter's "
                                      "LEO and lag")
    p.add_argument("--json", action="store_true")
    data_dir(p)
    p.set_defaults(func=cmd_quorum)
    p = sub.add_parser("kill", help="send a signal to one node (fault drill)")
    p.add_argument("id", type=int)
    p.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "STOP", "CONT"])
    data_dir(p)
    p.set_defaults(func=cmd_kill)
    p = sub.add_parser("start", help="start one (dead) node again, on its previous port")
    p.add_argument("id", type=int)
    data_dir(p)
    p.set_defaults(func=cmd_start)
    health.add_parser(sub)
    elect_leaders.add_parser(sub)
    raft_voters.add_parsers(sub)
    log_dirs.add_parser(sub)
    reassign.add_parser(sub)
    cluster.set_defaults(func=lambda a: (cluster.print_help(), 2)[1])


def _shape_conflicts(cluster: LocalCluster, args: argparse.Namespace) -> list[str]:
    """Options of ``up`` that would change an existing cluster's shape (refused)."""
    st = cluster.state
    asked = {"--base-port": (args.base_port, st.get("base_port")),
             "--listen-host": (args.listen_host, cluster.listen_host),
             "--advertised-host": (args.advertised_host, cluster.advertised_host),
             "--controller": (args.controller, st.get("controller")),
             "--combined": ("on" if args.combined else None,
                            "on" if cluster.combined else "off"),
             "--security": (args.security, st.get("security") or "none"),
             "--racks": (args.racks and ",".join(_racks(args.racks)),
                         ",".join(st.get("racks") or ()) or "none")}
    return [f"{flag} {want} (it has {have})" for flag, (want, have) in asked.items()
            if want is not None and want != have]


def _racks(value: str) -> list[str]:
    """``--racks a,b,c``: rack names, none blank."""
    racks = [r.strip() for r in value.split(",")]
    if not all(racks):
        raise CliError(f"--racks {value!r}: rack names separated by commas, none empty")
    return racks


def _feature_levels(args: argparse.Namespace) -> dict[str, int] | None:
    """``--feature``/``--release-version``: every level the new cluster starts at, checked
    (one line each: an unknown feature, a level out of range, an unknown release); None when
    neither is given (the controller's defaults, ``features.BOOTSTRAP``)."""
    if not args.features and args.release_version is None:
        return None
    if args.controller is not None:
        raise CliError("--feature and --release-version set a new cluster's levels where its "
                       "controllers run; with --controller HOST:PORT they run elsewhere")
    try:
        given = [features.parse_feature(text) for text in args.features]
        return dict(features.bootstrap_levels(args.release_version, given))
    except features.FeatureError as exc:
        raise CliError(str(exc)) from None


def _features_text(levels: dict[str, int] | None) -> str:
    return " ".join(f"--feature {k}={v}" for k, v in sorted((levels or {}).items()))


def _cluster_for_up(args: argparse.Namespace) -> LocalCluster:
    if args.brokers is not None and args.brokers < 1:
        raise CliError(f"--brokers {args.brokers}: a cluster needs at least one broker")
    if args.base_port is not None and not 1024 <= args.base_port <= MAX_BASE_PORT:
        raise CliError(f"--base-port {args.base_port}: between 1024 and {MAX_BASE_PORT}")
    if args.combined and (args.controllers is not None or args.controller is not None):
        raise CliError("--combined runs the controllers in the brokers; --controllers N and "
                       "--controller HOST:PORT are for controllers of their own: give one")
    if args.combined and args.base_port is not None:
        top = args.base_port + QUORUM_PORT_OFFSET + (3 if args.brokers is None else args.brokers)
        if top > 65535:
            raise CliError(f"--base-port {args.base_port}: with --combined the controller ports "
                           f"reach {top} (above 65535)")
    if args.controllers is not None:
        if not 1 <= args.controllers <= MAX_CONTROLLERS:
            raise CliError(f"--controllers {args.controllers}: between 1 and {MAX_CONTROLLERS}")
        if args.controller is not None:
            raise CliError("--controllers N runs controllers here; --controller HOST:PORT joins "
                           "one elsewhere: give one of them")
        top = (args.base_port or 0) + QUORUM_METRICS_PORT_OFFSET + args.controllers
        if args.base_port is not None and args.controllers > 1 and top > 65535:
            raise CliError(f"--base-port {args.base_port}: with --controllers "
                           f"{args.controllers} controller ports reach {top} (above 65535)")
    if args.controller is not None:
        try:
            if len(parse_bootstrap(args.controller)) != 1:
                raise BadAddress("one address")
        except BadAddress:
            raise CliError(f"--controller {args.controller!r} is not HOST:PORT") from None
    if args.first_broker_id is not None and (args.first_broker_id < 1 or args.controller is None):
        raise CliError("--first-broker-id N (N >= 1) goes with --controller (broker ids 1..N "
                       "are this directory's own otherwise)")
    broker_settings = pairs(args.overrides, "--set")
    if args.racks is not None and "broker.rack" in broker_settings:
        raise CliError("--racks gives each broker its broker.rack; --set broker.rack=... gives "
                       "all of them one: give one of them")
    controller_settings = pairs(args.controller_overrides, "--controller-set")
    levels = _feature_levels(args)
    check_configs(broker_settings, topic=False)  # before a process starts, in Kafka's words
    check_configs(controller_settings, topic=False)
    check_data_dir(args.data_dir)
    if (Path(args.data_dir) / STATE_FILE).is_file():
        cluster = load_cluster(args.data_dir)
        running = [n for n in cluster.node_ids if cluster.node_state(n) != "dead"]
        if running:
            raise ClusterError(f"a cluster is already running in {args.data_dir} (nodes "
                               f"{', '.join(map(str, running))}; see `floodmark cluster status "
                               f"--data-dir {args.data_dir}`)")
        conflicts = _shape_conflicts(cluster, args)
        if levels is not None and levels != cluster.features:
            conflicts.append(f"{_features_text(levels)} (it has "
                             f"{_features_text(cluster.features) or 'what its metadata says'})")
        for flag, asked, have in (
                ("--set", broker_settings, cluster.state["broker_settings"]),
                ("--controller-set", controller_settings, cluster.state["controller_settings"])):
            conflicts += [f"{flag} {k}={v} (it has {have.get(k)})" for k, v in asked.items()
                          if have.get(k) != v]
        if conflicts:  # the same command again is fine; a different shape is not
            raise CliError(f"{args.data_dir} already holds a cluster; {'; '.join(conflicts)} "
                           "would change it: use a new --data-dir")
        if args.controllers is not None and cluster.combined:
            raise CliError(f"{args.data_dir} already holds a combined cluster (its brokers are "
                           f"the controllers); --controllers {args.controllers} would change it: "
                           "use a new --data-dir")
        if (args.controllers is not None and cluster.state.get("controller") is None
                and args.controllers != len(cluster.controller_ids)):
            raise CliError(f"{args.data_dir} already holds a cluster with "
                           f"{len(cluster.controller_ids)} controller(s); it keeps its count "
                           f"(--controllers {args.controllers} would change it: use a new "
                           "--data-dir)")
        if args.brokers is not None and args.brokers != len(cluster.broker_ids):
            added = cluster.add_brokers(args.brokers)
            print(f"adding broker(s) {', '.join(map(str, added))} to the cluster in "
                  f"{args.data_dir}", flush=True)
        return cluster
    return LocalCluster(args.data_dir, 3 if args.brokers is None else args.brokers,
                        broker_settings, {**UP_CONTROLLER_DEFAULTS, **controller_settings},
                        base_port=args.base_port,
                        listen_host=args.listen_host or "127.0.0.1",
                        advertised_host=args.advertised_host, controller=args.controller,
                        first_broker_id=args.first_broker_id or 1,
                        controllers=0 if args.controller is not None
                        else args.controllers or DEFAULT_CONTROLLERS,
                        combined=bool(args.combined),
                        die_with_supervisor=False,  # --detach: they outlive this command
                        security=args.security,
                        racks=_racks(args.racks) if args.racks is not None else (),
                        features=levels)


def _check_ports(cluster: LocalCluster) -> None:
    if not cluster.fixed_ports:
        check_bindable(cluster.listen_host, 0, "--listen-host")
        return
    for node_id in cluster.node_ids:
        node = cluster.node(node_id)
        check_bindable(cluster.listen_host, int(node["port"]), f"node {node_id}")
        if node.get("controller_port"):
            check_bindable(cluster.listen_host, int(node["controller_port"]),
                           f"node {node_id} controller")
        if cluster.state.get("metrics", True) and node.get("metrics_port"):
            check_bindable(cluster.listen_host, int(node["metrics_port"]),
                           f"node {node_id} /metrics")


def _print_started(cluster: LocalCluster, data_dir: str, detached: bool) -> None:
    if cluster.has_controller:
        active = cluster.active_controller() if cluster.is_quorum else None
        for c in cluster.controller_ids:
            mark = " (active)" if c == active else ""
            what = "controller (combined with broker)" if c in cluster.broker_ids else "controller"
            print(f"{what} {c} at {cluster.controller_endpoint(c)} (pid {cluster.pid(c)}){mark}",
                  flush=True)
    else:
        print(f"controller (elsewhere) at {cluster.controller_address}", flush=True)
    for b in cluster.broker_ids:
        print(f"broker {b} at {cluster.address(b)} (pid {cluster.pid(b)})", flush=True)
    print(f"bootstrap: {cluster.bootstrap}", flush=True)
    if cluster.security is not None:
        print(f"client settings: {cluster.data_dir / CLIENT_PROPERTIES} (e.g. floodmark topic "
              f"list --command-config {cluster.data_dir / CLIENT_PROPERTIES})", flush=True)
    how = "" if detached else " or Ctrl-C"
    print(f"logs: {cluster.data_dir / 'logs'}; stop with `floodmark cluster down "
          f"--data-dir {data_dir}`{how}", flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    cluster = _cluster_for_up(args)
    _check_ports(cluster)
    if args.detach:
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        cluster.state["supervisor_pid"] = None
        cluster._save()
        _print_started(cluster, args.data_dir, True)
        return 0
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        _print_started(cluster, args.data_dir, False)
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


DOWN_STALL_MS = 30_000  # `down` stops waiting for the supervisor once no node stopped this long


def cmd_down(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.data_dir)
    sup = cluster.state.get("supervisor_pid")
    if sup and pid_state(int(sup)) != "dead":
        os.kill(int(sup), signal.SIGTERM)
        # The supervisor stops its nodes one by one: wait while that moves, not a fixed time.
        watch = ProgressWatch(DOWN_STALL_MS, int(time.monotonic() * 1000))
        while pid_state(int(sup)) != "dead":
            running = [n for n in cluster.node_ids
                       if (pid := cluster.pid(n)) and pid_state(pid) != "dead"]
            if watch.observe(int(time.monotonic() * 1000), {"nodes running": running}):
                break  # stopped below, node by node
            time.sleep(0.1)
    cluster.reload()
    cluster.stop()  # nodes of --detach or `cluster start`, or a supervisor that is gone
    print("cluster down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = load_cluster(args.data_dir).status()
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    print(f"bootstrap: {status['bootstrap']}")
    role_width = max([10, *(len(n["role"]) for n in status["nodes"])])  # broker,controller
    for n in status["nodes"]:
        extra = ""
        if "fenced" in n:
            extra = f" broker_epoch={n['broker_epoch']}" + (" FENCED" if n["fenced"] else "")
        if "metrics" in n:
            extra += f" metrics={n['metrics']}"
        if n.get("active"):
            extra += " ACTIVE"
        if "metadata_offset" in n:
            extra += f" metadata_offset={n['metadata_offset']}"
        print(f"  {n['id']:>4} {n['role']:<{role_width}} pid={n['pid']} {n['address']:<22} "
              f"{n['state']}{extra}")
        if n.get("unapplied_records_total"):
            print(f"       METADATA RECORDS NOT APPLIED by broker {n['id']}: "
                  f"{n['unapplied_records_total']} in all")
            for bad in n.get("unapplied_records", []):
                print(f"         offset {bad['offset']}: {bad['reason']}")
    for topic, parts in sorted(status.get("partitions", {}).items()):
        for p, reg in sorted(parts.items(), key=lambda kv: int(kv[0])):
            elr = f" elr={reg['elr']}" if reg.get("elr") else ""  # KIP-966, when any
            print(f"  {topic}-{p}: leader={reg['leader']} leader_epoch={reg['leader_epoch']} "
                  f"isr={reg['isr']}{elr} replicas={reg['replicas']} "
                  f"partition_epoch={reg['partition_epoch']}")
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.data_dir)
    cluster.kill(args.id, getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to node {args.id} (pid {cluster.pid(args.id)})")
    return 0


def cmd_quorum(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.data_dir)
    if not cluster.has_controller:
        raise CliError(f"the cluster in {args.data_dir} runs no controller here (its "
                       f"controller is {cluster.controller_address})")
    q = cluster.quorum()
    if args.json:
        print(json.dumps(q, indent=1))
        return 0
    if q["leader_id"] is None:
        print(f"no leader (epoch {q['leader_epoch']}): an election is under way or too few "
              "voters run")
    else:
        print(f"leader {q['leader_id']} epoch {q['leader_epoch']} high_watermark "
              f"{q['high_watermark']}")
    for v in q["voters"]:
        ago = v.get("last_fetch_ms_ago")
        print(f"  voter {v['voter_id']:>4} {v.get('address', '?'):<22} {v.get('state', '?'):<8} "
              f"log_end_offset {v['log_end_offset']} lag {v['lag']}"
              + ("" if ago is None else f" last_fetch {ago} ms ago"))
    for o in q.get("observers", []):  # controllers fetching outside the voter set (KIP-853)
        print(f"  observer {o['voter_id']:>1} directory {o['directory_id']} "
              f"log_end_offset {o['log_end_offset']}")
    for c, d in q["controllers"].items():
        if d is None:
            print(f"  controller {c}: no answer")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.data_dir)
    cluster.start_node(args.id)
    print(f"node {args.id} started at {cluster.address(args.id)} (pid {cluster.pid(args.id)})")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    cluster = load_cluster(args.data_dir)
    try:
        rows = describe_replicas(cluster, args.topic)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{args.topic}-{row['partition']}: leader {row['leader']} leader_epoch "
              f"{row['leader_epoch']} partition_epoch {row['partition_epoch']} isr {row['isr']}"
              + (f" elr {row['elr']}" if row["elr"] else ""))
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
    """Every partition of the topic that either broker holds (or ``--partition``); exit code 3
    when any record of the old broker is missing or different on the new one."""
    cluster = load_cluster(args.data_dir)
    for node_id in (args.old, args.new):
        if node_id not in cluster.broker_ids:
            raise CliError(f"node {node_id} is the controller, not a broker")
    on_disk = {b: partitions_on_disk(cluster.data_dir / f"broker-{b}", args.topic)
               for b in (args.old, args.new)}
    if args.partition is not None:
        partitions = [args.partition]
        if args.partition not in on_disk[args.old]:
            raise CliError(f"broker {args.old} holds no {args.topic}-{args.partition} "
                           f"(it has partitions {on_disk[args.old] or 'none'})")
    else:
        partitions = sorted({*on_disk[args.old], *on_disk[args.new]})
        if not partitions:
            raise CliError(f"neither broker {args.old} nor broker {args.new} holds a partition "
                           f"of {args.topic!r}")
    upto = args.upto if args.upto is not None else 1 << 62
    results = []
    for p in partitions:
        lost = lost_offsets(cluster.partition_dir(args.old, args.topic, p),
                            cluster.partition_dir(args.new, args.topic, p), upto)
        results.append({"partition": p, "lost": lost})
    if args.json:
        print(json.dumps(results))
    else:
        for r in results:
            name = f"{args.topic}-{r['partition']}"
            if not r["lost"]:
                print(f"{name}: every record of broker {args.old} is on broker {args.new}")
            else:
                print(f"{name}: {len(r['lost'])} record(s) of broker {args.old} missing or "
                      f"different on broker {args.new}: offsets "
                      f"{', '.join(offset_runs(r['lost']))}")
    return 3 if any(r["lost"] for r in results) else 0
