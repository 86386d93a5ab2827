"""Spark's own JVM Kafka connector (``format("kafka")``, org.apache.spark:spark-sql-kafka-0-10)
against floodmark: the way most Spark users read and write Kafka must work on floodmark.

The connector's jars come from Maven Central (tests/reference/spark_kafka.py, fetched once and
cached in tools/spark-kafka/lib); the shared SparkSession gets them in ``spark.jars``. Every
record the tests compare was written or read by librdkafka (confluent-kafka), independently of
the connector under test.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from spark_helpers import Produced, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]

Row = tuple[str, int, int, bytes | None, bytes, int, int, tuple[tuple[str, bytes | None], ...]]


def _read(spark, bootstrap: str, **opts: str):  # type: ignore[no-untyped-def]
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _rows(df) -> list[Row]:  # type: ignore[no-untyped-def]
    """Every column of Spark's Kafka schema, the timestamp as epoch milliseconds."""
    out: list[Row] = []
    for r in df.selectExpr("topic", "partition", "offset", "key", "value",
                           "unix_millis(timestamp) AS ts_ms", "timestampType",
                           "headers").collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                        for h in (r["headers"] or ()))
        out.append((r["topic"], r["partition"], r["offset"],
                    None if r["key"] is None else bytes(r["key"]), bytes(r["value"]),
                    r["ts_ms"], r["timestampType"], headers))
    return sorted(out, key=lambda t: (t[1], t[2]))


def _expected(records: list[Produced]) -> list[Row]:
    return [(r.topic, r.partition, r.offset, r.key, r.value or b"", r.timestamp_ms, 0, r.headers)
            for r in sorted(records, key=lambda r: (r.partition, r.offset))]


def _produce_transactions(bootstrap: str, topic: str) -> tuple[list[bytes], list[bytes]]:
    """Three transactions on partition 0: committed, aborted, committed (each flushed to the
    broker before it ends, so the aborted records are in the log). Returns (committed, aborted)
    values in offset order."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"jvm-{uuid.uuid4().hex}",
                  "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    p.init_transactions(30)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for name, commit in (("c0", True), ("a", False), ("c1", True)):
        p.begin_transaction()
        values = [f"{name}-{i}".encode() for i in range(20)]
        for v in values:
            p.produce(topic, value=v, partition=0)
        assert p.flush(30) == 0
        if commit:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
            aborted += values
    return committed, aborted


def _consume_all(bootstrap: str, topic: str, partitions: int, total: int) -> list[bytes]:
    """Every value of ``topic`` read with librdkafka (bounded: 60 s)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < total and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                values.append(m.value())
        return values
    finally:
        c.close()


def test_spark_jvm_connector_batch_committed_stream_and_sink_on_floodmark(  # type: ignore[no-untyped-def]
        spark_jvm_kafka, broker, topic_name, tmp_path: Path) -> None:
    """One test (one warm-up of the connector): batch read, read_committed, an AvailableNow
    stream into the memory sink and the Kafka sink, each compared record by record."""
    spark, bs = spark_jvm_kafka, broker.bootstrap

    # 1. Batch read: every column of every record, exactly once.
    create_topic(bs, topic_name, 2)
    produced = produce(bs, topic_name, 300, partitions=2)
    df = _read(spark, bs, subscribe=topic_name, includeHeaders="true")
    assert df.count() == 300
    assert _rows(df) == _expected(produced)
    # assign + explicit offsets (JSON, Spark's syntax): the half-open range [10, 25) of p1.
    ranged = _read(spark, bs, assign=f'{{"{topic_name}":[1]}}', includeHeaders="true",
                   startingOffsets=f'{{"{topic_name}":{{"1":10}}}}',
                   endingOffsets=f'{{"{topic_name}":{{"1":25}}}}')
    assert _rows(ranged) == [r for r in _expected(produced) if r[1] == 1 and 10 <= r[2] < 25]

    # 2. kafka.isolation.level=read_committed: committed transactions only; the default
    # (read_uncommitted) also returns the aborted one's records.
    txn_topic = topic_name + "-txn"
    create_topic(bs, txn_topic, 1)
    committed, aborted = _produce_transactions(bs, txn_topic)

    def values(**opts: str) -> list[bytes]:
        rows = _read(spark, bs, subscribe=txn_topic, **opts).select("offset", "value").collect()
        return [bytes(r["value"]) for r in sorted(rows, key=lambda r: r["offset"])]

    assert values(**{"kafka.isolation.level": "read_committed"}) == committed
    assert sorted(values()) == sorted(committed + aborted)

    # 3. Streaming: readStream -> memory sink, Trigger.AvailableNow in micro-batches of at most
    # maxOffsetsPerTrigger records; the sink holds every record once.
    query_name = "jvm_" + uuid.uuid4().hex[:8]
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bs)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "100").load()
         .writeStream.format("memory").queryName(query_name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "the AvailableNow query did not finish"
        assert q.exception() is None
        batches = [p for p in q.recentProgress if p["numInputRows"]]
        assert sum(p["numInputRows"] for p in batches) == 300
        assert len(batches) >= 3  # admission control: 300 records, at most 100 a trigger
        assert _rows(spark.table(query_name)) == _expected(produced)
    finally:
        q.stop()
        spark.sql(f"DROP VIEW IF EXISTS {query_name}")

    # 4. The Kafka sink: rows written by Spark, read back by librdkafka.
    out_topic = topic_name + "-out"
    create_topic(bs, out_topic, 2)
    rows = [(f"k{i}".encode(), f"w{i}".encode(), i % 2) for i in range(200)]
    (spark.createDataFrame(rows, "key binary, value binary, partition int")
     .write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", out_topic)
     .save())
    assert sorted(_consume_all(bs, out_topic, 2, 200)) == sorted(r[1] for r in rows)


@pytest.mark.slow
def test_spark_jvm_connector_stream_survives_a_leader_sigkill(  # type: ignore[no-untyped-def]
        spark_jvm_kafka, tmp_path: Path) -> None:
    """A running ``format("kafka")`` query (processingTime trigger, file sink) on a 3-broker
    cluster while the partition leader is SIGKILLed and a producer keeps writing with acks=all:
    the sink holds every acknowledged record once; a batch read afterwards returns them all."""
    from tests.cluster.helpers import start_cluster, wait_until

    from floodmark.cluster.waiting import process_cpu_s

    spark = spark_jvm_kafka
    cluster = start_cluster(tmp_path / "cluster")  # 1.5 s broker session timeout
    topic = "jvm-failover"
    stop = threading.Event()
    target = [1000]  # how many records the producer is to have sent; the test raises it
    acked: list[bytes] = []
    errors: list[str] = []
    q = None
    try:
        bs = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})]
                            )[topic].result(30)
        wait_until(lambda: cluster.leader_of(topic) >= 0, 20, "a leader")

        def produce_until_stopped() -> None:
            p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 5, "message.timeout.ms": 60000,
                          "request.timeout.ms": 4000, "retry.backoff.ms": 50,
                          "topic.metadata.refresh.interval.ms": 1000})

            def cb(err, msg):  # type: ignore[no-untyped-def]
                (errors.append(str(err)) if err else acked.append(msg.value()))

            i = 0
            while not stop.is_set() and i < 100_000:
                if i >= target[0]:
                    p.poll(0.05)
                    continue
                try:
                    p.produce(topic, value=b"v%d" % i, partition=0, on_delivery=cb)
                    i += 1
                except BufferError:
                    p.poll(0.01)
                if i % 20 == 0:
                    p.poll(0.01)
                    time.sleep(0.01)  # at most ~2,000 records/s: still writing when the leader dies
            p.flush(60)

        producer = threading.Thread(target=produce_until_stopped, daemon=True)
        producer.start()
        out = tmp_path / "out"
        q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bs)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="500 milliseconds").start())
        # The connector's first micro-batch (class loading, JIT) may take a while on a busy
        # machine: wait while the producer or Spark's JVM moves.
        jvm_pid = spark.sparkContext._gateway.proc.pid
        wait_until(lambda: len(acked) > 500 and any(p["numInputRows"] for p in q.recentProgress),
                   60, "records flowing", progress=lambda: (len(acked), process_cpu_s(jvm_pid)))
        target[0] = len(acked) + 3000  # the producer writes on while the leader dies
        old = cluster.leader_of(topic)
        cluster.kill(old, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of(topic) not in (old, -1), 30, "a new leader")
        n = len(acked)
        wait_until(lambda: len(acked) > n + 500, 60, "acks from the new leader",
                   progress=lambda: len(acked))
        wait_until(lambda: len(acked) >= target[0], 60, "every record acknowledged",
                   progress=lambda: len(acked))
        stop.set()
        producer.join(90)
        assert not errors, errors[:3]
        q.processAllAvailable()
        assert q.exception() is None
        got = sorted(bytes(r["value"]) for r in spark.read.parquet(str(out)).collect())
        assert got == sorted(acked)  # every acknowledged record, none twice
        batch = _read(spark, bs, subscribe=topic).select("value").collect()
        assert sorted(bytes(r["value"]) for r in batch) == sorted(acked)
    finally:
        stop.set()
        if q is not None:
            q.stop()
        cluster.stop()
