"""``floodmark cluster elect-leaders`` (kafka-leader-election.sh): ElectLeaders (KIP-460), decided
by the controller, sent through any broker.

``--election-type preferred``: give each partition back to its first assigned replica, where
that replica is in sync. ``unclean``: a partition without a leader takes any live replica, in
sync or not (records the old ISR had may be lost). The partitions: ``--topic T --partition P``,
``--path-to-json-file F`` (``{"partitions": [{"topic": "t", "partition": 0}, ...]}``) or
``--all-topic-partitions``. Prints Kafka's lines (elected, "Valid replica already elected" for
ELECTION_NOT_NEEDED, one line per partition that failed with the controller's message);
``--json`` one entry per partition. Exit status 1 when a partition failed (ELECTION_NOT_NEEDED
is not a failure).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect, read_partitions_json
from floodmark.client import error_text
from floodmark.errors import ErrorCode

API_ELECT_LEADERS, ELECT_LEADERS_VERSION = 43, 2
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
TIMEOUT_MS = 30_000
MAX_PARTITIONS = 100_000


def add_parser(sub: Any) -> None:
    p = sub.add_parser("elect-leaders", help="preferred or unclean leader election "
                                             "(ElectLeaders; kafka-leader-election.sh)")
    p.add_argument("--election-type", required=True, type=str.lower,
                   choices=sorted(ELECTION_TYPES),
                   help="preferred: the first assigned replica, if in sync; unclean: any live "
                        "replica of a leaderless partition (may lose records)")
    p.add_argument("--topic", default=None, metavar="T")
    p.add_argument("--partition", type=int, default=None, metavar="P",
                   help="with --topic")
    p.add_argument("--path-to-json-file", default=None, metavar="FILE",
                   help='{"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition of every topic")
    p.add_argument("--json", action="store_true",
                   help='[{"topic", "partition", "outcome", "error_message"}, ...]; outcome: '
                        '"ELECTED" or the error name (ELECTION_NOT_NEEDED...)')
    add_bootstrap(p)
    p.set_defaults(func=cluster_elect_leaders)


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions named, None for every partition; every mistake one line."""
    given = [args.topic is not None, args.path_to_json_file is not None,
             args.all_topic_partitions]
    if sum(given) != 1:
        raise CliError("give one of --topic T --partition P, --path-to-json-file FILE, "
                       "--all-topic-partitions")
    if args.all_topic_partitions:
        if args.partition is not None:
            raise CliError("--partition goes with --topic")
        return None
    if args.topic is not None:
        if args.partition is None or args.partition < 0:
            raise CliError("--topic needs --partition P (a partition number)")
        return [(args.topic, args.partition)]
    if args.partition is not None:
        raise CliError("--partition goes with --topic")
    path = Path(args.path_to_json_file)
    entries = read_partitions_json(path, "--path-to-json-file")
    if not entries or len(entries) > MAX_PARTITIONS:
        raise CliError(f"--path-to-json-file {path}: expected "
                       '{"partitions": [{"topic", "partition"}, ...]} (1 to '
                       f"{MAX_PARTITIONS} entries)")
    out: list[tuple[str, int]] = []
    for i, e in enumerate(entries):
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and e["topic"]
                and type(e.get("partition")) is int and e["partition"] >= 0):
            raise CliError(f"--path-to-json-file {path}: partitions[{i}] is not "
                           '{"topic": str, "partition": int}')
        if (e["topic"], e["partition"]) in out:
            raise CliError(f"--path-to-json-file {path}: {e['topic']}-{e['partition']} twice")
        out.append((str(e["topic"]), int(e["partition"])))
    return out


def cluster_elect_leaders(args: argparse.Namespace) -> int:
    wanted = _partitions(args)
    election = args.election_type.upper()
    topics: dict[str, list[int]] = {}
    for t, p in wanted or ():
        topics.setdefault(t, []).append(p)
    with connect(args) as cluster:
        resp = cluster.request_any(API_ELECT_LEADERS, ELECT_LEADERS_VERSION, {
            "election_type": ELECTION_TYPES[args.election_type],
            "topic_partitions": None if wanted is None else [
                {"topic": t, "partitions": ps} for t, ps in topics.items()],
            "timeout": TIMEOUT_MS})
    if int(resp.error_code):
        print(f"error: leader election ({election}): {error_text(int(resp.error_code))}",
              file=sys.stderr)
        return 1
    results = sorted((str(r.topic), int(p.partition_id), int(p.error_code), p.error_message)
                     for r in resp.replica_election_results for p in r.partition_result)
    if args.json:
        print(json.dumps([{"topic": t, "partition": p,
                           "outcome": "ELECTED" if not code else _name(code),
                           "error_message": message} for t, p, code, message in results]))
    else:
        elected = [f"{t}-{p}" for t, p, code, _m in results if code == 0]
        not_needed = [f"{t}-{p}" for t, p, code, _m in results
                      if code == ErrorCode.ELECTION_NOT_NEEDED]
        if elected:
            print(f"Successfully completed leader election ({election}) for partitions "
                  + ", ".join(elected))
        if not_needed:
            print("Valid replica already elected for partitions " + ", ".join(not_needed))
        if not results:
            print(f"No partition needed a leader election ({election})")
    failed = [(t, p, code, m) for t, p, code, m in results
              if code not in (0, ErrorCode.ELECTION_NOT_NEEDED)]
    for t, p, code, message in failed if not args.json else ():
        print(f"Error completing leader election ({election}) for partition: {t}-{p}: "
              f"{error_text(code, message)}")  # Kafka's, stdout
    if failed:
        print(f"error: {len(failed)} replica(s) could not be elected", file=sys.stderr)
    return 1 if failed else 0


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"
