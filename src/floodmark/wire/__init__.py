"""The Kafka wire protocol: request and response codecs (kio's generated schemas, plus
hand-written fast paths for the hot APIs in ``hot``), frames, API versions, and the
consumer-protocol payloads (subscriptions, assignments)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.wire.api_table import SERVED, SHARE_GROUP, SUPPORTED, ApiKey, accepted_range
    from floodmark.wire.codec import (
        RequestHeader,
        api_versions_error_response,
        build,
        decode_request,
        encode_response,
        ms,
        peek_client_id,
        peek_header,
        response_class,
    )
    from floodmark.wire.consumer_protocol import (
        PROTOCOL_TYPE,
        BadEmbeddedProtocol,
        decode_assignment,
        decode_subscription,
        encode_assignment,
        version_of,
    )
    from floodmark.wire.errors import ProtocolError
    from floodmark.wire.frames import BufferPool, FrameReader
    from floodmark.wire.hot import (
        FETCH_READ_VERSIONS,
        FetchPartitionResult,
        FetchTopicKey,
        HotDecodeError,
        NodeEndpoint,
        ProducePartition,
        ProducePartitionResult,
        ProduceRequest,
        ProduceTopicKey,
        ReplicaFetchPartition,
        encode_fetch_response,
        encode_produce_response,
        encode_replica_fetch_request,
        parse_fetch_response,
        parse_produce_request,
        response_size,
        with_throttle_time,
    )

__all__ = [
    "FETCH_READ_VERSIONS",
    "PROTOCOL_TYPE",
    "SERVED",
    "SHARE_GROUP",
    "SUPPORTED",
    "ApiKey",
    "BadEmbeddedProtocol",
    "BufferPool",
    "FetchPartitionResult",
    "FetchTopicKey",
    "FrameReader",
    "HotDecodeError",
    "NodeEndpoint",
    "ProducePartition",
    "ProducePartitionResult",
    "ProduceRequest",
    "ProduceTopicKey",
    "ProtocolError",
    "ReplicaFetchPartition",
    "RequestHeader",
    "accepted_range",
    "api_versions_error_response",
    "build",
    "decode_assignment",
    "decode_request",
    "decode_subscription",
    "encode_assignment",
    "encode_fetch_response",
    "encode_produce_response",
    "encode_replica_fetch_request",
    "encode_response",
    "ms",
    "parse_fetch_response",
    "parse_produce_request",
    "peek_client_id",
    "peek_header",
    "response_class",
    "response_size",
    "version_of",
    "with_throttle_time",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
