"""How many bytes each Fetch of one offset range asks for (pure rules, no I/O).

A Spark task reads one range ``[start, end)`` of one partition. Each Fetch asks
``kafka.fetch.max.bytes``, but never much more than the range has left: the bytes per offset of
the complete record batches seen so far, times the offsets left, plus a margin. So a range that
ends inside the log (a streaming micro-batch capped by ``maxOffsetsPerTrigger``, a range split by
``minPartitions``) does not make the broker read and send up to ``fetch.max.bytes`` of records
past ``end`` that the task throws away. The guess only lowers a Fetch's size: when it falls
short, one more (small) Fetch follows. An answer that made no progress (a batch larger than the
guess, from a broker that cuts it instead of sending it whole as KIP-74 says) makes the next
Fetch ask the whole ``fetch.max.bytes``.

Tried and dropped (issue 27): a first Fetch of 1 MiB and each later one twice as large, up to
``fetch.max.bytes``. It brought a streaming task's first rows forward (median 33-54 ms after the
task's start against 206-268 ms with one 16 MiB answer) but not its end: over ten rounds side by
side the tasks took as long or longer, and the micro-batches were slower in 6 of 10 rounds
(docs/spark.md, "Streaming against the JVM connector").
"""

from __future__ import annotations

from dataclasses import dataclass

REST_MARGIN_BYTES = 64 * 1024
"""Added to the guess of the bytes a range has left (batch headers, a batch that straddles
``end``): a short guess costs one more Fetch, a long one only bytes."""


@dataclass
class FetchSizes:
    """The size of each Fetch of one range: ``ask`` before sending, ``answered`` after."""

    max_bytes: int
    _seen_bytes: int = 0
    _seen_offsets: int = 0
    _guess: bool = True

    def __post_init__(self) -> None:
        assert self.max_bytes > 0, self.max_bytes

    def ask(self, offset: int, end: int) -> int:
        """Bytes for the Fetch at ``offset`` of a range that ends at ``end``."""
        assert offset < end, (offset, end)
        if not self._guess or self._seen_offsets == 0:
            return self.max_bytes
        rest = -(-(end - offset) * self._seen_bytes // self._seen_offsets)
        return max(1, min(self.max_bytes, rest + rest // 8 + REST_MARGIN_BYTES))

    def answered(self, offset: int, next_offset: int, batch_bytes: int, batch_offsets: int) -> None:
        """The answer to the Fetch at ``offset`` took the range to ``next_offset``; its complete
        batches that reach past ``offset`` hold ``batch_bytes`` and span ``batch_offsets``
        offsets (what the guess of the bytes left is made of)."""
        if next_offset <= offset:
            self._guess = False  # no progress: the next Fetch asks fetch.max.bytes
            return
        self._guess = True
        self._seen_bytes += batch_bytes
        self._seen_offsets += batch_offsets
