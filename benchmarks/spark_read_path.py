"""CPU of one Spark Python worker's read path, without Spark: Fetch -> decode -> Arrow.

    .venv/bin/python benchmarks/spark_read_path.py                  # floodmark broker, 400k x 100 B
    .venv/bin/python benchmarks/spark_read_path.py --bootstrap HOST:PORT --topic T
    .venv/bin/python benchmarks/spark_read_path.py --profile        # + cProfile of the decode

Drives the very code a Spark task runs (``floodmark.spark.fetcher.read_range``: the Fetch on the
prefetch thread, ``decode.visible_rows`` on the reading thread) over every partition of the topic,
in this one process, and prints CPU seconds (user + system, every thread of the process) per
400,000 rows: the figure the machine's other load bends least, and the one that decides how
close the Spark source can come to Spark's ceiling on two cores (docs/spark.md, "Where the time
goes"). Then the decode alone on the same answers held in memory, with its minor page faults.
Compare two trees by running it with each on PYTHONPATH, alternating. Prints figures, never
pass/fail.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_read import produce, start_broker

from floodmark.spark.fetcher import ClientConfig, client_for, read_range

try:  # a tree from before issue 27's decoder (compared with PYTHONPATH) times the read path only
    from floodmark.spark.decode import batches_in_range, visible_rows
except ImportError:
    batches_in_range = visible_rows = None  # type: ignore[assignment]

PER_ROWS = 400_000


def read_all(cfg: ClientConfig, topic: str, bounds: dict[int, tuple[int, int]]) -> int:
    rows = 0
    for p, (lo, hi) in bounds.items():
        for rb in read_range(cfg, topic, p, lo, hi, include_headers=False,
                             fail_on_data_loss=True):
            rows += rb.num_rows
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", help="an existing broker (else a floodmark broker is started)")
    ap.add_argument("--topic", help="an existing topic (else 400,000 records are produced)")
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-check-crcs", action="store_true", help="kafka.check.crcs=false")
    ap.add_argument("--profile", action="store_true", help="cProfile of the decode alone")
    args = ap.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="fm-read-path-"))
    proc = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            bootstrap, proc = start_broker("floodmark", workdir)
        topic = args.topic or "read-path"
        if not args.topic:
            produce(bootstrap, topic, args.records, 2, 100)
        cfg = ClientConfig(bootstrap)
        if hasattr(cfg, "check_crcs"):
            cfg = dataclasses.replace(cfg, check_crcs=not args.no_check_crcs)
        client = client_for(cfg)
        bounds = {}
        for p in client.partitions_for(topic):
            b = client.bounds(topic, p)
            bounds[p] = (b.log_start_offset, b.high_watermark)
        total = read_all(cfg, topic, bounds)  # warm: connections, imports, the heap
        scale = PER_ROWS / total
        cpu = []
        for _ in range(args.repeat):
            t0 = time.process_time()
            assert read_all(cfg, topic, bounds) == total
            cpu.append((time.process_time() - t0) * scale)
        crcs = getattr(cfg, "check_crcs", "not checked")
        print(f"read path (Fetch + decode, {total:,} rows, check.crcs={crcs}): CPU s "
              f"per {PER_ROWS:,} rows " + ", ".join(f"{c:.3f}" for c in cpu)
              + f"; median {statistics.median(cpu):.3f}")

        if visible_rows is None:
            return 0
        # the decode alone, on the answers held in memory
        answers = []
        for p, (lo, hi) in bounds.items():
            off = lo
            while off < hi:
                fp = client.fetch(topic, p, off, max_bytes=cfg.fetch_max_bytes, max_wait_ms=500)
                batches, nxt = batches_in_range(fp.records, off, hi)
                answers.append((p, off, hi, batches))
                off = nxt

        def decode_all() -> int:
            n = 0
            for p, off, hi, batches in answers:
                rb = visible_rows(batches, (), read_committed=False, check_crcs=cfg.check_crcs,
                                  topic=topic, partition=p, start=off, end=hi,
                                  include_headers=False)
                n += rb.num_rows if rb is not None else 0
            return n

        decode_all()
        dec, faults = [], []
        for _ in range(args.repeat):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.process_time()
            assert decode_all() == total
            dec.append((time.process_time() - t0) * scale)
            faults.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) * scale)
        print(f"decode alone ({len(answers)} Fetch answers): CPU s per {PER_ROWS:,} rows "
              + ", ".join(f"{c:.3f}" for c in dec) + f"; median {statistics.median(dec):.3f}; "
              f"minor page faults {statistics.median(faults):,.0f}")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            decode_all()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
