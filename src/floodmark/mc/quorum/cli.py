"""``floodmark sim check-quorum``: the exhaustive model checker of the controller quorum.

Exit status as ``floodmark sim check``: 0 when the invariants hold over every reachable state,
1 when a counterexample was found (printed step by step), 3 when a state or time bound stopped
the search first, 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.mc.checker import DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT_S
from floodmark.mc.cli import EXIT_HOLDS, EXIT_INCOMPLETE, EXIT_VIOLATED
from floodmark.mc.quorum.checker import check
from floodmark.mc.quorum.model import QuorumModelConfig
from floodmark.mc.quorum.render import result_dict, result_text

EXIT_BAD_OPTIONS = 2


def register(subparsers: Any) -> None:
    """Add ``check-quorum`` to the ``sim`` group."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check-quorum",
        help="explicit-state model checker of the controller quorum (KIP-595 + pre-vote)",
        description=(
            "Breadth-first search over every state of a tiny controller quorum whose every "
            "step is run by the code the controller runs (QuorumCore through QuorumDriver): "
            "messages delivered, lost or reordered, timers firing at any time, the leader "
            "appending, voters crashing (between or in the middle of steps, losing what was "
            "not flushed) and restarting. Checks election safety, leader completeness, log "
            "matching, no committed record lost or changed, the leader's HW never decreasing, "
            "HW <= LEO. Prints states, depth, wall time, states/s, the verdict and, on a "
            "violation, the shortest counterexample step by step."),
    )
    parser.add_argument("--voters", type=int, default=2, help="voters, 1..5 (default 2)")
    parser.add_argument("--max-epoch", type=int, default=2,
                        help="epochs above this are not entered (default 2)")
    parser.add_argument("--max-records", type=int, default=1,
                        help="records the active controller appends in all (default 1)")
    parser.add_argument("--max-crashes", type=int, default=0,
                        help="voter crashes in all (default 0)")
    parser.add_argument("--max-in-flight", type=int, default=1,
                        help="messages in flight at once; each choice of the sends that fit "
                             "is explored, the others are lost (default 1)")
    parser.add_argument("--bootstrap-voters", type=int, default=0,
                        help="nodes 1..N start as the voter set, the rest as observers "
                             "(default 0: all --voters)")
    parser.add_argument("--max-changes", type=int, default=0,
                        help="AddRaftVoter/RemoveRaftVoter changes accepted in all (KIP-853; "
                             "default 0)")
    parser.add_argument("--updates", action="store_true",
                        help="UpdateRaftVoter (a voter's new endpoint) among the --max-changes "
                             "too (KIP-853)")
    parser.add_argument("--max-states", type=int, default=DEFAULT_MAX_STATES,
                        help=f"stop after this many distinct states (default "
                             f"{DEFAULT_MAX_STATES})")
    parser.add_argument("--time-limit-s", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"stop after this many seconds (default {DEFAULT_TIME_LIMIT_S:.0f})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = QuorumModelConfig(voters=args.voters, max_epoch=args.max_epoch,
                                   max_records=args.max_records, max_crashes=args.max_crashes,
                                   max_in_flight=args.max_in_flight,
                                   bootstrap_voters=args.bootstrap_voters,
                                   max_changes=args.max_changes, updates=args.updates)
        if args.max_states < 1 or not args.time_limit_s > 0:
            raise ValueError("--max-states must be >= 1 and --time-limit-s > 0")
    except ValueError as exc:
        print(f"floodmark sim check-quorum: {exc}", file=sys.stderr)
        return EXIT_BAD_OPTIONS
    model, result = check(config, max_states=args.max_states, time_limit_s=args.time_limit_s)
    if args.json:
        print(json.dumps(result_dict(model, result)))
    else:
        print(result_text(model, result))
    if result.violation is not None:
        return EXIT_VIOLATED
    return EXIT_HOLDS if result.complete else EXIT_INCOMPLETE
