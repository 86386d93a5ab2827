"""Replication over the wire: the leader's answer to follower Fetch requests, and the follower's
fetchers. Every decision is the core's (``floodmark.replication.partition``); this module
only moves bytes.

``ReplicaManager`` is what a cluster member's broker is given for this (a lone broker has none):
the fetchers of the partitions it follows, started, retargeted and stopped as metadata changes,
and its answers to the replicas that follow it.

Leader (``ReplicaManager.answer_fetch``): a Fetch from a replica names many partitions. Each
goes to ``ReplicaDriver.answer_follower_fetch`` (``Partition.handle_follower_fetch``, then the
read; the simulator and the model checker answer through it too), which fences the partition
on its ``current_leader_epoch``, checks ``last_fetched_epoch`` against the epoch cache
(answering ``diverging_epoch`` and recording nothing when the follower's log diverged), records
the follower's LEO (its ``fetch_offset``), maybe proposes an ISR expansion and advances the HW.
Each partition's answer carries the HW snapshot taken *before* the follower's fetch was counted
and the records from ``fetch_offset`` up to the LEO, within the request's ``max_bytes`` (at
least one batch, KIP-74). The request is answered at once when a partition has an error or a
diverging epoch or the records reach ``min_bytes``; else it waits (Kafka's DelayedFetch) until
an append, a HW move or new metadata on any of its partitions wakes it (only the woken
partitions are asked again) or its ``max_wait`` expires. A follower's Fetch goes in a KIP-227
incremental fetch session (``fetch_sessions``, the cache consumers' sessions use): it names only
what changed, every partition of the session is asked as above with the fetch data the session
remembers, and the answer keeps only the partitions with news.

Follower: the partitions a broker follows are grouped by source broker and fetcher
(``num.replica.fetchers`` per source broker, ``replica_fetcher_thread.fetcher_id``); each
group is one ``ReplicaFetcherThread`` (one connection, one Fetch per round for all its
partitions). A partition's own fetch loop (``FetchLoop``) says what it sends and what an answer
means: append as follower, truncate at a diverging epoch (several rounds when needed, KIP-279),
back off on NOT_LEADER/UNKNOWN_LEADER_EPOCH, stop on FENCED_LEADER_EPOCH until metadata
changes; OffsetOutOfRange asks the leader's LEO with ListOffsets (replica id set); in
``epoch-offset`` mode OffsetsForLeaderEpoch first. When a partition's leader changes it moves
to a fetcher for the new leader; a fetcher left with no partitions stops and closes its
connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from floodmark.broker.boundary import Parts, WireRequest
from floodmark.broker.fetch_sessions import (
    INVALID_SESSION_ID,
    ContextKind,
    FetchSessionCache,
    ReadPlan,
    session_context,
    topic_key,
)
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.peer_logins import PeerLogins
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.replica_fetcher_thread import (
    IDLE_RETRY_MS,
    ReplicaFetchConfig,
    ReplicaFetcherThread,
    fetcher_id,
)
from floodmark.controller import MetadataImage
from floodmark.errors import ErrorCode
from floodmark.replication import FetchLoop, FollowerFetch, FollowerState
from floodmark.security import PLAINTEXT, ClientSecurity
from floodmark.wire import (
    FetchPartitionResult,
    FetchTopicKey,
    RequestHeader,
    encode_fetch_response,
    ms,
)

if TYPE_CHECKING:
    from floodmark.broker.topic_metrics import BrokerTopicMetrics

log = logging.getLogger(__name__)

REPLICA_MAX_WAIT_MS = ReplicaFetchConfig().wait_max_ms
"""replica.fetch.wait.max.ms's default: how long a follower's fetch may park at the leader."""
MAX_REPLICA_WAIT_MS = 5000
"""The longest a leader parks a replica's Fetch, whatever its ``max_wait`` asks."""

TopicPartition = tuple[str, int]
FetcherKey = tuple[int, int]
"""(source broker id, fetcher id)."""


def replica_of(req: WireRequest, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of a Fetch: top-level ``replica_id`` before v15, the
    ``replica_state`` struct from v15 (KIP-903); (-1, -1) for consumers."""
    if version >= 15:
        state = req.replica_state
        return int(state.replica_id), int(state.replica_epoch)
    return int(req.replica_id), -1


class LeaderHost(Protocol):
    """What the leader side needs of its broker: the partitions it hosts, and the purgatory
    of the requests that wait on them."""

    partitions: dict[tuple[str, int], PartitionState]
    purgatory: FetchPurgatory
    fetch_sessions: FetchSessionCache  # KIP-227 sessions, followers' and consumers' alike
    topic_metrics: BrokerTopicMetrics | None  # /metrics on: ReplicationBytesOut counted here


class ReplicaManager:
    """A cluster member's replication over the wire: its ``ReplicaFetcherThread`` per (source
    broker, fetcher id), and the leader's answers to the fetches of its followers (waiting in
    the broker's purgatory until the leader appends or their wait expires). ``image``: the
    member's metadata (broker addresses, topic ids)."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 now_ms: Callable[[], int], security: ClientSecurity = PLAINTEXT,
                 config: ReplicaFetchConfig | None = None) -> None:
        """``security``: how to dial leaders (the inter-broker listener's protocol);
        ``config``: the replica.fetch.* settings."""
        self.node_id = node_id
        self.security = security
        self.config = config if config is not None else ReplicaFetchConfig()
        self.logins = PeerLogins(node_id, "replica fetching")
        """Leaders that refused this broker's login or its ClusterAction: one line each, and
        their fetchers wait rather than dial at the usual pace."""
        self._image = image
        self._now_ms = now_ms
        self.loops: dict[TopicPartition, FetchLoop] = {}
        """Each followed partition's fetch loop (kept while it moves between fetchers)."""
        self.homes: dict[TopicPartition, FetcherKey] = {}
        self.fetchers: dict[FetcherKey, ReplicaFetcherThread] = {}
        self.closing = False  # fetchers check it too (see ReplicaFetcherThread.stop)

    def image(self) -> MetadataImage:
        return self._image()

    def now_ms(self) -> int:
        return self._now_ms()

    # -- follower side ---------------------------------------------------------------------------
    def sync(self, key: TopicPartition, ps: PartitionState) -> None:
        """The partition's role changed or may have: follow its current leader and epoch from
        that leader's fetcher for it (the partition's fetch loop decides when the target
        changed: a request in flight to the old one is then dropped), or stop following."""
        if not isinstance(ps.core.role, FollowerState) or self.closing:
            self.remove(key)
            return
        loop = self.loops.get(key)
        if loop is None or loop.driver is not ps.driver:
            loop = FetchLoop(ps.driver, request_timeout_ms=None,
                             backoff_ms=self.config.backoff_ms, idle_retry_ms=IDLE_RETRY_MS)
            self.loops[key] = loop
        loop.on_metadata(self.now_ms())
        leader = ps.core.leader_id
        if leader < 0 or leader == self.node_id:
            self._leave(key)  # no leader to follow yet: the loop waits for metadata
            return
        home = (leader, fetcher_id(key[0], key[1], self.config.num_replica_fetchers))
        if self.homes.get(key) != home:
            self._leave(key)
            self.homes[key] = home
        fetcher = self.fetchers.get(home)
        if fetcher is None:
            fetcher = ReplicaFetcherThread(self, *home)
            self.fetchers[home] = fetcher
            fetcher.start()
        fetcher.add(key, ps, loop)

    def _leave(self, key: TopicPartition) -> None:
        """``key`` leaves its fetcher; a fetcher left with nothing to follow stops and closes
        its connection."""
        home = self.homes.pop(key, None)
        fetcher = self.fetchers.get(home) if home is not None else None
        if fetcher is None or home is None:
            return
        fetcher.remove(key)
        if not fetcher.partitions:
            fetcher.stop()
            del self.fetchers[home]

    def remove(self, key: TopicPartition) -> None:
        self._leave(key)
        self.loops.pop(key, None)

    def stop(self) -> None:
        """Shutting down: every fetcher stops and none starts again."""
        self.closing = True
        for fetcher in self.fetchers.values():
            fetcher.stop()

    # -- leader side -------------------------------------------------------------------------------
    async def answer_fetch(self, host: LeaderHost, header: RequestHeader,
                           req: WireRequest) -> Parts:
        """A replica's Fetch: answered at once when a partition has an error or a diverging
        epoch or the records reach ``min_bytes``, else when an append to any of its
        partitions brings them there or the wait expires (Kafka's DelayedFetch).

        In an incremental fetch session (KIP-227, ``fetch_sessions``: the cache a consumer's
        sessions use) the request names only the partitions added or changed; every partition
        of the session is read as if named, with the fetch data the session remembers (so the
        leader records each followed partition's fetch, as Kafka's follower fetch state is
        updated for the session's cached partitions), and the answer keeps only those with
        something to say: records, an error, a diverging epoch, a high watermark or log start
        offset the follower was not told yet."""
        version = header.api_version
        replica_id, broker_epoch = replica_of(req, version)
        wait_ms = min(max(ms(req.max_wait), 0), MAX_REPLICA_WAIT_MS)
        min_bytes = int(req.min_bytes)
        deadline = self.now_ms() + wait_ms
        by_id = version >= 13
        ctx = (session_context(host.fetch_sessions, req, by_id=by_id, privileged=True,
                               now_ms=self.now_ms()) if version >= 7 else None)
        if ctx is not None and ctx.kind is ContextKind.ERROR:
            return encode_fetch_response(version, header.correlation_id, [],
                                         error_code=int(ctx.error))
        plan: ReadPlan = (ctx.plan if ctx is not None
                          else [(topic_key(t, by_id), t.partitions) for t in req.topics])
        names = self._topic_names(plan, by_id)
        asks = [((names[i], int(p.partition)), p)
                for i, (_, parts) in enumerate(plan) for p in parts]
        keys = [key for key, _ in asks]
        empty = FetchPartitionResult(-1, 0, -1, -1, -1, b"")
        answers: list[tuple[FetchPartitionResult, bool]] = [(empty, False)] * len(asks)
        pending: list[int] = list(range(len(asks)))
        while True:
            # The partitions not yet asked, or woken since, ask the core again
            # (``answer_follower_fetch``, the question the simulator's parked fetches are
            # asked by ``ReplicaDriver.answer_parked_follower_fetches``); the others keep their
            # answer (an older HW snapshot is still a true one).
            self._answer_partitions(host, asks, pending, answers, replica_id, broker_epoch,
                                    max(int(req.max_bytes), 0))
            size = sum(len(out.records or b"") for out, _ in answers)
            urgent = any(u for _, u in answers)
            remaining = deadline - self.now_ms()
            if urgent or size >= min_bytes or remaining <= 0:
                if host.topic_metrics is not None:
                    host.topic_metrics.replication_bytes_out += size
                topics = self._responses(plan, answers)
                session_id = INVALID_SESSION_ID
                if ctx is not None:
                    session_id, topics = ctx.finish(topics, self.now_ms())
                # Packed by hand (``wire/hot.py``), as a consumer's Fetch answer: kio took
                # ~14 ms for a 100-partition answer, on the path of every acks=all write.
                return encode_fetch_response(version, header.correlation_id, topics,
                                             session_id=session_id)
            # The broker's one purgatory, as a consumer's Fetch waits (Kafka's DelayedFetch):
            # the core's WakeFollowerFetches after an append, a HW move or new metadata on one
            # of ``keys`` (every partition of its session) wakes it
            # (``Broker.wake_replica_fetches``, ``wake_fetches``).
            woken = await host.purgatory.wait(keys, remaining)
            pending = [i for i, key in enumerate(keys) if key in woken]

    def _topic_names(self, plan: ReadPlan, by_id: bool) -> list[str]:
        """Each planned topic's name (keyed by topic id from v13; "" for an unknown id)."""
        if not by_id:
            return [str(key) for key, _ in plan]
        by_topic_id: dict[object, str] = {
            timage.topic_id: name for name, timage in self.image().topics.items()}
        return [by_topic_id.get(key, "") for key, _ in plan]

    def _answer_partitions(self, host: LeaderHost,
                           asks: list[tuple[TopicPartition, WireRequest]],
                           pending: Iterable[int],
                           answers: list[tuple[FetchPartitionResult, bool]],
                           replica_id: int, broker_epoch: int, max_bytes: int) -> None:
        """Ask the core for the ``pending`` partitions' answers, within what ``max_bytes``
        leaves after the others' records (the first records of the response may exceed it,
        KIP-74; once it is spent the others get none this time). ``answers[i]``: the
        partition's response and whether it must be answered now (an error, a diverging
        epoch)."""
        asked = set(pending)
        used = sum(len(out.records or b"") for i, (out, _) in enumerate(answers)
                   if i not in asked)
        for i in sorted(asked):
            key, p = asks[i]
            ps = host.partitions.get(key)
            if ps is None:
                answers[i] = (FetchPartitionResult(
                    key[1], int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, -1, b""), True)
                continue
            left = max_bytes - used
            limit = None if used and left <= 0 else min(int(p.partition_max_bytes), left)
            out, urgent = self._follower_read(host, ps, replica_id, broker_epoch, p, limit)
            used += len(out.records or b"")
            answers[i] = (out, urgent)

    @staticmethod
    def _responses(plan: ReadPlan, answers: list[tuple[FetchPartitionResult, bool]],
                   ) -> list[tuple[FetchTopicKey, list[FetchPartitionResult]]]:
        responses: list[tuple[FetchTopicKey, list[FetchPartitionResult]]] = []
        at = 0
        for key, parts in plan:
            count = len(parts)
            responses.append((key, [out for out, _ in answers[at:at + count]]))
            at += count
        return responses

    def _follower_read(self, host: LeaderHost, ps: PartitionState, replica_id: int,
                       broker_epoch: int, p: WireRequest,
                       max_bytes: int | None) -> tuple[FetchPartitionResult, bool]:
        """One partition's answer (``max_bytes`` None: the response is full, no records), and
        whether it must be sent now: an error or a diverging epoch."""
        index = int(p.partition)
        fetch = FollowerFetch(
            replica_id=replica_id,
            fetch_offset=int(p.fetch_offset),
            last_fetched_epoch=int(p.last_fetched_epoch),
            current_leader_epoch=int(p.current_leader_epoch),
            log_start_offset=int(p.log_start_offset),
            broker_epoch=broker_epoch,
        )
        before = ps.core.replica_states.get(replica_id)
        answer = ps.driver.answer_follower_fetch(
            fetch, self.now_ms(),
            lambda start, upto: (b"" if max_bytes is None
                                 else bytes(ps.log.read(start, max_bytes, upto).records)))
        after = ps.core.replica_states.get(replica_id)
        if after is not None and (before is None
                                  or after.log_start_offset != before.log_start_offset):
            # The follower's log start moved (it followed a DeleteRecords): a DeleteRecords
            # waiting for the low watermark of every replica re-checks (data.delete_records).
            host.purgatory.wake((ps.topic, ps.partition))
        response = answer.response
        diverging = response.diverging
        out = FetchPartitionResult(
            index, int(response.error), response.high_watermark, response.high_watermark,
            response.log_start_offset, memoryview(answer.records),
            diverging_epoch=None if diverging is None else (diverging.epoch,
                                                            diverging.end_offset))
        if diverging is not None:
            log.info("partition %s leader_epoch=%d follower %d diverges at epoch %d end %d",
                     ps.name, ps.leader_epoch, replica_id, diverging.epoch, diverging.end_offset)
        # Records are never read with an error or a diverging epoch: a complete answer
        # without records is one of those (the rule is ``FollowerFetchAnswer.complete``).
        return out, answer.complete and not answer.records
