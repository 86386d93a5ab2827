"""``floodmark demo``: the end-to-end pipeline on a real local cluster, with a leader SIGKILL.

1. ``LocalCluster`` (floodmark.cluster) starts a controller and 3 brokers as processes, and
   ``floodmark ui`` serves the live dashboard of that cluster (127.0.0.1:8080, or any free port)
   until the demo ends.
2. ``examples/pageviews_pipeline.py`` does the rest, as a user would: it creates the topics
   (``page-views``: 3 partitions, ``page-view-counts``: 1; RF=3, min.insync.replicas=2), produces
   page views at a steady rate (acks=all, idempotent), and runs the Spark job: readStream from
   ``page-views``, per-page counts in 10-second event-time windows with a watermark, written both
   to the topic ``page-view-counts`` and to Parquet.
3. Mid-stream, the leader of ``page-views-0`` is SIGKILLed, and restarted a few seconds later.
4. The final check, from independent sources:
   - produced: page views handed to the producer;
   - acknowledged: page views whose acks=all delivery report came back without error;
   - read: the ``page-views`` topic read back in full (Spark batch read, committed data only),
     distinct event ids, duplicates, acknowledged ids missing; and the rows each streaming query
     read (the sum of ``numInputRows`` over its micro-batches);
   - counted: the sum of the per-window counts in Parquet and in ``page-view-counts``, i.e. how
     many page views the windowed aggregation counted; and, window by window, the counts are
     compared with counts recomputed here from the acknowledged events (window, page).
   They must be equal, with no duplicates, nothing missing and nothing dropped as late.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import floodmark
from floodmark.cluster import LocalCluster
from floodmark.errors import FloodmarkError
from floodmark.progress import Bars, ProgressWatch

EXAMPLE = Path(floodmark.__file__).resolve().parents[2] / "examples" / "pageviews_pipeline.py"
WINDOW_MS = 10_000
KILL_PARTITION = 0


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def load_example() -> ModuleType:
    if not EXAMPLE.exists():
        raise SystemExit(f"{EXAMPLE} not found: run the demo from a source checkout (./dev run)")
    spec = importlib.util.spec_from_file_location("pageviews_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A wait fails only when nothing it watches has moved for this long.
STALL_S = 120.0


class Stalled(FloodmarkError, RuntimeError):
    """The demo stopped waiting because what it waited on stopped moving (one line, no traceback)."""


# Spark's driver starts a fresh Python process for each planning step of a Python data source
# and each commit of a Python sink, and waits a fixed 10 s for it to connect back (hard-coded in
# PythonWorkerFactory.createSimpleWorker). On a machine loaded many times over its cores, that
# start (importing pyspark, numpy, pyarrow) can take longer and the query fails with
# SparkException "Python worker failed to connect back." (caused by SocketTimeoutException "Timed
# out while waiting for the Python worker to connect back"). Nothing of the failed micro-batch was
# committed, so the pipeline is restarted from its checkpoints, as a job supervisor would do; any
# other failure still ends the demo.
TRANSIENT_SPARK_ERRORS = ("Python worker failed to connect back",
                          "Timed out while waiting for the Python worker to connect back")
MAX_RESTARTS = 3


def transient(exc: object) -> bool:
    """A query failure that a restart from the checkpoints recovers from (see above)."""
    return exc is not None and any(t in str(exc) for t in TRANSIENT_SPARK_ERRORS)


class _Pipeline:
    """The example's streaming queries, restartable from their checkpoints."""

    def __init__(self, example: ModuleType, spark: Any, bootstrap: str, out_dir: str) -> None:
        self.example, self.spark, self.bootstrap, self.out_dir = example, spark, bootstrap, out_dir
        self.queries: dict[str, Any] = {}
        self.restarts = 0

    def start(self) -> None:
        self.queries.update(self.example.start_pipeline(self.spark, self.bootstrap, self.out_dir,
                                                        started=_until_running))

    def failure(self) -> tuple[str, object] | None:
        """(name, exception or None) of a query that stopped, else None."""
        for name, q in self.queries.items():
            if not q.isActive:
                return name, q.exception()
        return None

    def recover(self) -> str | None:
        """Restart every query from its checkpoint when one died of a transient Spark error
        (at most MAX_RESTARTS times); return why a query stopped for good, else None."""
        failed = self.failure()
        if failed is None:
            return None
        name, exc = failed
        why = _first_line(exc) or "stopped"
        if not transient(exc) or self.restarts >= MAX_RESTARTS:
            return f"query {name} stopped: {why}"
        self.restarts += 1
        _say(f"[spark] query {name} failed ({why}); restarting the queries from their "
             f"checkpoints ({self.restarts} of at most {MAX_RESTARTS})")
        self.stop()
        self.start()
        return None

    def stop(self) -> None:
        for q in self.queries.values():
            try:
                q.stop()
            except Exception as exc:  # the JVM may already be gone on Ctrl-C
                _say(f"[cleanup] stopping query {q.name}: {exc}")


# A query's status while its sources are made: its stream reader's driver-side Python process
# starts then (Spark's StreamExecution and MicroBatchExecution set these messages).
INITIALIZING = ("Initializing StreamExecution", "Initializing sources")


def _until_running(query: Any) -> None:
    """Return once ``query``'s sources are up (its status has moved past INITIALIZING: the stream
    reader's driver-side Python process connected back) or the query has stopped, so the next
    query's process starts alone, not beside this one (see TRANSIENT_SPARK_ERRORS). Waits on
    Spark's state, not on a clock; a failed connect-back stops the query within Spark's 10 s."""
    watch = ProgressWatch(int(STALL_S * 1000), _now_ms())
    while query.isActive and query.lastProgress is None:
        message = query.status.get("message")
        if message not in INITIALIZING:
            return
        stalled = watch.observe(_now_ms(), {"status": message})
        if stalled is not None:
            raise Stalled(f"query {query.name} did not start: {stalled}")
        time.sleep(0.1)


class _Producer:
    """Runs the example's producer in a thread; counts events handed to it and keeps every
    delivery report."""

    def __init__(self, example: ModuleType, bootstrap: str, count: int, rate: float,
                 hold_at: int = -1) -> None:
        self.lock = threading.Lock()
        # The stream waits at ``hold_at`` page views until ``release`` is set (the leader kill
        # has happened): on a slow machine Spark's first micro-batch can come after the whole
        # stream would have been sent, and the kill must fall mid-stream. No time limit: the main
        # thread watches the queries' progress and sets ``release`` whenever it stops waiting.
        self.hold_at = hold_at
        self.release = threading.Event()
        self.produced = 0  # page views handed to the producer (END_OF_STREAM not included)
        self.acked: dict[int, dict[str, Any]] = {}
        self.failed: dict[int, str] = {}
        self.end_event: dict[str, Any] | None = None
        self.end_acked = False
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(example, bootstrap, count, rate),
                                       name="page-view-producer", daemon=True)

    def _counted(self, events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for event in events:
            if self.produced == self.hold_at:
                self.release.wait()
            with self.lock:
                if event["event_id"] < 0:
                    self.end_event = event
                else:
                    self.produced += 1
            yield event

    def _on_delivery(self, event: dict[str, Any], err: Any) -> None:
        with self.lock:
            if event["event_id"] < 0:
                self.end_acked = err is None
            elif err is None:
                self.acked[event["event_id"]] = event
            else:
                self.failed[event["event_id"]] = str(err)

    def _run(self, example: ModuleType, bootstrap: str, count: int, rate: float) -> None:
        try:
            example.produce(bootstrap, self._counted(example.page_views(count)), rate,
                            self._on_delivery)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.done.set()

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return self.produced, len(self.acked), len(self.failed)


class _Progress:
    """Every micro-batch's progress of every query, by batch id."""

    def __init__(self, queries: dict[str, Any], spark: Any = None) -> None:
        self.queries = queries
        self.spark = spark
        self.batches: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in queries}

    def tasks(self) -> tuple[tuple[int, ...], int]:
        """Spark's running stages and the tasks they finished: they move while a long
        micro-batch runs (on a loaded machine one can take minutes), when nothing in a
        query's progress does."""
        if self.spark is None:
            return (), 0
        tracker = self.spark.sparkContext.statusTracker()
        stages = tuple(sorted(tracker.getActiveStageIds()))
        done = 0
        for sid in stages:
            info = tracker.getStageInfo(sid)
            done += info.numCompletedTasks if info is not None else 0
        return stages, done

    def poll(self) -> None:
        for name, q in self.queries.items():
            for p in q.recentProgress:
                self.batches[name][int(p["batchId"])] = p

    def rows_read(self, name: str) -> int:
        return sum(int(p["numInputRows"]) for p in self.batches[name].values())

    def data_batches(self, name: str) -> int:
        return sum(1 for p in self.batches[name].values() if int(p["numInputRows"]) > 0)

    def dropped_late(self, name: str) -> int:
        return sum(int(op.get("numRowsDroppedByWatermark", 0))
                   for p in self.batches[name].values() for op in p.get("stateOperators", []))

    def last(self, name: str) -> dict[str, Any] | None:
        b = self.batches[name]
        return b[max(b)] if b else None


def _expected_windows(acked: dict[int, dict[str, Any]]) -> Counter[tuple[int, str]]:
    return Counter((e["ts_ms"] - e["ts_ms"] % WINDOW_MS, e["page"]) for e in acked.values())


def _leaders(cluster: LocalCluster, topic: str, partitions: int) -> str:
    status = cluster.controller_status(timeout_s=1.0)
    if status is None:
        return "controller not answering"
    parts = status["topics"].get(topic, {})
    return " ".join(f"p{p}=b{parts.get(str(p), {}).get('leader', '?')}"
                    f"(e{parts.get(str(p), {}).get('leader_epoch', '?')})" for p in range(partitions))


def _led_by(cluster: LocalCluster, broker: int) -> str:
    """The partitions `broker` leads, with their replication factor."""
    status = cluster.controller_status(timeout_s=1.0) or {"topics": {}}
    led = [f"{t}-{p} (RF={len(reg['replicas'])})" for t, parts in sorted(status["topics"].items())
           for p, reg in sorted(parts.items()) if reg.get("leader") == broker]
    return ", ".join(led) or "nothing"


def run(events: int, rate: float, keep: bool, down_s: float,
        show_progress: bool | None = None, spark_master: str = "local[2]") -> bool:
    example = load_example()
    work = Path(tempfile.mkdtemp(prefix="floodmark-pipeline-"))
    cluster = LocalCluster(work / "cluster", brokers=3)
    spark: Any = None
    pipeline: _Pipeline | None = None
    ui: Any = None

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    try:
        _say("=" * 100)
        _say(f"floodmark pipeline demo: {events} page views at {rate:.0f}/s -> Spark windowed "
             "counts -> topic + Parquet, with a leader SIGKILL")
        _say("=" * 100)
        cluster.start()
        bootstrap = cluster.bootstrap
        _say(f"[cluster] controller pid {cluster.pid(0)}; brokers "
             + ", ".join(f"{b} (pid {cluster.pid(b)}, {cluster.address(b)})"
                         for b in cluster.broker_ids))
        _say(f"[cluster] bootstrap {bootstrap}; logs in {work / 'cluster' / 'logs'}")
        from floodmark.ui import start_ui

        ui = start_ui(work / "cluster", work / "cluster" / "logs" / "ui.log")
        if ui is not None:
            _say(f"[ui] live dashboard at {ui[1]} (each replica's log, HW, LEO, ISR, epochs; up "
                 "while the demo runs)")
        example.create_topics(bootstrap)
        watch = ProgressWatch(int(STALL_S * 1000), _now_ms())
        while (led := sum(cluster.leader_of(example.EVENTS, p) >= 0 for p in range(3))) < 3:
            stalled = watch.observe(_now_ms(), {"partitions with a leader": led})
            if stalled is not None:
                raise Stalled(f"{example.EVENTS} has no leader for every partition: {stalled}")
            time.sleep(0.1)
        _say(f"[cluster] topics {example.EVENTS} (3 partitions) and {example.COUNTS} (1), RF=3, "
             f"min.insync.replicas=2; leaders {_leaders(cluster, example.EVENTS, 3)}")
        _say(f"[spark] starting a SparkSession on {spark_master} and the streaming job ...")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, like the cluster
        spark = example.spark_session(spark_master)
        if not spark_master.startswith("local"):
            _warm_up_executors(spark)
        pipeline = _Pipeline(example, spark, bootstrap, str(work / "out"))
        pipeline.start()
        _say(f"[spark] queries started: {', '.join(q.name for q in pipeline.queries.values())}; "
             f"{spark.version}, application {spark.sparkContext.applicationId}, "
             f"{time.monotonic() - started:.0f} s since start")
        progress = _Progress(pipeline.queries, spark)
        producer = _Producer(example, bootstrap, events, rate, hold_at=int(events * 0.4))
        with Bars(show_progress) as bars:
            ok = _drive(cluster, example, producer, progress, pipeline, events, down_s, bars)
        ok &= _final_check(spark, example, bootstrap, producer, progress, str(work / "out"))
        for name, batches in progress.batches.items():  # kept with --keep
            (work / "out" / f"progress-{name}.json").write_text(
                json.dumps([batches[b] for b in sorted(batches)], indent=1, default=str))
        return ok
    finally:
        cleanup_started = time.monotonic()
        signal.signal(signal.SIGTERM, previous)
        if pipeline is not None:
            pipeline.stop()
        try:
            if spark is not None:
                spark.stop()
        except Exception as exc:  # still stop the cluster
            _say(f"[cleanup] stopping Spark: {exc}")
        spark_stopped = time.monotonic()
        if ui is not None:
            from floodmark.ui import stop_ui

            stop_ui(ui[0])
        cluster.stop()
        _say(f"[cleanup] Spark stopped in {spark_stopped - cleanup_started:.0f} s, the cluster "
             f"(controller + {len(cluster.broker_ids)} brokers) in "
             f"{time.monotonic() - spark_stopped:.0f} s; demo finished in "
             f"{time.monotonic() - started:.0f} s")
        if keep:
            _say(f"[cleanup] kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _warm_up_executors(spark: Any) -> None:
    """On a cluster, wait for the executors and start their Python workers with a tiny job
    before the queries start: their JVMs and Python start-up then do not compete with the
    driver's first planning processes (see TRANSIENT_SPARK_ERRORS)."""
    t0 = time.monotonic()
    sc = spark.sparkContext
    n = max(2, sc.defaultParallelism)
    sc.parallelize(range(n), n).map(lambda x: x).count()
    _say(f"[spark] executors ready ({sc.defaultParallelism} cores) in "
         f"{time.monotonic() - t0:.0f} s")


def _drive(cluster: LocalCluster, example: ModuleType, producer: _Producer, progress: _Progress,
           pipeline: _Pipeline, events: int, down_s: float, bars: Bars) -> bool:
    """Produce, kill the leader of page-views-0 at 40 % of the stream, restart it, report:
    progress bars (produced, acknowledged, rows each query read) where ``bars`` are drawn, else
    a line every 5 s."""
    topic = example.EVENTS
    produced_bar = bars.add("produced", events)
    acked_bar = bars.add("acknowledged (acks=all)", events)
    read_bars = {name: bars.add(f"spark {name}: rows read", events) for name in progress.queries}
    producer.thread.start()
    t0 = time.monotonic()
    # No wall-clock limit: the loop runs while the producer or the queries move.
    watch = ProgressWatch(int(STALL_S * 1000), _now_ms())
    killed: int | None = None
    killed_at = 0.0
    new_leader_seen = restarted = moved_back = held = False
    last_report, last_produced, last_acked = t0, 0, 0

    def report(now: float) -> None:
        nonlocal last_report, last_produced, last_acked
        progress.poll()
        produced, acked, failed = producer.counts()
        dt = max(now - last_report, 1e-3)
        bars.update(produced_bar, produced)
        bars.update(acked_bar, acked, description=f"acknowledged (acks=all), {failed} failed")
        for name, bar in read_bars.items():
            bars.update(bar, progress.rows_read(name),
                        description=f"spark {name}: rows read, {progress.data_batches(name)} "
                                    "batches")
        last_report = now
        if bars.drawn:
            last_produced, last_acked = produced, acked
            return
        spark = ", ".join(f"{name}: {progress.data_batches(name)} batches/"
                          f"{progress.rows_read(name)} rows" for name in progress.queries)
        _say(f"[{now - t0:5.0f} s] produced {produced:>6} ({(produced - last_produced) / dt:4.0f}/s)"
             f"  acked {acked:>6} ({(acked - last_acked) / dt:4.0f}/s)  failed {failed}"
             f" | spark {spark} | leaders {_leaders(cluster, topic, 3)}")
        last_report, last_produced, last_acked = now, produced, acked

    while not producer.done.wait(0.25):
        now = time.monotonic()
        produced, acked, failed = producer.counts()
        progress.poll()
        stalled = watch.observe(_now_ms(), {"produced": produced, "acknowledged": acked,
                                            "failed": failed, **_query_motion(progress)})
        if stalled is not None:
            producer.release.set()
            raise Stalled(f"the stream stopped before the producer finished: {stalled}")
        stopped = pipeline.recover()  # a failed query never moves again: say so now
        if stopped is not None:
            producer.release.set()
            raise Stalled(f"{stopped} (mid-stream)")
        # the kill waits until both queries have processed data
        if killed is None and not held and produced >= producer.hold_at and not all(
                progress.data_batches(name) for name in progress.queries):
            held = True
            _say(f"[{now - t0:5.0f} s] holding the stream at {produced} page views until both "
                 "queries have processed data (the kill falls mid-stream)")
        if killed is None and produced >= int(events * 0.4) and all(
                progress.data_batches(name) for name in progress.queries):
            killed = cluster.leader_of(topic, KILL_PARTITION)
            if killed < 0:
                raise Stalled(f"{topic}-{KILL_PARTITION} has no leader")
            pid = cluster.pid(killed)
            led = _led_by(cluster, killed)
            cluster.kill(killed, signal.SIGKILL)
            killed_at = time.monotonic()
            producer.release.set()
            _say(f"[{killed_at - t0:5.0f} s] *** SIGKILL broker {killed} (pid {pid}), leader of "
                 f"{topic}-{KILL_PARTITION}, with {produced} page views produced ***")
            _say(f"        broker {killed} was leading: {led}")
        elif killed is not None and not new_leader_seen:
            new_leader_seen = _new_leader(cluster, topic, killed, now - t0, now - killed_at)
        if killed is not None and not restarted and now - killed_at >= down_s:
            cluster.start_node(killed)
            restarted = True
            _say(f"[{time.monotonic() - t0:5.0f} s] *** broker {killed} restarted (pid "
                 f"{cluster.pid(killed)}) after {now - killed_at:.1f} s down; it recovers its "
                 "log and catches up as a follower ***")
        elif restarted and not moved_back and cluster.leader_of(topic, KILL_PARTITION) == killed:
            moved_back = True
            reg = cluster.partition_registration(topic, KILL_PARTITION) or {}
            _say(f"[{now - t0:5.0f} s] *** broker {killed} leads {topic}-{KILL_PARTITION} again "
                 f"(preferred leader election, leader_epoch {reg.get('leader_epoch')}) ***")
        if now - last_report >= (0.5 if bars.drawn else 5.0):
            report(now)
    producer.release.set()
    if producer.error is not None:
        _say(f"producer failed: {producer.error!r}")
        return False
    if killed is None:
        _say("the stream ended before the leader kill (too few events)")
        return False
    if not new_leader_seen:  # a fast stream can end within one look of the election
        now = time.monotonic()
        _new_leader(cluster, topic, killed, now - t0, now - killed_at)
    if not restarted:
        time.sleep(max(0.0, killed_at + down_s - time.monotonic()))
        cluster.start_node(killed)
        _say(f"[{time.monotonic() - t0:5.0f} s] *** broker {killed} restarted (pid "
             f"{cluster.pid(killed)}) after the stream ended ***")
    report(time.monotonic())
    end = producer.end_event or {}
    _say(f"[{time.monotonic() - t0:5.0f} s] producer done; END_OF_STREAM (ts "
         f"{end.get('ts_ms')}) {'acknowledged' if producer.end_acked else 'NOT acknowledged'}; "
         "waiting for the watermark to close the last windows")
    last_ts_ms = max((e["ts_ms"] for e in producer.acked.values()), default=0)
    closing = {name: bars.add(f"spark {name}: watermark closes the last windows", 1)
               for name in progress.queries}
    # No wall-clock limit: wait while the queries move (watermark, batches, rows, state), fail
    # only once nothing has moved for STALL_S (a busy machine is slow, not stuck).
    watch = ProgressWatch(int(STALL_S * 1000), _now_ms())
    stalled = None
    while True:
        progress.poll()
        closed = {name: _closed(progress.last(name), last_ts_ms) for name in progress.queries}
        for name, bar in closing.items():
            bars.update(bar, int(closed[name]))
        if all(closed.values()):
            break
        if pipeline.recover() is not None:
            break
        stalled = watch.observe(_now_ms(), _query_motion(progress))
        if stalled is not None:
            break
        if time.monotonic() - last_report >= (0.5 if bars.drawn else 5.0):
            report(time.monotonic())
        time.sleep(0.5)
    if time.monotonic() - last_report >= 1.0:
        report(time.monotonic())
    ok = True
    for name, q in progress.queries.items():
        if q.exception() is not None:
            _say(f"query {name} FAILED: {_first_line(q.exception())}")
            ok = False
        elif not q.isActive:
            _say(f"query {name} stopped before the last windows closed")
            ok = False
        elif not _closed(progress.last(name), last_ts_ms):
            _say(f"query {name}: the last windows did not close: {stalled}")
            ok = False
    return ok


def _new_leader(cluster: LocalCluster, topic: str, killed: int, at_s: float,
                since_kill_s: float) -> bool:
    """Say so when another broker than ``killed`` leads the killed partition now."""
    leader = cluster.leader_of(topic, KILL_PARTITION)
    if leader in (killed, -1):
        return False
    _say(f"[{at_s:5.0f} s] *** new leader of {topic}-{KILL_PARTITION}: broker {leader}, "
         f"{since_kill_s:.1f} s after the kill ***")
    return True


def _first_line(exc: object) -> str:
    return str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _query_motion(progress: _Progress) -> dict[str, object]:
    """What moves while a query works towards closing its last windows: its watermark, its
    micro-batches, the rows it read and the rows in its state."""
    motion: dict[str, object] = {}
    for name in progress.queries:
        p = progress.last(name) or {}
        ops = p.get("stateOperators") or [{}]
        motion[f"{name} watermark"] = p.get("eventTime", {}).get("watermark", "none")
        motion[f"{name} batch"] = p.get("batchId", "none")
        motion[f"{name} rows read"] = progress.rows_read(name)
        motion[f"{name} rows in state"] = ops[0].get("numRowsTotal", 0)
        motion[f"{name} status"] = progress.queries[name].status.get("message", "")
    motion["spark stages, tasks done"] = progress.tasks()
    return motion


def _closed(p: dict[str, Any] | None, last_ts_ms: int) -> bool:
    """The watermark is past the last page view's window and only END_OF_STREAM's is in state."""
    if not p or not p.get("stateOperators") or "watermark" not in p.get("eventTime", {}):
        return False
    watermark = datetime.fromisoformat(p["eventTime"]["watermark"]).timestamp() * 1000
    in_state = int(p["stateOperators"][0]["numRowsTotal"])
    return watermark >= last_ts_ms - last_ts_ms % WINDOW_MS + WINDOW_MS and in_state <= 1


@dataclass(frozen=True)
class Observed:
    """Everything the final check compares, gathered from independent sources."""

    produced: int  # page views handed to the producer
    acked: dict[int, dict[str, Any]]  # event_id -> event, acks=all delivery reports without error
    failed: dict[int, str]  # event_id -> delivery error
    end_acked: bool  # END_OF_STREAM acknowledged
    log_ids: Counter[int]  # event_id -> records in the events topic (-1 = END_OF_STREAM)
    stream_rows: dict[str, int]  # query name -> rows read (sum of numInputRows)
    stream_batches: dict[str, int]  # query name -> micro-batches that read data
    late: dict[str, int]  # query name -> rows dropped by the watermark
    parquet: list[tuple[int, str, int]]  # (window start ms, page, views) rows in Parquet
    topic: list[tuple[int, str, int]]  # the same, from the counts topic


def assess(o: Observed, events_topic: str, counts_topic: str) -> tuple[bool, list[str]]:
    """The final check's verdict and its report lines (pure: no I/O)."""
    ids = Counter(o.log_ids)
    markers = ids.pop(-1, 0)
    log_records = sum(ids.values()) + markers
    duplicates = sum(c - 1 for c in ids.values())
    missing = sorted(set(o.acked) - set(ids))
    unacked = sorted(set(ids) - set(o.acked))
    expected = _expected_windows(o.acked)

    def windows(rows: list[tuple[int, str, int]]) -> tuple[int, bool]:
        """(sum of counts, equal to the recount from acknowledged events with each window once)"""
        got = Counter({(s, p): v for s, p, v in rows})
        once = len({(s, p) for s, p, _v in rows}) == len(rows)
        return sum(v for _s, _p, v in rows), once and got == expected

    counted_parquet, parquet_ok = windows(o.parquet)
    counted_topic, topic_ok = windows(o.topic)
    acked_n, failed_n = len(o.acked), len(o.failed)
    lines = [
        f"  produced      {o.produced:>7} page views handed to the producer (+1 END_OF_STREAM)",
        f"  acknowledged  {acked_n:>7} acks=all delivery reports without error; {failed_n} failed"
        + (f" e.g. {list(o.failed.items())[:3]}" if failed_n else "")
        + ("" if o.end_acked else "; END_OF_STREAM NOT acknowledged"),
        f"  read          {len(ids):>7} distinct page views in topic {events_topic} (batch read: "
        f"{log_records} records incl. {markers} END_OF_STREAM); duplicates {duplicates}; "
        f"acknowledged but missing {len(missing)}" + (f" e.g. {missing[:5]}" if missing else "")
        + f"; present but not acknowledged {len(unacked)}",
    ]
    for name, rows in o.stream_rows.items():
        lines.append(f"                stream {name}: {rows} rows read in "
                     f"{o.stream_batches.get(name, 0)} micro-batches; {o.late.get(name, 0)} "
                     "dropped as late")
    lines += [
        f"  counted       {counted_parquet:>7} page views = the sum of the per-window counts in "
        f"Parquet ({len(o.parquet)} (window, page) rows); {counted_topic} in topic {counts_topic} "
        f"({len(o.topic)} records)",
        f"                window by window equal to a recount of the acknowledged events: Parquet "
        f"{'yes' if parquet_ok else 'NO'}, topic {'yes' if topic_ok else 'NO'} "
        f"({len(expected)} windows expected)",
    ]
    ok = (o.produced == acked_n == len(ids) == counted_parquet == counted_topic
          and failed_n == 0 and duplicates == 0 and not missing and not unacked
          and parquet_ok and topic_ok and o.end_acked and markers == 1
          and all(v == log_records for v in o.stream_rows.values())
          and not any(o.late.values()))
    lines.append(
        f"RESULT produced={o.produced} acknowledged={acked_n} read={len(ids)} "
        f"counted_parquet={counted_parquet} counted_topic={counted_topic} "
        f"duplicates={duplicates} missing={len(missing)} late={sum(o.late.values())} "
        f"windows_match={'yes' if parquet_ok and topic_ok else 'no'}")
    lines.append("VERDICT: " + ("every acknowledged page view was read once and counted once, "
                                "through a leader SIGKILL" if ok else
                                "MISMATCH: see the lines above"))
    return ok, lines


def _final_check(spark: Any, example: ModuleType, bootstrap: str, producer: _Producer,
                 progress: _Progress, out_dir: str) -> bool:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    def topic(name: str) -> Any:
        return (spark.read.format("floodmark").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", name).load()
                .select(F.col("value").cast("string").alias("json")))

    with producer.lock:
        acked, failed = dict(producer.acked), dict(producer.failed)
    log_ids = Counter(int(r["id"]) for r in topic(example.EVENTS).select(
        F.get_json_object("json", "$.event_id").alias("id")).collect())
    try:
        parquet = [(int(r["start"]), str(r["page"]), int(r["views"])) for r in
                   spark.read.parquet(f"{out_dir}/counts-parquet").select(
                       F.unix_millis("window.start").alias("start"), "page", "views").collect()]
    except AnalysisException as exc:  # no Parquet output at all (the query never wrote)
        _say(f"Parquet output unreadable: {str(exc).splitlines()[0]}")
        parquet = []
    records = [json.loads(r["json"]) for r in topic(example.COUNTS).collect()]
    names = {key: q.name for key, q in progress.queries.items()}
    observed = Observed(
        produced=producer.produced, acked=acked, failed=failed, end_acked=producer.end_acked,
        log_ids=log_ids,
        stream_rows={names[k]: progress.rows_read(k) for k in names},
        stream_batches={names[k]: progress.data_batches(k) for k in names},
        late={names[k]: progress.dropped_late(k) for k in names},
        parquet=parquet,
        topic=[(int(v["window_start_ms"]), str(v["page"]), int(v["views"])) for v in records])
    ok, lines = assess(observed, example.EVENTS, example.COUNTS)
    _say()
    _say("=" * 100)
    _say("FINAL CHECK")
    for line in lines:
        _say(line)
    _say("=" * 100)
    return ok
