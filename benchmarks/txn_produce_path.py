"""The partition side of transactions: the leader's produce path for transactional batches (with
a COMMIT marker every ``--batches-per-txn`` batches, every other transaction aborted) against
the same batches from a plain idempotent producer, in the same run.

Both go through ``replication.produce`` (sequence checks, producer state, the append to a real
log in a temp directory, acks=1, one replica); the transactional run also pays for the markers
(``write_marker_as_leader``) and the ``.txnindex`` entries of the aborts. Prints batches/s of
each (best of ``--rounds``, the two interleaved) and the ratio, by the wall clock and by the
process's CPU time (``time.process_time``: on a shared, loaded machine the wall clock also counts
the time the process waited for a core, which swung the wall ratio from 0.55 to 1.68 between runs
of the same code; the CPU ratio holds within a few percent), and the CPU cost of one data batch
and of one marker; then the cost of a read_committed read of the whole log (Log.read below the
LSO + the aborted list + the client's filter) against a read_uncommitted one. Usage:
``.venv/bin/python benchmarks/txn_produce_path.py [--batches 20000] [--batches-per-txn 10]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass

from floodmark.client.fetch import FetchedPartition, visible_records
from floodmark.constants import READ_COMMITTED, READ_UNCOMMITTED
from floodmark.records import Record, build_batch
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Effect, Partition, PartitionConfig
from floodmark.replication.produce import produce_as_leader, write_marker_as_leader
from floodmark.storage import Log, LogConfig

RECORDS_PER_BATCH = 10
VALUE = b"x" * 100


class _Ports:
    def high_watermark_changed(self, old: int, new: int) -> None: ...
    def complete_produce(self, done: object) -> None: ...
    def propose_isr(self, request: object) -> None: ...
    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None: ...
    def follower_appended(self, records: bytes | bytearray | memoryview) -> None: ...


def _leader(directory: str) -> tuple[Partition, Log, ReplicaDriver]:
    log = Log.open(directory, LogConfig(), now_ms=0)
    core = Partition(PartitionConfig("bench", 0, 1))
    driver = ReplicaDriver(core, log, _Ports())
    driver.apply(core.apply_metadata(log, PartitionRegistration((1,), (1,), 1, 1, 0), 0))
    return core, log, driver


@dataclass
class Timing:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    marker_cpu_s: float = 0.0  # the part of cpu_s spent in the markers


def run(directory: str, batches: int, per_txn: int, transactional: bool) -> tuple[Timing, Log,
                                                                                   Partition]:
    core, log, driver = _leader(directory)

    def apply(effects: list[Effect]) -> None:
        driver.apply(effects)

    records = [Record(i, 1_700_000_000_000, None, VALUE) for i in range(RECORDS_PER_BATCH)]
    prebuilt = [build_batch(records, producer_id=1, producer_epoch=0,
                            base_sequence=(i * RECORDS_PER_BATCH) % 2**31,
                            is_transactional=transactional) for i in range(batches)]
    timing = Timing()
    start, cpu_start = time.perf_counter(), time.process_time()
    for i, batch in enumerate(prebuilt):
        out = produce_as_leader(core, log, bytearray(batch), acks=1, produce_id=i, now_ms=i,
                                timeout_ms=30_000)
        apply(out.effects)
        if transactional and (i + 1) % per_txn == 0:
            committed = (i // per_txn) % 2 == 0
            marker_start = time.process_time()
            marker = write_marker_as_leader(core, log, 1, 0, committed, 0, produce_id=-i,
                                            now_ms=i, timeout_ms=30_000)
            apply(marker.effects)
            timing.marker_cpu_s += time.process_time() - marker_start
    timing.wall_s = time.perf_counter() - start
    timing.cpu_s = time.process_time() - cpu_start
    return timing, log, core


def read_all(log: Log, core: Partition, isolation: int) -> tuple[float, int]:
    start = time.perf_counter()
    end = core.last_stable_offset if isolation == READ_COMMITTED else core.high_watermark
    position, shown = 0, 0
    while position < end:
        data = log.read(position, 1 << 20, end)
        aborted: tuple[tuple[int, int], ...] = ()
        if isolation == READ_COMMITTED:
            aborted = tuple((a.producer_id, a.first_offset)
                            for a in log.collect_aborted_transactions(position, data.next_offset))
        fetched = FetchedPartition(0, core.high_watermark, core.last_stable_offset, 0, aborted,
                                   data.records)
        shown += len(visible_records(fetched, position, isolation))
        position = data.next_offset
    return time.perf_counter() - start, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--batches-per-txn", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best = {False: float("inf"), True: float("inf")}
    best_cpu = {False: float("inf"), True: float("inf")}
    marker_cpu = float("inf")
    for round_ in range(args.rounds):
        # Alternate which case runs first, so that neither always pays for the other's garbage.
        for transactional in ((False, True) if round_ % 2 == 0 else (True, False)):
            directory = tempfile.mkdtemp(prefix="txnlog-bench-")
            try:
                timing, log, _core = run(f"{directory}/bench-0", args.batches,
                                         args.batches_per_txn, transactional)
                best[transactional] = min(best[transactional], timing.wall_s)
                best_cpu[transactional] = min(best_cpu[transactional], timing.cpu_s)
                if transactional:
                    marker_cpu = min(marker_cpu, timing.marker_cpu_s)
                log.close()
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    reads = {READ_UNCOMMITTED: float("inf"), READ_COMMITTED: float("inf")}
    shown: dict[int, int] = {}
    directory = tempfile.mkdtemp(prefix="txnlog-bench-")
    try:
        _elapsed, log, core = run(f"{directory}/bench-0", args.batches, args.batches_per_txn,
                                  True)
        for _round in range(args.rounds):
            for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
                took, count = read_all(log, core, isolation)
                reads[isolation] = min(reads[isolation], took)
                shown[isolation] = count
        log.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    idem = args.batches / best[False]
    txn = args.batches / best[True]
    print(f"produce path, {args.batches} batches of {RECORDS_PER_BATCH} x {len(VALUE)} B, "
          f"best of {args.rounds}:")
    print(f"  idempotent     {idem:10.0f} batches/s")
    print(f"  transactional  {txn:10.0f} batches/s  (a marker every {args.batches_per_txn} "
          f"batches, half aborted)  ratio {txn / idem:.3f}")
    markers = args.batches // args.batches_per_txn
    data_us = best_cpu[False] / args.batches * 1e6
    marker_us = marker_cpu / max(1, markers) * 1e6
    print(f"  CPU time       idempotent {best_cpu[False]:.3f} s, transactional "
          f"{best_cpu[True]:.3f} s  ratio {best_cpu[False] / best_cpu[True]:.3f}  "
          f"(a data batch {data_us:.1f} us, a marker {marker_us:.1f} us = "
          f"{marker_us / data_us:.2f} data batches)")
    print(f"read of the transactional log: read_uncommitted {reads[READ_UNCOMMITTED]:.3f} s "
          f"({shown[READ_UNCOMMITTED]} records), read_committed {reads[READ_COMMITTED]:.3f} s "
          f"({shown[READ_COMMITTED]} records)  ratio "
          f"{reads[READ_COMMITTED] / reads[READ_UNCOMMITTED]:.3f}")


if __name__ == "__main__":
    main()
