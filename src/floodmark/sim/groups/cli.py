"""``floodmark sim groups``: the classic group coordinator core under random steps.

* ``floodmark sim groups --seeds N [--start-seed S] [--steps 3000] [--json]
  [--fail-on-violation]`` — one line per seed with a violation, then a summary.
* ``floodmark sim groups --replay SEED`` — one seed's trace (its last steps).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from floodmark.sim.groups.explore import GroupExploreOptions, run_group_seed


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def register(sim_subparsers: Any) -> None:
    p = sim_subparsers.add_parser(
        "groups", help="a classic consumer group (rebalances, static members, coordinator "
                       "failovers) under random steps, spec.groups invariants after each")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--start-seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=3000, help="steps per seed (default 3000)")
    p.add_argument("--failover-weight", type=float, default=0.005,
                   help="chance that a step is a coordinator failover (default 0.005)")
    p.add_argument("--replay", type=int, default=None, metavar="SEED",
                   help="run one seed and print its trace")
    p.add_argument("--json", action="store_true")
    p.add_argument("--fail-on-violation", action="store_true",
                   help="exit 1 if any seed broke an invariant")
    p.set_defaults(func=cmd_groups)


def cmd_groups(args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.steps < 1 or not 0 <= args.failover_weight <= 1:
        sys.stderr.write("--seeds and --steps must be positive, --failover-weight in [0, 1]\n")
        return 2
    # The core logs every rebalance and failed store: thousands per seed here.
    logging.getLogger("floodmark.broker.classic_group").setLevel(logging.ERROR)
    options = GroupExploreOptions(steps=args.steps, failover_weight=args.failover_weight)
    if args.replay is not None:
        result = run_group_seed(args.replay, options)
        if args.json:
            _print(json.dumps({**result.as_json(), "trace": result.trace}))
        else:
            for line in result.trace:
                _print(line)
            _print(f"seed {result.seed}: {'OK' if result.ok else 'VIOLATION'}")
        return 0 if result.ok else 1
    results = [run_group_seed(seed, options)
               for seed in range(args.start_seed, args.start_seed + args.seeds)]
    bad = [r for r in results if not r.ok]
    if args.json:
        _print(json.dumps({"seeds": len(results), "violations": len(bad),
                           "results": [r.as_json() for r in results]}))
    else:
        for r in bad:
            v = r.violations[0]
            _print(f"seed {r.seed}: {v.invariant} at step {v.step}: {v.detail} "
                   f"(replay: floodmark sim groups --replay {r.seed} --steps {args.steps})")
        _print(f"{len(results)} seeds, {sum(r.steps for r in results)} steps, "
               f"{sum(r.rebalances for r in results)} rebalances, "
               f"{sum(r.commits for r in results)} commits, "
               f"{sum(r.failovers for r in results)} coordinator failovers: "
               f"{len(bad)} with violations")
    return 1 if bad and args.fail_on_violation else 0
