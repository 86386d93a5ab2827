"""Kafka's idempotent producer, over the one client (``ClusterClient``).

What makes it idempotent is Kafka's own rule (KIP-98): a producer id and epoch from
InitProducerId, and per partition a sequence number for the first record of every batch. A batch
is built once; when its answer is lost or says "retry" (a leader moved, a broker died, a request
timed out), the very same bytes, with the same sequence, go to the partition's current leader,
and the leader that already has that sequence answers DUPLICATE_SEQUENCE_NUMBER (or the first
answer again) instead of writing it twice. ``acks=all``: an answer means the batch is in every
in-sync replica.

As Kafka's producer, idempotence needs ``acks=all``: with ``acks=1`` (the leader's answer) or
``acks=0`` (no answer at all) the batches carry no producer id, and a retried batch may be
written twice (at least once).

Batches go as soon as they are closed (full, or by ``flush``), up to
``max_in_flight_requests_per_connection`` Produce requests in flight per leader connection and as
many batches per partition (Kafka's setting and default, 5, with idempotence; 1 with ``acks=1``,
where a retry could otherwise reorder batches), under Kafka's sequence rules
(``client/produce_window.py``): in sequence order, a failed flight resent whole, in order, with
the same bytes. Keyed records go to ``murmur2(key) % partitions`` (Kafka's
default partitioner, ``client.partitioner``); records without a key fill one partition until its
batch is closed (full, or sent by ``flush``), then the next (Kafka's sticky partitioner, KIP-480).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.client.cluster import ClusterClient, Retriable, Sent, error_text
from floodmark.client.connection import RequestFailed
from floodmark.client.partitioner import partition_for_key
from floodmark.client.produce_window import (
    MAX_IN_FLIGHT_IDEMPOTENT,
    RETRIABLE_PRODUCE,
    Batch,
    Outcome,
    PartitionWindow,
)
from floodmark.compression import Compression
from floodmark.constants import ACKS_ALL
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch

API_PRODUCE = 0
# v8 (Kafka 2.4+, KIP-467): the last non-flexible version, and the first whose answer says why a
# batch was refused (error_message, record_errors), which the CLI prints beside the code.
PRODUCE_VERSION = 8
API_INIT_PRODUCER_ID = 22
INIT_PRODUCER_ID_VERSION = 3  # v0-v2 fail on Tansu 0.6; v3 is Kafka 2.5+ (and floodmark)

BACKOFF_S = 0.05  # before a failed flight goes again (Kafka's retry.backoff.ms is 100)
MAX_BATCH_BYTES = 512 * 1024
"""A batch is closed at about this many bytes of keys, values and headers (Kafka's
``max.message.bytes`` default is 1 MiB)."""

Header = tuple[str, bytes | None]
PartitionKey = tuple[str, int]


class ProduceFailed(RequestFailed):
    """A batch the broker refused for good, or that no leader acknowledged in time."""


@dataclass
class _PartitionQueue:
    window: PartitionWindow
    next_sequence: int = 0
    open: list[Record] = field(default_factory=list)
    open_bytes: int = 0
    retry_at: float = 0.0  # after a failed flight: not before this (time.monotonic)

    @property
    def ready(self) -> list[Batch]:
        """The closed batches not acknowledged yet, in sequence order."""
        return self.window.unacked


@dataclass
class _Request:
    sent: Sent
    batches: dict[PartitionKey, Batch]


class IdempotentProducer:
    """``send`` buffers; ``flush`` delivers everything buffered and returns the records
    acknowledged per partition (with ``acks=0``: sent). Not thread-safe."""

    def __init__(self, cluster: ClusterClient, *, acks: int = ACKS_ALL,
                 compression: Compression = Compression.NONE, timeout_ms: int = 120_000,
                 request_timeout_ms: int = 30_000,
                 max_in_flight_requests_per_connection: int | None = None) -> None:
        """``max_in_flight_requests_per_connection``: Kafka's setting; default 5 with
        ``acks=all`` (idempotent), else 1 (with ``acks=1`` a retried batch could overtake a later
        one)."""
        if acks not in (0, 1, ACKS_ALL):
            raise ValueError(f"acks {acks}: one of 0, 1, -1 (all)")
        in_flight = max_in_flight_requests_per_connection
        if in_flight is None:
            in_flight = MAX_IN_FLIGHT_IDEMPOTENT if acks == ACKS_ALL else 1
        if not 1 <= in_flight <= MAX_IN_FLIGHT_IDEMPOTENT:
            raise ValueError(f"max.in.flight.requests.per.connection {in_flight}: 1 to "
                             f"{MAX_IN_FLIGHT_IDEMPOTENT}")
        self.max_in_flight = in_flight
        self.cluster = cluster
        self.acks = acks
        self.idempotent = acks == ACKS_ALL
        self.compression = compression
        self.timeout_ms = timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._queues: dict[PartitionKey, _PartitionQueue] = {}
        self._robin: dict[str, int] = {}
        self._sticky_open: set[str] = set()  # topics whose sticky partition has an open batch
        self._requests: dict[int, deque[_Request]] = {}  # per leader, in send order
        self._acked: dict[PartitionKey, int] = {}  # since the last flush returned
        self._last_error = ""
        self.retries = 0
        """Batches sent again after a failed flight (Kafka's ``record-retry-total``, in batches)."""

    # -- identity ----------------------------------------------------------------------------
    def _init_producer_id(self) -> None:
        def ask() -> None:
            resp = self.cluster.request_any(API_INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, {
                "transactional_id": None, "transaction_timeout": 60_000,
                "producer_id": -1, "producer_epoch": -1})
            code = int(resp.error_code)
            if code:
                if code in RETRIABLE_PRODUCE or code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    raise Retriable(ErrorCode(code), "InitProducerId")
                raise ProduceFailed(f"InitProducerId: {error_text(code)}")
            self.producer_id = int(resp.producer_id)
            self.producer_epoch = int(resp.producer_epoch)
        self.cluster.retry(ask)

    # -- buffering ---------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
             headers: Sequence[Header] = (), partition: int | None = None,
             timestamp_ms: int | None = None) -> None:
        sticky = False
        if partition is None:
            count = self.cluster.partition_counts.get(topic) or self.cluster.partitions(topic)
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = self._robin.get(topic, 0) % count
                sticky = True
                self._sticky_open.add(topic)
        q = self._queues.get((topic, partition))
        if q is None:
            q = self._queues[(topic, partition)] = _PartitionQueue(
                PartitionWindow(self.max_in_flight))
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        q.open.append(Record(len(q.open), ts, key, value, tuple(headers)))
        q.open_bytes += 32 + len(key or b"") + len(value or b"")
        if headers:
            q.open_bytes += sum(len(k) + len(v or b"") + 8 for k, v in headers)
        if q.open_bytes >= MAX_BATCH_BYTES:
            self._close_batch(q)
            if sticky:
                self._next_sticky(topic)
            self._pump(wait=False)  # on its way while the next batch fills

    def _next_sticky(self, topic: str) -> None:
        """The sticky partition of unkeyed records moves on once its batch closes, as Kafka's."""
        self._sticky_open.discard(topic)
        self._robin[topic] = self._robin.get(topic, 0) + 1

    def _close_batch(self, q: _PartitionQueue) -> None:
        if not q.open:
            return
        if not self.idempotent:  # no producer id, no sequence: Kafka's acks=0/1 producer
            q.window.add(-1, len(q.open), build_batch(q.open, compression=self.compression))
            q.open, q.open_bytes = [], 0
            return
        if self.producer_id < 0:
            self._init_producer_id()
        data = build_batch(q.open, compression=self.compression, producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=q.next_sequence)
        q.window.add(q.next_sequence, len(q.open), data)
        q.next_sequence = (q.next_sequence + len(q.open)) & 0x7FFFFFFF  # wraps as Kafka's does
        q.open, q.open_bytes = [], 0

    # -- delivery ----------------------------------------------------------------------------
    def flush(self) -> dict[PartitionKey, int]:
        """Deliver every buffered record; raise ``ProduceFailed`` unless all are acknowledged.
        Returns the records acknowledged per partition since the last ``flush`` returned.

        A partition whose flight failed (a retriable answer, a lost connection: maybe written,
        maybe not) is sent again, whole and in order, after a back-off and fresh metadata."""
        for q in self._queues.values():
            self._close_batch(q)
        for topic in list(self._sticky_open):
            self._next_sticky(topic)
        deadline = time.monotonic() + self.timeout_ms / 1000
        self._last_error = ""
        while any(q.ready for q in self._queues.values()):
            if time.monotonic() >= deadline:
                self._abandon()
                left = sum(b.count for q in self._queues.values() for b in q.ready)
                raise ProduceFailed(f"{left} records not acknowledged within {self.timeout_ms} "
                                    f"ms; last error: {self._last_error or 'none'}")
            if not self._pump(wait=True):  # nothing in flight, nothing could go: back off
                waits = [q.retry_at for q in self._queues.values() if q.ready]
                if not waits:  # all went (acks=0: sent is all there is)
                    break
                time.sleep(min(max(0.0, min(waits) - time.monotonic()) or BACKOFF_S,
                               max(0.0, deadline - time.monotonic()), 1.0))
        acked, self._acked = self._acked, {}
        return acked

    def close(self) -> None:
        """Stop waiting for answers in flight (their connections are closed, so a client shared
        with others never reads an answer meant for this producer). After a successful
        ``flush`` there is none. Records not acknowledged stay buffered: a later ``flush``
        sends them again, the same batches with the same sequences."""
        self._abandon()

    def _pump(self, *, wait: bool) -> bool:
        """Send what the windows allow, then read answers: every answer already there and, with
        ``wait``, one that is not there yet (it blocks). Returns whether anything was in flight.
        """
        try:
            self._send_ready()
            busy = False
            for node, requests in list(self._requests.items()):
                while requests and (wait or self.cluster.answered(requests[0].sent)):
                    busy = True
                    self._receive(node, requests.popleft())
                    self._send_ready()
                    wait = False  # one blocking read per pump
            return busy or any(self._requests.values())
        except BaseException:  # a refusal, or an interrupt: the answers in flight are not read
            self._abandon()
            raise

    def _send_ready(self) -> None:
        """One Produce request per leader and round: the next batch of each partition it leads
        whose window allows one, while fewer than ``max_in_flight`` requests are in flight."""
        now = time.monotonic()
        while True:
            by_leader: dict[int, dict[PartitionKey, Batch]] = {}
            for tp, q in self._queues.items():
                if q.retry_at > now:
                    continue
                batch = q.window.next_to_send()
                if batch is None:
                    continue
                node = q.window.node
                if node is None:
                    try:
                        node = self.cluster.leader(*tp)
                    except (Retriable, RequestFailed) as exc:
                        self._last_error = str(exc)
                        q.retry_at = now + BACKOFF_S
                        continue
                if len(self._requests.get(node, ())) < self.max_in_flight:
                    by_leader.setdefault(node, {})[tp] = batch
            if not by_leader:
                return
            for node, batches in by_leader.items():
                self._send(node, batches)

    def _send(self, node: int, batches: dict[PartitionKey, Batch]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append({"index": partition, "records": batch.data})
        body = {"transactional_id": None, "acks": self.acks, "timeout": self.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]}
        for tp, batch in batches.items():
            self._queues[tp].window.sent(batch, node)
        if self.acks == 0:  # the broker sends no answer: sent is all we can know
            try:
                self.cluster.send_node(node, API_PRODUCE, PRODUCE_VERSION, body)
            except (Retriable, RequestFailed) as exc:
                self._lost(node, [batches], f"broker {node}: {exc}")
                return
            for tp, batch in batches.items():
                self._outcome(tp, batch, 0, None)
            return
        try:
            sent = self.cluster.send_request(node, API_PRODUCE, PRODUCE_VERSION, body)
        except (Retriable, RequestFailed) as exc:  # maybe written, maybe not
            self._lost(node, [batches], f"broker {node}: {exc}")
            return
        self._requests.setdefault(node, deque()).append(_Request(sent, batches))

    def _receive(self, node: int, request: _Request) -> None:
        try:
            resp = self.cluster.receive(request.sent)
        except (Retriable, RequestFailed) as exc:  # this answer and every later one are lost
            self._lost(node, [request.batches], f"broker {node}: {exc}")
            return
        answers = {(str(t.name), int(p.index)): (int(p.error_code), _refusal_message(p))
                   for t in resp.responses for p in t.partition_responses}
        for tp, batch in request.batches.items():
            code, message = answers.get(tp, (int(ErrorCode.NETWORK_EXCEPTION), "no answer"))
            self._outcome(tp, batch, code, message)

    def _outcome(self, tp: PartitionKey, batch: Batch, code: int, message: str | None) -> None:
        q = self._queues[tp]
        outcome = q.window.answered(batch, code)
        if outcome is Outcome.ACKNOWLEDGED:
            self._acked[tp] = self._acked.get(tp, 0) + batch.count
        elif outcome is Outcome.RETRY:
            self.retries += 1
            self._last_error = f"{tp[0]}-{tp[1]}: {error_text(code, message)}"
            self._retry_later(tp)
        else:
            raise ProduceFailed(f"produce to {tp[0]}-{tp[1]}: {error_text(code, message)}")

    def _lost(self, node: int, batches: list[dict[PartitionKey, Batch]], error: str) -> None:
        """The connection to ``node`` broke: the answers to ``batches`` and to every request
        still in flight on it will not come (each batch may or may not be written)."""
        self._last_error = error
        requests = self._requests.pop(node, deque())
        for request in requests:
            self.cluster.drop_pipeline(request.sent)
        for sent in [*batches, *(r.batches for r in requests)]:
            for tp in sent:
                gone = self._queues[tp].window.lost()
                if gone:
                    self.retries += len(gone)
                    self._retry_later(tp)
        requests.clear()  # a loop still holding this deque reads no more from it

    def _retry_later(self, tp: PartitionKey) -> None:
        self.cluster.leaders.pop(tp, None)  # ask for its leader again
        self._queues[tp].retry_at = time.monotonic() + BACKOFF_S

    def _abandon(self) -> None:
        """Give up the answers in flight (an error ends the flush): their connections are
        closed, so no later request reads an earlier one's answer; their batches go again."""
        for node in list(self._requests):
            self._lost(node, [], self._last_error)


def _refusal_message(p: Any) -> str | None:
    """A partition answer's error_message, else its first record error's (KIP-467)."""
    message = getattr(p, "error_message", None)
    if message:
        return str(message)
    for record_error in getattr(p, "record_errors", None) or ():
        if record_error.batch_index_error_message:
            return str(record_error.batch_index_error_message)
    return None
