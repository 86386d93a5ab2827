"""``floodmark topic delete-records`` (kafka-delete-records.sh): DeleteRecords to each partition's
leader, which moves the partition's log start offset (its *low watermark*) up to the offset
given (-1: the high watermark); the records below it are gone for every reader.

``T --partition P --offset O`` names one partition; ``--offset-json-file F`` takes Kafka's file,
``{"partitions": [{"topic": "t", "partition": 0, "offset": 10}, ...], "version": 1}``. Prints the
new low watermark per partition (Kafka's lines); a partition the leader refused: its error
code, exit status 1. Leaders that move are followed (NOT_LEADER_OR_FOLLOWER is retried).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from floodmark.cli.common import (
    RETRIABLE_CODES,
    CliError,
    add_bootstrap,
    connect,
    read_partitions_json,
)
from floodmark.client import ClusterClient, Retriable, error_text
from floodmark.errors import ErrorCode

API_DELETE_RECORDS, DELETE_RECORDS_VERSION = 21, 2
TIMEOUT_MS = 30_000
MAX_PARTITIONS = 100_000  # a file larger than any cluster's partition count is a mistake


def add_parser(tsub: Any) -> None:
    p = tsub.add_parser("delete-records", help="delete the records before an offset "
                                               "(DeleteRecords; kafka-delete-records.sh)")
    p.add_argument("name", nargs="?", help="the topic (with --partition and --offset)")
    p.add_argument("--partition", type=int, default=None, metavar="P")
    p.add_argument("--offset", type=int, default=None, metavar="O",
                   help="the new log start offset (-1: the high watermark)")
    p.add_argument("--offset-json-file", default=None, metavar="FILE",
                   help='kafka-delete-records.sh\'s {"partitions": [{"topic", "partition", '
                        '"offset"}, ...], "version": 1}')
    p.add_argument("--json", action="store_true",
                   help='[{"topic", "partition", "low_watermark"} or {..., "error"}, ...]')
    add_bootstrap(p)
    p.set_defaults(func=topic_delete_records)


def _wanted(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset, from the flags or the file; every mistake one line."""
    if args.offset_json_file is not None:
        if args.name or args.partition is not None or args.offset is not None:
            raise CliError("--offset-json-file or TOPIC --partition --offset, not both")
        return _from_file(Path(args.offset_json_file))
    if not args.name or args.partition is None or args.offset is None:
        raise CliError("delete-records needs TOPIC --partition P --offset O, or "
                       "--offset-json-file FILE")
    _check(args.name, args.partition, args.offset)
    return {(args.name, args.partition): args.offset}


def _check(topic: str, partition: int, offset: int) -> None:
    if partition < 0:
        raise CliError(f"{topic}: partition {partition}: not a partition number")
    if offset < -1:
        raise CliError(f"{topic}-{partition}: offset {offset}: an offset is -1 (the high "
                       "watermark) or more")


def _from_file(path: Path) -> dict[tuple[str, int], int]:
    entries = read_partitions_json(path, "--offset-json-file")
    if not entries:
        raise CliError(f"--offset-json-file {path}: expected "
                       '{"partitions": [{"topic", "partition", "offset"}, ...]}')
    if len(entries) > MAX_PARTITIONS:
        raise CliError(f"--offset-json-file {path}: {len(entries)} partitions, at most "
                       f"{MAX_PARTITIONS}")
    out: dict[tuple[str, int], int] = {}
    for i, e in enumerate(entries):
        ok = (isinstance(e, dict) and isinstance(e.get("topic"), str) and e["topic"]
              and type(e.get("partition")) is int and type(e.get("offset")) is int)
        if not ok:
            raise CliError(f"--offset-json-file {path}: partitions[{i}] is not "
                           '{"topic": str, "partition": int, "offset": int}')
        key = (str(e["topic"]), int(e["partition"]))
        if key in out:
            raise CliError(f"--offset-json-file {path}: {key[0]}-{key[1]} twice")
        _check(key[0], key[1], int(e["offset"]))
        out[key] = int(e["offset"])
    return out


def delete_records(cluster: ClusterClient, wanted: dict[tuple[str, int], int]
                   ) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, low watermark), each partition asked of its leader;
    retried while leaders move."""
    done: dict[tuple[str, int], tuple[int, int]] = {}

    def attempt() -> dict[tuple[str, int], tuple[int, int]]:
        cluster.metadata(sorted({t for t, _p in wanted if (t, _p) not in done}))
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for key in sorted(wanted):
            if key in done:
                continue
            leader = cluster.leaders.get(key, -1)
            if key[1] >= cluster.partition_counts.get(key[0], 0):  # no such topic/partition
                done[key] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1)
            elif leader < 0:
                raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, f"{key[0]}-{key[1]}")
            else:
                by_leader.setdefault(leader, []).append(key)
        for leader, keys in by_leader.items():
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in keys:
                topics.setdefault(t, []).append({"partition_index": p, "offset": wanted[(t, p)]})
            resp = cluster.request_node(leader, API_DELETE_RECORDS, DELETE_RECORDS_VERSION, {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout": TIMEOUT_MS})
            for t in resp.topics:
                for part in t.partitions:
                    code = int(part.error_code)
                    if code in RETRIABLE_CODES:
                        continue  # asked again of the new leader
                    done[(str(t.name), int(part.partition_index))] = (code,
                                                                      int(part.low_watermark))
        missing = [k for k in wanted if k not in done]
        if missing:
            raise Retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ", ".join(f"{t}-{p}" for t, p in missing[:5]))
        return done

    return cluster.retry(attempt)


def _error(code: int) -> str:
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:  # the leader's rule: 0 <= offset <= HW
        return f"{ErrorCode(code).name} ({code}) [the offset is above the high watermark]"
    if code == ErrorCode.POLICY_VIOLATION:
        return f"{ErrorCode(code).name} ({code}) [a compacted topic (cleanup.policy=compact)]"
    return error_text(code)


def topic_delete_records(args: argparse.Namespace) -> int:
    wanted = _wanted(args)
    with connect(args) as cluster:
        results = delete_records(cluster, wanted)
    rows = sorted(results.items())
    if args.json:
        print(json.dumps([{"topic": t, "partition": p, "low_watermark": low} if not code
                          else {"topic": t, "partition": p, "error": _error(code)}
                          for (t, p), (code, low) in rows]))
    else:
        print("Records delete operation completed:")
        for (t, p), (code, low) in rows:
            print(f"partition: {t}-{p}\t" + (f"low_watermark: {low}" if not code
                                             else f"error: {_error(code)}"))
    return 1 if any(code for code, _low in results.values()) else 0
