"""Storage append throughput: Log.append_as_leader vs a plain file write of the same bytes.

Prints MB/s for 1 KiB and 64 KiB record batches appended to a real data directory, next to
``os.write`` of the same bytes to a plain file in the same run, and the ratio. No fsync in either
(Kafka's default flush policy leaves write-back to the OS); page-cache effects are the same for
both. Usage: ``.venv/bin/python benchmarks/storage_append.py [--total-mib 256] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from floodmark.records import Record, build_batch
from floodmark.storage import Log, LogConfig

MIB = 1024 * 1024


def make_batch(batch_bytes: int) -> bytearray:
    value_bytes = batch_bytes - 70
    while True:  # varint widths depend on the value size: converge on the exact batch size
        batch = build_batch([Record(0, 1_700_000_000_000, None, os.urandom(value_bytes))])
        if len(batch) == batch_bytes:
            return bytearray(batch)
        value_bytes += batch_bytes - len(batch)


def bench_log(directory: str, batch: bytearray, count: int) -> float:
    log = Log.open(f"{directory}/bench-0", LogConfig(), now_ms=0)
    start = time.perf_counter()
    for i in range(count):
        log.append_as_leader(batch, leader_epoch=1, now_ms=i)
    elapsed = time.perf_counter() - start
    assert log.log_end_offset == count
    log.close()
    return elapsed


def bench_plain(directory: str, batch: bytearray, count: int) -> float:
    fd = os.open(f"{directory}/plain.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(batch)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, view)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mib", type=int, default=256, help="bytes appended per case")
    parser.add_argument("--rounds", type=int, default=3, help="best of N rounds")
    parser.add_argument("--dir", default=None, help="data directory (default: a temp dir)")
    args = parser.parse_args()
    print(f"{'batch':>8} {'count':>8} {'Log MB/s':>10} {'plain MB/s':>11} {'Log/plain':>10}")
    for batch_bytes in (1024, 64 * 1024):
        batch = make_batch(batch_bytes)
        assert len(batch) == batch_bytes
        count = args.total_mib * MIB // batch_bytes
        best_log = best_plain = float("inf")
        for _ in range(args.rounds):
            directory = tempfile.mkdtemp(prefix="floodmark-bench-", dir=args.dir)
            try:
                best_plain = min(best_plain, bench_plain(directory, batch, count))
                best_log = min(best_log, bench_log(directory, batch, count))
            finally:
                shutil.rmtree(directory)
        total_mb = count * batch_bytes / 1e6
        log_rate, plain_rate = total_mb / best_log, total_mb / best_plain
        print(
            f"{batch_bytes // 1024:>6}Ki {count:>8} {log_rate:>10.0f} {plain_rate:>11.0f} "
            f"{log_rate / plain_rate:>10.2f}"
        )


if __name__ == "__main__":
    main()
