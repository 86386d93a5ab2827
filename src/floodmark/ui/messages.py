"""The dashboard's message browser: the records of one partition, read as a consumer reads them.

``GET /api/messages?topic=T&partition=P`` with one of ``offset=N`` (from that offset),
``timestamp_ms=TS`` (from the first record at least that new: ListOffsets by timestamp) or
neither (the newest ``limit`` records); ``limit`` records at most; ``key=TEXT`` keeps only the
records whose key contains TEXT (UTF-8). A key search reads at most ``scan_max_records``
records (``SCAN_MAX_RECORDS``, or fewer if the query asks) from the start offset and says where it stopped (``next_offset``, ``scan_complete``):
it is a bounded scan, not an index.

Reads go through the project's client (``client.fetch.FetchClient``: Metadata, ListOffsets and
Fetch to the partition's leader, with its leader epoch), read_uncommitted, below the high
watermark; control batches (transaction markers) are skipped, as a consumer skips them. Keys,
values and header values travel as base64 (any bytes); the page renders them as text, JSON or
hex.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from floodmark.client import FetchClient, FetchError, visible_records
from floodmark.constants import READ_UNCOMMITTED
from floodmark.errors import ErrorCode, FloodmarkError
from floodmark.records import CorruptRecordError, Record, iter_batches

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
SCAN_MAX_RECORDS = 10_000  # a key search reads at most this many records per request
FETCH_MAX_BYTES = 1 << 20
MAX_FETCHES = 64  # per request, whatever the batches hold (bounds a scan of huge records)


class BadQuery(FloodmarkError, ValueError):
    """A browser query the page (or a user's URL) got wrong: said in one line."""


@dataclass(frozen=True)
class Query:
    topic: str
    partition: int
    offset: int | None = None
    timestamp_ms: int | None = None
    limit: int = DEFAULT_LIMIT
    key: str | None = None
    scan_max_records: int = SCAN_MAX_RECORDS


def _int(params: dict[str, str], name: str, low: int, high: int | None = None) -> int | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise BadQuery(f"{name}={text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        raise BadQuery(f"{name}={value} is out of range ({low}..{high if high is not None else ''})")
    return value


def parse_query(params: dict[str, str]) -> Query:
    """The query string of ``GET /api/messages``; BadQuery names what is wrong."""
    topic = params.get("topic", "")
    if not topic:
        raise BadQuery("topic is missing")
    partition = _int(params, "partition", 0)
    offset = _int(params, "offset", 0)
    timestamp_ms = _int(params, "timestamp_ms", 0)
    if offset is not None and timestamp_ms is not None:
        raise BadQuery("give offset or timestamp_ms, not both")
    limit = _int(params, "limit", 1, MAX_LIMIT)
    key = params.get("key") or None
    scan = _int(params, "scan_max_records", 1, SCAN_MAX_RECORDS)  # a smaller bound only
    return Query(topic, partition or 0, offset, timestamp_ms,
                 DEFAULT_LIMIT if limit is None else limit, key,
                 SCAN_MAX_RECORDS if scan is None else scan)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_json(r: Record) -> dict[str, Any]:
    return {"offset": r.offset, "timestamp_ms": r.timestamp_ms, "key": _b64(r.key),
            "value": _b64(r.value), "headers": [[k, _b64(v)] for k, v in r.headers]}


def _end_of_batches(data: bytes | memoryview) -> int | None:
    """The next offset after the last whole batch of a Fetch answer (None: no whole batch)."""
    end = None
    try:
        for _pos, hdr in iter_batches(data):
            end = hdr.next_offset
    except CorruptRecordError:
        pass  # the byte budget cut the last batch
    return end


def browse(client: FetchClient, q: Query) -> dict[str, Any]:
    """One page of records (see the module doc). FetchError: the partition cannot be read
    (UNKNOWN_TOPIC_OR_PARTITION when there is no such partition)."""
    if q.partition not in client.partitions_for(q.topic):
        raise FetchError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{q.topic}-{q.partition}")
    bounds = client.bounds(q.topic, q.partition)
    log_start, hw = bounds.log_start_offset, bounds.high_watermark
    if q.timestamp_ms is not None:
        found = client.list_offset(q.topic, q.partition, q.timestamp_ms)
        start = hw if found < 0 else found  # no record that new: nothing to show
    elif q.offset is not None:
        start = q.offset
    else:
        start = hw - q.limit
    start = min(max(start, log_start), hw)
    key = q.key.encode() if q.key is not None else None
    records: list[dict[str, Any]] = []
    position, scanned, fetches = start, 0, 0
    while position < hw and len(records) < q.limit and fetches < MAX_FETCHES:
        if key is not None and scanned >= q.scan_max_records:
            break
        fetches += 1
        fetched = client.fetch(q.topic, q.partition, position, max_bytes=FETCH_MAX_BYTES)
        if fetched.error_code:
            raise FetchError(fetched.error_code, f"Fetch {q.topic}-{q.partition}@{position}")
        end = _end_of_batches(fetched.records)
        if end is None:
            break  # nothing whole came back (a record larger than the budget): stop here
        stopped = False
        for r in visible_records(fetched, position, READ_UNCOMMITTED):
            scanned += 1
            if key is None or (r.key is not None and key in r.key):
                records.append(record_json(r))
            if len(records) >= q.limit or (key is not None and scanned >= q.scan_max_records):
                position, stopped = r.offset + 1, True
                break
        if not stopped:
            position = max(position, min(end, hw))
    return {"topic": q.topic, "partition": q.partition, "log_start_offset": log_start,
            "high_watermark": hw, "start_offset": start, "next_offset": position,
            "limit": q.limit, "key": q.key, "timestamp_ms": q.timestamp_ms,
            "scanned": scanned, "scan_max_records": q.scan_max_records if key else None,
            "scan_complete": position >= hw, "records": records}
