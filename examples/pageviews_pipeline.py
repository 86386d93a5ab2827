"""Page views -> per-page counts in 10-second windows, on floodmark, with Spark Structured Streaming.

    .venv/bin/floodmark cluster up &                       # controller + 3 brokers; prints bootstrap
    .venv/bin/python examples/pageviews_pipeline.py --bootstrap 127.0.0.1:PORT,... --events 3000

`floodmark demo` (`./dev run`) runs this same code on a fresh local cluster, SIGKILLs a partition
leader in the middle and checks that every acknowledged page view is counted exactly once.

Spark's watermark moves only with data. So that the last windows close, the producer ends the
stream with one END_OF_STREAM event an hour ahead of the last page view: it moves the watermark
past every real window, and its own window never closes, so it is read but never counted.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

EVENTS, COUNTS = "page-views", "page-view-counts"
WINDOW, WATERMARK_DELAY = "10 seconds", "20 seconds"
PAGES = {"/": 30, "/pricing": 12, "/docs/quickstart": 15, "/docs/spark": 8, "/blog/replication": 10,
         "/signup": 5, "/login": 14, "/about": 6}
END_OF_STREAM_AHEAD_MS = 3_600_000


def create_topics(bootstrap: str) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"min.insync.replicas": "2"}
    for fut in admin.create_topics([NewTopic(EVENTS, 3, 3, config=cfg),
                                    NewTopic(COUNTS, 1, 3, config=cfg)]).values():
        try:
            fut.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def page_views(count: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """`count` page views stamped with the current time, then END_OF_STREAM."""
    rng = random.Random(seed)
    users = [f"user-{rng.randrange(10**6):06d}" for _ in range(400)]
    activity = [1 / (rank + 1) for rank in range(len(users))]  # a few users are very active
    ts_ms = 0
    for i in range(count):
        ts_ms = max(ts_ms, int(time.time() * 1000))
        yield {"event_id": i, "user": rng.choices(users, weights=activity)[0],
               "page": rng.choices(list(PAGES), weights=list(PAGES.values()))[0], "ts_ms": ts_ms}
    yield {"event_id": -1, "user": "", "page": "END_OF_STREAM",
           "ts_ms": ts_ms + END_OF_STREAM_AHEAD_MS}


def produce(bootstrap: str, events: Iterable[dict[str, Any]], rate_per_s: float,
            on_delivery: Callable[[dict[str, Any], Any], None]) -> None:
    """Send events at a steady rate with acks=all and the idempotent producer;
    `on_delivery(event, error)` is called once per event (error None = acknowledged)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 20, "message.timeout.ms": 120000})
    start = time.monotonic()
    for i, event in enumerate(events):
        time.sleep(max(0.0, start + i / rate_per_s - time.monotonic()))
        producer.produce(EVENTS, key=event["user"].encode(), value=json.dumps(event).encode(),
                         on_delivery=lambda err, _msg, e=event: on_delivery(e, err))
        producer.poll(0)
    if producer.flush(120):
        raise TimeoutError("events still unacknowledged after 120 s")


def spark_session(master: str = "local[2]") -> Any:
    """A SparkSession on `master`: `local[2]`, or a cluster such as `spark://host:7077` (its
    executors must run an interpreter with floodmark installed: PYSPARK_PYTHON, docs/spark.md)."""
    import floodmark.spark

    floodmark.spark.prepare_environment()  # Spark's Python workers use this interpreter
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("floodmark-pageviews")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    floodmark.spark.register(spark)
    return spark


def start_pipeline(spark: Any, bootstrap: str, out_dir: str,
                   started: Callable[[Any], None] = lambda query: None) -> dict[str, Any]:
    """The Spark job: read page views, count per page in 10 s windows, write to a topic and Parquet.
    ``started(query)`` runs after each query's start, before the next one is started."""
    from pyspark.sql import functions as F

    views = (spark.readStream.format("floodmark")
             .option("kafka.bootstrap.servers", bootstrap).option("subscribe", EVENTS)
             .option("startingOffsets", "earliest").load()
             .select(F.from_json(F.col("value").cast("string"),
                                 "event_id long, user string, page string, ts_ms long").alias("v"))
             .select("v.*", F.timestamp_millis("v.ts_ms").alias("ts")))
    counts = (views.withWatermark("ts", WATERMARK_DELAY)
              .groupBy(F.window("ts", WINDOW), "page").agg(F.count("*").alias("views")))

    to_parquet = (counts.writeStream.format("parquet").outputMode("append")
                  .option("path", f"{out_dir}/counts-parquet")
                  .option("checkpointLocation", f"{out_dir}/checkpoint-parquet")
                  .trigger(processingTime="2 seconds").queryName("counts_to_parquet").start())
    started(to_parquet)
    as_records = counts.select(
        F.col("page").alias("key"),
        F.to_json(F.struct("page", F.unix_millis("window.start").alias("window_start_ms"),
                           F.unix_millis("window.end").alias("window_end_ms"), "views")
                  ).alias("value"))
    to_topic = (as_records.writeStream.format("floodmark").outputMode("append")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", COUNTS)
                .option("floodmark.exactlyOnce", "true")  # see docs/spark.md, "Sink"
                .option("checkpointLocation", f"{out_dir}/checkpoint-topic")
                .trigger(processingTime="2 seconds").queryName("counts_to_topic").start())
    started(to_topic)
    return {"parquet": to_parquet, "topic": to_topic}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=200.0, help="page views per second")
    ap.add_argument("--out", default="pageviews-out")
    ap.add_argument("--master", default="local[2]",
                    help="Spark master: local[2] or a cluster's URL, e.g. spark://host:7077")
    args = ap.parse_args()
    create_topics(args.bootstrap)
    spark = spark_session(args.master)
    queries = start_pipeline(spark, args.bootstrap, args.out)
    failed: list[str] = []
    produce(args.bootstrap, page_views(args.events), args.rate,
            lambda e, err: failed.append(str(err)) if err else None)
    print(f"{args.events} page views produced, {len(failed)} delivery failures")
    time.sleep(15)  # a few more triggers: the END_OF_STREAM watermark closes the last windows
    for q in queries.values():
        q.stop()
    spark.read.parquet(f"{args.out}/counts-parquet").orderBy("window", "page").show(100, False)
    spark.stop()


if __name__ == "__main__":
    main()
