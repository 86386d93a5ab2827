"""DescribeQuorum (KIP-595, KIP-836; v2 KIP-853). For ``__cluster_metadata`` the controllers' Raft
leader answers (``Controller.describe_quorum``: Kafka's brokers forward the request to the active
controller): leader, epoch, high watermark, voters and observers with their log end offsets and
fetch times, and (v2) the voters' endpoints. As Kafka's ``KafkaRaftClient``, only a request
naming exactly that one partition is answered; any other request that names
``__cluster_metadata`` answers UNKNOWN_TOPIC_OR_PARTITION on every partition it names.

A request naming only data topics is floodmark's debug read of a partition leader's view
(``handlers.debug``, for ``floodmark ui``), where Kafka answers UNKNOWN_TOPIC_OR_PARTITION
(docs/wire.md)."""

from __future__ import annotations

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.broker.handlers import debug
from floodmark.controller import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    QuorumView,
    ReplicaProgress,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire import RequestHeader

UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


def describe_quorum(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                    conn: ClientConnection) -> HandlerResult:
    topics = list(req.topics)
    if not any(str(t.topic_name) == METADATA_TOPIC for t in topics):
        return debug.leader_view(ctx, req)
    if (len(topics) == 1 and len(topics[0].partitions) == 1
            and int(topics[0].partitions[0].partition_index) == METADATA_PARTITION):
        return _metadata_quorum(ctx)
    return _refused(req, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE)


async def _metadata_quorum(ctx: HandlerContext) -> WireResponse:
    try:
        view = await ctx.controller.describe_quorum()
    except KafkaError as exc:
        return {"error_code": 0, "error_message": "", "nodes": [], "topics": [
            {"topic_name": METADATA_TOPIC,
             "partitions": [partition_error(METADATA_PARTITION, exc.code, exc.message)]}]}
    return {"error_code": 0, "error_message": "", "topics": [
        {"topic_name": METADATA_TOPIC, "partitions": [_partition(view)]}],
        "nodes": [{"node_id": e.node_id, "listeners": [
            {"name": e.listener, "host": e.host, "port": e.port}]} for e in view.endpoints]}


def _partition(view: QuorumView) -> WireResponse:
    return {"partition_index": METADATA_PARTITION, "error_code": 0, "error_message": "",
            "leader_id": view.leader_id, "leader_epoch": view.leader_epoch,
            "high_watermark": view.high_watermark,
            "current_voters": [_replica(r) for r in view.voters],
            "observers": [_replica(r) for r in view.observers]}


def _replica(r: ReplicaProgress) -> WireResponse:
    return {"replica_id": r.replica_id, "replica_directory_id": r.directory_id,
            "log_end_offset": r.log_end_offset, "last_fetch_timestamp": r.last_fetch_timestamp_ms,
            "last_caught_up_timestamp": r.last_caught_up_timestamp_ms}


def partition_error(index: int, error: ErrorCode, message: str | None) -> WireResponse:
    """A partition DescribeQuorum does not answer, with Kafka's unset values (0, not -1)."""
    return {"partition_index": index, "error_code": int(error), "error_message": message,
            "leader_id": 0, "leader_epoch": 0, "high_watermark": 0, "current_voters": [],
            "observers": []}


def _refused(req: WireRequest, error: ErrorCode, message: str) -> WireResponse:
    return {"error_code": 0, "error_message": "", "nodes": [], "topics": [
        {"topic_name": str(t.topic_name),
         "partitions": [partition_error(int(p.partition_index), error, message)
                        for p in t.partitions]} for t in req.topics]}
