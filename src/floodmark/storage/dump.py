"""Inspect a partition directory, like Kafka's ``kafka-dump-log.sh`` (a read-only CLI tool).

``python -m floodmark.storage.dump <data dir>/<topic>-<partition> [--records] [--index]``
prints each segment's batches (offsets, leader epoch, size, position, codec, CRC check), the
leader-epoch checkpoint, the topic id of ``partition.metadata``, and optionally the records and index entries. Exposes
``register(subparsers)`` for ``floodmark.cli`` (as ``floodmark dump-log``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from floodmark.errors import KafkaError
from floodmark.records import (
    CorruptRecordError,
    decode_batch,
)
from floodmark.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
)
from floodmark.storage.fs import FileSystem, RealFileSystem
from floodmark.storage.partition_metadata import read_partition_metadata, topic_id_to_kafka
from floodmark.storage.segment import LazyFile, OffsetIndex, TimeIndex, scan_batches


def _short(value: bytes | None, limit: int = 60) -> str:
    if value is None:
        return "null"
    text = value.decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[:limit] + "..."


def dump_partition(
    path: str,
    out: TextIO,
    *,
    records: bool = False,
    index: bool = False,
    fs: FileSystem | None = None,
) -> int:
    """Write a description of the partition directory to ``out``; returns 1 if corruption was
    found, else 0. Reads only; never repairs."""
    fs = fs if fs is not None else RealFileSystem()
    status = 0
    epoch_path = f"{path}/{LEADER_EPOCH_CHECKPOINT}"
    try:
        entries = LeaderEpochCheckpointFile(fs, epoch_path).read()
        pairs = ", ".join(f"{e.epoch}:{e.start_offset}" for e in entries)
        out.write(f"leader-epoch-checkpoint: {{{pairs}}}\n")
    except CorruptCheckpointError as exc:
        out.write(f"leader-epoch-checkpoint: CORRUPT ({exc})\n")
        status = 1
    try:
        topic_id = read_partition_metadata(fs, path)
        out.write(f"partition.metadata: topic_id="
                  f"{'none' if topic_id is None else topic_id_to_kafka(topic_id)}"
                  f"{'' if topic_id is None else f' ({topic_id})'}\n")
    except KafkaError as exc:
        out.write(f"partition.metadata: CORRUPT ({exc.message})\n")
        status = 1
    for name in fs.listdir(path):
        if not name.endswith(".log"):
            continue
        base = int(name[:-4])
        segment_path = f"{path}/{name}"
        handle = fs.open(segment_path, create=False)
        out.write(f"segment {segment_path} base_offset={base} size={handle.size()}\n")
        try:
            for position, header in scan_batches(handle, 0, validate=True):
                out.write(
                    f"  position={position} base_offset={header.base_offset} "
                    f"last_offset={header.last_offset} count={header.records_count} "
                    f"leader_epoch={header.partition_leader_epoch} size={header.size} "
                    f"codec={header.compression.name.lower()} "
                    f"max_timestamp={header.max_timestamp} producer_id={header.producer_id} "
                    f"producer_epoch={header.producer_epoch} base_sequence={header.base_sequence} "
                    f"transactional={header.is_transactional} control={header.is_control} "
                    f"crc_valid=True\n"
                )
                if records:
                    data = handle.read_at(position, header.size)
                    for record in decode_batch(data, 0, validate=False)[1]:
                        out.write(
                            f"    offset={record.offset} timestamp={record.timestamp_ms} "
                            f"key={_short(record.key)} value={_short(record.value)} "
                            f"headers={[(k, _short(v, 20)) for k, v in record.headers]}\n"
                        )
        except CorruptRecordError as exc:
            out.write(f"  CORRUPT: {exc}\n")
            status = 1
        handle.close()
        if index:
            index_path = segment_path[:-4] + ".index"
            time_path = segment_path[:-4] + ".timeindex"
            if fs.exists(index_path):
                offsets = OffsetIndex(LazyFile(fs, index_path), base)
                sane = offsets.load(fs.size(segment_path))
                out.write(f"  index ({'sane' if sane else 'FAILS SANITY CHECK'}):")
                for rel, pos in zip(offsets.relative_offsets, offsets.positions, strict=True):
                    out.write(f" {base + rel}@{pos}")
                out.write("\n")
                offsets.file.release()
            if fs.exists(time_path):
                times = TimeIndex(LazyFile(fs, time_path), base)
                sane = times.load()
                out.write(f"  timeindex ({'sane' if sane else 'FAILS SANITY CHECK'}):")
                for ts, rel in zip(times.timestamps, times.relative_offsets, strict=True):
                    out.write(f" {ts}->{base + rel}")
                out.write("\n")
                times.file.release()
    return status


def _run(args: argparse.Namespace) -> int:
    return dump_partition(args.path, sys.stdout, records=args.records, index=args.index)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a partition directory: <data dir>/<topic>-<partition>")
    parser.add_argument("--records", action="store_true", help="also print every record")
    parser.add_argument("--index", action="store_true", help="also print index entries")
    parser.set_defaults(func=_run)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print the batches, epochs and indexes of a partition directory"
    )
    _add_arguments(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m floodmark.storage.dump", description=__doc__)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
