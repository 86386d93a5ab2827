"""``floodmark sim quorum``: the controller quorum in the simulator.

* ``floodmark sim quorum --seeds N [--start-seed S] [--voters 3] [--fault-phase-ms MS] [--json]``
  — random fault schedules; exit 1 with ``--fail-on-violation`` if any seed broke an invariant.
* ``floodmark sim quorum --scenario election [--json]`` — an election step by step.
* ``floodmark sim quorum --scenario wiped-records|wiped-vote [--json]`` — a voter that lost its
  data dir comes back (``sim/quorum/wipe.py``).
* ``floodmark sim quorum --replay SEED`` — one seed's trace.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from floodmark.sim.quorum.explore import QuorumExploreOptions, run_quorum_seed
from floodmark.sim.quorum.scenario import run_election_scenario
from floodmark.sim.quorum.wipe import WIPE_SCENARIOS, run_wipe_scenario
from floodmark.spec import QuorumStep, render_quorum_steps


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def register(sim_subparsers: Any) -> None:
    p = sim_subparsers.add_parser(
        "quorum", help="the controller quorum (KIP-595 + pre-vote) under random faults")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--start-seed", type=int, default=1)
    p.add_argument("--voters", type=int, default=3, choices=(1, 2, 3, 4, 5))
    p.add_argument("--fault-phase-ms", type=int, default=4000)
    p.add_argument("--loss", type=float, default=0.02, help="request loss probability")
    p.add_argument("--scenario", choices=("election", *WIPE_SCENARIOS), default=None,
                   help="print a named scenario step by step instead of exploring")
    p.add_argument("--replay", type=int, default=None, metavar="SEED",
                   help="rerun one seed and print its trace")
    p.add_argument("--snapshot-interval", type=int, default=0, metavar="RECORDS",
                   help="voters snapshot every RECORDS committed records and cut their logs "
                        "(KIP-630; 0: off)")
    p.add_argument("--wipes", action="store_true",
                   help="also crash voters with the loss of their whole data dir (one at a "
                        "time; the voter restarts on a new directory id)")
    p.add_argument("--voter-changes", action="store_true",
                   help="also send AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter to the leader (KIP-853; the "
                        "last node starts as an observer)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--fail-on-violation", action="store_true")
    p.set_defaults(func=cmd_quorum)


def cmd_quorum(args: argparse.Namespace) -> int:
    if args.seeds <= 0 or args.fault_phase_ms < 0 or not 0 <= args.loss < 1:
        sys.stderr.write("--seeds must be positive, --fault-phase-ms >= 0, 0 <= --loss < 1\n")
        return 2
    if args.scenario:
        return _scenario(args)
    if args.snapshot_interval < 0:
        sys.stderr.write("--snapshot-interval must not be negative\n")
        return 2
    options = QuorumExploreOptions(voters=args.voters, fault_phase_ms=args.fault_phase_ms,
                                   loss_probability=args.loss,
                                   snapshot_interval=args.snapshot_interval,
                                   wipes=args.wipes, voter_changes=args.voter_changes)
    if args.replay is not None:
        result = run_quorum_seed(args.replay, options, trace=True)
        return _replay(args, result)
    started = time.monotonic()
    results = [run_quorum_seed(s, options)
               for s in range(args.start_seed, args.start_seed + args.seeds)]
    elapsed = time.monotonic() - started
    failing = [r for r in results if not r.ok]
    summary = {"seeds": len(results), "voters": args.voters,
               "failing_seeds": [r.seed for r in failing],
               "elections": sum(r.elections for r in results),
               "committed_records": sum(r.committed for r in results),
               "writes": sum(r.writes for r in results),
               "events": sum(r.events for r in results), "elapsed_s": round(elapsed, 2),
               "snapshots_loaded": sum(r.snapshots_loaded for r in results),
               "wipes": sum(r.wipes for r in results),
               "readmissions": sum(r.readmissions for r in results),
               "voter_changes": sum(r.voter_changes for r in results),
               "violations": [dict(v, seed=r.seed) for r in failing
                              for v in r.as_json()["violations"]]}  # type: ignore[attr-defined]
    if args.json:
        _print(json.dumps(summary))
    else:
        _print(f"explored {summary['seeds']} seeds, {args.voters} voters: "
               f"{len(failing)} seeds with violations, {summary['elections']} elections, "
               f"{summary['committed_records']} committed records checked, "
               f"{summary['events']} events, {elapsed:.1f} s"
               + (f", {summary['snapshots_loaded']} snapshots loaded by FetchSnapshot"
                  if args.snapshot_interval else "")
               + (f", {summary['wipes']} data dirs lost, {summary['readmissions']} voters "
                  "re-admitted on a new directory" if args.wipes else ""))
        for r in failing:
            v = r.violations[0]
            _print(f"seed {r.seed}: {v.invariant}: {v.detail}")
            _print(f"    reproduce: floodmark sim quorum --replay {r.seed} --voters {args.voters}"
                   + (" --wipes" if args.wipes else "")
                   + (f" --snapshot-interval {args.snapshot_interval}"
                      if args.snapshot_interval else ""))
    return 1 if args.fail_on_violation and failing else 0


def _replay(args: argparse.Namespace, result: Any) -> int:
    if args.json:
        _print(json.dumps(result.as_json()))
        return 0
    _print(f"seed {result.seed}: {len(result.faults)} faults, {result.events} events, "
           f"{result.elections} elections, {result.committed} committed records, "
           f"trace hash {result.trace_hash}")
    for fault in result.faults:
        _print(f"  fault at {fault}")
    if not result.violations:
        _print("no invariant violated")
    for v in result.violations:
        _print(f"VIOLATION at {v.time_ms} ms: {v.invariant}: {v.detail}")
    return 0


def _print_steps(steps: list[QuorumStep], committed: Sequence[str]) -> None:
    """A quorum scenario's steps, one line per voter per step, then what was committed."""
    _print("voter: role, epoch, vote, log [offset:epoch:value] (LC = leader-change record), "
           "LEO, HW, epoch cache {epoch:start}; * = leader")
    _print()
    for line in render_quorum_steps(steps):
        _print(line)
    _print()
    _print(f"committed: {', '.join(committed) or '-'}")


def _wipe_scenario(args: argparse.Namespace) -> int:
    result = run_wipe_scenario(args.scenario)
    if args.json:
        _print(json.dumps(result.as_json()))
        return 0 if result.safe else 1
    _print(f"quorum scenario {args.scenario} — a voter loses its whole data dir, 3 voters")
    _print_steps(result.steps, result.committed)
    _print(f"leaders by epoch: {result.leaders_by_epoch}")
    for violation in result.violations:
        _print(f"VIOLATION {violation}")
    _print("safe: no invariant violated" if result.safe else "UNSAFE")
    return 0 if result.safe else 1


def _scenario(args: argparse.Namespace) -> int:
    if args.scenario in WIPE_SCENARIOS:
        return _wipe_scenario(args)
    result = run_election_scenario()
    if args.json:
        _print(json.dumps(result.as_json()))
        return 0 if result.as_expected else 1
    _print("quorum scenario election — KIP-595 with KIP-996 pre-vote, 3 voters")
    _print_steps(result.steps, result.committed)
    _print(f"uncommitted and cut: {', '.join(result.lost_uncommitted) or 'nothing'}")
    for violation in result.violations:
        _print(f"VIOLATION {violation}")
    _print("as expected: m1, m2 committed and kept; m3 (never committed) cut"
           if result.as_expected else "NOT as expected")
    return 0 if result.as_expected else 1
