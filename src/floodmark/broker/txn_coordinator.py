"""The broker's transaction coordinator: ``replication.transactions``' core and driver, with the
broker's ports.

The core decides and the driver (``TxnDriver``) carries out every decision, retries markers and
keeps the coordinator's timers; this shell only adapts the ports:

* the log: a record is appended to its ``__transaction_state`` partition through the one leader
  produce path with acks=all (the answer waits for the high watermark);
* the network: WriteTxnMarkers (API key 27) to a partition's leader over the wire with
  floodmark's client (``client.connection.AsyncKafkaConnection``), the coordinator's own broker
  included; leaders are looked up in the controller's metadata;
* the clock: one task sleeps until ``TxnDriver.next_deadline_ms`` (or until woken by a new
  input) and ticks the driver;
* producer ids: taken from the controller ahead of a request (the core's port is synchronous).

Which transactional ids it serves follows leadership: :meth:`BrokerTxnCoordinator.refresh`
(called after every metadata change) loads a ``__transaction_state`` partition this broker now
leads by replaying its log, and drops one it no longer leads (the new leader resends its
markers). KIP-890 verification for partition leaders is answered here too (:meth:`verify`),
and, with transaction version 2 (KIP-890 part 2), the partitions a leader adds to a transaction
for a Produce v12 or TxnOffsetCommit v5 (``verify(..., add=True)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Protocol

from floodmark.broker.peer_connections import PeerConnections
from floodmark.broker.peer_logins import PeerLogins
from floodmark.client import (
    API_WRITE_TXN_MARKERS,
    WRITE_TXN_MARKERS_VERSION,
    AsyncKafkaConnection,
    AuthenticationFailed,
    RequestFailed,
    write_txn_markers_body,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import TRANSACTION_STATE_TOPIC, coordinator_partition
from floodmark.replication import (
    MarkerPolicy,
    Reply,
    SendMarkers,
    TxnCoordinator,
    TxnDriver,
    TxnEffect,
    TxnMetadata,
    TxnPartition,
    TxnState,
)
from floodmark.replication import log as txn_log

if TYPE_CHECKING:
    from floodmark.broker.config import BrokerConfig
    from floodmark.broker.metadata import Controller
    from floodmark.broker.partition_state import PartitionState
    from floodmark.broker.replica_fetcher import ReplicaManager
    from floodmark.broker.storage_glue import Storage

log = logging.getLogger(__name__)

# A leader answers WriteTxnMarkers once its marker is below the HW, or after 30 s
# (``handlers.txn_markers.MARKER_TIMEOUT_MS``): the driver waits a little longer than that.
MARKERS = MarkerPolicy(request_timeout_ms=35_000, backoff_ms=20, backoff_max_ms=1_000)
LOG_WRITE_TIMEOUT_MS = 10_000
API_ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4
ADD_VERSION = 5  # a broker adding partitions for a client of transaction version 2
# Kafka 4.0 (KAFKA-18654) retries an add the coordinator answers CONCURRENT_TRANSACTIONS (the
# previous transaction's markers are still going out, the usual case right after a commit) in
# the broker rather than making the producer back off its 100 ms: every 20 ms for at most
# 100 ms (the defaults of add.partitions.to.txn.retry.backoff.ms and ...backoff.max.ms).
ADD_RETRY_BACKOFF_MS = 20
ADD_RETRY_MAX_MS = 100
VERIFY_TIMEOUT_S = 5.0


class AppendResult(Protocol):
    """What the leader produce path answers (``wire.hot.ProducePartitionResult`` fits)."""

    error_code: int
    pending: asyncio.Future[tuple[ErrorCode, int]] | None


Append = Callable[[str, int, bytes, int, int, int], AppendResult]


class BrokerAddresses(Protocol):
    def broker_address(self, node_id: int) -> tuple[str, int] | None: ...


class CoordinatorHost(Protocol):
    """What the coordinator sees of its broker."""

    node_id: int
    config: BrokerConfig
    controller: Controller
    storage: Storage
    partitions: dict[tuple[str, int], PartitionState]
    replicas: ReplicaManager | None

    @property
    def membership(self) -> BrokerAddresses: ...
    def now_ms(self) -> int: ...


class BrokerTxnCoordinator:
    def __init__(self, host: CoordinatorHost, append: Append, *, max_timeout_ms: int,
                 cleanup_interval_ms: int, expiration_ms: int = 604_800_000) -> None:
        self.host = host
        self._append = append
        self.driver = TxnDriver(
            TxnCoordinator(max_timeout_ms=max_timeout_ms,
                           allocate_producer_id=self._allocate_producer_id,
                           expiration_ms=expiration_ms),
            self, cleanup_interval_ms=cleanup_interval_ms, markers=MARKERS)
        self._waiting: set[asyncio.Future[Reply]] = set()
        self._conns = PeerConnections(f"floodmark-txn-coordinator-{host.node_id}",
                                      host.membership.broker_address,
                                      lambda: host.config.inter_broker_security)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._spare_pid: int | None = None  # a producer id taken ahead for the core's port
        self._running = False

    @property
    def core(self) -> TxnCoordinator:
        return self.driver.core

    @property
    def markers_sent(self) -> int:
        return self.driver.markers_sent

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._running = True
        self._spawn(self._timer())
        self._after(self.driver.start)

    def stop(self) -> None:
        self._running = False
        self.driver.stop()
        for task in self._tasks:
            task.cancel()
        self._conns.close()
        for fut in self._waiting:
            if not fut.done():
                fut.cancel()

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _after(self, call: Callable[[int], None]) -> None:
        """Call the driver with the time now, then let the timer see its new deadline."""
        call(self.host.now_ms())
        self._wake.set()

    async def _timer(self) -> None:
        while self._running:
            deadline = self.driver.next_deadline_ms()
            delay_s = None if deadline is None else max(0, deadline - self.host.now_ms()) / 1000
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_s)
            self.driver.tick(self.host.now_ms())

    # -- the core's producer id port ----------------------------------------------------------------
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
        led: dict[int, PartitionState] = {}
        for (topic, index), ps in list(self.host.partitions.items()):
            if topic == TRANSACTION_STATE_TOPIC and ps.core.is_leader:
                led[index] = ps
        loaded = dict(self.core.loaded())
        for index in loaded:
            if index not in led:
                log.info("transaction coordinator: %s-%d no longer led here, unloaded",
                         TRANSACTION_STATE_TOPIC, index)
                self._after(functools.partial(self.driver.unload, index))
        for index, ps in led.items():
            if loaded.get(index) == ps.leader_epoch:
                continue
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
            self._after(functools.partial(self.driver.load, index, ps.leader_epoch,
                                          replayed.transactions))

    # -- requests ---------------------------------------------------------------------------------
    async def run(self, decide: Callable[[int], list[TxnEffect]]) -> Reply:
        """Hand the core one request (``decide(request_id)``); wait for its answer."""
        await self._have_producer_id()
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting.add(fut)
        fut.add_done_callback(self._waiting.discard)

        def answer(reply: Reply) -> None:
            if not fut.done():
                fut.set_result(reply)

        try:
            self._after(functools.partial(self.driver.request, decide, answer))
        except KafkaError as exc:  # e.g. no producer id from the controller now
            log.warning("transaction coordinator: %s", exc)
            return Reply(-1, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return await fut

    # -- the driver's ports -------------------------------------------------------------------------
    def append(self, txn_partition: int, metadata: TxnMetadata, batch: bytes,
               now_ms: int) -> ErrorCode | None:
        result = self._append(TRANSACTION_STATE_TOPIC, txn_partition, batch, -1, now_ms,
                              LOG_WRITE_TIMEOUT_MS)
        if result.pending is None:
            return ErrorCode(result.error_code)
        self._spawn(self._await_write(metadata.transactional_id, result.pending))
        return None

    async def _await_write(self, txn_id: str,
                           pending: asyncio.Future[tuple[ErrorCode, int]]) -> None:
        error, _offset = await pending
        self._after(functools.partial(self.driver.log_written, txn_id, error))

    def leader_of(self, partition: TxnPartition) -> int | None:
        meta = self.host.controller.topics().get(partition[0])
        if meta is None or not 0 <= partition[1] < len(meta.partitions):
            return None
        return int(meta.partitions[partition[1]].leader)

    def send_markers(self, attempt: int, leader: int, markers: SendMarkers,
                     partitions: tuple[TxnPartition, ...]) -> bool:
        held = self._conns.get(leader)
        if held is None or self._logins.wait_s(leader) > 0:
            return False
        self._spawn(self._send_markers(attempt, leader, held, markers, partitions))
        return True

    @functools.cached_property
    def _logins(self) -> PeerLogins:
        """Brokers that refused this one's login: one line each (the simulator has no host
        and sends no markers over the wire, hence made on first use)."""
        return PeerLogins(self.host.node_id, "transaction markers")

    def report(self, level: int, line: str) -> None:
        log.log(level, "%s", line)

    async def _send_markers(self, attempt: int, leader: int,
                            held: tuple[AsyncKafkaConnection, asyncio.Lock],
                            markers: SendMarkers, partitions: tuple[TxnPartition, ...]) -> None:
        """One WriteTxnMarkers to ``leader``; its answer (or its failure) to the driver."""
        conn, lock = held
        body = write_txn_markers_body(markers.producer_id, markers.producer_epoch,
                                      markers.committed, markers.coordinator_epoch, partitions)
        try:
            async with lock:
                resp = await conn.request(API_WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                          MARKERS.request_timeout_ms / 1000)
        except AuthenticationFailed as exc:  # the leader refused this broker's login
            self._logins.refused(leader, str(exc), "logging in "
                                 f"{self.host.config.inter_broker_security.describe()}")
            self._after(functools.partial(self.driver.markers_failed, attempt))
            return
        except RequestFailed as exc:
            log.debug("transaction coordinator: WriteTxnMarkers to broker %d failed: %s",
                      leader, exc)
            self._after(functools.partial(self.driver.markers_failed, attempt))
            return
        except Exception:  # never leave a decided transaction without its markers
            log.exception("transaction coordinator: WriteTxnMarkers to broker %d failed; "
                          "retrying", leader)
            self._after(functools.partial(self.driver.markers_failed, attempt))
            return
        self._logins.accepted(leader)
        answers = {(str(t.name), int(p.partition_index)): int(p.error_code)
                   for marker in resp.markers for t in marker.topics for p in t.partitions}
        self._after(functools.partial(self.driver.markers_answered, attempt, answers))

    # -- KIP-890: verification (part 1) and the implicit add (part 2) for partition leaders -----
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TxnPartition], *, add: bool = False
                     ) -> dict[TxnPartition, ErrorCode]:
        """Is each partition in the producer's ongoing transaction? Or, ``add`` (transaction
        version 2: Produce v12, TxnOffsetCommit v5), put it there. Asked of the transactional
        id's coordinator (this broker's core, or AddPartitionsToTxn over the wire: v4
        ``verify_only``, v5 to add). A coordinator that cannot be asked: NOT_ENOUGH_REPLICAS
        (the producer retries, as Kafka answers). An add answered CONCURRENT_TRANSACTIONS is
        asked again here for a while (``ADD_RETRY_*``)."""
        answers = await self._verify_once(transactional_id, producer_id, producer_epoch,
                                          partitions, add)
        waited_ms = 0
        while add and waited_ms < ADD_RETRY_MAX_MS:
            busy = [tp for tp, e in answers.items() if e is ErrorCode.CONCURRENT_TRANSACTIONS]
            if not busy:
                break
            await asyncio.sleep(ADD_RETRY_BACKOFF_MS / 1000)
            waited_ms += ADD_RETRY_BACKOFF_MS
            answers.update(await self._verify_once(transactional_id, producer_id,
                                                   producer_epoch, busy, add))
        return answers

    async def _verify_once(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[TxnPartition], add: bool
                           ) -> dict[TxnPartition, ErrorCode]:
        unknown = dict.fromkeys(partitions, ErrorCode.NOT_ENOUGH_REPLICAS)
        p = self.txn_partition(transactional_id)
        if p in self.core.loaded():
            if not add:
                return self.core.verify_partitions(p, transactional_id, producer_id,
                                                   producer_epoch, partitions)
            core, now_ms = self.core, self.host.now_ms()
            reply = await self.run(lambda rid: core.add_partitions(
                rid, p, transactional_id, producer_id, producer_epoch, partitions, now_ms))
            return dict.fromkeys(partitions, reply.error)
        meta = self.host.controller.topics().get(TRANSACTION_STATE_TOPIC)
        if meta is None or p < 0:
            return unknown
        node = int(meta.partitions[p].leader)
        held = self._conns.get(node) if node >= 0 else None
        if held is None or node == self.host.node_id:
            return unknown  # this broker leads it but has not loaded it yet
        conn, lock = held
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": not add,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}
        try:
            async with lock:
                resp = await conn.request(API_ADD_PARTITIONS_TO_TXN,
                                          ADD_VERSION if add else VERIFY_VERSION, body,
                                          VERIFY_TIMEOUT_S)
        except RequestFailed as exc:
            log.debug("transaction %s at broker %d failed: %s",
                      "add" if add else "verification", node, exc)
            return unknown
        out = dict(unknown)
        for result in resp.results_by_transaction:
            for t in result.topic_results:
                for r in t.results_by_partition:
                    out[(str(t.name), int(r.partition_index))] = ErrorCode(
                        int(r.partition_error_code))
        return out
