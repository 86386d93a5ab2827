"""``floodmark demo``: the README's main job.

By default: the end-to-end pipeline (floodmark.demo.pipeline): a local 3-broker cluster, a page
view producer, a Spark Structured Streaming job with windowed counts written to a topic and to
Parquet, a partition leader SIGKILLed mid-stream, and a final check that nothing acknowledged was
lost or counted twice.

``floodmark demo --tour``: the guided tour. It replays the reference scenarios in every protocol
mode, runs the random-fault explorer and the model checker, and then starts a real broker process, sends it traffic with a
real Kafka client, kills it with SIGKILL, and shows that nothing acknowledged was lost. Last, a
real local cluster (controller + 3 brokers, RF=3) loses its partition leader to SIGKILL mid-stream
(``demo/cluster.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from floodmark.progress import add_progress_flag
from floodmark.replication import Truncation
from floodmark.sim import SCENARIOS, render_steps, run_scenario

MODES = (Truncation.HIGH_WATERMARK, Truncation.EPOCH_OFFSET, Truncation.LEADER_EPOCH)


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _banner(title: str) -> None:
    _say()
    _say("=" * 100)
    _say(title)
    _say("=" * 100)


def _show_scenario(name: str, mode: Truncation) -> bool:
    result = run_scenario(name, mode)
    _say(f"--- {name} [{mode.value}]  ({SCENARIOS[name][1]})")
    for line in render_steps(result.steps):
        _say(line)
    _say(result.verdict)
    return result.as_expected


def tour_scenarios() -> bool:
    ok = True
    _banner("1. How replication works when nothing fails: three-replica-sync (leader-epoch mode)")
    _say("Watch the leader's HW follow the slowest in-sync follower, and the followers learn")
    _say("about commitment one fetch round late.")
    ok &= _show_scenario("three-replica-sync", Truncation.LEADER_EPOCH)

    _banner("2. Why that lag matters: hw-truncation-data-loss, old rule vs today's rule")
    ok &= _show_scenario("hw-truncation-data-loss", Truncation.HIGH_WATERMARK)
    _say()
    ok &= _show_scenario("hw-truncation-data-loss", Truncation.LEADER_EPOCH)

    _banner("3. Every reference scenario in every protocol mode")
    header = f"{'scenario':<26} " + " ".join(f"{m.value:<34}" for m in MODES)
    _say(header)
    for name in SCENARIOS:
        cells = []
        for mode in MODES:
            result = run_scenario(name, mode)
            ok &= result.as_expected
            lost = ("lost " + ",".join(result.lost)) if result.lost else "nothing lost"
            div = "DIVERGED" if result.diverged else "identical"
            mark = "" if result.as_expected else " (!)"
            cells.append(f"{lost}; {div}{mark}"[:34].ljust(34))
        _say(f"{name:<26} " + " ".join(cells))
    _say(
        "(every cell matches the outcome the reference documents record; (!) would mark a mismatch)"
    )
    return ok


def tour_explorer(seeds: int) -> bool:
    from floodmark.sim import ExploreOptions, explore, reproduce_command

    _banner(f"4. Random fault schedules: {seeds} seeds per mode, SPEC §4 checked after every event")
    found: dict[Truncation, int] = {}
    for mode in (Truncation.HIGH_WATERMARK, Truncation.LEADER_EPOCH):
        options = ExploreOptions(truncation=mode)
        report = explore(seeds, options)
        data: dict[str, Any] = report.as_json()
        failing = data["failing_seeds"]
        found[mode] = len(failing)
        _say(
            f"{mode.value:<15} {len(failing):>4} of {data['seeds']} seeds violate an invariant "
            f"({data['acknowledged_writes']} acknowledged writes checked, "
            f"{data['seeds_per_second']:.1f} seeds/s)"
        )
        if data["violations"]:
            first = data["violations"][0]
            _say(f"    e.g. seed {first['seed']}: {first['invariant']}: {first['detail'][:110]}")
            _say(f"    reproduce: {reproduce_command(first['seed'], options)}")
    return found[Truncation.LEADER_EPOCH] == 0


def tour_model_checker() -> bool:
    from floodmark.cli import main as cli_main

    _banner(
        "5. Model checker: exhaustive proof in leader-epoch mode, shortest counterexample otherwise"
    )
    ok = True
    for mode in ("leader-epoch", "epoch-offset"):
        _say(f"$ floodmark sim check --truncation {mode}")
        code = cli_main(["sim", "check", "--truncation", mode])
        ok &= code == 0 if mode == "leader-epoch" else True
        _say()
    return ok


def cmd_tour(args: argparse.Namespace) -> int:
    started = time.monotonic()
    ok = tour_scenarios()
    if not args.quick:
        ok &= tour_explorer(args.seeds)
        ok &= tour_model_checker()
        from floodmark.demo.live import live_broker_tour

        ok &= live_broker_tour()
        from floodmark.demo.cluster import live_cluster_tour

        ok &= live_cluster_tour()
    _banner(
        f"demo finished in {time.monotonic() - started:.0f} s: "
        + ("all as expected" if ok else "SOMETHING UNEXPECTED, see above")
    )
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    if args.tour or args.quick:
        return cmd_tour(args)
    from floodmark.demo.pipeline import Stalled, run

    try:
        return 0 if run(args.events, args.rate, args.keep, args.down_s, args.progress,
                        args.spark_master) else 1
    except Stalled as exc:
        _say(f"demo FAILED: {exc}")
        return 1
    except KeyboardInterrupt:
        _say("interrupted; every process the demo started has been stopped")
        return 130


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="the main job: a Spark pipeline on a local cluster with a leader SIGKILL "
        "(--tour: the guided tour of the replication scenarios)")
    demo.add_argument("--events", type=int, default=12000, help="page views to produce")
    demo.add_argument("--rate", type=float, default=200.0, help="page views per second")
    demo.add_argument("--down-s", type=float, default=8.0,
                      help="seconds the killed leader stays down before it is restarted")
    demo.add_argument("--spark-master", default="local[2]",
                      help="where the Spark job runs: local[2], or a Spark cluster's master URL "
                      "(spark://host:7077; its executors need floodmark: docs/spark.md)")
    demo.add_argument("--keep", action="store_true",
                      help="keep the cluster's data and logs, the Parquet output, "
                      "the checkpoints and each query's progress (JSON)")
    demo.add_argument("--tour", action="store_true",
                      help="the guided tour instead: scenarios in every protocol mode, explorer, "
                      "model checker, a broker and then a cluster leader SIGKILLed")
    demo.add_argument("--seeds", type=int, default=60, help="--tour: explorer seeds per mode")
    demo.add_argument("--quick", action="store_true", help="--tour with the scenarios only")
    add_progress_flag(demo)
    demo.set_defaults(func=cmd_demo)
