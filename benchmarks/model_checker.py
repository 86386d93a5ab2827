"""States per second of the explicit-state model checker, per protocol mode and bound.

    .venv/bin/python benchmarks/model_checker.py        # 2-replica bounds + 3 replicas, 2 epochs
    .venv/bin/python benchmarks/model_checker.py --big  # + 3 replicas / 3 epochs, atomic ISR changes
                                                        #   (~1.5-3 min, ~1.1 GB)

Historical modes stop at their first (shortest) counterexample, so their state counts are the
states explored until then; leader-epoch runs are exhaustive. Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

from floodmark.mc.checker import check
from floodmark.mc.model import ModelConfig
from floodmark.replication.modes import Truncation

# (replicas, log_size, max_epoch, async AlterPartition)
BOUNDS = [(2, 2, 3, True), (2, 3, 4, True), (3, 2, 2, True), (3, 2, 2, False)]
BIG_BOUNDS = [(3, 2, 3, False)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="also run the 3-replica/3-epoch bound")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    bounds = BOUNDS + (BIG_BOUNDS if args.big else [])
    print(f"# python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    if not args.json:
        print(
            f"{'mode':<15} {'R':>2} {'log':>3} {'ep':>3} {'isr':>6} {'states':>10} {'depth':>5} "
            f"{'seconds':>8} {'states/s':>9}  verdict"
        )
    for replicas, log_size, max_epoch, async_isr in bounds:
        isr = "async" if async_isr else "atomic"
        for mode in Truncation:
            config = ModelConfig(
                mode,
                replicas=replicas,
                log_size=log_size,
                max_epoch=max_epoch,
                async_isr=async_isr,
            )
            result = check(config, time_limit_s=1800)
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
                            "states_per_second": round(result.states_per_second),
                            "verdict": verdict,
                        }
                    ),
                    flush=True,
                )
            else:
                print(
                    f"{mode.value:<15} {replicas:>2} {log_size:>3} {max_epoch:>3} {isr:>6} "
                    f"{result.states:>10} {result.depth:>5} {result.seconds:>8.2f} "
                    f"{result.states_per_second:>9.0f}  {verdict}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
