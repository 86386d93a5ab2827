"""Simulated clients: a producer with unique values and a consumer that reads below the HW.

Both talk to brokers over the simulated network. Every outcome is recorded for the checker:
``acked_all`` (values an acks=all producer was told are written, with their offsets), acks=1
acknowledgements separately, and definite/indefinite failures.

The producer, when it runs on its own with acks=all, behaves like Kafka's idempotent producer
(librdkafka, the Java client), because real clients' retries are where real brokers lose data:

* a producer id, and a sequence number per record; at most ``max_in_flight`` (5) unacknowledged;
* each attempt has a request timeout (``request.timeout.ms``, also sent as the request's own
  timeout); a timeout or a retriable error refreshes metadata and resends **every**
  unacknowledged batch, in sequence order, with the **same** sequence (a dropped connection fails
  all its in-flight requests);
* metadata comes from a broker chosen at random, which answers from what it has applied: a
  leader cut off from the controller still names itself. Answers with an older leader epoch than
  one already known are ignored (KIP-320);
* OUT_OF_ORDER_SEQUENCE_NUMBER with an earlier batch still unacknowledged is retriable; without
  one (the broker lost what it acknowledged), or any other fatal error, and a batch older than
  ``delivery.timeout.ms``, fail every unacknowledged batch (indefinite outcome) and start again
  under a new producer id.

Scripted sends (``send``) and acks=1/0 producers keep the simple behaviour: one attempt, metadata
from the controller after an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from floodmark.constants import ACKS_ALL, ACKS_LEADER, ACKS_NONE, NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.broker import SimBroker
from floodmark.sim.world import World


class ClientHost(Protocol):
    """What the simulated clients see of their cluster (``cluster.Cluster``)."""

    world: World
    net: Network
    brokers: list[SimBroker]

    def name_of(self, broker_id: int) -> str: ...
    def on_acknowledged(self, outcome: ProduceOutcome) -> None: ...


@dataclass(slots=True)
class ProduceOutcome:
    value: str
    acks: int
    sent_ms: int
    error: ErrorCode | None = None  # None while unanswered
    offset: int = -1


# Errors after which an idempotent producer resends with the same sequence (Kafka's retriable
# produce errors); anything else not listed as fatal is retried the same way.
FATAL_PRODUCE_ERRORS = frozenset({
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.INVALID_RECORD,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.INVALID_REQUIRED_ACKS,
    ErrorCode.INVALID_TXN_STATE,
})
FIRST_PRODUCER_ID = 1000


@dataclass(slots=True)
class PendingBatch:
    """One unacknowledged record of the idempotent producer."""

    produce_id: int  # key of its ProduceOutcome
    value: str
    sequence: int
    first_sent_ms: int
    attempt: int = 0  # id of the latest attempt (replies to older attempts only count if NONE)


@dataclass(slots=True)
class Producer:
    cluster: ClientHost
    name: str = "producer"
    acks: int = ACKS_ALL
    interval_ms: int = 20
    max_in_flight: int = 5
    timeout_ms: int = 1000
    delivery_timeout_ms: int = 4000
    retry_backoff_ms: int = 20
    idempotent: bool = True  # with acks=all when running on its own
    running: bool = False
    leader: int = NO_LEADER
    leader_epoch: int = -1
    next_id: int = 0
    outcomes: dict[int, ProduceOutcome] = field(default_factory=dict)
    in_flight: set[int] = field(default_factory=set)
    producer_id: int = FIRST_PRODUCER_ID
    next_sequence: int = 0
    pending: dict[int, PendingBatch] = field(default_factory=dict)  # by sequence
    attempts: dict[int, int] = field(default_factory=dict)  # attempt id -> sequence
    retry_scheduled: bool = False
    metadata_request: int = 0  # id of the metadata request awaited (0: none)
    resets: int = 0

    def __post_init__(self) -> None:
        self.cluster.net.add_node(self.name, self.on_message)

    @property
    def _idempotent(self) -> bool:
        return self.idempotent and self.acks == ACKS_ALL

    def start(self) -> None:
        self.running = True
        if self._idempotent:
            self._refresh_metadata()
        else:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def _tick(self) -> None:
        if not self.running:
            return
        if self._idempotent:
            self._check_delivery_timeouts()
            if (
                self.leader != NO_LEADER
                and not self.retry_scheduled
                and len(self.pending) < self.max_in_flight
            ):
                self._send_new(f"v{self.next_id + 1}")
        elif self.leader != NO_LEADER and len(self.in_flight) < self.max_in_flight:
            self.send(f"v{self.next_id + 1}", self.acks)
        self.cluster.world.schedule(self.interval_ms, self._tick)

    # -- the idempotent producer ------------------------------------------------------------------
    def _send_new(self, value: str) -> None:
        world = self.cluster.world
        self.next_id += 1
        produce_id = self.next_id
        self.outcomes[produce_id] = ProduceOutcome(value, ACKS_ALL, world.now_ms)
        batch = PendingBatch(produce_id, value, self.next_sequence, world.now_ms)
        self.next_sequence += 1
        self.pending[batch.sequence] = batch
        self._attempt(batch)

    def _attempt(self, batch: PendingBatch) -> None:
        world = self.cluster.world
        self.next_id += 1
        batch.attempt = self.next_id
        self.attempts[batch.attempt] = batch.sequence
        target = self.cluster.name_of(self.leader)
        world.record(
            f"{self.name} send {batch.value} pid={self.producer_id} seq={batch.sequence} "
            f"to {target}"
        )
        self.cluster.net.send(
            self.name,
            target,
            m.Produce(
                batch.attempt,
                batch.value,
                ACKS_ALL,
                self.timeout_ms,
                producer_id=self.producer_id,
                producer_epoch=0,
                sequence=batch.sequence,
            ),
        )
        world.schedule(self.timeout_ms, self._attempt_timeout, batch.attempt)

    def _attempt_timeout(self, attempt: int) -> None:
        sequence = self.attempts.get(attempt)
        batch = self.pending.get(sequence) if sequence is not None else None
        if batch is not None and batch.attempt == attempt:
            self.cluster.world.record(f"{self.name} request timeout {batch.value}")
            self._schedule_retry()

    def _schedule_retry(self) -> None:
        """Refresh metadata, then resend every unacknowledged batch in sequence order."""
        if self.retry_scheduled:
            return
        self.retry_scheduled = True
        self.cluster.world.schedule(self.retry_backoff_ms, self._refresh_metadata)

    def _refresh_metadata(self) -> None:
        if not self.running and not self.pending:
            return
        world = self.cluster.world
        self.next_id += 1
        self.metadata_request = self.next_id
        broker = world.rng.choice(self.cluster.brokers).name
        self.cluster.net.send(self.name, broker, m.MetadataRequest())
        world.schedule(self.timeout_ms, self._metadata_timeout, self.metadata_request)

    def _metadata_timeout(self, request: int) -> None:
        if self.metadata_request == request:
            self._refresh_metadata()  # no answer: ask another broker

    def _on_metadata(self, message: m.Metadata) -> None:
        registration = message.registration
        if registration.leader_epoch < self.leader_epoch:
            return  # older than what we know (KIP-320): keep waiting for a current answer
        self.leader = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.metadata_request = 0
        if self.leader == NO_LEADER:
            self.cluster.world.schedule(self.retry_backoff_ms, self._refresh_metadata)
            return
        if self.retry_scheduled:
            self.retry_scheduled = False
            for sequence in sorted(self.pending):
                self._attempt(self.pending[sequence])

    def _on_idempotent_reply(self, message: m.ProduceReply) -> None:
        sequence = self.attempts.pop(message.produce_id, None)
        batch = self.pending.get(sequence) if sequence is not None else None
        if batch is None:
            return  # already settled (an older attempt answered first)
        world = self.cluster.world
        outcome = self.outcomes[batch.produce_id]
        if message.error is ErrorCode.NONE:
            del self.pending[batch.sequence]
            outcome.error = ErrorCode.NONE
            outcome.offset = message.base_offset
            world.record(f"{self.name} {batch.value} -> NONE offset={message.base_offset}")
            self.cluster.on_acknowledged(outcome)
            return
        if batch.attempt != message.produce_id:
            return  # an older attempt's error: the newer attempt decides
        world.record(f"{self.name} {batch.value} -> {message.error.name}")
        if message.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if any(s < batch.sequence for s in self.pending):
                self._schedule_retry()  # an earlier batch is still unacknowledged
            else:
                self._reset(message.error)  # the broker lost a sequence it had acknowledged
            return
        if message.error in FATAL_PRODUCE_ERRORS:
            self._reset(message.error)
            return
        self._schedule_retry()

    def _check_delivery_timeouts(self) -> None:
        now = self.cluster.world.now_ms
        if any(now - b.first_sent_ms >= self.delivery_timeout_ms for b in self.pending.values()):
            self._reset(ErrorCode.REQUEST_TIMED_OUT)

    def _reset(self, error: ErrorCode) -> None:
        """Fail every unacknowledged batch (they may or may not be written) and start over under
        a new producer id, as a Kafka producer does after a fatal error or an expired batch."""
        for batch in self.pending.values():
            self.outcomes[batch.produce_id].error = error
        self.cluster.world.record(
            f"{self.name} {error.name}: {len(self.pending)} batch(es) failed, new producer id"
        )
        self.pending.clear()
        self.attempts.clear()
        self.resets += 1
        self.producer_id = FIRST_PRODUCER_ID + self.resets
        self.next_sequence = 0
        self.retry_scheduled = False

    def send(self, value: str, acks: int, to: int | None = None, *, producer_id: int = -1,
             sequence: int = -1, transactional: bool = False, producer_epoch: int = 0,
             transactional_id: str = "") -> int:
        """Send one produce; returns its id. ``to`` overrides the believed leader. With
        ``producer_id``: that producer's batch (``producer_epoch``) at ``sequence``, in its
        transaction (``transactional_id``'s) if ``transactional``."""
        produce_id = self._track(value, acks)
        target = self.leader if to is None else to
        what = f" pid={producer_id} seq={sequence}" if producer_id >= 0 else ""
        what += f" epoch={producer_epoch}" if producer_id >= 0 and producer_epoch else ""
        what += " transactional" if transactional else ""
        self.cluster.world.record(
            f"{self.name} send {value} acks={acks}{what} to {self.cluster.name_of(target)}")
        self.cluster.net.send(
            self.name,
            self.cluster.name_of(target),
            m.Produce(produce_id, value, acks, self.timeout_ms, producer_id=producer_id,
                      producer_epoch=producer_epoch if producer_id >= 0 else -1,
                      sequence=sequence,
                      transactional=transactional, transactional_id=transactional_id),
        )
        return produce_id

    def _track(self, value: str, acks: int) -> int:
        self.next_id += 1
        produce_id = self.next_id
        world = self.cluster.world
        self.outcomes[produce_id] = ProduceOutcome(value, acks, world.now_ms)
        if acks != ACKS_NONE:
            self.in_flight.add(produce_id)
            world.schedule(self.timeout_ms + 50, self._expire, produce_id)
        return produce_id

    def _expire(self, produce_id: int) -> None:
        if produce_id in self.in_flight:
            self.in_flight.discard(produce_id)
            outcome = self.outcomes[produce_id]
            outcome.error = ErrorCode.REQUEST_TIMED_OUT  # indefinite: may or may not be written
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Metadata):
            if self._idempotent and self.running:
                self._on_metadata(message)
            else:
                self.leader = message.registration.leader
            return
        if not isinstance(message, m.ProduceReply):
            raise TypeError(f"producer: unexpected {message!r}")
        if message.produce_id in self.attempts:
            self._on_idempotent_reply(message)
            return
        if message.produce_id not in self.in_flight:
            return
        self.in_flight.discard(message.produce_id)
        outcome = self.outcomes[message.produce_id]
        outcome.error = message.error
        outcome.offset = message.base_offset
        self.cluster.world.record(
            f"{self.name} {outcome.value} -> {message.error.name} offset={message.base_offset}"
        )
        if message.error is ErrorCode.NONE:
            self.cluster.on_acknowledged(outcome)
        else:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def acknowledged(self, acks: int = ACKS_ALL) -> list[ProduceOutcome]:
        return [o for o in self.outcomes.values() if o.acks == acks and o.error is ErrorCode.NONE]


@dataclass(slots=True)
class Consumer:
    cluster: ClientHost
    name: str = "consumer"
    interval_ms: int = 30
    position: int = 0
    leader: int = NO_LEADER
    leader_epoch: int = -1
    running: bool = False
    next_id: int = 0
    inflight: int = 0
    seen: dict[int, tuple[int, str]] = field(default_factory=dict)  # offset -> (epoch, value)
    isolation_level: int = 0  # 1: read_committed
    rewind_on_new_leader: bool = False
    """Read the partition again from offset 0 whenever a new leader (epoch) is learned: a
    leader that restarted since it last led serves the whole log from what its restart rebuilt
    (the producer state, the LSO, the ``.txnindex``), and every read is checked."""
    rack: str | None = None
    """KIP-392: None, a client before Fetch v11 (reads from the leader); else its client.rack,
    and it reads from the replica the leader prefers (``preferred_read_replica``) until that
    replica answers an error or stops answering, then from the leader again (librdkafka's and
    the Java consumer's rule)."""
    preferred: int = NO_LEADER
    went_back: list[str] = field(default_factory=list)
    """Every time an answer moved the position backwards (outside ``rewind``): must stay empty."""

    def __post_init__(self) -> None:
        self.cluster.net.add_node(self.name, self.on_message)

    def start(self) -> None:
        self.running = True
        self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def _tick(self) -> None:
        if not self.running:
            return
        if self.leader != NO_LEADER and self.inflight == 0:
            self.fetch_once(self.leader, self.leader_epoch)
            self.cluster.world.schedule(400, self._timeout, self.next_id)
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def fetch_once(self, leader: int, leader_epoch: int) -> None:
        """One Fetch from ``position`` (scenario steps call it directly), to the preferred
        replica if the leader named one."""
        self.next_id += 1
        self.inflight = self.next_id
        target = self.preferred if self.preferred != NO_LEADER else leader
        self.cluster.net.send(
            self.name,
            self.cluster.name_of(target),
            m.ConsumerFetch(self.next_id, self.position, leader_epoch, self.isolation_level,
                            self.rack),
        )

    def _timeout(self, fetch_id: int) -> None:
        if self.inflight == fetch_id:
            self.inflight = 0
            self._back_to_leader("no answer")
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def request_timed_out(self) -> None:
        """Scenario step: the Fetch in flight got no answer within the request timeout."""
        self._timeout(self.inflight)

    def _back_to_leader(self, why: str) -> None:
        if self.preferred != NO_LEADER:
            self.cluster.world.record(f"{self.name} leaves replica "
                                      f"{self.cluster.name_of(self.preferred)} ({why})")
            self.preferred = NO_LEADER

    def rewind(self, why: str) -> None:
        """Read the partition again from offset 0 (an answer in flight no longer counts)."""
        self.position = 0
        self.inflight = 0
        self.cluster.world.record(f"{self.name} reads again from offset 0 ({why})")

    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Metadata):
            registration = message.registration
            if (self.rewind_on_new_leader and registration.leader != NO_LEADER
                    and registration.leader_epoch > self.leader_epoch):
                self.rewind(f"new leader {self.cluster.name_of(registration.leader)} "
                            f"e{registration.leader_epoch}")
            if registration.leader_epoch > self.leader_epoch:
                self._back_to_leader(f"new leader epoch {registration.leader_epoch}")
            self.leader = registration.leader
            self.leader_epoch = registration.leader_epoch
            return
        if not isinstance(message, m.ConsumerFetchReply):
            raise TypeError(f"consumer: unexpected {message!r}")
        if message.fetch_id != self.inflight:
            return
        self.inflight = 0
        before = self.position
        self._on_fetch_reply(src, message)
        if self.position < before:
            self.went_back.append(f"{before} -> {self.position} after {src}'s answer")

    def _on_fetch_reply(self, src: str, message: m.ConsumerFetchReply) -> None:
        if message.preferred_read_replica >= 0:
            self.preferred = message.preferred_read_replica
            self.cluster.world.record(f"{self.name} told to read from "
                                      f"{self.cluster.name_of(self.preferred)} by {src}")
            return
        if (message.error is not ErrorCode.NONE and self.preferred != NO_LEADER
                and src == self.cluster.name_of(self.preferred)):
            # Out of range included: a follower's answer is not the leader's (KIP-392)
            self._back_to_leader(message.error.name)
            if message.error is not ErrorCode.OFFSET_OUT_OF_RANGE:
                self.cluster.net.send(self.name, "controller", m.MetadataRequest())
            return
        if message.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            # Our position is past the leader's log: it was truncated under us (KIP-320 would
            # detect this by epoch); reset to the leader's end.
            self.cluster.world.record(
                f"{self.name} position {self.position} out of range, reset to {message.log_end_offset}"
            )
            self.position = message.log_end_offset
            return
        if message.error is not ErrorCode.NONE:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())
            return
        for offset, epoch, value in message.records:
            # read_committed answers skip offsets (markers, aborted records): never go back.
            if offset < self.position or (offset > self.position
                                          and self.isolation_level != 1):
                continue
            self.seen.setdefault(offset, (epoch, value))
            self.position = offset + 1
        if self.isolation_level == 1 and message.next_offset > self.position:
            self.position = message.next_offset


class TxnHost(ClientHost, Protocol):
    """What the transactional writer also needs (``cluster.Cluster``)."""

    def on_transactional_send(self, value: str, producer_id: int) -> None: ...
    def start_txn_coordinator(self) -> str: ...


# The coordinator's answers after which the writer asks again for the same step (Kafka's
# TransactionManager retries these); any other error means this producer is fenced or its
# transaction is gone: it starts over with InitProducerId (which aborts what was open).
RETRIABLE_TXN_ERRORS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})


@dataclass(slots=True)
class TxnWriter:
    """A transactional producer for the explorer, one transactional id, asking the transaction
    coordinator (the broker's core, ``txn_coordinator.SimTxnCoordinator``) for every step:
    InitProducerId, then per transaction AddPartitionsToTxn, one record written acks=all and
    retried with the same sequence until acknowledged, and EndTxn, COMMIT or ABORT at random.
    The coordinator decides, writes its log and the markers; the checker learns each decision
    when its Prepare record is in the coordinator's log, so a read_committed consumer can be
    checked against them. A fenced producer (a transaction past ``txn_timeout_ms`` is aborted
    by the coordinator, which bumps the epoch) starts over with InitProducerId.

    ``give_up_after_ms`` (0: never) makes it behave as librdkafka does when an application's
    flush times out and it aborts: a record unacknowledged that long (it may be in the log) is
    purged and the transaction aborted, and the next transaction's record takes the purged
    one's sequence under the same epoch (``rd_kafka_toppar_purge_queues``). An
    OUT_OF_ORDER_SEQUENCE_NUMBER answer is then abortable: it aborts and bumps its epoch with
    InitProducerId, as librdkafka does (KIP-360). Its acknowledged records are reported to the
    checker, so an acknowledgement pointing at somebody else's record is a lost write."""

    cluster: TxnHost
    name: str = "txn-writer"
    transactional_id: str = "txn-writer"
    interval_ms: int = 25
    timeout_ms: int = 1000
    coordinator_timeout_ms: int = 250  # the coordinator answers at once unless it is down
    txn_timeout_ms: int = 2000
    running: bool = False
    leader: int = NO_LEADER
    coordinator: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = 0
    phase: str = "idle"  # idle | init | add | write | end
    value: str = ""
    values: int = 0
    committed: bool = False
    attempt: int = 0
    transactions: int = 0
    give_up_after_ms: int = 0
    write_started_ms: int = 0
    reinit_after_end: bool = False

    def __post_init__(self) -> None:
        self.cluster.net.add_node(self.name, self.on_message)

    def start(self) -> None:
        self.running = True
        self.coordinator = self.cluster.start_txn_coordinator()
        self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def _tick(self) -> None:
        if not self.running:
            return
        if self.phase == "idle" and self.leader != NO_LEADER:
            self.phase = "init" if self.producer_id < 0 else "add"
            self._send()
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def _send(self) -> None:
        world = self.cluster.world
        self.attempt += 1
        message: Any
        if self.phase == "init":
            target = self.coordinator
            message = m.InitProducerId(self.attempt, self.transactional_id, self.txn_timeout_ms)
        elif self.phase == "add":
            target = self.coordinator
            message = m.AddPartitionsToTxn(self.attempt, self.transactional_id,
                                           self.producer_id, self.producer_epoch)
        elif self.phase == "end":
            target = self.coordinator
            message = m.EndTxn(self.attempt, self.transactional_id, self.producer_id,
                               self.producer_epoch, self.committed)
        else:
            if self.leader == NO_LEADER:
                world.schedule(self.interval_ms, self._retry, self.attempt)
                return
            target = self.cluster.name_of(self.leader)
            message = m.Produce(self.attempt, self.value, ACKS_ALL, self.timeout_ms,
                                producer_id=self.producer_id,
                                producer_epoch=self.producer_epoch, sequence=self.sequence,
                                transactional=True, transactional_id=self.transactional_id)
        world.record(f"{self.name} {self.phase} p{self.producer_id} e{self.producer_epoch} "
                     f"to {target}")
        self.cluster.net.send(self.name, target, message)
        timeout_ms = self.timeout_ms if self.phase == "write" else self.coordinator_timeout_ms
        world.schedule(timeout_ms, self._retry, self.attempt)

    def _retry(self, attempt: int) -> None:
        if attempt == self.attempt and self.phase != "idle":
            world = self.cluster.world
            if (self.phase == "write" and self.give_up_after_ms
                    and world.now_ms - self.write_started_ms >= self.give_up_after_ms):
                world.record(f"{self.name} gives up {self.value} (sequence {self.sequence}, "
                             f"p{self.producer_id} e{self.producer_epoch}): purged, aborting")
                self.committed = False
                self.phase = "end"
                self._again()
                return
            if self.phase == "write":
                self.cluster.net.send(self.name, "controller", m.MetadataRequest())
            self.cluster.world.schedule(self.interval_ms, self._resend, attempt)

    def _again(self) -> None:
        """Ask again for the same step (a new attempt: the failed one's timeout is void)."""
        self.attempt += 1
        self.cluster.world.schedule(self.interval_ms, self._resend, self.attempt)

    def _resend(self, attempt: int) -> None:
        """A resend scheduled at ``attempt``: void if anything was sent since, or the writer is
        idle (the late answer to the timed-out attempt arrived meanwhile and the transaction
        went on: resending then would write its record again, outside any transaction)."""
        if attempt == self.attempt and self.phase != "idle":
            self._send()

    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Metadata):
            self.leader = message.registration.leader
            return
        if isinstance(message, m.TxnReply):
            if message.request_id == self.attempt and self.phase in ("init", "add", "end"):
                self._on_coordinator_reply(message)
            return
        if not isinstance(message, m.ProduceReply):
            raise TypeError(f"{self.name}: unexpected {message!r}")
        if message.produce_id != self.attempt or self.phase != "write":
            return
        world = self.cluster.world
        if message.error is ErrorCode.NONE:
            self.cluster.on_acknowledged(ProduceOutcome(
                self.value, ACKS_ALL, self.write_started_ms, ErrorCode.NONE,
                message.base_offset))
            self.sequence += 1
            self.committed = world.rng.random() < 0.5
            self.phase = "end"
            self._send()
            return
        world.record(f"{self.name} write p{self.producer_id}: {message.error.name}")
        if message.error in FATAL_PRODUCE_ERRORS:
            self.committed = False  # the record may not be written: abort what is open
            self.phase = "end"
        elif message.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            self.committed = False  # librdkafka: abortable, and the epoch must be bumped
            self.reinit_after_end = True
            self.phase = "end"
        else:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self._again()

    def _on_coordinator_reply(self, reply: m.TxnReply) -> None:
        world = self.cluster.world
        if reply.error in RETRIABLE_TXN_ERRORS:
            self._again()
            return
        if reply.error is not ErrorCode.NONE:
            world.record(f"{self.name} {self.phase} p{self.producer_id}: {reply.error.name}; "
                         "InitProducerId again")
            self.phase = "init"
            self._again()
            return
        if self.phase == "init":
            self.producer_id, self.producer_epoch = reply.producer_id, reply.producer_epoch
            self.sequence = 0
            self.phase = "add"
            self._send()
        elif self.phase == "add":
            self.values += 1
            self.value = f"x{self.values}"
            self.cluster.on_transactional_send(self.value, self.producer_id)
            self.write_started_ms = world.now_ms
            self.phase = "write"
            self._send()
        else:
            world.record(f"{self.name} {'COMMIT' if self.committed else 'ABORT'} "
                         f"p{self.producer_id} e{self.producer_epoch} done")
            if (reply.producer_id, reply.producer_epoch) != (self.producer_id,
                                                             self.producer_epoch):
                # EndTxn v5 (KIP-890 part 2) answers the bumped epoch (or a new producer id):
                # the next transaction uses it, its sequences from 0
                self.producer_id, self.producer_epoch = reply.producer_id, reply.producer_epoch
                self.sequence = 0
            self.transactions += 1
            self.phase = "idle"
            if self.reinit_after_end:  # InitProducerId next: a new epoch, sequences from 0
                self.reinit_after_end = False
                self.producer_id = -1


__all__ = ["ACKS_ALL", "ACKS_LEADER", "ACKS_NONE", "Consumer", "ProduceOutcome", "Producer",
           "TxnWriter"]
