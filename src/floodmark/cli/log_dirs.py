"""``floodmark cluster log-dirs`` (kafka-log-dirs.sh --describe): DescribeLogDirs asked of each
broker about itself: its log directory, the directory's total and usable bytes, and per replica
it holds the size on disk and the offset lag (how far the replica's LEO is behind the high
watermark it knows; 0 for a leader or a caught-up follower).

``--broker B`` (repeatable, or ``1,2``): those brokers only (default: every live broker);
``--topic T`` (repeatable, or ``a,b``): those topics only. ``--json``: kafka-log-dirs.sh's own
document (``{"version": 1, "brokers": [{"broker", "logDirs": [{"logDir", "error",
"partitions": [{"partition": "t-0", "size", "offsetLag", "isFuture"}]}]}]}``) with
``totalBytes``/``usableBytes`` beside each directory. A broker that does not answer: one line,
exit status 1, the others still shown.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from floodmark.cli.common import CliError, add_bootstrap, connect
from floodmark.client import RequestFailed, error_text

API_DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION = 35, 4


def add_parser(sub: Any) -> None:
    p = sub.add_parser("log-dirs", help="each broker's log directory: size and offset lag per "
                                        "partition (DescribeLogDirs; kafka-log-dirs.sh)")
    p.add_argument("--broker", action="append", default=[], metavar="ID[,ID...]",
                   help="only these brokers (default: every live broker)")
    p.add_argument("--topic", action="append", default=[], metavar="T[,T...]",
                   help="only these topics (default: every topic)")
    p.add_argument("--json", action="store_true", help="kafka-log-dirs.sh's JSON document")
    add_bootstrap(p)
    p.set_defaults(func=cluster_log_dirs)


def _split(items: list[str]) -> list[str]:
    return [x.strip() for item in items for x in item.split(",") if x.strip()]


def _broker_ids(items: list[str]) -> list[int]:
    out = []
    for x in _split(items):
        try:
            out.append(int(x))
        except ValueError:
            raise CliError(f"--broker {x!r}: a broker id is a number") from None
    return out


def _human(size_bytes: int) -> str:
    if size_bytes < 0:
        return "unknown"
    size = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size_bytes} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size_bytes} B"  # not reached


def cluster_log_dirs(args: argparse.Namespace) -> int:
    wanted_brokers = _broker_ids(args.broker)
    wanted_topics = set(_split(args.topic))
    brokers: list[dict[str, Any]] = []
    failed = 0
    with connect(args) as cluster:
        cluster.metadata(None)
        live = sorted(cluster.brokers)
        if unknown := [b for b in wanted_brokers if b not in cluster.brokers]:
            raise CliError(f"--broker {','.join(map(str, unknown))}: not a live broker (live: "
                           f"{','.join(map(str, live))})")
        for node in wanted_brokers or live:
            try:
                resp = cluster.request_node(node, API_DESCRIBE_LOG_DIRS,
                                            DESCRIBE_LOG_DIRS_VERSION, {"topics": None})
            except RequestFailed as exc:
                print(f"error: broker {node}: {exc}", file=sys.stderr)
                failed += 1
                continue
            if int(resp.error_code):
                print(f"error: broker {node}: {error_text(int(resp.error_code))}",
                      file=sys.stderr)
                failed += 1
                continue
            brokers.append({"broker": node, "logDirs": [{
                "logDir": str(d.log_dir),
                "error": None if not int(d.error_code) else error_text(int(d.error_code)),
                "totalBytes": int(d.total_bytes), "usableBytes": int(d.usable_bytes),
                "partitions": [{"partition": f"{t.name}-{int(p.partition_index)}",
                                "size": int(p.partition_size), "offsetLag": int(p.offset_lag),
                                "isFuture": bool(p.is_future_key)}
                               for t in sorted(d.topics, key=lambda t: str(t.name))
                               if not wanted_topics or str(t.name) in wanted_topics
                               for p in sorted(t.partitions, key=lambda p: p.partition_index)]}
                for d in resp.results]})
    if args.json:
        print(json.dumps({"version": 1, "brokers": brokers}))
        return 1 if failed else 0
    for b in brokers:
        for d in b["logDirs"]:
            print(f"broker {b['broker']}  log dir {d['logDir']}  total "
                  f"{_human(d['totalBytes'])}  usable {_human(d['usableBytes'])}"
                  + (f"  error {d['error']}" if d["error"] else ""))
            if not d["partitions"]:
                print("  (no partitions)")
                continue
            width = max(len("PARTITION"), *(len(p["partition"]) for p in d["partitions"]))
            print(f"  {'PARTITION'.ljust(width)}  {'SIZE_BYTES':>12}  {'OFFSET_LAG':>10}")
            for p in d["partitions"]:
                print(f"  {p['partition'].ljust(width)}  {p['size']:>12}  {p['offsetLag']:>10}")
    return 1 if failed else 0
