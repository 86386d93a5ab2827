"""KIP-227 fetch sessions, the pure rules (``broker/fetch_sessions.py``)."""

from __future__ import annotations

import random
import uuid

from floodmark.broker.fetch_sessions import (
    ContextKind,
    FetchParams,
    FetchSessionCache,
    next_epoch,
)
from floodmark.errors import ErrorCode
from floodmark.wire.hot import FetchPartitionResult


def p(index: int, offset: int = 0) -> FetchParams:
    return FetchParams(index, offset, 1 << 20)


def result(index: int, hw: int = 10, records: bytes = b"", error: int = 0) -> FetchPartitionResult:
    return FetchPartitionResult(index, error, hw, hw, 0, records)


def answer_of(ctx, **overrides):  # type: ignore[no-untyped-def]
    """Everything in the plan answered with HW 10 and no records, unless overridden by index."""
    return [(key, [overrides.get(f"p{q.partition}", result(q.partition)) for q in parts])
            for key, parts in ctx.plan]


def full_session(cache: FetchSessionCache, n: int = 3, topic: str = "t", now_ms: int = 0):  # type: ignore[no-untyped-def]
    ctx = cache.new_context(0, 0, [(topic, [p(i) for i in range(n)])], [],
                            uses_topic_ids=False, privileged=False, now_ms=now_ms)
    assert ctx.kind is ContextKind.FULL
    session_id, topics = ctx.finish(answer_of(ctx), now_ms)
    assert session_id != 0 and sum(len(ps) for _, ps in topics) == n  # full: every partition
    return session_id


def test_epochs_wrap_and_final_stays_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_no_session_and_closing() -> None:
    cache = FetchSessionCache()
    ctx = cache.new_context(0, -1, [("t", [p(0)])], [], uses_topic_ids=False, privileged=False,
                            now_ms=0)
    assert ctx.kind is ContextKind.SESSIONLESS and ctx.finish(answer_of(ctx), 0)[0] == 0
    sid = full_session(cache)
    ctx = cache.new_context(sid, -1, [("t", [p(0)])], [], uses_topic_ids=False,
                            privileged=False, now_ms=1)
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0


def test_incremental_answers_only_what_changed() -> None:
    cache = FetchSessionCache()
    sid = full_session(cache)
    # Epoch 1, nothing added: every partition is read, none changed -> empty answer.
    ctx = cache.new_context(sid, 1, [], [], uses_topic_ids=False, privileged=False, now_ms=1)
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [q.partition for _, ps in ctx.plan for q in ps] == [0, 1, 2]
    assert ctx.finish(answer_of(ctx), 1) == (sid, [])
    # Records on 1, a new HW on 2, an error on 0: all three answered.
    ctx = cache.new_context(sid, 2, [], [], uses_topic_ids=False, privileged=False, now_ms=2)
    _, topics = ctx.finish(answer_of(ctx, p0=result(0, error=6), p1=result(1, 11, b"x"),
                                     p2=result(2, 12)), 2)
    assert [r.partition_index for _, ps in topics for r in ps] == [0, 1, 2]
    # The errored partition is answered again when the error is gone (HW invalidated); the
    # partition that had records went to the end of the order.
    ctx = cache.new_context(sid, 3, [], [], uses_topic_ids=False, privileged=False, now_ms=3)
    assert [q.partition for _, ps in ctx.plan for q in ps] == [0, 2, 1]
    _, topics = ctx.finish(answer_of(ctx, p1=result(1, 11), p2=result(2, 12)), 3)
    assert [r.partition_index for _, ps in topics for r in ps] == [0]


def test_added_altered_and_forgotten_partitions() -> None:
    cache = FetchSessionCache()
    sid = full_session(cache, 2)
    ctx = cache.new_context(sid, 1, [("t", [p(1, 50)]), ("u", [p(0, 7)])], [("t", [0])],
                            uses_topic_ids=False, privileged=False, now_ms=1)
    plan = [(key, q.partition, q.fetch_offset) for key, ps in ctx.plan for q in ps]
    assert plan == [("t", 1, 50), ("u", 0, 7)]
    _, topics = ctx.finish(answer_of(ctx), 1)
    assert [(key, r.partition_index) for key, ps in topics for r in ps] == [("u", 0)]  # new


def test_unknown_session_wrong_epoch_and_id_kind() -> None:
    cache = FetchSessionCache()
    sid = full_session(cache)
    def ctx(session_id: int, epoch: int, ids: bool = False):  # type: ignore[no-untyped-def]
        return cache.new_context(session_id, epoch, [], [], uses_topic_ids=ids,
                                 privileged=False, now_ms=5)
    assert ctx(sid + 1, 1).error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert ctx(sid, 2).error is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert ctx(sid, 1, ids=True).error is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert ctx(sid, 1).kind is ContextKind.INCREMENTAL
    assert ctx(sid, 1).error is ErrorCode.INVALID_FETCH_SESSION_EPOCH  # epoch moved to 2
    # A new full fetch with the old id replaces the session.
    new = cache.new_context(sid, 0, [("t", [p(0)])], [], uses_topic_ids=False,
                            privileged=False, now_ms=6)
    assert sid not in cache.sessions
    assert new.finish(answer_of(new), 6)[0] not in (0, sid)


def test_topic_ids_key_the_session() -> None:
    cache = FetchSessionCache()
    tid = uuid.uuid4()
    ctx = cache.new_context(0, 0, [(tid, [p(0)])], [], uses_topic_ids=True, privileged=False,
                            now_ms=0)
    sid, _ = ctx.finish(answer_of(ctx), 0)
    ctx = cache.new_context(sid, 1, [], [(tid, [0])], uses_topic_ids=True, privileged=False,
                            now_ms=1)
    assert ctx.plan == []


def test_bounded_cache_and_eviction() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000, rng=random.Random(7))
    a = full_session(cache, 5, now_ms=0)
    b = full_session(cache, 2, now_ms=0)
    # Full, nothing stale, nothing old enough: a consumer newcomer gets no session.
    ctx = cache.new_context(0, 0, [("t", [p(0)] * 1)], [], uses_topic_ids=False,
                            privileged=False, now_ms=500)
    assert ctx.finish(answer_of(ctx), 500)[0] == 0
    # A follower outranks consumers: it takes the smallest consumer session's slot.
    ctx = cache.new_context(0, 0, [("t", [p(0)])], [], uses_topic_ids=False, privileged=True,
                            now_ms=600)
    f = ctx.finish(answer_of(ctx), 600)[0]
    assert f != 0 and set(cache.sessions) == {a, f} and b not in cache.sessions
    assert cache.evictions == 1
    # Past the eviction time, an unused session goes first.
    cache.new_context(f, 1, [], [], uses_topic_ids=False, privileged=True, now_ms=1500)
    ctx = cache.new_context(0, 0, [("t", [p(0)])], [], uses_topic_ids=False,
                            privileged=False, now_ms=1700)
    c = ctx.finish(answer_of(ctx), 1700)[0]
    assert set(cache.sessions) == {f, c}
    # A larger consumer session may evict a smaller one only once that one is old enough.
    ctx = cache.new_context(0, 0, [("t", [p(i) for i in range(9)])], [],
                            uses_topic_ids=False, privileged=False, now_ms=1800)
    assert ctx.finish(answer_of(ctx), 1800)[0] == 0
    cache.new_context(f, 2, [], [], uses_topic_ids=False, privileged=True, now_ms=2700)
    cache.new_context(c, 1, [], [], uses_topic_ids=False, privileged=False, now_ms=2700)
    ctx = cache.new_context(0, 0, [("t", [p(i) for i in range(9)])], [],
                            uses_topic_ids=False, privileged=False, now_ms=2800)
    d = ctx.finish(answer_of(ctx), 2800)[0]
    assert d != 0 and set(cache.sessions) == {f, d}  # c: 1 partition, old enough, weakest


def test_a_topic_listed_twice_in_a_full_fetch() -> None:
    cache = FetchSessionCache()
    ctx = cache.new_context(0, 0, [("t", [p(0)]), ("u", [p(0)]), ("t", [p(1)])], [],
                            uses_topic_ids=False, privileged=False, now_ms=0)
    sid, topics = ctx.finish(answer_of(ctx), 0)
    assert sid != 0 and [(k, r.partition_index) for k, rs in topics for r in rs] == [
        ("t", 0), ("u", 0), ("t", 1)]
    assert set(cache.sessions[sid].partitions) == {("t", 0), ("u", 0), ("t", 1)}
