"""``floodmark sim check``: run the explicit-state model checker from the command line.

Exit status: 0 when the invariants hold exhaustively (or, with ``--walks``, when no walk found a
violation — not a proof), 1 when a counterexample was found, 3 when a state or time bound stopped
the exhaustive search first, 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.mc.checker import DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT_S, check
from floodmark.mc.model import DEFAULT_SCAN_CHUNK_BYTES, MIN_SCAN_CHUNK_BYTES, ModelConfig
from floodmark.mc.render import result_dict, result_text
from floodmark.mc.walk import DEFAULT_WALK_DEPTH, random_walks
from floodmark.replication import DEFAULT_TRUNCATION, Truncation

EXIT_HOLDS = 0
EXIT_VIOLATED = 1
EXIT_INCOMPLETE = 3


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _truncation(text: str) -> Truncation:
    try:
        return Truncation.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(subparsers: Any) -> None:
    """Add ``check`` to the ``sim`` group created by ``floodmark.cli``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="explicit-state model checker of the replication rules",
        description=(
            "Breadth-first search over every state of a tiny replicated partition whose every "
            "step is run by the code the broker runs (Partition, ReplicaDriver, the produce "
            "path, ControllerLogic). Prints states explored, depth, wall time, states/s, the "
            "verdict and, on a violation, the shortest counterexample."
        ),
    )
    modes = ", ".join(m.value for m in Truncation)
    parser.add_argument(
        "--truncation",
        type=_truncation,
        default=DEFAULT_TRUNCATION,
        metavar="MODE",
        help=f"protocol mode: {modes} (default {DEFAULT_TRUNCATION.value})",
    )
    parser.add_argument("--replicas", type=_positive_int, default=2, help="replicas (default 2)")
    parser.add_argument(
        "--log-size", type=_positive_int, default=2, help="max records per log (default 2)"
    )
    parser.add_argument(
        "--max-epoch",
        type=_positive_int,
        default=3,
        help="metadata changes the controller may make, creating the topic included, so leader "
        "epochs stay within 0..N-1 (default 3)",
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=None,
        help="distinct records written in total (default: --log-size)",
    )
    parser.add_argument(
        "--min-isr", type=_positive_int, default=1, help="min.insync.replicas (default 1)"
    )
    parser.add_argument(
        "--unclean-restarts",
        type=int,
        default=0,
        help="restarts that lose an unflushed log suffix (default 0)",
    )
    parser.add_argument(
        "--no-fencing",
        dest="fencing",
        action="store_false",
        help="switch KIP-320 leader-epoch fencing off (pre-2.1 Kafka; shows the KIP-279-only "
        "counterexample with 3 replicas). Default: on in every mode, as in the broker",
    )
    parser.add_argument(
        "--atomic-isr",
        dest="async_isr",
        action="store_false",
        help="the controller answers an AlterPartition in the step that proposes it (about half "
        "the states); default: a pending proposal in the maximal ISR until the answer arrives",
    )
    parser.add_argument(
        "--max-states",
        type=_positive_int,
        default=DEFAULT_MAX_STATES,
        help=f"stop after this many distinct states (default {DEFAULT_MAX_STATES})",
    )
    parser.add_argument(
        "--time-limit-s",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        help=f"stop after this many seconds (default {DEFAULT_TIME_LIMIT_S:.0f})",
    )
    parser.add_argument(
        "--walks",
        type=_positive_int,
        default=None,
        help="instead of the exhaustive search, run N seeded random walks (never a proof; "
        "for bounds too large to exhaust)",
    )
    parser.add_argument(
        "--walk-depth",
        type=_positive_int,
        default=DEFAULT_WALK_DEPTH,
        help=f"steps per random walk (default {DEFAULT_WALK_DEPTH})",
    )
    parser.add_argument("--seed", type=int, default=0, help="random-walk seed (default 0)")
    parser.add_argument(
        "--spark",
        metavar="MASTER",
        default=None,
        help="run the exhaustive search as parts on Spark (e.g. local[2], spark://host:7077): "
        "the first levels here, each frontier state's subtree as one task",
    )
    parser.add_argument(
        "--spark-parts",
        type=_positive_int,
        default=64,
        help="at least this many parts (default 64); --max-states/--time-limit-s bound each",
    )
    parser.add_argument(
        "--transactions",
        type=int,
        default=0,
        help="transactions (0..4, default 0): transactional writes, the coordinator's commit or "
        "abort, the markers; checks read_committed visibility and all-or-nothing commits",
    )
    parser.add_argument(
        "--txn-records", type=_positive_int, default=1,
        help="records per transaction at most (default 1)",
    )
    parser.add_argument(
        "--txn-producers", type=int, default=0,
        help="transactional producers (default 0: one per transaction); with fewer, a "
        "producer's transactions follow one another, each at a new producer epoch",
    )
    parser.add_argument(
        "--scan-chunk-bytes", type=_chunk_sizes, default=DEFAULT_SCAN_CHUNK_BYTES,
        metavar="N[,N...]",
        help="with --transactions: the chunk sizes (>= 61) a replica restarted through the "
        "storage reads its log in; every read_committed view is checked at each (default "
        f"{','.join(str(c) for c in DEFAULT_SCAN_CHUNK_BYTES)})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _chunk_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text}"
                                         ) from None
    if not sizes or min(sizes) < MIN_SCAN_CHUNK_BYTES:
        raise argparse.ArgumentTypeError(f"every size must be >= {MIN_SCAN_CHUNK_BYTES}")
    return sizes


def run(args: argparse.Namespace) -> int:
    try:
        config = ModelConfig(
            truncation=args.truncation,
            replicas=args.replicas,
            log_size=args.log_size,
            max_epoch=args.max_epoch,
            max_records=args.max_records,
            min_insync_replicas=args.min_isr,
            unclean_restarts=args.unclean_restarts,
            fencing=args.fencing,
            async_isr=args.async_isr,
            transactions=args.transactions,
            txn_records=args.txn_records,
            txn_producers=args.txn_producers,
            scan_chunk_bytes=args.scan_chunk_bytes,
        )
    except ValueError as exc:
        print(f"floodmark sim check: {exc}", file=sys.stderr)
        return 2
    if args.walks is not None:
        result = random_walks(
            config,
            walks=args.walks,
            depth=args.walk_depth,
            seed=args.seed,
            time_limit_s=args.time_limit_s,
        )
    elif args.spark is not None:
        from floodmark.mc.distributed import check_on_spark

        result = check_on_spark(config, args.spark, parts=args.spark_parts,
                                max_states=args.max_states, time_limit_s=args.time_limit_s)
    else:
        result = check(config, max_states=args.max_states, time_limit_s=args.time_limit_s)
    if args.json:
        print(json.dumps(result_dict(result)))
    else:
        print(result_text(result))
    if result.violation is not None:
        return EXIT_VIOLATED
    if args.walks is not None:
        return EXIT_HOLDS  # no violation found by the walks (documented: not a proof)
    return EXIT_HOLDS if result.complete else EXIT_INCOMPLETE
