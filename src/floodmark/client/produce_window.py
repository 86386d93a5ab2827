"""One partition's batches on their way to the leader, as Kafka's idempotent producer keeps them
(``RecordAccumulator``, ``Sender``, ``TransactionManager`` in the Java client): the rules alone,
no sockets and no clock, so a test can play any order of answers and failures against them.

- Batches are sent in sequence order, on one connection at a time (a partition whose batches are
  in flight stays on that connection until every answer is back), and a connection answers its
  requests in order; so a partition's answers come back in its sequence order.
- At most ``max_in_flight`` batches from the oldest unacknowledged one are sent (Kafka's
  ``max.in.flight.requests.per.connection``, at most 5 with idempotence): the broker keeps the
  sequences of a producer's last five batches per partition, so a resent batch that was written
  after all is still recognised as a duplicate.
- A batch is acknowledged by NONE or DUPLICATE_SEQUENCE_NUMBER (the broker already has it).
- A retriable error, or an answer lost with its connection, fails the partition's flight: nothing
  new is sent for it until its in-flight answers are all back, then every unacknowledged batch is
  sent again in order, the same bytes with the same sequences. The batches sent after a failed one
  may be refused OUT_OF_ORDER_SEQUENCE_NUMBER (their predecessor was not written): retriable then,
  and only then; OUT_OF_ORDER_SEQUENCE_NUMBER with no earlier failure in the flight, and any other
  error, is fatal.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from floodmark.errors import ErrorCode

ACKNOWLEDGED = frozenset({int(ErrorCode.NONE), int(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)})
RETRIABLE_PRODUCE = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION,
))
MAX_IN_FLIGHT_IDEMPOTENT = 5
"""Kafka's limit for ``max.in.flight.requests.per.connection`` with idempotence (and its
default): the broker de-duplicates a producer's last five batches per partition."""


@dataclass(eq=False)
class Batch:
    """A batch built once: ``ordinal`` counts the partition's batches (0, 1, 2...), ``data`` is
    what is sent, every time."""

    ordinal: int
    base_sequence: int
    count: int
    data: bytes


class Outcome(enum.Enum):
    ACKNOWLEDGED = "acknowledged"
    RETRY = "retry"  # stays unacknowledged: sent again in the partition's next flight
    FATAL = "fatal"


@dataclass
class PartitionWindow:
    max_in_flight: int = MAX_IN_FLIGHT_IDEMPOTENT
    unacked: list[Batch] = field(default_factory=list)  # in sequence order
    in_flight: deque[Batch] = field(default_factory=deque)  # sent, unanswered, in send order
    node: int | None = None  # the connection the batches in flight went to
    failed: bool = False  # a batch of the current flight was not acknowledged
    next_ordinal: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.max_in_flight <= MAX_IN_FLIGHT_IDEMPOTENT:
            raise ValueError(f"max.in.flight.requests.per.connection {self.max_in_flight}: "
                             f"1 to {MAX_IN_FLIGHT_IDEMPOTENT}")

    def add(self, base_sequence: int, count: int, data: bytes) -> Batch:
        batch = Batch(self.next_ordinal, base_sequence, count, data)
        self.next_ordinal += 1
        self.unacked.append(batch)
        return batch

    def next_to_send(self) -> Batch | None:
        """The batch to send now, or None: the flight failed and is still draining, or the
        window from the oldest unacknowledged batch is full."""
        if self.failed or not self.unacked or len(self.in_flight) >= self.max_in_flight:
            return None
        limit = self.unacked[0].ordinal + self.max_in_flight
        last = self.in_flight[-1].ordinal if self.in_flight else -1
        for batch in self.unacked:
            if batch.ordinal >= limit:
                return None
            if batch.ordinal > last:
                return batch
        return None

    def sent(self, batch: Batch, node: int) -> None:
        if batch is not self.next_to_send():
            raise ValueError(f"batch {batch.ordinal} is not the one to send")
        if self.in_flight and node != self.node:
            raise ValueError(f"batches in flight to {self.node}, not {node}")
        self.in_flight.append(batch)
        self.node = node

    def answered(self, batch: Batch, code: int) -> Outcome:
        """The answer to ``batch``, which must be the oldest in flight (answers come in order)."""
        if not self.in_flight or self.in_flight[0] is not batch:
            raise ValueError(f"batch {batch.ordinal} answered out of order")
        self.in_flight.popleft()
        if code in ACKNOWLEDGED:
            self.unacked.remove(batch)
            outcome = Outcome.ACKNOWLEDGED
        elif code in RETRIABLE_PRODUCE or (
                code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self.failed):
            self.failed = True
            outcome = Outcome.RETRY
        else:
            return Outcome.FATAL
        self._end_flight_when_drained()
        return outcome

    def lost(self) -> list[Batch]:
        """The connection of the batches in flight broke: their answers will never come (each
        may or may not be written). Returns them; all go again in the next flight."""
        gone = list(self.in_flight)
        self.in_flight.clear()
        if gone:
            self.failed = True
        self._end_flight_when_drained()
        return gone

    def _end_flight_when_drained(self) -> None:
        if not self.in_flight:
            self.node = None
            self.failed = False  # the next flight resends every unacknowledged batch, in order

    @property
    def idle(self) -> bool:
        return not self.unacked
