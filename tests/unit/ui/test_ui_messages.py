"""The message browser's rules (``ui.messages``) over a fake consumer client serving a log of
real v2 batches: where a page starts, how far a key search reads, control batches skipped, and
the one-line refusals of bad queries. The real-broker, real-browser test is
``tests/ui/test_browser.py``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from floodmark.client.fetch import FetchedPartition, FetchError, OffsetBounds
from floodmark.errors import ErrorCode
from floodmark.records import (
    ControlType,
    EndTxnMarker,
    Record,
    build_batch,
    build_marker_batch,
    set_base_offset,
)
from floodmark.ui.messages import BadQuery, Query, browse, parse_query


class FakeLog:
    """One partition: 20 one-record batches (key k{i % 4}, timestamp 1000 * i), then a commit
    marker at offset 20, then 5 more records (21..25)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []  # (base, next, bytes)
        for i in range(20):
            self.batches.append((i, i + 1, build_batch(
                [Record(i, 1000 * i, f"k{i % 4}".encode(), b"v%d" % i)], base_offset=i)))
        marker = bytearray(build_marker_batch(7, 0, EndTxnMarker(ControlType.COMMIT, 0),
                                              timestamp_ms=20_000))
        set_base_offset(marker, 0, 20)
        self.batches.append((20, 21, bytes(marker)))
        for i in range(21, 26):
            self.batches.append((i, i + 1, build_batch(
                [Record(i, 1000 * i, b"late", None, (("h", b"x"),))], base_offset=i)))
        self.fetches = 0

    def partitions_for(self, topic: str) -> list[int]:
        return [0] if topic == "t" else []

    def bounds(self, topic: str, partition: int) -> OffsetBounds:
        return OffsetBounds(0, 26, 26)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        return next((b for b, _n, _d in self.batches if 1000 * b >= timestamp), -1)

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int) -> Any:
        self.fetches += 1
        data = b"".join(d for _b, n, d in self.batches if n > offset)
        return FetchedPartition(0, 26, 26, 0, (), data[:max(max_bytes, 1)])


def _q(**kw: Any) -> Query:
    return Query("t", 0, **kw)


def test_newest_records_by_default_and_control_batches_skipped() -> None:
    page = browse(FakeLog(), _q(limit=10))  # type: ignore[arg-type]
    assert page["start_offset"] == 16
    assert [r["offset"] for r in page["records"]] == [16, 17, 18, 19, 21, 22, 23, 24, 25]
    assert page["next_offset"] == 26 and page["scan_complete"] is True
    late = page["records"][-1]
    assert late["value"] is None and late["key"] == base64.b64encode(b"late").decode()
    assert late["headers"] == [["h", base64.b64encode(b"x").decode()]]


def test_from_offset_and_from_timestamp() -> None:
    page = browse(FakeLog(), _q(offset=5, limit=3))  # type: ignore[arg-type]
    assert [r["offset"] for r in page["records"]] == [5, 6, 7] and page["next_offset"] == 8
    page = browse(FakeLog(), _q(timestamp_ms=12_500, limit=2))  # type: ignore[arg-type]
    assert [r["offset"] for r in page["records"]] == [13, 14]
    page = browse(FakeLog(), _q(timestamp_ms=99_000))  # type: ignore[arg-type]
    assert page["records"] == [] and page["start_offset"] == 26  # nothing that new


def test_key_search_is_bounded_and_says_where_it_stopped() -> None:
    page = browse(FakeLog(), _q(offset=0, key="k1", scan_max_records=10))  # type: ignore[arg-type]
    assert [r["offset"] for r in page["records"]] == [1, 5, 9]
    assert (page["scanned"], page["next_offset"], page["scan_complete"]) == (10, 10, False)
    page = browse(FakeLog(), _q(offset=10, key="k1"))  # type: ignore[arg-type]
    assert [r["offset"] for r in page["records"]] == [13, 17]
    assert page["scan_complete"] is True and page["scanned"] == 15


def test_unknown_partition() -> None:
    with pytest.raises(FetchError) as err:
        browse(FakeLog(), Query("nope", 0))  # type: ignore[arg-type]
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("params, words", [
    ({}, "topic is missing"),
    ({"topic": "t", "partition": "x"}, "not an integer"),
    ({"topic": "t", "offset": "-1"}, "out of range"),
    ({"topic": "t", "limit": "100000"}, "out of range"),
    ({"topic": "t", "offset": "1", "timestamp_ms": "5"}, "not both"),
    ({"topic": "t", "scan_max_records": "99999999"}, "out of range"),
])
def test_bad_queries_are_one_line(params: dict[str, str], words: str) -> None:
    with pytest.raises(BadQuery) as err:
        parse_query(params)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_query_defaults() -> None:
    q = parse_query({"topic": "t", "partition": "2", "key": "abc"})
    assert (q.partition, q.offset, q.timestamp_ms, q.limit, q.key) == (2, None, None, 50, "abc")
