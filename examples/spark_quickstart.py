"""Spark on floodmark in one page: batch read, streaming read, streaming write.

    .venv/bin/floodmark broker --data-dir /tmp/fm --listen 127.0.0.1:9092 &
    .venv/bin/python examples/spark_quickstart.py --bootstrap 127.0.0.1:9092

Works with any Kafka-protocol broker (the connector speaks the Kafka protocol).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import floodmark.spark


def setup_topics(bootstrap: str, events: str, counts: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, fut in admin.create_topics([NewTopic(events, 3, 1), NewTopic(counts, 1, 1)]).items():
        try:
            fut.result(30)
        except Exception as exc:
            print(f"topic {name}: {exc}")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    pages = ["/", "/docs", "/pricing", "/blog"]
    for i in range(1000):
        event = {"user": f"u{i % 37}", "page": pages[i % len(pages)], "ts": time.time()}
        producer.produce(events, key=event["user"].encode(), value=json.dumps(event).encode())
    producer.flush(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = ap.parse_args()
    suffix = str(int(time.time()))
    events, counts = f"page-views-{suffix}", f"page-counts-{suffix}"
    setup_topics(args.bootstrap, events, counts)

    # Spark's Python workers run python3 from PATH unless told: when this script is started as
    # .venv/bin/python without activating the venv, point them at this interpreter.
    floodmark.spark.prepare_environment()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").appName("floodmark-quickstart")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # no register(): PySpark finds format("floodmark") itself (the pyspark_floodmark module)

    # Batch: everything committed (below the high watermark) right now.
    df = (spark.read.format("floodmark").option("kafka.bootstrap.servers", args.bootstrap)
          .option("subscribe", events).load())
    print("records:", df.count())
    df.groupBy("partition").agg(F.min("offset"), F.max("offset"), F.count("*")).show()

    # Streaming: page counts, written back to a topic. Same code as with format("kafka").
    schema = "user string, page string, ts double"
    views = (spark.readStream.format("floodmark").option("kafka.bootstrap.servers", args.bootstrap)
             .option("subscribe", events).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "400").load()
             .select(F.from_json(F.col("value").cast("string"), schema).alias("e")))
    per_page = views.groupBy("e.page").count()
    query = (per_page.select(F.col("page").alias("key"),
                             F.to_json(F.struct("page", "count")).alias("value"))
             .writeStream.format("floodmark").outputMode("complete")
             .option("kafka.bootstrap.servers", args.bootstrap).option("topic", counts)
             .option("checkpointLocation", tempfile.mkdtemp(prefix="quickstart-ckpt-"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print("micro-batches:", [p["numInputRows"] for p in query.recentProgress])

    out = (spark.read.format("floodmark").option("kafka.bootstrap.servers", args.bootstrap)
           .option("subscribe", counts).load()
           .select(F.col("value").cast("string").alias("update")))
    out.show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
