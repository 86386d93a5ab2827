"""A consumer's view of partitions: metadata, ListOffsets and Fetch, routed to partition leaders
over the one client (``ClusterClient``: every bootstrap address, one connection per broker,
retries while leaders move).

Public Kafka protocol only, so it works against any Kafka-compatible broker (the Spark connector's
tests also run it against Tansu). Versions are fixed, not negotiated: ListOffsets v4 and Fetch v11
(non-flexible; every broker since Kafka 2.3 serves them), Metadata as ``ClusterClient`` asks it.
Every ListOffsets and Fetch carries the partition's current leader epoch from Metadata (fencing:
a stale leader answers FENCED_LEADER_EPOCH instead of data).

A Fetch with a 1-byte budget is how ``bounds`` learns the high watermark: the Fetch response's
``high_watermark``, ``last_stable_offset`` and ``log_start_offset`` are the numbers every broker
must get right (some answer ListOffsets(latest) loosely).

read_committed (``isolation_level=READ_COMMITTED``): the broker returns data below the last
stable offset only, with the aborted transactions of the returned range; the reader drops the
records of those transactions and every control batch (``records.AbortedTracker``, the rule a
Kafka consumer follows, which the log cleaner shares; ``visible_records`` applies it to a whole
answer). The Spark reader uses the tracker batch by batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from floodmark.client.cluster import RETRIABLE, ClusterClient, Retriable, error_text
from floodmark.client.connection import RequestFailed
from floodmark.constants import EARLIEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from floodmark.errors import ErrorCode
from floodmark.records import (
    AbortedTracker,
    BatchHeader,
    CorruptRecordError,
    Record,
    decode_batch,
    iter_batches,
)
from floodmark.security import PLAINTEXT, ClientSecurity

API_FETCH = 1
API_LIST_OFFSETS = 2
FETCH_VERSION = 11
LIST_OFFSETS_VERSION = 4


# Answers a Fetch/ListOffsets gets while leadership moves: refresh Metadata and ask again.
RETRIABLE_CODES = frozenset(int(c) for c in RETRIABLE)  # the one list: client.cluster


class FetchError(RequestFailed):
    """A partition error the reader cannot retry away (the code is Kafka's)."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: {error_text(code)}")
        self.code = code


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of a Fetch response; ``records`` are the raw record batches."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer_id, first_offset)
    records: bytes | memoryview


@dataclass(frozen=True)
class OffsetBounds:
    """What the leader says about one partition right now."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    def end_for(self, isolation_level: int) -> int:
        """The first offset a reader must not see: the HW, or the LSO under read_committed."""
        if isolation_level == READ_COMMITTED and self.last_stable_offset >= 0:
            return min(self.high_watermark, self.last_stable_offset)
        return self.high_watermark


def visible_records(fetched: FetchedPartition, start: int, isolation_level: int) -> list[Record]:
    """The records of a Fetch answer a consumer is shown: from ``start``, below the HW (below
    the LSO under read_committed, without the aborted transactions' records), never a control
    batch. A partial batch at the end of the answer is left for the next fetch."""
    end = fetched.high_watermark
    tracker = None
    if isolation_level == READ_COMMITTED:
        if fetched.last_stable_offset >= 0:
            end = min(end, fetched.last_stable_offset)
        tracker = AbortedTracker.from_response(fetched.aborted)
    data = fetched.records
    out: list[Record] = []
    position = 0
    for position, hdr in _whole_batches(data):
        if tracker is not None and tracker.skip(hdr):
            continue
        if hdr.is_control or hdr.next_offset <= start:
            continue
        out.extend(r for r in decode_batch(data, position)[1] if start <= r.offset < end)
    return out


def _whole_batches(data: bytes | memoryview) -> Iterable[tuple[int, BatchHeader]]:
    try:
        yield from iter_batches(data)
    except CorruptRecordError:
        return  # the byte budget cut the last batch


class FetchClient:
    """Metadata, offsets and fetches of partitions, each request to the partition's leader.

    Thread-safe (one request at a time): a prefetching thread and its caller may share it."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "floodmark-spark",
                 request_timeout_ms: int = 30_000, isolation_level: int = READ_UNCOMMITTED,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.cluster = ClusterClient(bootstrap_servers, timeout_s=request_timeout_ms / 1000,
                                     client_id=client_id, security=security)
        self.request_timeout_ms = request_timeout_ms
        self.isolation_level = isolation_level
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self.cluster.close()

    # -- metadata --------------------------------------------------------------------------
    def refresh_metadata(self, topics: Iterable[str] | None) -> dict[str, list[int]]:
        """topic -> sorted partitions, for ``topics`` (None: every topic); unknown topics are
        left out."""
        with self._lock:
            meta = self.cluster.retry(lambda: self.cluster.metadata(
                None if topics is None else list(topics)))
        return {str(t.name): sorted(int(p.partition_index) for p in t.partitions)
                for t in meta.topics if int(t.error_code) == 0}

    def partitions_for(self, topic: str) -> list[int]:
        """Partitions of ``topic``; [] when the broker does not know it."""
        return self.refresh_metadata([topic]).get(topic, [])

    # -- one partition -----------------------------------------------------------------------
    def _ask_leader(self, topic: str, partition: int, api_key: int, version: int,
                    body: dict[str, Any]) -> Any:
        leader = self.cluster.leader(topic, partition)
        try:
            return self.cluster.request_node(leader, api_key, version, body)
        except RequestFailed as exc:  # the leader went away: a failover, try the new one
            raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, str(exc)) from exc

    def _epoch(self, topic: str, partition: int) -> int:
        return self.cluster.leader_epochs.get((topic, partition), -1)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets: -2 earliest, -1 latest, else the first offset whose timestamp is at least
        ``timestamp`` (-1 when no record is that new)."""

        def once() -> int:
            resp = self._ask_leader(topic, partition, API_LIST_OFFSETS, LIST_OFFSETS_VERSION, {
                "replica_id": -1, "isolation_level": self.isolation_level,
                "topics": [{"name": topic, "partitions": [{
                    "partition_index": partition,
                    "current_leader_epoch": self._epoch(topic, partition),
                    "timestamp": timestamp}]}]})
            p = resp.topics[0].partitions[0]
            self._check(int(p.error_code), f"ListOffsets {topic}-{partition}")
            return int(p.offset)

        with self._lock:
            return self.cluster.retry(once)

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
              max_wait_ms: int = 0, min_bytes: int = 1) -> FetchedPartition:
        """One Fetch of one partition. Leadership errors are retried; any other partition
        error (OFFSET_OUT_OF_RANGE...) comes back in ``error_code`` for the caller."""

        def once() -> FetchedPartition:
            resp = self._ask_leader(topic, partition, API_FETCH, FETCH_VERSION, {
                "replica_id": -1,
                # at least 1 ms: some brokers (Tansu 0.6) answer max_wait 0 with no partitions
                "max_wait": max(1, max_wait_ms), "min_bytes": min_bytes, "max_bytes": max_bytes,
                "isolation_level": self.isolation_level, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition,
                    "current_leader_epoch": self._epoch(topic, partition),
                    "fetch_offset": offset, "log_start_offset": -1,
                    "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            self._check(int(resp.error_code), f"Fetch {topic}-{partition}")
            if not resp.responses or not resp.responses[0].partitions:
                raise Retriable(ErrorCode.REQUEST_TIMED_OUT,
                                f"Fetch {topic}-{partition}: no partition in the answer")
            p = resp.responses[0].partitions[0]
            code = int(p.error_code)
            if code in RETRIABLE_CODES:
                raise Retriable(ErrorCode(code), f"Fetch {topic}-{partition}")
            aborted = tuple((int(a.producer_id), int(a.first_offset))
                            for a in (p.aborted_transactions or ()))
            return FetchedPartition(code, int(p.high_watermark), int(p.last_stable_offset),
                                    int(p.log_start_offset), aborted, p.records or b"")

        with self._lock:
            return self.cluster.retry(once)

    def bounds(self, topic: str, partition: int) -> OffsetBounds:
        """Log start offset, high watermark and LSO of one partition, from a Fetch response.

        The Fetch asks at the log start with a 1-byte budget (at most one batch comes back and
        is thrown away). An OFFSET_OUT_OF_RANGE (the log start moved between the two requests)
        asks again."""
        start = self.list_offset(topic, partition, EARLIEST_TIMESTAMP)
        for _ in range(3):
            fp = self.fetch(topic, partition, max(start, 0), max_bytes=1)
            if fp.error_code == 0:
                log_start = fp.log_start_offset if fp.log_start_offset >= 0 else start
                return OffsetBounds(log_start, fp.high_watermark, fp.last_stable_offset)
            if fp.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise FetchError(fp.error_code, f"Fetch {topic}-{partition}")
            start = self.list_offset(topic, partition, EARLIEST_TIMESTAMP)
        raise FetchError(ErrorCode.OFFSET_OUT_OF_RANGE, f"bounds of {topic}-{partition}")

    @staticmethod
    def _check(code: int, what: str) -> None:
        if code == 0:
            return
        if code in RETRIABLE_CODES:
            raise Retriable(ErrorCode(code), what)
        raise FetchError(code, what)
