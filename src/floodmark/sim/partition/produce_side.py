"""The produce side of a simulated leader: a client's Produce and the coordinator's
WriteTxnMarker, routed to the broker's own produce path, as ``broker/handlers/data.py`` routes
them from the wire.

No rule lives here: the request-level refusal (``txn_verification.lacks_transactional_id``),
a transactional produce's way through KIP-890's verification in its producer's order
(``replication.txn_produce_gate.TxnProduceGate``), the append itself (``produce_as_leader``,
``write_marker_as_leader``: checks, idempotence, the purgatory) are the broker's. This sends the
questions and the answers over the simulated network, and remembers where the answer of each
produce parked in the core's purgatory goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from floodmark.constants import ACKS_NONE
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication import (
    Ask,
    CompleteProduce,
    ControllerSession,
    Effect,
    Partition,
    ProduceSettings,
    Step,
    TxnProduceGate,
    VerificationGuard,
    lacks_transactional_id,
    produce_as_leader,
    write_marker_as_leader,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.replica_view import LogMirror
from floodmark.sim.world import World
from floodmark.spec import marker_label
from floodmark.storage import Log, LogConfig, TopicPartition


class ProduceHost(Protocol):
    """What the produce side sees of its broker (``broker.SimBroker``)."""

    name: str
    world: World
    net: Network
    config: SimConfig
    tp: TopicPartition
    alive: bool
    incarnation: int
    partition: Partition | None
    log: Log | None
    mirror: LogMirror

    @property
    def session(self) -> ControllerSession: ...
    def steps_down(self) -> bool: ...
    def apply(self, effects: Iterable[Effect]) -> None: ...


class ProduceSide:
    """The broker's produce routing; it outlives incarnations (its ids never repeat, so a
    late answer to an earlier incarnation's question finds nothing), ``restart`` forgets what
    the process held."""

    def __init__(self, host: ProduceHost, on_append: Callable[[int], None]) -> None:
        """``on_append(leader_epoch)``: a client's records were appended as leader."""
        self.host = host
        self.on_append = on_append
        self.settings = ProduceSettings(
            max_message_bytes=LogConfig().max_message_bytes,
            unsafe_ack_duplicates_before_commit=host.config.unsafe_ack_duplicates_before_commit,
            kafka_aborted_batch_duplicates=host.config.kafka_aborted_batch_duplicates,
        )
        self.routes: dict[int, tuple[str, int, int]] = {}  # id -> (client, client id, acks)
        # Transactional produces on their way through KIP-890's verification, in their
        # producer's order: token -> (client, produce) until appended, refused or given up.
        self.gate: TxnProduceGate[int] = TxnProduceGate(self._partition_of)
        self.gated: dict[int, tuple[str, m.Produce]] = {}
        self.next_token = 0
        self.next_produce_id = 0

    def restart(self) -> None:
        self.routes = {}
        self.gate = TxnProduceGate(self._partition_of)
        self.gated = {}

    def _partition_of(self, _tp: tuple[str, int]) -> Partition | None:
        return self.host.partition

    def _send(self, to: str, message: object) -> None:
        self.host.net.send(self.host.name, to, message)

    def _record(self, line: str) -> None:
        self.host.world.record(f"{self.host.name} {line}")

    # -- Produce ----------------------------------------------------------------------------------
    def on_produce(self, src: str, msg: m.Produce) -> None:
        """The broker's own produce path (``replication.produce``): idempotence, the purgatory;
        with ``transaction_verification``, KIP-890 part 1 first, through the broker's
        ``TxnProduceGate`` (the producer's order, the coordinator asked, the append or the
        refusal). Before all of it, as the broker's handler: transactional records naming no
        transactional id are refused (``txn_verification.lacks_transactional_id``)."""
        host = self.host
        assert host.partition is not None
        batch = self._batch(msg)
        if lacks_transactional_id(msg.transactional_id or None, [batch]):
            self._record(f"refuses {msg.value}: transactional, no transactional id")
            if msg.acks != ACKS_NONE:
                self._send(src, m.ProduceReply(
                    msg.produce_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1))
            return
        verify = host.config.transaction_verification and bool(msg.transactional_id)
        if not (verify and host.partition.is_leader):
            self._produce(src, msg, verify, None)
            return
        self.next_token += 1
        token = self.next_token
        self.gated[token] = (src, msg)
        step = self.gate.arrive(token, {host.tp: batch})
        if step is None:
            self._record(f"holds {msg.value} of p{msg.producer_id} behind its earlier produce")
            return
        self._gate_steps([step])

    def _gate_steps(self, steps: list[Step[int]]) -> None:
        """Carry out the gate's steps in order: ask the coordinator (``VerifyTxn``; an answer
        that never comes is given up at the produce's timeout, unanswered, as the client's own
        timeout fires), or append (or refuse) and let the next ones in the order go."""
        host = self.host
        while steps:
            step = steps.pop(0)
            src, msg = self.gated[step.request]
            if isinstance(step, Ask):
                self._record(f"verifies p{msg.producer_id} e{msg.producer_epoch} {msg.value} "
                             f"with {m.TXN_COORDINATOR}")
                self._send(m.TXN_COORDINATOR, m.VerifyTxn(
                    step.request, msg.transactional_id, msg.producer_id, msg.producer_epoch))
                host.world.schedule(msg.timeout_ms, self._verification_expired,
                                    host.incarnation, step.request)
                continue
            refused = step.refused.get(host.tp)
            if refused is None:
                self._produce(src, msg, True, step.guards.get(host.tp))
            elif msg.acks != ACKS_NONE:
                self._send(src, m.ProduceReply(msg.produce_id, refused[0], -1))
            del self.gated[step.request]
            steps.extend(self.gate.done(step.request))

    def _verification_expired(self, incarnation: int, token: int) -> None:
        host = self.host
        if incarnation == host.incarnation and host.alive and self.gate.asking(token):
            del self.gated[token]
            self._gate_steps(self.gate.give_up(token))

    def on_verification(self, src: str, reply: m.TxnReply) -> None:
        tp = self.host.tp
        step = self.gate.answered(reply.request_id, {tp: reply.error})
        if step is None:
            return
        if reply.error is not ErrorCode.NONE:
            msg = self.gated[reply.request_id][1]
            self._record(f"verification of p{msg.producer_id} e{msg.producer_epoch} "
                         f"{msg.value}: {reply.error.name} -> {step.refused[tp][0].name}")
        self._gate_steps([step])

    def _produce(self, src: str, msg: m.Produce, verify: bool,
                 guard: VerificationGuard | None) -> None:
        host = self.host
        p, log = host.partition, host.log
        assert p is not None and log is not None
        now = host.world.now_ms
        self.next_produce_id += 1
        produce_id = self.next_produce_id
        result = produce_as_leader(
            p, log, self._batch(msg), acks=msg.acks, produce_id=produce_id, now_ms=now,
            timeout_ms=msg.timeout_ms, settings=self.settings,
            leadership_in_doubt=host.session.leadership_in_doubt(now, 0),
            stepped_down=host.steps_down(), verify_transactions=verify,
            verification_guard=guard)
        if result.appended:
            self.on_append(p.leader_epoch)
            host.mirror.append(p.leader_epoch, msg.value)
            self._record(f"append {result.base_offset}:e{p.leader_epoch}:{msg.value} "
                         f"acks={msg.acks}")
        elif result.duplicate:
            self._record(f"duplicate {msg.value} of offset {result.base_offset} "
                         f"({'parked' if result.parked else 'answered'})")
        if result.parked:
            self.routes[produce_id] = (src, msg.produce_id, msg.acks)
        host.apply(result.effects)
        if not result.parked and msg.acks != ACKS_NONE:
            assert result.answer is not None
            offset = result.base_offset if result.answer is ErrorCode.NONE else -1
            self._send(src, m.ProduceReply(msg.produce_id, result.answer, offset))

    def _batch(self, msg: m.Produce) -> bytes:
        """The record batch a produce carries (the sim's messages carry its fields)."""
        return simple_batch([msg.value.encode()], timestamp_ms=self.host.world.now_ms,
                            producer_id=msg.producer_id, producer_epoch=msg.producer_epoch,
                            base_sequence=msg.sequence, is_transactional=msg.transactional)

    # -- WriteTxnMarker ---------------------------------------------------------------------------
    def on_write_txn_marker(self, src: str, msg: m.WriteTxnMarker) -> None:
        """The broker's WriteTxnMarkers path (``replication.produce.write_marker_as_leader``):
        the control batch is answered once the HW passes it."""
        host = self.host
        p, log = host.partition, host.log
        assert p is not None and log is not None
        self.next_produce_id += 1
        produce_id = self.next_produce_id
        result = write_marker_as_leader(
            p, log, msg.producer_id, msg.producer_epoch, msg.committed, msg.coordinator_epoch,
            produce_id=produce_id, now_ms=host.world.now_ms, timeout_ms=msg.timeout_ms)
        label = marker_label(msg.producer_id, msg.committed)
        if result.appended:
            host.mirror.append(p.leader_epoch, label)
            self._record(f"append {result.base_offset}:e{p.leader_epoch}:{label}")
        if result.parked:
            self.routes[produce_id] = (src, msg.produce_id, -1)
        host.apply(result.effects)
        if not result.parked:
            assert result.answer is not None
            offset = result.base_offset if result.answer is ErrorCode.NONE else -1
            self._send(src, m.ProduceReply(msg.produce_id, result.answer, offset))

    # -- the core's answer to a parked produce (``ReplicaPorts.complete_produce``) ---------------
    def complete(self, done: CompleteProduce) -> None:
        route = self.routes.pop(done.produce_id, None)
        if route is not None and route[2] != ACKS_NONE:
            client, client_id, _acks = route
            self._send(client, m.ProduceReply(client_id, done.error, done.base_offset))
