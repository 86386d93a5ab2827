"""``df.write`` / ``df.writeStream`` into a Kafka-protocol topic, like Spark's Kafka sink.

Rows need ``value`` (binary or string); ``key``, ``headers``, ``partition`` and ``topic`` are
optional (the ``topic`` option wins over a ``topic`` column). Each task produces with floodmark's
idempotent producer (``floodmark.client.producer``: ``acks=all``, a producer id, per-partition
sequence numbers, a resent batch keeps its sequence), waits until every record is acknowledged
and fails the task otherwise. Nothing beyond floodmark's ``[spark]`` extra is needed on executors.

Delivery guarantee: **at-least-once** by default. Within one producer session the idempotent
producer removes retry duplicates, but a Spark task that is retried, or a micro-batch replayed
after a crash between the sink writing and Spark committing the batch, writes its rows again.
Streaming writes with ``floodmark.exactlyOnce=true`` are exactly-once
(floodmark.spark.exactly_once). Key-to-partition uses Kafka's murmur2 partitioner (as Java
producers and Spark's Kafka sink do), never Python's salted ``hash()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from floodmark.client.cluster import ClusterClient
from floodmark.client.producer import IdempotentProducer
from floodmark.spark.options import OptionError, SinkOptions, parse_sink_options

log = logging.getLogger(__name__)

_CLUSTERS: dict[tuple[str, str, int], ClusterClient] = {}
_LOCK = threading.Lock()

Row = tuple[str, int | None, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""(topic, partition or None, key, value, headers): one record to produce."""


class SinkWriteError(Exception):
    """Some records of a task were not acknowledged by the broker."""


@dataclass
class ProducedCounts(WriterCommitMessage):
    """Per task: records acknowledged per (topic, partition)."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def cluster_for(opts: SinkOptions) -> ClusterClient:
    """One client (connections, metadata) per worker process and bootstrap, like the reader's."""
    key = (opts.bootstrap_servers, opts.client_id, opts.request_timeout_ms)
    with _LOCK:
        c = _CLUSTERS.get(key)
        if c is None:
            c = ClusterClient(opts.bootstrap_servers, timeout_s=opts.request_timeout_ms / 1000,
                              client_id=opts.client_id)
            _CLUSTERS[key] = c
        return c


def new_producer(opts: SinkOptions) -> IdempotentProducer:
    """A producer per task: a failed task's unsent batches never leak into the next one."""
    return IdempotentProducer(cluster_for(opts), compression=opts.compression,
                              timeout_ms=opts.flush_timeout_ms,
                              request_timeout_ms=opts.request_timeout_ms)


def validate_schema(schema: StructType, topic_option: str | None) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "value" not in names:
        raise OptionError("the data to write needs a 'value' column (binary or string)")
    for col in ("key", "value"):
        if col in names and not isinstance(names[col], BinaryType | StringType):
            raise OptionError(f"column {col!r} must be binary or string, not {names[col]}")
    if topic_option is None:
        if "topic" not in names:
            raise OptionError("topic: set the 'topic' option or give the data a 'topic' column")
        if not isinstance(names["topic"], StringType):
            raise OptionError("column 'topic' must be a string")
    if "partition" in names and not isinstance(names["partition"], IntegerType):
        raise OptionError("column 'partition' must be an int")


def as_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


def rows_of(batches: Iterable[pa.RecordBatch], topic_option: str | None) -> Iterator[Row]:
    """The records Arrow batches describe (Spark's Kafka sink columns)."""
    for rb in batches:
        cols = {n: rb.column(n).to_pylist() for n in rb.schema.names}
        n = rb.num_rows
        values = cols["value"]
        keys = cols.get("key") or [None] * n
        topics = [topic_option] * n if topic_option is not None else cols["topic"]
        parts = cols.get("partition") or [None] * n
        headers = cols.get("headers") or [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise OptionError("null topic: set the 'topic' option or fill the 'topic' column")
            hdrs = tuple((h["key"], as_bytes(h["value"])) for h in (headers[i] or ()))
            yield topic, parts[i], as_bytes(keys[i]), as_bytes(values[i]), hdrs


def produce_rows(producer: IdempotentProducer, rows: Iterable[Row],
                 extra_headers: tuple[tuple[str, bytes | None], ...] = ()) -> dict[tuple[str, int], int]:
    """Send every row and wait until all are acknowledged (acks=all); raise on any failure."""
    sent = 0
    for topic, partition, key, value, hdrs in rows:
        producer.send(topic, value, key=key, headers=(*hdrs, *extra_headers),
                      partition=partition)
        sent += 1
    try:
        counts = producer.flush()
    except Exception as exc:
        raise SinkWriteError(f"{sent} records written, not all acknowledged: {exc}") from exc
    acked = sum(counts.values())
    if acked != sent:
        raise SinkWriteError(f"sent {sent} records but {acked} were acknowledged")
    return counts


def produce_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedCounts:
    return ProducedCounts(produce_rows(new_producer(opts), rows_of(batches, opts.topic)))


class FloodmarkBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_schema(schema, self.opts.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.total for m in messages if isinstance(m, ProducedCounts))
        log.info("batch write committed: %d records acknowledged", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.total for m in messages if isinstance(m, ProducedCounts))
        log.warning("batch write aborted; %d records were already acknowledged and stay in the "
                    "topic (at-least-once)", total)


class FloodmarkStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once by default; ``floodmark.exactlyOnce=true`` publishes each micro-batch from
    the driver exactly once (see floodmark.spark.exactly_once)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_schema(schema, self.opts.topic)
        low = {k.lower(): v for k, v in options.items()}
        self.exactly_once = low.get("floodmark.exactlyonce", "false").strip().lower() == "true"
        self.options = dict(options)
        if self.exactly_once:
            from floodmark.spark.exactly_once import sink_id

            sink_id(self.options)  # fail at start, not at the first commit, without a checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.exactly_once:
            from floodmark.spark.exactly_once import stage

            return stage(iterator)
        return produce_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.exactly_once:
            from floodmark.spark.exactly_once import ExactlyOnceCommitter

            ExactlyOnceCommitter(self.opts, self.options).commit(messages, batchId)
            return
        total = sum(m.total for m in messages if isinstance(m, ProducedCounts))
        log.info("micro-batch %d committed: %d records acknowledged", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; records already acknowledged stay (at-least-once)",
                    batchId)
