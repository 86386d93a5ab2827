"""KIP-932's share sessions at a leader: epochs in order, the final epoch closes, a reopened
session replaces the old one, and a full cache evicts idle sessions before refusing."""

from __future__ import annotations

from floodmark.broker.share_group.sessions import ShareSessionCache
from floodmark.errors import ErrorCode


def test_epochs_open_advance_and_close() -> None:
    cache = ShareSessionCache()
    assert cache.begin("g", "m", 1, 0).error is ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.begin("g", "m", 0, 0, acknowledging_only=True).error is \
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    opened = cache.begin("g", "m", 0, 0)
    assert opened.error is ErrorCode.NONE and not opened.closed
    assert cache.begin("g", "m", 2, 0).error is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.begin("g", "m", 1, 0).error is ErrorCode.NONE
    again = cache.begin("g", "m", 0, 0)
    assert again.closed == (opened.session,)
    final = cache.begin("g", "m", -1, 0)
    assert final.session is again.session and not cache.sessions
    assert cache.begin("g", "m", -1, 0).session is None  # nothing to close


def test_a_full_cache_evicts_idle_sessions() -> None:
    cache = ShareSessionCache(max_sessions=2, idle_ms=100)
    cache.begin("g", "a", 0, 0)
    cache.begin("g", "b", 0, 50)
    assert cache.begin("g", "c", 0, 100).error is ErrorCode.SHARE_SESSION_LIMIT_REACHED
    evicted = cache.begin("g", "c", 0, 101)
    assert evicted.error is ErrorCode.NONE
    assert [s.member_id for s in evicted.closed] == ["a"]
