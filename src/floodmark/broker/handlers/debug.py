"""Debug reads (replica id -2, as Kafka's DEBUGGING_REPLICA_ID): any replica, leader or not,
answers ListOffsets and OffsetsForLeaderEpoch from its own log, so tools can show every
replica's LEO, HW, LSO and epoch cache (``floodmark cluster describe``). DescribeQuorum naming
data topics (``handlers.quorum`` answers ``__cluster_metadata``) is the same kind of read for a
partition's leader: its HW and what it knows of every replica (the remote LEOs of its followers,
ISR members as voters, the others as observers), for ``floodmark ui``. Other requests go to the
ordinary handlers."""

from __future__ import annotations

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.broker.handlers import data
from floodmark.constants import DEBUG_REPLICA_ID
from floodmark.errors import ErrorCode
from floodmark.replication import LeaderState
from floodmark.wire import RequestHeader

# A debug ListOffsets(latest) with this isolation level answers the replica's last stable offset
# (floodmark only: Kafka's levels are 0 and 1, and 1 answers the HW here, for the tools).
DEBUG_LAST_STABLE = 2


def list_offsets(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    if int(req.replica_id) == DEBUG_REPLICA_ID:
        return _list_offsets(ctx, req)
    return data.list_offsets(ctx, header, req, conn)


def offset_for_leader_epoch(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection) -> HandlerResult:
    # replica_id is in the request from v3.
    if header.api_version >= 3 and int(req.replica_id) == DEBUG_REPLICA_ID:
        return _epochs(ctx, req)
    return data.offset_for_leader_epoch(ctx, header, req, conn)


def _list_offsets(ctx: HandlerContext, body: WireRequest) -> WireResponse:
    isolation = int(getattr(body, "isolation_level", 0))
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            out: WireResponse = {"partition_index": int(p.partition_index),
                                   "error_code": 0, "old_style_offsets": [],
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1}
            ps = ctx.partitions.get((t.name, int(p.partition_index)))
            ts = int(p.timestamp)
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif ts == -1:  # latest: LEO, the HW with isolation_level=1, the LSO with 2
                out["offset"] = (ps.last_stable_offset if isolation == DEBUG_LAST_STABLE
                                 else ps.high_watermark if isolation == 1
                                 else ps.log_end_offset)
                out["leader_epoch"] = ps.log.epoch_cache.latest_epoch
            elif ts == -2:
                out["offset"] = ps.log_start_offset
                out["leader_epoch"] = ps.log.epoch_cache.epoch_for_offset(ps.log_start_offset)
            else:
                out["error_code"] = int(ErrorCode.INVALID_REQUEST)
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}

def _epochs(ctx: HandlerContext, body: WireRequest) -> WireResponse:
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            out: WireResponse = {"error_code": 0, "partition": int(p.partition),
                                   "leader_epoch": -1, "end_offset": -1}
            ps = ctx.partitions.get((t.topic, int(p.partition)))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                answer = ps.log.epoch_cache.end_offset_for(int(p.leader_epoch),
                                                           ps.log_end_offset)
                out["leader_epoch"], out["end_offset"] = answer.epoch, answer.end_offset
            parts.append(out)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}

def leader_view(ctx: HandlerContext, body: WireRequest) -> WireResponse:
    """DescribeQuorum for ordinary partitions: the leader's HW and, per replica, the LEO it
    has learned from that replica's fetches (its own LEO for itself; -1 = not yet known). A
    partition not answered has Kafka's unset values (0) and the error's message."""
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            out: WireResponse = {"partition_index": index, "error_code": 0,
                                 "error_message": "", "leader_id": 0, "leader_epoch": 0,
                                 "high_watermark": 0, "current_voters": [], "observers": []}
            ps = ctx.partitions.get((t.topic_name, index))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                out["error_message"] = "This server does not host this topic-partition."
            elif not isinstance(ps.core.role, LeaderState):
                out["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                out["error_message"] = "For requests intended only for the leader, this error " \
                    "indicates that the broker is not the current leader."
            else:
                core = ps.core
                isr = set(core.isr)
                out.update(leader_id=ctx.node_id, leader_epoch=core.leader_epoch,
                           high_watermark=ps.high_watermark)
                remote = core.remote_log_end_offsets()
                for replica in ps.core.role.replicas:
                    state = core.replica_states.get(replica)
                    entry = {"replica_id": replica,
                             "log_end_offset": (ps.log_end_offset if replica == ctx.node_id
                                                else remote.get(replica, -1)),
                             "last_fetch_timestamp": (state.last_fetch_time_ms
                                                      if state and state.last_fetch_time_ms
                                                      else -1),
                             "last_caught_up_timestamp": (
                                 state.last_caught_up_time_ms
                                 if state and state.last_caught_up_time_ms else -1)}
                    key = "current_voters" if replica in isr else "observers"
                    out[key].append(entry)
            parts.append(out)
        topics.append({"topic_name": t.topic_name, "partitions": parts})
    return {"error_code": 0, "error_message": "", "topics": topics, "nodes": []}
