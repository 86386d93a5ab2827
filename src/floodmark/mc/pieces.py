"""The running code the checker drives, and the immutable values its states are made of.

Every transition of the model checker is carried out by the classes the broker and the simulator
run: ``replication.partition.Partition`` (the replica's decisions), ``replication.driver.
ReplicaDriver`` (applying them to a log), ``replication.produce.produce_as_leader`` (the produce
path) and ``controller.logic.ControllerLogic`` over a ``controller.image.MetadataImage`` (every
controller decision). A state holds their *values*: frozen dataclasses of the core
(``LeaderState``, ``FollowerState``, ``isr.ReplicaState``, ``PartitionRegistration``,
``BrokerRegistration``, ``AlterPartitionRequest``) and tuples; a transition rebuilds the live
objects from the values (``live_replica``, ``live_controller``), calls them, and reads the values
back (``replica_value``, ``controller_value``).

The one piece that is not the storage engine is ``ModelLog``: a minimal log behind the driver's
``ReplicaLog`` port (entries in memory, the real ``EpochCache``, real v2 batches on the wire), so
a state stays a small hashable tuple. The storage ``Log`` has its own tests; what the checker
checks is the replication protocol above it — except where a replica's producer state comes
from: a state carries none, and with transactions a live replica's is the one the storage
rebuilds when a broker opens that log (``mc.restart``: a real ``Log``, ``load_producer_state``).

Time is abstracted: every call gets ``NOW_MS`` and the replicas run with
``replica.lag.time.max.ms`` = -1, so "caught up within the lag time" never holds and a follower
counts as caught up only when its LEO equals the leader's — any amount of time may pass between
two steps. With time frozen the leader's ``last_fetch_leader_log_end_offset`` bookkeeping has no
effect (it only moves ``last_caught_up_time_ms`` between equal timestamps) and is dropped from the
state (``_follower_state``), which makes equal situations equal states.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from floodmark.controller import (
    BrokerRegistration,
    ControllerConfig,
    ControllerLogic,
    MetadataImage,
    registration_to_record,
)
from floodmark.records import (
    BatchHeader,
    ControlType,
    EndTxnMarker,
    build_marker_batch,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
    simple_batch,
)
from floodmark.replication import (
    AbortedTxn,
    AlterPartitionRequest,
    CompleteProduce,
    EpochCache,
    FollowerState,
    LeaderState,
    Partition,
    PartitionConfig,
    PartitionRegistration,
    ProducerStateTable,
    ReplicaDriver,
    Truncation,
)
from floodmark.replication import isr as isr_rules

NOW_MS = 0
LAG_MS = -1
"""``replica.lag.time.max.ms`` of the model's replicas: with ``NOW_MS`` fixed, never caught up
by time (see the module docstring)."""
TOPIC = "t"
PARTITION = 0

Entry = tuple[int, int]
"""A log entry: (leader epoch stamped into the batch, record id)."""

# -- record ids ---------------------------------------------------------------------------------
# A record id names one batch: a plain record (0, 1, 2...: an idempotence-free acks=1 write), a
# transactional record (record ``seq`` of transaction ``t``, written by producer
# ``TXN_PRODUCER_ID + t`` at epoch 0 with base sequence ``seq``) or a transaction marker (the
# COMMIT or ABORT control batch the coordinator has a leader write for transaction ``t``).
TXN_RECORD_BASE = 1000
TXN_PRODUCER_ID = 100
COORDINATOR_EPOCH = 0


def txn_record(txn: int, seq: int) -> int:
    return TXN_RECORD_BASE * (txn + 1) + seq


def marker_record(txn: int, committed: bool) -> int:
    return -(2 * txn + 2) - (0 if committed else 1)


class RecordKind(NamedTuple):
    txn: int | None
    """The transaction the record belongs to (None: a plain record)."""
    seq: int
    """A transactional record's sequence in its transaction (-1 for plain records, markers)."""
    marker: bool | None
    """A marker: True for COMMIT, False for ABORT; None for data."""


def record_kind(record: int) -> RecordKind:
    if record < 0:
        code = -record - 2
        return RecordKind(code // 2, -1, code % 2 == 0)
    if record >= TXN_RECORD_BASE:
        return RecordKind(record // TXN_RECORD_BASE - 1, record % TXN_RECORD_BASE, None)
    return RecordKind(None, -1, None)


def record_name(record: int) -> str:
    """``r3``, ``t0.1`` (transaction 0's second record), ``C0``/``A0`` (its COMMIT/ABORT)."""
    kind = record_kind(record)
    if kind.txn is None:
        return f"r{record}"
    if kind.marker is None:
        return f"t{kind.txn}.{kind.seq}"
    return f"{'C' if kind.marker else 'A'}{kind.txn}"


def has_transactions(log: Sequence[Entry]) -> bool:
    return any(r < 0 or r >= TXN_RECORD_BASE for _e, r in log)

CachePairs = tuple[tuple[int, int], ...]
"""An epoch cache as (epoch, start_offset) pairs, oldest first."""

Role = LeaderState | FollowerState | None

_QUIET = logging.getLogger("floodmark.mc.controller")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class ReplicaValue(NamedTuple):
    """One replica: its log and everything its ``Partition`` holds, as immutable values."""

    log: tuple[Entry, ...]
    cache: CachePairs
    hw: int
    role: Role
    followers: tuple[isr_rules.ReplicaState, ...]
    """Leader only: ``Partition.replica_states`` (its view of each follower), by replica id."""
    broker_epochs: tuple[tuple[int, int], ...]
    ineligible: frozenset[int]
    local_broker_epoch: int
    proposal: AlterPartitionRequest | None
    """The AlterPartition request in flight (``Partition.is_proposal_pending``), else None."""

    @property
    def leo(self) -> int:
        return len(self.log)

    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch if self.role is not None else -1

    def presumed_leader(self, me: int) -> int:
        """The leader this replica presumes: itself when it leads, -1 when it knows none."""
        if isinstance(self.role, LeaderState):
            return me
        if isinstance(self.role, FollowerState):
            return self.role.leader_id
        return -1

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, LeaderState)


class ControllerValue(NamedTuple):
    """The controller's image of the one partition and the brokers, as immutable values."""

    registration: PartitionRegistration
    brokers: tuple[BrokerRegistration, ...]

    @property
    def broker_epochs(self) -> tuple[tuple[int, int], ...]:
        return tuple((b.broker_id, b.broker_epoch) for b in self.brokers)

    @property
    def ineligible(self) -> frozenset[int]:
        return frozenset(b.broker_id for b in self.brokers if not b.acceptable)


# -- the log ---------------------------------------------------------------------------------
class Batches:
    """Real v2 batches for log entries, built once per (offset, epoch, record) per model: what a
    producer sends for record ``r`` (``produced``) and what a leader's log holds and serves at an
    offset, stamped with its epoch (``encode``).

    ``txn_producers`` (0: one producer per transaction): transaction ``t`` is written by
    producer ``TXN_PRODUCER_ID + t % txn_producers`` at producer epoch ``t // txn_producers``
    (``txn_producer``): a producer's transactions follow one another, each at a new epoch with
    sequences from 0 (KIP-890's epoch bump at every transaction's end)."""

    __slots__ = ("_bytes", "_entries", "_produced", "_records", "txn_producers")

    def __init__(self, txn_producers: int = 0) -> None:
        self._bytes: dict[tuple[int, int, int], bytes] = {}
        self._entries: dict[bytes, tuple[int, int, int]] = {}
        self._produced: dict[int, bytes] = {}
        self._records: dict[bytes, int] = {}
        self.txn_producers = txn_producers

    def txn_producer(self, txn: int) -> tuple[int, int]:
        """(producer id, producer epoch) of transaction ``txn``."""
        if self.txn_producers <= 0:
            return TXN_PRODUCER_ID + txn, 0
        return TXN_PRODUCER_ID + txn % self.txn_producers, txn // self.txn_producers

    def produced(self, record: int) -> bytes:
        data = self._produced.get(record)
        if data is None:
            kind = record_kind(record)
            if kind.txn is None:
                data = simple_batch([b"r%d" % record])
            elif kind.marker is None:
                producer_id, producer_epoch = self.txn_producer(kind.txn)
                data = simple_batch([b"t%d.%d" % (kind.txn, kind.seq)],
                                    producer_id=producer_id, producer_epoch=producer_epoch,
                                    base_sequence=kind.seq, is_transactional=True)
            else:
                # Byte for byte what ``write_marker_as_leader`` appends at NOW_MS.
                marker = EndTxnMarker(ControlType.COMMIT if kind.marker else ControlType.ABORT,
                                      COORDINATOR_EPOCH)
                producer_id, producer_epoch = self.txn_producer(kind.txn)
                data = build_marker_batch(producer_id, producer_epoch, marker,
                                          timestamp_ms=NOW_MS)
            self._produced[record] = data
            self._records[data] = record
        return data

    def record_of(self, batch: bytes) -> int:
        return self._records[batch]

    def encode(self, offset: int, epoch: int, record: int) -> bytes:
        key = (offset, epoch, record)
        data = self._bytes.get(key)
        if data is None:
            buffer = bytearray(self.produced(record))
            set_base_offset(buffer, 0, offset)
            set_partition_leader_epoch(buffer, 0, epoch)
            data = bytes(buffer)
            self._bytes[key] = data
            self._entries[data] = key
        return data

    def decode(self, records: bytes | bytearray | memoryview) -> list[tuple[int, int, int]]:
        out = []
        data = bytes(records)
        for position, header in iter_batches(data, validate=False):
            key = self._entries[data[position : position + header.size]]
            assert key[0] == header.base_offset and key[1] == header.partition_leader_epoch
            out.append(key)
        return out


@dataclass(frozen=True, slots=True)
class _Appended:
    first_offset: int
    last_offset: int
    log_append_time_ms: int = -1


@dataclass(eq=False, slots=True)
class ModelLog:
    """A log in memory behind the driver's ``ReplicaLog`` port and the produce path's
    ``LeaderLog``: entries, the real ``EpochCache``, real batches on the wire."""

    entries: list[Entry]
    epoch_cache: EpochCache
    batches: Batches = field(repr=False)

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    def assign_epoch(self, epoch: int, start_offset: int, *, durable: bool = True) -> None:
        self.epoch_cache.assign(epoch, start_offset)  # (the model's log is durable at once)

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.entries):
            del self.entries[offset:]
        self.epoch_cache.truncate_from_end(len(self.entries))

    def truncate_fully_and_start_at(self, offset: int) -> None:  # pragma: no cover - log start 0
        raise AssertionError("the model's logs always start at offset 0")

    def maybe_increment_log_start_offset(self, offset: int, high_watermark: int) -> bool:
        return False  # no retention, no DeleteRecords: the log start stays 0

    def apply_retention(self, now_ms: int, high_watermark: int) -> int:
        return 0

    def append_as_leader(
        self, records: bytes | memoryview, leader_epoch: int, now_ms: int
    ) -> _Appended:
        first = len(self.entries)
        data = bytes(records)
        for position, header in iter_batches(data, validate=False):
            record = self.batches.record_of(data[position : position + header.size])
            self.entries.append((leader_epoch, record))
        if leader_epoch >= 0:
            self.epoch_cache.assign(leader_epoch, first)
        return _Appended(first, len(self.entries) - 1)

    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int) -> object:
        for offset, epoch, record in self.batches.decode(records):
            assert offset == len(self.entries), "non-contiguous follower append"
            self.entries.append((epoch, record))
            if epoch >= 0:
                self.epoch_cache.assign(epoch, offset)
        return None

    def read(self, start: int, upto: int) -> bytes:
        return b"".join(
            self.batches.encode(o, *self.entries[o]) for o in range(start, min(upto, len(self.entries)))
        )

    def iter_whole_batches(self) -> Iterator[BatchHeader]:
        """The entries' batches in memory (a truncation's rebuild, ``ReplicaDriver.truncate_to``);
        a restart's rebuild reads a real ``Log`` instead (``mc.restart``)."""
        data = self.read(0, len(self.entries))
        return (header for _position, header in iter_batches(data, validate=False))

    def append_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None:
        pass  # the aborted transactions are a function of the entries (``live_replica``)

    def restore_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None:
        pass  # never called: ``load_producer_state`` runs on a real ``Log`` (``mc.restart``)


# -- the driver's ports ----------------------------------------------------------------------
@dataclass(slots=True)
class ModelPorts:
    """What the shell does with a decision: only the AlterPartition request is kept (the model
    delivers it as its own step); the rest is visible in the state itself."""

    proposals: list[AlterPartitionRequest] = field(default_factory=list)
    truncations: int = 0

    def high_watermark_changed(self, old: int, new: int) -> None:
        pass

    def complete_produce(self, done: CompleteProduce) -> None:
        pass

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        self.proposals.append(request)

    def wake_follower_fetches(self) -> None:
        pass

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        self.truncations += 1

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        pass

    # The model sets no flush or checkpoint interval (``partition_config``): never called.
    def flush_log(self) -> None:
        pass

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        pass


@dataclass(eq=False, slots=True)
class LiveReplica:
    """The running objects of one replica, built from a ``ReplicaValue``."""

    partition: Partition
    log: ModelLog
    driver: ReplicaDriver
    ports: ModelPorts
    proposal: AlterPartitionRequest | None


def partition_config(broker_id: int, truncation: Truncation, min_isr: int) -> PartitionConfig:
    return PartitionConfig(
        topic=TOPIC,
        partition=PARTITION,
        broker_id=broker_id,
        min_insync_replicas=min_isr,
        replica_lag_time_max_ms=LAG_MS,
        truncation=truncation,
    )


RebuiltProducers = Callable[[tuple[Entry, ...], int], ProducerStateTable]
"""(log, HW) -> the producer state a broker opening that log rebuilds (a fresh table)."""


def live_replica(value: ReplicaValue, config: PartitionConfig, batches: Batches,
                 rebuilt: RebuiltProducers | None = None) -> LiveReplica:
    """The running objects of ``value``. With transactions in the log the producer state is
    ``rebuilt(log, HW)`` (``mc.restart``: the storage's rebuild at open), else, without
    ``rebuilt``, ``ProducerStateTable.rebuild`` over the entries' batches in memory."""
    partition = Partition(
        config,
        high_watermark=value.hw,
        role=value.role,
        replica_states={s.replica_id: s for s in value.followers},
        broker_epochs=dict(value.broker_epochs),
        ineligible=value.ineligible,
        local_broker_epoch=value.local_broker_epoch,
    )
    log = ModelLog(list(value.log), EpochCache(value.cache), batches)
    if has_transactions(value.log):
        # The producer state is a function of the log and the HW (what the broker rebuilds at
        # open), so a state need not carry it: the real table, rebuilt by its own rule, through
        # the storage's restart path where the model gives one.
        if rebuilt is not None:
            partition.producers = rebuilt(value.log, value.hw)
        else:
            partition.producers.rebuild(log.iter_whole_batches(), value.hw)
    ports = ModelPorts()
    driver = ReplicaDriver(partition, log, ports)
    return LiveReplica(partition, log, driver, ports, value.proposal)


def _follower_state(state: isr_rules.ReplicaState) -> isr_rules.ReplicaState:
    if state.last_fetch_leader_log_end_offset == isr_rules.UNKNOWN_OFFSET:
        return state
    return replace(state, last_fetch_leader_log_end_offset=isr_rules.UNKNOWN_OFFSET)


def replica_value(live: LiveReplica) -> ReplicaValue:
    p = live.partition
    proposal = live.ports.proposals[-1] if live.ports.proposals else live.proposal
    if proposal is not None and not p.is_proposal_pending(proposal):
        proposal = None
    return ReplicaValue(
        log=tuple(live.log.entries),
        cache=tuple((e.epoch, e.start_offset) for e in live.log.epoch_cache.entries()),
        hw=p.high_watermark,
        role=p.role,
        followers=tuple(_follower_state(p.replica_states[r]) for r in sorted(p.replica_states)),
        broker_epochs=tuple(sorted(p.broker_epochs.items())),
        ineligible=p.ineligible,
        local_broker_epoch=p.local_broker_epoch,
        proposal=proposal,
    )


def empty_replica(broker_epoch: int) -> ReplicaValue:
    """A replica that has applied no metadata yet (a fresh broker)."""
    return ReplicaValue((), (), 0, None, (), (), frozenset(), broker_epoch, None)


# -- the controller --------------------------------------------------------------------------
def controller_config(config_min_isr: int) -> ControllerConfig:
    """The model's controller: Kafka's defaults, no automatic rebalancing (the model moves
    leadership itself), no unclean elections, no ELR."""
    return ControllerConfig(auto_leader_rebalance_enable=False, min_insync_replicas=config_min_isr)


def live_controller(value: ControllerValue, config: ControllerConfig) -> ControllerLogic:
    """A ``ControllerLogic`` whose image holds ``value`` (built by the image's own applier)."""
    image = MetadataImage()
    for broker in value.brokers:
        image.apply({"type": "register_broker", "broker_id": broker.broker_id,
                     "broker_epoch": broker.broker_epoch, "host": broker.host,
                     "port": broker.port, "incarnation": broker.incarnation})
        if broker.fenced:
            image.apply({"type": "fence_broker", "broker_id": broker.broker_id,
                         "broker_epoch": broker.broker_epoch})
    image.apply({"type": "topic", "name": TOPIC, "topic_id": _TOPIC_ID,
                 "configs": {"min.insync.replicas": config.min_insync_replicas}})
    image.apply(registration_to_record(TOPIC, PARTITION, value.registration))
    # Broker epochs are only compared (equal, older, newer): the next one must be newer than
    # every epoch in the state, which is all the offset of the metadata log is used for here.
    image.next_offset = max((b.broker_epoch for b in value.brokers), default=0) + 1
    image.cluster_id = "floodmark-mc"
    return ControllerLogic(image, config, logger=_QUIET)


_TOPIC_ID = "00000000-0000-4000-8000-000000000001"


def controller_value(logic: ControllerLogic) -> ControllerValue:
    reg = logic.image.partition(TOPIC, PARTITION)
    assert reg is not None
    brokers = tuple(logic.image.brokers[b] for b in sorted(logic.image.brokers))
    return ControllerValue(reg, brokers)


def initial_controller(replicas: int, config: ControllerConfig) -> ControllerValue:
    """Every broker registered, then the topic created: the first replica leads epoch 0 with
    every replica in the ISR (``ControllerLogic.register_broker`` and ``create_topic``)."""
    logic = ControllerLogic(MetadataImage(), config, logger=_QUIET)
    logic.bootstrap()
    for broker_id in range(replicas):
        logic.register_broker(broker_id, "127.0.0.1", 9092 + broker_id, f"{broker_id}-0", NOW_MS)
    logic.create_topic(TOPIC, 1, replicas, {"min.insync.replicas": config.min_insync_replicas},
                       assignments=[tuple(range(replicas))])
    return controller_value(logic)
