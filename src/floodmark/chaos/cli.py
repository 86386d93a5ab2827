"""``floodmark chaos``: fault injection against real processes.

``floodmark chaos run [--brokers 3] [--time-limit-s 60] [--faults partition,kill,pause,flap,
controller] [--acks all|1] [--security ssl|sasl_ssl] [--truncation MODE] [--unclean] [--seed S]
[--json] [--report DIR]``
runs a cluster in network namespaces under a workload and a seeded fault schedule, then checks
the history (``floodmark.chaos.run``); exit status 0 only when the history is valid, 2 when it
cannot run here (not root) or the arguments are wrong. ``--workload txn`` runs Jepsen's queue
with transactions (transactional producers, read_committed and read_uncommitted final reads,
``checker.check_txn``) instead of the plain producers and consumers; ``--workload group
[--group-members 3] [--group-protocol classic|consumer|mixed]`` runs one consumer group's
members through rebalances and coordinator failovers (``group_checker.check_group``; ``mixed``:
members switching protocol, so the group converts both ways, KIP-848's online migration); ``--workload share [--group-members 3]`` runs one
share group's members (KIP-932) acknowledging every record while brokers fail
(``share_checker.check_share``).

``floodmark chaos fuzz --bootstrap HOST:PORT [--frames N] [--time-limit-s S] [--seed S]
[--broker-pid PID] [--json]`` sends malformed requests for every API the broker advertises while
a well-behaved client produces (acks=all, idempotent) and reads back; exit status 0 only when the
broker is still alive and nothing the client was told is written went missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from floodmark.chaos.fuzz import FuzzConfig, FuzzReport, run_fuzz
from floodmark.chaos.netns import LabError
from floodmark.chaos.run import ChaosConfig, run
from floodmark.chaos.schedule import (
    DEFAULT_FAULTS,
    FAMILIES,
    GROUP_DEFAULT_FAULTS,
    TXN_DEFAULT_FAULTS,
    all_names,
)
from floodmark.cluster import MODES
from floodmark.replication import DEFAULT_TRUNCATION, Truncation


def register(subparsers: Any) -> None:
    chaos = subparsers.add_parser("chaos", help="fault injection against real processes")
    sub = chaos.add_subparsers(dest="chaos_command", metavar="CHAOS_COMMAND")
    fuzz = sub.add_parser("fuzz", help="malformed requests for every advertised API, while a "
                                       "well-behaved client keeps producing and consuming")
    fuzz.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    fuzz.add_argument("--frames", type=int, default=100_000)
    fuzz.add_argument("--time-limit-s", type=float, default=300.0)
    fuzz.add_argument("--seed", type=int, default=1)
    fuzz.add_argument("--connections", type=int, default=8)
    fuzz.add_argument("--broker-pid", type=int, default=None,
                      help="the broker's process id: checked alive, its memory reported")
    fuzz.add_argument("--no-client", action="store_true",
                      help="no well-behaved client alongside the fuzzer")
    fuzz.add_argument("--command-config", metavar="FILE", default=None,
                      help="client properties (librdkafka's names) for an SSL or SASL_SSL "
                           "listener: the frames go over TLS, the bystander logs in")
    fuzz.add_argument("--json", action="store_true")
    fuzz.set_defaults(func=cmd_fuzz)
    r = sub.add_parser("run", help="a cluster in network namespaces, a workload, a seeded "
                                   "fault schedule, then the history checker (needs root)")
    r.add_argument("--brokers", type=int, default=3)
    r.add_argument("--controllers", type=int, default=1,
                   help="controllers; more than one form a quorum (controller faults hit the "
                        "active one, kill-controllers all of them)")
    r.add_argument("--time-limit-s", type=float, default=60.0,
                   help="how long the workload runs under faults (then heal, quiet, final read)")
    r.add_argument("--quiet-s", type=float, default=ChaosConfig.quiet_s,
                   help="after the cluster recovered, at most how long the workload runs "
                        "on (until every client has moved on: an acknowledgement, a poll) "
                        "before the clients stop and the final read")
    r.add_argument("--end-on-anomaly", action="store_true",
                   help="end the fault schedule once the history so far shows an inconsistent "
                        "offset (two values at one offset, one value at two), for runs that "
                        "show an unsafe setting is caught; the verdict is still the checker's "
                        "over the whole run")
    r.add_argument("--faults", default=None,
                   help=f"families ({', '.join(FAMILIES)}) or faults ({', '.join(all_names())}); "
                        f"default {','.join(DEFAULT_FAULTS)}, with --workload txn "
                        f"{','.join(TXN_DEFAULT_FAULTS)}, with --workload group "
                        f"{','.join(GROUP_DEFAULT_FAULTS)}")
    r.add_argument("--workload", default="plain", choices=["plain", "txn", "group", "share"],
                   help="plain: idempotent producers and consumers (default); txn: Jepsen's "
                        "queue with transactions (transactional producers committing or "
                        "aborting, read_committed and read_uncommitted reads); group: one "
                        "consumer group's members polling and committing through rebalances "
                        "and coordinator failovers; share: one share group's members (KIP-932) "
                        "acknowledging every record")
    r.add_argument("--group-members", type=int, default=3,
                   help="--workload group: members of the group at any time (confluent-kafka, "
                        "the classic protocol); --workload share: the share group's members")
    r.add_argument("--group-protocol", default="classic",
                   choices=["classic", "consumer", "mixed"],
                   help="--workload group: the members' group.protocol (classic: JoinGroup/"
                        "SyncGroup with the eager roundrobin assignor; consumer: KIP-848's "
                        "ConsumerGroupHeartbeat, incremental assignment by the broker; mixed: "
                        "members of both, one at a time coming back with the other protocol "
                        "on a seeded schedule, so the group converts both ways during the "
                        "faults, KIP-848's online migration)")
    r.add_argument("--txn-producers", type=int, default=3,
                   help="--workload txn: transactional producers (transactional.id "
                        "chaos-tp1, ...); --rate is then transactions per second for each")
    r.add_argument("--final-restart", action=argparse.BooleanOptionalAction, default=None,
                   help="after the workload: read everything, restart every broker in turn "
                        "(SIGTERM), then the final read, so it judges what the brokers rebuilt "
                        "from their files (default: on with --workload txn, off otherwise)")
    r.add_argument("--acks", default="all", choices=["all", "1"])
    r.add_argument("--security", default=None, choices=sorted(MODES),
                   help="a secured cluster as `cluster up --security` makes it; sasl_ssl: "
                        "SASL_SSL + SCRAM-SHA-512 on the client and inter-broker listeners "
                        "(the workload logs in as the admin), mTLS on the controller channel")
    r.add_argument("--truncation", default=DEFAULT_TRUNCATION.value,
                   help=f"broker truncation mode: {', '.join(m.value for m in Truncation)} "
                        "(anything but the default is unsafe)")
    r.add_argument("--unclean", action="store_true",
                   help="unclean.leader.election.enable=true (unsafe)")
    r.add_argument("--eligible-leader-replicas-version", type=int, choices=[0, 1], default=1,
                   help="KIP-966 eligible leader replicas and the unclean-shutdown rule in the "
                        "controllers: 1 on (default), 0 off (a power cut of the last ISR member "
                        "then loses acknowledged writes, so power cuts wait for whole ISRs)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--rate", type=float, default=40.0, help="sends per second per producer")
    r.add_argument("--topics", default="chaos-a:2,chaos-b:2", metavar="NAME:PARTITIONS,...")
    r.add_argument("--work-dir", default=None,
                   help="keep the cluster's data, logs and history here (default: a temporary "
                        "directory, removed after a valid run)")
    r.add_argument("--name", default="chaos", help="prefix of the network namespaces' names")
    r.add_argument("--report", default=None, metavar="DIR", help="write an HTML report here")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_run)
    chaos.set_defaults(func=lambda _args: (chaos.print_help(), 2)[1])


def _progress(report: FuzzReport) -> None:
    print(f"  {report.frames} frames, {report.frames_per_s:.0f}/s, {report.closed} closed",
          file=sys.stderr, flush=True)


def cmd_fuzz(args: argparse.Namespace) -> int:
    props: dict[str, str] = {}
    if args.command_config is not None:
        from floodmark.security import ClientSecurity, read_properties

        try:
            props = read_properties(args.command_config)
            ClientSecurity.from_properties(props)
        except (OSError, ValueError) as exc:
            print(f"error: --command-config {args.command_config}: {exc}", file=sys.stderr)
            return 2
    config = FuzzConfig(args.bootstrap, frames=args.frames, time_limit_s=args.time_limit_s,
                        seed=args.seed, broker_pid=args.broker_pid,
                        well_behaved_client=not args.no_client, connections=args.connections,
                        client_properties=props)
    try:
        report = run_fuzz(config, progress=None if args.json else _progress)
    except OSError as exc:
        print(f"error: cannot reach the broker at {args.bootstrap}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_json()))
    else:
        data = report.as_json()
        print(f"frames {data['frames']} ({data['frames_per_s']}/s) over {data['apis']} "
              f"API versions: answered {data['answered']}, connection closed {data['closed']}")
        print(f"broker alive: {data['broker_alive']}; well-behaved client: "
              f"{data['acknowledged']} acknowledged, {data['lost_count']} lost, "
              f"{len(data['client_errors'])} errors")
        if data["rss_before_kb"] >= 0:
            print(f"broker RSS {data['rss_before_kb']} kB -> {data['rss_after_kb']} kB")
        print("OK" if report.ok else "FAILED")
    return 0 if report.ok else 1


def cmd_run(args: argparse.Namespace) -> int:
    faults = (args.faults if args.faults is not None
              else ",".join(ChaosConfig.default_faults(args.workload)))
    config = ChaosConfig(
        brokers=args.brokers, controllers=args.controllers, time_limit_s=args.time_limit_s,
        faults=[f for f in faults.split(",") if f.strip()], acks=args.acks,
        truncation=args.truncation, unclean=args.unclean,
        eligible_leader_replicas=bool(args.eligible_leader_replicas_version), seed=args.seed,
        rate=args.rate,
        topics=args.topics, name=args.name, workload=args.workload,
        txn_producers=args.txn_producers, final_restart=args.final_restart,
        group_members=args.group_members, group_protocol=args.group_protocol,
        security=args.security, quiet_s=args.quiet_s, end_on_anomaly=args.end_on_anomaly,
        work_dir=Path(args.work_dir) if args.work_dir else None,
        report_dir=Path(args.report) if args.report else None)
    try:
        config.validate()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    say = (lambda _m: None) if args.json else (
        lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    try:
        result = run(config, say)
    except LabError as exc:
        print(f"error: floodmark chaos run needs root and iproute2/iptables ({exc})",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the cluster and the namespaces were removed", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    else:
        counts = {k: v for k, v in result["anomaly_counts"].items() if v}
        print(f"seed {result['seed']}: {result['acknowledged']} acknowledged of "
              f"{result['attempted']} sent, {len(result['faults'])} faults, final read "
              f"{'complete' if result['final']['complete'] else 'INCOMPLETE'}")
        txns = result.get("transactions")
        if txns:
            unknown = txns["unknown_resolved"]
            committed_read = result["final"].get("read_committed", {}).get("complete")
            print(f"transactions: {txns['committed']} committed, {txns['aborted']} aborted, "
                  f"{txns['unknown']} unknown (resolved: {unknown['visible']} visible, "
                  f"{unknown['invisible']} invisible, {unknown['torn']} torn); "
                  f"read_committed final read "
                  f"{'complete' if committed_read else 'INCOMPLETE'}")
        group = result.get("group")
        if group and "accepted" in group:  # the share-group workload
            acks = group["acknowledgements"]
            print(f"share group: {group['deliveries']} deliveries of "
                  f"{group['records_delivered']} records, {group['accepted']} accepted, "
                  f"{group['redelivered_records']} delivered more than once (max delivery "
                  f"count {group['max_delivery_count']}); acknowledgements {acks['ok']} ok, "
                  f"{acks['fail']} refused, {acks['info']} unknown; final drain "
                  f"{'idle' if group['drained'] else 'NOT IDLE'}")
        elif group:
            commits = group["commits"]
            print(f"group: {group['deliveries']} deliveries over {group['spans']} assignments "
                  f"in {group['generations']} generations, {group['redelivered_allowed']} "
                  f"re-deliveries from the last committed offset; commits {commits['ok']} ok, "
                  f"{commits['fail']} refused, {commits['info']} unknown")
            conversions = group.get("conversions")
            if result.get("protocol_switches") is not None and conversions is not None:
                switched = [s for s in result["protocol_switches"] if "joined" in s]
                print(f"protocol switches: {len(switched)} of "
                      f"{len(result['protocol_switches'])}; the group upgraded "
                      f"{conversions['upgrade']} times, downgraded {conversions['downgrade']} "
                      f"times")
        print("anomalies: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
        by_ack = result.get("duplicated_by_ack")
        if counts.get("duplicated") and by_ack:
            print("duplicated values, by what their producer was told: "
                  + ", ".join(f"{k} {v}" for k, v in by_ack.items()))
        by_origin = result.get("duplicated_by_origin")
        if counts.get("duplicated") and by_origin:
            print("duplicated values, by how the copies were written: "
                  + ", ".join(f"{k} {v}" for k, v in by_origin.items() if v))
        if result.get("longest_ack_gap_s") is not None:
            print(f"longest gap between acknowledgements: {result['longest_ack_gap_s']:.2f} s")
        if result.get("report"):
            print(f"report: {result['report']}")
        if result.get("work_dir"):
            print(f"history and logs: {result['work_dir']}")
        print("VALID" if result["valid"] else "INVALID")
    return 0 if result["valid"] else 1
