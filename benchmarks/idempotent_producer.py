"""The idempotent producer alone (``floodmark.client.IdempotentProducer``, what ``floodmark
produce`` and both Spark sinks use) into a replicated topic: rows/s with one Produce request in
flight per partition beside five (Kafka's ``max.in.flight.requests.per.connection`` default), in
one run, the settings' repetitions alternating.

    .venv/bin/python benchmarks/idempotent_producer.py                   # 200,000 x 100 B
    .venv/bin/python benchmarks/idempotent_producer.py --profile         # where the time goes

A 3-broker ``LocalCluster``; every measured write goes to a fresh topic, replication factor 3,
``min.insync.replicas=2``, ``acks=all``. Records: 9-byte keys, ``--value-bytes`` values, sent
``--records-per-flush`` at a time then ``flush()`` (what a sink task or a micro-batch does).
``--profile``: one more write per setting under cProfile, its time split into building batches,
encoding requests, waiting for answers (socket receive) and the rest. Every write is checked:
the topic's high watermarks add up to the records sent. Figures only, never pass/fail.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.rf3_topics

from benchmarks.rf3_topics import create_topic, written

from floodmark.client import ClusterClient, IdempotentProducer
from floodmark.cluster import LocalCluster


def new_producer(cluster: ClusterClient, in_flight: int) -> IdempotentProducer:
    try:
        return IdempotentProducer(cluster, max_in_flight_requests_per_connection=in_flight)  # type: ignore[call-arg]
    except TypeError:  # a tree from before the setting: one batch at a time
        if in_flight != 1:
            raise SystemExit("this tree's producer has no max_in_flight_requests_per_connection"
                             ) from None
        return IdempotentProducer(cluster)


def produce(bootstrap: str, in_flight: int, args: argparse.Namespace,
            profile: cProfile.Profile | None = None) -> float:
    """Seconds to send and flush ``args.records`` records into a fresh topic."""
    topic = f"p-{in_flight}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, args.partitions)
    value = b"v" * args.value_bytes
    with ClusterClient(bootstrap) as cluster:
        producer = new_producer(cluster, in_flight)
        cluster.partitions(topic)
        producer.send(topic, b"warm", key=b"warm")  # producer id and connections outside the timing
        producer.flush()
        if profile is not None:
            profile.enable()
        t0 = time.perf_counter()
        for i in range(args.records):
            producer.send(topic, value, key=b"%09d" % i)
            if (i + 1) % args.records_per_flush == 0:
                producer.flush()
        producer.flush()
        secs = time.perf_counter() - t0
        if profile is not None:
            profile.disable()
    got = written(bootstrap, topic, args.partitions)
    assert got == args.records + 1, (got, args.records + 1)
    return secs


SPLIT = {  # cProfile function names -> the part of a flush they are
    "build batches (records -> v2 batch bytes)": ("build_batch",),
    "encode requests (kio)": ("encode_request",),
    "wait for answers (socket receive, acks=all)": ("recv_into",),
    "send requests (socket send)": ("sendall",),
    "decode answers": ("decode_response",),
}


def split(profile: cProfile.Profile, secs: float) -> None:
    stats: Any = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    for part, names in SPLIT.items():
        cum = sum(v[3] for k, v in stats.items() if k[2] in names or any(
            k[2].endswith(n + "'>") or k[2] == f"<method '{n}' of '_socket.socket' objects>"
            for n in names))
        print(f"    {part:<46} {cum:7.2f} s  {100 * cum / secs:5.1f} %")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--records-per-flush", type=int, default=50_000)
    ap.add_argument("--in-flight", default="1,5", help="comma list of settings to compare")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    settings = [int(s) for s in args.in_flight.split(",")]

    workdir = Path(tempfile.mkdtemp(prefix="fm-producer-"))
    cluster = LocalCluster(workdir / "cluster", brokers=3)
    try:
        cluster.start()
        bootstrap = cluster.bootstrap
        for s in settings:  # warm-up
            produce(bootstrap, s, args)
        runs: dict[int, list[float]] = {s: [] for s in settings}
        for _ in range(args.repeat):
            for s in settings:
                runs[s].append(produce(bootstrap, s, args))
                print(f"in flight {s}: {runs[s][-1]:.2f} s "
                      f"({args.records / runs[s][-1]:,.0f} records/s)", flush=True)
        load = os.getloadavg()
        print(f"\n{args.records:,} records of {args.value_bytes} B into {args.partitions} "
              f"partitions, flush every {args.records_per_flush:,}, RF=3, acks=all, 3 brokers; "
              f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        best = {s: args.records / min(runs[s]) for s in settings}
        for s in settings:
            print(f"max.in.flight.requests.per.connection={s}: {best[s]:>10,.0f} records/s "
                  f"(best of {args.repeat}; median "
                  f"{args.records / sorted(runs[s])[len(runs[s]) // 2]:,.0f})")
        if len(settings) > 1:
            print(f"{settings[-1]} / {settings[0]}: {best[settings[-1]] / best[settings[0]]:.2f}x")
        if args.profile:
            for s in settings:
                prof = cProfile.Profile()
                secs = produce(bootstrap, s, args, prof)
                print(f"\nprofile, in flight {s}: {secs:.2f} s under cProfile")
                split(prof, secs)
        return 0
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
