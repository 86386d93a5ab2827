"""How many bytes each Fetch of one offset range asks for (pure rules, no I/O).

A Spark task reads one range ``[start, end)`` of one partition. Its first Fetch is small, so the
first rows reach Spark early (Spark's JVM takes in one Arrow batch while the next Fetch is in
flight); each later Fetch asks twice as much, up to ``kafka.fetch.max.bytes``, so a long range
(a batch read) still pays few requests. No Fetch asks for much more than the range has left: the
bytes per offset of the answers so far, times the offsets left, plus a margin, so a range that
ends inside the log does not make the broker read and send up to ``fetch.max.bytes`` of records
past ``end`` that the task throws away (the bytes per offset are those of the complete record
batches seen, so a batch cut at the end of an answer does not inflate them). The guess only lowers a Fetch's size: when it falls
short, one more (small) Fetch follows. An answer that made no progress (a batch larger than what
was asked, from a broker that cuts it instead of sending it whole as KIP-74 says) makes the next
Fetch ask the full ``fetch.max.bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_FETCH_BYTES = 1024 * 1024
"""The first Fetch of a range: 1 MiB, what Kafka's consumer asks per partition
(``max.partition.fetch.bytes``), so about half of one Arrow slice handed to Spark
(``fetcher.ARROW_BATCH_BYTES``)."""

REST_MARGIN_BYTES = 64 * 1024
"""Added to the guess of the bytes a range has left (batch headers, a batch that straddles
``end``): a short guess costs one more Fetch, a long one only bytes."""


@dataclass
class FetchSizes:
    """The size of each Fetch of one range: ``ask`` before sending, ``answered`` after."""

    first_bytes: int
    max_bytes: int
    _next_bytes: int = 0
    _seen_bytes: int = 0
    _seen_offsets: int = 0

    def __post_init__(self) -> None:
        assert self.first_bytes > 0 and self.max_bytes > 0, (self.first_bytes, self.max_bytes)
        self._next_bytes = min(self.first_bytes, self.max_bytes)

    def ask(self, offset: int, end: int) -> int:
        """Bytes for the Fetch at ``offset`` of a range that ends at ``end``."""
        assert offset < end, (offset, end)
        size = self._next_bytes
        if self._seen_offsets > 0:
            rest = -(-(end - offset) * self._seen_bytes // self._seen_offsets)
            size = min(size, rest + rest // 8 + REST_MARGIN_BYTES)
        return max(1, size)

    def answered(self, offset: int, next_offset: int, batch_bytes: int, batch_offsets: int) -> None:
        """The answer to the Fetch at ``offset`` took the range to ``next_offset``; its complete
        batches that reach past ``offset`` hold ``batch_bytes`` and span ``batch_offsets``
        offsets (what the guess of the bytes left is made of)."""
        if next_offset <= offset:
            self._next_bytes = self.max_bytes
            return
        self._seen_bytes += batch_bytes
        self._seen_offsets += batch_offsets
        self._next_bytes = min(self.max_bytes, self._next_bytes * 2)
