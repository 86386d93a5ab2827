"""The share coordinator's inter-broker APIs (KIP-932): ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary, asked by the
leaders of share partitions (``share_group.persister``), and InitializeShareGroupState, asked
by group coordinators for the partitions a share group newly subscribes to, of the leader of
the key's
``__share_group_state`` partition. The wire is translated to ``share_group.state_service``'s
calls, which decide and store (acks=all) before the answer; NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS per partition send the asker to the coordinator again.
Authorization: ClusterAction on the cluster (``authorization.CHECKS``), as Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.share_group.persister import state_of
from floodmark.broker.share_group.state_records import ShareKey
from floodmark.errors import ErrorCode
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

PartitionAnswer = Callable[[ShareKey, WireRequest], Awaitable[WireResponse]]


async def _each(req: WireRequest, answer: PartitionAnswer) -> WireResponse:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            key: ShareKey = (str(req.group_id), t.topic_id or uuid.UUID(int=0),
                             int(p.partition))
            parts.append({"partition": int(p.partition), "error_message": None,
                          **(await answer(key, p))})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def initialize_share_group_state(ctx: HandlerContext, header: RequestHeader,
                                 req: WireRequest, conn: ClientConnection) -> HandlerResult:
    async def answer(key: ShareKey, p: WireRequest) -> WireResponse:
        err, message = await ctx.share_state.initialize(key, int(p.state_epoch),
                                                        max(int(p.start_offset), -1))
        return {"error_code": int(err), "error_message": message}

    return _each(req, answer)


def read_share_group_state(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                           conn: ClientConnection) -> HandlerResult:
    async def answer(key: ShareKey, p: WireRequest) -> WireResponse:
        err, snap, message = await ctx.share_state.read(key, int(p.leader_epoch))
        out: WireResponse = {"error_code": int(err), "error_message": message,
                             "state_epoch": 0, "start_offset": -1, "state_batches": []}
        if snap is not None:
            s = snap.state
            out.update(state_epoch=s.state_epoch, start_offset=s.start_offset, state_batches=[
                {"first_offset": b.first_offset, "last_offset": b.last_offset,
                 "delivery_state": int(b.state), "delivery_count": b.delivery_count}
                for b in s.batches])
        return out

    return _each(req, answer)


def write_share_group_state(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection) -> HandlerResult:
    async def answer(key: ShareKey, p: WireRequest) -> WireResponse:
        start = int(p.start_offset)
        if start < 0:  # Kafka's "start offset not written": floodmark always writes it
            return {"error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": "the start offset must be written"}
        try:
            state = state_of(start, int(p.state_epoch), p.state_batches)
        except ValueError as exc:
            return {"error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": f"bad state batches: {exc}"}
        err, message = await ctx.share_state.write(key, state, int(p.leader_epoch))
        return {"error_code": int(err), "error_message": message}

    return _each(req, answer)


def delete_share_group_state(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                             conn: ClientConnection) -> HandlerResult:
    async def answer(key: ShareKey, p: WireRequest) -> WireResponse:
        return {"error_code": int(await ctx.share_state.delete(key))}

    return _each(req, answer)


def read_share_group_state_summary(ctx: HandlerContext, header: RequestHeader,
                                   req: WireRequest, conn: ClientConnection) -> HandlerResult:
    async def answer(key: ShareKey, p: WireRequest) -> WireResponse:
        err, snap = ctx.share_state.summary(key)
        return {"error_code": int(err), "state_epoch": 0 if snap is None else
                snap.state.state_epoch, "leader_epoch": -1 if snap is None else
                snap.leader_epoch, "start_offset": -1 if snap is None else
                snap.state.start_offset}

    return _each(req, answer)
