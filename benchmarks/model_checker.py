"""States per second of the explicit-state model checker, per protocol mode and bound.

    .venv/bin/python benchmarks/model_checker.py        # 2-replica bounds + 3 replicas, 2 changes
    .venv/bin/python benchmarks/model_checker.py --big  # + 3 replicas / 3 changes, atomic and
                                                        #   async ISR changes (~5 CPU-min, ~1.5 GB)
    .venv/bin/python benchmarks/model_checker.py --bound 3,2,3,async --modes leader-epoch

Prints wall and CPU seconds (the machine is shared: CPU time is the figure to compare) and the
process's peak RSS so far.

Historical modes stop at their first (shortest) counterexample, so their state counts are the
states explored until then; leader-epoch runs are exhaustive. Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time

from floodmark.mc.checker import check
from floodmark.mc.model import ModelConfig
from floodmark.replication.modes import Truncation

# (replicas, log_size, max_epoch, async AlterPartition)
BOUNDS = [(2, 2, 3, True), (2, 3, 4, True), (3, 2, 2, True), (3, 2, 2, False)]
BIG_BOUNDS = [(3, 2, 3, False), (3, 2, 3, True)]


def _bound(text: str) -> tuple[int, int, int, bool]:
    r, log, epochs, isr = text.split(",")
    if isr not in ("async", "atomic"):
        raise argparse.ArgumentTypeError("ISR changes: async or atomic")
    return int(r), int(log), int(epochs), isr == "async"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="also run the 3-replica/3-epoch bound")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--bound", type=_bound, action="append", metavar="R,LOG,EPOCHS,ISR",
                        help="run only these bounds (ISR: async or atomic); repeatable")
    parser.add_argument("--modes", default=",".join(m.value for m in Truncation),
                        help="comma-separated protocol modes (default: all)")
    parser.add_argument("--no-fencing", action="store_true", help="KIP-320 fencing off")
    parser.add_argument("--time-limit-s", type=float, default=1800)
    args = parser.parse_args()
    bounds = args.bound or (BOUNDS + (BIG_BOUNDS if args.big else []))
    modes = [Truncation.parse(m) for m in args.modes.split(",")]
    print(f"# python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    if not args.json:
        print(
            f"{'mode':<15} {'R':>2} {'log':>3} {'ep':>3} {'isr':>6} {'states':>10} {'depth':>5} "
            f"{'seconds':>8} {'cpu_s':>8} {'st/cpu-s':>9} {'rss_mb':>7}  verdict"
        )
    for replicas, log_size, max_epoch, async_isr in bounds:
        isr = "async" if async_isr else "atomic"
        for mode in modes:
            config = ModelConfig(
                mode,
                replicas=replicas,
                log_size=log_size,
                max_epoch=max_epoch,
                async_isr=async_isr,
                fencing=not args.no_fencing,
            )
            cpu_started = time.process_time()
            result = check(config, time_limit_s=args.time_limit_s)
            cpu = time.process_time() - cpu_started
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            if result.violation is not None:
                verdict = f"violated {result.violation.invariant} ({len(result.trace) - 1} steps)"
            else:
                verdict = "holds" if result.complete else "incomplete"
            if args.json:
                print(
                    json.dumps(
                        {
                            "truncation": mode.value,
                            "replicas": replicas,
                            "log_size": log_size,
                            "max_epoch": max_epoch,
                            "isr_changes": isr,
                            "states": result.states,
                            "transitions": result.transitions,
                            "depth": result.depth,
                            "seconds": round(result.seconds, 3),
                            "cpu_seconds": round(cpu, 3),
                            "states_per_second": round(result.states_per_second),
                            "states_per_cpu_second": round(result.states / cpu) if cpu else None,
                            "peak_rss_mb": round(rss_mb),
                            "fencing": not args.no_fencing,
                            "verdict": verdict,
                        }
                    ),
                    flush=True,
                )
            else:
                print(
                    f"{mode.value:<15} {replicas:>2} {log_size:>3} {max_epoch:>3} {isr:>6} "
                    f"{result.states:>10} {result.depth:>5} {result.seconds:>8.2f} {cpu:>8.2f} "
                    f"{result.states / cpu if cpu else 0:>9.0f} {rss_mb:>7.0f}  {verdict}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
