"""Trace T16: the epoch cache table (existing floodmark.replication.epochs) and KIP-101's rule."""

from __future__ import annotations

import pytest

from floodmark.replication.epochs import UNDEFINED, EpochCache, EpochEndOffset


@pytest.mark.parametrize(
    ("requested", "expected"),
    [(3, (3, 31)), (2, (1, 21)), (1, (1, 21)), (0, (0, 0)), (4, (-1, -1)), (-1, (-1, -1))],
)
def test_end_offset_for_table(requested: int, expected: tuple[int, int]) -> None:
    cache = EpochCache([(1, 0), (3, 21)])
    assert cache.end_offset_for(requested, 31) == EpochEndOffset(*expected)


def test_end_offset_for_empty_cache_is_undefined() -> None:
    assert EpochCache().end_offset_for(0, 10) == UNDEFINED


@pytest.mark.parametrize(
    ("epoch", "offset", "after"),
    [
        (3, 7, [[0, 0], [2, 5], [3, 7]]),
        (4, 8, [[0, 0], [2, 5], [4, 8]]),
        (6, 9, [[0, 0], [2, 5], [6, 9]]),  # epoch 4 never got a record: replaced
        (4, 9, [[0, 0], [2, 5], [4, 9]]),  # no-op: latest epoch, same start
        (4, 12, [[0, 0], [2, 5], [4, 9]]),  # no-op: latest epoch, later offset
    ],
)
def test_assign_examples(epoch: int, offset: int, after: list[list[int]]) -> None:
    cache = EpochCache([(0, 0), (2, 5), (4, 9)])
    cache.assign(epoch, offset)
    assert cache.as_pairs() == after


def test_truncate_from_end_and_start() -> None:
    cache = EpochCache([(1, 0), (3, 21)])
    cache.truncate_from_end(21)
    assert cache.as_pairs() == [[1, 0]]
    cache = EpochCache([(1, 0), (3, 21)])
    cache.truncate_from_start(5)
    assert cache.as_pairs() == [[1, 5], [3, 21]]
    cache = EpochCache([(1, 0), (3, 21)])
    cache.truncate_from_start(21)
    assert cache.as_pairs() == [[3, 21]]


def test_kip101_rule_answers_offsets_only() -> None:
    cache = EpochCache([(1, 0), (3, 21)])
    assert cache.end_offset_for_kip101(3, 31) == 31
    assert cache.end_offset_for_kip101(2, 31) == 21  # start of the first epoch above it
    assert cache.end_offset_for_kip101(0, 31) == -1  # below the first epoch: undefined in 0.11
    assert cache.end_offset_for_kip101(4, 31) == -1


def test_entries_must_increase() -> None:
    with pytest.raises(ValueError):
        EpochCache([(3, 5), (2, 7)])
    with pytest.raises(ValueError):
        EpochCache([(1, 5), (2, 4)])
