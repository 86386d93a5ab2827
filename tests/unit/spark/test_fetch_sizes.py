"""spark/fetch_sizes.py: a range's Fetches ask fetch.max.bytes, but never much more than the
range has left."""

from __future__ import annotations

from floodmark.spark.fetch_sizes import REST_MARGIN_BYTES, FetchSizes

MIB = 1024 * 1024
ROW_BYTES = 130  # bytes per offset of the answers below (100-byte values, batch overhead)


def _read(sizes: FetchSizes, start: int, end: int, log_end: int) -> list[int]:
    """The sizes asked while reading [start, end) of a log of ROW_BYTES per offset that ends at
    ``log_end`` (a broker answers whole records up to the size asked, past ``end`` too)."""
    asked = []
    offset = start
    while offset < end:
        size = sizes.ask(offset, end)
        asked.append(size)
        got = min(size // ROW_BYTES, log_end - offset)
        assert got > 0
        sizes.answered(offset, min(offset + got, end), got * ROW_BYTES, got)
        offset = min(offset + got, end)
    return asked


def test_a_whole_partition_is_read_in_answers_of_fetch_max_bytes() -> None:
    n = 70 * MIB // ROW_BYTES
    asked = _read(FetchSizes(16 * MIB), 0, n, log_end=n)
    assert asked[:4] == [16 * MIB] * 4
    assert len(asked) == 5
    assert asked[-1] < 16 * MIB  # the ~6 MiB left, and a margin


def test_a_range_inside_the_log_asks_for_little_more_than_it_has_left() -> None:
    """A range of 150,000 offsets (19.5 MB) in a longer log: after one answer of 16 MiB, the
    next asks for the ~2.7 MB left plus a margin, not 16 MiB of records the task would throw
    away."""
    end = 150_000
    asked = _read(FetchSizes(16 * MIB), 0, end, log_end=10 * end)
    assert len(asked) == 2
    left = (end - asked[0] // ROW_BYTES) * ROW_BYTES
    assert left <= asked[1] <= left + left // 8 + REST_MARGIN_BYTES


def test_an_answer_without_progress_makes_the_next_fetch_ask_fetch_max_bytes() -> None:
    """A batch larger than the guess, cut by a broker instead of sent whole: the next Fetch asks
    for the whole fetch.max.bytes, where the batch fits; the guess comes back after progress."""
    sizes = FetchSizes(16 * MIB)
    sizes.answered(0, 1000, 1000 * ROW_BYTES, 1000)
    assert sizes.ask(1000, 1010) == 10 * ROW_BYTES + REST_MARGIN_BYTES + 10 * ROW_BYTES // 8
    sizes.answered(1000, 1000, 0, 0)
    assert sizes.ask(1000, 1010) == 16 * MIB
    sizes.answered(1000, 1005, 5 * ROW_BYTES, 5)
    assert sizes.ask(1005, 1010) < 16 * MIB


def test_a_guess_is_never_above_fetch_max_bytes_nor_below_one_byte() -> None:
    sizes = FetchSizes(100_000)
    assert sizes.ask(0, 10**9) == 100_000
    sizes.answered(0, 10, 1_000_000, 10)
    assert sizes.ask(10, 10**9) == 100_000
    empty = FetchSizes(16 * MIB)
    empty.answered(0, 10, 0, 10)  # ten offsets in no bytes
    assert empty.ask(10, 11) == REST_MARGIN_BYTES
