"""Transactions of Kafka's Java producer (kafka-clients 4.1.1) on one floodmark broker, with
transaction version 2 (KIP-890 part 2) and with version 0, alternating in one run.

Each run is ``tests/reference/clients/TxnProducer.java``: ``--rounds`` rounds of one committed
transaction (a record on each of ``--partitions`` partitions and the group's offset) and one
aborted one. Between runs the cluster's ``transaction.version`` is set with UpdateFeatures (2, or
0), so each fresh JVM negotiates the version the run is for (it prints which: checked). Version 2
drops the client's AddPartitionsToTxn and AddOffsetsToTxn (the leaders and the group coordinator
add instead) and bumps the epoch at each EndTxn; version 0 is KIP-98's protocol. Printed:
transactions per second per run, and the medians.

    .venv/bin/python benchmarks/txn_version.py [--rounds 100] [--partitions 2] [--runs 3]
        [--bootstrap HOST:PORT]

Needs Java 17 and Maven (the jars, as ``./dev kafka``). A figure, never pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic
from tests.reference.kafka_node import KAFKA_DIR, LIB, fetch_jars

from floodmark.client.connection import KafkaConnection

SOURCE = Path(__file__).resolve().parents[1] / "tests/reference/clients/TxnProducer.java"
API_UPDATE_FEATURES = 57


def set_transaction_version(bootstrap: str, level: int) -> None:
    with KafkaConnection(bootstrap, client_id="txn-version-bench") as conn:
        answer = conn.request(API_UPDATE_FEATURES, 1, {
            "feature_updates": [{"feature": "transaction.version",
                                 "max_version_level": level, "upgrade_type": 2}],
            "validate_only": False})
    if int(answer.error_code) != 0:
        raise SystemExit(f"UpdateFeatures transaction.version={level}: {answer}")


def run(classpath: str, bootstrap: str, partitions: int, rounds: int) -> tuple[bool, float]:
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    done = subprocess.run(
        ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
         "-cp", classpath, "TxnProducer", bootstrap, topic, f"tx-{uuid.uuid4().hex[:8]}",
         f"g-{uuid.uuid4().hex[:8]}", str(rounds), str(partitions)],
        capture_output=True, text=True, timeout=1800, check=True)
    lines = done.stdout.splitlines()
    tv2 = "TV2 true" in lines
    (elapsed,) = [int(x.split()[1]) for x in lines if x.startswith("ELAPSED_MS")]
    return tv2, 2 * rounds / (elapsed / 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bootstrap", help="an existing cluster (default: one new broker)")
    args = ap.parse_args()
    fetch_jars()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(tmp / "classes"),
                        str(SOURCE)], check=True, timeout=300)
        classpath = f"{tmp / 'classes'}:{LIB}/*"
        proc = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            from benchmarks.transactions import start_broker
            proc, bootstrap = start_broker(tmp / "broker")
        try:
            rates: dict[int, list[float]] = {2: [], 0: []}
            for i in range(args.runs):
                for level in (2, 0) if i % 2 == 0 else (0, 2):
                    set_transaction_version(bootstrap, level)
                    tv2, rate = run(classpath, bootstrap, args.partitions, args.rounds)
                    if tv2 != (level == 2):
                        raise SystemExit(f"the client negotiated TV2={tv2} at level {level}")
                    rates[level].append(rate)
                    print(f"run {i + 1} transaction.version={level}: {rate:.1f} "
                          f"transactions/s", flush=True)
            set_transaction_version(bootstrap, 2)
            v2, v0 = statistics.median(rates[2]), statistics.median(rates[0])
            print(f"median: version 2 {v2:.1f} transactions/s, version 0 {v0:.1f} "
                  f"transactions/s, ratio {v2 / v0:.2f} ({args.rounds * 2} transactions per "
                  f"run, {args.partitions} partitions, acks=all)")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
