"""``floodmark chaos``: fault injection against real processes.

``floodmark chaos fuzz --bootstrap HOST:PORT [--frames N] [--time-limit-s S] [--seed S]
[--broker-pid PID] [--json]`` sends malformed requests for every API the broker advertises while
a well-behaved client produces (acks=all, idempotent) and reads back; exit status 0 only when the
broker is still alive and nothing the client was told is written went missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.chaos.fuzz import FuzzConfig, FuzzReport, run_fuzz


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
    fuzz.add_argument("--json", action="store_true")
    fuzz.set_defaults(func=cmd_fuzz)
    chaos.set_defaults(func=lambda _args: (chaos.print_help(), 2)[1])


def _progress(report: FuzzReport) -> None:
    print(f"  {report.frames} frames, {report.frames_per_s:.0f}/s, {report.closed} closed",
          file=sys.stderr, flush=True)


def cmd_fuzz(args: argparse.Namespace) -> int:
    config = FuzzConfig(args.bootstrap, frames=args.frames, time_limit_s=args.time_limit_s,
                        seed=args.seed, broker_pid=args.broker_pid,
                        well_behaved_client=not args.no_client, connections=args.connections)
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
