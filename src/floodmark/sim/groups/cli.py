"""``floodmark sim groups``: the group coordinator cores under random steps, in two worlds
(``explore``): a classic group, and classic and consumer-protocol members in one group (KIP-848's
online migration).

* ``floodmark sim groups --seeds N [--start-seed S] [--steps 3000] [--world classic|mixed|both]
  [--json] [--fail-on-violation]`` — one line per seed with a violation, then a summary per
  world (``both``, the default, runs every seed in each).
* ``floodmark sim groups --replay SEED [--world mixed]`` — one seed's trace (its last steps).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from floodmark.sim.groups.explore import WORLDS, GroupExploreOptions, run_group_seed


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def register(sim_subparsers: Any) -> None:
    p = sim_subparsers.add_parser(
        "groups", help="a consumer group (rebalances, static members, coordinator "
                       "failovers; classic and consumer-protocol members, upgrades and "
                       "downgrades) under random steps, spec.groups invariants after each")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--start-seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=3000, help="steps per seed (default 3000)")
    p.add_argument("--failover-weight", type=float, default=0.005,
                   help="chance that a step is a coordinator failover (default 0.005)")
    p.add_argument("--world", choices=(*WORLDS, "both"), default="both",
                   help="classic: a classic group; mixed: classic and consumer-protocol "
                        "members in one group (KIP-848's migration); both (default)")
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
    # The cores log every rebalance, removal and failed store: thousands per seed here.
    for name in ("floodmark.groups.classic_group", "floodmark.groups.consumer_group"):
        logging.getLogger(name).setLevel(logging.ERROR)
    worlds = WORLDS if args.world == "both" else (args.world,)
    if args.replay is not None:
        if len(worlds) != 1:
            sys.stderr.write("--replay needs --world classic or --world mixed\n")
            return 2
        result = run_group_seed(args.replay, GroupExploreOptions(
            steps=args.steps, failover_weight=args.failover_weight, world=worlds[0]))
        if args.json:
            _print(json.dumps({**result.as_json(), "trace": result.trace}))
        else:
            for line in result.trace:
                _print(line)
            _print(f"seed {result.seed}: {'OK' if result.ok else 'VIOLATION'}")
        return 0 if result.ok else 1
    results = [run_group_seed(seed, GroupExploreOptions(
                   steps=args.steps, failover_weight=args.failover_weight, world=world))
               for world in worlds
               for seed in range(args.start_seed, args.start_seed + args.seeds)]
    bad = [r for r in results if not r.ok]
    if args.json:
        _print(json.dumps({"seeds": args.seeds, "worlds": list(worlds),
                           "violations": len(bad),
                           "results": [r.as_json() for r in results]}))
    else:
        for r in bad:
            v = r.violations[0]
            _print(f"{r.world} seed {r.seed}: {v.invariant} at step {v.step}: {v.detail} "
                   f"(replay: floodmark sim groups --replay {r.seed} --world {r.world} "
                   f"--steps {args.steps})")
        for world in worlds:
            mine = [r for r in results if r.world == world]
            moves = (f"{sum(r.rebalances for r in mine)} rebalances" if world == "classic"
                     else f"{sum(r.upgrades for r in mine)} upgrades, "
                          f"{sum(r.downgrades for r in mine)} downgrades")
            _print(f"{world}: {len(mine)} seeds, {sum(r.steps for r in mine)} steps, {moves}, "
                   f"{sum(r.commits for r in mine)} commits, "
                   f"{sum(r.failovers for r in mine)} coordinator failovers: "
                   f"{sum(not r.ok for r in mine)} with violations")
    return 1 if bad and args.fail_on_violation else 0
