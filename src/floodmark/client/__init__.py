"""A small blocking Kafka-protocol client (kio codecs) for floodmark's CLI, tests and tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.client.cluster import (
        RETRIABLE,
        BadAddress,
        ClusterClient,
        NoBrokerAvailable,
        Retriable,
        error_text,
        parse_bootstrap,
    )
    from floodmark.client.connection import (
        AsyncKafkaConnection,
        AuthenticationFailed,
        encode_request,
    )
    from floodmark.client.fetch import (
        FetchClient,
        FetchedPartition,
        FetchError,
        OffsetBounds,
        visible_records,
    )
    from floodmark.client.group import (
        COORDINATOR_MOVED,
        GroupError,
        GroupMember,
        decode_assignment,
        decode_subscription,
        encode_subscription,
    )
    from floodmark.client.producer import Header, IdempotentProducer
    from floodmark.client.replica_state import (
        epoch_cache,
        leader_views,
        read_replica_state,
        replica_states,
    )
    from floodmark.client.transactions import (
        API_WRITE_TXN_MARKERS,
        WRITE_TXN_MARKERS_VERSION,
        write_txn_markers_body,
    )

__all__ = [
    "API_WRITE_TXN_MARKERS",
    "COORDINATOR_MOVED",
    "RETRIABLE",
    "WRITE_TXN_MARKERS_VERSION",
    "AsyncKafkaConnection",
    "AuthenticationFailed",
    "BadAddress",
    "ClusterClient",
    "FetchClient",
    "FetchError",
    "FetchedPartition",
    "GroupError",
    "GroupMember",
    "Header",
    "IdempotentProducer",
    "KafkaConnection",
    "NoBrokerAvailable",
    "OffsetBounds",
    "RequestFailed",
    "Retriable",
    "decode_assignment",
    "decode_subscription",
    "encode_request",
    "encode_subscription",
    "epoch_cache",
    "error_text",
    "leader_views",
    "parse_bootstrap",
    "read_replica_state",
    "replica_states",
    "visible_records",
    "write_txn_markers_body",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
