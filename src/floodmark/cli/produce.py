"""``floodmark produce``: lines of stdin or of files as records, each partition's batch sent to its
leader (retried through a failover), keys partitioned with Kafka's murmur2, headers with
``--header`` (as kcat's ``-H``), a progress bar for files."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO

from floodmark.cli.common import RETRIABLE_CODES, CliError, add_bootstrap, connect, pairs
from floodmark.cli.progress import Bar, add_progress_flag
from floodmark.client.cluster import ClusterClient, Retriable, error_text
from floodmark.client.connection import RequestFailed
from floodmark.client.partitioner import partition_for_key
from floodmark.errors import ErrorCode
from floodmark.records import Headers, Record, build_batch


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("produce", help="produce lines (stdin or --file) to a topic")
    p.add_argument("topic")
    p.add_argument("--key-separator", default=None, help="split each line into key SEP value")
    p.add_argument("--header", dest="headers", action="append", default=[],
                   metavar="NAME=VALUE", help="a header on every record (repeatable)")
    p.add_argument("--file", dest="files", action="append", default=[], metavar="PATH",
                   help="read lines from this file instead of stdin (repeatable)")
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=500, help="lines per record batch")
    add_progress_flag(p)
    add_bootstrap(p)
    p.set_defaults(func=produce_cmd)


class _Sender:
    """Buffers records per partition and sends each partition's batch to its leader; retriable
    answers (a leader moved) are sent again to the new leader. At least once: a timed-out batch
    may be written twice."""

    def __init__(self, cluster: ClusterClient, topic: str, acks: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.acks = acks
        self.pending: dict[int, list[Record]] = {}
        self.sent = 0

    def add(self, partition: int, record: Record) -> None:
        self.pending.setdefault(partition, []).append(record)

    def flush(self) -> None:
        if self.pending:
            self.cluster.retry(self._attempt)

    def _attempt(self) -> int:
        cluster, topic = self.cluster, self.topic
        by_leader: dict[int, list[int]] = {}
        for part in self.pending:
            by_leader.setdefault(cluster.leader(topic, part), []).append(part)
        now = int(time.time() * 1000)
        last = ErrorCode.NONE
        for leader, parts in by_leader.items():
            data = [{"index": part, "records": build_batch(
                [Record(i, now, r.key, r.value, r.headers)
                 for i, r in enumerate(self.pending[part])])} for part in parts]
            body = {"transactional_id": None, "acks": self.acks, "timeout": 30000,
                    "topic_data": [{"name": topic, "partition_data": data}]}
            try:
                if self.acks == 0:
                    cluster.connection(cluster.brokers[leader]).send(0, 9, body)
                    codes = {part: 0 for part in parts}
                else:
                    resp = cluster.request_node(leader, 0, 9, body)
                    codes = {int(r.index): int(r.error_code) for t in resp.responses
                             for r in t.partition_responses}
            except RequestFailed as exc:
                raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {leader}: {exc}") from exc
            for part, code in codes.items():
                if code == 0:
                    self.sent += len(self.pending.pop(part))
                elif code in RETRIABLE_CODES:
                    last = ErrorCode(code)
                else:
                    raise RequestFailed(f"produce to {topic}-{part}: {error_text(code)}")
        if self.pending:
            raise Retriable(last, f"produce to {topic}")
        return 0


def _lines(sources: list[BinaryIO]) -> Iterator[bytes]:
    for source in sources:
        yield from source


def _open_files(paths: list[str]) -> tuple[list[BinaryIO], int]:
    files: list[BinaryIO] = []
    total = 0
    for path in paths:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by produce_cmd
        except OSError as exc:
            for f in files:
                f.close()
            raise CliError(f"--file {path}: {exc.strerror or exc}") from None
        files.append(fh)
        total += os.fstat(fh.fileno()).st_size
    return files, total


def produce_cmd(args: argparse.Namespace) -> int:
    acks = -1 if args.acks in ("all", "-1") else int(args.acks)
    headers: Headers = tuple((k, v.encode()) for k, v in pairs(args.headers, "--header").items())
    if args.batch_size < 1:
        raise CliError(f"--batch-size {args.batch_size}: at least 1")
    sep = args.key_separator.encode() if args.key_separator is not None else None
    if sep == b"":
        raise CliError("--key-separator must not be empty")
    files, total = _open_files(args.files)
    sources: list[BinaryIO] = files or [sys.stdin.buffer]
    topic = args.topic
    try:
        with connect(args) as cluster:
            n_parts = cluster.partitions(topic, create=True)
            if args.partition is not None and not 0 <= args.partition < n_parts:
                raise CliError(f"--partition {args.partition}: {topic} has {n_parts} "
                               f"partition(s), 0 to {n_parts - 1}")
            sender = _Sender(cluster, topic, acks)
            robin = 0
            buffered = 0
            read = 0
            with Bar(total, f"produce to {topic}", args.progress if files else False,
                     in_bytes=True) as bar:
                for raw in _lines(sources):
                    read += len(raw)
                    line = raw.rstrip(b"\n").rstrip(b"\r")
                    key: bytes | None = None
                    value: bytes | None = line
                    if sep is not None and sep in line:
                        key, value = line.split(sep, 1)
                    if args.partition is not None:
                        part = args.partition
                    elif key is not None:
                        part = partition_for_key(key, n_parts)  # murmur2, as Java and Spark
                    else:
                        part = robin % n_parts
                        robin += 1
                    sender.add(part, Record(0, 0, key, value, headers))
                    buffered += 1
                    if buffered >= args.batch_size:
                        buffered = 0
                        sender.flush()
                        bar.advance(read)
                        read = 0
                sender.flush()
                bar.advance(read)
    finally:
        for fh in files:
            fh.close()
    print(f"produced {sender.sent} record(s) to {topic}", file=sys.stderr)
    return 0
