"""``floodmark produce``: lines of stdin or of files as records, sent by the one producer
(``client.producer``: each partition's batch to its leader, retried through a failover,
idempotent with ``--acks all``), to a topic the cluster creates if it is missing (said on
stderr; ``--no-create`` refuses instead), keys partitioned with Kafka's murmur2, headers with
``--header`` (as kcat's ``-H``), a progress bar for files."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from floodmark.cli.common import CliError, add_bootstrap, connect, pairs
from floodmark.client import ClusterClient, Header, IdempotentProducer
from floodmark.errors import ErrorCode
from floodmark.progress import Bar, add_progress_flag


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
    p.add_argument("--no-create", action="store_true",
                   help="refuse a topic that does not exist instead of having the cluster "
                        "create it (auto.create.topics.enable)")
    add_progress_flag(p)
    add_bootstrap(p)
    p.set_defaults(func=produce_cmd)


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


def _partitions(cluster: ClusterClient, topic: str, *, create: bool) -> int:
    """The topic's partition count. A topic that does not exist is created by the cluster
    (Metadata's allow_auto_topic_creation, as Kafka's producers ask) and said so on stderr,
    or refused with ``--no-create`` or when the cluster does not create topics."""
    meta = cluster.metadata([topic])
    if int(meta.topics[0].error_code) != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return cluster.partitions(topic)  # it exists (or another error, worded there)
    create_it = f"create it first: floodmark topic create {topic}"
    if not create:
        raise CliError(f"topic {topic} does not exist (--no-create): {create_it}")
    meta = cluster.metadata([topic], auto_create=True)
    if int(meta.topics[0].error_code) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CliError(f"topic {topic} does not exist and the cluster does not create topics "
                       f"(auto.create.topics.enable=false): {create_it}")
    n_parts = cluster.partitions(topic, create=True)
    print(f"topic {topic} did not exist: the cluster auto-created it with {n_parts} "
          f"partition(s) (num.partitions; --no-create refuses instead)", file=sys.stderr)
    return n_parts


def produce_cmd(args: argparse.Namespace) -> int:
    acks = -1 if args.acks in ("all", "-1") else int(args.acks)
    headers: list[Header] = [(k, v.encode()) for k, v in pairs(args.headers, "--header").items()]
    if args.batch_size < 1:
        raise CliError(f"--batch-size {args.batch_size}: at least 1")
    sep = args.key_separator.encode() if args.key_separator is not None else None
    if sep == b"":
        raise CliError("--key-separator must not be empty")
    files, total = _open_files(args.files)
    sources: list[BinaryIO] = files or [sys.stdin.buffer]
    topic = args.topic
    sent = 0
    try:
        with connect(args) as cluster:
            n_parts = _partitions(cluster, topic, create=not args.no_create)
            if args.partition is not None and not 0 <= args.partition < n_parts:
                raise CliError(f"--partition {args.partition}: {topic} has {n_parts} "
                               f"partition(s), 0 to {n_parts - 1}")
            producer = IdempotentProducer(cluster, acks=acks)
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
                    producer.send(topic, value, key=key, headers=headers, partition=args.partition)
                    buffered += 1
                    if buffered >= args.batch_size:
                        buffered = 0
                        sent += sum(producer.flush().values())
                        bar.advance(read)
                        read = 0
                sent += sum(producer.flush().values())
                bar.advance(read)
    finally:
        for fh in files:
            fh.close()
    print(f"produced {sent} record(s) to {topic}", file=sys.stderr)
    return 0
