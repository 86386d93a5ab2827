"""The replication core, sans-I/O (time is passed in as ``now_ms``): a partition's leader and
follower rules (LEO, HW, ISR, leader epochs and truncation, the ELR), produce and fetch
decisions as typed values and effects, fencing, leases, and the transaction coordinator's core
(``transactions``). The broker, the simulator and the model checker all drive this code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.replication import fencing, isr, lease, txn_verification
    from floodmark.replication.controller_session import ControllerSession
    from floodmark.replication.driver import FollowerFetchAnswer, ReplicaDriver
    from floodmark.replication.effects import (
        Effect,
        EpochQuery,
        FetchResponse,
        FollowerAction,
        FollowerActionKind,
        FollowerFetch,
        HighWatermarkChanged,
        NextFetch,
        TruncateTo,
    )
    from floodmark.replication.election import (
        AlterPartitionRequest,
        ElectionKind,
        LeaderRecoveryState,
        PartitionRegistration,
        apply_alter_partition,
        build_change,
        bump_leader_epoch,
        validate_alter_partition,
    )
    from floodmark.replication.epochs import UNDEFINED_EPOCH, EpochCache, EpochEndOffset, EpochEntry
    from floodmark.replication.fetcher import APPEND_REJECTED, FetchLoop, FetchToSend
    from floodmark.replication.follower_waits import FollowerFetchWaits
    from floodmark.replication.log_validator import TimestampBounds, target_compression
    from floodmark.replication.modes import DEFAULT_TRUNCATION, Truncation
    from floodmark.replication.partition import (
        FollowerState,
        LeaderState,
        LogView,
        Partition,
        PartitionConfig,
    )
    from floodmark.replication.produce import (
        ProduceSettings,
        produce_as_leader,
        write_marker_as_leader,
    )
    from floodmark.replication.produce_order import OrderKey, ProduceOrder
    from floodmark.replication.producer_state import (
        AbortedTxn,
        ProducerEntry,
        ProducerStateTable,
        VerificationGuard,
        batch_metas,
    )
    from floodmark.replication.purgatory import CompleteProduce
    from floodmark.replication.reads import FetchIsolation, FetchRead, read_for_fetch
    from floodmark.replication.replica_selector import ReplicaSelection
    from floodmark.replication.schedule import PeriodicWork
    from floodmark.replication.transactions import log
    from floodmark.replication.transactions.coordinator import (
        ListFilter,
        Reply,
        SendMarkers,
        TxnCoordinator,
        TxnEffect,
    )
    from floodmark.replication.transactions.driver import MarkerPolicy, TxnDriver
    from floodmark.replication.transactions.state import TV_2, TxnMetadata, TxnPartition, TxnState
    from floodmark.replication.truncation import FetchValidation, truncation_point, validate_fetch
    from floodmark.replication.txn_verification import lacks_transactional_id, needs_verification

__all__ = [
    "APPEND_REJECTED",
    "DEFAULT_TRUNCATION",
    "TV_2",
    "UNDEFINED_EPOCH",
    "AbortedTxn",
    "AlterPartitionRequest",
    "CompleteProduce",
    "ControllerSession",
    "Effect",
    "ElectionKind",
    "EpochCache",
    "EpochEndOffset",
    "EpochEntry",
    "EpochQuery",
    "FetchIsolation",
    "FetchLoop",
    "FetchRead",
    "FetchResponse",
    "FetchToSend",
    "FetchValidation",
    "FollowerAction",
    "FollowerActionKind",
    "FollowerFetch",
    "FollowerFetchAnswer",
    "FollowerFetchWaits",
    "FollowerState",
    "HighWatermarkChanged",
    "LeaderRecoveryState",
    "LeaderState",
    "ListFilter",
    "LogView",
    "MarkerPolicy",
    "NextFetch",
    "OrderKey",
    "Partition",
    "PartitionConfig",
    "PartitionRegistration",
    "PeriodicWork",
    "ProduceOrder",
    "ProduceSettings",
    "ProducerEntry",
    "ProducerStateTable",
    "ReplicaDriver",
    "ReplicaSelection",
    "Reply",
    "SendMarkers",
    "TimestampBounds",
    "TruncateTo",
    "Truncation",
    "TxnCoordinator",
    "TxnDriver",
    "TxnEffect",
    "TxnMetadata",
    "TxnPartition",
    "TxnState",
    "VerificationGuard",
    "apply_alter_partition",
    "batch_metas",
    "build_change",
    "bump_leader_epoch",
    "fencing",
    "isr",
    "lacks_transactional_id",
    "lease",
    "log",
    "needs_verification",
    "produce_as_leader",
    "read_for_fetch",
    "target_compression",
    "truncation_point",
    "txn_verification",
    "validate_alter_partition",
    "validate_fetch",
    "write_marker_as_leader",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
