"""``floodmark sim scenario|explore|replay`` (registered under the ``sim`` group by floodmark.cli).

Contract (scripts rely on these names):

* ``floodmark sim scenario --list``
* ``floodmark sim scenario NAME [--truncation MODE] [--json] [--verbose]`` — a step table, then
  one verdict line; exit status 0 when the historical outcome was reproduced, 1 otherwise.
* ``floodmark sim explore --seeds N --truncation MODE [--replicas 3] [--json]
  [--spark MASTER [--spark-parts 64]]``
* ``floodmark sim replay --seed S --truncation MODE [--replicas N] [--json]``
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.replication import DEFAULT_TRUNCATION, Truncation
from floodmark.sim.partition.explore import (
    DEFAULT_TRANSACTION_VERSION,
    DEFAULT_TXN_GIVE_UP_AFTER_MS,
    TRANSACTION_VERSIONS,
    ExploreOptions,
    SeedResult,
    explore,
    reproduce_command,
    run_seed,
)
from floodmark.sim.partition.report import render_steps, transactions_open
from floodmark.sim.partition.scenarios import SCENARIOS, run_scenario

MODES = [m.value for m in Truncation]


UNSAFE_DUPLICATES_HELP = (
    "UNSAFE: brokers acknowledge a retried duplicate batch before the HW covers it "
    "(the bug of issue 8), to show the explorer finds it"
)


TRANSACTIONS_HELP = (
    "also run transactions (half aborted) and a read_committed consumer; checks that it is "
    "never served an aborted or undecided transaction's record"
)
TXN_GIVE_UP_HELP = (
    "with --transactions: the writer purges a record unacknowledged this long and aborts, "
    "reusing its sequence next, as librdkafka does (0: never; default "
    f"{DEFAULT_TXN_GIVE_UP_AFTER_MS})"
)
TRANSACTION_VERSION_HELP = (
    "with --transactions: the writer's transaction.version, 0 or 1 (EndTxn without an epoch "
    "bump) or 2 (KIP-890 part 2: every EndTxn bumps the epoch; default "
    f"{DEFAULT_TRANSACTION_VERSION})"
)
NO_VERIFICATION_HELP = (
    "with --transactions: transaction.partition.verification.enable=false on the brokers (no "
    "KIP-890 part 1 verification before a transaction's first batch on the partition)"
)
KAFKA_ABORTED_DUPLICATES_HELP = (
    "UNSAFE, to show it is caught: Kafka's rule, a batch of an aborted transaction answers a "
    "new batch with its epoch and sequence as a duplicate (loses committed records)"
)

FOLLOWER_FETCHING_HELP = (
    "KIP-392: every broker in its own rack, the rack-aware selector on, the consumer in broker "
    "2's rack (it reads from that broker while it follows); every record a follower serves must "
    "be committed, the consumer's position must never move back")
NO_STEP_DOWN_HELP = (
    "Kafka's stale leader: a broker whose controller session lapsed answers clients as leader "
    "until the metadata moves its partitions (floodmark steps down for clients, issue 26)"
)


SCAN_CHUNK_HELP = (
    "the brokers' LogConfig.scan_chunk_bytes (>= 61): how much one read takes when a restart "
    "scans the log; default: drawn per seed between 61 and 400"
)


def _scan_chunk_bytes(text: str) -> int:
    value = int(text)
    if value < 61:
        raise argparse.ArgumentTypeError(f"must be >= 61 (a batch header), got {value}")
    return value


def _mode(text: str) -> Truncation:
    try:
        return Truncation.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def register(sim_subparsers: Any) -> None:
    scenario = sim_subparsers.add_parser(
        "scenario", help="replay a reference-document scenario step by step"
    )
    scenario.add_argument("name", nargs="?", help="scenario name (see --list)")
    scenario.add_argument("--list", action="store_true", help="list the scenarios")
    scenario.add_argument(
        "--truncation",
        type=_mode,
        default=DEFAULT_TRUNCATION,
        metavar="MODE",
        help=f"protocol mode: {' | '.join(MODES)} (default {DEFAULT_TRUNCATION.value})",
    )
    scenario.add_argument("--json", action="store_true", help="print one JSON object")
    scenario.add_argument("--verbose", action="store_true", help="show each step's trace lines")
    scenario.set_defaults(func=cmd_scenario)

    explore_p = sim_subparsers.add_parser(
        "explore", help="random fault schedules, SPEC §4 invariants after every event"
    )
    explore_p.add_argument("--seeds", type=int, default=200)
    explore_p.add_argument("--start-seed", type=int, default=1)
    explore_p.add_argument("--truncation", type=_mode, default=DEFAULT_TRUNCATION, metavar="MODE")
    explore_p.add_argument("--replicas", type=int, default=3, choices=(2, 3, 4, 5))
    explore_p.add_argument(
        "--fault-phase-ms", type=int, default=4000, help="virtual ms of faults per seed"
    )
    explore_p.add_argument(
        "--unsafe-ack-duplicates-before-commit", action="store_true", help=UNSAFE_DUPLICATES_HELP
    )
    explore_p.add_argument("--transactions", action="store_true", help=TRANSACTIONS_HELP)
    explore_p.add_argument("--txn-give-up-after-ms", type=int, default=DEFAULT_TXN_GIVE_UP_AFTER_MS,
                        metavar="MS", help=TXN_GIVE_UP_HELP)
    explore_p.add_argument("--transaction-version", type=int, choices=TRANSACTION_VERSIONS,
                        default=DEFAULT_TRANSACTION_VERSION, metavar="N",
                        help=TRANSACTION_VERSION_HELP)
    explore_p.add_argument("--no-transaction-verification", action="store_true",
                        help=NO_VERIFICATION_HELP)
    explore_p.add_argument("--kafka-aborted-batch-duplicates", action="store_true",
                        help=KAFKA_ABORTED_DUPLICATES_HELP)
    explore_p.add_argument("--no-step-down-on-lapse", action="store_true",
                           help=NO_STEP_DOWN_HELP)
    explore_p.add_argument("--follower-fetching", action="store_true",
                           help=FOLLOWER_FETCHING_HELP)
    explore_p.add_argument("--scan-chunk-bytes", type=_scan_chunk_bytes, default=None,
                          metavar="N", help=SCAN_CHUNK_HELP)
    explore_p.add_argument("--json", action="store_true")
    explore_p.add_argument(
        "--fail-on-violation", action="store_true", help="exit 1 if any violation was found"
    )
    explore_p.add_argument(
        "--spark",
        metavar="MASTER",
        default=None,
        help="run the seeds as Spark tasks (e.g. local[2], spark://host:7077), a contiguous "
        "range of seeds per task",
    )
    explore_p.add_argument(
        "--spark-parts", type=int, default=64, help="at most this many tasks (default 64)"
    )
    explore_p.set_defaults(func=cmd_explore)

    replay = sim_subparsers.add_parser("replay", help="rerun one explorer seed and print its trace")
    replay.add_argument("--seed", type=int, required=True)
    replay.add_argument("--truncation", type=_mode, default=DEFAULT_TRUNCATION, metavar="MODE")
    replay.add_argument("--replicas", type=int, default=3, choices=(2, 3, 4, 5))
    replay.add_argument("--fault-phase-ms", type=int, default=4000)
    replay.add_argument(
        "--unsafe-ack-duplicates-before-commit", action="store_true", help=UNSAFE_DUPLICATES_HELP
    )
    replay.add_argument("--transactions", action="store_true", help=TRANSACTIONS_HELP)
    replay.add_argument("--txn-give-up-after-ms", type=int, default=DEFAULT_TXN_GIVE_UP_AFTER_MS,
                        metavar="MS", help=TXN_GIVE_UP_HELP)
    replay.add_argument("--transaction-version", type=int, choices=TRANSACTION_VERSIONS,
                        default=DEFAULT_TRANSACTION_VERSION, metavar="N",
                        help=TRANSACTION_VERSION_HELP)
    replay.add_argument("--no-transaction-verification", action="store_true",
                        help=NO_VERIFICATION_HELP)
    replay.add_argument("--kafka-aborted-batch-duplicates", action="store_true",
                        help=KAFKA_ABORTED_DUPLICATES_HELP)
    replay.add_argument("--no-step-down-on-lapse", action="store_true", help=NO_STEP_DOWN_HELP)
    replay.add_argument("--follower-fetching", action="store_true", help=FOLLOWER_FETCHING_HELP)
    replay.add_argument("--scan-chunk-bytes", type=_scan_chunk_bytes, default=None,
                          metavar="N", help=SCAN_CHUNK_HELP)
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=cmd_replay)

    from floodmark.sim.quorum import cli as quorum_cli

    quorum_cli.register(sim_subparsers)


def cmd_scenario(args: argparse.Namespace) -> int:
    if args.list or not args.name:
        for name, (_fn, description) in SCENARIOS.items():
            _print(f"{name:<26} {description}")
        return 0 if args.list else 2
    try:
        result = run_scenario(args.name, args.truncation)
    except KeyError as exc:
        sys.stderr.write(f"{exc.args[0]}\n")
        return 2
    if args.json:
        _print(json.dumps(result.as_json()))
        return 0 if result.as_expected else 1
    _print(f"scenario {result.scenario} — truncation mode {result.truncation.value}")
    _print(f"({SCENARIOS[result.scenario][1]})")
    _print(
        "replica: log [offset:epoch:value]  LEO  HW  epoch cache {epoch:start}  (* = acts as leader)"
    )
    if any(transactions_open(snap) for step in result.steps
           for snap in step["replicas"].values()):
        _print("where a transaction is open: LSO (last stable offset, `|` in the log), "
               "open={producer@first offset}")
    _print()
    if result.title:
        _print(result.title)
    for line in render_steps(result.steps, verbose=args.verbose):
        _print(line)
    _print()
    titles = {
        "clean": "clean-election variant (unclean.leader.election.enable=false):",
        "eligible_leader_replicas": "variant with KIP-966 eligible leader replicas enabled:",
    }
    for key, variant in result.variants.items():
        if "steps" not in variant:
            continue
        _print(titles.get(key, f"variant {key}:"))
        for line in render_steps(variant["steps"], verbose=args.verbose):
            _print(line)
        _print(f"  -> lost: {', '.join(variant['lost']) or 'nothing'}")
        _print()
    _print(f"acknowledged (acks=all): {', '.join(result.acknowledged) or '-'}")
    if result.acknowledged_acks1:
        _print(f"acknowledged (acks=1): {', '.join(result.acknowledged_acks1)}")
    if result.facts:
        _print("facts: " + ", ".join(f"{k}={v}" for k, v in result.facts.items()))
    _print(result.verdict)
    return 0 if result.as_expected else 1


def _options(args: argparse.Namespace) -> ExploreOptions:
    return ExploreOptions(
        replicas=args.replicas,
        truncation=args.truncation,
        fault_phase_ms=args.fault_phase_ms,
        unsafe_ack_duplicates_before_commit=args.unsafe_ack_duplicates_before_commit,
        transactions=args.transactions,
        txn_give_up_after_ms=args.txn_give_up_after_ms,
        kafka_aborted_batch_duplicates=args.kafka_aborted_batch_duplicates,
        transaction_version=args.transaction_version,
        transaction_verification=not args.no_transaction_verification,
        scan_chunk_bytes=args.scan_chunk_bytes,
        step_down_on_lapse=not args.no_step_down_on_lapse,
        follower_fetching=args.follower_fetching,
    )


def _transactions_note(options: ExploreOptions) -> str:
    if not options.transactions:
        return ""
    verification = "" if options.transaction_verification else ", verification off"
    return f", transactions at transaction.version {options.transaction_version}{verification}"


def cmd_explore(args: argparse.Namespace) -> int:
    options = _options(args)
    if args.seeds <= 0:
        sys.stderr.write("--seeds must be positive\n")
        return 2
    if args.spark is not None:
        if args.spark_parts <= 0:
            sys.stderr.write("--spark-parts must be positive\n")
            return 2
        from floodmark.sim.partition.distributed import explore_on_spark

        report = explore_on_spark(args.seeds, options, args.spark, start_seed=args.start_seed,
                                  parts=args.spark_parts)
    else:
        report = explore(args.seeds, options, start_seed=args.start_seed)
    data = report.as_json()
    if args.json:
        _print(json.dumps(data))
    else:
        _print(
            f"explored {data['seeds']} seeds in {options.truncation.value} mode "
            f"(RF {options.replicas}, min.insync.replicas {options.min_insync_replicas}"
            f"{_transactions_note(options)}): "
            f"{len(data['failing_seeds'])} seeds with violations, "
            f"{data['acknowledged_writes']} acknowledged writes checked, "
            f"{data['restarts']} broker restarts, "
            f"{data['elapsed_s']:.1f} s ({data['seeds_per_second']:.1f} seeds/s)"
        )
        shown: set[tuple[int, str]] = set()
        for v in data["violations"]:
            key = (v["seed"], v["invariant"])
            if key in shown:
                continue
            shown.add(key)
            _print(f"seed {v['seed']}: {v['invariant']}: {v['detail']}")
            _print(f"    reproduce: {v['reproduce']}")
        for loss in data["reported_losses"]:
            _print(f"seed {loss['seed']}: reported (outside SPEC §4 premise): {loss['detail']}")
    if args.fail_on_violation and data["violations"]:
        return 1
    return 0


def _replay_json(result: SeedResult, options: ExploreOptions) -> dict[str, Any]:
    return {
        "seed": result.seed,
        "truncation": options.truncation.value,
        "replicas": options.replicas,
        "trace_hash": result.trace_hash,
        "events": result.events,
        "faults": result.faults,
        "violations": [
            {
                "seed": result.seed,
                "invariant": v.invariant,
                "detail": v.detail,
                "time_ms": v.time_ms,
            }
            for v in result.violations
        ],
        "trace": result.trace,
    }


def cmd_replay(args: argparse.Namespace) -> int:
    options = _options(args)
    result = run_seed(args.seed, options, keep_trace=True)
    if args.json:
        _print(json.dumps(_replay_json(result, options)))
        return 0
    for line in result.trace:
        _print(line)
    _print()
    _print(f"faults: {len(result.faults)}; events: {result.events}; trace hash {result.trace_hash}")
    if not result.violations:
        _print("no invariant violated")
    for v in result.violations:
        _print(f"VIOLATION at {v.time_ms} ms: {v.invariant}: {v.detail}")
    if result.violations:
        _print(f"reproduce: {reproduce_command(result.seed, options)}")
    return 0
