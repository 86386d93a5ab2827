"""The transaction coordinator's driver: the I/O around ``replication.transactions``.

The core decides; this carries its effects out on the broker:

* ``WriteTxnLog``: one record appended to the ``__transaction_state`` partition through the one
  leader produce path with acks=all (the answer waits for the high watermark), then the outcome
  goes back to the core;
* ``SendMarkers``: WriteTxnMarkers (API key 27) to each partition's leader, over the wire with
  floodmark's client (``client.connection.AsyncKafkaConnection``), the coordinator's own broker
  included; partitions are retried, leaders looked up again, until every one answered; a
  partition whose topic was deleted needs no marker;
* ``Reply``: the request parked on a future is answered.

Which transactional ids it serves follows leadership: :meth:`TransactionCoordinatorDriver.refresh`
(called after every metadata change) loads a ``__transaction_state`` partition this broker now
leads by replaying its log, and drops one it no longer leads (its marker senders stop; the new
leader resends). Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the core
looks for transactions past their timeout.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Protocol

from floodmark.broker.peer_logins import PeerLogins
from floodmark.client.connection import AsyncKafkaConnection, AuthenticationFailed, RequestFailed
from floodmark.client.transactions import (
    API_WRITE_TXN_MARKERS,
    WRITE_TXN_MARKERS_VERSION,
    write_txn_markers_body,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import TRANSACTION_STATE_TOPIC, coordinator_partition
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import (
    RETRIABLE_MARKER_ERRORS,
    Effect,
    Reply,
    SendMarkers,
    TxnCoordinator,
    WriteTxnLog,
)
from floodmark.replication.transactions.state import Partition, TxnState

if TYPE_CHECKING:
    from floodmark.broker.config import BrokerConfig
    from floodmark.broker.metadata import Controller
    from floodmark.broker.partition_state import PartitionState
    from floodmark.broker.replica_fetcher import ReplicaManager
    from floodmark.broker.storage_glue import Storage

log = logging.getLogger(__name__)

# A leader answers WriteTxnMarkers once its marker is below the HW, or after 30 s
# (``handlers.txn_markers.MARKER_TIMEOUT_MS``): waiting less would send the marker again while
# the first one is still on its way to the followers.
MARKER_REQUEST_TIMEOUT_S = 35.0
MARKER_BACKOFF_MS = (20, 1000)  # first retry, most between retries
LOG_WRITE_TIMEOUT_MS = 10_000
API_ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4
VERIFY_TIMEOUT_S = 5.0


class AppendResult(Protocol):
    """What the leader produce path answers (``wire.hot.ProducePartitionResult`` fits)."""

    error_code: int
    pending: asyncio.Future[tuple[ErrorCode, int]] | None


Append = Callable[[str, int, bytes, int, int, int], AppendResult]


class BrokerAddresses(Protocol):
    def broker_address(self, node_id: int) -> tuple[str, int] | None: ...


class CoordinatorHost(Protocol):
    """What the driver sees of its broker."""

    node_id: int
    config: BrokerConfig
    controller: Controller
    storage: Storage
    partitions: dict[tuple[str, int], PartitionState]
    replicas: ReplicaManager | None

    @property
    def membership(self) -> BrokerAddresses: ...
    def now_ms(self) -> int: ...


class TransactionCoordinatorDriver:
    def __init__(self, host: CoordinatorHost, append: Append, *, max_timeout_ms: int,
                 cleanup_interval_ms: int, expiration_ms: int = 604_800_000) -> None:
        self.host = host
        self._append = append
        self.core = TxnCoordinator(max_timeout_ms=max_timeout_ms,
                                   allocate_producer_id=self._allocate_producer_id,
                                   expiration_ms=expiration_ms)
        self._cleanup_interval_ms = cleanup_interval_ms
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Reply]] = {}
        self._senders: dict[str, asyncio.Task[None]] = {}  # transactional id -> marker sender
        self._conns: dict[int, tuple[AsyncKafkaConnection, asyncio.Lock]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._deferred: list[Effect] = []  # effects decided before the event loop ran
        self._spare_pid: int | None = None  # a producer id taken ahead for the core's port
        self._running = False
        self.markers_sent = 0  # partitions that answered a marker (for tests and metrics)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._running = True
        self._spawn(self._cleanup_loop())
        deferred, self._deferred = self._deferred, []
        self._apply(deferred)

    def stop(self) -> None:
        self._running = False
        for task in [*self._tasks, *self._senders.values()]:
            task.cancel()
        for conn, _ in self._conns.values():
            conn.close()
        self._conns.clear()
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _allocate_producer_id(self) -> int:
        """The core's port (synchronous): the producer id taken from the controller ahead of
        the decision (``run``); none in hand is the retriable COORDINATOR_NOT_AVAILABLE."""
        pid, self._spare_pid = self._spare_pid, None
        if pid is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             "no producer id from the controller yet")
        return pid

    async def _have_producer_id(self) -> None:
        """One producer id in hand before a decision that may need it. Awaited (the
        controller may be slow: only this request waits, never the event loop)."""
        if self._spare_pid is not None:
            return
        try:
            pid = await self.host.controller.allocate_producer_id()
        except KafkaError as exc:
            log.warning("transaction coordinator: no producer id from the controller: %s", exc)
            return
        if self._spare_pid is None:
            self._spare_pid = pid

    # -- which partitions this coordinator serves ----------------------------------------------------
    def txn_partition(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id`` (-1: no topic yet)."""
        meta = self.host.controller.topics().get(TRANSACTION_STATE_TOPIC)
        if meta is None or not meta.partitions:
            return -1
        return coordinator_partition(transactional_id, len(meta.partitions))

    def refresh(self) -> None:
        """Load the ``__transaction_state`` partitions this broker now leads (or leads under a
        new leader epoch), unload the ones it no longer leads."""
        effects: list[Effect] = []
        led: dict[int, PartitionState] = {}
        for (topic, index), ps in list(self.host.partitions.items()):
            if topic == TRANSACTION_STATE_TOPIC and ps.core.is_leader:
                led[index] = ps
        loaded = dict(self.core.loaded())
        for index in loaded:
            if index not in led:
                log.info("transaction coordinator: %s-%d no longer led here, unloaded",
                         TRANSACTION_STATE_TOPIC, index)
                self._stop_senders(index)
                effects.extend(self.core.unload(index))
        for index, ps in led.items():
            if loaded.get(index) == ps.leader_epoch:
                continue
            self._stop_senders(index)
            try:
                replayed = txn_log.replay(self.host.storage.read_all(ps.log, ps.log_end_offset))
            except KafkaError as exc:
                log.error("partition %s leader_epoch=%d: cannot load transactions: %s",
                          ps.name, ps.leader_epoch, exc)
                continue
            in_flight = sum(1 for m in replayed.transactions.values()
                            if m.state.is_prepare or m.state is TxnState.ONGOING)
            log.info("partition %s leader_epoch=%d transaction coordinator: loaded %d "
                     "transactional ids (%d records, %d unreadable), %d in flight", ps.name,
                     ps.leader_epoch, len(replayed.transactions), replayed.records,
                     replayed.unreadable, in_flight)
            effects.extend(self.core.load(index, ps.leader_epoch, replayed.transactions,
                                          self.host.now_ms()))
        self._apply(effects)

    def _stop_senders(self, txn_partition: int) -> None:
        for txn_id, task in list(self._senders.items()):
            if self.txn_partition(txn_id) == txn_partition:
                task.cancel()
                del self._senders[txn_id]

    # -- requests ---------------------------------------------------------------------------------
    async def run(self, decide: Callable[[int], list[Effect]]) -> Reply:
        """Hand the core one request (``decide(request_id)``); wait for its answer."""
        await self._have_producer_id()
        request_id = next(self._ids)
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = fut
        try:
            self._apply(decide(request_id))
        except KafkaError as exc:  # e.g. no producer id from the controller now
            self._waiting.pop(request_id, None)
            log.warning("transaction coordinator: %s", exc)
            return Reply(request_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return await fut

    # -- effects ----------------------------------------------------------------------------------
    def _apply(self, effects: Iterable[Effect]) -> None:
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            if isinstance(effect, Reply):
                fut = self._waiting.pop(effect.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(effect)
            elif not self._running:
                self._deferred.append(effect)
            elif isinstance(effect, WriteTxnLog):
                queue.extend(self._write(effect))
            elif isinstance(effect, SendMarkers):
                old = self._senders.pop(effect.transactional_id, None)
                if old is not None:
                    old.cancel()
                self._senders[effect.transactional_id] = self._spawn(self._send_markers(effect))

    def _write(self, effect: WriteTxnLog) -> list[Effect]:
        m = effect.metadata
        now = self.host.now_ms()
        result = self._append(TRANSACTION_STATE_TOPIC, effect.txn_partition,
                              txn_log.build_record_batch(m, now), -1, now, LOG_WRITE_TIMEOUT_MS)
        if result.pending is None:
            return self.core.on_log_written(m.transactional_id, ErrorCode(result.error_code),
                                            self.host.now_ms())
        self._spawn(self._await_write(m.transactional_id, m.state.kafka_name, result.pending))
        return []

    async def _await_write(self, txn_id: str, state: str,
                           pending: asyncio.Future[tuple[ErrorCode, int]]) -> None:
        error, _offset = await pending
        if error is not ErrorCode.NONE:
            log.warning("transaction coordinator: %s of %r not written: %s", state, txn_id,
                        error.name)
        self._apply(self.core.on_log_written(txn_id, error, self.host.now_ms()))

    async def _cleanup_loop(self) -> None:
        while self._running:
            await asyncio.sleep(self._cleanup_interval_ms / 1000)
            effects = self.core.tick(self.host.now_ms())
            for effect in effects:
                if (isinstance(effect, WriteTxnLog)
                        and effect.metadata.state is TxnState.PREPARE_ABORT):
                    log.info("transaction coordinator: transaction of %r timed out after %d ms: "
                             "aborting (producer id %d fenced to epoch %d)",
                             effect.metadata.transactional_id, effect.metadata.txn_timeout_ms,
                             effect.metadata.producer_id, effect.metadata.producer_epoch)
            self._apply(effects)

    # -- KIP-890 part 1: verification for partition leaders ---------------------------------------
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[Partition]) -> dict[Partition, ErrorCode]:
        """Is each partition in the producer's ongoing transaction? Asked of the transactional
        id's coordinator (this broker's core, or AddPartitionsToTxn v4 ``verify_only`` over
        the wire). A coordinator that cannot be asked: NOT_ENOUGH_REPLICAS (the producer
        retries, as Kafka answers)."""
        unknown = dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        p = self.txn_partition(transactional_id)
        if p in self.core.loaded():
            return self.core.verify_partitions(p, transactional_id, producer_id,
                                               producer_epoch, partitions)
        meta = self.host.controller.topics().get(TRANSACTION_STATE_TOPIC)
        if meta is None or p < 0:
            return unknown
        node = int(meta.partitions[p].leader)
        held = self._connection(node) if node >= 0 else None
        if held is None or node == self.host.node_id:
            return unknown  # this broker leads it but has not loaded it yet
        conn, lock = held
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}
        try:
            async with lock:
                resp = await conn.request(API_ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body,
                                          VERIFY_TIMEOUT_S)
        except RequestFailed as exc:
            log.debug("transaction verification at broker %d failed: %s", node, exc)
            return unknown
        out = dict(unknown)
        for result in resp.results_by_transaction:
            for t in result.topic_results:
                for r in t.results_by_partition:
                    out[(str(t.name), int(r.partition_index))] = ErrorCode(
                        int(r.partition_error_code))
        return out

    # -- markers ----------------------------------------------------------------------------------
    def _leader_of(self, tp: Partition) -> int | None:
        """The partition's leader (-1: none now), None if the partition no longer exists."""
        meta = self.host.controller.topics().get(tp[0])
        if meta is None or not 0 <= tp[1] < len(meta.partitions):
            return None
        return int(meta.partitions[tp[1]].leader)

    @functools.cached_property
    def _logins(self) -> PeerLogins:
        """Brokers that refused this one's login: one line each (the simulator has no host
        and sends no markers over the wire, hence made on first use)."""
        return PeerLogins(self.host.node_id, "transaction markers")

    def _connection(self, node_id: int) -> tuple[AsyncKafkaConnection, asyncio.Lock] | None:
        address = self.host.membership.broker_address(node_id)
        if address is None:
            return None
        held = self._conns.get(node_id)
        if held is None or (held[0].host, held[0].port) != tuple(address):
            if held is not None:
                held[0].close()
            held = (AsyncKafkaConnection(address[0], address[1],
                                         f"floodmark-txn-coordinator-{self.host.node_id}",
                                         self.host.config.inter_broker_security),
                    asyncio.Lock())
            self._conns[node_id] = held
        return held

    async def _send_markers(self, effect: SendMarkers) -> None:
        remaining = set(effect.partitions)
        what = "COMMIT" if effect.committed else "ABORT"
        backoff_ms = MARKER_BACKOFF_MS[0]
        attempt = 0
        while remaining:
            if self.core.loaded().get(effect.txn_partition) != effect.coordinator_epoch:
                return  # no longer the coordinator: the new one sends them
            by_leader: dict[int, list[Partition]] = {}
            for tp in sorted(remaining):
                leader = self._leader_of(tp)
                if leader is None:
                    log.info("transaction coordinator: %s marker of %r: %s-%d no longer exists",
                             what, effect.transactional_id, *tp)
                    remaining.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            try:
                answers = await asyncio.gather(*(self._send_to(leader, parts, effect)
                                                 for leader, parts in by_leader.items()))
            except Exception:  # never leave a decided transaction without its markers
                log.exception("transaction coordinator: %s markers of %r: sending failed; "
                              "retrying", what, effect.transactional_id)
                answers = []
            for done in answers:
                remaining -= done
                self.markers_sent += len(done)
            if remaining:
                attempt += 1
                if attempt % 50 == 0:
                    log.warning("transaction coordinator: %s markers of %r: %d partition(s) "
                                "still without a marker after %d attempts: %s", what,
                                effect.transactional_id, len(remaining), attempt,
                                sorted(remaining))
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, MARKER_BACKOFF_MS[1])
        self._senders.pop(effect.transactional_id, None)
        self._apply(self.core.on_markers_written(effect.transactional_id, effect.producer_epoch,
                                                 self.host.now_ms()))

    async def _send_to(self, leader: int, parts: list[Partition],
                       effect: SendMarkers) -> set[Partition]:
        """One WriteTxnMarkers to ``leader``; the partitions that have their marker."""
        held = self._connection(leader)
        if held is None or self._logins.wait_s(leader) > 0:
            return set()
        conn, lock = held
        body = write_txn_markers_body(effect.producer_id, effect.producer_epoch,
                                      effect.committed, effect.coordinator_epoch, parts)
        try:
            async with lock:
                resp = await conn.request(API_WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                          MARKER_REQUEST_TIMEOUT_S)
        except AuthenticationFailed as exc:  # the leader refused this broker's login
            self._logins.refused(leader, str(exc), "logging in "
                                 f"{self.host.config.inter_broker_security.describe()}")
            return set()
        except RequestFailed as exc:
            log.debug("transaction coordinator: WriteTxnMarkers to broker %d failed: %s",
                      leader, exc)
            return set()
        self._logins.accepted(leader)
        done: set[Partition] = set()
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    tp = (str(t.name), int(p.partition_index))
                    code = int(p.error_code)
                    if code == ErrorCode.NONE:
                        done.add(tp)
                    elif code not in RETRIABLE_MARKER_ERRORS:
                        log.error("transaction coordinator: %s marker of %r on %s-%d refused "
                                  "by broker %d: %s; not retried",
                                  "COMMIT" if effect.committed else "ABORT",
                                  effect.transactional_id, tp[0], tp[1], leader,
                                  _name(code))
                        done.add(tp)
        return done


@functools.cache
def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
