"""The rows a Spark sink task produces, and how: records from Arrow batches, one idempotent
producer per task over a shared cluster client (``floodmark.client.producer``: ``acks=all``, a
producer id, per-partition sequence numbers). Used by the at-least-once writers
(``floodmark.spark.writer``) and the exactly-once publisher (``floodmark.spark.exactly_once``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from floodmark.client import ClusterClient, IdempotentProducer
from floodmark.errors import FloodmarkError
from floodmark.spark.fetcher import security_of
from floodmark.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

_CLUSTERS: dict[tuple[object, ...], ClusterClient] = {}
_LOCK = threading.Lock()

Row = tuple[str, int | None, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""(topic, partition or None, key, value, headers): one record to produce."""


class SinkWriteError(FloodmarkError):
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
    key = (opts.bootstrap_servers, opts.client_id, opts.request_timeout_ms,
           opts.security_properties)
    with _LOCK:
        c = _CLUSTERS.get(key)
        if c is None:
            c = ClusterClient(opts.bootstrap_servers, timeout_s=opts.request_timeout_ms / 1000,
                              client_id=opts.client_id,
                              security=security_of(opts.security_properties))
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
    try:
        for topic, partition, key, value, hdrs in rows:
            producer.send(topic, value, key=key, headers=(*hdrs, *extra_headers),
                          partition=partition)  # full batches go at once: a refusal may come here
            sent += 1
        counts = producer.flush()
    except OptionError:  # a row the sink cannot write (no topic): said as such
        raise
    except Exception as exc:
        raise SinkWriteError(f"{sent} records written, not all acknowledged: {exc}") from exc
    finally:  # batches already on their way when a row or the flush failed
        producer.close()
    acked = sum(counts.values())
    if acked != sent:
        raise SinkWriteError(f"sent {sent} records but {acked} were acknowledged")
    return counts


def produce_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedCounts:
    return ProducedCounts(produce_rows(new_producer(opts), rows_of(batches, opts.topic)))


