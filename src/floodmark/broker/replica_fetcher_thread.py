"""A follower's fetcher for one source broker: one connection, one task, one Fetch per round for
all its partitions (Kafka's ``ReplicaFetcherThread`` over ``AbstractFetcherThread``).

A broker runs ``num.replica.fetchers`` of these per broker it follows partitions from; a
partition goes to fetcher ``fetcher_id(topic, partition, num.replica.fetchers)`` (Kafka's
``AbstractFetcherManager.getFetcherId``). So the connections between brokers are bounded by
brokers x ``num.replica.fetchers``, not by partitions, and with TLS or SASL between brokers a
leader change does not dial (and log in) once per partition.

The fetcher only batches and routes. Each partition keeps its own fetch loop
(``replication.fetcher.FetchLoop``, the one the simulator drives): it says whether the partition
fetches in this round (``poll``: one that backs off, waits for new metadata or has a request in
flight is left out, as Kafka's delayed partitions are), what to send (``Partition.next_fetch``)
and what the answer means (``on_fetch_answer``). A round sends the OffsetsForLeaderEpoch
questions of its partitions as one request, then their Fetch requests as one Fetch v15; a
partition's error (NOT_LEADER, FENCED, a diverging epoch, OFFSET_OUT_OF_RANGE) goes to that
partition's loop only; a connection that fails gives every partition of the round its backoff,
and the next round dials again.

Rounds go in an incremental fetch session with the leader (KIP-227, ``fetch_session_handler``):
after the first full Fetch a round names only the partitions added or whose fetch data changed
and forgets those no longer fetched here; the leader answers only partitions with something to
say, and the others (no news) fetch again at once without troubling their core.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from floodmark.broker.fetch_session_handler import FetchSessionHandler, SessionKey
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.peer_logins import PeerLogins
from floodmark.client import (
    AsyncKafkaConnection,
    AuthenticationFailed,
    RequestFailed,
)
from floodmark.controller import MetadataImage
from floodmark.errors import ErrorCode
from floodmark.replication import (
    APPEND_REJECTED,
    EpochEndOffset,
    EpochQuery,
    FetchLoop,
    FetchResponse,
    FetchToSend,
    FollowerAction,
    FollowerFetch,
    NextFetch,
)
from floodmark.security import ClientSecurity
from floodmark.wire import ReplicaFetchPartition, encode_replica_fetch_request

log = logging.getLogger(__name__)

# Followers send Fetch v15: the replica id *and broker epoch* travel in ``replica_state``
# (KIP-903), so the leader refuses a fetch from a stale incarnation and its ISR proposals carry
# real broker epochs. Topics are named by topic id from v13. Clients still see v4-12 advertised;
# v15 is spoken broker to broker only (the leader also accepts v12 with a top-level replica_id).
FETCH_VERSION = 15
EPOCH_QUERY_VERSION = 3
LIST_OFFSETS_VERSION = 4
IDLE_RETRY_MS = 1000  # nothing to fetch, or stopped until new metadata: look again anyway
QUERY_TIMEOUT_S = 10.0
"""How long an OffsetsForLeaderEpoch or ListOffsets request may take (answered at once)."""
FETCH_TIMEOUT_MARGIN_S = 3.0
"""A Fetch may take its long poll (``replica.fetch.wait.max.ms``) plus this."""

TopicPartition = tuple[str, int]

_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
"""A leader's answers that only say the fetch session must start over (KIP-227)."""

_REFUSALS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
"""A leader's answers that say this broker may not fetch as a replica (no ClusterAction)."""


class NotAuthorized(RequestFailed):
    """The leader's authorizer refused this broker's replica fetch."""


@dataclass(frozen=True, slots=True)
class ReplicaFetchConfig:
    """The follower's fetch settings (Kafka's names; ``from_settings`` reads them)."""

    num_replica_fetchers: int = 1
    max_bytes: int = 1_048_576  # replica.fetch.max.bytes, per partition
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes, per Fetch
    min_bytes: int = 1  # replica.fetch.min.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    backoff_ms: int = 1000  # replica.fetch.backoff.ms

    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> ReplicaFetchConfig:
        return cls(num_replica_fetchers=int(get("num.replica.fetchers")),
                   max_bytes=int(get("replica.fetch.max.bytes")),
                   response_max_bytes=int(get("replica.fetch.response.max.bytes")),
                   min_bytes=int(get("replica.fetch.min.bytes")),
                   wait_max_ms=int(get("replica.fetch.wait.max.ms")),
                   backoff_ms=int(get("replica.fetch.backoff.ms")))


def _java_string_hash(text: str) -> int:
    """``String.hashCode`` (a 32-bit signed int over UTF-16 code units), as Kafka hashes."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(topic: str, partition: int, num_replica_fetchers: int) -> int:
    """Which of a source broker's fetchers follows this partition: Kafka's
    ``Utils.abs(31 * topic.hashCode + partition) % numFetchers``, in Java's 32-bit arithmetic."""
    h = (31 * _java_string_hash(topic) + partition) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    positive = 0 if h == -(1 << 31) else abs(h)
    return positive % num_replica_fetchers


class FetcherOwner(Protocol):
    """What a fetcher needs of the broker's replica manager."""

    node_id: int
    security: ClientSecurity
    logins: PeerLogins
    config: ReplicaFetchConfig
    closing: bool

    def image(self) -> MetadataImage: ...
    def now_ms(self) -> int: ...


@dataclass(eq=False, slots=True)
class _Followed:
    ps: PartitionState
    loop: FetchLoop


@dataclass(frozen=True, slots=True)
class _Sent:
    """One partition's part of a round: its key, whom it belongs to, and its request."""

    key: TopicPartition
    followed: _Followed
    out: FetchToSend


class ReplicaFetcherThread:
    """Follows the partitions ``add`` gives it from broker ``source_id`` until stopped: one
    connection, one task. (Kafka's name; an asyncio task here, not a thread.)"""

    def __init__(self, owner: FetcherOwner, source_id: int, fetcher_index: int) -> None:
        self.owner = owner
        self.source_id = source_id
        self.fetcher_index = fetcher_index
        self.partitions: dict[TopicPartition, _Followed] = {}
        self.changed = asyncio.Event()  # a partition added or its metadata changed
        self.rounds = 0  # Fetch requests sent (tests and metrics)
        self.session = FetchSessionHandler()  # KIP-227, with this source broker
        self._conn: AsyncKafkaConnection | None = None
        self._conn_target: tuple[str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def name(self) -> str:
        return f"ReplicaFetcherThread-{self.fetcher_index}-{self.source_id}"

    # -- membership ------------------------------------------------------------------------------
    def add(self, key: TopicPartition, ps: PartitionState, loop: FetchLoop) -> None:
        """Follow ``key`` (or note that its metadata changed) from the next round on."""
        followed = self.partitions.get(key)
        if followed is None or followed.loop is not loop:
            self.partitions[key] = _Followed(ps, loop)
        self.changed.set()

    def remove(self, key: TopicPartition) -> None:
        """Stop following ``key``: an answer for it still in flight is dropped."""
        self.partitions.pop(key, None)

    # -- life ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    def stop(self) -> None:
        # The flag, not only the cancel: on Python 3.11 ``asyncio.wait_for`` can swallow a
        # cancellation that races with its inner future finishing, and a fetcher that survived
        # its stop would append to a log another fetcher now feeds.
        self._stopped = True
        self.changed.set()
        if self._task is not None:
            self._task.cancel()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> AsyncKafkaConnection | None:
        reg = self.owner.image().brokers.get(self.source_id)
        if reg is None:
            return None
        target = (reg.host, reg.port)
        if self._conn is None or self._conn_target != target:
            if self._conn is not None:
                self._conn.close()
            self._conn = AsyncKafkaConnection(reg.host, reg.port,
                                              f"floodmark-replica-{self.owner.node_id}",
                                              self.owner.security)
            self._conn_target = target
        return self._conn

    async def _wait_for_change(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout_s)
        self.changed.clear()

    def _due(self, now: int) -> tuple[list[_Sent], list[_Sent], int | None]:
        """This round's fetches and epoch questions (each loop that wants to send now), and
        the earliest deadline of the others."""
        fetches: list[_Sent] = []
        queries: list[_Sent] = []
        deadline: int | None = None
        for key, followed in list(self.partitions.items()):
            loop = followed.loop
            loop.tick(now)
            out = loop.poll(now)
            if out is None:
                due = loop.next_deadline_ms()
                if due is not None and (deadline is None or due < deadline):
                    deadline = due
                continue
            if out.leader_id != self.source_id:
                # Its leader changed and the manager has not moved it yet: it will.
                loop.request_failed(out.session, now)
                continue
            (queries if isinstance(out.request, EpochQuery) else fetches).append(
                _Sent(key, followed, out))
        return fetches, queries, deadline

    async def _run(self) -> None:
        """Rounds until stopped: send what the partitions' loops say is due, hand each its
        answer, and wait until the earliest loop's deadline or a change."""
        owner = self.owner
        while not self._stopped and not owner.closing:
            sent: list[_Sent] = []
            try:
                now = owner.now_ms()
                refused_s = owner.logins.wait_s(self.source_id)
                if refused_s > 0:
                    await self._wait_for_change(refused_s)
                    continue
                fetches, queries, deadline = self._due(now)
                sent = queries + fetches
                if not sent:
                    wait_ms = IDLE_RETRY_MS if deadline is None else deadline - now
                    await self._wait_for_change(min(max(wait_ms, 0), IDLE_RETRY_MS) / 1000)
                    continue
                conn = self._connection()
                if conn is None:
                    continue  # the source broker is not in metadata: every one backs off
                if queries:
                    await self._epoch_queries(conn, queries)
                if fetches:
                    await self._fetch(conn, fetches)
            except asyncio.CancelledError:
                raise
            except AuthenticationFailed as exc:  # the leader refused this broker's login
                owner.logins.refused(self.source_id, str(exc),
                                     f"logging in {owner.security.describe()}")
            except NotAuthorized as exc:
                owner.logins.refused(
                    self.source_id, str(exc),
                    f"logged in {owner.security.describe()}: the inter-broker "
                    "principal needs ClusterAction on the cluster, in super.users or granted")
            except RequestFailed as exc:  # the connection: every partition of the round
                log.info("%s: %d partitions' fetch from broker %d failed: %s", self.name,
                         len(sent), self.source_id, exc)
            except Exception:
                # A fetcher must outlive any one bad answer: log it, back off, fetch again.
                log.exception("%s: replica fetcher error", self.name)
                await self._wait_for_change(1.0)
            finally:
                # Those not answered (an error, a partition missing from the answer) back off;
                # for the answered ones this does nothing.
                now = owner.now_ms()
                for s in sent:
                    s.followed.loop.request_failed(s.out.session, now)

    def _current(self, s: _Sent) -> bool:
        """Is ``s``'s partition still followed here, by the same loop (else its answer is
        dropped: it moved to another leader or this broker leads it now)?"""
        return not self._stopped and self.partitions.get(s.key) is s.followed

    # -- Fetch -------------------------------------------------------------------------------------
    async def _fetch(self, conn: AsyncKafkaConnection, sent: list[_Sent]) -> None:
        owner = self.owner
        config = owner.config
        topics = owner.image().topics
        wanted: dict[SessionKey, ReplicaFetchPartition] = {}
        routes: dict[SessionKey, _Sent] = {}
        broker_epoch = -1
        for s in sent:
            f = s.out.request
            assert isinstance(f, FollowerFetch)
            timage = topics.get(s.key[0])
            if timage is None:
                continue  # not in metadata: it backs off (the finally of the round)
            broker_epoch = f.broker_epoch
            key = (timage.topic_id, s.key[1])
            wanted[key] = (s.key[1], f.current_leader_epoch, f.fetch_offset,
                           f.last_fetched_epoch, f.log_start_offset, config.max_bytes)
            routes[key] = s
        if not routes:
            return
        client_id = f"floodmark-replica-{owner.node_id}"
        # KIP-227: after the first full Fetch, only the partitions added or changed since the
        # last one, and the ones no longer fetched here as forgotten (``fetch_session_handler``).
        session = self.session.build(wanted)

        def encode(correlation_id: int) -> bytes:
            # Packed by hand (kio took ~13 ms for 100 partitions, on every acks=all write's
            # path); the same bytes as kio's (tests/unit/wire/test_wire_hot.py).
            return encode_replica_fetch_request(
                correlation_id, client_id, owner.node_id, broker_epoch, config.wait_max_ms,
                config.min_bytes, config.response_max_bytes, session.to_send,
                session_id=session.session_id, session_epoch=session.session_epoch,
                forgotten=session.forgotten)

        self.rounds += 1
        try:
            resp = await conn.request(1, FETCH_VERSION, None,
                                      config.wait_max_ms / 1000 + FETCH_TIMEOUT_MARGIN_S,
                                      encode=encode)
        except RequestFailed:
            self.session.handle_error()
            raise
        error = ErrorCode(int(resp.error_code))
        answered = [((t.topic_id, int(part.partition_index)), part)
                    for t in resp.responses for part in t.partitions]
        if not self.session.handle_response(error, int(resp.session_id),
                                            (key for key, _ in answered)):
            if error in _SESSION_ERRORS:
                # The next round starts the session over with a full Fetch, at once: the
                # partitions learned nothing and wait for nothing.
                log.info("%s: fetch session %d with broker %d: %s, starting a new one",
                         self.name, session.session_id, self.source_id, error.name)
                now = owner.now_ms()
                for s in routes.values():
                    s.followed.loop.on_no_news(s.out.session, now)
                return
            raise RequestFailed(f"fetch error {error.name}" if error is not ErrorCode.NONE
                                else "a fetch answer that does not fit its session")
        answers: list[tuple[_Sent, Any]] = []
        for key, part in answered:
            asked = routes[key]
            part_error = ErrorCode(int(part.error_code))
            if part_error in _REFUSALS:
                raise NotAuthorized(f"Fetch as replica: {part_error.name}")
            answers.append((asked, part))
        owner.logins.accepted(self.source_id)
        out_of_range = [s for s, part in answers
                        if int(part.error_code) == ErrorCode.OFFSET_OUT_OF_RANGE]
        leader_leos = await self._leader_log_end_offsets(conn, out_of_range) if out_of_range \
            else {}
        now = owner.now_ms()
        for s, part in answers:
            if not self._current(s):
                continue
            f = s.out.request
            assert isinstance(f, FollowerFetch)
            div = part.diverging_epoch
            diverging = (EpochEndOffset(int(div.epoch), int(div.end_offset))
                         if div is not None and int(div.end_offset) >= 0 else None)
            records = part.records
            response = FetchResponse(
                error=ErrorCode(int(part.error_code)),
                request_leader_epoch=f.current_leader_epoch,
                high_watermark=int(part.high_watermark),
                log_start_offset=int(part.log_start_offset),
                log_end_offset=leader_leos.get(s.key, -1), diverging=diverging,
                has_records=bool(records), fetch_offset=f.fetch_offset)
            # The loop hands the answer to the driver (the core ignores it if the log moved
            # since the request was built: a truncation by new metadata) and says when to fetch
            # again.
            self._log_action(s.followed.ps, s.followed.loop.on_fetch_answer(
                s.out.session, response, records or b"", now))
            if records:
                # Kafka's updateAndMoveToEnd: a partition that got data goes to the back, so
                # under replica.fetch.response.max.bytes no partition starves the others.
                self.partitions[s.key] = self.partitions.pop(s.key)
        if not session.full:
            # An incremental answer leaves out the session's partitions the leader had nothing
            # new for: they fetch again at once, from the same offset (for those answered
            # above this does nothing).
            for s in routes.values():
                s.followed.loop.on_no_news(s.out.session, now)

    async def _leader_log_end_offsets(self, conn: AsyncKafkaConnection,
                                      sent: list[_Sent]) -> dict[TopicPartition, int]:
        """The leader's LEO of each partition whose fetch offset was out of range (ListOffsets
        as a replica, latest): the core decides between truncating and restarting at the log
        start. -1 where the leader said no."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for s in sent:
            f = s.out.request
            assert isinstance(f, FollowerFetch)
            by_topic.setdefault(s.key[0], []).append({
                "partition_index": s.key[1], "current_leader_epoch": f.current_leader_epoch,
                "timestamp": -1})
        resp = await conn.request(2, LIST_OFFSETS_VERSION, {
            "replica_id": self.owner.node_id, "isolation_level": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]},
            QUERY_TIMEOUT_S)
        return {(str(t.name), int(p.partition_index)): int(p.offset)
                for t in resp.topics for p in t.partitions if int(p.error_code) == 0}

    # -- OffsetsForLeaderEpoch ---------------------------------------------------------------------
    async def _epoch_queries(self, conn: AsyncKafkaConnection, sent: list[_Sent]) -> None:
        """The round's epoch questions (epoch-offset mode) as one OffsetsForLeaderEpoch."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        routes: dict[TopicPartition, _Sent] = {}
        for s in sent:
            q = s.out.request
            assert isinstance(q, EpochQuery)
            by_topic.setdefault(s.key[0], []).append({
                "partition": s.key[1], "current_leader_epoch": q.current_leader_epoch,
                "leader_epoch": q.leader_epoch})
            routes[s.key] = s
        resp = await conn.request(23, EPOCH_QUERY_VERSION, {
            "replica_id": self.owner.node_id,
            "topics": [{"topic": name, "partitions": parts}
                       for name, parts in by_topic.items()]}, QUERY_TIMEOUT_S)
        now = self.owner.now_ms()
        for t in resp.topics:
            for part in t.partitions:
                asked = routes.get((str(t.topic), int(part.partition)))
                if asked is None or not self._current(asked):
                    continue
                q = asked.out.request
                assert isinstance(q, EpochQuery)
                self._log_action(asked.followed.ps, asked.followed.loop.on_epoch_answer(
                    asked.out.session, q.current_leader_epoch, ErrorCode(int(part.error_code)),
                    EpochEndOffset(int(part.leader_epoch), int(part.end_offset)), now))

    @staticmethod
    def _log_action(ps: PartitionState, action: FollowerAction | None) -> None:
        if action is None:
            return
        if action.reason.startswith(APPEND_REJECTED):
            log.warning("partition %s leader_epoch=%d %s", ps.name, ps.leader_epoch,
                        action.reason)
        elif action.next_fetch is NextFetch.ON_NEW_METADATA:
            log.info("partition %s leader_epoch=%d fetching stopped (%s) until new metadata",
                     ps.name, ps.leader_epoch, action.reason)
