"""The ``floodmark`` PySpark data source: batch and streaming reads and writes.

Which process runs what (see docs/spark.md): readers and writers are built in short-lived planner
processes and *pickled* to executors, so they hold only options and plain values; clients are
opened lazily and cached per process (``fetcher.client_for``). The streaming reader's driver-side
methods run in one long-lived Python process per query, so it may keep state between micro-batches
(the AvailableNow target, the resolved starting offsets, the maxTriggerDelay timer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from floodmark.client import FetchClient
from floodmark.spark import offsets as ofs
from floodmark.spark.fetcher import client_for, data_loss, read_range
from floodmark.spark.options import (
    OptionError,
    SourceOptions,
    one_line_errors,
    parse_sink_options,
    parse_source_options,
)
from floodmark.spark.writer import FloodmarkBatchWriter, FloodmarkStreamWriter

log = logging.getLogger(__name__)

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def spark_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE))
    return StructType(fields)


@dataclass
class OffsetRange(InputPartition):
    """One Spark task: offsets [from_offset, until_offset) of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None
) -> list[OffsetRange]:
    """Split big ranges so there are at least ``min_partitions`` tasks (Spark's minPartitions)."""
    ranges = [r for r in ranges if r.until_offset > r.from_offset]
    if not min_partitions or len(ranges) >= min_partitions or not ranges:
        return ranges
    total = sum(r.until_offset - r.from_offset for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        size = r.until_offset - r.from_offset
        pieces = max(1, round(min_partitions * size / total))
        step = -(-size // pieces)
        for lo in range(r.from_offset, r.until_offset, step):
            out.append(OffsetRange(r.topic, r.partition, lo, min(lo + step, r.until_offset)))
    return out


class _ReadsRanges:
    opts: SourceOptions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            # nothing to read: when partitions() is empty, Spark still runs one task with an
            # InputPartition(None) (pyspark's plan_data_source_read)
            assert partition.value is None, partition
            return
        yield from read_range(
            self.opts.client,
            partition.topic,
            partition.partition,
            partition.from_offset,
            partition.until_offset,
            include_headers=self.opts.include_headers,
            fail_on_data_loss=self.opts.fail_on_data_loss,
        )


class FloodmarkBatchReader(_ReadsRanges, DataSourceReader):
    """``spark.read``: startingOffsets (default earliest) to endingOffsets (default latest = HW)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = parse_source_options(options, streaming=False)

    @one_line_errors
    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        client = client_for(o.client)
        tps = ofs.discover(client, o.subscription)
        bounds = ofs.current_bounds(client, tps)
        start = ofs.resolve(client, o.starting, tps, bounds, o.client.isolation_level,
                            what="startingOffsets", timestamp_strategy=o.timestamp_strategy)
        end = ofs.resolve(client, o.ending, tps, bounds, o.client.isolation_level,
                          what="endingOffsets")
        ranges = []
        for tp in tps:
            hw = bounds[tp].end_for(o.client.isolation_level)
            if end[tp] > hw:
                log.warning("endingOffsets %d of %s-%d is above the high watermark %d; reading "
                            "only up to the high watermark", end[tp], tp.topic, tp.partition, hw)
            e = min(end[tp], hw)  # never past the high watermark
            s = ofs.check_start(tp, start[tp], bounds[tp], o.fail_on_data_loss)
            if s > hw:
                data_loss(f"startingOffsets {s} of {tp.topic}-{tp.partition} is above the high "
                          f"watermark {hw}", o.fail_on_data_loss)
                continue
            if s < e:
                ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        parts = split_ranges(ranges, o.min_partitions)
        log.info("batch read of %s: %d tasks", o.subscription, len(parts))
        return parts


class FloodmarkStreamReader(_ReadsRanges, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches of offset ranges ending at the high watermark."""

    def __init__(self, options: dict[str, str]) -> None:
        # A stream-only option mistake is raised from the first call Spark makes, not here:
        # pyspark 4.3's stream runner turns an exception from the constructor into an
        # UnboundLocalError of its own.
        self._invalid: str | None = None
        try:
            self.opts = parse_source_options(options, streaming=True)
        except OptionError as exc:
            self._invalid = str(exc)
            self.opts = parse_source_options(options, streaming=None)
        self._initial: dict[str, dict[str, int]] | None = None
        self._available_now: dict[ofs.TopicPartition, int] | None = None
        self._latest_seen: dict[str, dict[str, int]] | None = None
        self._last_trigger_ms: float | None = None

    # ---- pickling: only options travel to executors
    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_invalid": self._invalid, "_initial": None,
                "_available_now": None, "_latest_seen": None, "_last_trigger_ms": None}

    @one_line_errors
    def _check(self) -> None:
        if self._invalid is not None:
            raise OptionError(self._invalid)

    def _client(self) -> FetchClient:
        return client_for(self.opts.client)

    @one_line_errors
    def initialOffset(self) -> dict[str, dict[str, int]]:
        # Spark calls this more than once at the start of a run: resolve once and keep it.
        self._check()
        if self._initial is None:
            o = self.opts
            client = self._client()
            tps = ofs.discover(client, o.subscription)
            bounds = ofs.current_bounds(client, tps)
            start = ofs.resolve(client, o.starting, tps, bounds, o.client.isolation_level,
                                what="startingOffsets", timestamp_strategy=o.timestamp_strategy)
            self._initial = ofs.to_json(start)
            log.info("initial offsets %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        self._check()
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._check()
        o = self.opts
        client = self._client()
        tps = ofs.discover(client, o.subscription)
        bounds = ofs.current_bounds(client, tps)
        self._available_now = {tp: b.end_for(o.client.isolation_level) for tp, b in bounds.items()}
        log.info("availableNow target %s", ofs.to_json(self._available_now))

    @one_line_errors
    def latestOffset(self, start: dict[str, dict[str, int]] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, dict[str, int]]:
        self._check()
        o = self.opts
        client = self._client()
        cur = ofs.from_json(start or self.initialOffset())
        tps = ofs.discover(client, o.subscription)
        bounds = ofs.current_bounds(client, tps)
        grace_deadline = time.monotonic() + o.client.truncation_grace_ms / 1000
        while any(b.end_for(o.client.isolation_level) < cur.get(tp, -1)
                  for tp, b in bounds.items()) and time.monotonic() < grace_deadline:
            # The HW is below what we already read: a truncation, or a new leader whose HW
            # has not caught up yet. Give the HW the grace period before calling it data loss.
            time.sleep(0.2)
            bounds = ofs.current_bounds(client, tps)
        hw = {tp: b.end_for(o.client.isolation_level) for tp, b in bounds.items()}
        self._latest_seen = ofs.to_json(hw)

        for tp in cur:
            if tp not in hw:
                data_loss(f"{tp.topic}-{tp.partition} is gone (deleted topic or partition)",
                          o.fail_on_data_loss)
        latest: dict[ofs.TopicPartition, int] = {}
        for tp, end in hw.items():
            if self._available_now is not None:
                if tp not in self._available_now:
                    continue  # appeared after the availableNow target was fixed
                end = min(end, self._available_now[tp])
            if tp not in cur:
                cur[tp] = bounds[tp].log_start_offset  # new partition: from its beginning
                log.info("new partition %s-%d starts at %d", tp.topic, tp.partition, cur[tp])
            elif end < cur[tp]:
                data_loss(f"{tp.topic}-{tp.partition}'s offset went back from {cur[tp]} to the high "
                          f"watermark {end} (the log was truncated)", o.fail_on_data_loss)
                # failOnDataLoss=false: continue from the new high watermark.
            latest[tp] = end

        now_ms = time.monotonic() * 1000
        if self._last_trigger_ms is None:
            self._last_trigger_ms = now_ms
        budget_from = {tp: cur[tp] for tp in latest}
        total = sum(max(0, latest[tp] - budget_from[tp]) for tp in latest)
        if isinstance(limit, ReadMinRows):
            waited = now_ms - self._last_trigger_ms
            if total < limit.min_rows and waited < o.max_trigger_delay_ms \
                    and self._available_now is None:
                return ofs.to_json({tp: budget_from[tp] for tp in latest})
            if o.max_offsets_per_trigger is not None:
                latest = ofs.rate_limit(budget_from, latest, o.max_offsets_per_trigger)
        elif isinstance(limit, ReadMaxRows):
            latest = ofs.rate_limit(budget_from, latest, limit.max_rows)
        if any(latest[tp] != budget_from[tp] for tp in latest):
            self._last_trigger_ms = now_ms
        return ofs.to_json(latest)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return self._latest_seen

    def partitions(self, start: dict[str, dict[str, int]],
                   end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        o = self.opts
        s_map, e_map = ofs.from_json(start), ofs.from_json(end)
        client = self._client()
        ranges = []
        for tp, e in e_map.items():
            s = s_map.get(tp)
            if s is None:
                s = ofs.earliest(client, tp)
            if e <= s:
                continue
            b = client.bounds(tp.topic, tp.partition)
            s = ofs.check_start(tp, s, b, o.fail_on_data_loss)
            if e > s:
                ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        return split_ranges(ranges, o.min_partitions)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        log.info("committed %s", end)

    def stop(self) -> None:
        log.info("stream reader stopped")


class FloodmarkDataSource(DataSource):
    """``format("floodmark")``: Spark's Kafka source and sink, over the Kafka protocol."""

    @classmethod
    def name(cls) -> str:
        return "floodmark"

    def _include_headers(self) -> bool:
        v = {k.lower(): val for k, val in self.options.items()}.get("includeheaders", "false")
        return v.strip().lower() == "true"

    @one_line_errors
    def schema(self) -> StructType:
        # Spark asks for the schema at load(), for reads only: every source option is checked
        # here, so a mistake fails load() with one line (the batch- or stream-only rules are
        # checked again when the reader is made).
        parse_source_options(dict(self.options), streaming=None)
        return spark_schema(self._include_headers())

    @one_line_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        return FloodmarkBatchReader(dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FloodmarkStreamReader(dict(self.options))

    @one_line_errors
    def writer(self, schema: StructType, overwrite: bool) -> FloodmarkBatchWriter:
        parse_sink_options(dict(self.options))
        if overwrite:
            # Spark's Kafka sink: "Save mode Overwrite not allowed for Kafka"
            raise OptionError("save mode Overwrite is not allowed for a Kafka topic: records "
                              "are appended, never replaced; use .mode(\"append\")")
        return FloodmarkBatchWriter(dict(self.options), schema)

    @one_line_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> FloodmarkStreamWriter:
        # overwrite is the complete output mode here; Spark's Kafka sink accepts it (it
        # appends the whole result table every trigger), and so does this one.
        return FloodmarkStreamWriter(dict(self.options), schema)
