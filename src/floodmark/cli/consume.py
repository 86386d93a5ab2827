"""``floodmark consume``: a topic's records, fetched from each partition's leader, as values (the
default), with kafka-console-consumer's ``--print-*`` fields, as a kcat-style ``--format`` string,
or as JSON lines; from the committed offsets of a ``--group``, or from ``--offset``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from floodmark.cli.common import RETRIABLE_CODES, CliError, add_bootstrap, connect, offsets_at
from floodmark.client import (
    ClusterClient,
    GroupError,
    GroupMember,
    RequestFailed,
    Retriable,
    error_text,
)
from floodmark.records import (
    LOG_APPEND_TIME,
    AbortedTracker,
    Record,
    decode_batch,
    iter_batches,
)

FORMAT_HELP = ("kcat-style: %%t topic, %%p partition, %%o offset, %%k key, %%s value, %%T "
               "timestamp (ms), %%h headers (k=v,...), %%K/%%S key/value length, %%%% a %%; "
               r"\n \t \r \\ escapes. E.g. '%%p:%%o %%k=%%s\n'")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("consume", help="print a topic's records, one per line")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true", help="same as --offset earliest")
    p.add_argument("--offset", default=None, metavar="N|earliest|latest|-N",
                   help="where to start in each partition (-N: N records before the end)")
    p.add_argument("--partition", type=int, default=None, help="only this partition")
    p.add_argument("--group", default=None, help="consume as a member of this group; commits")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed: only below the last stable offset, without the records "
                        "of aborted transactions")
    p.add_argument("--max-messages", type=int, default=None)
    p.add_argument("--timeout-ms", type=int, default=None,
                   help="stop after this long without new records (default: run forever)")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--key-separator", default="\t",
                   help="between the printed fields (default: tab)")
    p.add_argument("--format", default=None, help=FORMAT_HELP)
    p.add_argument("--json", action="store_true",
                   help='one object per record: {"topic", "partition", "offset", "timestamp", '
                        '"timestamp_type", "key", "value", "headers"}')
    add_bootstrap(p)
    p.set_defaults(func=consume_cmd)


@dataclass(frozen=True)
class Fetched:
    topic: str
    partition: int
    record: Record
    timestamp_type: str  # CreateTime | LogAppendTime


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def _headers_text(rec: Record) -> str:
    return ",".join(f"{k}={_text(v) or ''}" for k, v in rec.headers)


def _unescape(fmt: str) -> str:
    return (fmt.replace("\\\\", "\0").replace("\\n", "\n").replace("\\t", "\t")
            .replace("\\r", "\r").replace("\0", "\\"))


def render_format(fmt: str, f: Fetched) -> bytes:
    """kcat's ``-f`` tokens over one record (``fmt`` already unescaped)."""
    r = f.record
    out = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%" or i + 1 == len(fmt):
            out += ch.encode()
            i += 1
            continue
        token = fmt[i + 1]
        i += 2
        if token == "t":
            out += f.topic.encode()
        elif token == "p":
            out += str(f.partition).encode()
        elif token == "o":
            out += str(r.offset).encode()
        elif token == "k":
            out += r.key or b""
        elif token == "s":
            out += r.value or b""
        elif token == "K":
            out += str(-1 if r.key is None else len(r.key)).encode()
        elif token == "S":
            out += str(-1 if r.value is None else len(r.value)).encode()
        elif token == "T":
            out += str(r.timestamp_ms).encode()
        elif token == "h":
            out += _headers_text(r).encode()
        elif token == "%":
            out += b"%"
        else:
            raise CliError(f"--format: unknown token %{token}")
    return bytes(out)


def render(args: argparse.Namespace, f: Fetched) -> bytes:
    r = f.record
    if args.json:
        return json.dumps({
            "topic": f.topic, "partition": f.partition, "offset": r.offset,
            "timestamp": r.timestamp_ms, "timestamp_type": f.timestamp_type,
            "key": _text(r.key), "value": _text(r.value),
            "headers": [[k, _text(v)] for k, v in r.headers]}).encode() + b"\n"
    if args.format is not None:
        return render_format(args.format, f)
    # kafka-console-consumer's DefaultMessageFormatter order: timestamp, partition, offset,
    # headers, key, value.
    sep: bytes = str(args.key_separator).encode()
    fields: list[bytes] = []
    if args.print_timestamp:
        fields.append(f"{f.timestamp_type}:{r.timestamp_ms}".encode())
    if args.print_partition:
        fields.append(f"Partition:{f.partition}".encode())
    if args.print_offset:
        fields.append(f"Offset:{r.offset}".encode())
    if args.print_headers:
        fields.append(_headers_text(r).encode() if r.headers else b"NO_HEADERS")
    if args.print_key:
        fields.append(r.key or b"")
    fields.append(r.value or b"")
    return sep.join(fields) + b"\n"


def _records(topic: str, partition: int, data: Any,
             aborted: AbortedTracker | None = None) -> tuple[list[Fetched], int]:
    """The records of a fetched partition, and the offset after its last batch (a batch of
    transaction markers, which a consumer does not see, still moves the position past it).
    ``aborted`` (read_committed): the answer's aborted transactions, whose records are dropped."""
    buffer = bytes(data)
    out: list[Fetched] = []
    next_offset = -1
    for position, header in iter_batches(buffer, validate=False):
        next_offset = header.last_offset + 1
        if header.is_control or (aborted is not None and aborted.skip(header)):
            continue
        kind = "LogAppendTime" if header.timestamp_type == LOG_APPEND_TIME else "CreateTime"
        for rec in decode_batch(buffer, position, validate=False)[1]:
            out.append(Fetched(topic, partition, rec, kind))
    return out, next_offset


def _start_offsets(cluster: ClusterClient, topic: str, partitions: list[int],
                   spec: str, isolation_level: int = 0) -> dict[int, int]:
    if spec == "earliest":
        return offsets_at(cluster, topic, partitions, -2)
    if spec == "latest":
        return offsets_at(cluster, topic, partitions, -1, isolation_level=isolation_level)
    try:
        n = int(spec)
    except ValueError:
        raise CliError(f"--offset {spec!r} is not a number, earliest, latest or -N") from None
    low = offsets_at(cluster, topic, partitions, -2)
    high = offsets_at(cluster, topic, partitions, -1, isolation_level=isolation_level)
    # A negative offset counts back from the end (kcat's -o -N); kept within the log.
    return {p: min(max(high[p] + n if n < 0 else n, low[p]), high[p]) for p in partitions}


class _Stop:
    """SIGINT and SIGTERM while a group member consumes: noted, not raised, so the loop ends
    between requests and the member commits and leaves the group (LeaveGroup: the group
    rebalances at once, not after the session timeout)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, sig: int, _frame: Any) -> None:
        self.signal = sig

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


HEARTBEAT_S = 1.0  # heartbeat (and commit what was printed) this often


def _assigned(member: GroupMember, cluster: ClusterClient, topic: str, start: str,
              isolation: int) -> tuple[list[int], dict[int, int]]:
    """Join (again): the partitions assigned and where to start in each (the group's committed
    offset, else ``start``)."""
    partitions = member.join().get(topic, [])
    committed = member.committed() if partitions else {}
    positions = {p: committed[(topic, p)] for p in partitions
                 if committed.get((topic, p), -1) >= 0}
    missing = [p for p in partitions if p not in positions]
    if missing:
        positions.update(_start_offsets(cluster, topic, missing, start, isolation))
    return partitions, positions


def _leave(member: GroupMember, topic: str, partitions: list[int],
           positions: dict[int, int]) -> None:
    """Commit what was printed and leave the group, each bounded; a failure is one line."""
    try:
        member.commit({(topic, p): positions[p] for p in partitions if p in positions},
                      timeout_s=5.0)
    except (GroupError, RequestFailed, Retriable) as exc:
        print(f"warning: the last commit failed: {exc}", file=sys.stderr)
    if not member.leave():
        print(f"warning: group {member.group_id}: LeaveGroup not delivered (the group notices "
              f"when the session times out)", file=sys.stderr)


def consume_cmd(args: argparse.Namespace) -> int:
    if args.format is not None:
        args.format = _unescape(args.format)
        render_format(args.format, Fetched("t", 0, Record(0, 0, None, None), "CreateTime"))
    if args.from_beginning and args.offset is not None:
        raise CliError("--from-beginning and --offset: give one")
    if args.group and (args.offset is not None or args.partition is not None):
        raise CliError("--group starts at the group's committed offsets: --offset and "
                       "--partition are for consuming without a group (move a group with "
                       "`floodmark group reset-offsets`)")
    if not args.group:
        return _consume(args, None)
    with _Stop() as stop:
        code = _consume(args, stop)
    if stop.signal is not None:
        return 128 + int(stop.signal)  # 130 for Ctrl-C, 143 for SIGTERM, as a shell says
    return code


def _consume(args: argparse.Namespace, stop: _Stop | None) -> int:
    start = args.offset if args.offset is not None else (
        "earliest" if args.from_beginning else "latest")
    out = sys.stdout.buffer
    printed = 0
    topic = args.topic
    isolation = 1 if args.isolation_level == "read_committed" else 0
    with connect(args) as cluster:
        n_parts = cluster.partitions(topic)
        if args.partition is not None and not 0 <= args.partition < n_parts:
            raise CliError(f"--partition {args.partition}: {topic} has {n_parts} partition(s), "
                           f"0 to {n_parts - 1}")
        member: GroupMember | None = None
        partitions = [args.partition] if args.partition is not None else list(range(n_parts))
        positions: dict[int, int] = {}
        if args.group:
            member = GroupMember(cluster, args.group, [topic], {topic: n_parts})
            partitions, positions = _assigned(member, cluster, topic, start, isolation)
        else:
            positions = _start_offsets(cluster, topic, partitions, start, isolation)
        idle_since = time.monotonic()
        last_heartbeat = time.monotonic()
        try:
            while partitions or member is not None:
                if args.max_messages is not None and printed >= args.max_messages:
                    break
                if stop is not None and stop.signal is not None:
                    break
                got = 0
                by_leader: dict[int, list[int]] = {}
                try:
                    for p in partitions:
                        by_leader.setdefault(cluster.leader(topic, p), []).append(p)
                except Retriable:
                    time.sleep(0.2)  # no leader right now: ask again
                    by_leader = {}
                    cluster.leaders.clear()
                wait_ms = 500 // max(1, len(by_leader))
                for leader, parts in by_leader.items():
                    try:
                        resp = cluster.request_node(leader, 1, 12, {
                            "replica_id": -1, "max_wait": wait_ms, "min_bytes": 1,
                            "max_bytes": 16 << 20, "isolation_level": isolation,
                            "session_id": 0,
                            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                                {"partition": p, "current_leader_epoch": -1,
                                 "fetch_offset": positions[p], "last_fetched_epoch": -1,
                                 "log_start_offset": -1, "partition_max_bytes": 4 << 20}
                                for p in parts]}],
                            "forgotten_topics_data": [], "rack_id": ""})
                    except RequestFailed:
                        cluster.leaders.clear()  # the leader went away: find the new one
                        time.sleep(0.2)
                        continue
                    for t in resp.responses:
                        for p in t.partitions:
                            code = int(p.error_code)
                            if code in RETRIABLE_CODES:
                                cluster.leaders.clear()
                                continue
                            if code:
                                print(f"error: {topic}-{p.partition_index}: {error_text(code)}",
                                      file=sys.stderr)
                                return 1
                            if not p.records:
                                continue
                            index = int(p.partition_index)
                            tracker = (AbortedTracker.from_response(
                                [(int(a.producer_id), int(a.first_offset))
                                 for a in p.aborted_transactions or ()])
                                if isolation else None)
                            fetched_records, next_offset = _records(topic, index, p.records,
                                                                    tracker)
                            for fetched in fetched_records:
                                rec = fetched.record
                                if rec.offset < positions[index]:
                                    continue
                                if args.max_messages is not None and printed >= args.max_messages:
                                    break
                                out.write(render(args, fetched))
                                printed += 1
                                got += 1
                                positions[index] = rec.offset + 1
                            else:
                                positions[index] = max(positions[index], next_offset)
                out.flush()
                now = time.monotonic()
                if got:
                    idle_since = now
                elif args.timeout_ms is not None and (now - idle_since) * 1000 >= args.timeout_ms:
                    break
                if member is not None and now - last_heartbeat > HEARTBEAT_S:
                    last_heartbeat = now
                    # Commit what was printed (a rebalance still in preparation takes it), then
                    # heartbeat; either may say the group moved on: join again.
                    rejoin = member.commit({(topic, p): positions[p] for p in partitions
                                            if p in positions})
                    if not rejoin:
                        rejoin = member.heartbeat()
                    if rejoin:
                        partitions, positions = _assigned(member, cluster, topic, start,
                                                          isolation)
                if not by_leader:
                    time.sleep(0.2)  # nothing assigned (or no leader): wait, heartbeating
        finally:
            if member is not None:
                _leave(member, topic, partitions, positions)
    return 0
