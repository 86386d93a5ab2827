"""Transactional produce throughput vs plain idempotent produce, side by side in one run
(issue 15): confluent-kafka (librdkafka) against a floodmark broker (or a 3-broker cluster).

Each round sends the same ``--records`` records of ``--size`` bytes, acks=all, to a topic of
``--partitions`` partitions twice: once with an idempotent producer, once with a transactional
producer that commits every ``--per-txn`` records (begin, produce, commit_transaction: the
coordinator's AddPartitionsToTxn, EndTxn, PrepareCommit/CompleteCommit in __transaction_state and
one COMMIT marker per partition), and a third time idempotent again but flushed every
``--per-txn`` records (the transactional run's cadence without the transaction: the fair
baseline, since a commit waits for its records like a flush). Rounds alternate so both modes see the same machine load; the
figures are medians over rounds, with the ratio transactional / idempotent.

    .venv/bin/python benchmarks/transactions.py [--records 100000] [--size 200] [--partitions 3]
        [--per-txn 1000] [--rounds 5] [--brokers 1|3]

Throughput here is bounded by the Python broker (two cores shared with the client); the ratio is
the figure to read: what a transaction costs on top of the idempotent path.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ)
    env.setdefault("FLOODMARK_LOG_LEVEL", "WARNING")
    proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "broker", "--data-dir",
                             str(data_dir), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=open(data_dir.with_suffix(".log"), "ab"), env=env)  # noqa: SIM115
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, "127.0.0.1:" + line.rsplit(":", 1)[1].strip()


def run_idempotent(p: Producer, topic: str, payloads: list[bytes], partitions: int,
                   flush_every: int = 0) -> float:
    """Everything produced, then one flush; or a flush every ``flush_every`` records (the
    transactional run's cadence, without the transaction)."""
    errors: list[Any] = []
    t0 = time.perf_counter()
    for i, v in enumerate(payloads):
        _produce(p, topic, v, i % partitions, errors)
        if flush_every and (i + 1) % flush_every == 0 and p.flush(120) != 0:
            raise SystemExit("idempotent produce: flush timed out")
    if p.flush(120) != 0 or errors:
        raise SystemExit(f"idempotent produce failed: {errors[:3]}")
    return time.perf_counter() - t0


def run_transactional(p: Producer, topic: str, payloads: list[bytes], partitions: int,
                      per_txn: int) -> tuple[float, list[float]]:
    errors: list[Any] = []
    commits: list[float] = []
    t0 = time.perf_counter()
    for start in range(0, len(payloads), per_txn):
        p.begin_transaction()
        for i in range(start, min(start + per_txn, len(payloads))):
            _produce(p, topic, payloads[i], i % partitions, errors)
        c0 = time.perf_counter()
        p.commit_transaction(120)  # flushes, then EndTxn
        commits.append(time.perf_counter() - c0)
    if errors:
        raise SystemExit(f"transactional produce failed: {errors[:3]}")
    return time.perf_counter() - t0, commits


def _produce(p: Producer, topic: str, value: bytes, partition: int, errors: list[Any]) -> None:
    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    while True:
        try:
            p.produce(topic, value=value, partition=partition, on_delivery=report)
            return
        except BufferError:
            p.poll(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--brokers", type=int, default=1, choices=(1, 3))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="floodmark-bench-txn-"))
    cluster = proc = None
    if args.brokers == 1:
        proc, bootstrap = start_broker(tmp / "data")
        rf = 1
    else:
        from floodmark.cluster import LocalCluster

        cluster = LocalCluster(tmp / "cluster", 3, metrics=False).start()
        bootstrap, rf = cluster.bootstrap, 3
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = ["bench-idempotent", "bench-transactional"]
        for fut in admin.create_topics([NewTopic(t, args.partitions, rf) for t in topics]
                                       ).values():
            fut.result(60)
        payloads = [(b"%08d" % i).ljust(args.size, b"x") for i in range(args.records)]
        mb = args.records * args.size / 1e6
        idem: list[float] = []
        paced: list[float] = []
        txn: list[float] = []
        commits: list[float] = []
        # One producer per mode for the whole run (the same settings but the transactional
        # id), set up and warmed up before anything is timed: connections, metadata, producer
        # ids, the coordinator's topic.
        common = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
        plain = Producer({**common, "enable.idempotence": True})
        transactional = Producer({**common, "transactional.id": "bench-" + uuid.uuid4().hex})
        transactional.init_transactions(60)
        run_transactional(transactional, topics[1], payloads[:100], args.partitions, 100)
        run_idempotent(plain, topics[0], payloads[:100], args.partitions)
        for r in range(args.rounds):
            idem.append(run_idempotent(plain, topics[0], payloads, args.partitions))
            paced.append(run_idempotent(plain, topics[0], payloads, args.partitions,
                                        args.per_txn))
            elapsed, c = run_transactional(transactional, topics[1], payloads, args.partitions,
                                           args.per_txn)
            txn.append(elapsed)
            commits += c
            print(f"round {r + 1}: idempotent {args.records / idem[-1]:9.0f}  "
                  f"idempotent+flush/{args.per_txn} {args.records / paced[-1]:9.0f}  "
                  f"transactional {args.records / txn[-1]:9.0f} records/s", flush=True)
        i_med, p_med = statistics.median(idem), statistics.median(paced)
        t_med = statistics.median(txn)
        n_txn = (args.records + args.per_txn - 1) // args.per_txn
        print(f"\n{args.records} records x {args.size} B, {args.partitions} partitions, "
              f"{args.brokers} broker(s), RF {rf}, acks=all, {args.rounds} rounds (medians)")
        print(f"  idempotent, one flush      {args.records / i_med:9.0f} records/s  "
              f"{mb / i_med:7.2f} MB/s")
        print(f"  idempotent, flush/{args.per_txn:<6d}  {args.records / p_med:9.0f} records/s  "
              f"{mb / p_med:7.2f} MB/s")
        print(f"  transactional              {args.records / t_med:9.0f} records/s  "
              f"{mb / t_med:7.2f} MB/s  ({n_txn} transactions of {args.per_txn}, "
              f"{n_txn / t_med:.1f} commits/s)")
        print(f"  ratio transactional / idempotent with the same flushes: {p_med / t_med:.3f}"
              f"   (/ idempotent with one flush: {i_med / t_med:.3f})")
        ms = sorted(1000 * c for c in commits)
        print(f"  commit_transaction latency: median {statistics.median(ms):.1f} ms, "
              f"p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms, max {ms[-1]:.1f} ms "
              f"(flush of the last records + EndTxn)")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
