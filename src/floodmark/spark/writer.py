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
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from floodmark.spark.exactly_once import ExactlyOnceCommitter, sink_id, stage
from floodmark.spark.options import parse_sink_options
from floodmark.spark.sink import ProducedCounts, produce_batches, validate_schema

log = logging.getLogger(__name__)


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
            sink_id(self.options)  # fail at start, not at the first commit, without a checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.exactly_once:
            return stage(iterator)
        return produce_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.exactly_once:
            ExactlyOnceCommitter(self.opts, self.options).commit(messages, batchId)
            return
        total = sum(m.total for m in messages if isinstance(m, ProducedCounts))
        log.info("micro-batch %d committed: %d records acknowledged", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; records already acknowledged stay (at-least-once)",
                    batchId)
