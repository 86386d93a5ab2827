"""Spark write throughput into a replicated floodmark topic: floodmark's sinks beside Spark's own
JVM Kafka connector, in one run, on one SparkSession (``local[2]``).

    .venv/bin/python benchmarks/spark_write.py                  # 500,000 x 100 B, 2 partitions
    .venv/bin/python benchmarks/spark_write.py --records 1000000 --repeat 3

A 3-broker ``LocalCluster`` (controller + 3 brokers as processes); every measured write goes to a
fresh topic with replication factor 3 and ``min.insync.replicas=2``, every record acknowledged by
the whole ISR (``acks=all``). The rows come from Parquet files written once beforehand (9-byte
keys, 100-byte values, ``--rows-per-batch`` rows per file) and are written by a streaming query
(``readStream.format("parquet")``, one file per micro-batch, ``Trigger.AvailableNow``) into:

- floodmark's exactly-once sink (``format("floodmark")``, ``floodmark.exactlyOnce=true``: each
  micro-batch's rows go to the driver and are published there once, between marker records);
- floodmark's default sink (``format("floodmark")``: each task produces with its own idempotent
  producer; at-least-once across task retries);
- Spark's JVM Kafka connector (``format("kafka")``, ``kafka.acks=all``; jars from Maven Central
  via tests/reference/spark_kafka.py, as in tests/spark).

Each figure is rows / seconds from the query's start to its end (best of ``--repeat``, the sinks'
repetitions alternating so a change in the machine's load falls on all of them), and the steady
state (rows of the micro-batches after the first / their trigger time). Every write is checked:
the topic's high watermarks add up to the rows written. Figures only, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reference.spark_kafka

from benchmarks.rf3_topics import create_topic, written

import floodmark.spark
from floodmark.cluster import LocalCluster

SINKS = {
    "exactly_once": ("floodmark", {"floodmark.exactlyOnce": "true"},
                     "floodmark exactly-once sink (floodmark.exactlyOnce=true)"),
    "floodmark": ("floodmark", {}, "floodmark default sink (idempotent producer per task)"),
    "jvm": ("kafka", {"kafka.acks": "all"}, "Spark's JVM Kafka connector (kafka.acks=all)"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rows-per-batch", type=int, default=100_000,
                    help="rows per Parquet file = rows per micro-batch")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--sinks", default="exactly_once,floodmark,jvm",
                    help=f"comma list of {', '.join(SINKS)}")
    args = ap.parse_args()
    sinks = [s.strip() for s in args.sinks.split(",") if s.strip()]
    unknown = [s for s in sinks if s not in SINKS]
    if unknown:
        ap.error(f"unknown sinks {unknown}: choose from {', '.join(SINKS)}")

    floodmark.spark.prepare_environment()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    workdir = Path(tempfile.mkdtemp(prefix="fm-spark-write-"))
    cluster = LocalCluster(workdir / "cluster", brokers=3)
    spark: Any = None
    try:
        t0 = time.perf_counter()
        cluster.start()
        bootstrap = cluster.bootstrap
        print(f"cluster: controller + 3 brokers at {bootstrap} ({time.perf_counter() - t0:.1f} s)")

        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        builder = SparkSession.builder
        if "jvm" in sinks:
            from tests.reference import spark_kafka

            builder = builder.config("spark.jars", ",".join(str(j) for j in spark_kafka.jars()))
            print(spark_kafka.version_note())
        spark = (builder.master("local[2]").appName("floodmark-spark-write-bench")
                 .config("spark.driver.memory", "4g").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        floodmark.spark.register(spark)

        data = workdir / "rows"
        files = max(1, -(-args.records // args.rows_per_batch))
        (spark.range(args.records, numPartitions=files)
         .select(F.lpad(F.col("id").cast("string"), 9, "k").cast("binary").alias("key"),
                 F.concat(F.lpad(F.col("id").cast("string"), 12, "0"),
                          F.lit("v" * max(0, args.value_bytes - 12))).cast("binary")
                 .alias("value"))
         .write.parquet(str(data)))
        schema = spark.read.parquet(str(data)).schema
        print(f"rows: {args.records:,} x ({9} B key, {args.value_bytes} B value) in {files} "
              f"Parquet files of {args.rows_per_batch:,}")

        def run(sink: str) -> tuple[float, float, int]:
            """(seconds from start to end, steady-state rows/s, micro-batches) of one write."""
            fmt, extra, _label = SINKS[sink]
            topic = f"w-{sink}-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, args.partitions)
            writer = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                      .parquet(str(data)).writeStream.format(fmt)
                      .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                      .option("checkpointLocation", str(workdir / f"ckpt-{topic}"))
                      .trigger(availableNow=True))
            for k, v in extra.items():
                writer = writer.option(k, v)
            t0 = time.perf_counter()
            q = writer.start()
            q.awaitTermination()
            secs = time.perf_counter() - t0
            progress = [p for p in q.recentProgress if p["numInputRows"]]
            rows = sum(p["numInputRows"] for p in progress)
            got = written(bootstrap, topic, args.partitions)
            assert rows == args.records == got, (sink, rows, got, args.records)
            later = progress[1:] or progress
            steady = (sum(p["numInputRows"] for p in later)
                      / (sum(p["durationMs"]["triggerExecution"] for p in later) / 1000))
            return secs, steady, len(progress)

        for sink in sinks:  # warm-up: Python workers, connections, the JIT
            print(f"warm-up {sink}: {run(sink)[0]:.1f} s")
        runs: dict[str, list[tuple[float, float, int]]] = {s: [] for s in sinks}
        for _ in range(args.repeat):
            for sink in sinks:
                runs[sink].append(run(sink))
                print(f"{sink}: {runs[sink][-1][0]:.2f} s, steady state "
                      f"{runs[sink][-1][1]:,.0f} rows/s")
        start_to_end = {s: args.records / min(r[0] for r in runs[s]) for s in sinks}
        steady = {s: max(r[1] for r in runs[s]) for s in sinks}

        load = os.getloadavg()
        print(f"\n{args.records:,} rows of {args.value_bytes} B into {args.partitions} partitions, "
              f"RF=3, acks=all, 3 brokers; local[2] on {os.cpu_count()} cores; load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        width = max(len(SINKS[s][2]) for s in sinks) + 2
        print(f"{'sink':<{width}} {'rows/s start-to-end':>20} {'rows/s steady':>14}")
        for s in sinks:
            print(f"{SINKS[s][2]:<{width}} {start_to_end[s]:>20,.0f} {steady[s]:>14,.0f}")
        if "jvm" in sinks:
            for s in sinks:
                if s != "jvm":
                    print(f"{SINKS[s][2]} / Spark's JVM Kafka connector: "
                          f"{start_to_end[s] / start_to_end['jvm']:.2f}x start-to-end, "
                          f"{steady[s] / steady['jvm']:.2f}x steady state")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
