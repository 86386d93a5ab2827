"""Replication over the wire: the leader's answer to follower Fetch requests, and the follower's
fetch loop. Every decision is the core's (``floodmark.replication.partition``); this module
only moves bytes.

``ReplicaManager`` is what a cluster member's broker is given for this (a lone broker has none):
the fetchers of the partitions it follows, started, retargeted and stopped as metadata changes,
and its answers to the replicas that follow it.

Leader (``ReplicaManager.answer_fetch``): a Fetch from a replica goes to
``ReplicaDriver.answer_follower_fetch`` (``Partition.handle_follower_fetch``, then the read; the
simulator and the model checker answer through it too), which fences the request on its
``current_leader_epoch``, checks ``last_fetched_epoch`` against the epoch cache (answering
``diverging_epoch`` and recording nothing when the follower's log diverged), records the
follower's LEO (its ``fetch_offset``), maybe proposes an ISR expansion and advances the HW. The
response carries the HW snapshot taken *before* the follower's fetch was counted and the records
from ``fetch_offset`` up to the LEO. A fetch with nothing to return waits (long poll) until the
leader appends (the core's ``WakeFollowerFetches``) or its wait expires; it is then asked again.

Follower (``ReplicaFetcher``): one task per followed partition, one connection to the leader.
``Partition.next_fetch`` says what to send (fetch offset = LEO, ``last_fetched_epoch`` = latest
cached epoch, the leader epoch from metadata); ``on_fetch_response`` says what the answer means:
append the records as follower (the leader's epochs stamped in the batches go into the epoch
cache), truncate to the point ``truncation_point`` derived from a ``diverging_epoch`` (several
rounds when needed, KIP-279), back off on NOT_LEADER/UNKNOWN_LEADER_EPOCH, stop on
FENCED_LEADER_EPOCH until metadata changes. OffsetOutOfRange asks the leader's LEO with
ListOffsets (replica id set) to decide between truncating and restarting at the log start.
In ``epoch-offset`` mode the core asks for OffsetsForLeaderEpoch first; that is sent as API 23.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from floodmark.broker.boundary import WireRequest, WireResponse
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.peer_logins import PeerLogins
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.client.connection import (
    AsyncKafkaConnection,
    AuthenticationFailed,
    RequestFailed,
)
from floodmark.controller.image import MetadataImage
from floodmark.errors import ErrorCode
from floodmark.replication.epochs import EpochEndOffset
from floodmark.replication.fetcher import APPEND_REJECTED, FetchLoop, FetchToSend
from floodmark.replication.partition import (
    EpochQuery,
    FetchResponse,
    FollowerAction,
    FollowerFetch,
    FollowerState,
    NextFetch,
)
from floodmark.security.client_security import PLAINTEXT, ClientSecurity
from floodmark.wire.codec import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.topic_metrics import BrokerTopicMetrics

log = logging.getLogger(__name__)

# Followers send Fetch v15: the replica id *and broker epoch* travel in ``replica_state``
# (KIP-903), so the leader refuses a fetch from a stale incarnation and its ISR proposals carry
# real broker epochs. Topics are named by topic id from v13. Clients still see v4-12 advertised;
# v15 is spoken broker to broker only (the leader also accepts v12 with a top-level replica_id).
FETCH_VERSION = 15
EPOCH_QUERY_VERSION = 3
LIST_OFFSETS_VERSION = 4
REPLICA_MAX_WAIT_MS = 500
REPLICA_PARTITION_MAX_BYTES = 1 << 20
REPLICA_FETCH_BACKOFF_MS = 200
IDLE_RETRY_MS = 1000  # nothing to fetch, or stopped until new metadata: look again anyway
MAX_REPLICA_WAIT_MS = 5000


def replica_of(req: WireRequest, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of a Fetch: top-level ``replica_id`` before v15, the
    ``replica_state`` struct from v15 (KIP-903); (-1, -1) for consumers."""
    if version >= 15:
        state = req.replica_state
        return int(state.replica_id), int(state.replica_epoch)
    return int(req.replica_id), -1


_REFUSALS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
"""A leader's answers that say this broker may not fetch as a replica (no ClusterAction)."""


class _NotAuthorized(RequestFailed):
    """The leader's authorizer refused this broker's replica fetch."""


class LeaderHost(Protocol):
    """What the leader side needs of its broker: the partitions it hosts, and the purgatory
    of the requests that wait on them."""

    partitions: dict[tuple[str, int], PartitionState]
    purgatory: FetchPurgatory
    topic_metrics: BrokerTopicMetrics | None  # /metrics on: ReplicationBytesOut counted here


class ReplicaManager:
    """A cluster member's replication over the wire: one ``ReplicaFetcher`` per partition it
    follows, and the leader's answers to the fetches of its followers (waiting in the broker's
    purgatory until the leader appends or their wait expires). ``image``: the member's metadata (broker
    addresses, topic ids)."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 now_ms: Callable[[], int], security: ClientSecurity = PLAINTEXT) -> None:
        """``security``: how to dial leaders (the inter-broker listener's protocol)."""
        self.node_id = node_id
        self.security = security
        self.logins = PeerLogins(node_id, "replica fetching")
        """Leaders that refused this broker's login or its ClusterAction: one line each, and
        their fetchers wait rather than dial at the usual pace."""
        self.image = image
        self.now_ms = now_ms
        self.fetchers: dict[tuple[str, int], ReplicaFetcher] = {}
        self.closing = False  # fetchers check it too (see ReplicaFetcher.stop on wait_for)

    # -- follower side ---------------------------------------------------------------------------
    def sync(self, key: tuple[str, int], ps: PartitionState) -> None:
        """The partition's role changed or may have: follow its current leader and epoch with
        a fetcher of its own (the node's fetch loop decides when the target changed), or stop
        following."""
        fetcher = self.fetchers.get(key)
        if isinstance(ps.core.role, FollowerState) and not self.closing:
            loop = fetcher.loop if fetcher is not None else FetchLoop(
                ps.driver, request_timeout_ms=None, backoff_ms=REPLICA_FETCH_BACKOFF_MS,
                idle_retry_ms=IDLE_RETRY_MS)
            if loop.on_metadata(self.now_ms()) or fetcher is None:
                # New leader or epoch: drop any request in flight to the old one (it may be
                # stopped and never answer) and start over against the new one.
                if fetcher is not None:
                    fetcher.stop()
                fetcher = ReplicaFetcher(self, ps, loop)
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.changed.set()
        elif fetcher is not None:
            fetcher.stop()
            del self.fetchers[key]

    def remove(self, key: tuple[str, int]) -> None:
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            fetcher.stop()

    def stop(self) -> None:
        """Shutting down: every fetcher stops and none starts again."""
        self.closing = True
        for fetcher in self.fetchers.values():
            fetcher.stop()

    # -- leader side -------------------------------------------------------------------------------
    async def answer_fetch(self, host: LeaderHost, header: RequestHeader,
                           req: WireRequest) -> WireResponse:
        """A replica's Fetch: answered at once when there is data or an error, else when the
        leader appends or the wait expires."""
        version = header.api_version
        replica_id, broker_epoch = replica_of(req, version)
        wait_ms = min(max(ms(req.max_wait), 0), MAX_REPLICA_WAIT_MS)
        deadline = self.now_ms() + wait_ms
        keys = [(self._topic_name(t, version), int(p.partition))
                for t in req.topics for p in t.partitions]
        while True:
            # Each partition asks the core again (``answer_follower_fetch``); the request is
            # answered once one of its partitions has an answer (``FollowerFetchAnswer.
            # complete``, the rule the simulator's parked fetches follow through
            # ``ReplicaDriver.answer_parked_follower_fetches``) or its wait is over.
            responses, ready = self._fetch_once(host, req, version, replica_id, broker_epoch)
            remaining = deadline - self.now_ms()
            if ready or remaining <= 0:
                if host.topic_metrics is not None:
                    host.topic_metrics.replication_bytes_out += sum(
                        len(p["records"]) for t in responses for p in t["partitions"])
                return {"throttle_time": 0, "error_code": 0, "session_id": 0,
                        "responses": responses}
            # The broker's one purgatory, as a consumer's Fetch waits (Kafka's DelayedFetch):
            # the core's WakeFollowerFetches after an append, a HW move or new metadata on one
            # of ``keys`` wakes it (``Broker.wake_replica_fetches``, ``wake_fetches``).
            await host.purgatory.wait(keys, remaining)

    def _topic_name(self, t: WireRequest, version: int) -> str:
        if version < 13:
            return str(t.topic)
        for name, timage in self.image().topics.items():
            if timage.topic_id == t.topic_id:
                return name
        return ""

    def _fetch_once(self, host: LeaderHost, req: WireRequest, version: int, replica_id: int,
                    broker_epoch: int) -> tuple[list[WireResponse], bool]:
        """Every partition's answer, and whether one of them has something to say now."""
        ready = False
        responses = []
        for t in req.topics:
            name = self._topic_name(t, version)
            parts = []
            for p in t.partitions:
                ps = host.partitions.get((name, int(p.partition)))
                if ps is None:
                    parts.append({"partition_index": int(p.partition),
                                  "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                  "high_watermark": -1, "aborted_transactions": None,
                                  "records": b""})
                    ready = True
                    continue
                out, complete = self._follower_read(host, ps, replica_id, broker_epoch, p)
                ready = ready or complete
                parts.append(out)
            key = {"topic": name} if version < 13 else {"topic_id": t.topic_id}
            responses.append({**key, "partitions": parts})
        return responses, ready

    def _follower_read(self, host: LeaderHost, ps: PartitionState, replica_id: int,
                       broker_epoch: int, p: WireRequest) -> tuple[WireResponse, bool]:
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
        max_bytes = min(int(p.partition_max_bytes), REPLICA_PARTITION_MAX_BYTES)
        answer = ps.driver.answer_follower_fetch(
            fetch, self.now_ms(),
            lambda start, upto: bytes(ps.log.read(start, max_bytes, upto).records))
        after = ps.core.replica_states.get(replica_id)
        if after is not None and (before is None
                                  or after.log_start_offset != before.log_start_offset):
            # The follower's log start moved (it followed a DeleteRecords): a DeleteRecords
            # waiting for the low watermark of every replica re-checks (data.delete_records).
            host.purgatory.wake((ps.topic, ps.partition))
        response = answer.response
        out: WireResponse = {"partition_index": index, "error_code": int(response.error),
                               "high_watermark": response.high_watermark,
                               "last_stable_offset": response.high_watermark,
                               "log_start_offset": response.log_start_offset,
                               "aborted_transactions": None, "records": answer.records}
        if response.diverging is not None:
            out["diverging_epoch"] = {"epoch": response.diverging.epoch,
                                      "end_offset": response.diverging.end_offset}
            log.info("partition %s leader_epoch=%d follower %d diverges at epoch %d end %d",
                     ps.name, ps.leader_epoch, replica_id, response.diverging.epoch,
                     response.diverging.end_offset)
        return out, answer.complete


# -- follower side ------------------------------------------------------------------------------
class ReplicaFetcher:
    """Follows one partition's leader until stopped."""

    def __init__(self, manager: ReplicaManager, ps: PartitionState, loop: FetchLoop) -> None:
        self.manager = manager
        self.ps = ps
        self.loop = loop  # the node's fetch loop; its target is this fetcher's leader and epoch
        self.changed = asyncio.Event()  # metadata changed: re-read leader / epoch
        self._conn: AsyncKafkaConnection | None = None
        self._conn_target: tuple[int, str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.ps.name}")

    def stop(self) -> None:
        # The flag, not only the cancel: on Python 3.11 ``asyncio.wait_for`` can swallow a
        # cancellation that races with its inner future finishing, and a fetcher that survived
        # its replacement would append to the log concurrently with the new one.
        self._stopped = True
        self.changed.set()
        if self._task is not None:
            self._task.cancel()
        if self._conn is not None:
            self._conn.close()

    def _connection(self, leader_id: int) -> AsyncKafkaConnection | None:
        reg = self.manager.image().brokers.get(leader_id)
        if reg is None:
            return None
        target = (leader_id, reg.host, reg.port)
        if self._conn is None or self._conn_target != target:
            if self._conn is not None:
                self._conn.close()
            self._conn = AsyncKafkaConnection(reg.host, reg.port,
                                              f"floodmark-replica-{self.manager.node_id}",
                                              self.manager.security)
            self._conn_target = target
        return self._conn

    async def _wait_for_change(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout_s)
        self.changed.clear()

    async def _run(self) -> None:
        """Drive the node's fetch loop (``replication.fetcher.FetchLoop``): send what it says
        is due, hand it the answer, and wait until its next deadline or new metadata."""
        ps = self.ps
        loop = self.loop
        while not self._stopped and not self.manager.closing:
            out: FetchToSend | None = None
            try:
                now = self.manager.now_ms()
                refused_s = self.manager.logins.wait_s(ps.core.leader_id)
                if refused_s > 0:
                    await self._wait_for_change(refused_s)
                    continue
                loop.tick(now)
                out = loop.poll(now)
                if out is None:
                    deadline = loop.next_deadline_ms()
                    wait_ms = IDLE_RETRY_MS if deadline is None else deadline - now
                    await self._wait_for_change(min(max(wait_ms, 0), IDLE_RETRY_MS) / 1000)
                    continue
                conn = self._connection(out.leader_id)
                if conn is None:
                    loop.request_failed(out.session, self.manager.now_ms())
                    continue
                if isinstance(out.request, EpochQuery):
                    await self._epoch_query(conn, out.session, out.request)
                else:
                    await self._fetch(conn, out.session, out.request)
            except asyncio.CancelledError:
                raise
            except AuthenticationFailed as exc:  # the leader refused this broker's login
                self.manager.logins.refused(ps.core.leader_id, str(exc),
                                            f"logging in {self.manager.security.describe()}")
            except _NotAuthorized as exc:
                self.manager.logins.refused(
                    ps.core.leader_id, str(exc),
                    f"logged in {self.manager.security.describe()}: the inter-broker "
                    "principal needs ClusterAction on the cluster, in super.users or granted")
            except RequestFailed as exc:
                log.info("partition %s leader_epoch=%d fetch from leader %d failed: %s",
                         ps.name, ps.leader_epoch, ps.core.leader_id, exc)
            except Exception:
                # A fetcher must outlive any one bad answer: log it, back off, fetch again.
                log.exception("partition %s leader_epoch=%d replica fetcher error", ps.name,
                              ps.leader_epoch)
                await self._wait_for_change(1.0)
            finally:
                if out is not None:  # no answer carried out: the loop backs off (else no-op)
                    loop.request_failed(out.session, self.manager.now_ms())

    async def _fetch(self, conn: AsyncKafkaConnection, session: int, f: FollowerFetch) -> None:
        ps = self.ps
        timage = self.manager.image().topics.get(ps.topic)
        if timage is None:
            raise RequestFailed(f"topic {ps.topic} not in metadata")
        body = {
            "replica_state": {"replica_id": self.manager.node_id,
                              "replica_epoch": f.broker_epoch},
            "max_wait": REPLICA_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": 0x7FFFFFFF, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "rack_id": "",
            "topics": [{"topic_id": timage.topic_id, "partitions": [{
                "partition": ps.partition, "current_leader_epoch": f.current_leader_epoch,
                "fetch_offset": f.fetch_offset, "last_fetched_epoch": f.last_fetched_epoch,
                "log_start_offset": f.log_start_offset,
                "partition_max_bytes": REPLICA_PARTITION_MAX_BYTES}]}],
            "forgotten_topics_data": [],
        }
        resp = await conn.request(1, FETCH_VERSION, body, REPLICA_MAX_WAIT_MS / 1000 + 3)
        if int(resp.error_code) != 0:
            raise RequestFailed(f"fetch error {int(resp.error_code)}")
        if len(resp.responses) != 1 or len(resp.responses[0].partitions) != 1:
            raise RequestFailed(f"fetch answer names {len(resp.responses)} topics")
        part = resp.responses[0].partitions[0]
        error = ErrorCode(int(part.error_code))
        if error in _REFUSALS:
            raise _NotAuthorized(f"Fetch as replica: {error.name}")
        self.manager.logins.accepted(ps.core.leader_id)
        div = part.diverging_epoch
        diverging = (EpochEndOffset(int(div.epoch), int(div.end_offset))
                     if div is not None and int(div.end_offset) >= 0 else None)
        records = part.records
        leo = -1
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            leo = await self._leader_log_end_offset(conn, f.current_leader_epoch)
        response = FetchResponse(
            error=error, request_leader_epoch=f.current_leader_epoch,
            high_watermark=int(part.high_watermark),
            log_start_offset=int(part.log_start_offset), log_end_offset=leo,
            diverging=diverging, has_records=bool(records), fetch_offset=f.fetch_offset)
        if self._stopped:
            return
        # The loop hands the answer to the driver (the core ignores it if the log moved since
        # the request was built: a truncation by new metadata) and says when to fetch again.
        self._log_action(self.loop.on_fetch_answer(session, response, records or b"",
                                                   self.manager.now_ms()))

    def _log_action(self, action: FollowerAction | None) -> None:
        if action is None:
            return
        if action.reason.startswith(APPEND_REJECTED):
            log.warning("partition %s leader_epoch=%d %s", self.ps.name, self.ps.leader_epoch,
                        action.reason)
        elif action.next_fetch is NextFetch.ON_NEW_METADATA:
            log.info("partition %s leader_epoch=%d fetching stopped (%s) until new metadata",
                     self.ps.name, self.ps.leader_epoch, action.reason)

    async def _leader_log_end_offset(self, conn: AsyncKafkaConnection, epoch: int) -> int:
        ps = self.ps
        resp = await conn.request(2, LIST_OFFSETS_VERSION, {
            "replica_id": self.manager.node_id, "isolation_level": 0,
            "topics": [{"name": ps.topic, "partitions": [{
                "partition_index": ps.partition, "current_leader_epoch": epoch,
                "timestamp": -1}]}]}, 10)
        part = resp.topics[0].partitions[0]
        return int(part.offset) if int(part.error_code) == 0 else -1

    async def _epoch_query(self, conn: AsyncKafkaConnection, session: int,
                           q: EpochQuery) -> None:
        ps = self.ps
        resp = await conn.request(23, EPOCH_QUERY_VERSION, {
            "replica_id": self.manager.node_id,
            "topics": [{"topic": ps.topic, "partitions": [{
                "partition": ps.partition, "current_leader_epoch": q.current_leader_epoch,
                "leader_epoch": q.leader_epoch}]}]}, 10)
        part = resp.topics[0].partitions[0]
        if self._stopped:
            return
        self._log_action(self.loop.on_epoch_answer(
            session, q.current_leader_epoch, ErrorCode(int(part.error_code)),
            EpochEndOffset(int(part.leader_epoch), int(part.end_offset)), self.manager.now_ms()))
