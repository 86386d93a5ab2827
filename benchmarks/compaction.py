"""Log cleaner throughput: one cleaning of a compacted log on a real data directory.

Writes ``--records`` keyed records (``--keys`` distinct keys, ``--value-bytes`` each, batches of
``--batch`` records, gzip or not) into a log with ``--segment-mib`` segments, then times one
``LogCleaner.maybe_clean`` over everything below the active segment: records and MB read per
second, and what is left. This runs the whole job on one thread; the broker runs the part
that reads and rewrites data on a worker thread and only the swaps on its event loop.
Usage: ``.venv/bin/python benchmarks/compaction.py [--records 200000] [--keys 1000]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from floodmark.compression import Compression
from floodmark.records import Record, build_batch
from floodmark.storage import Log, LogConfig, RealFileSystem
from floodmark.storage.cleaner import LogCleaner

MIB = 1024 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--segment-mib", type=int, default=4)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    root = tempfile.mkdtemp(dir=args.dir)
    try:
        config = LogConfig(segment_bytes=args.segment_mib * MIB, cleanup_policy="compact",
                           min_cleanable_dirty_ratio=0.0)
        fs = RealFileSystem()
        log = Log.open(f"{root}/bench-0", config, fs=fs, now_ms=0)
        value = os.urandom(args.value_bytes)
        codec = Compression.GZIP if args.gzip else Compression.NONE
        for start in range(0, args.records, args.batch):
            recs = [Record(j, 1_700_000_000_000, b"key-%06d" % ((start + j) % args.keys), value)
                    for j in range(min(args.batch, args.records - start))]
            log.append_as_leader(build_batch(recs, compression=codec), 0, 1_700_000_000_000)
        log.roll(1_700_000_000_000)
        size = log.size_bytes
        cleaner = LogCleaner(fs, root)
        t0 = time.perf_counter()
        result = cleaner.maybe_clean(("bench", 0), log, log.log_end_offset, 1_700_000_000_000)
        elapsed = time.perf_counter() - t0
        assert result is not None
        print(f"records {args.records} keys {args.keys} value {args.value_bytes} B batch "
              f"{args.batch} {'gzip' if args.gzip else 'uncompressed'}: log {size / MIB:.1f} MiB "
              f"before cleaning, {len(log.segments)} segments after")
        print(f"one cleaning: {elapsed:.2f} s = {result.records_before / elapsed:,.0f} records/s,"
              f" {result.bytes_before / MIB / elapsed:.1f} MiB/s; {result.records_before} -> "
              f"{result.records_after} records, {result.bytes_before} -> {result.bytes_after} "
              "bytes")
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
