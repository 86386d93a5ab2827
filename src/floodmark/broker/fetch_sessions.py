"""Incremental fetch sessions (KIP-227), sans-I/O: Kafka's ``FetchSession`` / ``FetchSessionCache``
rules, with time passed in as ``now_ms``.

A consumer that fetches the same partitions over and over can ask the broker to remember them:

=========================  ==========================================================================
session id, epoch          what the request carries, and what the broker does
=========================  ==========================================================================
0, -1 (FINAL)              no session: a full fetch, answered with session id 0 (librdkafka, aiokafka)
0, 0 (INITIAL)             a full fetch that asks for a new session: every partition is answered
                           and, if the cache has (or can free) a slot, the answer carries a new
                           session id whose next expected epoch is 1 (kafka-python)
id, 0                      the old session is dropped and a new one is created, as above
id, -1                     the session is closed; a full fetch without session
id, n > 0                  incremental: the request names only partitions added or changed (new
                           fetch offset, max bytes, leader epoch) and ``forgotten_topics_data``
                           the ones to drop; the broker reads *every* partition of the session and
                           answers only those with records, an error, or a high watermark / log
                           start offset / last stable offset the client was not told yet
unknown id                 FETCH_SESSION_ID_NOT_FOUND (the client starts over with epoch 0)
id, wrong epoch            INVALID_FETCH_SESSION_EPOCH
id, names vs ids           a session started with topic names (v < 13) continued with topic ids
                           (v13+) or the reverse: FETCH_SESSION_TOPIC_ID_ERROR
=========================  ==========================================================================

A partition answered with records moves to the end of the session's order, so under
``max_bytes`` the others get their turn next time; an errored partition is always answered and
its remembered high watermark is invalidated, so it is answered again once the error is gone.

The cache is bounded like Kafka's ``max.incremental.fetch.session.cache.slots``: when it is full
a new session takes the slot of one unused for ``min.incremental.fetch.session.eviction.ms``,
else of the least valuable evictable one if the newcomer is worth more (followers before
consumers, then more partitions before fewer); else the fetch is answered without a session.
"""

from __future__ import annotations

import enum
import random
import uuid
from dataclasses import dataclass, field

from floodmark.broker.boundary import WireRequest
from floodmark.errors import ErrorCode
from floodmark.wire import FetchPartitionResult

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

TopicKey = str | uuid.UUID  # a topic name (Fetch v4..12) or a topic id (v13+)
PartitionKey = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class FetchParams:
    """One partition's fetch parameters (named as kio's request fields, so the reader takes a
    request entry or a remembered one alike)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start (consumers send -1)

    @classmethod
    def of(cls, p: WireRequest) -> FetchParams:
        return cls(int(p.partition), int(p.fetch_offset), int(p.partition_max_bytes),
                   int(getattr(p, "current_leader_epoch", -1)),
                   int(getattr(p, "last_fetched_epoch", -1)),
                   int(getattr(p, "log_start_offset", -1)))


@dataclass(slots=True)
class CachedPartition:
    params: FetchParams
    # What the client was last told (-1: nothing yet, or invalidated by an error).
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: FetchPartitionResult) -> bool:
        """Kafka's ``maybeUpdateResponseData``: is this partition part of an incremental answer?
        Remembers what the client is now told."""
        respond = bool(result.records)
        if result.high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = result.high_watermark
        if result.log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = result.log_start_offset
        if result.last_stable_offset != self.last_stable_offset:
            respond = True
            self.last_stable_offset = result.last_stable_offset
        if result.error_code != 0:
            respond = True
            self.high_watermark = -1  # answered again once the error is gone
        if result.preferred_read_replica >= 0:
            respond = True  # KIP-392: the consumer must learn where to read from
        if result.diverging_epoch is not None:
            respond = True  # a follower must learn where its log diverged (KIP-320)
        return respond


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's session (outranks consumers' for a slot)
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)

    def eviction_rank(self) -> tuple[bool, int, int]:
        """Kafka's ``EvictableKey``: the smallest is evicted first."""
        return (self.privileged, len(self.partitions), self.id)


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"  # may create a session when answered
    INCREMENTAL = "incremental"
    ERROR = "error"


# What one fetch reads, grouped by topic in answer order: (topic key, [partition params]).
ReadPlan = list[tuple[TopicKey, list[WireRequest]]]
Answer = list[tuple[TopicKey, list[FetchPartitionResult]]]


@dataclass(slots=True)
class FetchContext:
    """One fetch's view of its session: what to read now, how to answer later (``finish``)."""

    kind: ContextKind
    plan: ReadPlan
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    cache: FetchSessionCache | None = None
    privileged: bool = False
    uses_topic_ids: bool = False

    def finish(self, answer: Answer, now_ms: int) -> tuple[int, Answer]:
        """(session id, topics) of the answer: a full fetch creates its session now (with what
        the client is told remembered); an incremental one keeps only the partitions that
        changed and moves those with records to the end of the session's order."""
        if self.kind is ContextKind.FULL and self.cache is not None:
            cached: dict[PartitionKey, CachedPartition] = {}
            by_key: dict[TopicKey, dict[int, WireRequest]] = {}
            for key, parts in self.plan:  # a topic may be listed more than once
                by_key.setdefault(key, {}).update((int(p.partition), p) for p in parts)
            for key, results in answer:
                for r in results:
                    entry = CachedPartition(FetchParams.of(by_key[key][r.partition_index]))
                    entry.must_respond(r)
                    cached[(key, r.partition_index)] = entry
            session = self.cache.maybe_create(now_ms, self.privileged, self.uses_topic_ids,
                                              cached)
            return (session.id if session is not None else INVALID_SESSION_ID), answer
        if self.kind is not ContextKind.INCREMENTAL or self.session is None:
            return INVALID_SESSION_ID, answer
        session = self.session
        out: Answer = []
        for key, results in answer:
            kept = []
            for r in results:
                pkey = (key, r.partition_index)
                cp = session.partitions.get(pkey)
                if cp is None:  # forgotten meanwhile: nothing to remember, still answer
                    kept.append(r)
                    continue
                if cp.must_respond(r):
                    kept.append(r)
                    if r.records:
                        del session.partitions[pkey]  # to the end: the others go first next time
                        session.partitions[pkey] = cp
            if kept:
                if out and out[-1][0] == key:
                    out[-1][1].extend(kept)
                else:
                    out.append((key, kept))
        return session.id, out


_ZERO_UUID = uuid.UUID(int=0)


def topic_key(t: WireRequest, by_id: bool) -> TopicKey:
    """A request topic's key: its name before v13, its id from v13 (kio reads the all-zero id,
    which names no topic, as None)."""
    if by_id:
        return t.topic_id if t.topic_id is not None else _ZERO_UUID
    return str(t.topic)


def session_context(cache: FetchSessionCache, req: WireRequest, *, by_id: bool,
                    privileged: bool, now_ms: int) -> FetchContext | None:
    """KIP-227 (Fetch v7+), for a consumer's Fetch and a follower's alike: None for the plain
    "no session" fetch (session id 0, epoch -1: what librdkafka and aiokafka send), else the
    session's view of this fetch (``privileged``: a follower's)."""
    session_id, epoch = int(req.session_id), int(req.session_epoch)
    if session_id == INVALID_SESSION_ID and epoch == FINAL_EPOCH:
        return None
    topics = [(topic_key(t, by_id), t.partitions) for t in req.topics]
    forgotten = [(topic_key(f, by_id), f.partitions) for f in req.forgotten_topics_data]
    return cache.new_context(session_id, epoch, topics, forgotten, uses_topic_ids=by_id,
                             privileged=privileged, now_ms=now_ms)


def _group(entries: list[tuple[TopicKey, WireRequest]]) -> ReadPlan:
    plan: ReadPlan = []
    for key, params in entries:
        if plan and plan[-1][0] == key:
            plan[-1][1].append(params)
        else:
            plan.append((key, [params]))
    return plan


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120_000,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def new_context(self, session_id: int, session_epoch: int,
                    topics: list[tuple[TopicKey, list[WireRequest]]],
                    forgotten: list[tuple[TopicKey, list[int]]], *, uses_topic_ids: bool,
                    privileged: bool, now_ms: int) -> FetchContext:
        """Kafka's ``FetchManager.newContext``: decide from the request's session id and epoch
        (see the module docstring) what this fetch reads and how it will be answered."""
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            plan: ReadPlan = [(key, list(parts)) for key, parts in topics]
            if session_epoch == FINAL_EPOCH or self.max_slots <= 0:
                return FetchContext(ContextKind.SESSIONLESS, plan)
            return FetchContext(ContextKind.FULL, plan, cache=self, privileged=privileged,
                                uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != session_epoch:
            return FetchContext(ContextKind.ERROR, [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for key, parts in topics:
            for p in parts:
                params = FetchParams.of(p)
                cp = session.partitions.get((key, params.partition))
                if cp is None:
                    session.partitions[(key, params.partition)] = CachedPartition(params)
                else:
                    cp.params = params
        for key, indexes in forgotten:
            for index in indexes:
                session.partitions.pop((key, int(index)), None)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        plan = _group([(key, cp.params) for (key, _), cp in session.partitions.items()])
        return FetchContext(ContextKind.INCREMENTAL, plan, session=session)

    def maybe_create(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[PartitionKey, CachedPartition]) -> FetchSession | None:
        """A new session if there is a free slot or one can be evicted (module docstring)."""
        if len(self.sessions) >= self.max_slots and not self._try_evict(
                (privileged, len(partitions), INT32_MAX), now_ms):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH), partitions)
        self.sessions[session_id] = session
        return session

    def _try_evict(self, newcomer: tuple[bool, int, int], now_ms: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        privileged = newcomer[0]
        # Evictable by anyone: sessions older than the eviction time; by a follower also every
        # consumer session (Kafka's evictableByAll / evictableByPrivileged).
        candidates = [s for s in self.sessions.values()
                      if now_ms - s.creation_ms > self.eviction_ms
                      or (privileged and not s.privileged)]
        if not candidates:
            return False
        weakest = min(candidates, key=FetchSession.eviction_rank)
        if newcomer < weakest.eviction_rank():
            return False
        self._evict(weakest)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        self.evictions += 1

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                return session_id

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
