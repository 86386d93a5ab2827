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

Batches of one partition go one at a time (the next only after the previous is acknowledged), so
sequences reach each leader in order. Keyed records go to ``murmur2(key) % partitions`` (Kafka's
default partitioner, ``client.partitioner``); records without a key fill one partition until its
batch is closed (full, or sent by ``flush``), then the next (Kafka's sticky partitioner, KIP-480).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.client.cluster import ClusterClient, Retriable, error_text
from floodmark.client.connection import RequestFailed
from floodmark.client.partitioner import partition_for_key
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

MAX_BATCH_BYTES = 512 * 1024
"""A batch is closed at about this many bytes of keys, values and headers (Kafka's
``max.message.bytes`` default is 1 MiB)."""

RETRIABLE_PRODUCE = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION,
))

Header = tuple[str, bytes | None]
PartitionKey = tuple[str, int]


class ProduceFailed(RequestFailed):
    """A batch the broker refused for good, or that no leader acknowledged in time."""


@dataclass
class _Batch:
    base_sequence: int
    count: int
    data: bytes


@dataclass
class _PartitionQueue:
    next_sequence: int = 0
    open: list[Record] = field(default_factory=list)
    open_bytes: int = 0
    ready: list[_Batch] = field(default_factory=list)


class IdempotentProducer:
    """``send`` buffers; ``flush`` delivers everything buffered and returns the records
    acknowledged per partition (with ``acks=0``: sent). Not thread-safe."""

    def __init__(self, cluster: ClusterClient, *, acks: int = ACKS_ALL,
                 compression: Compression = Compression.NONE, timeout_ms: int = 120_000,
                 request_timeout_ms: int = 30_000) -> None:
        if acks not in (0, 1, ACKS_ALL):
            raise ValueError(f"acks {acks}: one of 0, 1, -1 (all)")
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
            q = self._queues[(topic, partition)] = _PartitionQueue()
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        q.open.append(Record(len(q.open), ts, key, value, tuple(headers)))
        q.open_bytes += 32 + len(key or b"") + len(value or b"") + sum(
            len(k) + len(v or b"") + 8 for k, v in headers)
        if q.open_bytes >= MAX_BATCH_BYTES:
            self._close_batch(q)
            if sticky:
                self._next_sticky(topic)

    def _next_sticky(self, topic: str) -> None:
        """The sticky partition of unkeyed records moves on once its batch closes, as Kafka's."""
        self._sticky_open.discard(topic)
        self._robin[topic] = self._robin.get(topic, 0) + 1

    def _close_batch(self, q: _PartitionQueue) -> None:
        if not q.open:
            return
        if not self.idempotent:  # no producer id, no sequence: Kafka's acks=0/1 producer
            q.ready.append(_Batch(-1, len(q.open), build_batch(q.open,
                                                               compression=self.compression)))
            q.open, q.open_bytes = [], 0
            return
        if self.producer_id < 0:
            self._init_producer_id()
        data = build_batch(q.open, compression=self.compression, producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=q.next_sequence)
        q.ready.append(_Batch(q.next_sequence, len(q.open), data))
        q.next_sequence = (q.next_sequence + len(q.open)) & 0x7FFFFFFF  # wraps as Kafka's does
        q.open, q.open_bytes = [], 0

    # -- delivery ----------------------------------------------------------------------------
    def flush(self) -> dict[PartitionKey, int]:
        """Deliver every buffered record; raise ``ProduceFailed`` unless all are acknowledged.

        Each round sends the oldest unacknowledged batch of every partition, grouped by leader;
        a retriable answer or a lost connection keeps the batch (same bytes, same sequence) for
        the next round, after fresh metadata."""
        for q in self._queues.values():
            self._close_batch(q)
        for topic in list(self._sticky_open):
            self._next_sticky(topic)
        acked: dict[PartitionKey, int] = {}
        deadline = time.monotonic() + self.timeout_ms / 1000
        backoff_s = 0.05
        while True:
            pending = {tp: q.ready[0] for tp, q in self._queues.items() if q.ready}
            if not pending:
                return acked
            last_error = ""
            by_leader: dict[int, list[PartitionKey]] = {}
            for tp in pending:
                try:
                    by_leader.setdefault(self.cluster.leader(*tp), []).append(tp)
                except (Retriable, RequestFailed) as exc:
                    last_error = str(exc)
            progressed = False
            for leader, tps in by_leader.items():
                try:
                    codes = self._produce(leader, {tp: pending[tp] for tp in tps})
                except (Retriable, RequestFailed) as exc:  # no answer: maybe written, maybe not
                    last_error = f"broker {leader}: {exc}"
                    continue
                for tp, (code, message) in codes.items():
                    if code in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                        batch = self._queues[tp].ready.pop(0)
                        acked[tp] = acked.get(tp, 0) + batch.count
                        progressed = True
                    elif code in RETRIABLE_PRODUCE:
                        last_error = f"{tp[0]}-{tp[1]}: {error_text(code, message)}"
                    else:
                        raise ProduceFailed(f"produce to {tp[0]}-{tp[1]}: "
                                            f"{error_text(code, message)}")
            if progressed:
                backoff_s = 0.05
                continue
            if time.monotonic() >= deadline:
                left = sum(b.count for q in self._queues.values() for b in q.ready)
                raise ProduceFailed(f"{left} records not acknowledged within {self.timeout_ms} "
                                    f"ms; last error: {last_error or 'none'}")
            self.cluster.leaders.clear()  # ask for the leaders again
            time.sleep(backoff_s)
            backoff_s = min(1.0, backoff_s * 2)

    def _produce(self, leader: int, batches: dict[PartitionKey, _Batch]
                 ) -> dict[PartitionKey, tuple[int, str | None]]:
        """Each partition's error code and the broker's words about it (None where it said
        nothing)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append({"index": partition, "records": batch.data})
        body = {"transactional_id": None, "acks": self.acks, "timeout": self.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]}
        if self.acks == 0:  # the broker sends no answer: sent is all we can know
            self.cluster.send_node(leader, API_PRODUCE, PRODUCE_VERSION, body)
            return dict.fromkeys(batches, (0, None))
        resp = self.cluster.request_node(leader, API_PRODUCE, PRODUCE_VERSION, body)
        return {(str(t.name), int(p.index)): (int(p.error_code), _refusal_message(p))
                for t in resp.responses for p in t.partition_responses}


def _refusal_message(p: Any) -> str | None:
    """A partition answer's error_message, else its first record error's (KIP-467)."""
    message = getattr(p, "error_message", None)
    if message:
        return str(message)
    for record_error in getattr(p, "record_errors", None) or ():
        if record_error.batch_index_error_message:
            return str(record_error.batch_index_error_message)
    return None
