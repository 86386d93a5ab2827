"""Messages exchanged in the simulation (requests and responses, never stream bytes)."""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.errors import ErrorCode
from floodmark.replication import (
    AlterPartitionRequest,
    EpochEndOffset,
    EpochQuery,
    FetchResponse,
    FollowerFetch,
    PartitionRegistration,
)


@dataclass(frozen=True, slots=True)
class Metadata:
    """The controller's view pushed to brokers and clients."""

    registration: PartitionRegistration
    broker_epochs: tuple[tuple[int, int], ...]
    fenced: frozenset[int]


@dataclass(frozen=True, slots=True)
class Register:
    broker_id: int
    incarnation: int
    lost_data: bool  # an unclean shutdown that lost unflushed data (KIP-966 style report)
    sent_ms: int = 0  # echoed in the answer: the broker's session counts from it


@dataclass(frozen=True, slots=True)
class RegisterReply:
    broker_id: int
    incarnation: int
    broker_epoch: int
    metadata: Metadata
    sent_ms: int = 0


@dataclass(frozen=True, slots=True)
class Heartbeat:
    broker_id: int
    broker_epoch: int
    sent_ms: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    metadata: Metadata
    sent_ms: int = 0  # the heartbeat's (ControllerSession counts the session from it)


@dataclass(frozen=True, slots=True)
class AlterPartition:
    request: AlterPartitionRequest


@dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    request: AlterPartitionRequest
    error: ErrorCode
    registration: PartitionRegistration | None


@dataclass(frozen=True, slots=True)
class FetchRequestMsg:
    session: int
    fetch: FollowerFetch


@dataclass(frozen=True, slots=True)
class FetchReplyMsg:
    session: int
    response: FetchResponse
    records: bytes


@dataclass(frozen=True, slots=True)
class EpochQueryMsg:
    session: int
    query: EpochQuery


@dataclass(frozen=True, slots=True)
class EpochReplyMsg:
    session: int
    request_leader_epoch: int
    error: ErrorCode
    answer: EpochEndOffset


@dataclass(frozen=True, slots=True)
class Produce:
    """One record in one batch; an idempotent producer stamps (producer id, epoch, sequence)."""

    produce_id: int
    value: str
    acks: int
    timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1
    transactional: bool = False
    transactional_id: str = ""  # "": none named (transactional records are then refused)


TXN_COORDINATOR = "txn-coordinator"  # the transaction coordinator's node


@dataclass(frozen=True, slots=True)
class VerifyTxn:
    """A partition leader to the transaction coordinator (KIP-890 part 1, AddPartitionsToTxn
    ``verify_only``): is the partition in this producer's ongoing transaction? Answered with
    a ``TxnReply``."""

    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class WriteTxnMarker:
    """The transaction coordinator's WriteTxnMarkers for this partition (answered with a
    ``ProduceReply`` once the marker is replicated, as acks=all)."""

    produce_id: int
    producer_id: int
    producer_epoch: int
    committed: bool
    timeout_ms: int
    coordinator_epoch: int = 0


@dataclass(frozen=True, slots=True)
class InitProducerId:
    """A transactional client to the transaction coordinator (answered with ``TxnReply``)."""

    request_id: int
    transactional_id: str
    txn_timeout_ms: int


@dataclass(frozen=True, slots=True)
class AddPartitionsToTxn:
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class EndTxn:
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class TxnReply:
    request_id: int
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ProduceReply:
    produce_id: int
    error: ErrorCode
    base_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    fetch_id: int
    offset: int
    current_leader_epoch: int
    isolation_level: int = 0  # 1: read_committed (below the LSO, aborted records dropped)
    # KIP-392: None, a client without Fetch v11 (leaders only); else its client.rack ("" none),
    # and any replica may serve it
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerFetchReply:
    fetch_id: int
    error: ErrorCode
    records: tuple[tuple[int, int, str], ...]  # (offset, epoch, value)
    high_watermark: int
    log_end_offset: int
    last_stable_offset: int = -1
    next_offset: int = -1  # after the last batch read (records may skip offsets: markers...)
    preferred_read_replica: int = -1  # KIP-392: read from that broker instead


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    pass
