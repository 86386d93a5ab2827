"""spark/fetch_sizes.py: a range's Fetch sizes start small, double up to fetch.max.bytes, and
never ask for much more than the range has left."""

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


def test_sizes_double_from_the_first_up_to_fetch_max_bytes() -> None:
    """A batch read of a whole partition: 1, 2, 4, 8, 16, 16... MiB, the last one cut to what
    the range has left."""
    n = 70 * MIB // ROW_BYTES
    asked = _read(FetchSizes(1 * MIB, 16 * MIB), 0, n, log_end=n)
    assert asked[:7] == [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 16 * MIB, 16 * MIB]
    assert len(asked) == 8
    assert asked[-1] < 16 * MIB


def test_a_range_inside_the_log_asks_for_little_more_than_it_has_left() -> None:
    """A micro-batch's range of 125,000 offsets (16 MB) in a longer log: the Fetch after 1+2+4+8
    MiB asks for the ~1 MB left plus a margin, not 16 MiB of records the task would throw away;
    what the broker sends past ``end`` in all is within the margins."""
    end = 125_000
    asked = _read(FetchSizes(1 * MIB, 16 * MIB), 0, end, log_end=10 * end)
    assert asked[:4] == [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB]
    assert len(asked) == 5
    left = (end - sum(a // ROW_BYTES for a in asked[:4])) * ROW_BYTES
    assert left <= asked[4] <= left + left // 8 + REST_MARGIN_BYTES
    assert sum(asked) - end * ROW_BYTES < 2 * (left // 8 + REST_MARGIN_BYTES)


def test_first_fetch_never_exceeds_fetch_max_bytes() -> None:
    assert FetchSizes(1 * MIB, 100_000).ask(0, 10**9) == 100_000
    sizes = FetchSizes(16 * MIB, 16 * MIB)  # a first Fetch as large as the rest: no growth
    assert _read(sizes, 0, 300_000, log_end=300_000)[:2] == [16 * MIB, 16 * MIB]


def test_an_answer_without_progress_makes_the_next_fetch_ask_fetch_max_bytes() -> None:
    """A batch larger than the small first ask, cut by a broker instead of sent whole: the next
    Fetch asks for the whole fetch.max.bytes, where the batch fits."""
    sizes = FetchSizes(1 * MIB, 16 * MIB)
    assert sizes.ask(0, 1000) == 1 * MIB
    sizes.answered(0, 0, 0, 0)
    assert sizes.ask(0, 1000) == 16 * MIB


def test_a_guess_never_asks_less_than_one_byte() -> None:
    sizes = FetchSizes(1 * MIB, 16 * MIB)
    sizes.answered(0, 10, 0, 10)  # ten offsets in no bytes
    assert sizes.ask(10, 11) == REST_MARGIN_BYTES
    assert sizes.ask(10, 11) >= 1
