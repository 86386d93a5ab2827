"""Executor side: read one offset range [start, end) of one partition as Arrow record batches.

``end`` was chosen by the driver at or below the high watermark (or LSO under read_committed), so
nothing at or above the HW of planning time is ever returned; on top of that every fetch response's
own HW caps what is kept, so even a broker whose HW moved backwards (truncation after an unclean
election) cannot make the reader return an offset it does not vouch for.

Clients are cached per Python worker process (Spark reuses workers), keyed by the connection
options, like Spark's Kafka consumer pool.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa

from floodmark.client import FetchClient, FetchedPartition, FetchError
from floodmark.constants import READ_COMMITTED
from floodmark.errors import ErrorCode, FloodmarkError
from floodmark.security import ClientSecurity
from floodmark.spark.decode import BATCH_HEADER_BYTES, batches_in_range, visible_rows
from floodmark.spark.fetch_sizes import FetchSizes
from floodmark.spark.heap import keep_freed_memory

log = logging.getLogger(__name__)

_CLIENTS: dict[tuple[object, ...], FetchClient] = {}
_LOCK = threading.Lock()

SecurityProperties = tuple[tuple[str, str], ...]
"""``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*`` (prefix stripped), sorted:
what ``ClientSecurity.from_properties`` reads, in a picklable, hashable form."""


@functools.cache
def security_of(properties: SecurityProperties) -> ClientSecurity:
    """The client security of ``properties``, built once per process (its TLS context too).
    ValueError: one line, never a secret."""
    return ClientSecurity.from_properties(dict(properties))


FETCH_MAX_BYTES = 16 * 1024 * 1024
"""The default of ``kafka.fetch.max.bytes``: the bytes one Fetch answer (one partition) may
carry (decoded once, handed to Spark in slices: ``arrow_slices``). Kafka's consumer allows
50 MiB per Fetch (``fetch.max.bytes``). 16 MiB rather than 2 MiB: eight times fewer Fetch requests, and so less
CPU in the reader (its per-request work) and in the broker (per 1,000,000 rows of 100 B, reader
0.158 -> 0.133 s, broker 0.090 -> 0.030 s; docs/spark.md, "Performance"), at the price of up to
two answers (the one decoded, the one prefetched) and one decoded batch of that size in memory
per task. Streaming reads default to ``STREAM_FETCH_MAX_BYTES`` instead."""

STREAM_FETCH_MAX_BYTES = 2 * 1024 * 1024
"""The default of ``kafka.fetch.max.bytes`` in a streaming query: 2 MiB answers, one Arrow slice
each (``ARROW_BATCH_BYTES``), the next one fetched while Spark takes in the current one. Against
16 MiB answers, side by side (issue 27, docs/spark.md, "Streaming against the JVM connector"): a
small gain under load (load 12-23: micro-batches 0.88, 0.88, 1.03 of the streaming ceiling
against 0.82, 0.79, 0.86), none at load 4-5 (0.96 against 0.99), for a little more CPU."""


@dataclass(frozen=True)
class ClientConfig:
    """What a worker needs to open a client (picklable, hashable)."""

    bootstrap_servers: str
    client_id: str = "floodmark-spark"
    request_timeout_ms: int = 30_000
    isolation_level: int = 0
    fetch_max_bytes: int = FETCH_MAX_BYTES
    max_wait_ms: int = 500
    poll_timeout_ms: int = 120_000
    truncation_grace_ms: int = 10_000
    check_crcs: bool = True
    """Kafka's ``check.crcs`` (default true, as in Kafka's consumer and so in Spark's Kafka
    source): every record batch read is checked against its CRC-32C before it is decoded."""
    security_properties: SecurityProperties = field(default=(), repr=False)
    """TLS / SASL settings (passwords among them: never in a repr)."""


ARROW_BATCH_BYTES = 2 * 1024 * 1024
"""About how many bytes of rows each Arrow batch handed to Spark carries: a Fetch answer of
``fetch.max.bytes`` is decoded once and yielded in slices of this size (zero-copy views), so
Spark's JVM takes in one slice while the Python worker sends the next, as it did with 2 MiB
answers."""


def arrow_slices(rb: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """``rb`` in consecutive slices of about ``ARROW_BATCH_BYTES`` (views, no copy)."""
    pieces = -(-rb.nbytes // ARROW_BATCH_BYTES)
    if pieces <= 1:
        yield rb
        return
    rows = -(-rb.num_rows // pieces)
    for first in range(0, rb.num_rows, rows):
        yield rb.slice(first, rows)


def client_for(cfg: ClientConfig) -> FetchClient:
    key = (cfg.bootstrap_servers, cfg.client_id, cfg.request_timeout_ms, cfg.isolation_level,
           cfg.security_properties)
    with _LOCK:
        c = _CLIENTS.get(key)
        if c is None:
            c = FetchClient(cfg.bootstrap_servers, client_id=cfg.client_id,
                            request_timeout_ms=cfg.request_timeout_ms,
                            isolation_level=cfg.isolation_level,
                            security=security_of(cfg.security_properties))
            _CLIENTS[key] = c
        return c


class DataLossError(FloodmarkError):
    """Data the query expected is gone (retention moved the log start, or a truncation)."""


def data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Spark Kafka source semantics: raise when failOnDataLoss, otherwise log a warning."""
    if fail_on_data_loss:
        raise DataLossError(
            message + ". Some data may have been lost because they are not available in the broker "
            "any more; either the data was aged out by the broker or the topic was truncated "
            "(e.g. after an unclean leader election). If you want your query to continue "
            "anyway, set the source option 'failOnDataLoss' to 'false'.")
    log.warning("%s. Some data may have been lost; continuing because failOnDataLoss=false",
                message)


def read_range(
    cfg: ClientConfig,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches with every record at offsets [start, end) that the broker still has.

    The next Fetch is sent (on a helper thread) before the current response is decoded, so the
    network wait overlaps the decoding and Spark's taking in of the current answer's rows. No
    Fetch asks for much more than the range has left (``fetch_sizes``).
    """
    keep_freed_memory()  # the decoder's buffers reuse freed pages (spark/heap.py)
    client = client_for(cfg)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fetch-{topic}-{partition}")
    sizes = FetchSizes(cfg.fetch_max_bytes)

    def fetch_at(off: int) -> Future[FetchedPartition]:
        return pool.submit(client.fetch, topic, partition, off, max_bytes=sizes.ask(off, end),
                           max_wait_ms=cfg.max_wait_ms)

    try:
        yield from _read_range(client, cfg, topic, partition, start, end, fetch_at, sizes,
                               include_headers=include_headers,
                               fail_on_data_loss=fail_on_data_loss)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_range(
    client: FetchClient,
    cfg: ClientConfig,
    topic: str,
    partition: int,
    start: int,
    end: int,
    fetch_at: Callable[[int], Future[FetchedPartition]],
    sizes: FetchSizes,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    offset = start
    deadline = time.monotonic() + cfg.poll_timeout_ms / 1000
    grace_deadline = time.monotonic() + cfg.truncation_grace_ms / 1000
    read_committed = cfg.isolation_level == READ_COMMITTED
    future: Future[FetchedPartition] | None = None
    while offset < end:
        fp = (future or fetch_at(offset)).result()
        future = None
        if fp.error_code == int(ErrorCode.OFFSET_OUT_OF_RANGE):
            bounds = client.bounds(topic, partition)
            if offset < bounds.log_start_offset:
                data_loss(f"Cannot fetch offset {offset} of {topic}-{partition}: the log now "
                          f"starts at {bounds.log_start_offset} (requested range [{start}, {end}))",
                          fail_on_data_loss)
                offset = bounds.log_start_offset
                continue
            data_loss(f"Offsets [{offset}, {end}) of {topic}-{partition} are gone: the high "
                      f"watermark is now {bounds.high_watermark} (truncated)", fail_on_data_loss)
            return
        if fp.error_code != int(ErrorCode.NONE):
            raise FetchError(fp.error_code, f"Fetch {topic}-{partition} at {offset}")
        if offset < fp.log_start_offset:
            data_loss(f"Offset {offset} of {topic}-{partition} is below the log start offset "
                      f"{fp.log_start_offset} (requested range [{start}, {end}))",
                      fail_on_data_loss)
        limit = min(end, fp.high_watermark)
        if read_committed and fp.last_stable_offset >= 0:
            limit = min(limit, fp.last_stable_offset)
        if limit <= offset:
            # Nothing committed at `offset` although the driver planned up to `end`: either the
            # HW of a new leader has not caught up yet (wait), or the log was truncated below the
            # planned end (data loss). Wait `truncation_grace_ms` before calling it a loss.
            if time.monotonic() > grace_deadline:
                data_loss(f"Offsets [{offset}, {end}) of {topic}-{partition} are gone: the high "
                          f"watermark is now {fp.high_watermark}", fail_on_data_loss)
                return
            time.sleep(0.05)
            continue
        grace_deadline = time.monotonic() + cfg.truncation_grace_ms / 1000

        # Headers only: which batches to decode and where the next fetch starts.
        batches, next_offset = batches_in_range(fp.records, offset, limit)
        reaching = [(hdr, body) for hdr, body in batches if hdr.next_offset > offset]
        sizes.answered(offset, next_offset,
                       sum(BATCH_HEADER_BYTES + len(body) for _, body in reaching),
                       sum(hdr.next_offset - hdr.base_offset for hdr, _ in reaching))
        if next_offset < end and next_offset > offset:
            future = fetch_at(next_offset)  # prefetch while we decode
        rb = visible_rows(batches, fp.aborted, read_committed=read_committed,
                          check_crcs=cfg.check_crcs, topic=topic, partition=partition,
                          start=offset, end=limit, include_headers=include_headers)
        if rb is not None and rb.num_rows:
            yield from arrow_slices(rb)

        if next_offset > offset:
            offset = next_offset
            deadline = time.monotonic() + cfg.poll_timeout_ms / 1000
            continue
        if len(fp.records) >= cfg.fetch_max_bytes:
            raise FetchError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"{topic}-{partition}: a batch at {offset} exceeds "
                             f"fetch.max.bytes={cfg.fetch_max_bytes}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-{partition}: no data at offset {offset} although the "
                               f"high watermark is {fp.high_watermark} "
                               f"(kafkaConsumer.pollTimeoutMs={cfg.poll_timeout_ms})")
        time.sleep(0.01)
