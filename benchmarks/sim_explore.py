"""Explorer throughput: seeds per second (and simulated events per second) in each protocol mode.

    .venv/bin/python benchmarks/sim_explore.py [--seeds 200] [--replicas 3]

Prints figures, never pass/fail. Wall time is measured around whole runs only; the simulation
itself never reads a clock.
"""

from __future__ import annotations

import argparse
import platform
import sys

from floodmark.replication.modes import Truncation
from floodmark.sim.partition.explore import ExploreOptions, explore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--replicas", type=int, default=3)
    args = parser.parse_args(argv)
    out = sys.stdout
    out.write(
        f"python {platform.python_version()} on {platform.machine()}; {args.seeds} seeds per mode, RF {args.replicas}\n"
    )
    out.write(
        f"{'mode':<16} {'seeds/s':>8} {'events/s':>10} {'wall s':>7} {'acked':>7} {'failing seeds':>14}\n"
    )
    for mode in Truncation:
        report = explore(args.seeds, ExploreOptions(replicas=args.replicas, truncation=mode))
        data = report.as_json()
        events_per_s = data["events"] / report.elapsed_s if report.elapsed_s else 0.0
        out.write(
            f"{mode.value:<16} {data['seeds_per_second']:>8.1f} {events_per_s:>10.0f} {report.elapsed_s:>7.1f} "
            f"{data['acknowledged_writes']:>7} {len(data['failing_seeds']):>14}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
