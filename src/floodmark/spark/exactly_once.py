"""An exactly-once streaming sink without broker transactions (option ``floodmark.exactlyOnce=true``).

Spark calls the sink's ``commit(messages, batchId)`` once per micro-batch on the driver, after every
task succeeded; after a crash it replays the last uncommitted micro-batch with the same batchId and
(for a deterministic query) the same rows. So:

1. executors do not produce: ``write()`` returns its rows (Arrow IPC bytes) in the commit message;
2. the driver's ``commit`` publishes them, in one process, with the idempotent producer, each record
   tagged with two headers: ``floodmark.sink`` (the sink id: a hash of the checkpoint location) and
   ``floodmark.batch`` (the batchId);
3. progress lives in the broker, in a one-partition marker topic per sink
   (``__floodmark_sink_<id>``): before publishing batch B an *intent* record
   ``{"batch": B, "start": {topic: {partition: high watermark}}}``, after it a *done* record.

``commit(B)`` reads the last marker. ``done`` for B (or later): the batch is already published,
nothing to do. ``intent`` for B: a previous attempt died half-way; it scans every target partition
from the recorded high watermarks, collects the records tagged (sink, B) as a multiset of
(topic, key, value, headers), and publishes only the staged rows not in it. Otherwise it starts
fresh. Matching by content, not by position, makes the resume correct even when the replayed batch
yields its rows in another order (shuffles do not keep order); it assumes, as Spark's own
exactly-once file sink does, that a replayed micro-batch yields the same rows.

Costs and limits: every row of a micro-batch travels to the driver inside the commit messages (keep
micro-batches to what the driver's memory holds: use ``maxOffsetsPerTrigger``); one query per
checkpoint location (Spark enforces it); records carry the two extra headers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from floodmark.client import RETRIABLE, IdempotentProducer, RequestFailed, Retriable, error_text
from floodmark.errors import ErrorCode
from floodmark.spark.fetcher import ClientConfig, client_for, read_range
from floodmark.spark.options import OptionError, SinkOptions
from floodmark.spark.sink import as_bytes, cluster_for, new_producer, produce_rows

log = logging.getLogger(__name__)

SINK_HEADER = "floodmark.sink"
BATCH_HEADER = "floodmark.batch"

RowKey = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass
class StagedRows(WriterCommitMessage):
    """One task's rows, as an Arrow IPC stream."""

    ipc: bytes
    rows: int


def stage(batches: Iterator[pa.RecordBatch]) -> StagedRows:
    sink = pa.BufferOutputStream()
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    rows = 0
    for rb in batches:
        if writer is None:
            writer = pa.ipc.new_stream(sink, rb.schema)
        writer.write_batch(rb)
        rows += rb.num_rows
    if writer is None:
        return StagedRows(b"", 0)
    writer.close()
    return StagedRows(sink.getvalue().to_pybytes(), rows)


def sink_id(options: dict[str, str]) -> str:
    low = {k.lower(): v for k, v in options.items()}
    ident = low.get("floodmark.sinkid") or low.get("checkpointlocation")
    if not ident:
        raise OptionError("floodmark.exactlyOnce=true needs a checkpointLocation (it names the sink)")
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _staged_rows(messages: list[WriterCommitMessage | None], topic_opt: str | None) -> list[RowKey]:
    out: list[RowKey] = []
    for m in messages:
        if not isinstance(m, StagedRows) or not m.ipc:
            continue
        for rb in pa.ipc.open_stream(m.ipc):
            cols = {n: rb.column(n).to_pylist() for n in rb.schema.names}
            n = rb.num_rows
            topics = [topic_opt] * n if topic_opt is not None else cols["topic"]
            keys = cols.get("key") or [None] * n
            headers = cols.get("headers") or [None] * n
            for i in range(n):
                if topics[i] is None:
                    raise OptionError("null topic: set the 'topic' option or fill 'topic'")
                hdrs = tuple((h["key"], as_bytes(h["value"])) for h in (headers[i] or ()))
                out.append((topics[i], as_bytes(keys[i]), as_bytes(cols["value"][i]), hdrs))
    return out


class ExactlyOnceCommitter:
    """Runs in the driver-side process Spark starts for each micro-batch commit."""

    def __init__(self, opts: SinkOptions, options: dict[str, str]) -> None:
        self.opts = opts
        self.sink = sink_id(options)
        self.marker_topic = f"__floodmark_sink_{self.sink}"
        self.client_cfg = ClientConfig(opts.bootstrap_servers,
                                       security_properties=opts.security_properties)

    # ---- marker topic
    def _ensure_marker_topic(self) -> None:
        client = client_for(self.client_cfg)
        if client.partitions_for(self.marker_topic):
            return
        cluster = cluster_for(self.opts)

        def create() -> None:
            # replication factor -1: the cluster's default.replication.factor, so the markers
            # survive the loss of a broker like the data they describe
            resp = cluster.request_any(19, 5, {"topics": [{
                "name": self.marker_topic, "num_partitions": 1, "replication_factor": -1,
                "assignments": [], "configs": []}], "timeout": 30_000, "validate_only": False})
            code = int(resp.topics[0].error_code)
            if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                return
            if code in RETRIABLE:
                raise Retriable(ErrorCode(code), f"create {self.marker_topic}")
            raise RequestFailed(f"create {self.marker_topic}: {error_text(code)}")

        cluster.retry(create)
        deadline = time.monotonic() + 30
        while not client.partitions_for(self.marker_topic):
            if time.monotonic() > deadline:
                raise TimeoutError(f"marker topic {self.marker_topic} did not appear")
            time.sleep(0.1)

    def _last_marker(self) -> dict[str, Any] | None:
        client = client_for(self.client_cfg)
        hw = client.bounds(self.marker_topic, 0).high_watermark
        if hw == 0:
            return None
        for rb in read_range(self.client_cfg, self.marker_topic, 0, hw - 1, hw,
                             include_headers=False, fail_on_data_loss=True):
            for v in rb.column("value").to_pylist():
                return dict(json.loads(v))
        return None

    def _write_marker(self, producer: IdempotentProducer, marker: dict[str, Any]) -> None:
        producer.send(self.marker_topic, json.dumps(marker).encode(), partition=0)
        producer.flush()  # acks=all, or it raises

    # ---- what a previous attempt already published
    def _already_published(self, batch_id: int, start: dict[str, dict[str, int]]) -> Counter[RowKey]:
        client = client_for(self.client_cfg)
        tag = (self.sink.encode(), str(batch_id).encode())
        found: Counter[RowKey] = Counter()
        for topic, parts in start.items():
            for p, from_offset in parts.items():
                hw = client.bounds(topic, int(p)).high_watermark
                for rb in read_range(self.client_cfg, topic, int(p), int(from_offset), hw,
                                     include_headers=True, fail_on_data_loss=False):
                    for k, v, hs in zip(rb.column("key").to_pylist(), rb.column("value").to_pylist(),
                                        rb.column("headers").to_pylist(), strict=True):
                        hdrs = tuple((h["key"], h["value"]) for h in hs)
                        ours = dict(hdrs[-2:]) if len(hdrs) >= 2 else {}
                        if (ours.get(SINK_HEADER), ours.get(BATCH_HEADER)) == tag:
                            found[(topic, k, v, hdrs[:-2])] += 1
        return found

    def commit(self, messages: list[WriterCommitMessage | None], batch_id: int) -> int:
        """Publish the batch exactly once; returns how many records this call published."""
        self._ensure_marker_topic()
        rows = _staged_rows(messages, self.opts.topic)
        last = self._last_marker()
        if last is not None and last.get("state") == "done" and int(last["batch"]) >= batch_id:
            log.info("sink %s: micro-batch %d already published; replay skipped", self.sink,
                     batch_id)
            return 0
        client = client_for(self.client_cfg)
        producer = new_producer(self.opts)
        if last is not None and last.get("state") == "intent" and int(last["batch"]) == batch_id:
            done = self._already_published(batch_id, last["start"])
            todo = []
            for r in rows:
                if done[r] > 0:
                    done[r] -= 1
                else:
                    todo.append(r)
            log.warning("sink %s: resuming micro-batch %d: %d of %d records were already "
                        "published", self.sink, batch_id, len(rows) - len(todo), len(rows))
        else:
            topics = sorted({r[0] for r in rows})
            start = {t: {str(p): client.bounds(t, p).high_watermark
                         for p in client.partitions_for(t)} for t in topics}
            for t in topics:
                if not start[t]:
                    raise OptionError(f"topic {t} does not exist")
            self._write_marker(producer, {"state": "intent", "batch": batch_id, "start": start})
            todo = rows
        tag = ((SINK_HEADER, self.sink.encode()), (BATCH_HEADER, str(batch_id).encode()))
        produce_rows(producer, ((t, None, k, v, h) for t, k, v, h in todo), extra_headers=tag)
        self._write_marker(producer, {"state": "done", "batch": batch_id})
        log.info("sink %s: micro-batch %d published (%d records)", self.sink, batch_id, len(todo))
        return len(todo)
