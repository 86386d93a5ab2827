"""The floodmark PySpark data source on a real local SparkSession against real brokers."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
from spark_helpers import (
    HighWatermarkCapProxy,
    Produced,
    create_topic,
    delete_topic,
    log_start_offset,
    produce,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

UTC = dt.UTC


def _reader(spark, bootstrap: str, **opts: str):  # type: ignore[no-untyped-def]
    r = spark.read.format("floodmark").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _stream(spark, bootstrap: str, **opts: str):  # type: ignore[no-untyped-def]
    r = spark.readStream.format("floodmark").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _as_tuple(row) -> tuple:  # type: ignore[no-untyped-def]
    headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                    for h in (row["headers"] or ()))
    return (row["topic"], row["partition"], row["offset"],
            None if row["key"] is None else bytes(row["key"]), bytes(row["value"]),
            row["timestamp"], row["timestampType"], headers)


def _expected(records: list[Produced]) -> list[tuple]:
    records = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    return [(r.topic, r.partition, r.offset, r.key, r.value,
             dt.datetime.fromtimestamp(r.timestamp_ms / 1000, tz=UTC).replace(tzinfo=None),
             0, r.headers) for r in records]


def _rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted((_as_tuple(r) for r in df.collect()), key=lambda t: (t[0], t[1], t[2]))


# ------------------------------------------------------------------ Tansu: protocol, not internals
def test_batch_read_and_write_against_tansu(spark, tansu, topic_name) -> None:  # type: ignore[no-untyped-def]
    """Runs against Tansu permanently: the connector speaks Kafka, not floodmark internals."""
    bs = tansu.bootstrap
    create_topic(bs, topic_name, 3)
    produced = produce(bs, topic_name, 300, partitions=3)
    df = _reader(spark, bs, subscribe=topic_name, includeHeaders="true")
    assert _rows(df) == _expected(produced)

    out_topic = topic_name + "-out"
    create_topic(bs, out_topic, 2)
    (df.selectExpr("key", "value", "headers").write.format("floodmark")
     .option("kafka.bootstrap.servers", bs).option("topic", out_topic).mode("append").save())
    back = _reader(spark, bs, subscribe=out_topic, includeHeaders="true").collect()
    assert sorted((bytes(r["value"]), r["key"] and bytes(r["key"])) for r in back) == \
        sorted((r.value, r.key) for r in produced)


# ------------------------------------------------------------------ batch reads
def test_batch_read_equals_produced(spark, broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    produced = produce(bs, topic_name, 900, partitions=3, flush_every=100)
    df = _reader(spark, bs, subscribe=topic_name, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert _rows(df) == _expected(produced)
    # without includeHeaders there is no headers column (Spark's Kafka schema)
    plain = _reader(spark, bs, subscribe=topic_name)
    assert "headers" not in plain.columns
    assert plain.count() == 900


def test_batch_offset_ranges_assign_and_pattern(spark, broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    produce(bs, topic_name, 300, partitions=3)
    rng = _reader(spark, bs, subscribe=topic_name,
                  startingOffsets=json.dumps({topic_name: {"0": 10, "1": -2, "2": 95}}),
                  endingOffsets=json.dumps({topic_name: {"0": 20, "1": 5, "2": -1}}))
    got = sorted((r["partition"], r["offset"]) for r in rng.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + \
        [(2, o) for o in range(95, 100)]

    # by time: records i have timestamp BASE + i, partition i % 3, offset i // 3
    # (Tansu 0.6 answers ListOffsets by timestamp with 0, so only on floodmark)
    if broker.kind == "floodmark":
        by_ts = _reader(spark, bs, subscribe=topic_name,
                        startingTimestamp=str(1_700_000_000_000 + 150))
        got = sorted((r["partition"], r["offset"])
                     for r in by_ts.select("partition", "offset").collect())
        assert got == sorted((i % 3, i // 3) for i in range(150, 300))

    assigned = _reader(spark, bs, assign=json.dumps({topic_name: [1]}))
    assert {r["partition"] for r in assigned.select("partition").collect()} == {1}
    assert assigned.count() == 100

    pattern = _reader(spark, bs, subscribePattern=topic_name[:6] + ".*",
                      minPartitions="6")
    assert pattern.rdd.getNumPartitions() >= 6
    assert pattern.filter(f"topic = '{topic_name}'").count() == 300


# ------------------------------------------------------------------ streaming reads
def test_available_now_respects_max_offsets_and_resumes_exactly_once(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    first = produce(bs, topic_name, 1000, partitions=3)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"

    def run() -> list[dict]:
        sdf = _stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                      maxOffsetsPerTrigger="400", includeHeaders="true")
        q = (sdf.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert q.awaitTermination(180)
        assert q.exception() is None
        return [p for p in q.recentProgress if p["numInputRows"] > 0]

    prog = run()
    sizes = [p["numInputRows"] for p in prog]
    assert sizes == [400, 400, 200]
    last_end = json.loads(prog[-1]["sources"][0]["endOffset"])
    assert last_end == {topic_name: {"0": 334, "1": 333, "2": 333}}

    second = produce(bs, topic_name, 500, partitions=3, start=1000)
    prog2 = run()
    assert [p["numInputRows"] for p in prog2] == [400, 100]
    assert json.loads(prog2[0]["sources"][0]["startOffset"]) == last_end
    assert prog2[0]["batchId"] == prog[-1]["batchId"] + 1

    got = _rows(spark.read.parquet(str(out)))
    assert got == _expected(first + second)  # every record exactly once, nothing else


def test_processing_time_trigger_picks_up_new_records(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, 50, partitions=2)  # before the query: not read (startingOffsets=latest)
    sdf = _stream(spark, bs, subscribe=topic_name)
    q = (sdf.writeStream.format("memory").queryName("pt_" + topic_name.replace("-", "_"))
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while not q.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)  # first batch fixes the starting offsets at "latest"
        later: list[Produced] = []
        table = spark.table("pt_" + topic_name.replace("-", "_"))
        for wave in range(3):
            later += produce(bs, topic_name, 40, partitions=2, start=1000 + 40 * wave)
            deadline = time.monotonic() + 60
            while table.count() < len(later) and time.monotonic() < deadline:
                time.sleep(0.2)  # the running query picks the wave up by itself
            assert table.count() == len(later)
        got = sorted(bytes(r["value"]) for r in table.select("value").collect())
        batches = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    assert got == sorted(r.value for r in later)
    assert len(batches) >= 3 and sum(batches) == 120, batches  # one or more batches per wave


def test_min_offsets_per_trigger_waits_for_enough_records(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 5, partitions=1)
    name = "mo_" + topic_name.replace("-", "_")
    q = (_stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                 minOffsetsPerTrigger="20")
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        time.sleep(4)
        assert spark.table(name).count() == 0  # 5 < 20: no batch yet
        produce(bs, topic_name, 20, partitions=1, start=5)
        deadline = time.monotonic() + 60
        while spark.table(name).count() < 25 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert spark.table(name).count() == 25
    finally:
        q.stop()


# ------------------------------------------------------------------ failOnDataLoss
def _truncate_topic(bs: str, topic: str, keep: int) -> None:
    """Delete and recreate the topic with fewer records: offsets the query read are gone."""
    delete_topic(bs, topic)
    create_topic(bs, topic, 1)
    if keep:
        produce(bs, topic, keep, partitions=1, start=10_000)


def test_fail_on_data_loss_true_fails_naming_topic_partition_offsets(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 50, partitions=1)
    ckpt = tmp_path / "ckpt"

    def run(fail: str):  # type: ignore[no-untyped-def]
        sdf = _stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                      failOnDataLoss=fail, **{"floodmark.truncationGraceMs": "500"})
        q = (sdf.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        return q

    q = run("true")
    q.awaitTermination(120)
    assert q.exception() is None
    _truncate_topic(bs, topic_name, keep=10)  # the log now ends at 10, the query read up to 50
    q = run("true")
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    msg = str(info.value)
    assert f"{topic_name}-0" in msg and "50" in msg and "10" in msg, msg
    assert "failOnDataLoss" in msg


def test_fail_on_data_loss_false_skips_with_warning(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 50, partitions=1)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"

    def run() -> list[dict]:
        sdf = _stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                      failOnDataLoss="false", **{"floodmark.truncationGraceMs": "500"})
        q = (sdf.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None
        return [p for p in q.recentProgress if p["numInputRows"] > 0]

    run()
    _truncate_topic(bs, topic_name, keep=0)
    run()  # log went back from 50 to 0: warn, continue from the new high watermark
    later = produce(bs, topic_name, 15, partitions=1, start=20_000)
    run()
    values = sorted(bytes(r["value"]) for r in spark.read.parquet(str(out)).collect())
    assert values == sorted([b"v%d" % i for i in range(50)] + [r.value for r in later])


# ------------------------------------------------------------------ writes
def test_batch_write_lands_exactly_the_rows(spark, broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    rows = [(f"k{i % 13}", f"value-{i}", i % 3 if i % 2 else None) for i in range(2000)]
    df = spark.createDataFrame(rows, "key string, value string, partition int").repartition(4)
    (df.write.format("floodmark").option("kafka.bootstrap.servers", bs)
     .option("topic", topic_name).mode("append").save())
    back = _reader(spark, bs, subscribe=topic_name).collect()
    assert len(back) == 2000
    assert sorted(bytes(r["value"]).decode() for r in back) == sorted(v for _, v, _ in rows)
    by_value = {bytes(r["value"]).decode(): r for r in back}
    for k, v, p in rows:
        assert bytes(by_value[v]["key"]).decode() == k
        if p is not None:
            assert by_value[v]["partition"] == p
    # the same key always lands in the same partition (murmur2, not Python's salted hash)
    parts_by_key: dict[bytes, set[int]] = {}
    for r, (_, _, p) in zip(sorted(back, key=lambda r: bytes(r["value"])),
                            sorted(rows, key=lambda t: t[1].encode()), strict=True):
        if p is None:
            parts_by_key.setdefault(bytes(r["key"]), set()).add(r["partition"])
    assert all(len(s) == 1 for s in parts_by_key.values())


def test_streaming_write_lands_exactly_the_rows(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    src, dst = topic_name, topic_name + "-dst"
    create_topic(bs, src, 2)
    create_topic(bs, dst, 2)
    produced = produce(bs, src, 600, partitions=2)
    q = (_stream(spark, bs, subscribe=src, startingOffsets="earliest",
                 maxOffsetsPerTrigger="250", includeHeaders="true")
         .selectExpr("key", "value", "headers")
         .writeStream.format("floodmark").option("kafka.bootstrap.servers", bs)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None
    back = _reader(spark, bs, subscribe=dst, includeHeaders="true").collect()
    got = sorted((bytes(r["value"]), r["key"] and bytes(r["key"]),
                  tuple((h["key"], h["value"] and bytes(h["value"])) for h in r["headers"]))
                 for r in back)
    assert got == sorted((r.value, r.key, r.headers) for r in produced)


# ------------------------------------------------------------------ never past the high watermark
def test_reader_never_returns_offsets_at_or_above_the_high_watermark(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The proxy reports HW=60 while the log (and every Fetch response) holds 100 records per
    partition, as a leader with a lagging follower would. Batch and streaming reads stop at 60."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, 200, partitions=2)
    proxy = HighWatermarkCapProxy(bs, cap=60)
    try:
        df = _reader(spark, proxy.bootstrap, subscribe=topic_name)
        got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
        assert got == [(p, o) for p in (0, 1) for o in range(60)]
        # asking for more than the HW still stops at the HW
        capped = _reader(spark, proxy.bootstrap, subscribe=topic_name,
                         endingOffsets=json.dumps({topic_name: {"0": 80, "1": 80}}))
        assert capped.agg({"offset": "max"}).collect()[0][0] == 59

        q = (_stream(spark, proxy.bootstrap, subscribe=topic_name, startingOffsets="earliest")
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
             .start())
        assert q.awaitTermination(120)
        offs = [r["offset"] for r in spark.read.parquet(str(tmp_path / "out")).collect()]
        assert len(offs) == 120 and max(offs) == 59
        assert proxy.fetches_capped > 0
    finally:
        proxy.close()


def test_fail_on_data_loss_when_retention_moved_the_log_start(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Retention deletes the segments a checkpointed query has not read yet: fail naming the
    offsets with failOnDataLoss=true; skip to the new log start with failOnDataLoss=false."""
    if broker.kind != "floodmark":
        pytest.skip("needs a broker with retention.bytes enforcement on a short timer")
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1, config={"segment.bytes": "2000", "retention.bytes": "4000"})
    produce(bs, topic_name, 10, partitions=1, headers=False)

    def run(fail: str, ckpt: Path):  # type: ignore[no-untyped-def]
        sdf = _stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                      failOnDataLoss=fail)
        return (sdf.writeStream.format("parquet").option("path", str(ckpt) + "-out")
                .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())

    for ckpt in (tmp_path / "strict", tmp_path / "lenient"):
        q = run("true", ckpt)
        assert q.awaitTermination(120) and q.exception() is None
    # each record is one batch (flush_every=1) of ~80 B: 2000-B segments, 4000 B retained
    produce(bs, topic_name, 300, partitions=1, start=10, headers=False, flush_every=1)
    deadline = time.monotonic() + 30
    while log_start_offset(bs, topic_name, 0) <= 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    start = log_start_offset(bs, topic_name, 0)
    assert start > 10, "retention did not move the log start"

    q = run("true", tmp_path / "strict")
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    msg = str(info.value)
    assert f"{topic_name}-0" in msg and "[10, " in msg and "failOnDataLoss" in msg, msg

    q = run("false", tmp_path / "lenient")
    assert q.awaitTermination(120) and q.exception() is None
    offs = sorted(r["offset"] for r in spark.read.parquet(str(tmp_path / "lenient") + "-out")
                  .select("offset").collect())
    assert offs[:10] == list(range(10))
    assert offs[10] >= start and offs[-1] == 309
    assert offs[10:] == list(range(offs[10], 310))  # from the new log start, nothing missing


def test_exactly_once_sink_survives_replay_and_a_half_published_batch(
        spark, broker, topic_name, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """floodmark.exactlyOnce=true: a replayed micro-batch (Spark's commit log entry lost) is not
    published twice, and a micro-batch whose publishing died half-way is completed, not
    duplicated."""
    from confluent_kafka import Producer

    from floodmark.client.fetch import FetchClient
    from floodmark.spark.exactly_once import BATCH_HEADER, SINK_HEADER, sink_id

    bs = broker.bootstrap
    src, dst = topic_name, topic_name + "-eo"
    create_topic(bs, src, 2)
    create_topic(bs, dst, 2)
    first = produce(bs, src, 600, partitions=2)
    ckpt = tmp_path / "ckpt"

    def run() -> list[dict]:
        q = (_stream(spark, bs, subscribe=src, startingOffsets="earliest",
                     maxOffsetsPerTrigger="250", includeHeaders="true")
             .selectExpr("key", "value", "headers")
             .writeStream.format("floodmark").option("kafka.bootstrap.servers", bs)
             .option("topic", dst).option("floodmark.exactlyOnce", "true")
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert q.awaitTermination(180)
        assert q.exception() is None
        return [p for p in q.recentProgress if p["numInputRows"]]

    def dst_values() -> list[bytes]:
        return sorted(bytes(r["value"]) for r in _reader(spark, bs, subscribe=dst).collect())

    prog = run()
    assert [p["numInputRows"] for p in prog] == [250, 250, 100]
    assert dst_values() == sorted(r.value for r in first)

    # 1. lose Spark's commit of the last batch: Spark replays it, the sink must skip it
    last = prog[-1]["batchId"]
    for name in (str(last), f".{last}.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    assert [p["numInputRows"] for p in run()] == [100]
    assert dst_values() == sorted(r.value for r in first)

    # 2. the next batch's publishing died after 40 of its records: intent marker + 40 records
    second = produce(bs, src, 100, partitions=2, start=600)
    sink = sink_id({"checkpointLocation": str(ckpt)})
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
    c = FetchClient(bs)
    start = {dst: {str(i): c.bounds(dst, i).high_watermark for i in (0, 1)}}
    p.produce(f"__floodmark_sink_{sink}", partition=0, value=json.dumps(
        {"state": "intent", "batch": last + 1, "start": start}).encode())
    tag = [(SINK_HEADER, sink.encode()), (BATCH_HEADER, str(last + 1).encode())]
    for r in second[:40]:
        p.produce(dst, key=r.key, value=r.value, headers=[*r.headers, *tag])
    assert p.flush(30) == 0
    assert len(dst_values()) == 640
    assert [x["numInputRows"] for x in run()] == [100]
    assert dst_values() == sorted(r.value for r in first + second)  # 700, none twice


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(
        spark, broker_factory, topic_name) -> None:  # type: ignore[no-untyped-def]
    """``kafka.isolation.level=read_committed`` (Spark's option): the reader plans up to the
    last stable offset and drops the records of aborted transactions and the markers; the
    default read_uncommitted reads up to the HW, transactional records included. The
    transactions are written by hand (``txn_helpers``), to a broker of their own."""
    from tests.compat.txn_helpers import NO_VERIFICATION, new_producer_id
    from tests.compat.txn_helpers import produce as produce_batch

    from floodmark.client.cluster import ClusterClient
    from floodmark.client.transactions import write_txn_marker

    bs = broker_factory(*NO_VERIFICATION).bootstrap
    create_topic(bs, topic_name, 1)
    with ClusterClient(bs) as client:
        aborted, committed = new_producer_id(client), new_producer_id(client)
        produce_batch(client, topic_name, 0, [b"p0"])
        produce_batch(client, topic_name, 0, [b"a0", b"a1"], producer_id=aborted,
                      producer_epoch=0, base_sequence=0, transactional=True)
        produce_batch(client, topic_name, 0, [b"p1"])

        def values(level: str) -> list[bytes]:
            df = _reader(spark, bs, subscribe=topic_name, **{"kafka.isolation.level": level})
            return [bytes(r["value"]) for r in df.orderBy("offset").collect()]

        assert values("read_committed") == [b"p0"]  # the LSO is the open transaction's start
        assert values("read_uncommitted") == [b"p0", b"a0", b"a1", b"p1"]
        write_txn_marker(client, topic_name, 0, aborted, 0, committed=False)
        produce_batch(client, topic_name, 0, [b"c0"], producer_id=committed, producer_epoch=0,
                      base_sequence=0, transactional=True)
        write_txn_marker(client, topic_name, 0, committed, 0, committed=True)
    assert values("read_committed") == [b"p0", b"p1", b"c0"]
